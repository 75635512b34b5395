//===- DpRefinement.cpp - the DP's answer fitted and refined --------------===//
//
// After the pairwise model's optimum (DynamicProgramming.cpp): fitting it to
// memory with the steps the DP's space lacks, starting from a faster
// whole-network layout where the additive model misjudged, and single-op
// moves judged by the simulator.
//
//===----------------------------------------------------------------------===//

#include "DpDetail.h"
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
  // simulation) close that gap from the DP's answer. The workers' simulators
  // hold the same strategy; each judges a share of an op's configurations,
  // and the choice is the one a scan in configuration order makes (the
  // first that improves on the best so far), whatever the worker count.
  // After the first sweep an op is looked at again only once a neighbour
  // changed (don't-look bits, as in local search for routing): a move is
  // judged by the whole iteration's time, but what changes its worth is
  // mostly the layouts it exchanges data with; a sweep that finds nothing
  // costs as much as the first.
  if (std::isfinite(result.objective)) {
    for (sim::Simulator *worker : workers)
      worker->simulate(result.strategy);
    size_t numWorkers = workers.size();
    std::vector<double> values;
    const std::vector<std::vector<size_t>> adjacency =
        sim::neighbours(problem.graph);
    std::vector<char> look(n, 1);
    for (int sweep = 0; sweep < 20; ++sweep) {
      bool improved = false;
      for (size_t op = 0; op < n; ++op) {
        if ((options.cancel && options.cancel->load()) ||
            (options.seconds > 0 && elapsed() > options.seconds))
          break;
        if (!look[op])
          continue;
        look[op] = 0;
        OpConfig kept = result.strategy[op];
        // Placements keep the op's ZeRO stage and recomputation (set when
        // the answer needed them to fit).
        std::vector<OpConfig> moves = space.configs(op);
        for (OpConfig &c : moves) {
          c.sharding = kept.sharding;
          c.recompute = kept.recompute;
        }
        values.assign(moves.size(), kInf);
        // Interleaved shares: neighbouring configurations cost alike.
        detail::parallelFor(
            static_cast<int>(numWorkers), numWorkers, [&](int, size_t w) {
              for (size_t i = w; i < moves.size(); i += numWorkers)
                if (!(moves[i] == kept)) {
                  values[i] =
                      objective(problem, workers[w]->update(op, moves[i]));
                  workers[w]->revert();
                }
            });
        result.iterations += static_cast<int64_t>(moves.size()) - 1;
        std::optional<size_t> chosen;
        for (size_t i = 0; i < moves.size(); ++i)
          if (values[i] < result.objective * (1 - 1e-12)) {
            result.objective = values[i];
            chosen = i;
          }
        if (!chosen)
          continue;
        improved = true;
        for (size_t neighbour : adjacency[op])
          look[neighbour] = 1;
        result.strategy[op] = moves[*chosen];
        for (size_t w = 1; w < numWorkers; ++w)
          workers[w]->update(op, moves[*chosen]);
        result.result = simulator.update(op, moves[*chosen]);
      }
      if (options.progress)
        std::fprintf(stderr,
                     "ppc-search: dp: refinement sweep %d: %.3f ms at %.2f s\n",
                     sweep + 1, result.objective * 1e3, elapsed());
      if (!improved)
        break;
    }
  }
}

} // namespace ppc::search::detail
