//===- StageDp.h - stages x submeshes by dynamic programming ----*- C++ -*-===//
//
// Private to search/. Alpa's inter-operator pass (Zheng et al., OSDI 2022,
// section 5) for the pipeline search: the ops are grouped into layer
// clusters (contiguous, about equal forward FLOPs, cut where the fewest
// bytes cross), each distinct cluster is simulated alone at the
// micro-batch size on every submesh size with every baseline inside, and a
// DP picks contiguous ranges of clusters as stages and a contiguous submesh
// for each, covering the machine, minimizing the sum of the stages'
// per-micro-batch latencies and boundary transfers plus (m - 1) times the
// slowest stage, each stage
// fitting its weights, optimizer state and in-flight activations in memory.
// Its plans are approximations (a stage costs the sum of its clusters) that
// the pipeline search then simulates whole.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SEARCH_STAGEDP_H
#define PPC_SEARCH_STAGEDP_H

#include "ppc/Search/Search.h"

#include <functional>
#include <vector>

namespace ppc::search::detail {

/// Per cut p of `graph` (0 to the op count; cut p lies before op p): the
/// bytes of op results made before it and read from it on.
std::vector<int64_t> crossingBytes(const sim::Graph &graph);

/// Per op of `graph`, its cluster: `clusters` (at most the op count)
/// contiguous groups. Cut k goes where the fewest bytes of op results cross
/// (produced before it, read after it) among the cuts within a quarter of a
/// cluster's FLOPs of the k-th equal-FLOP point, the nearest to it on a tie.
std::vector<int32_t> layerClusters(const sim::Graph &graph, int64_t clusters);

/// Whether `strategy` has more than `limit` pairs of overlapping producer
/// and consumer pieces over the edges of `graph` (op results read by later
/// ops on other devices): too many point-to-point transfers to simulate.
bool tooManyTransfers(const sim::Graph &graph, const sim::Strategy &strategy,
                      int64_t limit);

/// A pipeline the stage DP proposes: stage s holds the ops with stageOf ==
/// s on devices [firstDevice[s], firstDevice[s] + numDevices[s]) with
/// baseline inside[s] built for them.
struct StagePlan {
  std::vector<int32_t> stageOf;
  std::vector<int64_t> firstDevice, numDevices;
  std::vector<const BaselineInfo *> inside;
  int64_t microbatches = 1;
  /// Per stage, its forward + backward latency per micro-batch in the DP's
  /// model: its clusters' summed.
  std::vector<double> latency;
  /// The DP's estimate of the iteration: stage latencies and boundary
  /// transfers summed, plus (m - 1) times the slowest stage, plus the
  /// slowest gradient-sync tail.
  double estimate = 0;
};

struct StageDpOptions {
  int64_t maxClusters = 16;
  /// The best plans kept per micro-batch count.
  size_t plansPerMicrobatchCount = 2;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  int64_t maxTransferPairs = 20'000'000;
  /// Checked before each cluster simulation: true ends them, and the DP
  /// uses the submesh sizes simulated in full.
  std::function<bool()> stop;
};

/// Plans for each of `microbatchCounts` (each dividing every sample dim),
/// best estimate first; `inside` are the baselines a stage may run.
std::vector<StagePlan> stageDp(const Problem &problem,
                               const std::vector<const BaselineInfo *> &inside,
                               const std::vector<int64_t> &microbatchCounts,
                               const StageDpOptions &options);

} // namespace ppc::search::detail

#endif // PPC_SEARCH_STAGEDP_H
