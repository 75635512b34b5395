//===- Exhaustive.cpp - branch and bound over the whole space -------------===//
//
// Depth-first over the ops in topological order, one configuration of the
// ConfigSpace at a time; every complete strategy that is not pruned is
// judged by the simulator (delta simulation: only the ops that differ from
// the last leaf are updated, and late ops change most often, which is what
// the simulator re-times cheapest).
//
// The bound is valid for what simulate() returns: a device's compute stream
// runs its kernels one after another, so the iteration time is at least the
// busiest compute stream, and at least the average busy time. Kernel times
// are fixed per (op, configuration), so the assigned ops' per-device busy
// time is known exactly, and each unassigned op adds at least its cheapest
// configuration's total kernel time. Memory only grows as ops are added, so
// a partial strategy that already overflows a device is dropped as well.
//
//===----------------------------------------------------------------------===//

#include "OpFootprint.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

namespace ppc::search {

namespace {

using Clock = std::chrono::steady_clock;

/// Rounding slack: the simulator adds the same kernel times in another
/// order, so a bound equal to the optimum must not prune it.
constexpr double kSlack = 1 - 1e-9;

struct BranchAndBound {
  const Problem &problem;
  const ConfigSpace &space;
  const SearchOptions &options;
  Clock::time_point started;
  size_t numOps, numDevices;

  /// Per op, per configuration (in the order tried).
  std::vector<std::vector<detail::OpFootprint>> footprints;
  std::vector<std::vector<size_t>> order;
  /// Sum over ops >= k of their cheapest total kernel time.
  std::vector<double> suffixMin;
  std::vector<int64_t> limits;

  sim::Simulator simulator;
  bool simulated = false;
  sim::Strategy current, atSimulator;
  std::vector<double> busy;
  double busySum = 0;
  std::vector<int64_t> memory;
  std::vector<std::vector<int64_t>> workspace; ///< per depth.

  SearchResult best;
  bool stopped = false;

  BranchAndBound(const Problem &problem, const ConfigSpace &space,
                 const SearchOptions &options)
      : problem(problem), space(space), options(options), started(Clock::now()),
        numOps(problem.graph.ops.size()),
        numDevices(static_cast<size_t>(problem.machine.numDevices())),
        simulator(problem.graph, problem.machine, problem.costModel,
                  problem.simOptions) {}

  void prepare() {
    detail::FootprintProfiler profiler(problem);
    footprints.resize(numOps);
    order.resize(numOps);
    suffixMin.assign(numOps + 1, 0);
    for (size_t op = 0; op < numOps; ++op) {
      const std::vector<OpConfig> &configs = space.configs(op);
      std::vector<detail::OpFootprint> fp;
      for (const OpConfig &c : configs)
        fp.push_back(profiler.profile(op, c));
      // Cheapest (by additive cost) first: a good incumbent early prunes more.
      std::vector<double> key(configs.size());
      for (size_t c = 0; c < configs.size(); ++c)
        key[c] = simulator.nodeCost(op, configs[c]);
      order[op].resize(configs.size());
      std::iota(order[op].begin(), order[op].end(), 0);
      std::stable_sort(order[op].begin(), order[op].end(),
                       [&](size_t a, size_t b) { return key[a] < key[b]; });
      for (size_t c : order[op])
        footprints[op].push_back(fp[c]);
    }
    for (size_t op = numOps; op-- > 0;) {
      double m = std::numeric_limits<double>::infinity();
      for (const detail::OpFootprint &f : footprints[op])
        m = std::min(m, f.totalCompute);
      suffixMin[op] = suffixMin[op + 1] + m;
    }
    for (size_t d = 0; d < numDevices; ++d)
      limits.push_back(profiler.limit(d));
    current.resize(numOps);
    busy.assign(numDevices, 0);
    memory.assign(numDevices, 0);
    workspace.assign(numOps + 1, std::vector<int64_t>(numDevices, 0));
  }

  bool outOfTime() {
    if (options.cancel && options.cancel->load(std::memory_order_relaxed))
      return true;
    if (options.seconds > 0 &&
        std::chrono::duration<double>(Clock::now() - started).count() >
            options.seconds)
      return true;
    return false;
  }

  void leaf() {
    sim::SimResult r;
    if (!simulated) {
      r = simulator.simulate(current);
      atSimulator = current;
      simulated = true;
    } else {
      for (size_t op = 0; op < numOps; ++op)
        if (atSimulator[op] != current[op]) {
          r = simulator.update(op, current[op]);
          atSimulator[op] = current[op];
        }
    }
    ++best.iterations;
    double value = objective(problem, r);
    if (value < best.objective || best.strategy.empty()) {
      best.objective = value;
      best.strategy = current;
      best.result = r;
      double s = std::chrono::duration<double>(Clock::now() - started).count();
      best.trace.push_back({best.iterations, s, value, value});
    }
    if ((best.iterations & 255) == 0 && outOfTime())
      stopped = true;
  }

  void search(size_t k) {
    if (k == numOps) {
      leaf();
      return;
    }
    const std::vector<OpConfig> &configs = space.configs(k);
    for (size_t i = 0; i < order[k].size() && !stopped; ++i) {
      const detail::OpFootprint &f = footprints[k][i];
      double maxBusy = 0;
      bool fits = true;
      for (size_t d = 0; d < numDevices; ++d) {
        busy[d] += f.compute[d];
        memory[d] += f.memory[d];
        workspace[k + 1][d] = std::max(workspace[k][d], f.workspace[d]);
        maxBusy = std::max(maxBusy, busy[d]);
        fits = fits && memory[d] + workspace[k + 1][d] <= limits[d];
      }
      busySum += f.totalCompute;
      double bound = std::max(maxBusy, (busySum + suffixMin[k + 1]) /
                                           static_cast<double>(numDevices));
      if (fits && bound * kSlack < best.objective) {
        current[k] = configs[order[k][i]];
        search(k + 1);
      }
      for (size_t d = 0; d < numDevices; ++d) {
        busy[d] -= f.compute[d];
        memory[d] -= f.memory[d];
      }
      busySum -= f.totalCompute;
    }
  }
};

} // namespace

SearchResult exhaustive(const Problem &problem, const ConfigSpace &space,
                        const SearchOptions &options, double maxStrategies) {
  auto started = Clock::now();
  SearchResult refused;
  refused.algorithm = "exhaustive";
  size_t numOps = problem.graph.ops.size();
  if (space.numOps() != numOps || numOps == 0)
    return refused;
  double size = 1;
  for (size_t op = 0; op < numOps; ++op)
    size *= static_cast<double>(space.configs(op).size());
  if (size == 0 || size > maxStrategies)
    return refused;

  BranchAndBound bb(problem, space, options);
  bb.prepare();
  bb.best.algorithm = "exhaustive";
  bb.search(0);
  SearchResult result = std::move(bb.best);
  // Nothing fits in memory: no strategy, as for a refused space.
  if (!std::isfinite(result.objective))
    result.strategy.clear();
  result.seconds =
      std::chrono::duration<double>(Clock::now() - started).count();
  return result;
}

} // namespace ppc::search
