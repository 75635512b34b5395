//===- ProgramRunner.h - interprets one rank's program ----------*- C++ -*-===//
//
// Private to runtime/executor: the instruction interpreter behind runPlan
// (semantics in ppc/Runtime/Executor.h). It keeps the persistent weight
// buffers with their optimizer state across steps, and per step the live
// buffers, the outputs, the time spent per phase and, when asked, a trace and
// the gradients that --verify compares.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_EXECUTOR_PROGRAMRUNNER_H
#define PPC_RUNTIME_EXECUTOR_PROGRAMRUNNER_H

#include "ppc/Runtime/Backend.h"
#include "ppc/Runtime/Boxes.h"
#include "ppc/Runtime/Checkpoint.h"
#include "ppc/Runtime/Communicator.h"
#include "ppc/Runtime/DataSource.h"
#include "ppc/Runtime/KernelProfile.h"
#include "ppc/Runtime/Kernels.h"
#include "ppc/Runtime/Optimizer.h"
#include "ppc/Runtime/plan.pb.h"
#include "ppc/Support/Status.h"

#include <future>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace ppc::runtime {

/// Phases of a step as indices: Instruction::Phase values, 0 before the
/// first marker.
constexpr int kNumPhases = 6;
const char *phaseName(int phase);
const char *collectiveName(ppc::planfile::Instruction::CollectiveKind kind);
struct StepProfile {
  double seconds = 0;
  double phaseSeconds[kNumPhases] = {};
  double commSeconds = 0; ///< in send, recv, collectives (part of the phases)
};

/// Measured kernel times for a profile (docs/profile-format.md): keyed by
/// op kind, dtype, phase and the partition's operand shapes, the stages of
/// an op summed.
struct TraceEvent {
  std::string name;
  int tid = 0;      ///< 0 compute, 1 communication
  double start = 0; ///< seconds since the start of the step
  double duration = 0;
  int phase = 0;
  int instruction = -1;
};

/// A box of a tensor's values or gradient kept for --verify.
struct BoxValues {
  int32_t tensor = 0;
  Index lo, hi;
  std::vector<float> values;
};

class ProgramRunner {
public:
  ProgramRunner(const ppc::planfile::Plan &plan, const DataSource &data,
                Communicator &comm, Backend &backend);

  /// Builds the op descriptions, checks tags, creates the group
  /// communicators (collective over the world).
  absl::Status prepare();

  /// Runs the program once as step `step`. With `trace`, records events;
  /// with `keepGradients`, copies every gradient an Update consumes.
  /// Errors name the instruction, step, phase and op.
  absl::Status runStep(int64_t step, bool trace, bool keepGradients,
                       StepProfile &profile);

  /// Whole output tensors recorded by Output in the last step.
  const std::map<int32_t, std::vector<float>> &outputs() const {
    return outputs_;
  }
  const std::vector<TraceEvent> &traceEvents() const { return trace_; }
  /// Gradients consumed by Update in the last step run with keepGradients,
  /// and the weight buffers it updated.
  const std::vector<BoxValues> &keptGradients() const { return keptGrads_; }
  /// The first operand's values of every kernel of an op with kinks
  /// (kinkedDerivative) in the last step run with keepGradients, as the
  /// kernel read them: which side of each kink this rank's run took.
  const std::vector<BoxValues> &kinkInputs() const { return kinkInputs_; }
  /// Kernel times of the steps run with `timeKernels`, by profile key
  /// "kind|dtype|phase|[[shape],...]".
  const KernelTimings &kernelTimings() const { return timings_; }
  /// With `cpuTime`, a kernel's time is its thread's CPU time, not the
  /// wall clock: with more ranks than cores a rank loses the core mid
  /// kernel, and the profile is to hold the kernel's own cost (the
  /// machine's cores_per_node models the sharing). Only for one-threaded
  /// kernels (one OpenBLAS thread), whose work all runs on this thread.
  void setTimeKernels(bool on, bool cpuTime = false) {
    timeKernels_ = on;
    cpuTimeKernels_ = on && cpuTime; // a system call per instruction
  }
  /// Gradient sync overlapped with the backward: from the second step on
  /// (the first runs every collective in place, which checks that the
  /// ranks' programs agree), each all-reduce of the grad_sync phase starts
  /// right after the last instruction before it that touches its buffer,
  /// in program order, and is waited for where it stands in the program.
  /// Between instructions the runner lets MPI progress.
  void setOverlap(bool on) { overlap_ = on; }
  /// Loss scaling (Optimizer.h): the loss gradient's seed, the gradients'
  /// check at the update phase (a maximum over all ranks) and the scale's
  /// change after the step. Gradients kept for --verify are unscaled.
  void setLossScale(const LossScale &lossScale) { lossScale_ = lossScale; }
  const LossScale &lossScale() const { return lossScale_; }
  /// Whether the last step's gradients overflowed (its updates skipped).
  bool lastStepSkipped() const { return skipUpdates_; }

  std::vector<BoxValues> updatedWeights() const;
  /// The weights as training left them, for export: of each weight buffer,
  /// the box this rank updates (all of it, or its ZeRO shard of rows; the
  /// other rows are another rank's), else the whole buffer (a weight it
  /// does not update, a FROZEN one).
  std::vector<BoxValues> trainedWeights() const;
  /// Current values of the persistent buffers of FROZEN tensors.
  std::vector<BoxValues> frozenBuffers() const;

  /// The persistent buffers and optimizer state (fields other than the
  /// buffers are left to the caller).
  void saveState(Checkpoint &checkpoint) const;
  /// Restores them; Loads of restored buffers are skipped.
  absl::Status restoreState(const Checkpoint &checkpoint);
  /// Restores them from the checkpoint files of every rank of a run under
  /// another plan or rank count: reshardCheckpoint for this rank, then
  /// restoreState.
  absl::Status restoreResharded(const std::vector<Checkpoint> &saved);

private:
  struct Buffer {
    int32_t tensor = -1; ///< -1: scratch
    bool grad = false;
    Index shape; ///< the tensor's global shape; a scratch buffer's own shape
    Index lo, hi;
    std::shared_ptr<DeviceBuffer> storage;
    DType dtype() const { return storage->dtype(); }
    void *data() const { return storage->data(); }
    int64_t size() const { return boxVolume(lo, hi); }
    DeviceView view() const { return {storage.get(), 0, shape, lo, hi}; }
  };
  /// A weight's (or frozen tensor's) buffer kept across steps. A 16-bit
  /// weight also has a float32 master copy that the optimizer updates and
  /// rounds into `storage` (mixed precision); otherwise `master` is
  /// `storage`.
  struct Persistent {
    int32_t tensor = 0;
    Index lo, hi;
    std::shared_ptr<DeviceBuffer> storage, master;
    bool loaded = false;
    DeviceOptimizerState optimizer;
  };
  /// A persistent buffer of box [lo, hi) of `tensor` (and its float32
  /// master where it is a 16-bit weight), holding `values` when given.
  absl::StatusOr<Persistent> newPersistent(int32_t tensor, const Index &lo,
                                           const Index &hi,
                                           const std::vector<float> *values);
  /// How a collective instruction's boxes map onto MPI counts; computed the
  /// first time it runs (programs repeat every step).
  struct CollectiveLayout {
    std::vector<int64_t> counts;         ///< all_gather / reduce_scatter
    std::vector<Index> pieceLo, pieceHi; ///< per member (see Collectives.cpp)
    std::vector<Index> sendLo, sendHi;   ///< all_to_all
    std::vector<int64_t> sendCounts;
    bool direct = false; ///< pieces are contiguous in the buffer's layout
  };

  using Instruction = ppc::planfile::Instruction;

  absl::Status execute(const Instruction &instr);
  absl::Status alloc(const ppc::planfile::Instruction::Alloc &a);
  absl::Status load(Buffer &b, int32_t id);
  /// The values of an input buffer's box at `step`: drawn on a thread
  /// during the step before where it was (drawnInputs_), else here.
  absl::Status inputValues(const Buffer &b, int32_t id, int64_t step,
                           std::vector<float> &values);
  absl::Status copy(const Instruction::Copy &c);
  absl::Status send(const Instruction::Send &s);
  absl::Status recv(const Instruction::Recv &r);
  absl::Status kernel(const Instruction::Kernel &k);
  absl::Status kernelBackward(const Instruction::KernelBackward &k);
  absl::Status collective(const Instruction::Collective &c);
  /// A collective started early: its handle, when it started, and the
  /// packed copies it reads or writes until it is waited for (none when its
  /// pieces lie in place).
  struct StartedCollective {
    int64_t handle = 0;
    double startedAt = 0;
    std::shared_ptr<DeviceBuffer> packedIn, packedOut;
  };
  /// Runs collective `c` (the instruction at index_), or with `start`
  /// starts it (finished by waitCollective).
  absl::Status runCollective(const Instruction::Collective &c,
                             StartedCollective *start);
  /// Unpacks what a collective received in `packed` (null: in place) into
  /// its result.
  absl::Status finishCollective(const Instruction::Collective &c,
                                const CollectiveLayout &layout,
                                DeviceBuffer *packed);
  absl::Status collectiveLayout(const Instruction::Collective &c,
                                const Buffer &buffer, const Buffer *result,
                                CollectiveLayout &layout);
  absl::Status update(const Instruction::Update &u);
  /// Runs the updates gathered from consecutive Update instructions.
  absl::Status flushUpdates();
  /// "kernel error in op 'NAME' (forward, stage S): status" for the kernel
  /// instruction at `index`.
  absl::Status kernelError(int index, const absl::Status &status) const;
  /// Finds, once, where each overlapped collective starts.
  void planOverlap();
  absl::Status startCollective(int index, double startedAt);
  absl::Status waitCollective(int index);
  absl::Status output(const Instruction::Output &o);
  /// At the update phase (or the step's end on a rank without one): every
  /// rank learns whether any gradient an update reads is not finite.
  void checkGradients();
  /// The storage type of a buffer of `tensor` (scratch: f32).
  DType dtypeOf(int32_t tensor) const;
  /// A staging buffer of at least n elements of `dtype`, reused across
  /// instructions; null when out of memory.
  DeviceBuffer *stagingBuffer(DType dtype, int64_t n);
  /// A buffer's first `n` values as floats.
  std::vector<float> hostValues(const DeviceBuffer &buffer, int64_t n) const;
  /// A persistent buffer's values as training left them: the master copy,
  /// but where a ZeRO shard was updated, the rows outside it as gathered.
  std::vector<float> persistentValues(int32_t id, const Persistent &p) const;

  absl::Status lookup(int32_t id, Buffer *&buffer);
  absl::Status viewOf(int32_t id, int32_t tensor, bool grad, const char *what,
                      size_t index, DeviceView &view);
  /// viewOf for every buffer of `ids`, the i-th holding (a gradient of)
  /// tensors[i]; no tensors: scratch buffers.
  absl::Status viewsOf(const google::protobuf::RepeatedField<int32_t> &ids,
                       const google::protobuf::RepeatedField<int32_t> *tensors,
                       bool grad, const char *what,
                       std::vector<DeviceView> &views);
  std::string traceName(const Instruction &instr) const;
  /// "instruction I of step S, phase P, op NAME" for errors and timeouts.
  std::string context() const;
  std::string tensorName(int32_t tensor) const;

  const ppc::planfile::Plan &plan;
  const ppc::planfile::Program &program;
  const DataSource &data;
  Communicator &comm;
  Backend &backend;
  std::vector<OpDesc> descs;
  /// Per instruction, the op it serves (the next kernel's, else the last).
  std::vector<int32_t> contextOp;
  /// Per instruction, the phase it runs in.
  std::vector<int> phaseAt_;
  std::map<int32_t, Persistent> persistent;
  std::unordered_map<int32_t, Buffer> live;
  std::map<int, CollectiveLayout> layouts;
  /// Collectives set up so far per group, to match members' instructions.
  std::map<std::vector<int>, int64_t> collectivesRun;
  std::map<int32_t, std::vector<float>> outputs_;
  /// Device copies of the outputs, read at the end of the step, and the
  /// outputs recorded in this step.
  std::map<int32_t, std::shared_ptr<DeviceBuffer>> outputCopies_;
  std::vector<std::pair<int32_t, int64_t>> pendingOutputs_;
  /// Updates gathered until the last of a run of Update instructions, and
  /// the tensors they update.
  std::vector<Backend::UpdateRequest> pendingUpdates_;
  std::vector<int32_t> pendingUpdateTensors_;
  std::vector<TraceEvent> trace_;
  bool timeKernels_ = false;
  bool cpuTimeKernels_ = false;
  KernelTimings timings_;
  /// A kernel timed on a backend that queues its work: its profile key and
  /// stage, and device events at the end of the kernel or communication
  /// before it and at its own end, read once the step's work is done.
  struct DeviceTimedKernel {
    std::string key;
    int32_t stage;
    std::shared_ptr<Event> from, to;
  };
  std::vector<DeviceTimedKernel> deviceTimed_;
  std::string profileKey(const ppc::planfile::Op &op, const char *phase,
                         const std::vector<DeviceView> &inputs);
  /// Key of the kernel instruction executed last (set by kernel()).
  std::string kernelKey_;
  std::vector<BoxValues> keptGrads_;
  std::vector<BoxValues> kinkInputs_;
  /// Per op, whether it has kinks (kinkedDerivative is not null).
  std::vector<bool> kinked_;
  std::vector<int32_t> updated_;
  /// The gradient box each weight buffer was last updated over.
  std::map<int32_t, std::pair<Index, Index>> updatedBoxes_;
  std::shared_ptr<DeviceBuffer> staging_;
  /// A synthetic input box of a later step, drawn on a thread while this
  /// step runs, where the backend queues its work (cuda), whose device
  /// would otherwise idle while the host draws them (ResNet-50's 32 images at
  /// 224x224 took 44 ms of a 195 ms step on an H200).
  struct DrawnInput {
    int64_t step;
    Index lo, hi;
    std::future<std::pair<absl::Status, std::vector<float>>> values;
  };
  std::map<int32_t, DrawnInput> drawnInputs_;

  LossScale lossScale_;
  bool gradientsChecked_ = false;
  bool skipUpdates_ = false;

  bool overlap_ = false;
  bool overlapPlanned_ = false;
  /// Per instruction: the collectives (instruction indices) that start
  /// after it, and whether it is one that started earlier.
  std::vector<std::vector<int>> startsAfter_;
  std::vector<bool> startedEarly_;
  /// The collectives started early, by instruction.
  std::map<int, StartedCollective> started_;

  int64_t step_ = 0;
  int phase_ = 0;
  int index_ = 0;
  bool keepGradients_ = false;
};

} // namespace ppc::runtime

#endif // PPC_RUNTIME_EXECUTOR_PROGRAMRUNNER_H
