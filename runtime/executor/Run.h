//===- Run.h - one run of a plan on this rank ----------------*- C++ -*-===//
//
// Private to PPCRuntime. Run drives ProgramRunner through a run: the setup
// checks every rank agrees on (RunChecks.cpp: options, memory, checkpoint
// locks, resume), the step loop (Executor.cpp), --verify against one device
// (RunVerify.cpp), and what a run leaves behind: progress, summary, outputs,
// trained weights, profile and checkpoints (RunArtifacts.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_EXECUTOR_RUN_H
#define PPC_RUNTIME_EXECUTOR_RUN_H

#include "ProgramRunner.h"
#include "ppc/Runtime/Checkpoint.h"
#include "ppc/Runtime/Executor.h"
#include "ppc/Support/Status.h"

#include <fstream>
#include <memory>
#include <ostream>
#include <string>

namespace ppc::runtime {
namespace detail {

using namespace ppc::planfile;

/// `value` printed with the printf format `fmt`.
std::string format(const char *fmt, double value);
/// A loss as printed: a NaN is "nan" whatever its sign bit (which the
/// kernels' order of operations decides, not the model).
std::string lossText(double loss, const char *fmt);
std::string gib(double bytes);
/// The floating type most weight elements of `plan` are stored in: the
/// type its GEMMs run in.
DType weightDType(const Plan &plan);
/// Bytes of the process's peak resident memory.
double peakResidentMemory();

class Run {
public:
  Run(const Plan &plan, const RunOptions &options, Communicator &comm,
      std::unique_ptr<Backend> backend, std::ostream &out, std::ostream &err)
      : plan(plan), options(options), comm(comm), out(out), err(err),
        rank(comm.rank()), hash(planHash(plan)),
        data(plan, options.seed, options.init, options.batches),
        backend(std::move(backend)), runner(plan, data, comm, *this->backend) {}

  int run();

private:
  /// Setup problems: every rank learns whether any rank failed; the failing
  /// ranks print (only rank 0 when all see the same problem).
  bool anyFailed(const absl::Status &error, bool sameOnAllRanks) {
    bool any = comm.anyRank(!error.ok(), [] { return "setup checks"; });
    if (!error.ok() && (!sameOnAllRanks || rank == 0)) {
      err << "ppc-run: ";
      if (!sameOnAllRanks && comm.size() > 1)
        err << "rank " << rank << ": ";
      err << error.message() << "\n";
      err.flush();
    }
    return any;
  }
  /// A failure while ranks may be waiting on each other: ends the job.
  int stepFailure(const absl::Status &error) {
    // One write, so that lines of ranks failing together do not interleave.
    err << "ppc-run: rank " + std::to_string(rank) + ": " + messageOf(error) +
               "\n";
    err.flush();
    if (comm.size() > 1)
      comm.abort(1);
    return 1;
  }

  absl::Status checkOptions() const;
  /// OK, or "rank R needs N GiB ..." when this rank's buffers at their peak
  /// (and --verify's whole tensors) exceed the machine's memory.
  absl::Status checkMemory() const;
  /// Encodes `flag` for a maximum over ranks, and decodes the maximum: the
  /// lowest rank whose flag is set, or -1.
  double rankFlag(bool flag) const { return flag ? comm.size() - rank : 0; }
  int lowestFlagged(double max) const {
    return max > 0 ? comm.size() - static_cast<int>(max) : -1;
  }
  /// What makes this run itself besides its plan, as checkpoints record
  /// it (CheckpointMarker::run).
  std::string runIdentity() const;
  /// Rank 0 takes the checkpoint and resume directories' locks; false
  /// after a failure that every rank saw and reported.
  bool lockCheckpointDirectories();
  /// Both false after a failure that every rank saw and reported.
  bool resume(int64_t &steps);
  /// resume() of a checkpoint of another plan or rank count (`dir` is its
  /// step directory, `marker` its COMPLETE): every rank's file read, each
  /// buffer restored from the overlap (ProgramRunner::restoreResharded).
  bool resumeResharded(const std::string &dir, const CheckpointMarker &marker,
                       int64_t &steps);
  bool writeCheckpoint(int64_t steps);
  /// `lossScale`: the scale the step ran with.
  int verify(int64_t step, double lossScale);
  /// The loss scaling the options and the plan's types ask for.
  LossScale initialLossScale() const;
  /// The loss this rank output in the last step; null if none (not a
  /// training plan, or another rank outputs it).
  const float *lossValue() const;
  void printStep(int64_t step, int64_t last, double seconds);
  void printSummary(const std::vector<double> &times,
                    const std::vector<double> &phases);
  absl::Status saveOutputs() const;
  /// Every rank's trained weight boxes, serialized for the gather.
  std::string packTrainedWeights() const;
  /// Rank 0: the whole weights from every rank's boxes, into the ONNX model.
  absl::Status exportOnnx(const std::vector<std::string> &perRank) const;
  absl::Status writeProfile(const std::vector<std::string> &perRank) const;

  const Plan &plan;
  const RunOptions &options;
  Communicator &comm;
  std::ostream &out, &err;
  const int rank;
  const uint64_t hash;
  DataSource data;
  /// Made by runPlan: never null.
  std::unique_ptr<Backend> backend;
  ProgramRunner runner;
  std::ofstream log;
  CheckpointLock checkpointLock, resumeLock;
  double peakResidentBytes = 0;
  /// Launches per counted step (max over ranks); -1: not counted.
  double launchesPerStep = -1;
  int64_t skippedSteps = 0;
};

} // namespace detail
} // namespace ppc::runtime

#endif // PPC_RUNTIME_EXECUTOR_RUN_H
