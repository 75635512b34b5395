//===- Checkpoint.cpp - per-step checkpoint directories -------------------===//

#include "ppc/Runtime/Checkpoint.h"
#include "ppc/Runtime/PlanIO.h"

#include "ppc/Runtime/Boxes.h"

#include "absl/strings/numbers.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <tuple>
#include <unistd.h>

namespace ppc::runtime {

static const char kMagic[8] = {'P', 'P', 'C', 'C', 'K', 'P', 'T', '\0'};

uint64_t planHash(const ppc::planfile::Plan &plan) {
  // The plan has no map fields, so its serialization is deterministic.
  std::string bytes = plan.SerializeAsString();
  return fnv1a(bytes.data(), bytes.size());
}

std::string checkpointFileName(const std::string &dir, int rank) {
  return dir + "/rank-" + std::to_string(rank) + ".ckpt";
}

absl::Status makeDirectories(const std::string &dir) {
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
      return absl::InternalError("cannot create directory '" + path +
                                 "': " + std::strerror(errno));
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return absl::InvalidArgumentError("'" + dir + "' is not a directory");
  return absl::OkStatus();
}

CheckpointFaults &checkpointFaults() {
  static CheckpointFaults faults = [] {
    CheckpointFaults f;
    if (const char *at = std::getenv("PPC_CKPT_FAIL_AT"))
      f.failAt = std::atoll(at);
    if (const char *mode = std::getenv("PPC_CKPT_FAIL_MODE"))
      f.exit = std::string(mode) == "exit";
    if (const char *delay = std::getenv("PPC_CKPT_DELAY_MS"))
      f.delayMs = std::max<int64_t>(0, std::atoll(delay));
    return f;
  }();
  return faults;
}

/// Counts one filesystem step (`what` of `path`) and fails it if it is the
/// one to fail: an error, or the end of the process as if killed.
static absl::Status injectedFault(const char *what, const std::string &path) {
  CheckpointFaults &faults = checkpointFaults();
  if (++faults.count != faults.failAt)
    return absl::OkStatus();
  if (faults.exit) {
    std::fprintf(stderr,
                 "ppc-run: injected fault: killed at checkpoint filesystem "
                 "step %lld (%s '%s')\n",
                 static_cast<long long>(faults.count), what, path.c_str());
    std::fflush(stderr);
    _exit(kCheckpointFaultExitCode);
  }
  return absl::InvalidArgumentError(
      std::string("cannot ") + what + " '" + path +
      "': injected fault at checkpoint filesystem step " +
      std::to_string(faults.count));
}

/// Writes `bytes` to `path` and fsyncs it.
static absl::Status writeSynced(const std::string &path,
                                const std::string &bytes) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0666);
  if (fd < 0)
    return absl::InternalError("cannot open '" + path +
                               "' for writing: " + std::strerror(errno));
  auto fail = [&](absl::Status err) {
    close(fd);
    return err;
  };
  // An injected kill halfway leaves half a file, as a real one can.
  const size_t half = bytes.size() / 2;
  size_t done = 0;
  while (done < bytes.size()) {
    if (done >= half)
      if (absl::Status err = injectedFault("write", path); !err.ok())
        return fail(err);
    size_t end = done < half ? half : bytes.size();
    ssize_t n = write(fd, bytes.data() + done, end - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return fail(absl::InternalError("cannot write '" + path +
                                      "': " + std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
  if (absl::Status err = injectedFault("sync", path); !err.ok())
    return fail(err);
  if (fsync(fd) != 0)
    return fail(absl::InternalError("cannot sync '" + path +
                                    "': " + std::strerror(errno)));
  close(fd);
  return absl::OkStatus();
}

/// Makes the entries of directory `dir` (renames, removals) durable.
static absl::Status syncDirectory(const std::string &dir) {
  PPC_RETURN_IF_ERROR(injectedFault("sync directory", dir));
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    return absl::InternalError("cannot open directory '" + dir +
                               "': " + std::strerror(errno));
  int rc = fsync(fd);
  std::string err = std::strerror(errno);
  close(fd);
  return rc == 0 ? absl::OkStatus()
                 : absl::InternalError("cannot sync directory '" + dir +
                                       "': " + err);
}

static std::string parentDirectory(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

absl::Status commitFile(const std::string &path) {
  std::string tmp = path + ".tmp";
  PPC_RETURN_IF_ERROR(injectedFault("rename", tmp));
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return absl::InternalError("cannot rename '" + tmp + "' to '" + path +
                               "': " + std::strerror(errno));
  // The rename itself is durable once the directory is synced.
  return syncDirectory(parentDirectory(path));
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
  bool getString(std::string &s, uint32_t length) {
    if (end - pos < length)
      return false;
    s.assign(bytes.data() + pos, length);
    pos += length;
    return true;
  }
  bool atEnd() const { return pos == end; }

private:
  const std::string &bytes;
  size_t end;
  size_t pos = 0;
};
} // namespace

absl::Status stageCheckpointFile(const std::string &path,
                                 const Checkpoint &checkpoint) {
  Writer w;
  w.bytes.append(kMagic, sizeof(kMagic));
  w.put<uint32_t>(kCheckpointVersion);
  w.put<uint64_t>(checkpoint.planHash);
  w.put<int32_t>(checkpoint.rank);
  w.put<int32_t>(checkpoint.numRanks);
  w.put<int64_t>(checkpoint.steps);
  w.put<int32_t>(checkpoint.optimizerSlots);
  w.put<double>(checkpoint.lossScale);
  w.put<int64_t>(checkpoint.lossScaleGoodSteps);
  w.put<uint32_t>(static_cast<uint32_t>(checkpoint.buffers.size()));
  for (const CheckpointBuffer &b : checkpoint.buffers) {
    w.put<int32_t>(b.buffer);
    w.put<int32_t>(b.tensor);
    w.put<uint32_t>(static_cast<uint32_t>(b.tensorName.size()));
    w.bytes.append(b.tensorName);
    w.put<uint32_t>(static_cast<uint32_t>(b.lo.size()));
    // No state box: the whole box.
    const bool whole = b.stateLo.size() != b.lo.size();
    for (const std::vector<int64_t> *box :
         {&b.lo, &b.hi, whole ? &b.lo : &b.stateLo, whole ? &b.hi : &b.stateHi})
      for (int64_t v : *box)
        w.put<int64_t>(v);
    w.putFloats(b.values);
    w.put<int64_t>(b.optimizer.steps);
    // Each slot with its length: a ZeRO-sharded weight keeps state for its
    // shard only.
    for (int s = 0; s < checkpoint.optimizerSlots; ++s) {
      const std::vector<float> &slot =
          static_cast<size_t>(s) < b.optimizer.slots.size()
              ? b.optimizer.slots[s]
              : std::vector<float>(b.values.size(), 0.0f);
      w.put<int64_t>(static_cast<int64_t>(slot.size()));
      w.putFloats(slot);
    }
  }
  w.put<uint64_t>(fnv1a(w.bytes.data(), w.bytes.size()));
  return writeSynced(path + ".tmp", w.bytes);
}

namespace {

/// Copies the overlap of `from` (holding box [fromLo, fromHi), row-major)
/// with box [lo, hi) into `to` (holding [lo, hi)), marking what it wrote
/// in `covered` (when given).
void copyOverlap(const std::vector<float> &from, const Index &fromLo,
                 const Index &fromHi, std::vector<float> &to, const Index &lo,
                 const Index &hi, std::vector<char> *covered) {
  Index meetLo, meetHi;
  boxIntersect(fromLo, fromHi, lo, hi, meetLo, meetHi);
  forEachRun(meetLo, meetHi, fromLo, fromHi, lo, hi,
             [&](int64_t a, int64_t b, int64_t n) {
               std::copy_n(from.begin() + a, n, to.begin() + b);
               if (covered)
                 std::fill_n(covered->begin() + b, n, char(1));
             });
}

bool allCovered(const std::vector<char> &covered) {
  return std::find(covered.begin(), covered.end(), 0) == covered.end();
}

/// The values of box [lo, hi) of tensor `name` from its saved `pieces`:
/// from every piece that overlaps, then again from the pieces' state boxes,
/// where they are the float32 master's (elsewhere, under ZeRO with 16-bit
/// weights, perhaps the 16-bit copy's).
absl::StatusOr<std::vector<float>>
assembleBox(const std::vector<const CheckpointBuffer *> &pieces,
            const std::string &name, const Index &lo, const Index &hi) {
  const int64_t n = boxVolume(lo, hi);
  std::vector<float> values(n, 0.0f);
  std::vector<char> covered(n, 0);
  for (const CheckpointBuffer *piece : pieces)
    copyOverlap(piece->values, piece->lo, piece->hi, values, lo, hi, &covered);
  for (const CheckpointBuffer *piece : pieces) {
    Index meetLo, meetHi;
    boxIntersect(piece->stateLo, piece->stateHi, lo, hi, meetLo, meetHi);
    if (boxVolume(meetLo, meetHi) == 0)
      continue;
    std::vector<float> exact(boxVolume(piece->stateLo, piece->stateHi));
    copyOverlap(piece->values, piece->lo, piece->hi, exact, piece->stateLo,
                piece->stateHi, nullptr);
    copyOverlap(exact, piece->stateLo, piece->stateHi, values, lo, hi, nullptr);
  }
  if (!allCovered(covered))
    return absl::InvalidArgumentError(
        "the checkpoint holds no value for part of '" + name + "' " +
        boxString(lo, hi) + " (a checkpoint of another model?)");
  return values;
}

/// The saved pieces by tensor name; an error for files before format 4.
absl::StatusOr<std::map<std::string, std::vector<const CheckpointBuffer *>>>
piecesByName(const std::vector<Checkpoint> &saved) {
  std::map<std::string, std::vector<const CheckpointBuffer *>> pieces;
  for (const Checkpoint &c : saved)
    for (const CheckpointBuffer &b : c.buffers) {
      if (b.tensorName.empty())
        return absl::InvalidArgumentError(
            "the checkpoint was written by a ppc-run before format 4, whose "
            "pieces do not name their tensors: it resumes only under the "
            "plan that wrote it");
      pieces[b.tensorName].push_back(&b);
    }
  return pieces;
}

} // namespace

absl::StatusOr<Checkpoint>
reshardCheckpoint(const std::vector<Checkpoint> &saved,
                  const ppc::planfile::Plan &plan, int32_t rank) {
  using ppc::planfile::Instruction;
  if (saved.empty())
    return absl::InvalidArgumentError("the checkpoint has no rank files");
  if (rank < 0 || rank >= plan.programs_size())
    return absl::InvalidArgumentError("the plan has no program of rank " +
                                      std::to_string(rank));
  const int slots = numOptimizerSlots(plan.optimizer());
  for (const Checkpoint &c : saved)
    if (c.optimizerSlots != slots)
      return absl::InvalidArgumentError(
          "the checkpoint's optimizer state (" +
          std::to_string(c.optimizerSlots) +
          " slots a weight) does not fit the plan's optimizer (" +
          std::to_string(slots) + ")");
  PPC_ASSIGN_OR_RETURN(auto pieces, piecesByName(saved));
  // A saved weight this plan does not have means another model.
  std::map<std::string, int32_t> tensorOf;
  for (int32_t t = 0; t < plan.tensors_size(); ++t)
    if (isPersistentRole(plan.tensors(t)))
      tensorOf[plan.tensors(t).name()] = t;
  for (const auto &[name, list] : pieces) {
    auto it = tensorOf.find(name);
    if (it == tensorOf.end())
      return absl::InvalidArgumentError(
          "the checkpoint holds weight '" + name +
          "', which this plan does not have (a checkpoint of another model?)");
    const ppc::planfile::Tensor &t = plan.tensors(it->second);
    Index zero(t.shape_size(), 0), shape(t.shape().begin(), t.shape().end());
    for (const CheckpointBuffer *piece : list)
      if (!boxInside(piece->lo, piece->hi, zero, shape))
        return absl::InvalidArgumentError(
            "the checkpoint's piece " + boxString(piece->lo, piece->hi) +
            " of '" + name + "' lies outside its shape in this plan " +
            boxString(zero, shape));
  }

  // The boxes of the program's buffers, and the gradient box each weight is
  // updated over: where its optimizer state lies.
  const ppc::planfile::Program &program = plan.programs(rank);
  std::map<int32_t, std::pair<Index, Index>> boxOf;
  std::map<int32_t, int32_t> gradOf;
  for (const Instruction &instr : program.instructions()) {
    if (instr.has_alloc()) {
      const ppc::planfile::Buffer &b = instr.alloc().buffer();
      boxOf[b.id()] = {Index(b.box().lo().begin(), b.box().lo().end()),
                       Index(b.box().hi().begin(), b.box().hi().end())};
    } else if (instr.has_update()) {
      gradOf[instr.update().weight()] = instr.update().grad();
    }
  }

  Checkpoint out;
  out.planHash = planHash(plan);
  out.rank = rank;
  out.numRanks = plan.programs_size();
  out.steps = saved.front().steps;
  out.optimizerSlots = slots;
  out.lossScale = saved.front().lossScale;
  out.lossScaleGoodSteps = saved.front().lossScaleGoodSteps;
  std::set<int32_t> done;
  for (const Instruction &instr : program.instructions()) {
    if (!instr.has_alloc() || !isPersistentBuffer(plan, instr.alloc()) ||
        !done.insert(instr.alloc().buffer().id()).second)
      continue;
    const ppc::planfile::Buffer &buffer = instr.alloc().buffer();
    const ppc::planfile::Tensor &t = plan.tensors(buffer.tensor());
    CheckpointBuffer b;
    b.buffer = buffer.id();
    b.tensor = buffer.tensor();
    b.tensorName = t.name();
    std::tie(b.lo, b.hi) = boxOf.at(buffer.id());
    const std::vector<const CheckpointBuffer *> &list = pieces[t.name()];
    PPC_ASSIGN_OR_RETURN(b.values, assembleBox(list, t.name(), b.lo, b.hi));

    // The optimizer state of the box this buffer's update covers, from the
    // saved states over it; none before the first update.
    b.stateLo = b.lo;
    b.stateHi = b.hi;
    std::vector<const CheckpointBuffer *> stepped;
    for (const CheckpointBuffer *piece : list)
      if (piece->optimizer.steps > 0)
        stepped.push_back(piece);
    for (const CheckpointBuffer *piece : stepped)
      if (piece->optimizer.steps != stepped.front()->optimizer.steps)
        return absl::InvalidArgumentError(
            "the checkpoint's pieces of '" + t.name() + "' were updated " +
            std::to_string(piece->optimizer.steps) + " and " +
            std::to_string(stepped.front()->optimizer.steps) + " times");
    auto grad = gradOf.find(buffer.id());
    if (grad != gradOf.end()) {
      auto gradBox = boxOf.find(grad->second);
      if (gradBox == boxOf.end())
        return absl::InvalidArgumentError(
            "the update of '" + t.name() + "' reads gradient buffer " +
            std::to_string(grad->second) + ", which is never allocated");
      std::tie(b.stateLo, b.stateHi) = gradBox->second;
    }
    if (grad != gradOf.end() && !stepped.empty()) {
      b.optimizer.steps = stepped.front()->optimizer.steps;
      const int64_t m = boxVolume(b.stateLo, b.stateHi);
      for (int s = 0; s < slots; ++s) {
        std::vector<float> slot(m, 0.0f);
        std::vector<char> stateCovered(m, 0);
        for (const CheckpointBuffer *piece : stepped) {
          if (static_cast<int64_t>(piece->optimizer.slots[s].size()) !=
              boxVolume(piece->stateLo, piece->stateHi))
            return absl::InvalidArgumentError(
                "the checkpoint's optimizer state of '" + t.name() +
                "' does not fill its state box " +
                boxString(piece->stateLo, piece->stateHi));
          copyOverlap(piece->optimizer.slots[s], piece->stateLo, piece->stateHi,
                      slot, b.stateLo, b.stateHi, &stateCovered);
        }
        if (!allCovered(stateCovered))
          return absl::InvalidArgumentError(
              "the checkpoint holds no optimizer state for part of '" +
              t.name() + "' " + boxString(b.stateLo, b.stateHi));
        b.optimizer.slots.push_back(std::move(slot));
      }
    }
    out.buffers.push_back(std::move(b));
  }
  return out;
}

absl::StatusOr<Checkpoint> readCheckpointRank(const std::string &dir,
                                              const CheckpointMarker &marker,
                                              int32_t rank) {
  const std::string path = checkpointFileName(dir, rank);
  Checkpoint checkpoint;
  PPC_RETURN_IF_ERROR(readCheckpointFile(path, checkpoint));
  if (checkpoint.planHash != marker.planHash || checkpoint.rank != rank ||
      checkpoint.numRanks != marker.numRanks)
    return absl::InvalidArgumentError(
        "'" + path + "' is not the checkpoint of rank " + std::to_string(rank) +
        " that '" + dir + "/COMPLETE' names");
  if (checkpoint.steps != marker.steps)
    return absl::InvalidArgumentError(
        "'" + path + "' is of step " + std::to_string(checkpoint.steps) +
        " but '" + dir + "/COMPLETE' says step " +
        std::to_string(marker.steps) +
        " (a run was killed while writing the checkpoint)");
  return checkpoint;
}

absl::StatusOr<std::vector<Checkpoint>>
readCheckpointRanks(const std::string &dir, const CheckpointMarker &marker) {
  std::vector<Checkpoint> saved;
  for (int32_t r = 0; r < marker.numRanks; ++r) {
    PPC_ASSIGN_OR_RETURN(Checkpoint checkpoint,
                         readCheckpointRank(dir, marker, r));
    saved.push_back(std::move(checkpoint));
  }
  return saved;
}

absl::StatusOr<std::map<std::string, SavedTensor>>
wholeTensors(const std::vector<Checkpoint> &saved) {
  PPC_ASSIGN_OR_RETURN(auto pieces, piecesByName(saved));
  std::map<std::string, SavedTensor> tensors;
  for (const auto &[name, list] : pieces) {
    // The pieces tile the tensor from the origin: its shape is their
    // farthest corner.
    SavedTensor &t = tensors[name];
    t.shape.assign(list.front()->hi.size(), 0);
    for (const CheckpointBuffer *piece : list) {
      if (piece->hi.size() != t.shape.size())
        return absl::InvalidArgumentError("the checkpoint's pieces of '" +
                                          name + "' differ in rank");
      for (size_t d = 0; d < t.shape.size(); ++d)
        t.shape[d] = std::max(t.shape[d], piece->hi[d]);
    }
    PPC_ASSIGN_OR_RETURN(
        t.values, assembleBox(list, name, Index(t.shape.size(), 0), t.shape));
  }
  return tensors;
}

absl::Status writeCheckpointFile(const std::string &path,
                                 const Checkpoint &checkpoint) {
  PPC_RETURN_IF_ERROR(stageCheckpointFile(path, checkpoint));
  return commitFile(path);
}

absl::Status readCheckpointFile(const std::string &path,
                                Checkpoint &checkpoint) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::NotFoundError("cannot open checkpoint '" + path + "'");
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  auto corrupt = [&](const std::string &what) {
    return absl::DataLossError("checkpoint '" + path + "' is corrupt: " + what);
  };
  if (bytes.size() < sizeof(kMagic) + 4 ||
      std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    return absl::InvalidArgumentError("'" + path + "' is not a ppc checkpoint");
  uint32_t version;
  std::memcpy(&version, bytes.data() + sizeof(kMagic), 4);
  if (version != kCheckpointVersion && version != 2 && version != 3)
    return absl::InvalidArgumentError(
        "checkpoint '" + path + "' has format version " +
        std::to_string(version) + " but this ppc-run reads version " +
        std::to_string(kCheckpointVersion));
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
      !r.get(checkpoint.optimizerSlots) ||
      (version >= 3 && (!r.get(checkpoint.lossScale) ||
                        !r.get(checkpoint.lossScaleGoodSteps))) ||
      !r.get(count))
    return corrupt("truncated header");
  if (!(checkpoint.lossScale >= 0) || !std::isfinite(checkpoint.lossScale))
    return corrupt("bad loss scale");
  if (checkpoint.optimizerSlots < 0 || checkpoint.optimizerSlots > 2)
    return corrupt("bad optimizer slot count");
  checkpoint.buffers.clear();
  for (uint32_t i = 0; i < count; ++i) {
    CheckpointBuffer b;
    uint32_t dims = 0;
    if (!r.get(b.buffer) || !r.get(b.tensor))
      return corrupt("bad buffer record " + std::to_string(i));
    if (version >= 4) {
      uint32_t length = 0;
      if (!r.get(length) || !r.getString(b.tensorName, length))
        return corrupt("bad tensor name in buffer record " + std::to_string(i));
    }
    if (!r.get(dims) || dims > 64)
      return corrupt("bad buffer record " + std::to_string(i));
    std::vector<std::vector<int64_t> *> boxes = {&b.lo, &b.hi};
    if (version >= 4)
      boxes.insert(boxes.end(), {&b.stateLo, &b.stateHi});
    for (std::vector<int64_t> *box : boxes) {
      box->resize(dims);
      for (int64_t &v : *box)
        if (!r.get(v))
          return corrupt("truncated buffer record " + std::to_string(i));
    }
    for (uint32_t d = 0; d < dims; ++d)
      if (b.hi[d] < b.lo[d])
        return corrupt("bad box in buffer record " + std::to_string(i));
    if (version >= 4 && !boxInside(b.stateLo, b.stateHi, b.lo, b.hi))
      return corrupt("state box outside the buffer's box in buffer record " +
                     std::to_string(i));
    const int64_t n = boxVolume(b.lo, b.hi);
    if (!r.getFloats(b.values, n) || !r.get(b.optimizer.steps))
      return corrupt("truncated buffer record " + std::to_string(i));
    b.optimizer.slots.resize(checkpoint.optimizerSlots);
    for (auto &slot : b.optimizer.slots) {
      int64_t size = -1;
      if (!r.get(size))
        return corrupt("truncated buffer record " + std::to_string(i));
      if (size < 0 || size > n)
        return corrupt("bad optimizer state size in buffer record " +
                       std::to_string(i));
      if (!r.getFloats(slot, size))
        return corrupt("truncated buffer record " + std::to_string(i));
    }
    checkpoint.buffers.push_back(std::move(b));
  }
  if (!r.atEnd())
    return corrupt("trailing bytes");
  return absl::OkStatus();
}

std::string hashText(uint64_t hash) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx",
                static_cast<unsigned long long>(hash));
  return text;
}

absl::Status writeCompleteMarker(const std::string &dir,
                                 const CheckpointMarker &marker) {
  std::string path = dir + "/COMPLETE";
  std::string text =
      "ppc checkpoint " + std::to_string(kCheckpointLayoutVersion) +
      "\nsteps " + std::to_string(marker.steps) + "\nranks " +
      std::to_string(marker.numRanks) + "\nplan " + hashText(marker.planHash) +
      "\n" + (marker.run.empty() ? "" : "run " + marker.run + "\n");
  PPC_RETURN_IF_ERROR(writeSynced(path + ".tmp", text));
  return commitFile(path);
}

absl::Status readCompleteMarker(const std::string &dir,
                                CheckpointMarker &marker) {
  std::string path = dir + "/COMPLETE";
  std::ifstream in(path);
  if (!in)
    return absl::InvalidArgumentError(
        "'" + dir +
        "' is not a finished checkpoint (no COMPLETE marker: the run that "
        "wrote it did not get to the end of writing it)");
  std::string word, hash;
  uint32_t version = 0;
  in >> word >> word >> version;
  if (version != kCheckpointLayoutVersion)
    return absl::InvalidArgumentError(
        "'" + path + "' is not a ppc checkpoint marker of version " +
        std::to_string(kCheckpointLayoutVersion));
  in >> word >> marker.steps >> word >> marker.numRanks >> word >> hash;
  if (!in || hash.size() != 16 || !absl::SimpleHexAtoi(hash, &marker.planHash))
    return absl::InvalidArgumentError("'" + path + "' is corrupt");
  // A bound on what a resharded resume reads: as many files as ppc plans
  // devices at most.
  constexpr int32_t kMaxCheckpointRanks = 1 << 16;
  if (marker.numRanks < 1 || marker.numRanks > kMaxCheckpointRanks)
    return absl::DataLossError("'" + path + "' says " +
                               std::to_string(marker.numRanks) + " ranks");
  // The run line, when the writer had identities.
  marker.run.clear();
  std::string line;
  std::getline(in, line); // the rest of the plan's line
  while (std::getline(in, line))
    if (line.rfind("run ", 0) == 0)
      marker.run = line.substr(4);
  return absl::OkStatus();
}

absl::Status CheckpointLock::acquire(const std::string &dir) {
  release();
  PPC_RETURN_IF_ERROR(makeDirectories(dir));
  std::string path = dir + "/LOCK";
  int handle = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (handle < 0)
    return absl::InternalError("cannot open '" + path +
                               "': " + std::strerror(errno));
  if (flock(handle, LOCK_EX | LOCK_NB) != 0) {
    int error = errno;
    std::string holder;
    if (error == EWOULDBLOCK) {
      char text[512] = {0};
      ssize_t n = pread(handle, text, sizeof(text) - 1, 0);
      holder = n > 0 ? std::string(text, static_cast<size_t>(n)) : "";
      while (!holder.empty() && holder.back() == '\n')
        holder.pop_back();
    }
    close(handle);
    if (error != EWOULDBLOCK)
      return absl::InternalError("cannot lock '" + path +
                                 "': " + std::strerror(error));
    return absl::FailedPreconditionError(
        "checkpoint directory '" + dir + "' is in use by another run" +
        (holder.empty() ? std::string() : " (" + holder + ")") +
        ": give each job its own directory");
  }
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  std::time_t now = std::time(nullptr);
  char since[32] = {0};
  std::strftime(since, sizeof(since), "%Y-%m-%d %H:%M:%S",
                std::localtime(&now));
  std::string holder = "pid " + std::to_string(getpid()) + " on " + host +
                       ", since " + since + "\n";
  if (ftruncate(handle, 0) != 0 ||
      pwrite(handle, holder.data(), holder.size(), 0) !=
          static_cast<ssize_t>(holder.size())) {
    // The lock holds without the note: only the message loses its holder.
  }
  fd = handle;
  return absl::OkStatus();
}

void CheckpointLock::release() {
  if (fd < 0)
    return;
  flock(fd, LOCK_UN);
  close(fd);
  fd = -1;
}

std::string stepDirectoryName(int64_t steps, bool alternate) {
  char name[48];
  std::snprintf(name, sizeof(name), "step-%09lld%s",
                static_cast<long long>(steps), alternate ? "-2" : "");
  return name;
}

/// The step of a step directory's name; -1 for other names.
static int64_t stepOfName(const std::string &name) {
  if (name.size() <= 5 ||
      (name != stepDirectoryName(std::atoll(name.c_str() + 5), false) &&
       name != stepDirectoryName(std::atoll(name.c_str() + 5), true)))
    return -1;
  return std::atoll(name.c_str() + 5);
}

/// The entries of directory `dir` but "." and ".."; nullopt, with errno
/// set, when it cannot be read.
static std::optional<std::vector<std::string>>
directoryEntries(const std::string &dir) {
  DIR *d = opendir(dir.c_str());
  if (!d)
    return std::nullopt;
  std::vector<std::string> names;
  while (dirent *entry = readdir(d))
    if (std::strcmp(entry->d_name, ".") != 0 &&
        std::strcmp(entry->d_name, "..") != 0)
      names.push_back(entry->d_name);
  closedir(d);
  return names;
}

static std::vector<std::string> stepDirectories(const std::string &dir) {
  std::vector<std::string> names =
      directoryEntries(dir).value_or(std::vector<std::string>());
  names.erase(std::remove_if(
                  names.begin(), names.end(),
                  [](const std::string &name) { return stepOfName(name) < 0; }),
              names.end());
  std::sort(names.begin(), names.end());
  return names;
}

/// Removes a step directory: COMPLETE first, so that a removal cut short
/// never leaves something that looks complete.
static absl::Status removeStepDirectory(const std::string &path) {
  std::optional<std::vector<std::string>> entries = directoryEntries(path);
  if (!entries)
    return errno == ENOENT
               ? absl::OkStatus()
               : absl::InternalError("cannot read directory '" + path +
                                     "': " + std::strerror(errno));
  std::vector<std::string> &files = *entries;
  std::stable_partition(files.begin(), files.end(),
                        [](const std::string &f) { return f == "COMPLETE"; });
  for (const std::string &f : files) {
    std::string file = path + "/" + f;
    PPC_RETURN_IF_ERROR(injectedFault("remove", file));
    if (unlink(file.c_str()) != 0)
      return absl::InternalError("cannot remove '" + file +
                                 "': " + std::strerror(errno));
    if (f == "COMPLETE")
      PPC_RETURN_IF_ERROR(syncDirectory(path));
  }
  PPC_RETURN_IF_ERROR(injectedFault("remove", path));
  if (rmdir(path.c_str()) != 0)
    return absl::InternalError("cannot remove '" + path +
                               "': " + std::strerror(errno));
  return absl::OkStatus();
}

/// The step directory name in `dir`/LATEST; "" when there is none.
static absl::Status latestName(const std::string &dir, std::string &name) {
  name.clear();
  std::ifstream in(dir + "/LATEST");
  if (!in)
    return absl::OkStatus();
  std::string word;
  uint32_t version = 0;
  in >> word >> word >> version >> word >> name;
  if (!in || version != kCheckpointLayoutVersion || word != "latest" ||
      stepOfName(name) < 0)
    return absl::InvalidArgumentError(
        "'" + dir + "/LATEST' is not a ppc checkpoint pointer of version " +
        std::to_string(kCheckpointLayoutVersion));
  return absl::OkStatus();
}

absl::Status prepareStepDirectory(const std::string &dir, int64_t steps,
                                  bool &alternate) {
  PPC_RETURN_IF_ERROR(makeDirectories(dir));
  std::string latest;
  PPC_RETURN_IF_ERROR(latestName(dir, latest));
  alternate = latest == stepDirectoryName(steps, false);
  const std::string path = dir + "/" + stepDirectoryName(steps, alternate);
  PPC_RETURN_IF_ERROR(removeStepDirectory(path));
  if (int64_t delay = checkpointFaults().delayMs; delay > 0)
    usleep(static_cast<useconds_t>(delay) * 1000);
  PPC_RETURN_IF_ERROR(injectedFault("create directory", path));
  if (mkdir(path.c_str(), 0777) != 0)
    return absl::InternalError("cannot create directory '" + path +
                               "': " + std::strerror(errno));
  return absl::OkStatus();
}

absl::Status writeLatest(const std::string &dir, const std::string &name) {
  const std::string path = dir + "/LATEST";
  std::string text = "ppc checkpoint " +
                     std::to_string(kCheckpointLayoutVersion) + "\nlatest " +
                     name + "\n";
  PPC_RETURN_IF_ERROR(writeSynced(path + ".tmp", text));
  return commitFile(path);
}

absl::Status readLatest(const std::string &dir, std::string &stepDir) {
  std::string name;
  PPC_RETURN_IF_ERROR(latestName(dir, name));
  if (!name.empty()) {
    stepDir = dir + "/" + name;
    return absl::OkStatus();
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return absl::NotFoundError("cannot resume from '" + dir +
                               "': no such directory");
  if (stat((dir + "/COMPLETE").c_str(), &st) == 0 ||
      stat(checkpointFileName(dir, 0).c_str(), &st) == 0)
    return absl::InvalidArgumentError(
        "'" + dir +
        "' holds a checkpoint in the old layout (rank files and COMPLETE "
        "directly in it); this ppc-run resumes only from step directories "
        "named by LATEST (checkpoint layout " +
        std::to_string(kCheckpointLayoutVersion) + ")");
  return absl::InvalidArgumentError(
      "'" + dir +
      "' has no finished checkpoint (no LATEST: no run got to the end of "
      "writing one there)");
}

absl::Status pruneCheckpoints(const std::string &dir, int64_t keep) {
  std::string latest;
  if (absl::Status err = latestName(dir, latest); !err.ok() || latest.empty())
    return err.ok() ? absl::InvalidArgumentError("'" + dir +
                                                 "' has no LATEST to keep")
                    : err;
  // Newest first; the one LATEST names is always kept, then the newest
  // complete ones of earlier steps. Later steps than LATEST's belong to a
  // run that this one replaced.
  std::vector<std::string> names = stepDirectories(dir);
  std::stable_sort(names.begin(), names.end(),
                   [](const std::string &a, const std::string &b) {
                     return stepOfName(a) > stepOfName(b);
                   });
  int64_t kept = 1;
  for (const std::string &name : names) {
    if (name == latest)
      continue;
    CheckpointMarker marker;
    const std::string path = dir + "/" + name;
    if (kept < keep && stepOfName(name) < stepOfName(latest) &&
        readCompleteMarker(path, marker).ok()) {
      ++kept;
      continue;
    }
    PPC_RETURN_IF_ERROR(removeStepDirectory(path));
  }
  return absl::OkStatus();
}

} // namespace ppc::runtime
