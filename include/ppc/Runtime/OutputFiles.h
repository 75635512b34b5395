//===- OutputFiles.h - outputs checked before the work -----------*- C++
//-*-===//
//
// MLIR-free. ppc-run, ppc-profile and ppc-calibrate write their outputs after
// minutes of work: a path that cannot be written (a directory, a missing or
// read-only folder, an immutable file, one of the run's own inputs) is
// refused before the first step, so nothing is computed only to be lost.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_OUTPUTFILES_H
#define PPC_RUNTIME_OUTPUTFILES_H

#include "ppc/Support/Status.h"
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ppc::runtime {

/// How a writer puts its file in place.
enum class WriteMode {
  InPlace,   ///< opened and written where it is (a trace, a log).
  ViaRename, ///< written as PATH.tmp beside it, then renamed over PATH.
};

/// Why `path` cannot be written as a file, or OK: it is a directory, its
/// folder is missing or not a directory, an existing file cannot be opened
/// for writing (read-only, immutable, a FIFO without a reader), or, for
/// ViaRename, no file can be created in its folder. Creates nothing it
/// leaves behind and truncates nothing.
absl::Status checkOutputFile(const std::string &path,
                             WriteMode mode = WriteMode::InPlace);

/// Whether `a` and `b` name the same file: the same inode when both exist
/// (hard links, symlinks), else the same absolute, normalized path.
bool samePath(const std::string &a, const std::string &b);

/// Whether `path` is `dir` or lies under it.
bool isInside(const std::string &path, const std::string &dir);

/// Files (option, path) a run writes, and what it reads that they must not
/// overwrite: files (what, path) and directories (what, path) whose
/// contents are its own (checkpoints).
struct RunFiles {
  std::vector<std::pair<std::string, std::string>> outputs, inputs,
      inputDirectories;
};

/// OK, or the first output that is an input or inside an input directory:
/// "--export-onnx target 'm.pb' is the plan: name another file".
absl::Status checkOutputsSpareInputs(const RunFiles &files);

/// Kernel threads per process: `requested` (>= 1) up to this host's cores;
/// `note` says so when it was lowered.
int kernelThreads(int64_t requested, std::string &note);

} // namespace ppc::runtime

#endif // PPC_RUNTIME_OUTPUTFILES_H
