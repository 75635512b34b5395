//===- Checkpoint.cpp - per-rank checkpoint files -------------------------===//

#include "ppc/Runtime/Checkpoint.h"

#include "Boxes.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace ppc::runtime {

static const char kMagic[8] = {'P', 'P', 'C', 'C', 'K', 'P', 'T', '\0'};

static uint64_t fnv1a(const char *data, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t planHash(const ppc::planfile::Plan &plan) {
  // The plan has no map fields, so its serialization is deterministic.
  std::string bytes = plan.SerializeAsString();
  return fnv1a(bytes.data(), bytes.size());
}

std::string checkpointFileName(const std::string &dir, int rank) {
  return dir + "/rank-" + std::to_string(rank) + ".ckpt";
}

std::string makeDirectories(const std::string &dir) {
  std::string path;
  std::stringstream parts(dir);
  std::string part;
  if (!dir.empty() && dir[0] == '/')
    path = "/";
  while (std::getline(parts, part, '/')) {
    if (part.empty())
      continue;
    path += part + "/";
    if (mkdir(path.c_str(), 0777) != 0 && errno != EEXIST)
      return "cannot create directory '" + path + "': " + std::strerror(errno);
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return "'" + dir + "' is not a directory";
  return "";
}

/// Writes `bytes` to `path` and fsyncs it.
static std::string writeSynced(const std::string &path,
                               const std::string &bytes) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
  if (fd < 0)
    return "cannot open '" + path + "' for writing: " + std::strerror(errno);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      std::string err = std::strerror(errno);
      close(fd);
      return "cannot write '" + path + "': " + err;
    }
    done += static_cast<size_t>(n);
  }
  if (fsync(fd) != 0) {
    std::string err = std::strerror(errno);
    close(fd);
    return "cannot sync '" + path + "': " + err;
  }
  close(fd);
  return "";
}

std::string commitFile(const std::string &path) {
  std::string tmp = path + ".tmp";
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return "cannot rename '" + tmp + "' to '" + path +
           "': " + std::strerror(errno);
  // The rename itself is durable once the directory is synced.
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  int fd = open(dir.empty() ? "/" : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
  return "";
}

namespace {
class Writer {
public:
  template <typename T> void put(T v) {
    bytes.append(reinterpret_cast<const char *>(&v), sizeof(T));
  }
  void putFloats(const std::vector<float> &v) {
    bytes.append(reinterpret_cast<const char *>(v.data()),
                 v.size() * sizeof(float));
  }
  std::string bytes;
};

class Reader {
public:
  Reader(const std::string &bytes, size_t end) : bytes(bytes), end(end) {}
  template <typename T> bool get(T &v) {
    if (end - pos < sizeof(T))
      return false;
    std::memcpy(&v, bytes.data() + pos, sizeof(T));
    pos += sizeof(T);
    return true;
  }
  bool getFloats(std::vector<float> &v, int64_t n) {
    if (n < 0 || (end - pos) / sizeof(float) < static_cast<uint64_t>(n))
      return false;
    v.resize(n);
    std::memcpy(v.data(), bytes.data() + pos, n * sizeof(float));
    pos += n * sizeof(float);
    return true;
  }
  bool atEnd() const { return pos == end; }

private:
  const std::string &bytes;
  size_t end;
  size_t pos = 0;
};
} // namespace

std::string stageCheckpointFile(const std::string &path,
                                const Checkpoint &checkpoint) {
  Writer w;
  w.bytes.append(kMagic, sizeof(kMagic));
  w.put<uint32_t>(kCheckpointVersion);
  w.put<uint64_t>(checkpoint.planHash);
  w.put<int32_t>(checkpoint.rank);
  w.put<int32_t>(checkpoint.numRanks);
  w.put<int64_t>(checkpoint.steps);
  w.put<int32_t>(checkpoint.optimizerSlots);
  w.put<uint32_t>(static_cast<uint32_t>(checkpoint.buffers.size()));
  for (const CheckpointBuffer &b : checkpoint.buffers) {
    w.put<int32_t>(b.buffer);
    w.put<int32_t>(b.tensor);
    w.put<uint32_t>(static_cast<uint32_t>(b.lo.size()));
    for (int64_t v : b.lo)
      w.put<int64_t>(v);
    for (int64_t v : b.hi)
      w.put<int64_t>(v);
    w.putFloats(b.values);
    w.put<int64_t>(b.optimizer.steps);
    for (int s = 0; s < checkpoint.optimizerSlots; ++s)
      w.putFloats(static_cast<size_t>(s) < b.optimizer.slots.size()
                      ? b.optimizer.slots[s]
                      : std::vector<float>(b.values.size(), 0.0f));
  }
  w.put<uint64_t>(fnv1a(w.bytes.data(), w.bytes.size()));
  return writeSynced(path + ".tmp", w.bytes);
}

std::string writeCheckpointFile(const std::string &path,
                                const Checkpoint &checkpoint) {
  if (std::string err = stageCheckpointFile(path, checkpoint); !err.empty())
    return err;
  return commitFile(path);
}

std::string readCheckpointFile(const std::string &path,
                               Checkpoint &checkpoint) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return "cannot open checkpoint '" + path + "'";
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  auto corrupt = [&](const std::string &what) {
    return "checkpoint '" + path + "' is corrupt: " + what;
  };
  if (bytes.size() < sizeof(kMagic) + 4 ||
      std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    return "'" + path + "' is not a ppc checkpoint";
  uint32_t version;
  std::memcpy(&version, bytes.data() + sizeof(kMagic), 4);
  if (version != kCheckpointVersion)
    return "checkpoint '" + path + "' has format version " +
           std::to_string(version) + " but this ppc-run reads version " +
           std::to_string(kCheckpointVersion);
  if (bytes.size() < sizeof(kMagic) + 4 + 8)
    return corrupt("truncated");
  const size_t end = bytes.size() - 8;
  uint64_t checksum;
  std::memcpy(&checksum, bytes.data() + end, 8);
  if (checksum != fnv1a(bytes.data(), end))
    return corrupt("checksum mismatch (truncated or modified)");

  Reader r(bytes, end);
  char magic[sizeof(kMagic)];
  for (char &c : magic)
    r.get(c);
  r.get(version);
  uint32_t count = 0;
  if (!r.get(checkpoint.planHash) || !r.get(checkpoint.rank) ||
      !r.get(checkpoint.numRanks) || !r.get(checkpoint.steps) ||
      !r.get(checkpoint.optimizerSlots) || !r.get(count))
    return corrupt("truncated header");
  if (checkpoint.optimizerSlots < 0 || checkpoint.optimizerSlots > 2)
    return corrupt("bad optimizer slot count");
  checkpoint.buffers.clear();
  for (uint32_t i = 0; i < count; ++i) {
    CheckpointBuffer b;
    uint32_t dims = 0;
    if (!r.get(b.buffer) || !r.get(b.tensor) || !r.get(dims) || dims > 64)
      return corrupt("bad buffer record " + std::to_string(i));
    b.lo.resize(dims);
    b.hi.resize(dims);
    for (int64_t &v : b.lo)
      if (!r.get(v))
        return corrupt("truncated buffer record " + std::to_string(i));
    for (int64_t &v : b.hi)
      if (!r.get(v))
        return corrupt("truncated buffer record " + std::to_string(i));
    for (uint32_t d = 0; d < dims; ++d)
      if (b.hi[d] < b.lo[d])
        return corrupt("bad box in buffer record " + std::to_string(i));
    const int64_t n = boxVolume(b.lo, b.hi);
    if (!r.getFloats(b.values, n) || !r.get(b.optimizer.steps))
      return corrupt("truncated buffer record " + std::to_string(i));
    b.optimizer.slots.resize(checkpoint.optimizerSlots);
    for (auto &slot : b.optimizer.slots)
      if (!r.getFloats(slot, n))
        return corrupt("truncated buffer record " + std::to_string(i));
    checkpoint.buffers.push_back(std::move(b));
  }
  if (!r.atEnd())
    return corrupt("trailing bytes");
  return "";
}

static std::string hex(uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx",
                static_cast<unsigned long long>(v));
  return text;
}

std::string writeCompleteMarker(const std::string &dir,
                                const CheckpointMarker &marker) {
  std::string path = dir + "/COMPLETE";
  std::string text = "ppc checkpoint " + std::to_string(kCheckpointVersion) +
                     "\nsteps " + std::to_string(marker.steps) + "\nranks " +
                     std::to_string(marker.numRanks) + "\nplan " +
                     hex(marker.planHash) + "\n";
  if (std::string err = writeSynced(path + ".tmp", text); !err.empty())
    return err;
  return commitFile(path);
}

std::string readCompleteMarker(const std::string &dir,
                               CheckpointMarker &marker) {
  std::string path = dir + "/COMPLETE";
  std::ifstream in(path);
  if (!in)
    return "'" + dir +
           "' is not a finished checkpoint (no COMPLETE marker: the run that "
           "wrote it did not get to the end of writing it)";
  std::string word, hash;
  uint32_t version = 0;
  in >> word >> word >> version;
  if (version != kCheckpointVersion)
    return "'" + path + "' is not a ppc checkpoint marker of version " +
           std::to_string(kCheckpointVersion);
  in >> word >> marker.steps >> word >> marker.numRanks >> word >> hash;
  if (!in || hash.size() != 16)
    return "'" + path + "' is corrupt";
  marker.planHash = std::stoull(hash, nullptr, 16);
  return "";
}

} // namespace ppc::runtime
