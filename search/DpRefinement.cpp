//===- DpRefinement.cpp - the DP's answer fitted and refined --------------===//
//
// After the pairwise model's optimum (DynamicProgramming.cpp): fitting it to
// memory with the steps the DP's space lacks, starting from a faster
// whole-network layout where the additive model misjudged, and memory,
// single-op and pair moves judged by the simulator.
//
//===----------------------------------------------------------------------===//

#include "DpDetail.h"
#include "MemoryChoices.h"
#include "ParallelFor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

namespace ppc::search::detail {

void fitToMemory(const Problem &problem, sim::Simulator &simulator,
                 SearchResult &result) {
  // The DP's space has no ZeRO stages or recomputation (they change no
  // edge): an answer that does not fit gets them, one step of memory saved
  // for time at a time, until it fits; then data parallel does, the same
  // way.
  const sim::Graph &graph = problem.graph;
  auto fitWithMemorySteps = [&](const sim::Strategy &base) {
    for (int step = -1; step < 4; ++step) {
      sim::Strategy s = base;
      if (step >= 0)
        shardTrainingState(graph, s,
                           step == 0  ? StateSharding::Optimizer
                           : step < 3 ? StateSharding::Gradients
                                      : StateSharding::Parameters);
      if (step >= 2)
        recomputeSingleReaders(graph, s);
      sim::SimResult r = simulator.simulate(s);
      double value = objective(problem, r);
      if (std::isfinite(value) || result.strategy.empty()) {
        result.strategy = std::move(s);
        result.result = r;
        result.objective = value;
      }
      if (std::isfinite(value))
        return;
    }
  };
  if (!std::isfinite(result.objective) && !result.strategy.empty())
    fitWithMemorySteps(sim::Strategy(result.strategy));
  if (!std::isfinite(result.objective))
    fitWithMemorySteps(sim::dataParallel(graph, problem.machine.numDevices()));
}

void startFromFasterLayout(const Problem &problem, const ConfigSpace &space,
                           sim::Simulator &simulator, SearchResult &result) {
  const sim::Graph &graph = problem.graph;
  // Where the additive model misjudges the simulator badly (overlap, shared
  // weights read across the whole graph, a latency per collective), data
  // parallel or a whole-network 2-D layout (samples by parameters, the
  // parameter groups inside a node) can simulate faster than the DP's
  // answer: refinement then starts from the fastest. Single-op moves do not
  // get from one such layout to another: each move pays a resharding at
  // both ends of the op.
  // The answer stays in the space searched: a 2-D layout some op's
  // configurations do not include is no start.
  auto inSpace = [&](const sim::Strategy &s) {
    for (size_t op = 0; op < graph.ops.size(); ++op) {
      const std::vector<OpConfig> &configs = space.configs(op);
      if (std::find(configs.begin(), configs.end(), s[op]) == configs.end())
        return false;
    }
    return true;
  };
  const int64_t numDevices = problem.machine.numDevices();
  std::vector<sim::Strategy> starts = {sim::dataParallel(graph, numDevices)};
  for (int64_t degree = 2;
       degree <= devicesPerNode(problem.machine) && degree < numDevices;
       ++degree) {
    if (numDevices % degree != 0)
      continue;
    sim::Strategy layout = sampleByParameter(graph, problem.machine, degree);
    if (inSpace(layout))
      starts.push_back(std::move(layout));
  }
  for (sim::Strategy &s : starts) {
    sim::SimResult r = simulator.simulate(s);
    double value = objective(problem, r);
    if (value < result.objective) {
      result.strategy = std::move(s);
      result.result = r;
      result.objective = value;
    }
  }
}

void refineUnderSimulator(const Problem &problem, const ConfigSpace &space,
                          const std::vector<sim::Simulator *> &workers,
                          const SearchOptions &options,
                          const std::function<double()> &elapsed,
                          SearchResult &result) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  sim::Simulator &simulator = *workers.front();
  const size_t n = problem.graph.ops.size();
  // The additive model charges every op and transfer in sequence; the
  // simulator overlaps partitions on different devices and gradient syncs
  // with backward. Sweeps of single-op moves judged by the simulator (delta
  // simulation) close that gap from the DP's answer, after a sweep that
  // undoes memory fitting where it is not needed. The workers' simulators
  // hold the same strategy; each judges a share of an op's configurations,
  // and the choice is the one a scan in configuration order makes (the
  // first that improves on the best so far), whatever the worker count.
  // After the first sweep an op is looked at again only once a neighbour
  // changed (don't-look bits, as in local search for routing): a move is
  // judged by the whole iteration's time, but what changes its worth is
  // mostly the layouts it exchanges data with; a sweep that finds nothing
  // costs as much as the first.
  if (!std::isfinite(result.objective))
    return;
  const size_t numWorkers = workers.size();
  const std::vector<std::vector<size_t>> adjacency =
      sim::neighbours(problem.graph);
  using Move = std::vector<std::pair<size_t, OpConfig>>;
  std::vector<Move> moves;
  std::vector<double> values;
  // `op`'s configurations other than its current one. Placements keep the
  // op's ZeRO stage and recomputation (set when the answer needed them to
  // fit).
  auto otherConfigs = [&](size_t op) {
    std::vector<OpConfig> configs;
    const OpConfig &kept = result.strategy[op];
    for (OpConfig config : space.configs(op)) {
      config.sharding = kept.sharding;
      config.recompute = kept.recompute;
      if (config != kept)
        configs.push_back(std::move(config));
    }
    return configs;
  };
  // For an op that memory fitting changed (fitToMemory: the same steps on
  // every op alike, where a few may suffice), the same placement with the
  // other ZeRO stages of the weights it holds and its recomputation
  // toggled. Ops it left alone get none: the answer stays in the space
  // searched.
  const MemoryChoices memory = memoryChoices(problem.graph);
  auto memoryMoves = [&](size_t op) {
    const OpConfig &kept = result.strategy[op];
    if (kept.sharding == StateSharding::None && !kept.recompute)
      return;
    if (memory.holdsWeight[op])
      for (int stage = 0; stage <= memory.maxStage[op]; ++stage)
        if (stage != static_cast<int>(kept.sharding)) {
          OpConfig next = kept;
          next.sharding = static_cast<StateSharding>(stage);
          moves.push_back({{op, std::move(next)}});
        }
    if (memory.recomputable[op]) {
      OpConfig next = kept;
      next.recompute = !kept.recompute;
      moves.push_back({{op, std::move(next)}});
    }
  };
  enum class Sweep { Memory, Single, Pairs };
  // The moves tried for `op`: its memory moves only; those and each other
  // placement alone; or each other placement with each other placement of
  // a later neighbour, both at once.
  auto listMoves = [&](size_t op, Sweep kind) {
    moves.clear();
    if (kind != Sweep::Pairs)
      memoryMoves(op);
    if (kind == Sweep::Memory)
      return;
    std::vector<OpConfig> mine = otherConfigs(op);
    if (kind == Sweep::Single) {
      for (OpConfig &config : mine)
        moves.push_back({{op, std::move(config)}});
      return;
    }
    for (size_t neighbour : adjacency[op]) {
      if (neighbour < op)
        continue;
      std::vector<OpConfig> theirs = otherConfigs(neighbour);
      for (const OpConfig &config : mine)
        for (const OpConfig &other : theirs)
          moves.push_back({{op, config}, {neighbour, other}});
    }
  };
  // Single-op sweeps until none helps, then one sweep of pair moves (both
  // ends of every edge over all their configurations: the DP's additive
  // model can misplace where a layout should change, and moving either op
  // alone pays a resharding the pair does not), then single ops again
  // after a pair helped. A pair sweep judges up to configurations² moves
  // per edge: it runs only where that is at most kPairSweepShare times the
  // moves the single sweeps judged so far (a few configurations per op),
  // so that it at most multiplies the refinement's time by a few. Counted
  // in moves, not seconds, so that the answer does not depend on the
  // machine's speed.
  constexpr double kPairSweepShare = 4;
  double singleMoves = 0;
  double pairMoves = 0;
  auto numOthers = [&](size_t op) {
    return std::max(static_cast<double>(space.configs(op).size()) - 1, 0.0);
  };
  for (size_t op = 0; op < n; ++op)
    for (size_t neighbour : adjacency[op])
      if (neighbour > op)
        pairMoves += numOthers(op) * numOthers(neighbour);
  std::vector<char> look(n, 1);
  // Memory moves first, over every op: they are few per op, and the first
  // sweep of placements may end at the budget on a large graph.
  Sweep kind = Sweep::Memory;
  auto stopped = [&] {
    return (options.cancel && options.cancel->load()) ||
           (options.seconds > 0 && elapsed() > options.seconds);
  };
  for (int sweep = 0; sweep < 20 && !stopped(); ++sweep) {
    bool improved = false;
    for (size_t op = 0; op < n; ++op) {
      if (stopped())
        break;
      if (!look[op])
        continue;
      look[op] = 0;
      listMoves(op, kind);
      // No threads for nothing: an op memory fitting left alone has no
      // memory moves.
      if (moves.empty())
        continue;
      values.assign(moves.size(), kInf);
      // Interleaved shares: neighbouring configurations cost alike.
      detail::parallelFor(
          static_cast<int>(numWorkers), numWorkers, [&](int, size_t w) {
            for (size_t i = w; i < moves.size(); i += numWorkers) {
              values[i] = objective(problem, workers[w]->update(moves[i]));
              workers[w]->revert();
            }
          });
      result.iterations += static_cast<int64_t>(moves.size());
      if (kind == Sweep::Single)
        singleMoves += static_cast<double>(moves.size());
      std::optional<size_t> chosen;
      for (size_t i = 0; i < moves.size(); ++i)
        if (values[i] < result.objective * (1 - 1e-12)) {
          result.objective = values[i];
          chosen = i;
        }
      if (!chosen)
        continue;
      improved = true;
      for (const auto &[member, config] : moves[*chosen]) {
        result.strategy[member] = config;
        for (size_t neighbour : adjacency[member])
          look[neighbour] = 1;
      }
      for (size_t w = 1; w < numWorkers; ++w)
        workers[w]->update(moves[*chosen]);
      result.result = simulator.update(moves[*chosen]);
    }
    if (options.progress)
      std::fprintf(stderr,
                   "ppc-search: dp: refinement sweep %d%s: %.3f ms at %.2f s\n",
                   sweep + 1,
                   kind == Sweep::Memory  ? " (memory)"
                   : kind == Sweep::Pairs ? " (pairs)"
                                          : "",
                   result.objective * 1e3, elapsed());
    if (kind == Sweep::Memory) {
      look.assign(n, 1);
      kind = Sweep::Single;
      continue;
    }
    if (!improved &&
        (kind == Sweep::Pairs || pairMoves > kPairSweepShare * singleMoves))
      break;
    if (!improved)
      look.assign(n, 1);
    kind = improved ? Sweep::Single : Sweep::Pairs;
  }
}

} // namespace ppc::search::detail
