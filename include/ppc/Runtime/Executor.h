//===- Executor.h - runs a plan's training steps ----------------*- C++ -*-===//
//
// MLIR-free. Each rank interprets its program of the plan once per step:
//  - Buffers are dense float32 boxes of tensors (or of their gradients), or
//    scratch; Alloc zero-fills them. Buffers of WEIGHT and FROZEN tensors
//    (not gradients) persist across steps by buffer id with their optimizer
//    state: their Load runs once (or never, after --resume), and their Free
//    only ends the step's use. INPUT buffers load every step (a new
//    synthetic batch per step), CONSTANT ones too.
//  - Send copies the box away and returns (all sends complete by the end of
//    the step); Recv waits for the message of (peer, tag). Copy and Recv
//    with `accumulate` add into the destination.
//  - Collectives over a group, in group order (see Collectives.cpp for the
//    layouts of all_gather, reduce_scatter and all_to_all).
//  - Update applies the plan's optimizer to a weight buffer with a gradient
//    buffer of the same box.
//  - Output records a buffer holding a whole tensor (the loss, or a model
//    output) after it is computed.
// Steps count from 1 and continue after --resume, so synthetic batches, and
// hence whole runs, do not depend on where a run was interrupted.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_EXECUTOR_H
#define PPC_RUNTIME_EXECUTOR_H

#include "ppc/Runtime/Communicator.h"
#include "ppc/Runtime/DataSource.h"
#include "ppc/Runtime/plan.pb.h"

#include <cstdint>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

namespace ppc::runtime {

struct RunOptions {
  int64_t steps = 10;
  uint64_t seed = 1;
  /// Synthetic batches repeat every this many steps (0: never).
  int64_t batches = 0;
  /// (tensor name, .npy path) for inputs read from files.
  std::vector<std::pair<std::string, std::string>> inputs;
  /// A dataset directory every input is read from (ppc/Runtime/Dataset.h).
  std::string dataDir;
  /// Shuffle the dataset's records every epoch (by the seed).
  bool shuffle = true;
  InitMode init = InitMode::Plan;
  /// The plan file the run reads (no output may overwrite it), and its
  /// weights file (weightsFilePath of the plan, or --weights).
  std::string planFile;
  std::string weightsFile;
  bool verify = false;
  /// The backend --verify's single-device step runs on ("": the run's own):
  /// `cpu` checks a cuda run against the cpu kernels.
  std::string verifyBackend;
  /// Loss scaling (ppc/Runtime/Optimizer.h): "dynamic", "none" or a static
  /// scale; empty: dynamic for plans with f16 tensors, else none.
  std::string lossScale;
  /// Where buffers live and kernels run (ppc/Runtime/Backend.h).
  std::string backend = "cpu";
  /// Train on through a NaN/Inf loss and accept NaN/Inf in input files.
  bool allowNonfinite = false;
  /// 0: the largest DTypeInfo::verifyTolerance of the plan's tensors'
  /// types (1e-4 for float32, more for bf16 and f16).
  double verifyTolerance = 0;
  std::string checkpointDir;
  int64_t checkpointEvery = 0; ///< also after steps divisible by it (0: no)
  /// Complete checkpoints kept in checkpointDir, the newest included.
  int64_t keepCheckpoints = 2;
  std::string resumeDir;
  /// Resume a checkpoint another run wrote (another seed, data or input
  /// files): refused otherwise, so two jobs' directories never mix.
  bool resumeOtherRun = false;
  std::string saveOutputsDir;
  /// After the last step, rank 0 writes exportOnnxOut: the ONNX model
  /// exportOnnxModel with the trained weights (ppc/Runtime/OnnxExport.h).
  std::string exportOnnxModel, exportOnnxOut;
  std::string traceFile;
  /// Writes the kernels' measured times (every step but the first) as a
  /// simulator profile (docs/profile-format.md) for device `profileDevice`.
  std::string profileFile;
  /// "": the cpu backend's default, cpu-epyc-2core; other backends must
  /// name theirs (the machine description's device model).
  std::string profileDevice;
  int threads = 1;
  /// Seconds a rank waits for another (or for its GPU's queued work) before
  /// it ends the job; the host communicator has its own copy.
  double timeout = 300;
  /// Start collectives early, where work lies before them (gradient
  /// all-reduces during the backward; ProgramRunner.h). Off by default: on
  /// hosts whose cores all compute it costs the backward what it saves the
  /// sync (docs/runtime.md, "Overlap").
  bool overlap = false;
  /// Only the reference kernels (no oneDNN), e.g. to compare the two.
  bool referenceKernels = false;
  /// cuda: float32 GEMMs and convolutions on TF32 tensor cores (10-bit
  /// mantissas in the products, float32 sums), as PyTorch runs its
  /// convolutions by default; --verify's float32 tolerance loosens to f16's.
  bool allowTf32 = false;
  std::string logFile;
  bool quiet = false;
};

/// Runs `options.steps` steps of `plan` on this rank of `comm` (one process
/// per rank, all calling this). Rank 0 prints progress to `out`; errors go
/// to `err` as one line "ppc-run: ...". Returns the exit code: 0, or 1 for an
/// error or a failed --verify. A failure inside a step of a multi-rank run
/// aborts the whole job instead, since other ranks may be waiting on this
/// one.
int runPlan(const ppc::planfile::Plan &plan, const RunOptions &options,
            Communicator &comm, std::ostream &out, std::ostream &err);

} // namespace ppc::runtime

#endif // PPC_RUNTIME_EXECUTOR_H
