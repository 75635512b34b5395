//===- Checkpoint.h - per-rank checkpoint files -----------------*- C++ -*-===//
//
// MLIR-free. A checkpoint directory holds rank-R.ckpt per rank and a COMPLETE
// marker that rank 0 writes once every rank's file is in place:
//
//   rank-R.ckpt (little-endian):
//     "PPCCKPT\0"  u32 format version  u64 plan hash
//     i32 rank  i32 ranks  i64 steps done  i32 optimizer slots  u32 buffers
//     per buffer: i32 buffer id, i32 tensor id, u32 dims, i64 lo[dims],
//                 i64 hi[dims], f32 values[volume], i64 optimizer steps,
//                 f32 slot values[slots][volume]
//     u64 FNV-1a hash of everything before it
//   COMPLETE (text): "ppc checkpoint 1\nsteps S\nranks K\nplan HASH\n"
//
// Files are written to a temporary name, fsynced and renamed, so each is
// either the old or the new one; resuming checks that every rank's file is
// of the step COMPLETE names.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_CHECKPOINT_H
#define PPC_RUNTIME_CHECKPOINT_H

#include "ppc/Runtime/Optimizer.h"
#include "ppc/Runtime/plan.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ppc::runtime {

constexpr uint32_t kCheckpointVersion = 1;

struct CheckpointBuffer {
  int32_t buffer = 0; ///< buffer id in the rank's program
  int32_t tensor = 0;
  std::vector<int64_t> lo, hi;
  std::vector<float> values;
  OptimizerState optimizer;
};

struct Checkpoint {
  uint64_t planHash = 0;
  int32_t rank = 0;
  int32_t numRanks = 1;
  int64_t steps = 0; ///< training steps done
  int32_t optimizerSlots = 0;
  std::vector<CheckpointBuffer> buffers;
};

/// FNV-1a of the plan's serialization: a checkpoint belongs to one plan.
uint64_t planHash(const ppc::planfile::Plan &plan);

std::string checkpointFileName(const std::string &dir, int rank);

/// Writes `path`.tmp and fsyncs it; "" or the error.
std::string stageCheckpointFile(const std::string &path,
                                const Checkpoint &checkpoint);
/// Renames `path`.tmp to `path` and fsyncs the directory.
std::string commitFile(const std::string &path);
/// stageCheckpointFile then commitFile.
std::string writeCheckpointFile(const std::string &path,
                                const Checkpoint &checkpoint);

/// Reads and checks magic, version, size and checksum.
std::string readCheckpointFile(const std::string &path, Checkpoint &checkpoint);

struct CheckpointMarker {
  int64_t steps = 0;
  int32_t numRanks = 0;
  uint64_t planHash = 0;
};

/// Writes `dir`/COMPLETE atomically.
std::string writeCompleteMarker(const std::string &dir,
                                const CheckpointMarker &marker);
std::string readCompleteMarker(const std::string &dir,
                               CheckpointMarker &marker);

/// Creates `dir` and its parents if missing.
std::string makeDirectories(const std::string &dir);

} // namespace ppc::runtime

#endif // PPC_RUNTIME_CHECKPOINT_H
