//===- OutputFiles.cpp - outputs checked before the work that makes them --===//

#include "ppc/Runtime/OutputFiles.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <iterator>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;

namespace ppc::runtime {

namespace {

std::string folderOf(const std::string &path) {
  fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

} // namespace

absl::Status checkOutputFile(const std::string &path, WriteMode mode) {
  if (path.empty())
    return absl::InvalidArgumentError("an empty path");
  struct stat st;
  bool exists = stat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode))
    return absl::InvalidArgumentError("'" + path +
                                      "' is a directory, not a file");
  std::string folder = folderOf(path);
  struct stat folderStat;
  if (stat(folder.c_str(), &folderStat) != 0)
    return absl::InvalidArgumentError("cannot write '" + path +
                                      "': its folder '" + folder +
                                      "': " + std::strerror(errno));
  if (!S_ISDIR(folderStat.st_mode))
    return absl::InvalidArgumentError("cannot write '" + path + "': '" +
                                      folder + "' is not a directory");
  if (exists) {
    if (mode == WriteMode::ViaRename && !S_ISREG(st.st_mode))
      return absl::InvalidArgumentError(
          "'" + path + "' is not a regular file, and would be replaced");
    // Appending truncates nothing; O_NONBLOCK keeps a FIFO without a
    // reader from blocking (ENXIO instead).
    int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_NONBLOCK);
    if (fd < 0)
      return absl::InvalidArgumentError("cannot write '" + path +
                                        "': " + std::strerror(errno));
    close(fd);
  }
  if (mode == WriteMode::ViaRename || !exists) {
    std::string probe = folder + "/.ppc-write-check-XXXXXX";
    std::vector<char> name(probe.begin(), probe.end());
    name.push_back('\0');
    int fd = mkstemp(name.data());
    if (fd < 0)
      return absl::InvalidArgumentError("cannot write '" + path +
                                        "': cannot create a file in '" +
                                        folder + "': " + std::strerror(errno));
    close(fd);
    unlink(name.data());
  }
  return absl::OkStatus();
}

bool samePath(const std::string &a, const std::string &b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec))
    return fs::equivalent(a, b, ec) && !ec;
  fs::path x = fs::weakly_canonical(fs::absolute(a, ec), ec);
  fs::path y = fs::weakly_canonical(fs::absolute(b, ec), ec);
  return x == y;
}

bool isInside(const std::string &path, const std::string &dir) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  fs::path d = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  auto [end, at] = std::mismatch(d.begin(), d.end(), p.begin(), p.end());
  // A trailing separator leaves an empty last element.
  return end == d.end() || (std::next(end) == d.end() && end->empty());
}

absl::Status checkOutputsSpareInputs(const RunFiles &files) {
  for (const auto &[option, output] : files.outputs) {
    if (output.empty())
      continue;
    for (const auto &[what, input] : files.inputs)
      if (!input.empty() && samePath(output, input))
        return absl::InvalidArgumentError(option + " '" + output + "' is " +
                                          what + ": name another file");
    for (const auto &[what, dir] : files.inputDirectories)
      if (!dir.empty() && isInside(output, dir))
        return absl::InvalidArgumentError(option + " '" + output +
                                          "' is inside " + what + " '" + dir +
                                          "': name a file outside it");
  }
  return absl::OkStatus();
}

int kernelThreads(int64_t requested, std::string &note) {
  int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  if (requested <= cores)
    return static_cast<int>(std::max<int64_t>(1, requested));
  note = "--threads " + std::to_string(requested) + ": this host has " +
         std::to_string(cores) + (cores == 1 ? " core" : " cores") +
         "; using " + std::to_string(cores);
  return static_cast<int>(cores);
}

} // namespace ppc::runtime
