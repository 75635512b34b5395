//===- Pipeline.h - pipeline stages, micro-batches, schedules ---*- C++ -*-===//
//
// Pipeline parallelism as one more dimension of a strategy: the ops are cut
// into stages (contiguous in op order), each stage runs on its own block of
// devices (a submesh) with its own intra-op configurations, and the global
// batch runs as micro-batches in a schedule (GPipe, 1F1B).
//
// The simulation composes the op-level simulator: each stage is simulated
// alone, as a graph of its ops at the micro-batch size on its submesh
// (values from earlier stages become inputs), which gives its forward and
// backward time per micro-batch, its gradient-sync and update tail, and its
// memory per micro-batch. The boundary tensors move between stages as each
// receiving device needs them. Then the schedule is timed: each stage runs
// its forwards and backwards in the schedule's order, each waiting for its
// input from the neighbouring stage. Activations of the micro-batches in
// flight (all m for GPipe, at most S - s for 1F1B on stage s) are kept.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SIMULATOR_PIPELINE_H
#define PPC_SIMULATOR_PIPELINE_H

#include "ppc/Simulator/Simulator.h"
#include "ppc/Support/PipelineSchedule.h"

#include <string>
#include <vector>

namespace ppc::sim {

/// How a strategy pipelines its graph: each op's stage is its
/// OpConfig::stage (0 first, non-decreasing in op order, in steps of one),
/// and stage s runs on devices [firstDevice[s], firstDevice[s] +
/// numDevices[s]) only. Without stages the graph runs as one stage on the
/// whole machine, the whole batch at once.
struct Pipeline {
  std::vector<int64_t> firstDevice, numDevices;
  int64_t microbatches = 1;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;

  bool enabled() const { return !firstDevice.empty(); }
  int32_t numStages() const { return static_cast<int32_t>(firstDevice.size()); }
  /// Device groups (distinct submeshes): the stages but for
  /// interleaved-1f1b, which deals several stages to each.
  int32_t numGroups() const {
    return static_cast<int32_t>(pipelineGroups(firstDevice, numDevices));
  }
  /// This pipeline, or without one what runs instead: one stage on all
  /// `numDevices` devices, one micro-batch.
  Pipeline orWholeMachine(int64_t numDevices) const {
    if (enabled())
      return *this;
    Pipeline whole = *this;
    whole.firstDevice = {0};
    whole.numDevices = {numDevices};
    whole.microbatches = 1;
    return whole;
  }
};

/// OK, or why `graph` cannot train as `microbatches` micro-batches run
/// apart (InvalidArgument): an op whose kernel exchanges statistics across its
/// samples (batch norm's, StagedKernel::acrossDims holding a sample dim) would
/// normalize by a micro-batch's statistics instead of the batch's. `training`
/// false: such kernels read running statistics instead
/// (StagedKernel::trainingOnly). The pipeline search, the report and the
/// lowering all ask this; `op`, when given, is set to the op at fault.
absl::Status checkMicroBatching(const Graph &graph, int64_t microbatches,
                                bool training = true, size_t *op = nullptr);

/// OK, or why `pipeline` does not fit `graph`, `strategy` and a machine of
/// `numDevices` devices (InvalidArgument): stages as Pipeline says (every op in
/// stage 0 when there is no pipeline), submeshes disjoint and on the machine,
/// every op's instances on its stage's submesh, at least one micro-batch, every
/// sample dim (as split by its op's degree) dividing into the
/// micro-batches, and checkMicroBatching (for `training`).
absl::Status checkPipeline(const Graph &graph, const Strategy &strategy,
                           const Pipeline &pipeline, int64_t numDevices,
                           bool training = true);

/// `graph` at 1/`microbatches` of its batch: every sample dim and the tensor
/// dims it indexes divided, FLOPs and activation bytes scaled down, weight
/// bytes kept. Sample dims must divide (checkPipeline).
Graph microBatchGraph(const Graph &graph, int64_t microbatches);

/// The options a stage's per-micro-batch simulation runs with: with more
/// than one micro-batch, gradients are accumulated and synchronized once,
/// during the last backward (Megatron-LM; PyTorch DDP's no_sync), so the
/// per-micro-batch simulation syncs after its backward (overlapGradSync
/// off) and the sync is the stage's tail, not traffic that delays every
/// micro-batch's tensor-parallel collectives. With overlapGradSync asked
/// for, a second simulation with it times the tail: what the sync and
/// update take beyond the last backward.
SimOptions stageSimOptions(SimOptions options, int64_t microbatches);

/// One stage alone at one micro-batch (`stage` is the stage's graph at the
/// micro-batch size, `strategy` its ops' configurations on `mesh`).
struct StageAlone {
  /// The simulation with stageSimOptions: forwardTime and backwardTime
  /// are the stage's F and F + B per micro-batch; memory per micro-batch.
  SimResult result;
  /// What the gradient sync and updates take after the last backward (the
  /// sync overlapping that backward when `options` overlap it).
  double tail = 0;
  /// Per op, as Simulator::opTimes gives them.
  std::vector<Simulator::OpTimes> opTimes;
};
StageAlone simulateStageAlone(const Graph &stage, const Machine &mesh,
                              const CostModel &costModel,
                              const SimOptions &options, int64_t microbatches,
                              const Strategy &strategy);

/// A value produced in one stage and read in a later one.
struct BoundaryValue {
  int32_t producer = 0, result = 0;
  int32_t fromStage = 0, toStage = 0;
  /// A weight the receiving stage reads from its holding op (`producer`,
  /// sim::weightHolders) in another stage; -1 for an activation.
  int32_t weight = -1;
};

/// The ops of stage `stage` (`stages[op]` for each op of `graph`) as a graph
/// of their own, in their order: values from other stages and the graph's
/// inputs become inputs, weights are renumbered. A weight held in another
/// stage (a tied embedding read by the last) is an input too: the plan
/// sends it for every micro-batch and its gradient back, and the holder's
/// stage keeps, synchronizes and updates it. With `boundary`, the values
/// from other stages are appended to it.
Graph stageGraph(const Graph &graph, const std::vector<int32_t> &stages,
                 int32_t stage, std::vector<BoundaryValue> *boundary = nullptr);

struct PipelineStageResult {
  int64_t firstDevice = 0, numDevices = 0;
  int32_t firstOp = 0, numOps = 0;
  /// Per micro-batch, on the stage alone.
  double forward = 0, backward = 0;
  /// After the stage's last backward: gradient sync left and the update.
  double tail = 0;
  /// Time to send one micro-batch's boundary values to the next stages
  /// (and their gradients back).
  double send = 0;
  /// Micro-batches whose activations the stage keeps at its peak.
  int64_t inFlight = 0;
  /// The most memory a device of the stage needs, and its capacity.
  int64_t peakMemory = 0, capacity = 0;
  /// Fraction of the iteration the stage's compute is idle.
  double bubble = 0;
};

struct PipelineResult {
  double iterationTime = 0;
  bool outOfMemory = false;
  /// A stage's simulation stopped part way (SimResult::stopped): the
  /// iteration time is infinite and nothing else holds.
  bool stopped = false;
  /// Idle fraction of the stages, weighted by their devices.
  double bubbleFraction = 0;
  std::vector<PipelineStageResult> stages;
  /// Every forward and backward of every micro-batch, as timed.
  struct Task {
    int32_t stage = 0;
    int64_t microbatch = 0;
    bool forward = true;
    double start = 0, end = 0;
  };
  std::vector<Task> tasks;
  /// Per device (global indices): memory as the schedule keeps it (its
  /// stage's activations times the micro-batches in flight), compute time
  /// over the iteration, communication time of its stage's simulation times
  /// the micro-batches.
  std::vector<DeviceStats> devices;
  /// Per op of the graph: its times and memory per micro-batch, as its
  /// stage's simulation has them.
  std::vector<Simulator::OpTimes> opTimes;
  /// Bytes moved inside the stages over all micro-batches and across stage
  /// boundaries, by link kind (SimResult::bytesByLinkKind).
  std::array<double, 8> bytesByLinkKind{};
  /// The stages' exchanges between ops over all micro-batches, and the
  /// boundary values (forward, and their gradients back) as point-to-point
  /// exchanges (SimResult::exchanges).
  std::array<SimResult::ExchangeCount, std::size(geometry::kExchangeKinds)>
      exchanges{};

  /// The iteration as a SimResult (time, devices, bytes, memory) for what
  /// reads one: reports, objectives.
  SimResult asSimResult() const;
};

/// Simulates one training iteration of `graph` under `strategy` and
/// `pipeline` (which checkPipeline accepts) on `machine`.
PipelineResult simulatePipeline(const Graph &graph, const Machine &machine,
                                const CostModel &costModel, SimOptions options,
                                const Strategy &strategy,
                                const Pipeline &pipeline);

/// The schedule of `result` as Chrome trace JSON (Perfetto,
/// chrome://tracing): one track per stage, one slice per forward ("F j") and
/// backward ("B j") of micro-batch j, and each stage's tail ("sync +
/// update").
void writePipelineTrace(const PipelineResult &result, std::ostream &os);

} // namespace ppc::sim

#endif // PPC_SIMULATOR_PIPELINE_H
