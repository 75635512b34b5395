//===- Checkpoint.h - per-step checkpoint directories -----------*- C++ -*-===//
//
// MLIR-free. A checkpoint directory DIR holds one directory per checkpoint
// and a pointer to the newest complete one (layout version 2):
//
//   DIR/LATEST (text): "ppc checkpoint 2\nlatest step-000000042\n"
//   DIR/step-000000042/rank-R.ckpt   one per rank, format below
//   DIR/step-000000042/COMPLETE (text):
//     "ppc checkpoint 2\nsteps S\nranks K\nplan HASH\nrun IDENTITY\n"
//     (the run line, what the run reads besides the plan: its seed and
//     data, is absent from older checkpoints)
//   DIR/LOCK: held (flock) by the run writing DIR; names its host and pid
//
//   rank-R.ckpt (little-endian, format version 4):
//     "PPCCKPT\0"  u32 format version  u64 plan hash
//     i32 rank  i32 ranks  i64 steps done  i32 optimizer slots
//     f64 loss scale  i64 loss-scale good steps  u32 buffers
//     per buffer: i32 buffer id, i32 tensor id, u32 name length, the
//                 tensor's name, u32 dims, i64 lo[dims], i64 hi[dims],
//                 i64 state lo[dims], i64 state hi[dims], f32
//                 values[volume], i64 optimizer steps, per slot i64 length
//                 and f32 values[length]
//     u64 FNV-1a hash of everything before it
//   Every piece is in the model's terms: the tensor's name and the box of it
//   the rank held, and the state box, a block of its rows (the whole box
//   but under ZeRO) where the optimizer state lies and the values are the
//   float32 master's (outside it, under ZeRO with 16-bit weights, they are
//   the 16-bit copy's). A run under another plan or rank count resumes from
//   the overlap of its pieces with these (ProgramRunner::restoreResharded).
//
// Writing the checkpoint of step S (the executor drives it over all ranks):
//  1. rank 0 empties and creates the step directory (prepareStepDirectory);
//     it is never the one LATEST names: a step written again while LATEST
//     names step-S goes to step-S-2 (and back);
//  2. every rank writes its file to a temporary name, fsyncs, renames it
//     and fsyncs the directory;
//  3. once all have, rank 0 writes COMPLETE the same way, then LATEST
//     (temporary name, fsync, rename, fsync of DIR): that rename is the
//     commit point of the step;
//  4. only then rank 0 deletes the step directories beyond the newest
//     `keep` complete ones (pruneCheckpoints).
// A kill at any moment leaves LATEST naming a complete checkpoint: the
// previous one up to the rename of step 3, the new one after it. Resuming
// follows LATEST and checks that COMPLETE and every rank's file agree.
//
// Tests inject failures deterministically: the k-th filesystem step of the
// process (a write, fsync, rename, directory creation or removal) fails
// with an error, or ends the process as a kill would (PPC_CKPT_FAIL_AT=k,
// PPC_CKPT_FAIL_MODE=error|exit, or checkpointFaults()).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_CHECKPOINT_H
#define PPC_RUNTIME_CHECKPOINT_H

#include "ppc/Runtime/Optimizer.h"
#include "ppc/Runtime/plan.pb.h"
#include "ppc/Support/Status.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ppc::runtime {

/// Format of the rank files (4: tensor names and state boxes; 3: the loss
/// scale). Versions 2 and 3 are read too, for a resume under their plan.
constexpr uint32_t kCheckpointVersion = 4;
/// Layout of the checkpoint directory: LATEST and the COMPLETE markers.
constexpr uint32_t kCheckpointLayoutVersion = 2;

struct CheckpointBuffer {
  int32_t buffer = 0; ///< buffer id in the rank's program
  int32_t tensor = 0;
  std::string tensorName; ///< empty in files before version 4
  std::vector<int64_t> lo, hi;
  /// Where the optimizer state lies and the values are the master's (the
  /// whole box but for a ZeRO shard); empty in files before version 4.
  std::vector<int64_t> stateLo, stateHi;
  std::vector<float> values;
  OptimizerState optimizer;
};

struct Checkpoint {
  uint64_t planHash = 0;
  int32_t rank = 0;
  int32_t numRanks = 1;
  int64_t steps = 0; ///< training steps done
  int32_t optimizerSlots = 0;
  /// The loss scale and its steps without overflow (LossScale); scale 0 in
  /// files from before loss scaling.
  double lossScale = 0;
  int64_t lossScaleGoodSteps = 0;
  std::vector<CheckpointBuffer> buffers;
};

/// FNV-1a of the plan's serialization: a checkpoint belongs to one plan.
uint64_t planHash(const ppc::planfile::Plan &plan);
/// A hash as COMPLETE and the messages write it: 16 hex digits.
std::string hashText(uint64_t hash);

std::string checkpointFileName(const std::string &dir, int rank);

/// Writes `path`.tmp and fsyncs it.
absl::Status stageCheckpointFile(const std::string &path,
                                 const Checkpoint &checkpoint);
/// Renames `path`.tmp to `path` and fsyncs the directory.
absl::Status commitFile(const std::string &path);
/// stageCheckpointFile then commitFile.
absl::Status writeCheckpointFile(const std::string &path,
                                 const Checkpoint &checkpoint);

/// The checkpoint rank `rank` of `plan` would have written, made from the
/// files of every rank of a checkpoint under another plan or rank count
/// (format 4 or later, of the same model and optimizer): each persistent
/// buffer of the rank's program, and the optimizer state of the box its
/// update covers, from the overlap of the saved pieces with it, matched by
/// tensor name; values inside a piece's state box (the float32 master's)
/// win over the rest. An element no piece holds, a piece outside its
/// tensor, a weight the plan does not have or pieces of differing step
/// counts are errors naming the tensor. Host memory: every saved piece.
absl::StatusOr<Checkpoint>
reshardCheckpoint(const std::vector<Checkpoint> &saved,
                  const ppc::planfile::Plan &plan, int32_t rank);

/// A whole tensor of a checkpoint: its shape (the farthest corner of its
/// pieces) and its values, row-major.
struct SavedTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};
/// Every weight and frozen statistic of a checkpoint (the files of all its
/// ranks, format 4 or later) as whole tensors by name, from the overlap of
/// their pieces as reshardCheckpoint takes them; an element no piece holds
/// is an error naming the tensor.
absl::StatusOr<std::map<std::string, SavedTensor>>
wholeTensors(const std::vector<Checkpoint> &saved);

/// Reads and checks magic, version, size and checksum.
absl::Status readCheckpointFile(const std::string &path,
                                Checkpoint &checkpoint);

struct CheckpointMarker {
  int64_t steps = 0;
  int32_t numRanks = 0;
  uint64_t planHash = 0;
  /// What makes the run that wrote it the same run besides its plan
  /// ("seed=1 data=- shuffle=on batches=0 inputs=-"); empty in
  /// checkpoints from before identities, which any run may resume.
  std::string run;
};

/// An exclusive lock on checkpoint directory `dir`, so two jobs never
/// write (or one resume while another writes) the same directory: flock on
/// `dir`/LOCK, which the kernel drops when its holder ends however it
/// ends, so a crashed run leaves no stale lock. The file names the holder
/// (host, pid, start time) for whoever finds it taken.
class CheckpointLock {
public:
  CheckpointLock() = default;
  CheckpointLock(const CheckpointLock &) = delete;
  CheckpointLock &operator=(const CheckpointLock &) = delete;
  ~CheckpointLock() { release(); }
  /// Creates `dir` if missing and takes its lock, or says why not ("... is
  /// in use by another run (pid 41 on host a, since ...)").
  absl::Status acquire(const std::string &dir);
  void release();
  bool held() const { return fd >= 0; }

private:
  int fd = -1;
};

/// Writes `dir`/COMPLETE atomically (`dir` is a step directory).
absl::Status writeCompleteMarker(const std::string &dir,
                                 const CheckpointMarker &marker);
absl::Status readCompleteMarker(const std::string &dir,
                                CheckpointMarker &marker);

/// The file of rank `rank` in step directory `dir`, whose COMPLETE is
/// `marker`, checked against it (plan, rank, rank count, step).
absl::StatusOr<Checkpoint> readCheckpointRank(const std::string &dir,
                                              const CheckpointMarker &marker,
                                              int32_t rank);
/// readCheckpointRank of every rank `marker` names.
absl::StatusOr<std::vector<Checkpoint>>
readCheckpointRanks(const std::string &dir, const CheckpointMarker &marker);

/// "step-000000042", or "step-000000042-2" for the alternate name.
std::string stepDirectoryName(int64_t steps, bool alternate);

/// Rank 0's step 1 of writing the checkpoint of step `steps` into `dir`
/// (created if missing): picks the step directory's name (the alternate one
/// when LATEST names the other), removes what a killed run left under that
/// name, and creates it empty.
absl::Status prepareStepDirectory(const std::string &dir, int64_t steps,
                                  bool &alternate);

/// Points `dir`/LATEST at step directory `name` atomically: the commit.
absl::Status writeLatest(const std::string &dir, const std::string &name);

/// The step directory `dir`/LATEST names, as a path; errors tell a missing
/// directory, one without a completed checkpoint and one in the old layout
/// (rank files and COMPLETE directly in `dir`) apart.
absl::Status readLatest(const std::string &dir, std::string &stepDir);

/// Removes every step directory of `dir` except the one LATEST names and the
/// `keep` - 1 newest complete ones of earlier steps; the first error if any.
absl::Status pruneCheckpoints(const std::string &dir, int64_t keep);

/// Deterministic failure injection into the checkpoint writer's filesystem
/// steps, for tests.
struct CheckpointFaults {
  int64_t failAt = 0; ///< the step (from 1) that fails; 0: none
  bool exit = false;  ///< end the process like a kill instead of an error
  int64_t count = 0;  ///< filesystem steps counted so far
  /// Milliseconds each checkpoint's directory creation waits, as on a slow
  /// filesystem (tests that signal a job while it trains need it to last).
  int64_t delayMs = 0;
};
/// Exit status of a process ended by an injected fault.
constexpr int kCheckpointFaultExitCode = 86;
/// The process's injection state, initialized from PPC_CKPT_FAIL_AT,
/// PPC_CKPT_FAIL_MODE and PPC_CKPT_DELAY_MS.
CheckpointFaults &checkpointFaults();

/// Creates `dir` and its parents if missing.
absl::Status makeDirectories(const std::string &dir);

} // namespace ppc::runtime

#endif // PPC_RUNTIME_CHECKPOINT_H
