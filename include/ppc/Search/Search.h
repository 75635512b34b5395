//===- Search.h - SOAP strategy search --------------------------*- C++ -*-===//
//
// MLIR-free search over the SOAP space: per op, a degree vector over its
// splittable iteration dims times a machine view. Strategies are judged by
// the simulator (a whole training iteration); memory-infeasible strategies
// are rejected. The lib/ pass writes the winner as #ppc.strategy attributes
// and nothing else.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SEARCH_SEARCH_H
#define PPC_SEARCH_SEARCH_H

#include "ppc/Simulator/CostModel.h"
#include "ppc/Simulator/Graph.h"
#include "ppc/Simulator/Machine.h"
#include "ppc/Simulator/Pipeline.h"
#include "ppc/Simulator/Simulator.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace ppc::search {

//===----------------------------------------------------------------------===//
// Problem
//===----------------------------------------------------------------------===//

/// What is searched for and how it is judged.
struct Problem {
  const sim::Graph &graph;
  const Machine &machine;
  const sim::CostModel &costModel;
  /// How an iteration is simulated, with the bytes per device a strategy
  /// may use (SimOptions::memoryLimit).
  sim::SimOptions simOptions;
};

/// The search objective: the simulated iteration time, or +infinity when a
/// device needs more memory than allowed or the simulation stopped part
/// way (SimResult::stopped).
double objective(const Problem &problem, const sim::SimResult &result);
/// The same for a simulation's per-device figures and time (a pipeline's).
double objective(const Problem &problem,
                 const std::vector<sim::DeviceStats> &devices,
                 double iterationTime);

//===----------------------------------------------------------------------===//
// Configuration space
//===----------------------------------------------------------------------===//

struct SpaceOptions {
  /// Also split reduction dims (partial sums); attribute and parameter dims
  /// are always searched.
  bool reductionSplits = true;
  /// Degree vectors per op at most (largest total degree first); 0: all.
  int64_t maxDegreeVectors = 0;
  /// Machine views: contiguous blocks at every aligned start, plus strided
  /// views that place partitioned dims across nodes.
  bool stridedViews = true;
  /// Also the partitions replicated over the whole machine (OpConfig::
  /// replicas), each on a contiguous block of devices.
  bool replicas = true;
  /// Degree vectors split at most this many dims (0: any number).
  int maxSplitDims = 0;
  /// Only views that start at device 0 (on a machine of identical devices
  /// every other view is a translate of one of them).
  bool anchoredViews = false;
  /// Also, for each configuration that leaves partial sums, the one that
  /// reduce-scatters them instead of all-reducing them (OpConfig::
  /// scatterDim), along the first result dim indexed by an attribute dim,
  /// else a sample dim, else any, that splits evenly.
  bool scatter = true;
};

/// Every configuration considered for each op: degree vectors over its
/// splittable dims (sample, attribute, parameter, and reduction when
/// allowed) whose product divides the device count and each degree divides
/// its dim, times the machine views that fit the machine. All valid for
/// Simulator::checkConfig.
class ConfigSpace {
public:
  ConfigSpace(const sim::Graph &graph, const Machine &machine,
              SpaceOptions options = {});
  const std::vector<OpConfig> &configs(size_t op) const {
    return lists[listOf[op]];
  }
  size_t numOps() const { return listOf.size(); }
  /// log10 of the number of strategies (product of per-op counts).
  double log10Size() const;
  const SpaceOptions &options() const { return spaceOptions; }

private:
  SpaceOptions spaceOptions;
  /// One list per distinct iteration space (a transformer's layers share
  /// theirs): on hundreds of devices an op has thousands of placements.
  std::vector<std::vector<OpConfig>> lists;
  std::vector<uint32_t> listOf;
};

//===----------------------------------------------------------------------===//
// Baselines
//===----------------------------------------------------------------------===//

/// Megatron-LM's layout, as options.
/// How a context-parallel group gives each attention the keys and values
/// of the whole sequence (Megatron-Core's cp_comm_type).
enum class ContextExchange : uint8_t {
  /// The attention's query positions split like the rest; its keys and
  /// values all-gathered over the group (cp_comm_type all_gather).
  AllGather,
  /// The attention split by heads instead, the sequence whole: an
  /// all-to-all from the sequence split to the heads split before it and
  /// back after (DeepSpeed-Ulysses; cp_comm_type a2a).
  AllToAll,
  /// The attention split along its keys as well as its query positions
  /// (AttentionOp's log-sum-exp merge of key blocks): each device holds a
  /// share of the keys and values instead of all of them.
  KeyBlocks,
  /// The attention's query positions split like the rest; its keys and
  /// values passed around the group a block at a time while each member
  /// computes (OpConfig::ring; cp_comm_type p2p, ring attention).
  Ring,
};

struct ContextExchangeInfo {
  ContextExchange kind;
  const char *name;
  const char *description;
};

/// Every context exchange, in the order options and docs list them.
const std::vector<ContextExchangeInfo> &contextExchanges();
const ContextExchangeInfo *findContextExchange(const std::string &name);

struct MegatronOptions {
  /// Tensor-parallel degree (reduced to the largest divisor of the device
  /// count); data parallel over the rest of the devices.
  int64_t tensorParallel = 1;
  /// Ops outside the tensor-parallel blocks (layer norms, residuals,
  /// dropout) split along the sequence in the group instead of replicated,
  /// and the partial sums of the row-parallel layers reduce-scattered
  /// straight into that split (OpConfig::scatterDim) instead of
  /// all-reduced.
  bool sequenceParallel = false;
  /// Optimizer state sharded over the data-parallel replicas (ZeRO-1).
  bool distributedOptimizer = false;
  /// Activation recomputation as Megatron's full recomputation
  /// (recomputeLayers): only the results crossing every second cheapest
  /// cut (the residual stream, one checkpoint per layer) are kept.
  bool recompute = false;
  /// Weights, gradients and optimizer state sharded over the data-parallel
  /// replicas (ZeRO-3) instead of the optimizer state alone.
  bool shardWeights = false;
  /// Selective recomputation (Korthikanti et al. 2022): inside the
  /// tensor-parallel blocks, the ops without weights read by exactly one
  /// op are recomputed in backward: core attention (the scores, softmax,
  /// dropout and context, or the fused attention op, which Megatron-Core
  /// recomputes too) and the activations between the linears; the
  /// linears' results are kept. Ignored when `recompute` is set.
  bool selectiveRecompute = false;
  /// Context-parallel degree (Megatron-Core's cp): every op split along
  /// the sequence over groups of cp devices, the tensor-parallel group
  /// inside (devices tp, then cp, then dp); reduced to the largest divisor
  /// of the devices the tensor split leaves.
  int64_t contextParallel = 1;
  ContextExchange contextExchange = ContextExchange::AllGather;
  /// Expert-parallel degree (Megatron-Core's expert model parallelism
  /// with expert tensor parallelism 1): the ops on a mixture of experts'
  /// slots (those that carry a dispatch's expert dim) split it over groups
  /// of ep devices, innermost, and their samples over the rest; reduced to
  /// the largest divisor of the device count.
  int64_t expertParallel = 1;
  /// Expert tensor-parallel degree (Megatron-Core's
  /// --expert-tensor-parallel-size): each expert's feed-forward layers
  /// split column- then row-parallel, as a dense block is, over groups of
  /// etp devices innermost in the expert group (devices etp, then ep, then
  /// the experts' data-parallel replicas); the slots the experts read are
  /// replicated over each etp group. 0: as Megatron-Core's layouts before
  /// it: every expert whole on its devices under ep > 1, inside the
  /// tensor-parallel blocks (etp = tp) under ep = 1.
  int64_t expertTensorParallel = 0;
};

/// Megatron-style tensor parallelism for transformer blocks: the parameter
/// dim of the first linear/matmul of each pair split (column parallel) and
/// the reduction dim of the second (row parallel), attention heads split
/// likewise, over `tensorParallel` contiguous devices, data parallel over
/// the groups; linear layers outside blocks (the vocabulary head) column
/// parallel in their group; every other op replicated on each device of
/// its group (or split along the sequence), data parallel across groups.
sim::Strategy megatron(const sim::Graph &graph, const Machine &machine,
                       const MegatronOptions &options);
sim::Strategy megatron(const sim::Graph &graph, const Machine &machine,
                       int64_t tensorParallel);
/// Why megatron() cannot lay `graph` out as `options` ask (InvalidArgument),
/// where megatron() would fall back op by op: degrees that do not divide
/// the machine, or an all-to-all context exchange whose tp x cp does not
/// divide some attention's heads. OK otherwise.
absl::Status checkMegatron(const sim::Graph &graph, const Machine &machine,
                           const MegatronOptions &options);
/// Krizhevsky's "one weird trick": data-parallel convolutions (and
/// everything else), model-parallel (parameter dim split over all devices)
/// fully connected layers.
sim::Strategy oneWeirdTrick(const sim::Graph &graph, const Machine &machine);

/// Every op split the same way: its first splittable parameter dim (output
/// channels, hidden units) by `parameterDegree` where that divides it,
/// contiguous groups of devices, and its sample dim across the groups, the
/// 2-D layout of a whole network (data parallel at `parameterDegree` 1).
sim::Strategy sampleByParameter(const sim::Graph &graph, const Machine &machine,
                                int64_t parameterDegree);

/// Sets the ZeRO stage of every op holding a weight to `stage`, except that
/// a weight other ops read too stays at stage 2 (its holder keeps it whole
/// for them; the lowering refuses stage 3 there).
void shardTrainingState(const sim::Graph &graph, sim::Strategy &strategy,
                        StateSharding stage);
/// Sets activation recomputation on every op read by exactly one op that
/// can recompute (sim::recomputeProblem): activations stay only where the
/// graph branches, as Megatron's full recomputation keeps each layer's
/// input.
void recomputeSingleReaders(const sim::Graph &graph, sim::Strategy &strategy);
/// Megatron-LM's full recomputation: every op that can recompute is
/// recomputed but those whose results cross a kept cut, which stay as the
/// checkpoints: every second of the graph's cheapest cuts (the fewest
/// activation bytes between ops: a transformer's residual stream between
/// sublayers, two per layer), counted back from the end, the last one not
/// kept — one checkpoint per layer, as Megatron-LM keeps each layer's input.
void recomputeLayers(const sim::Graph &graph, sim::Strategy &strategy);

/// Devices per node of `machine` (the Megatron baselines' tensor-parallel
/// degree).
int64_t devicesPerNode(const Machine &machine);

/// An expert strategy by name: what `algorithm=NAME` takes as it is, what
/// MCMC starts from and what reports compare with.
struct BaselineInfo {
  const char *name;
  const char *description;
  sim::Strategy (*build)(const sim::Graph &, const Machine &);
};
/// Every baseline: the one list that option parsers, reports and docs read.
const std::vector<BaselineInfo> &baselines();
/// The baseline named `name`, or null.
const BaselineInfo *findBaseline(const std::string &name);

//===----------------------------------------------------------------------===//
// Search
//===----------------------------------------------------------------------===//

struct TracePoint {
  int64_t iteration = 0;
  double seconds = 0;
  double current = 0; ///< objective of the chain's current strategy.
  double best = 0;    ///< best objective so far (over all chains).
};

/// The most MCMC chains (one thread each) a search runs: far more than the
/// cores of any host, and few enough that every chain's simulator state fits
/// in memory and thread creation does not hit the system's limits.
inline constexpr int kMaxSearchThreads = 256;

struct SearchOptions {
  /// Budget: stop after this many proposals per chain (0: no limit) or
  /// this many seconds (0: no limit); at least one must be set.
  int64_t iterations = 0;
  double seconds = 0;
  uint64_t seed = 1;
  /// Independent MCMC chains run on this many threads, at most
  /// kMaxSearchThreads (more are clamped to it).
  int threads = 1;
  /// Metropolis-Hastings: accept a worse strategy with exp(-beta * dt / t)
  /// where dt / t is the relative slowdown.
  double beta = 20;
  /// Go back to the best strategy after this many proposals without an
  /// improvement (0: never).
  int64_t resetAfter = 2000;
  /// Share of proposals that copy a neighbour's configuration along an edge
  /// instead of drawing a random one.
  double propagateProbability = 0.25;
  /// Share of proposals that keep an op's placement and toggle its
  /// activation recomputation or change the ZeRO stage of its weights.
  double memoryMoveProbability = 0.1;
  /// Share of proposals, for ops with counterparts in repeated blocks
  /// (transformer layers, ResNet blocks), that apply the configuration to
  /// all of them at once.
  double blockMoveProbability = 0.1;
  /// Share of placement proposals that carry the op's new layout along the
  /// graph's edges (sharding propagation: each neighbour takes the
  /// configuration that holds or reads their shared tensor as the changed
  /// op does, then its neighbours, while one does not already), up to a
  /// run of 2, 4, 8, ..., 64 ops (at most the graph's size) drawn
  /// log-uniformly.
  double runMoveProbability = 0.8;
  /// Progress with ETA on stderr (only when it is a terminal).
  bool progress = false;
  /// Set to true from another thread to stop early; the best so far wins.
  const std::atomic<bool> *cancel = nullptr;
  /// Record a trace point every this many iterations.
  int64_t traceEvery = 100;
  /// MCMC with a time budget: once this many seconds have passed with no
  /// strategy found that fits in memory, stop (0: never), leaving the rest
  /// of the budget to what runs next (the pipeline search).
  double stopUnfitAfter = 0;
  /// The DP: where its tables cover only views anchored at device 0, its
  /// refinement goes on over the whole space after the anchored views;
  /// false leaves the other placements to what runs next (the default
  /// search's MCMC).
  bool refineWholeSpace = true;
};

struct SearchResult {
  std::string algorithm;
  sim::Strategy strategy;
  /// The strategy's pipeline (pipelineSearch); none for the other searches.
  sim::Pipeline pipeline;
  /// Its simulation when pipelined (`result` is then unset).
  sim::PipelineResult pipelineResult;
  sim::SimResult result;
  double objective = std::numeric_limits<double>::infinity();
  int64_t iterations = 0; ///< strategies simulated or evaluated.
  double seconds = 0;
  std::vector<TracePoint> trace;
  /// What stopped short of its work at the budget, one line each ("mcmc:
  /// 3 of 9 starts simulated before the budget ran out"); the search line
  /// and the report say them.
  std::vector<std::string> cutShort;
  /// What a search of several phases compared, one line each with its
  /// answer ("pipeline search: pipeline of 2 stages x 2 micro-batches
  /// (...): 8.831 ms"); the search line and the
  /// report say them.
  std::vector<std::string> considered;
  /// MCMC: the objective of each start, in the order given (NaN where it
  /// was not simulated: invalid, or the budget ran out first).
  std::vector<double> startObjectives;
};

/// FlexFlow's MCMC: from each start strategy (chains round-robin over the
/// starts), propose a random op's random configuration (or a neighbour's
/// along an edge), simulate it with delta simulation, accept by
/// Metropolis-Hastings, keep the best. Deterministic for a seed and thread
/// count.
/// With a time budget, the starts are simulated until it runs out (the
/// first always); `firstResult`, when the caller has simulated the first
/// start already (the DP's answer), is its simulation. The result's
/// simulation is the winner's own, not simulated again.
SearchResult mcmc(const Problem &problem, const ConfigSpace &space,
                  const std::vector<sim::Strategy> &starts,
                  const SearchOptions &options,
                  const sim::SimResult *firstResult = nullptr);

/// Dynamic programming over a series-parallel decomposition of the graph
/// (OptCNN's node and edge elimination): exact for its own cost model,
/// which is the sum over ops of nodeCost plus the sum over edges of
/// edgeCost (Simulator::nodeCost/edgeCost), i.e. no overlap between ops.
/// The result is then simulated in full. Graphs that do not reduce to
/// series-parallel are cut at their bottleneck ops and the pieces solved
/// one by one, keeping the configurations of the cut ops fixed. The cost
/// tables grow with the square of the configurations per op: when building
/// them outlasts options.seconds (or options.cancel is set), the result is
/// data parallel, named so in SearchResult::algorithm.
SearchResult dynamicProgramming(const Problem &problem,
                                const ConfigSpace &space,
                                const SearchOptions &options);

/// What pipelineSearch may choose; 0 or empty: it searches that choice.
struct PipelineSearchOptions {
  /// Stages (each on numDevices / stages contiguous devices).
  int64_t stages = 0;
  int64_t microbatches = 0;
  /// The baseline every stage runs inside its submesh.
  std::string stageBaseline;
  /// The schedule; none: 1F1B, then GPipe and interleaved-1f1b tried on
  /// the winner.
  std::optional<PipelineSchedule> schedule;
  /// Candidates whose overlapping producer and consumer pieces exceed this
  /// many pairs are skipped: the simulator keeps a transfer per pair, and a
  /// layout resharding every edge all-to-all over hundreds of devices needs
  /// tens of gigabytes. When every candidate is, the result has no
  /// strategy and its algorithm says why.
  int64_t maxTransferPairs = 20'000'000;
  /// Whether Alpa's stage DP proposes cuts and submesh sizes besides the
  /// equal cuts (unless `stages` is fixed).
  bool stageDp = true;
  /// Whether the dynamic programming refines an unpipelined winner (one
  /// stage, one micro-batch): off where the caller ran it on the whole
  /// graph already (the default search).
  bool refineUnpipelined = true;
};

/// Pipelines as Megatron-LM and Alpa build them, searched by simulation:
/// for each stage count S dividing the nodes (the devices on one node),
/// most first, the ops cut into S contiguous stages of equal forward FLOPs
/// on equal contiguous submeshes; for each micro-batch count m (powers of
/// two from S, or 1 for S = 1, while the batch divides); inside each stage
/// every baseline (data parallel,
/// ZeRO, Megatron's tensor parallel layouts: with S >= 2 and a Megatron
/// baseline this is Megatron-LM's TP x PP x DP layout), built for the
/// stage's ops at the micro-batch size on its submesh. Every candidate is
/// simulated (sim::simulatePipeline, 1F1B) and the fastest that fits wins;
/// then, unless `stages` is fixed or `stageDp` is off, Alpa's stage DP
/// (layer clusters cut where few bytes cross, each simulated alone per
/// submesh size and baseline; contiguous cluster ranges on contiguous
/// blocks of devices, unequal ones included, with a baseline each) at the
/// winner's micro-batch count and its neighbours proposes plans that are
/// simulated whole; then, unless `stageBaseline` is fixed, the dynamic
/// programming searches
/// each stage of the winner (its ops at the micro-batch size on its
/// submesh), kept where the pipeline simulates faster; the winner is also
/// tried as GPipe and interleaved (its submeshes taking v = 2, 4, ...
/// stages each of a finer cut, while that is faster), unless `schedule`
/// fixes one. S = 1 with m = 1 is each baseline unpipelined,
/// so a pipeline is chosen only when the simulator says it is faster.
SearchResult pipelineSearch(const Problem &problem,
                            const SearchOptions &options,
                            const PipelineSearchOptions &pipelineOptions = {});

/// Activation recomputation in a Megatron-LM layout.
enum class Recompute { None, Selective, Full };
struct RecomputeInfo {
  Recompute mode;
  const char *name;
  const char *description;
};
/// Every recomputation mode: the one list option parsers and docs read.
const std::vector<RecomputeInfo> &recomputeModes();
/// The mode named `name`, or null.
const RecomputeInfo *findRecompute(const std::string &name);

/// A Megatron-LM configuration as papers state it (Narayanan et al. 2021,
/// Table 1; Korthikanti et al. 2022): TP x PP x DP devices, micro-batches,
/// interleaving, recomputation, sequence parallelism and the distributed
/// optimizer.
struct MegatronLayout {
  /// Tensor-parallel degree; 0: the devices of a node.
  int64_t tensorParallel = 0;
  /// Pipeline stages, each on the next N / pp devices.
  int64_t pipelineParallel = 1;
  /// The data-parallel degree expected (0: what tp x pp leave); a layout
  /// whose tp x pp x dp is not the device count is refused.
  int64_t dataParallel = 0;
  /// Model chunks per pipeline stage: more than 1 is interleaved 1F1B.
  int64_t virtualStages = 1;
  /// 0: one without a pipeline, else the fastest that fits among the
  /// powers of two from pp that divide the batch.
  int64_t microbatches = 0;
  Recompute recompute = Recompute::None;
  bool sequenceParallel = false;
  bool distributedOptimizer = false;
  /// Weights, gradients and optimizer state sharded over the data-parallel
  /// replicas (ZeRO-3, as Megatron-Core's FSDP) instead of the optimizer
  /// state alone.
  bool shardWeights = false;
  /// Context-parallel degree and exchange (MegatronOptions).
  int64_t contextParallel = 1;
  ContextExchange contextExchange = ContextExchange::AllGather;
  /// Expert-parallel degree (MegatronOptions), at most the devices of a
  /// pipeline rank.
  int64_t expertParallel = 1;
  /// Expert tensor-parallel degree (MegatronOptions, 0 its default); etp x
  /// ep divides the devices of a pipeline rank.
  int64_t expertTensorParallel = 0;
};

/// `layout` built for `problem` and simulated: the ops cut into pp x v
/// stages of equal forward FLOPs (stage k on pipeline rank k mod pp),
/// megatron() inside each at the micro-batch size on its rank's devices.
/// When the layout does not fit the machine or the graph, the error
/// (InvalidArgument) says why.
absl::StatusOr<SearchResult> megatronLayout(const Problem &problem,
                                            const MegatronLayout &layout);

/// Megatron-LM's and Megatron-Core's layouts as one search phase, for
/// graphs whose ops mix sequence positions (transformers): megatronLayout
/// with sequence parallelism where tp > 1, the distributed optimizer, and
/// the least recomputation that fits (none, selective, full), over
/// pp = 64, 32, ..., 1 (deepest first; the batch allowing), tp in
/// {8, 4, 2, 1} (at most a
/// node; tp x pp whose weights and gradients alone overflow a device
/// skipped), on a mixture of experts each ep dividing the experts and a
/// pipeline rank's devices with the experts whole and, where tp and ep
/// both split, split etp = tp ways, cp from 1 with every context exchange;
/// and Ulysses x ZeRO-3
/// (tp 1, all-to-all, fsdp, no or full recomputation). Per tp, pp,
/// recomputation and exchange it takes the smallest cp that fits (found by
/// bisection: memory falls as cp grows), and larger ones only while the
/// data-parallel replicas do not divide the batch; layouts that need at
/// least the memory of one that did not fit (no larger degree, no more
/// recomputation) are not simulated. A pipelined layout starts at one
/// sample per replica per micro-batch and halves the micro-batch count
/// while that is faster and fits; the four fastest pipelined layouts are
/// then interleaved (virtual stages 2, 4, ...) while that is faster. The
/// fastest that fits (or the fastest),
/// within `options.seconds` (0: no limit) or until `options.cancel`, saying
/// in cutShort when it stopped. Empty (no strategy) on one device or where
/// nothing mixes positions.
SearchResult megatronLayouts(const Problem &problem,
                             const SearchOptions &options);

/// Whether `candidate` is the better answer than `incumbent`: the fastest
/// that fits, and without one the fastest (its iteration time, pipelined
/// or not); any candidate beats an empty incumbent, ties keep it.
bool outranks(const SearchResult &candidate, const SearchResult &incumbent);

/// The objective of a pipelined strategy: its iteration time, or +infinity
/// when a device needs more memory than allowed.
double pipelineObjective(const Problem &problem,
                         const sim::PipelineResult &result);

/// Exhaustive search with branch and bound (a strategy's partial sum of
/// node costs bounds it from below): the optimum under the simulator, for
/// small graphs. Fails (empty strategy) if the space exceeds
/// `maxStrategies`.
SearchResult exhaustive(const Problem &problem, const ConfigSpace &space,
                        const SearchOptions &options,
                        double maxStrategies = 1e7);

} // namespace ppc::search

#endif // PPC_SEARCH_SEARCH_H
