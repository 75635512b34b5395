//===- DynamicProgramming.cpp - OptCNN elimination, Unity splits ----------===//
//
// The additive cost model: cost(S) = sum_op nodeCost(op, S[op]) + sum over
// op-to-op edges edgeCost(consumer, operand, S[producer], S[consumer]), i.e.
// a pairwise model on the op graph (node tables and edge tables).
//
// 1. Elimination (OptCNN): parallel edges between two ops merge by adding
//    their tables; an op with exactly two incident edges to two distinct
//    ops (one in, one out on a chain) is replaced by one edge whose table
//    is minimized over the op's configurations; an op with a single
//    incident edge (a branch end, an op fed only by inputs) folds into its
//    neighbour's node table. Each step keeps its argmins for backtracking
//    and is exact, so a series-parallel graph (or a tree of them) reduces
//    to isolated ops and is solved exactly.
// 2. What does not reduce (skip connections that break series-parallelism)
//    is a core of ops whose tables carry the eliminated ops exactly. A small
//    core is enumerated. A large one is cut, as Unity does, at bottleneck
//    ops (no core edge jumps over them in topological order), each segment
//    is solved for every pair of configurations of its two cut ops, and a DP
//    over the sequence of cut ops chains the segments; a segment too large
//    to enumerate falls back to coordinate descent (not exact).
//    Repeated structure (transformer layers, ResNet blocks) is solved once:
//    ops of one cost class (costClasses) share one node table, edges between
//    the same classes one edge table, and every elimination is memoized by
//    the content ids of the tables it reads, so the eliminations of the
//    second and later identical layers are look-ups. On machines where the
//    tables over every view would be large, they cover the views anchored
//    at device 0 (a homogeneous machine's translates of a layout cost the
//    same in the additive model), then also at most two split dims; the
//    refinement (4) reaches the rest of the space.
// 3. The strategy is simulated in full; if it overflows memory, the DP is
//    re-run with configurations that need more than a half (a quarter) of
//    a device by themselves rejected; if that still overflows, the answer
//    gets ZeRO stage 1, then 2, then 2 with recomputation of single-reader
//    ops, then 3 with it (the DP's space has neither); data parallel is the
//    fallback, and where it or a whole-network 2-D layout of the space
//    (sampleByParameter) simulates faster than the answer, refinement
//    starts from that.
// 4. Refinement under the simulator: sweeps of single-op moves (each op to
//    each of its configurations, kept when the simulated objective drops;
//    after the first sweep, only ops next to one that changed) until none
//    helps. trace.front() is the DP's answer before it.
//
//===----------------------------------------------------------------------===//

#include "DpDetail.h"
#include "OpFootprint.h"
#include "PairwiseSolver.h"
#include "ParallelFor.h"

#include "ppc/Search/Blocks.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>

namespace ppc::search {

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kInf = std::numeric_limits<double>::infinity();
using detail::Pairwise;
using detail::Table;

/// Edge-table entries (summed over distinct tables) the DP builds over the
/// search's own space at most; above it, a coarser space (tableSpace).
constexpr double kTableEntries = 1e6;

/// Which tables the additive model needs: each op's cost class
/// (costClasses) with one representative op per class, and each op-to-op
/// edge with its distinct table, one per (producer class, result, consumer
/// class, operand).
struct TableLayout {
  struct EdgeAt {
    size_t producer = 0, consumer = 0, operand = 0;
  };
  std::vector<int32_t> classOf;
  std::vector<size_t> representative; ///< per class.
  std::vector<EdgeAt> edges;          ///< every op-to-op edge.
  std::vector<int64_t> tableOf;       ///< per edge.
  std::vector<EdgeAt> tables;         ///< per table: its first edge.

  explicit TableLayout(const sim::Graph &graph) : classOf(costClasses(graph)) {
    for (size_t op = 0; op < graph.ops.size(); ++op) {
      size_t c = static_cast<size_t>(classOf[op]);
      if (c == representative.size())
        representative.push_back(op); // classes are numbered as they appear
    }
    std::map<std::array<int64_t, 4>, int64_t> ids;
    for (size_t op = 0; op < graph.ops.size(); ++op)
      for (size_t o = 0; o < graph.ops[op].operands.size(); ++o) {
        const sim::Source &src = graph.ops[op].operands[o];
        if (src.kind != sim::Source::Kind::Op)
          continue;
        EdgeAt edge{static_cast<size_t>(src.index), op, o};
        auto [it, inserted] =
            ids.try_emplace({classOf[src.index], src.result, classOf[op],
                             static_cast<int64_t>(o)},
                            static_cast<int64_t>(tables.size()));
        if (inserted)
          tables.push_back(edge);
        edges.push_back(edge);
        tableOf.push_back(it->second);
      }
  }
  size_t numClasses() const { return representative.size(); }

  /// Entries of the distinct edge tables over `space`.
  double entries(const ConfigSpace &space) const {
    double sum = 0;
    for (const EdgeAt &t : tables)
      sum += static_cast<double>(space.configs(t.producer).size()) *
             static_cast<double>(space.configs(t.consumer).size());
    return sum;
  }
};

/// The additive model's tables, built once per cost class and pair of
/// classes, and its minimization.
struct AdditiveModel {
  Pairwise base;
  /// Per op, its cost class (costClasses); per class, the configurations
  /// the tables cover and each one's own memory over the device's limit.
  std::vector<int32_t> classOf;
  std::vector<std::vector<OpConfig>> configs;
  std::vector<std::vector<double>> ownShare;
  int64_t evaluated = 0;
  /// Eliminations answered from the memo, edge tables shared.
  int64_t reused = 0;
  bool exact = true;
  /// Set when `stop` said to give up before every table was built.
  bool abandoned = false;

  /// `stop` is polled while the tables are built (they grow with the square
  /// of the configurations per op, which is large on big machines). The
  /// tables are built on one worker per simulator in `workers` (each with
  /// its own caches); every entry lands in its own slot, so the tables do
  /// not depend on the number of workers.
  /// `stop` is given the share of the tables' entries priced so far, so
  /// that it can give up on tables projected to outlast the budget.
  AdditiveModel(
      const Problem &problem, const ConfigSpace &space,
      const TableLayout &layout, const std::vector<sim::Simulator *> &workers,
      const std::function<bool(double)> &stop = [](double) { return false; })
      : classOf(layout.classOf) {
    const sim::Graph &graph = problem.graph;
    size_t n = graph.ops.size();
    size_t numClasses = layout.numClasses();
    const std::vector<TableLayout::EdgeAt> &edgeOf = layout.tables;
    configs.resize(numClasses);
    for (size_t c = 0; c < numClasses; ++c)
      configs[c] = space.configs(layout.representative[c]);

    int numWorkers = static_cast<int>(workers.size());
    // Entries: a node cost per configuration of each class, an edge cost
    // per pair of configurations of each table.
    double entries = 0;
    for (size_t c = 0; c < numClasses; ++c)
      entries += static_cast<double>(configs[c].size());
    for (const TableLayout::EdgeAt &edge : edgeOf)
      entries += static_cast<double>(configs[classOf[edge.producer]].size()) *
                 static_cast<double>(configs[classOf[edge.consumer]].size());
    std::atomic<int64_t> priced{0};
    std::atomic<bool> stopped{false};
    auto shouldStop = [&] {
      if (!stopped.load(std::memory_order_relaxed) &&
          stop(static_cast<double>(priced.load()) / std::max(entries, 1.0)))
        stopped.store(true);
      return stopped.load(std::memory_order_relaxed);
    };
    std::vector<detail::FootprintProfiler> profilers;
    for (int w = 0; w < numWorkers; ++w)
      profilers.emplace_back(problem);
    size_t numDevices = static_cast<size_t>(problem.machine.numDevices());
    std::vector<std::vector<double>> nodeValues(numClasses);
    ownShare.assign(numClasses, {});
    detail::parallelFor(numWorkers, numClasses, [&](int w, size_t c) {
      size_t op = layout.representative[c];
      for (const OpConfig &config : configs[c]) {
        if (shouldStop())
          return;
        nodeValues[c].push_back(workers[w]->nodeCost(op, config));
        ++priced;
        detail::OpFootprint f = profilers[w].profile(op, config);
        double share = 0;
        for (size_t d = 0; d < numDevices; ++d)
          share = std::max(share,
                           static_cast<double>(f.memory[d] + f.workspace[d]) /
                               static_cast<double>(profilers[w].limit(d)));
        ownShare[c].push_back(share);
      }
    });
    // Edge tables row by row (a row: one producer configuration).
    std::vector<std::vector<double>> edgeValues(edgeOf.size());
    std::vector<std::pair<size_t, size_t>> rows; // (table, row).
    for (size_t k = 0; k < edgeOf.size(); ++k) {
      auto [p, op, o] = edgeOf[k];
      size_t np = configs[classOf[p]].size(), nc = configs[classOf[op]].size();
      edgeValues[k].assign(np * nc, 0);
      for (size_t row = 0; row < np; ++row)
        rows.push_back({k, row});
    }
    if (!shouldStop())
      detail::parallelFor(numWorkers, rows.size(), [&](int w, size_t item) {
        auto [k, row] = rows[item];
        auto [p, op, o] = edgeOf[k];
        const std::vector<OpConfig> &consumers = configs[classOf[op]];
        const OpConfig &cp = configs[classOf[p]][row];
        double *out = &edgeValues[k][row * consumers.size()];
        for (size_t j = 0; j < consumers.size(); ++j) {
          if (shouldStop())
            return;
          out[j] = workers[w]->edgeCost(op, o, cp, consumers[j]);
          ++priced;
        }
      });
    if (stopped) {
      abandoned = true;
      return;
    }
    std::vector<Table> nodeTables(numClasses), edgeTables(edgeOf.size());
    for (size_t c = 0; c < numClasses; ++c) {
      evaluated += static_cast<int64_t>(nodeValues[c].size());
      nodeTables[c] =
          std::make_shared<const std::vector<double>>(std::move(nodeValues[c]));
    }
    for (size_t k = 0; k < edgeOf.size(); ++k) {
      evaluated += static_cast<int64_t>(edgeValues[k].size());
      edgeTables[k] =
          std::make_shared<const std::vector<double>>(std::move(edgeValues[k]));
    }

    // Ids: classes first, then edge keys, then what the solver makes.
    base.count.resize(n);
    base.node.resize(n);
    base.nodeId.resize(n);
    for (size_t op = 0; op < n; ++op) {
      base.count[op] = configs[classOf[op]].size();
      base.node[op] = nodeTables[classOf[op]];
      base.nodeId[op] = classOf[op];
    }
    for (size_t e = 0; e < layout.edges.size(); ++e) {
      int64_t table = layout.tableOf[e];
      base.edges.push_back({layout.edges[e].producer, layout.edges[e].consumer,
                            edgeTables[table],
                            static_cast<int64_t>(numClasses) + table, true});
    }
    reused += static_cast<int64_t>(base.edges.size() - edgeOf.size());
    base.nextId = static_cast<int64_t>(numClasses + edgeOf.size());
  }

  /// The additive optimum with configurations that need more than
  /// `fraction` of a device by themselves rejected (unless that rejects all
  /// of an op's).
  sim::Strategy solve(double fraction, const std::atomic<bool> *cancel) {
    size_t n = base.count.size();
    size_t numClasses = configs.size();
    Pairwise model = base;
    std::vector<Table> masked(numClasses);
    for (size_t c = 0; c < numClasses; ++c) {
      bool any = false, over = false;
      for (double share : ownShare[c]) {
        any = any || share <= fraction;
        over = over || share > fraction;
      }
      if (!any || !over)
        continue;
      std::vector<double> table;
      for (size_t i = 0; i < ownShare[c].size(); ++i)
        table.push_back(ownShare[c][i] > fraction ? kInf : 0);
      masked[c] = std::make_shared<const std::vector<double>>(std::move(table));
    }
    for (size_t op = 0; op < n; ++op) {
      const Table &mask = masked[classOf[op]];
      if (!mask)
        continue;
      std::vector<double> table = *model.node[op];
      for (size_t i = 0; i < table.size(); ++i)
        table[i] += (*mask)[i];
      model.node[op] =
          std::make_shared<const std::vector<double>>(std::move(table));
      // Masked tables of one class are equal: one id per class.
      model.nodeId[op] = base.nextId + classOf[op];
    }
    model.nextId = base.nextId + static_cast<int64_t>(numClasses);
    detail::PairwiseSolution solution =
        detail::solvePairwise(std::move(model), cancel);
    evaluated += solution.evaluated;
    reused += solution.reused;
    exact = solution.exact;
    sim::Strategy s(n);
    for (size_t op = 0; op < n; ++op)
      s[op] = configs[classOf[op]][solution.choice[op]];
    return s;
  }
};

} // namespace

sim::Strategy detail::additiveOptimum(const Problem &problem,
                                      const ConfigSpace &space, bool *exact,
                                      int64_t *reused) {
  sim::Simulator simulator(problem.graph, problem.machine, problem.costModel,
                           problem.simOptions);
  AdditiveModel model(problem, space, TableLayout(problem.graph), {&simulator});
  sim::Strategy s = model.solve(1.0, nullptr);
  if (exact)
    *exact = model.exact;
  if (reused)
    *reused = model.reused;
  return s;
}

SearchResult dynamicProgramming(const Problem &problem,
                                const ConfigSpace &space,
                                const SearchOptions &options) {
  auto started = Clock::now();
  SearchResult result;
  result.algorithm = "dynamic programming";
  const sim::Graph &graph = problem.graph;
  size_t n = graph.ops.size();
  if (space.numOps() != n)
    return result;
  for (size_t op = 0; op < n; ++op)
    if (space.configs(op).empty())
      return result;

  sim::Simulator simulator(graph, problem.machine, problem.costModel,
                           problem.simOptions);
  // One simulator per thread: worker 0 is `simulator`.
  std::vector<std::unique_ptr<sim::Simulator>> extra;
  std::vector<sim::Simulator *> workers = {&simulator};
  for (int w = 1; w < std::clamp(options.threads, 1, kMaxSearchThreads); ++w) {
    extra.push_back(std::make_unique<sim::Simulator>(
        graph, problem.machine, problem.costModel, problem.simOptions));
    workers.push_back(extra.back().get());
  }
  auto elapsed = [&] {
    return std::chrono::duration<double>(Clock::now() - started).count();
  };
  auto stop = [&] {
    return (options.cancel && options.cancel->load()) ||
           (options.seconds > 0 && elapsed() > options.seconds);
  };
  // The tables' space: the search's own while its tables stay small, else
  // views anchored at device 0, else also at most two split dims on
  // contiguous views. Never the reduce-scattered variants: each is a
  // change of one op (its producer), which refinement under the simulator
  // tries, and the additive model would only pick among more
  // configurations it prices approximately.
  std::optional<ConfigSpace> coarse;
  const ConfigSpace *tables = &space;
  if (space.options().scatter) {
    SpaceOptions o = space.options();
    o.scatter = false;
    coarse.emplace(graph, problem.machine, o);
    tables = &*coarse;
  }
  TableLayout layout(graph);
  const char *tableSpace = "the whole space";
  bool coarserTables = false; // anchored views: a fraction of the space
  // Anchored contiguous views of at most two split dims, no replicas.
  auto narrowed = [](SpaceOptions o) {
    o.anchoredViews = true;
    o.maxSplitDims = o.maxSplitDims > 0 ? std::min(o.maxSplitDims, 2) : 2;
    o.stridedViews = false;
    o.replicas = false;
    return o;
  };
  for (int level = 1; level <= 2 && layout.entries(*tables) > kTableEntries;
       ++level) {
    SpaceOptions o = tables->options();
    o.anchoredViews = true;
    if (level == 2)
      o = narrowed(o);
    coarse.emplace(graph, problem.machine, o);
    tables = &*coarse;
    coarserTables = true;
    tableSpace = level == 1 ? "views anchored at device 0"
                            : "anchored contiguous views, at most two "
                              "split dims";
  }
  // The tables give up at the budget, or sooner once a tenth of it shows
  // them on course to take more than 1.5 times all of it (on a thousand
  // devices one entry can take seconds: the DP would spend its whole share
  // for nothing).
  auto tablesStop = [&](double done) {
    if (stop())
      return true;
    if (options.seconds <= 0)
      return false;
    double t = elapsed();
    return t > 0.1 * options.seconds &&
           t > 1.5 * options.seconds * std::max(done, 1e-9);
  };
  AdditiveModel model(problem, *tables, layout, workers, tablesStop);
  // Lines, not a live counter: the phases of a DP take seconds each.
  if (options.progress) {
    std::fprintf(stderr,
                 "ppc-search: dp: cost tables over %s: %zu ops in %zu cost "
                 "classes, %lld entries, %lld shared, %.2f s\n",
                 tableSpace, n, layout.numClasses(),
                 static_cast<long long>(model.evaluated),
                 static_cast<long long>(model.reused), elapsed());
  }
  if (model.abandoned) {
    // Out of budget before the DP could start: answer data parallel, and
    // say so, rather than overrun. Under a time budget it is not simulated
    // here: on a model whose tables are out of reach that simulation alone
    // can outlast the share, and whoever takes the answer simulates it in
    // their own (SimResult::stopped says it was not).
    result.algorithm =
        "dynamic programming (budget spent building cost tables; "
        "data parallel)";
    result.cutShort.push_back("dp: its cost tables outlasted its share of "
                              "the budget; it answered data parallel");
    result.strategy = sim::dataParallel(graph, problem.machine.numDevices());
    if (options.seconds > 0)
      result.result.stopped = true;
    else
      result.result = simulator.simulate(result.strategy);
    result.objective = objective(problem, result.result);
    result.iterations = model.evaluated;
    result.seconds = elapsed();
    result.trace.push_back({result.iterations, result.seconds, result.objective,
                            result.objective});
    return result;
  }
  auto solveWith = [&](double fraction) {
    sim::Strategy s = model.solve(fraction, options.cancel);
    result.iterations = model.evaluated;
    return s;
  };

  for (double fraction : {1.0, 0.5, 0.25}) {
    sim::Strategy s = solveWith(fraction);
    sim::SimResult r = simulator.simulate(s);
    double value = objective(problem, r);
    if (result.strategy.empty() || value < result.objective) {
      result.strategy = std::move(s);
      result.result = r;
      result.objective = value;
    }
    if (std::isfinite(result.objective) ||
        (options.cancel && options.cancel->load()))
      break;
  }
  detail::fitToMemory(problem, simulator, result);
  if (options.progress)
    std::fprintf(stderr,
                 "ppc-search: dp: its own answer %.3f ms at %.2f s (%lld "
                 "tables and eliminations shared); refining under the "
                 "simulator\n",
                 result.objective * 1e3, elapsed(),
                 static_cast<long long>(model.reused));
  // First trace point: the DP's own answer, simulated.
  result.trace.push_back(
      {result.iterations, elapsed(), result.objective, result.objective});
  detail::startFromFasterLayout(problem, space, simulator, result);
  // The refinements judge moves from the answer on every worker; each
  // leaves them there for the next.
  if (std::isfinite(result.objective))
    for (sim::Simulator *worker : workers)
      worker->simulate(result.strategy);
  // Where the tables are anchored, refinement runs over spaces of growing
  // size, each a few times the last, from the narrowest: anchored
  // contiguous views of at most two split dims (where the tables had
  // more); the tables' own; every view anchored at device 0 (more split
  // dims, strided views, replicas, the reduce-scattered variants); then the
  // whole space, as long as the budget lasts, unless the caller leaves it
  // to what runs next. Each first sweep judges every op's configurations
  // in its space, and the narrower ones reach most of what refinement
  // finds in a fraction of the time (RNNLM at 4,096 on k80x64: 76.304 ms
  // at 40 s, where a first sweep over the tables' views anchored at device
  // 0 ended at 78.087 ms at 86 s; VGG-16 the whole space's answer over the
  // anchored views in a first sweep of 14 s, where the whole space's first
  // sweep took 24 s).
  auto differs = [](const SpaceOptions &a, const SpaceOptions &b) {
    return a.anchoredViews != b.anchoredViews ||
           a.maxSplitDims != b.maxSplitDims ||
           a.stridedViews != b.stridedViews || a.replicas != b.replicas ||
           a.scatter != b.scatter;
  };
  if (coarserTables) {
    const SpaceOptions &had = tables->options();
    SpaceOptions narrowest = narrowed(had);
    if (differs(narrowest, had)) {
      if (options.progress)
        std::fprintf(stderr,
                     "ppc-search: dp: refining over anchored contiguous "
                     "views, at most two split dims, first\n");
      detail::refineUnderSimulator(
          problem, ConfigSpace(graph, problem.machine, narrowest), workers,
          options, elapsed, result);
    }
    if (options.progress)
      std::fprintf(stderr,
                   "ppc-search: dp: refining over the tables' space "
                   "(%s)\n",
                   tableSpace);
    detail::refineUnderSimulator(problem, *tables, workers, options, elapsed,
                                 result);
    SpaceOptions anchored = space.options();
    anchored.anchoredViews = true;
    if (differs(anchored, had) && differs(anchored, space.options())) {
      if (options.progress)
        std::fprintf(stderr, "ppc-search: dp: refining over the views "
                             "anchored at device 0\n");
      detail::refineUnderSimulator(
          problem, ConfigSpace(graph, problem.machine, anchored), workers,
          options, elapsed, result);
    }
    if (options.progress && options.refineWholeSpace)
      std::fprintf(stderr, "ppc-search: dp: refining over the whole space\n");
  }
  if (!coarserTables || options.refineWholeSpace)
    detail::refineUnderSimulator(problem, space, workers, options, elapsed,
                                 result);
  result.seconds = elapsed();
  result.trace.push_back(
      {result.iterations, result.seconds, result.objective, result.objective});
  return result;
}

} // namespace ppc::search
