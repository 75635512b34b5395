//===- StageDp.cpp - stages x submeshes by dynamic programming ------------===//
//
// Alpa's inter-operator DP (StageDp.h). Costs per cluster come from the
// op-level simulator; the DP adds them per stage, so what it leaves out
// (resharding between a stage's clusters, the transfers between stages,
// overlap of a stage's gradient sync) is what the whole simulation of its
// plans adds back.
//
//===----------------------------------------------------------------------===//

#include "StageDp.h"

#include "ppc/Search/Blocks.h"
#include "ppc/Simulator/Pipeline.h"
#include "ppc/Support/Layout.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <tuple>

namespace ppc::search::detail {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
/// The most stage-latency bounds the DP tries per micro-batch count.
constexpr size_t kMaxLatencyBounds = 32;

int64_t resultBytes(const sim::Op &op, size_t result) {
  int64_t elements = 1;
  for (int64_t size : op.space.results[result].shape)
    elements *= size;
  return elements * op.elemBytes;
}

/// A cluster simulated alone on a submesh with one baseline, per
/// micro-batch: forward + backward latency, the gradient-sync and update
/// tail after it, and the most a device holds of each kind of memory.
struct ClusterCost {
  double latency = kInf, tail = 0;
  int64_t state = 0, activations = 0, workspace = 0;
};

} // namespace

std::vector<int64_t> crossingBytes(const sim::Graph &graph) {
  size_t n = graph.ops.size();
  std::vector<std::vector<size_t>> lastReader(n);
  for (size_t op = 0; op < n; ++op)
    lastReader[op].assign(graph.ops[op].space.results.size(), 0);
  for (size_t op = 0; op < n; ++op)
    for (const sim::Source &src : graph.ops[op].operands)
      if (src.kind == sim::Source::Kind::Op)
        lastReader[src.index][src.result] =
            std::max(lastReader[src.index][src.result], op);
  std::vector<int64_t> delta(n + 1, 0), crossing(n + 1, 0);
  for (size_t op = 0; op < n; ++op)
    for (size_t r = 0; r < lastReader[op].size(); ++r)
      if (lastReader[op][r] > op) {
        int64_t bytes = resultBytes(graph.ops[op], r);
        delta[op + 1] += bytes;
        delta[lastReader[op][r] + 1] -= bytes;
      }
  for (size_t p = 1; p <= n; ++p)
    crossing[p] = crossing[p - 1] + delta[p];
  return crossing;
}

std::vector<int32_t> layerClusters(const sim::Graph &graph, int64_t clusters) {
  size_t n = graph.ops.size();
  std::vector<int32_t> clusterOf(n, 0);
  if (n == 0)
    return clusterOf;
  clusters = std::clamp<int64_t>(clusters, 1, static_cast<int64_t>(n));
  std::vector<int64_t> crossing = crossingBytes(graph);
  // flops[p]: forward FLOPs of the ops before p (op counts without FLOPs).
  std::vector<double> flops(n + 1, 0);
  for (size_t op = 0; op < n; ++op)
    flops[op + 1] = flops[op] + graph.ops[op].cost.fwdFlops;
  if (!(flops[n] > 0))
    for (size_t p = 0; p <= n; ++p)
      flops[p] = static_cast<double>(p);
  double total = flops[n];
  double window = total / (4.0 * static_cast<double>(clusters));
  size_t previous = 0;
  std::vector<size_t> cuts;
  for (int64_t k = 1; k < clusters; ++k) {
    double target = total * static_cast<double>(k) / clusters;
    size_t last = n - static_cast<size_t>(clusters - k);
    size_t best = 0, nearest = 0;
    auto distance = [&](size_t p) { return std::abs(flops[p] - target); };
    for (size_t p = previous + 1; p <= last; ++p) {
      if (nearest == 0 || distance(p) < distance(nearest))
        nearest = p;
      if (distance(p) > window)
        continue;
      if (best == 0 || crossing[p] < crossing[best] ||
          (crossing[p] == crossing[best] && distance(p) < distance(best)))
        best = p;
    }
    previous = best != 0 ? best : nearest;
    cuts.push_back(previous);
  }
  for (size_t op = 0, c = 0; op < n; ++op) {
    while (c < cuts.size() && cuts[c] <= op)
      ++c;
    clusterOf[op] = static_cast<int32_t>(c);
  }
  return clusterOf;
}

bool tooManyTransfers(const sim::Graph &graph, const sim::Strategy &strategy,
                      int64_t limit) {
  std::vector<geometry::OpLayout> layouts;
  for (size_t op = 0; op < graph.ops.size(); ++op)
    layouts.push_back(geometry::computeLayout(graph.ops[op].space,
                                              strategy[op]));
  int64_t pairs = 0;
  std::vector<size_t> candidates;
  for (size_t c = 0; c < graph.ops.size(); ++c)
    for (size_t i = 0; i < graph.ops[c].operands.size(); ++i) {
      const sim::Source &src = graph.ops[c].operands[i];
      if (src.kind != sim::Source::Kind::Op)
        continue;
      const geometry::OpLayout &from = layouts[src.index];
      const geometry::OpLayout &to = layouts[c];
      if (from.numInstances() < 2 || to.numInstances() < 2)
        continue;
      geometry::OverlapIndex index(from.heldBoxes[src.result]);
      for (const geometry::Box &box : to.operandBoxes[i]) {
        index.candidates(box, candidates);
        pairs += static_cast<int64_t>(candidates.size());
      }
      if (pairs > limit)
        return true;
    }
  return false;
}

std::vector<StagePlan> stageDp(const Problem &problem,
                               const std::vector<const BaselineInfo *> &inside,
                               const std::vector<int64_t> &microbatchCounts,
                               const StageDpOptions &options) {
  const sim::Graph &graph = problem.graph;
  const Machine &machine = problem.machine;
  int64_t numDevices = machine.numDevices();
  std::vector<int32_t> clusterOf = layerClusters(graph, options.maxClusters);
  if (clusterOf.empty() || inside.empty() || microbatchCounts.empty())
    return {};
  int32_t numClusters = clusterOf.back() + 1;

  // Clusters alike (the same cost classes wired the same way) cost alike:
  // one simulation each.
  std::vector<int32_t> classes = costClasses(graph);
  std::map<std::vector<int64_t>, int32_t> kinds;
  std::vector<int32_t> kindOf(numClusters), representative;
  {
    std::vector<std::vector<int64_t>> keys(numClusters);
    for (size_t op = 0; op < graph.ops.size(); ++op) {
      std::vector<int64_t> &key = keys[clusterOf[op]];
      key.push_back(classes[op]);
      for (const sim::Source &src : graph.ops[op].operands) {
        bool local = src.kind == sim::Source::Kind::Op &&
                     clusterOf[src.index] == clusterOf[op];
        key.push_back(static_cast<int64_t>(src.kind));
        key.push_back(local ? static_cast<int64_t>(op) - src.index : -1);
        key.push_back(src.result);
      }
    }
    for (int32_t c = 0; c < numClusters; ++c) {
      auto [it, added] = kinds.try_emplace(
          keys[c], static_cast<int32_t>(representative.size()));
      if (added)
        representative.push_back(c);
      kindOf[c] = it->second;
    }
  }

  // Submesh sizes: powers of two and whole-node multiples; on machines of
  // more than 64 devices and several nodes, whole nodes only. A block of
  // devices must lie in one node or be whole nodes.
  auto blockFits = [&](int64_t first, int64_t count) {
    if (count < 1 || first + count > numDevices)
      return false;
    int64_t last = first + count - 1;
    if (machine.getNode(first) == machine.getNode(last))
      return true;
    return (first == 0 ||
            machine.getNode(first - 1) != machine.getNode(first)) &&
           (last + 1 == numDevices ||
            machine.getNode(last + 1) != machine.getNode(last));
  };
  int64_t nodes = machine.numNodes();
  bool wholeNodes = nodes > 1 && numDevices > 64;
  std::vector<int64_t> sizes;
  for (int64_t d = 1; d <= numDevices; d *= 2)
    sizes.push_back(d);
  sizes.push_back(numDevices);
  if (numDevices % nodes == 0)
    for (int64_t k = 1; k <= nodes; ++k)
      if ((k & (k - 1)) == 0 || nodes % k == 0)
        sizes.push_back(k * (numDevices / nodes));
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  sizes.erase(std::remove_if(sizes.begin(), sizes.end(),
                             [&](int64_t d) {
                               return !blockFits(0, d) ||
                                      (wholeNodes &&
                                       machine.getNode(0) ==
                                           machine.getNode(d - 1));
                             }),
              sizes.end());
  size_t numSizes = sizes.size();

  // Each distinct cluster on each size with each baseline, per micro-batch
  // count; sizes ascending, so a stop leaves the small ones complete.
  size_t numCounts = microbatchCounts.size(), numInside = inside.size();
  auto costIndex = [&](size_t mi, size_t di, size_t kind, size_t b) {
    return ((mi * numSizes + di) * representative.size() + kind) *
               numInside +
           b;
  };
  std::vector<ClusterCost> costs(numCounts * numSizes *
                                 representative.size() * numInside);
  std::vector<sim::Graph> micro;
  for (int64_t m : microbatchCounts)
    micro.push_back(sim::microBatchGraph(graph, m));
  size_t completeSizes = 0;
  bool stopped = false;
  for (size_t di = 0; di < numSizes && !stopped; ++di) {
    Machine mesh = machine.subMachine(0, sizes[di]);
    for (size_t mi = 0; mi < numCounts && !stopped; ++mi)
      for (size_t kind = 0; kind < representative.size() && !stopped;
           ++kind) {
        sim::Graph part =
            sim::stageGraph(micro[mi], clusterOf, representative[kind]);
        for (size_t b = 0; b < numInside; ++b) {
          if (options.stop && options.stop()) {
            stopped = true;
            break;
          }
          sim::Strategy strategy = inside[b]->build(part, mesh);
          if (tooManyTransfers(part, strategy, options.maxTransferPairs))
            continue;
          // The stage alone as simulatePipeline times it.
          sim::StageAlone alone = sim::simulateStageAlone(
              part, mesh, problem.costModel, problem.simOptions,
              microbatchCounts[mi], strategy);
          const sim::SimResult &result = alone.result;
          ClusterCost &cost = costs[costIndex(mi, di, kind, b)];
          cost.latency = result.backwardTime;
          cost.tail = std::max(0.0, alone.tail);
          for (const sim::DeviceStats &device : result.devices) {
            const sim::MemoryUse &use = device.memory;
            cost.state = std::max(cost.state, use.weights + use.gradients +
                                                  use.optimizerState);
            cost.activations = std::max(cost.activations, use.activations);
            cost.workspace = std::max(cost.workspace, use.workspace);
          }
        }
      }
    if (!stopped)
      completeSizes = di + 1;
  }
  if (completeSizes == 0)
    return {};
  sizes.resize(completeSizes);
  numSizes = completeSizes;

  // The offsets a cover of the machine by blocks of these sizes can pass.
  size_t numOffsets = static_cast<size_t>(numDevices) + 1;
  std::vector<char> fits(numOffsets * numSizes, 0), reached(numOffsets, 0),
      finishes(numOffsets, 0);
  for (int64_t o = 0; o < numDevices; ++o)
    for (size_t di = 0; di < numSizes; ++di)
      fits[o * numSizes + di] = blockFits(o, sizes[di]);
  reached[0] = 1;
  for (int64_t o = 0; o < numDevices; ++o)
    if (reached[o])
      for (size_t di = 0; di < numSizes; ++di)
        if (fits[o * numSizes + di])
          reached[o + sizes[di]] = 1;
  finishes[numDevices] = 1;
  for (int64_t o = numDevices - 1; o >= 0; --o)
    for (size_t di = 0; di < numSizes; ++di)
      if (fits[o * numSizes + di] && finishes[o + sizes[di]])
        finishes[o] = 1;
  std::vector<int64_t> offsets;
  for (int64_t o = 0; o < numDevices; ++o)
    if (reached[o] && finishes[o])
      offsets.push_back(o);
  if (offsets.empty() || offsets.front() != 0)
    return {};

  // A stage's boundary values go to the next stage and their gradients
  // come back, per micro-batch, over the link between the two blocks: the
  // fill and drain pay it (an estimate: one link carries them all).
  std::vector<int64_t> crossing = crossingBytes(graph);
  std::vector<size_t> firstOpOf(numClusters + 1, graph.ops.size());
  for (size_t op = graph.ops.size(); op-- > 0;)
    firstOpOf[clusterOf[op]] = op;
  auto boundaryTime = [&](size_t j, int64_t next, int64_t m) {
    if (j == static_cast<size_t>(numClusters) || next >= numDevices)
      return 0.0;
    double bytes = static_cast<double>(crossing[firstOpOf[j]]) /
                   static_cast<double>(m);
    if (bytes <= 0)
      return 0.0;
    return 2 * machine.effectiveLink(next - 1, next, bytes)
                   .transferTime(bytes);
  };

  int64_t capacity = problem.simOptions.capacityOf(machine.getSpec(0));
  size_t L = static_cast<size_t>(numClusters);
  size_t maxStages = L;
  std::vector<StagePlan> plans;
  for (size_t mi = 0; mi < numCounts; ++mi) {
    int64_t m = microbatchCounts[mi];
    // Per stage of clusters [k, j) on a size, with f stages from it to the
    // last (its in-flight micro-batches under 1F1B): the fastest baseline
    // that fits, its latency and tail.
    auto stageIndex = [&](size_t f, size_t k, size_t j, size_t di) {
      return ((f * L + k) * (L + 1) + j) * numSizes + di;
    };
    size_t tableSize = (maxStages + 1) * L * (L + 1) * numSizes;
    std::vector<double> latency(tableSize, kInf), tail(tableSize, 0);
    std::vector<int32_t> baselineOf(tableSize, -1);
    for (size_t di = 0; di < numSizes; ++di)
      for (size_t b = 0; b < numInside; ++b)
        for (size_t k = 0; k < L; ++k) {
          double sumLatency = 0, sumTail = 0;
          int64_t state = 0, activations = 0, workspace = 0;
          for (size_t j = k + 1; j <= L; ++j) {
            const ClusterCost &cost =
                costs[costIndex(mi, di, kindOf[j - 1], b)];
            sumLatency += cost.latency;
            sumTail += cost.tail;
            state += cost.state;
            activations += cost.activations;
            workspace = std::max(workspace, cost.workspace);
            if (!std::isfinite(sumLatency))
              break;
            for (size_t f = 1; f <= maxStages; ++f) {
              int64_t inFlight =
                  options.schedule == PipelineSchedule::GPipe
                      ? m
                      : std::min<int64_t>(static_cast<int64_t>(f), m);
              if (state + inFlight * activations + workspace > capacity)
                break;
              size_t at = stageIndex(f, k, j, di);
              if (sumLatency < latency[at]) {
                latency[at] = sumLatency;
                tail[at] = sumTail;
                baselineOf[at] = static_cast<int32_t>(b);
              }
            }
          }
        }
    std::vector<double> boundaryCache((L + 1) * numOffsets, -1);
    auto boundary = [&](size_t j, int64_t next) {
      double &cached = boundaryCache[j * numOffsets + next];
      if (cached < 0)
        cached = boundaryTime(j, next, m);
      return cached;
    };
    // Bounds on the slowest stage: the distinct latencies, thinned; then
    // every distinct latency around the thinned bound that gave the best
    // plan (a plan is found only with a bound between its slowest stage
    // and the next latency that admits a smaller sum, which thinning can
    // step over).
    std::vector<double> allBounds;
    for (double t : latency)
      if (std::isfinite(t))
        allBounds.push_back(t);
    std::sort(allBounds.begin(), allBounds.end());
    allBounds.erase(std::unique(allBounds.begin(), allBounds.end()),
                    allBounds.end());
    std::vector<double> bounds = allBounds;
    if (bounds.size() > kMaxLatencyBounds) {
      std::vector<double> thinned;
      for (size_t i = 0; i < kMaxLatencyBounds; ++i)
        thinned.push_back(
            allBounds[(i + 1) * allBounds.size() / kMaxLatencyBounds - 1]);
      bounds = std::move(thinned);
    }

    // best[s][k][o]: the least latency sum of clusters [k, L) as s stages
    // on devices [o, numDevices), each stage at most `bound`.
    auto dpIndex = [&](size_t s, size_t k, size_t o) {
      return (s * (L + 1) + k) * numOffsets + o;
    };
    std::vector<double> best((maxStages + 1) * (L + 1) * numOffsets);
    std::vector<std::pair<int32_t, int32_t>> choice(best.size());
    std::vector<StagePlan> found;
    double bestEstimate = kInf;
    // Runs the DP with every stage at most `bound`; returns the best
    // estimate of the plans it finds.
    auto planWithin = [&](double bound) {
      double bestHere = kInf;
      std::fill(best.begin(), best.end(), kInf);
      best[dpIndex(0, L, numDevices)] = 0;
      for (size_t s = 1; s <= maxStages; ++s)
        for (size_t k = L; k-- > 0;)
          for (int64_t o : offsets) {
            double &here = best[dpIndex(s, k, o)];
            for (size_t j = k + 1; j <= L; ++j)
              for (size_t di = 0; di < numSizes; ++di) {
                if (!fits[o * numSizes + di])
                  continue;
                double t = latency[stageIndex(s, k, j, di)];
                if (!(t <= bound))
                  continue;
                double rest = best[dpIndex(s - 1, j, o + sizes[di])];
                if (!std::isfinite(rest))
                  continue;
                double total = t + rest + boundary(j, o + sizes[di]);
                if (total < here) {
                  here = total;
                  choice[dpIndex(s, k, o)] = {static_cast<int32_t>(j),
                                              static_cast<int32_t>(di)};
                }
              }
          }
      for (size_t stages = 1; stages <= maxStages; ++stages) {
        if (!std::isfinite(best[dpIndex(stages, 0, 0)]))
          continue;
        StagePlan plan;
        plan.microbatches = m;
        plan.stageOf.resize(graph.ops.size());
        double sum = 0, slowest = 0, slowestTail = 0;
        std::vector<int32_t> stageOfCluster(L);
        size_t k = 0;
        int64_t o = 0;
        for (size_t s = stages; s > 0; --s) {
          auto [j, di] = choice[dpIndex(s, k, o)];
          size_t at = stageIndex(s, k, j, di);
          for (size_t c = k; c < static_cast<size_t>(j); ++c)
            stageOfCluster[c] = static_cast<int32_t>(stages - s);
          plan.firstDevice.push_back(o);
          plan.numDevices.push_back(sizes[di]);
          plan.inside.push_back(inside[baselineOf[at]]);
          sum += latency[at] + boundary(j, o + sizes[di]);
          plan.latency.push_back(latency[at]);
          slowest = std::max(slowest, latency[at]);
          slowestTail = std::max(slowestTail, tail[at]);
          k = j;
          o += sizes[di];
        }
        for (size_t op = 0; op < graph.ops.size(); ++op)
          plan.stageOf[op] = stageOfCluster[clusterOf[op]];
        plan.estimate =
            sum + static_cast<double>(m - 1) * slowest + slowestTail;
        bestHere = std::min(bestHere, plan.estimate);
        auto same = [&](const StagePlan &other) {
          return std::tie(other.stageOf, other.firstDevice, other.numDevices,
                          other.inside) ==
                 std::tie(plan.stageOf, plan.firstDevice, plan.numDevices,
                          plan.inside);
        };
        if (std::none_of(found.begin(), found.end(), same))
          found.push_back(std::move(plan));
      }
      return bestHere;
    };
    double previousBound = 0;
    std::optional<size_t> bestAt;
    for (size_t i = 0; i < bounds.size(); ++i) {
      // A plan new at this bound has a stage slower than the last bound,
      // so m of those at least.
      if (static_cast<double>(m) * previousBound >= bestEstimate)
        break;
      previousBound = bounds[i];
      double estimate = planWithin(bounds[i]);
      if (estimate < bestEstimate) {
        bestEstimate = estimate;
        bestAt = i;
      }
    }
    if (bestAt && bounds.size() < allBounds.size()) {
      size_t at = *bestAt;
      double below = at > 0 ? bounds[at - 1] : -kInf;
      double above = at + 1 < bounds.size() ? bounds[at + 1] : kInf;
      for (double bound : allBounds)
        if (bound > below && bound < above && bound != bounds[at] &&
            static_cast<double>(m) * bound < bestEstimate)
          bestEstimate = std::min(bestEstimate, planWithin(bound));
    }
    std::sort(found.begin(), found.end(),
              [](const StagePlan &a, const StagePlan &b) {
                return a.estimate < b.estimate;
              });
    if (found.size() > options.plansPerMicrobatchCount)
      found.resize(options.plansPerMicrobatchCount);
    for (StagePlan &plan : found)
      plans.push_back(std::move(plan));
  }
  std::stable_sort(plans.begin(), plans.end(),
                   [](const StagePlan &a, const StagePlan &b) {
                     return a.estimate < b.estimate;
                   });
  return plans;
}

} // namespace ppc::search::detail
