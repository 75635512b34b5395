//===- Simulator.h - one training iteration, simulated ----------*- C++ -*-===//
//
// Simulates forward, backward, gradient synchronization and the optimizer
// update of one training iteration of a Graph under a Strategy on a Machine.
//
// The iteration is a fixed, issue-ordered list of segments, as a real
// executor issues work: the forward of every op in topological order (the
// transfers into it, its kernels, the all-reduce of its partial sums), then
// the backward in reverse order (gradient transfers, kernels, and — when
// overlapping — the all-reduce of its weight gradients), then the optimizer
// updates. Each resource (a device's compute stream, its communication
// stream, each direction of each link) runs its work in issue order: a task
// starts when its inputs are ready and all its resources are free. One
// linear pass over the segments gives every start and end time.
//
// Delta simulation (FlexFlow's idea): when ops' configurations change,
// only the segments they touch are rebuilt (their kernels, the transfers on
// their edges, their reductions, syncs and updates; counterparts changed
// alike are built once), the result's sums are taken again for the blocks
// of 8 ops that changed, and the timing re-runs the blocks a change
// touches; a block nothing changed in whose inputs are the last pass's
// moved by one shift gets the last pass's times plus that shift (durations
// are whole multiples of 2^-40 s, so that moving is exact). The result is
// identical to a full simulation, to the last bit, and tested to be.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SIMULATOR_SIMULATOR_H
#define PPC_SIMULATOR_SIMULATOR_H

#include "ppc/Simulator/Collectives.h"
#include "ppc/Simulator/CostModel.h"
#include "ppc/Simulator/Graph.h"
#include "ppc/Simulator/Machine.h"
#include "ppc/Support/Exchange.h"

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace ppc::sim {

enum class Optimizer : uint8_t { SGD, Momentum, Adam };

/// What ppc knows of an optimizer: its name in options, plans and docs, the
/// state it keeps per weight element, and its conventional learning rate
/// (PyTorch's Adam default; the usual SGD starting point).
struct OptimizerInfo {
  Optimizer kind;
  const char *name;
  int stateTensors;
  double defaultLearningRate;
};

/// Every optimizer: the one list that option parsers, the lowering, the plan
/// verifier and the docs follow.
inline constexpr OptimizerInfo kOptimizers[] = {
    {Optimizer::SGD, "sgd", 0, 0.01},
    {Optimizer::Momentum, "momentum", 1, 0.01},
    {Optimizer::Adam, "adam", 2, 1e-3},
};

const OptimizerInfo &optimizerInfo(Optimizer optimizer);
/// The optimizer named `name`, or null.
const OptimizerInfo *findOptimizer(const std::string &name);
/// "sgd, momentum or adam", for messages.
std::string optimizerNames();

/// Bytes per element of a weight's training state. A weight stored in 16
/// bits trains in mixed precision: the model's copy and its gradient are
/// 16-bit, and the optimizer keeps an fp32 master copy and fp32 state, so
/// Adam costs 2 + 2 + 12 = 16 B per parameter (as ZeRO counts it). Weights
/// of 32 or 64 bits keep everything in their own type (Adam: 4 + 4 + 8).
/// With `fp32Gradients` a 16-bit weight's gradient is float32 (Megatron-
/// LM's main_grad: Adam 2 + 4 + 12 = 18 B). A frozen weight (batch-norm
/// statistics) has no gradient or state.
struct TrainingStateBytes {
  int64_t weight = 0;
  int64_t gradient = 0;
  int64_t optimizerState = 0;
  int64_t total() const { return weight + gradient + optimizerState; }
};
TrainingStateBytes trainingStateBytes(int64_t elemBytes, bool trainable,
                                      Optimizer optimizer,
                                      bool fp32Gradients = false);
/// OK, or why op `op` cannot be recomputed (OpConfig::recompute): an op
/// whose forward updates state (batch-norm statistics, a weight the
/// optimizer does not train) would update it twice.
absl::Status recomputeProblem(const Graph &graph, size_t op);

/// How replicas of a weight synchronize their gradients.
enum class GradSync : uint8_t { AllReduce, ReduceScatterAllGather };

struct SimOptions {
  Optimizer optimizer = Optimizer::SGD;
  GradSync gradSync = GradSync::AllReduce;
  /// Start each weight's gradient all-reduce right after its backward
  /// (overlapping the rest of backward), or only after the whole backward.
  bool overlapGradSync = true;
  /// Sharded optimizer states (ZeRO-1/2, Megatron's distributed optimizer):
  /// gather the updated parameters during the next iteration's forward
  /// (Megatron-LM's --overlap-param-gather) instead of right after the
  /// update. The iteration then ends with the update, and the gathers
  /// (serialized on each device's links) delay the forward by what they
  /// take beyond it: max(0, gathers - forward) is added.
  bool overlapParamGather = false;
  /// Tensor-parallel communication inside a node next to a contraction
  /// over a weight (sequence parallelism's all-gather before a column-
  /// parallel linear and reduce-scatter after a row-parallel one, and
  /// their backward counterparts) runs in chunks beside the kernel, as
  /// Megatron-Core's --tp-comm-overlap does with Transformer Engine: the
  /// kernel waits for its producer, not for the data, and ends no sooner
  /// than one chunk after the data is there; a reduction starts with the
  /// kernel's first chunk and ends no sooner than one chunk after it.
  bool overlapTensorParallel = false;
  /// A contraction over a weight keeps none of the activation slices it
  /// receives from other devices: its backward gathers them again, beside
  /// its input-gradient half (the weight gradient, the second half, waits
  /// for them). Megatron-LM does this for sequence parallelism's gathered
  /// linear inputs (Korthikanti et al. 2022, section 4.2.2: the sbh(34/t)
  /// per layer). ppc-run keeps what it receives (false).
  bool regatherInputs = false;
  /// 16-bit weights accumulate and synchronize their gradients in float32
  /// (Megatron-LM's --accumulate-allreduce-grads-in-fp32, which it forces
  /// for bf16): twice the gradient memory and bytes on the wire.
  bool fp32Gradients = false;
  /// Gradients synchronize in buckets of at least this many bytes (PyTorch
  /// DDP's 25 MB, Megatron-Core's 40M elements): each weight's sync moves
  /// at the rate a bucket that large reaches, its share of the bucket's
  /// time. 0: each weight on its own, at its own size's rate (ppc-run).
  int64_t gradBucketBytes = 0;
  /// Exchanges move as NCCL's collectives move them (docs/simulator.md,
  /// "Exchanges inside a node"): the pieces a partition gathers from k - 1
  /// devices of its node at the link's measured collective rate for the
  /// whole, and every edge's transfers issued in rounds (device i to
  /// i + r), so that the members finish together. false: at the link's own
  /// point-to-point rate, issued destination by destination, the landscape
  /// the searches' optimality tests were accepted on.
  bool exchangesAsCollectives = true;
  /// Name every edge's exchange and count them by kind
  /// (SimResult::exchanges): for reports and ppc-simulate. Off in search,
  /// where classifying each rebuilt edge costs 20-40% of a delta
  /// simulation of a resharded model.
  bool countExchanges = false;
  /// Record every task for a timeline (writeChromeTrace); off in search.
  bool recordTimeline = false;
  /// Bytes each device may hold (ppc-search's and ppc-simulate's
  /// memory-limit), in place of its memory; 0: each device's memory.
  int64_t memoryLimit = 0;

  /// A simulation stops part way, between two ops, once `stop` is set or
  /// the clock passes `deadline` (a search's share of its budget): its
  /// result says so (SimResult::stopped) and is never a search's answer.
  /// A simulator stopped once answers every update() stopped until the
  /// next simulate(). Null and the clock's end: never.
  const std::atomic<bool> *stop = nullptr;
  std::chrono::steady_clock::time_point deadline =
      std::chrono::steady_clock::time_point::max();

  bool stopRequested() const {
    return (stop && stop->load(std::memory_order_relaxed)) ||
           (deadline != std::chrono::steady_clock::time_point::max() &&
            std::chrono::steady_clock::now() >= deadline);
  }

  /// The bytes `device` may hold: DeviceStats::capacity, which the
  /// out-of-memory flag, the search's objective and the reports read.
  int64_t capacityOf(const DeviceSpec &device) const {
    return memoryLimit > 0 ? memoryLimit : device.memoryBytes;
  }
};

/// Where one device's memory goes at the peak (bytes).
struct MemoryUse {
  int64_t weights = 0;
  int64_t gradients = 0;
  int64_t optimizerState = 0;
  /// Op results kept from forward for backward, and received input slices.
  int64_t activations = 0;
  /// The largest transient buffer (an op's result gradient in backward).
  int64_t workspace = 0;
  int64_t total() const {
    return weights + gradients + optimizerState + activations + workspace;
  }
};

struct DeviceStats {
  double computeTime = 0; ///< seconds its compute stream is busy.
  double commTime = 0;    ///< seconds its communication stream is busy.
  double idleTime = 0;    ///< iteration time minus compute time.
  MemoryUse memory;
  int64_t capacity = 0;
};

struct SimResult {
  /// Seconds from the first forward kernel to the last optimizer update.
  double iterationTime = 0;
  /// When the last forward kernel (or partial sum) and the last backward
  /// kernel end: a pipeline stage's forward and backward time per
  /// micro-batch (sim::simulatePipeline).
  double forwardTime = 0, backwardTime = 0;
  std::vector<DeviceStats> devices;
  /// Bytes moved by point-to-point transfers and collectives, by the kind of
  /// link they cross (intra-node vs network), indexed by LinkKind.
  std::array<double, 8> bytesByLinkKind{};
  /// Of those, the gradient synchronizations' (the reduce-scatters and
  /// all-reduces after backward, the gathers after the update): once per
  /// iteration however many micro-batches it has; the rest moves per
  /// micro-batch.
  std::array<double, 8> syncBytesByLinkKind{};
  /// The edges' exchanges (the resharding between ops, forward and
  /// backward; not the partial sums and gradient synchronizations) by
  /// their kind, indexed by geometry::ExchangeKind: how many, and the bytes
  /// they move. Counted with SimOptions::countExchanges, else all zero.
  struct ExchangeCount {
    int64_t count = 0;
    double bytes = 0;
  };
  std::array<ExchangeCount, std::size(geometry::kExchangeKinds)> exchanges{};
  /// True if any device needs more memory than it has.
  bool outOfMemory = false;
  /// True if the simulation stopped part way (SimOptions::stop, deadline):
  /// nothing else in the result holds, and its objective is never finite.
  bool stopped = false;
  /// The device with the largest memory need relative to its capacity.
  int64_t tightestDevice = 0;

  int64_t peakMemory() const;
  double totalBytes() const;
};

class Simulator {
public:
  Simulator(const Graph &graph, const Machine &machine,
            const CostModel &costModel, SimOptions options = {});
  ~Simulator();
  Simulator(const Simulator &) = delete;
  Simulator &operator=(const Simulator &) = delete;

  /// Full simulation: builds every segment for `strategy` and times them.
  /// The strategy is kept for later update() calls.
  SimResult simulate(const Strategy &strategy);
  /// Delta simulation: op `op` changes to `config`; everything else stays
  /// as in the last simulate()/update(). Same result as simulate() of the
  /// whole new strategy.
  SimResult update(size_t op, const OpConfig &config);
  /// Delta simulation of several ops changed at once (a move of a layer's
  /// op in every layer): their segments and edges are rebuilt, and one
  /// timing pass runs from the first of them, so the cost grows with what
  /// changes, not with the changes times the graph. Same result as
  /// simulate() of the whole new strategy.
  SimResult update(const std::vector<std::pair<size_t, OpConfig>> &changes);
  /// Takes back the last update() (a rejected proposal): the simulator is
  /// as it was before it, strategy and timing alike, at the cost of
  /// swapping states back rather than of another delta simulation. Only
  /// right after an update(), once.
  void revert();
  const Strategy &currentStrategy() const;

  /// What the last simulate() or update() did with the ops' forward and
  /// backward timing, and with their updates: ops timed, and ops whose
  /// times it moved by a shift of what precedes them instead (a delta
  /// simulation's blocks that nothing changed in).
  struct TimingStats {
    int64_t opsTimed = 0, opsMoved = 0;
    int64_t updatesTimed = 0, updatesMoved = 0;
  };
  TimingStats lastTimingStats() const;

  /// An additive cost model for searches that need one (the dynamic
  /// programming): the cost of op `op` under `config` alone — its slowest
  /// partition's forward + backward kernels, its partial-sum and gradient
  /// collectives and its update — and of the edge feeding operand `operand`
  /// of op `consumer` — the slowest partition's incoming transfers, forward
  /// plus backward. Neither changes the current strategy; states are
  /// memoized per configuration.
  double nodeCost(size_t op, const OpConfig &config);
  double edgeCost(size_t consumer, size_t operand,
                  const OpConfig &producerConfig,
                  const OpConfig &consumerConfig);

  /// OK when `config` fits `op` and the machine, else the problem.
  absl::Status checkConfig(size_t op, const OpConfig &config) const;

  /// The timeline of the last simulation as Chrome trace JSON (Perfetto,
  /// chrome://tracing): one track per device compute and communication
  /// stream and one per link. Needs SimOptions::recordTimeline.
  void writeChromeTrace(std::ostream &os) const;

  /// Seconds the last simulation charged to each op: forward kernels,
  /// backward kernels, and communication (transfers into it, partial sums,
  /// gradient sync), the slowest partition of each; and the bytes the op
  /// holds on its most loaded device (its weights' training state and the
  /// activations it keeps), as the memory totals count them.
  struct OpTimes {
    double forward = 0, backward = 0, communication = 0;
    int64_t memory = 0;
  };
  std::vector<OpTimes> opTimes() const;
  /// Bytes the last simulation moved in forward into operand `operand` of
  /// op `consumer` from other devices (its gradient moves back as much).
  double forwardBytes(size_t consumer, size_t operand) const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace ppc::sim

#endif // PPC_SIMULATOR_SIMULATOR_H
