//===- Mcmc.cpp - FlexFlow's Metropolis-Hastings strategy search ----------===//
//
// Independent chains, one per thread, each with its own Simulator so that a
// proposal costs one delta simulation, however many ops it changes (a
// structure move is one update of all of them). A chain proposes
// a neighbour's configuration copied along an edge, a random configuration
// of a random op, or the op's recomputation or ZeRO stage changed; most
// placement proposals carry the new layout along the edges to a run of
// ops that would otherwise reshard (Propagation.h), and a share of the
// others apply the configuration to every counterpart of the op in the
// graph's repeated blocks at once (findRepeatedOps). It accepts by
// Metropolis-Hastings on the relative slowdown, and goes back to its best
// strategy when it has not improved for a while. Chains share
// nothing that affects their choices, so with an iteration budget the result
// depends only on the seed and the number of threads.
//
//===----------------------------------------------------------------------===//

#include "ppc/Search/Blocks.h"
#include "ppc/Search/Search.h"

#include "MemoryChoices.h"
#include "Propagation.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <system_error>
#include <thread>
#include <unistd.h>

namespace ppc::search {

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kInfinity = std::numeric_limits<double>::infinity();
/// Run moves change at most 2^this ops: longer runs cost a delta
/// simulation of that many ops for layouts block moves reach too.
constexpr int kMaxRunLengthBits = 6;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// SplitMix64's finalizer: decorrelates the seeds of chains 0, 1, 2...
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// How far the neediest device is over its memory limit (1: at the limit).
/// Guides chains that start out of memory towards feasible strategies.
double memoryPressure(const Problem &problem, const sim::SimResult &result) {
  double worst = 0;
  for (const sim::DeviceStats &device : result.devices)
    if (device.capacity > 0)
      worst = std::max(worst, static_cast<double>(device.memory.total()) /
                                  static_cast<double>(device.capacity));
  return worst;
}

/// What all chains share while running: the budget, progress counters and
/// the best objective seen anywhere (for the trace and the progress line
/// only; no chain decides anything on it).
struct Shared {
  const Problem &problem;
  const ConfigSpace &space;
  const SearchOptions &options;
  const std::vector<std::vector<size_t>> &adjacency;
  const RepeatedOps &repeated;
  Clock::time_point begin;
  double startObjective;
  std::atomic<int64_t> totalIterations{0};
  std::atomic<bool> timeUp{false};
  std::mutex bestMutex;
  double globalBest;

  /// Whether the chains should stop: the budget's seconds are spent, or
  /// (SearchOptions::stopUnfitAfter) nothing found fits in memory by then.
  /// Sticky, so every chain stops at the same moment it is seen.
  bool outOfTime() {
    if (timeUp.load(std::memory_order_relaxed))
      return true;
    double elapsed = secondsSince(begin);
    bool spent = options.seconds > 0 && elapsed >= options.seconds;
    bool unfit = options.seconds > 0 && options.stopUnfitAfter > 0 &&
                 elapsed >= options.stopUnfitAfter && !std::isfinite(best());
    if (spent || unfit)
      timeUp.store(true, std::memory_order_relaxed);
    return spent || unfit;
  }

  void offerBest(double value) {
    std::lock_guard<std::mutex> lock(bestMutex);
    globalBest = std::min(globalBest, value);
  }
  double best() {
    std::lock_guard<std::mutex> lock(bestMutex);
    return globalBest;
  }
};

struct ChainResult {
  sim::Strategy best;
  sim::SimResult bestResult; ///< best's simulation
  double bestObjective = kInfinity;
  int64_t iterations = 0;
  std::vector<TracePoint> trace;
};

/// SearchOptions::progress says whether (progress=on, or auto on a
/// terminal); the terminal decides how: one line redrawn in place, or in a
/// log a line every few seconds.
bool progressWanted(const SearchOptions &options) { return options.progress; }
bool progressInPlace() { return isatty(2); }

void printProgress(Shared &shared, bool final) {
  const SearchOptions &options = shared.options;
  double elapsed = secondsSince(shared.begin);
  int64_t done = shared.totalIterations.load(std::memory_order_relaxed);
  double best = shared.best();
  double eta = -1;
  if (options.iterations > 0 && done > 0) {
    int64_t total =
        options.iterations * std::clamp(options.threads, 1, kMaxSearchThreads);
    eta = elapsed * static_cast<double>(total - done) / done;
  }
  if (options.seconds > 0) {
    double left = std::max(0.0, options.seconds - elapsed);
    eta = eta < 0 ? left : std::min(eta, left);
  }
  double gain = std::isfinite(shared.startObjective) && std::isfinite(best)
                    ? (1 - best / shared.startObjective) * 100
                    : 0;
  bool inPlace = progressInPlace();
  std::fprintf(stderr,
               "%smcmc: %lld iterations (%.0f/s), best %.3f ms, %.1f%% "
               "better than the start, ETA %.0f s%s",
               inPlace ? "\r" : "", static_cast<long long>(done),
               done / std::max(elapsed, 1e-9), best * 1e3, gain,
               std::max(eta, 0.0), inPlace ? "   " : "\n");
  if (final && inPlace)
    std::fputc('\n', stderr);
  std::fflush(stderr);
}

ChainResult runChain(Shared &shared, size_t chain, const sim::Strategy &start) {
  const Problem &problem = shared.problem;
  const SearchOptions &options = shared.options;
  const sim::Graph &graph = problem.graph;
  int64_t numDevices = problem.machine.numDevices();
  sim::Simulator simulator(graph, problem.machine, problem.costModel,
                           problem.simOptions);
  std::mt19937_64 rng(mix(mix(options.seed) ^ mix(chain + 1)));
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<size_t> pickOp(0, graph.ops.size() - 1);
  bool showProgress = chain == 0 && progressWanted(options);
  const double printEvery = progressInPlace() ? 0.2 : 2.0;

  ChainResult out;
  // A chain that would start after the budget does not start: its start's
  // simulation alone can take seconds on a large model.
  if (shared.outOfTime())
    return out;
  sim::SimResult currentResult = simulator.simulate(start);
  if (currentResult.stopped)
    return out;
  double current = objective(problem, currentResult);
  double currentPressure = memoryPressure(problem, currentResult);
  out.best = start;
  out.bestResult = currentResult;
  out.bestObjective = current;
  int64_t sinceImprovement = 0;
  double lastPrint = 0;
  if (chain == 0)
    out.trace.push_back(
        {0, secondsSince(shared.begin), current, shared.best()});

  // Ops holding a weight: their state sharding is worth proposing; ops
  // whose results something reads and that may be recomputed: their
  // recomputation is.
  const detail::MemoryChoices memory = detail::memoryChoices(graph);
  const std::vector<char> &holdsWeight = memory.holdsWeight;
  const std::vector<int> &maxStage = memory.maxStage;
  const std::vector<char> &recomputable = memory.recomputable;

  // A configuration for `op` that differs from its current one: with
  // probability memoryMoveProbability the same placement with its
  // activation recomputation toggled or another ZeRO stage for the weights
  // it holds, else a neighbour's placement along an
  // edge when that fits the op, else a random one from the space. Placement
  // moves keep the op's recomputation and sharding.
  auto propose = [&](size_t op) -> std::optional<OpConfig> {
    const OpConfig &now = simulator.currentStrategy()[op];
    if (unit(rng) < options.memoryMoveProbability) {
      OpConfig next = now;
      bool shard = holdsWeight[op] && (!recomputable[op] || unit(rng) < 0.5);
      if (shard) {
        int stage = std::uniform_int_distribution<int>(0, maxStage[op])(rng);
        next.sharding = static_cast<StateSharding>(stage);
      } else if (recomputable[op]) {
        next.recompute = !now.recompute;
      }
      if (next == now)
        return std::nullopt;
      return next;
    }
    auto keepMemoryChoices = [&](OpConfig config) {
      config.recompute = now.recompute;
      config.sharding = now.sharding;
      return config;
    };
    if (unit(rng) < options.propagateProbability &&
        !shared.adjacency[op].empty()) {
      const std::vector<size_t> &near = shared.adjacency[op];
      size_t from =
          near[std::uniform_int_distribution<size_t>(0, near.size() - 1)(rng)];
      OpConfig copy = keepMemoryChoices(simulator.currentStrategy()[from]);
      if (copy.degrees.size() == graph.ops[op].space.dims.size() &&
          copy != now &&
          checkConfig(graph.ops[op].space, copy, numDevices).ok())
        return copy;
    }
    const std::vector<OpConfig> &configs = shared.space.configs(op);
    if (configs.empty())
      return std::nullopt;
    OpConfig pick =
        keepMemoryChoices(configs[std::uniform_int_distribution<size_t>(
            0, configs.size() - 1)(rng)]);
    if (pick == now)
      return std::nullopt;
    return pick;
  };

  // Run moves: the ops already in the run being built, and the most
  // doublings of its length (up to the graph's size).
  std::vector<char> inRun(graph.ops.size(), 0);
  int runLengthBits = 1;
  while (runLengthBits < kMaxRunLengthBits &&
         (size_t(1) << runLengthBits) < graph.ops.size())
    ++runLengthBits;

  int64_t pendingCount = 0; // iterations not yet added to the shared total
  while (options.iterations <= 0 || out.iterations < options.iterations) {
    if (options.cancel && options.cancel->load(std::memory_order_relaxed))
      break;
    // The clock is read every few iterations only: a delta simulation can
    // take microseconds.
    if ((out.iterations & 15) == 0) {
      shared.totalIterations.fetch_add(pendingCount, std::memory_order_relaxed);
      pendingCount = 0;
      if (shared.outOfTime())
        break;
      if (showProgress && secondsSince(shared.begin) - lastPrint > printEvery) {
        lastPrint = secondsSince(shared.begin);
        printProgress(shared, false);
      }
    }
    ++out.iterations;
    ++pendingCount;

    size_t op = pickOp(rng);
    std::optional<OpConfig> proposal = propose(op);
    if (proposal) {
      const sim::Strategy &now = simulator.currentStrategy();
      std::vector<std::pair<size_t, OpConfig>> moved = {{op, *proposal}};
      OpConfig placement = *proposal;
      placement.recompute = now[op].recompute;
      placement.sharding = now[op].sharding;
      bool placementMove = placement != now[op];
      int32_t cls = shared.repeated.classOf[op];
      if (placementMove && unit(rng) < options.runMoveProbability) {
        // A run move: the new layout carried to the neighbours that do not
        // already hold or read their shared tensor that way, then theirs.
        size_t cap = size_t(1) << std::uniform_int_distribution<int>(
                         1, runLengthBits)(rng);
        inRun[op] = 1;
        for (size_t k = 0; k < moved.size() && moved.size() < cap; ++k) {
          size_t from = moved[k].first;
          OpConfig fromConfig = moved[k].second;
          for (size_t neighbour : shared.adjacency[from]) {
            if (inRun[neighbour])
              continue;
            std::optional<OpConfig> aligned = detail::alignedConfig(
                graph, neighbour, from, fromConfig, now[neighbour], numDevices);
            if (!aligned || *aligned == now[neighbour])
              continue;
            inRun[neighbour] = 1;
            moved.push_back({neighbour, std::move(*aligned)});
            if (moved.size() >= cap)
              break;
          }
        }
        for (const auto &[member, config] : moved)
          inRun[member] = 0;
      } else if (cls >= 0 && unit(rng) < options.blockMoveProbability) {
        // A structure move: the same configuration for every counterpart
        // of the op in the graph's repeated blocks that can take it.
        for (size_t other : shared.repeated.classes[cls])
          if (other != op && now[other] != *proposal &&
              checkConfig(graph.ops[other].space, *proposal, numDevices).ok())
            moved.push_back({other, *proposal});
      }
      // One delta simulation for all of them: a timing pass per member
      // would make a move of a 1,000-layer model's layers cost 1,000 passes.
      sim::SimResult next = simulator.update(moved);
      // Stopped at the budget's end: nothing to judge or take back.
      if (next.stopped)
        break;
      double value = objective(problem, next);
      bool accept;
      if (!std::isfinite(value)) {
        // Out of memory: only a chain that is itself out of memory may
        // move, and only towards less pressure.
        double pressure = memoryPressure(problem, next);
        accept = !std::isfinite(current) && pressure < currentPressure;
        if (accept)
          currentPressure = pressure;
      } else if (value <= current) {
        accept = true;
      } else {
        double slowdown = (value - current) / current;
        accept = unit(rng) < std::exp(-options.beta * slowdown);
      }
      if (accept) {
        current = value;
        if (std::isfinite(value))
          currentPressure = memoryPressure(problem, next);
        currentResult = std::move(next);
      } else {
        simulator.revert();
      }
    }

    if (current < out.bestObjective) {
      out.bestObjective = current;
      out.best = simulator.currentStrategy();
      out.bestResult = currentResult;
      sinceImprovement = 0;
      shared.offerBest(current);
    } else if (options.resetAfter > 0 && std::isfinite(out.bestObjective) &&
               ++sinceImprovement >= options.resetAfter) {
      // Stuck: start again from the chain's best.
      currentResult = simulator.simulate(out.best);
      if (currentResult.stopped)
        break;
      current = objective(problem, currentResult);
      currentPressure = memoryPressure(problem, currentResult);
      sinceImprovement = 0;
    }

    if (chain == 0 && options.traceEvery > 0 &&
        out.iterations % options.traceEvery == 0)
      out.trace.push_back(
          {out.iterations, secondsSince(shared.begin), current, shared.best()});
  }
  shared.totalIterations.fetch_add(pendingCount, std::memory_order_relaxed);
  if (chain == 0 &&
      (out.trace.empty() || out.trace.back().iteration != out.iterations))
    out.trace.push_back(
        {out.iterations, secondsSince(shared.begin), current, shared.best()});
  return out;
}

/// Runs `run(0)` .. `run(n - 1)`, each on a thread of its own; one whose
/// thread cannot be started (the system's thread limit) runs on this
/// thread instead. The tasks do not depend on each other, so the results
/// are the same either way.
void runOnThreads(size_t n, const std::function<void(size_t)> &run) {
  std::vector<std::thread> threads;
  std::vector<size_t> onThisThread = {0};
  for (size_t t = 1; t < n; ++t) {
    try {
      threads.emplace_back(run, t);
    } catch (const std::system_error &) {
      onThisThread.push_back(t);
    }
  }
  for (size_t t : onThisThread)
    run(t);
  for (std::thread &thread : threads)
    thread.join();
}

} // namespace

SearchResult mcmc(const Problem &problem, const ConfigSpace &space,
                  const std::vector<sim::Strategy> &starts,
                  const SearchOptions &options,
                  const sim::SimResult *firstResult) {
  Clock::time_point begin = Clock::now();
  const sim::Graph &graph = problem.graph;
  int64_t numDevices = problem.machine.numDevices();
  SearchResult out;
  out.algorithm = "MCMC";
  out.startObjectives.assign(starts.size(),
                             std::numeric_limits<double>::quiet_NaN());

  // Starts that do not fit the graph or the machine are left out; with none
  // left, the search starts from data parallelism.
  std::vector<sim::Strategy> validStarts;
  std::vector<size_t> givenIndex; // of each valid start in `starts`
  for (size_t s = 0; s < starts.size(); ++s) {
    const sim::Strategy &start = starts[s];
    bool valid = start.size() == graph.ops.size();
    for (size_t op = 0; valid && op < start.size(); ++op)
      valid = checkConfig(graph.ops[op].space, start[op], numDevices).ok();
    if (valid) {
      validStarts.push_back(start);
      givenIndex.push_back(s);
    }
  }
  if (validStarts.empty()) {
    validStarts.push_back(sim::dataParallel(graph, numDevices));
    givenIndex.push_back(starts.size());
    firstResult = nullptr;
  } else if (givenIndex.front() != 0 || (firstResult && firstResult->stopped)) {
    // The first start given was not valid, or its simulation stopped part
    // way: simulated here if the budget allows.
    firstResult = nullptr;
  }

  // Evaluate the starts first: the result is never worse than the best
  // one simulated. On hundreds of devices one simulation takes seconds:
  // the starts are shared out over the search's threads, and with a time
  // budget none starts once it is spent (the first always runs).
  size_t numThreads =
      static_cast<size_t>(std::clamp(options.threads, 1, kMaxSearchThreads));
  std::vector<sim::SimResult> startResults(validStarts.size());
  std::vector<char> simulated(validStarts.size(), 0);
  if (firstResult) {
    startResults[0] = *firstResult;
    simulated[0] = 1;
  }
  // Whether another start may be simulated: not after the budget, nor
  // after stopUnfitAfter with none simulated so far fitting in memory.
  std::atomic<bool> anyFits{firstResult &&
                            std::isfinite(objective(problem, *firstResult))};
  auto budgetSpent = [&] {
    double elapsed = secondsSince(begin);
    return (options.cancel && options.cancel->load()) ||
           (options.seconds > 0 && elapsed >= options.seconds) ||
           (options.seconds > 0 && options.stopUnfitAfter > 0 &&
            elapsed >= options.stopUnfitAfter && !anyFits.load());
  };
  std::atomic<size_t> nextStart{firstResult ? 1u : 0u};
  runOnThreads(std::min(numThreads, validStarts.size()), [&](size_t) {
    sim::Simulator simulator(graph, problem.machine, problem.costModel,
                             problem.simOptions);
    for (size_t i; (i = nextStart++) < validStarts.size();) {
      if (i > 0 && budgetSpent())
        break;
      startResults[i] = simulator.simulate(validStarts[i]);
      if (startResults[i].stopped)
        break; // at the budget's end: no other start will finish either
      simulated[i] = 1;
      if (std::isfinite(objective(problem, startResults[i])))
        anyFits = true;
    }
  });
  std::vector<size_t> evaluated; // indices into validStarts
  size_t bestIndex = 0;
  double bestObjective = kInfinity;
  for (size_t i = 0; i < validStarts.size(); ++i)
    if (simulated[i]) {
      if (evaluated.empty())
        bestIndex = i;
      evaluated.push_back(i);
      double value = objective(problem, startResults[i]);
      if (givenIndex[i] < starts.size())
        out.startObjectives[givenIndex[i]] = value;
      if (value < bestObjective) {
        bestObjective = value;
        bestIndex = i;
      }
    }
  if (evaluated.size() < validStarts.size())
    out.cutShort.push_back("mcmc: " + std::to_string(evaluated.size()) +
                           " of its " + std::to_string(validStarts.size()) +
                           " starts simulated before the budget ran out");
  sim::Strategy best = validStarts[bestIndex];
  sim::SimResult bestResult = startResults[bestIndex];

  bool hasBudget = options.iterations > 0 || options.seconds > 0;
  if (hasBudget && !graph.ops.empty() && !evaluated.empty() && !budgetSpent()) {
    std::vector<std::vector<size_t>> adjacency = sim::neighbours(graph);
    RepeatedOps repeated = findRepeatedOps(graph);
    Shared shared{problem,  space, options,      adjacency,
                  repeated, begin, bestObjective};
    shared.globalBest = bestObjective;
    std::vector<ChainResult> chains(numThreads);
    runOnThreads(numThreads, [&](size_t c) {
      chains[c] =
          runChain(shared, c, validStarts[evaluated[c % evaluated.size()]]);
    });
    if (progressWanted(options))
      printProgress(shared, true);
    if (shared.timeUp.load() && options.stopUnfitAfter > 0 &&
        !std::isfinite(shared.best()) &&
        secondsSince(begin) < options.seconds) {
      char at[32];
      std::snprintf(at, sizeof at, "%.3g", options.stopUnfitAfter);
      out.cutShort.push_back(
          std::string("mcmc: stopped at ") + at +
          " s with nothing that fits in memory, leaving the rest of the "
          "budget to the pipeline search");
    }

    // Chain order decides ties, so the winner does not depend on timing.
    for (ChainResult &chain : chains) {
      out.iterations += chain.iterations;
      if (chain.bestObjective < bestObjective) {
        bestObjective = chain.bestObjective;
        best = std::move(chain.best);
        bestResult = std::move(chain.bestResult);
      }
    }
    out.trace = std::move(chains[0].trace);
  } else if (hasBudget && !graph.ops.empty() && !evaluated.empty()) {
    out.cutShort.push_back("mcmc: no proposal made: the budget ran out while "
                           "its starts were simulated");
  }
  if (out.trace.empty())
    out.trace.push_back({0, secondsSince(begin), bestObjective, bestObjective});

  out.result = std::move(bestResult);
  out.objective = objective(problem, out.result);
  out.strategy = std::move(best);
  out.seconds = secondsSince(begin);
  return out;
}

} // namespace ppc::search
