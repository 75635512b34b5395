//===- SearchOptimalityTest.cpp - DP and exhaustive against brute force ---===//
//
// Exhaustive search against plain enumeration under the simulator; the DP
// against plain enumeration under its own additive model (chains, a
// residual diamond, a non-series-parallel bridge, a sequence of bridges that
// needs Unity's splits); and the acceptance checks: on a 6-layer MLP and the
// example CNN on 4 and 8 devices, DP and MCMC land within 2% of the
// exhaustive optimum under the same simulator on the landscape they were
// first accepted on, and the DP within 1% with the preset's measured
// figures.
//
//===----------------------------------------------------------------------===//

#include "StatusText.h"
#include "ppc/Import/OnnxImporter.h"
#include "ppc/ModelLoader/ModelLoader.h"
#include "ppc/Search/Search.h"

#include "DpDetail.h"
#include "ppc/Search/Blocks.h"

#include "SimTestGraphs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <iostream>

using namespace ppc;
using namespace ppc::sim;
using namespace ppc::search;

namespace {

using namespace ppc::sim::testing;
using ppc::test::statusText;

/// Elementwise over [n, f] of one or more inputs (relu, add).
Op elementwise(std::string name, int64_t n, int64_t f,
               std::vector<Source> ins) {
  double bytes = 4.0 * static_cast<double>((ins.size() + 1) * n * f);
  std::string kind = ins.size() == 1 ? "ppc.relu" : "ppc.add";
  return ppc::sim::testing::elementwise(
      std::move(name), std::move(kind), n, f, std::move(ins),
      {static_cast<double>(n * f), static_cast<double>(n * f), bytes,
       2 * bytes});
}

/// One DGX H100 node cut down to `devices` GPUs (NVSwitch, 80 GB each);
/// with `measured`, the preset's figures as they are.
Machine h100(int64_t devices, bool measured = false) {
  std::optional<Machine> preset = lookupPreset("dgx-h100");
  EXPECT_TRUE(preset && preset->cluster);
  ClusterSpec c = *preset->cluster;
  c.devicesPerNode = devices;
  c.nicsPerNode = std::min(c.nicsPerNode, devices);
  if (measured)
    return Machine::fromCluster(c, "h100x" + std::to_string(devices));
  // The cost landscape these searches were accepted on (docs/search.md):
  // the H100's GEMMs at the published 80.1% and streaming at the datasheet
  // bandwidth, so that a re-calibration of the preset does not move the
  // search's acceptance. The measured figures are DpWithinOnePercent's.
  c.device.matmulEfficiency = 0.801;
  c.device.bandwidthEfficiency = 0;
  return Machine::fromCluster(c, "h100x" + std::to_string(devices));
}

double spaceSize(const ConfigSpace &space) {
  double size = 1;
  for (size_t op = 0; op < space.numOps(); ++op)
    size *= static_cast<double>(space.configs(op).size());
  return size;
}

/// Calls `visit` with every strategy of `space`.
void forEachStrategy(const ConfigSpace &space,
                     const std::function<void(const Strategy &)> &visit) {
  Strategy s(space.numOps());
  std::function<void(size_t)> rec = [&](size_t op) {
    if (op == space.numOps()) {
      visit(s);
      return;
    }
    for (const OpConfig &c : space.configs(op)) {
      s[op] = c;
      rec(op + 1);
    }
  };
  rec(0);
}

/// The DP's additive cost of a strategy, from tables precomputed once.
struct Additive {
  const Graph &graph;
  std::vector<std::vector<double>> node;
  struct E {
    size_t p, c;
    std::vector<double> t;
  };
  std::vector<E> edges;

  Additive(const Problem &problem, const ConfigSpace &space)
      : graph(problem.graph) {
    Simulator sim(problem.graph, problem.machine, problem.costModel,
                  problem.simOptions);
    for (size_t op = 0; op < graph.ops.size(); ++op) {
      node.emplace_back();
      for (const OpConfig &c : space.configs(op))
        node.back().push_back(sim.nodeCost(op, c));
      for (size_t o = 0; o < graph.ops[op].operands.size(); ++o) {
        const Source &s = graph.ops[op].operands[o];
        if (s.kind != Source::Kind::Op)
          continue;
        E e{static_cast<size_t>(s.index), op, {}};
        for (const OpConfig &a : space.configs(e.p))
          for (const OpConfig &b : space.configs(op))
            e.t.push_back(sim.edgeCost(op, o, a, b));
        edges.push_back(std::move(e));
      }
    }
  }

  double cost(const std::vector<size_t> &idx) const {
    double v = 0;
    for (size_t op = 0; op < node.size(); ++op)
      v += node[op][idx[op]];
    for (const E &e : edges)
      v += e.t[idx[e.p] * node[e.c].size() + idx[e.c]];
    return v;
  }

  /// Minimum over all index vectors, by plain enumeration.
  double bruteForce() const {
    std::vector<size_t> idx(node.size(), 0);
    double best = INFINITY;
    while (true) {
      best = std::min(best, cost(idx));
      size_t op = 0;
      while (op < idx.size() && ++idx[op] == node[op].size())
        idx[op++] = 0;
      if (op == idx.size())
        return best;
    }
  }
};

std::vector<size_t> indicesOf(const ConfigSpace &space, const Strategy &s) {
  std::vector<size_t> idx;
  for (size_t op = 0; op < s.size(); ++op) {
    const auto &cs = space.configs(op);
    size_t i = std::find(cs.begin(), cs.end(), s[op]) - cs.begin();
    EXPECT_LT(i, cs.size()) << "op " << op << " config not in the space";
    idx.push_back(std::min(i, cs.size() - 1));
  }
  return idx;
}

SearchOptions quick() {
  SearchOptions o;
  o.iterations = 2000;
  return o;
}

SpaceOptions smallSpace(int64_t maxDegreeVectors) {
  SpaceOptions o;
  o.maxDegreeVectors = maxDegreeVectors;
  o.stridedViews = false;
  return o;
}

//===----------------------------------------------------------------------===//
// Exhaustive search
//===----------------------------------------------------------------------===//

TEST(Exhaustive, FindsTheBruteForceOptimumOnThreeOps) {
  Graph g;
  g.numInputs = 1;
  g.ops.push_back(linear(g, "fc1", 64, 512, 1024, input()));
  g.ops.push_back(elementwise("relu", 64, 1024, {fromOp(0)}));
  g.ops.push_back(linear(g, "fc2", 64, 1024, 256, fromOp(1)));
  ASSERT_EQ(statusText(g.validate()), "");
  Machine machine = h100(4);
  RooflineCostModel cost;
  Problem problem{g, machine, cost, {}};
  ConfigSpace space(g, machine, smallSpace(0));
  ASSERT_GT(spaceSize(space), 1);
  ASSERT_LT(spaceSize(space), 2e5);
  std::cout << spaceSize(space) << " strategies\n";

  Simulator sim(g, machine, cost);
  double best = INFINITY;
  forEachStrategy(space, [&](const Strategy &s) {
    best = std::min(best, objective(problem, sim.simulate(s)));
  });

  SearchResult r = exhaustive(problem, space, quick());
  EXPECT_EQ(r.algorithm, "exhaustive");
  ASSERT_EQ(r.strategy.size(), g.ops.size());
  EXPECT_DOUBLE_EQ(r.objective, best);
  EXPECT_DOUBLE_EQ(objective(problem, sim.simulate(r.strategy)), best);
  // The bound pruned something: fewer leaves than strategies.
  EXPECT_LE(static_cast<double>(r.iterations), spaceSize(space));
}

TEST(Exhaustive, RefusesTooLargeSpaces) {
  Graph g;
  g.numInputs = 1;
  g.ops.push_back(linear(g, "fc1", 64, 512, 1024, input()));
  g.ops.push_back(linear(g, "fc2", 64, 1024, 256, fromOp(0)));
  Machine machine = h100(4);
  RooflineCostModel cost;
  Problem problem{g, machine, cost, {}};
  ConfigSpace space(g, machine);
  SearchResult r = exhaustive(problem, space, quick(), 2);
  EXPECT_EQ(r.algorithm, "exhaustive");
  EXPECT_TRUE(r.strategy.empty());
  EXPECT_TRUE(std::isinf(r.objective));
}

//===----------------------------------------------------------------------===//
// Dynamic programming under its additive model
//===----------------------------------------------------------------------===//

/// DP's strategy costs exactly the brute-force minimum of the additive model.
/// Returns how many tables and eliminations the DP shared between repeated
/// ops.
int64_t expectAdditiveOptimum(const Graph &g, const Machine &machine,
                              SpaceOptions options, double maxSpace = 3e6) {
  EXPECT_EQ(statusText(g.validate()), "");
  RooflineCostModel cost;
  Problem problem{g, machine, cost, {}};
  ConfigSpace space(g, machine, options);
  double size = spaceSize(space);
  EXPECT_LE(size, maxSpace) << "space too large to enumerate";
  if (size > maxSpace)
    return 0;
  std::cout << g.ops.size() << " ops, " << size << " strategies\n";
  Additive additive(problem, space);
  double best = additive.bruteForce();
  bool exact = false;
  int64_t reused = 0;
  Strategy raw = detail::additiveOptimum(problem, space, &exact, &reused);
  EXPECT_TRUE(exact);
  EXPECT_EQ(raw.size(), g.ops.size());
  if (raw.size() != g.ops.size())
    return reused;
  EXPECT_NEAR(additive.cost(indicesOf(space, raw)), best, 1e-12 * best + 1e-15)
      << "space size " << size;

  // The search itself: the DP's answer refined under the simulator, so no
  // worse than the raw answer simulated.
  SearchResult r = dynamicProgramming(problem, space, quick());
  EXPECT_EQ(r.algorithm, "dynamic programming");
  EXPECT_EQ(r.strategy.size(), g.ops.size());
  if (r.strategy.size() != g.ops.size())
    return reused;
  EXPECT_GT(r.iterations, 0);
  Simulator sim(g, machine, cost);
  EXPECT_DOUBLE_EQ(r.objective, objective(problem, sim.simulate(r.strategy)));
  EXPECT_LE(r.objective, objective(problem, sim.simulate(raw)));
  EXPECT_FALSE(r.trace.empty());
  if (!r.trace.empty()) {
    EXPECT_DOUBLE_EQ(r.trace.front().best,
                     objective(problem, sim.simulate(raw)));
  }
  return reused;
}

TEST(DynamicProgramming, ExactOnAChain) {
  Graph g;
  g.numInputs = 1;
  g.ops.push_back(linear(g, "fc1", 64, 256, 512, input()));
  g.ops.push_back(elementwise("relu1", 64, 512, {fromOp(0)}));
  g.ops.push_back(linear(g, "fc2", 64, 512, 512, fromOp(1)));
  g.ops.push_back(elementwise("relu2", 64, 512, {fromOp(2)}));
  g.ops.push_back(linear(g, "fc3", 64, 512, 128, fromOp(3)));
  expectAdditiveOptimum(g, h100(4), smallSpace(4));
}

TEST(DynamicProgramming, ExactOnAResidualDiamond) {
  // fc1 -> (fc2 -> relu) -> add(fc1, relu) -> fc3: series-parallel.
  Graph g;
  g.numInputs = 1;
  g.ops.push_back(linear(g, "fc1", 64, 256, 512, input()));
  g.ops.push_back(linear(g, "fc2", 64, 512, 512, fromOp(0)));
  g.ops.push_back(elementwise("relu", 64, 512, {fromOp(1)}));
  g.ops.push_back(elementwise("add", 64, 512, {fromOp(0), fromOp(2)}));
  g.ops.push_back(linear(g, "fc3", 64, 512, 128, fromOp(3)));
  expectAdditiveOptimum(g, h100(4), smallSpace(4));
}

TEST(DynamicProgramming, RepeatedBlocksAreSolvedOnceAndStayExact) {
  // fc0, then three identical residual blocks x -> fc -> relu -> add(x, .):
  // the second and third blocks share the first one's tables and the
  // eliminations that reduce them (memoized by table content), and the
  // answer is still the brute-force optimum of the additive model.
  Graph g;
  g.numInputs = 1;
  g.ops.push_back(linear(g, "fc0", 64, 256, 512, input()));
  for (int b = 0; b < 3; ++b) {
    int32_t x = static_cast<int32_t>(g.ops.size()) - 1;
    g.ops.push_back(linear(g, "fc", 64, 512, 512, fromOp(x)));
    g.ops.push_back(elementwise("relu", 64, 512, {fromOp(x + 1)}));
    g.ops.push_back(elementwise("add", 64, 512, {fromOp(x), fromOp(x + 2)}));
  }
  std::vector<int32_t> classes = costClasses(g);
  // fc0 differs (its input is 256 wide, it is read by two ops); the blocks'
  // ops fall into three classes, and the last add alone has no reader.
  EXPECT_NE(classes[0], classes[1]);
  EXPECT_EQ(classes[1], classes[4]);
  EXPECT_EQ(classes[1], classes[7]);
  EXPECT_EQ(classes[2], classes[8]);
  EXPECT_EQ(classes[3], classes[6]);
  EXPECT_NE(classes[6], classes[9]);
  // Without the reduce-scattered variants, to keep brute force at 1.2e7
  // strategies (the other cases here have them).
  SpaceOptions options = smallSpace(4);
  options.scatter = false;
  int64_t reused = expectAdditiveOptimum(g, h100(4), options, 2e7);
  std::cout << "  " << reused << " tables or eliminations shared\n";
  EXPECT_GT(reused, 0);
}

TEST(DynamicProgramming, ShardsTrainingStateWhenItsAnswerDoesNotFit) {
  // One linear layer whose weight dims cannot split: on 2 devices every
  // placement keeps the whole weight, its gradient and Adam's two states on
  // a device. With a limit between what data parallel needs with ZeRO-1
  // and without, only a sharded optimizer state fits; the DP's space has
  // none, so its answer gets it afterwards.
  Graph g;
  g.numInputs = 1;
  g.ops.push_back(linear(g, "fc", 64, 512, 512, input()));
  g.ops[0].space.dims[1].splittable = false;
  g.ops[0].space.dims[2].splittable = false;
  ASSERT_EQ(statusText(g.validate()), "");
  Machine machine = h100(2);
  RooflineCostModel cost;
  sim::SimOptions options;
  options.optimizer = Optimizer::Adam;
  Simulator sim(g, machine, cost, options);
  Strategy plain = dataParallel(g, 2);
  Strategy zero1 = plain;
  zero1[0].sharding = StateSharding::Optimizer;
  int64_t plainBytes = sim.simulate(plain).devices[0].memory.total();
  int64_t zero1Bytes = sim.simulate(zero1).devices[0].memory.total();
  ASSERT_LT(zero1Bytes, plainBytes);
  options.memoryLimit = (plainBytes + zero1Bytes) / 2;
  Problem problem{g, machine, cost, options};
  ConfigSpace space(g, machine);
  SearchResult r = dynamicProgramming(problem, space, quick());
  ASSERT_EQ(r.strategy.size(), 1u);
  EXPECT_TRUE(std::isfinite(r.objective));
  EXPECT_GE(r.strategy[0].sharding, StateSharding::Optimizer);
  EXPECT_DOUBLE_EQ(
      r.objective,
      objective(problem,
                Simulator(g, machine, cost, options).simulate(r.strategy)));
}

TEST(DynamicProgramming, UndoesMemoryFittingWhereItIsNotNeeded) {
  // A large linear layer then a small one, neither splittable: only the
  // large one's optimizer state must be sharded to fit. Memory fitting
  // shards every weight alike; the refinement's memory moves take the small
  // one's back where that is faster (one all-reduce instead of a
  // reduce-scatter and an all-gather).
  Graph g;
  g.numInputs = 1;
  g.ops.push_back(linear(g, "big", 64, 512, 512, input()));
  g.ops.push_back(linear(g, "small", 64, 512, 16, fromOp(0)));
  for (Op &op : g.ops) {
    op.space.dims[1].splittable = false;
    op.space.dims[2].splittable = false;
  }
  ASSERT_EQ(statusText(g.validate()), "");
  Machine machine = h100(2);
  RooflineCostModel cost;
  sim::SimOptions options;
  options.optimizer = Optimizer::Adam;
  Strategy plain = dataParallel(g, 2);
  Strategy bigOnly = plain;
  bigOnly[0].sharding = StateSharding::Optimizer;
  Strategy both = bigOnly;
  both[1].sharding = StateSharding::Optimizer;
  SimResult plainResult, bigOnlyResult, bothResult;
  {
    Simulator sim(g, machine, cost, options);
    plainResult = sim.simulate(plain);
    bigOnlyResult = sim.simulate(bigOnly);
    bothResult = sim.simulate(both);
  }
  ASSERT_LT(bigOnlyResult.peakMemory(), plainResult.peakMemory());
  ASSERT_LT(bigOnlyResult.iterationTime, bothResult.iterationTime);
  options.memoryLimit =
      (plainResult.peakMemory() + bigOnlyResult.peakMemory()) / 2;
  Problem problem{g, machine, cost, options};
  ConfigSpace space(g, machine);
  SearchResult r = dynamicProgramming(problem, space, quick());
  ASSERT_EQ(r.strategy.size(), 2u);
  ASSERT_TRUE(std::isfinite(r.objective));
  EXPECT_GE(r.strategy[0].sharding, StateSharding::Optimizer);
  EXPECT_EQ(r.strategy[1].sharding, StateSharding::None);
  EXPECT_LE(r.objective, objective(problem, bigOnlyResult));
}

TEST(DynamicProgramming, RefinesBeyondAnchoredViewsOnlyWhenAsked) {
  // Five layers of distinct widths on 64 devices: enough edge-table
  // entries over the whole space (about 10^6) that the DP's tables cover
  // only views anchored at device 0. Asked to leave the whole space alone (the
  // default search's DP start, which leaves other placements to MCMC), its
  // answer stays anchored; asked for it, the refinement also judges the whole
  // space's other placements, and can only improve on the anchored answer.
  Graph g;
  g.numInputs = 1;
  Source in = input();
  for (int64_t l = 0; l < 5; ++l) {
    g.ops.push_back(linear(g, "fc" + std::to_string(l), 256, 256 + 16 * l,
                           256 + 16 * (l + 1), in));
    in = fromOp(static_cast<int32_t>(g.ops.size() - 1));
  }
  Machine machine = h100(64);
  RooflineCostModel cost;
  Problem problem{g, machine, cost, {}};
  ConfigSpace space(g, machine);
  SpaceOptions anchoredOptions = space.options();
  anchoredOptions.anchoredViews = true;
  ConfigSpace anchored(g, machine, anchoredOptions);
  ASSERT_LT(anchored.configs(0).size(), space.configs(0).size());

  SearchOptions options = quick();
  options.refineWholeSpace = false;
  SearchResult anchoredOnly = dynamicProgramming(problem, space, options);
  options.refineWholeSpace = true;
  SearchResult whole = dynamicProgramming(problem, space, options);
  ASSERT_EQ(anchoredOnly.strategy.size(), g.ops.size());
  for (size_t op = 0; op < g.ops.size(); ++op) {
    const std::vector<OpConfig> &configs = anchored.configs(op);
    EXPECT_NE(
        std::find(configs.begin(), configs.end(), anchoredOnly.strategy[op]),
        configs.end())
        << g.ops[op].name;
  }
  EXPECT_GT(whole.iterations, anchoredOnly.iterations);
  EXPECT_LE(whole.objective, anchoredOnly.objective);
}

TEST(DynamicProgramming, TwoInputsAndASideBranch) {
  // Two ops fed only by inputs, joined by an add; a branch off the middle.
  Graph g;
  g.numInputs = 2;
  g.ops.push_back(linear(g, "a", 64, 256, 512, input(0)));
  g.ops.push_back(linear(g, "b", 64, 128, 512, input(1)));
  g.ops.push_back(elementwise("add", 64, 512, {fromOp(0), fromOp(1)}));
  g.ops.push_back(linear(g, "head", 64, 512, 64, fromOp(2)));
  g.ops.push_back(elementwise("side", 64, 512, {fromOp(2)}));
  expectAdditiveOptimum(g, h100(4), smallSpace(4));
}

/// a -> b, a -> c, a -> d, b -> c, b -> d, c -> d: a K4, the smallest graph
/// that is not series-parallel (every op keeps three edges).
void addK4(Graph &g, Source in, int64_t f) {
  int32_t a = static_cast<int32_t>(g.ops.size());
  g.ops.push_back(elementwise("a", 64, f, {in}));
  g.ops.push_back(elementwise("b", 64, f, {fromOp(a)}));
  g.ops.push_back(elementwise("c", 64, f, {fromOp(a), fromOp(a + 1)}));
  g.ops.push_back(
      elementwise("d", 64, f, {fromOp(a), fromOp(a + 1), fromOp(a + 2)}));
}

TEST(DynamicProgramming, ExactOnANonSeriesParallelK4) {
  // Nothing eliminates; the core is small enough to enumerate.
  Graph g;
  g.numInputs = 1;
  addK4(g, input(), 256);
  expectAdditiveOptimum(g, h100(4), smallSpace(4));
}

TEST(DynamicProgramming, SequenceOfK4sSplitsAtBottlenecks) {
  // Two K4s in a row: nothing eliminates and the core (8 ops, 5^8
  // strategies) is too large to enumerate at once; the cut ops (each K4's
  // first and last) split it, and each segment is enumerated per pair of
  // cut configurations: still exact.
  Graph g;
  g.numInputs = 1;
  addK4(g, input(), 256);
  addK4(g, fromOp(3), 256);
  expectAdditiveOptimum(g, h100(4), smallSpace(4), 2e6);
}

//===----------------------------------------------------------------------===//
// Acceptance: DP and MCMC within 2% of the optimum
//===----------------------------------------------------------------------===//

std::optional<Graph> importExample(const std::string &name, int64_t batch) {
  OnnxImportOptions options;
  options.batchSize = batch;
  std::string error;
  std::optional<Graph> graph = loadSimGraph(
      std::string(PPC_SOURCE_DIR) + "/examples/" + name, options, error);
  EXPECT_TRUE(graph) << error;
  return graph;
}

struct Acceptance {
  const char *model;
  int64_t devices;
  int64_t maxDegreeVectors;
};

std::optional<Graph> acceptanceGraph(const Acceptance &c) {
  if (std::string(c.model) == "mlp6")
    return mlp6();
  return importExample(c.model, 16);
}

const auto kAcceptanceCases = ::testing::Values(
    Acceptance{"mlp6", 4, 4}, Acceptance{"mlp6", 8, 4},
    Acceptance{"cnn.onnx", 4, 2}, Acceptance{"cnn.onnx", 8, 2});

/// "cnn_8_devices"
std::string acceptanceName(const ::testing::TestParamInfo<Acceptance> &info) {
  std::string model = info.param.model;
  return model.substr(0, model.find('.')) + "_" +
         std::to_string(info.param.devices) + "_devices";
}

class WithinTwoPercent : public ::testing::TestWithParam<Acceptance> {};

TEST_P(WithinTwoPercent, OfTheExhaustiveOptimum) {
  const Acceptance &c = GetParam();
  std::optional<Graph> graph = acceptanceGraph(c);
  ASSERT_TRUE(graph) << "cannot import " << c.model;
  Machine machine = h100(c.devices);
  RooflineCostModel cost;
  // Exchanges at the link's rate, destination by destination: the
  // landscape of docs/search.md (priced and issued as NCCL's collectives,
  // the DP lands 2.86% above mlp6's optimum on 8).
  sim::SimOptions landscape;
  landscape.exchangesAsCollectives = false;
  Problem problem{*graph, machine, cost, landscape};
  ConfigSpace space(*graph, machine, smallSpace(c.maxDegreeVectors));
  double size = spaceSize(space);
  std::cout << c.model << " on " << c.devices
            << " devices: " << graph->ops.size() << " ops, 10^"
            << std::log10(size) << " strategies\n";

  SearchOptions options;
  options.iterations = 4000;
  SearchResult best = exhaustive(problem, space, options, 1e8);
  ASSERT_FALSE(best.strategy.empty()) << "space of " << size;
  ASSERT_TRUE(std::isfinite(best.objective));

  SearchResult dp = dynamicProgramming(problem, space, options);
  EXPECT_GE(dp.objective, best.objective * (1 - 1e-9));
  EXPECT_LE(dp.objective, 1.02 * best.objective)
      << "DP gap " << 100 * (dp.objective / best.objective - 1) << "%";

  std::vector<Strategy> starts = {dataParallel(*graph, c.devices)};
  // The exhaustive search covers placements only: so does MCMC here (its
  // recomputation and ZeRO moves reach strategies outside the space).
  SearchOptions placementsOnly = options;
  placementsOnly.memoryMoveProbability = 0;
  SearchResult mc = mcmc(problem, space, starts, placementsOnly);
  EXPECT_GE(mc.objective, best.objective * (1 - 1e-9));
  EXPECT_LE(mc.objective, 1.02 * best.objective)
      << "MCMC gap " << 100 * (mc.objective / best.objective - 1) << "%";
  std::cout << "  optimum " << best.objective * 1e3 << " ms, DP +"
            << 100 * (dp.objective / best.objective - 1) << "%, MCMC +"
            << 100 * (mc.objective / best.objective - 1) << "%\n";
}

INSTANTIATE_TEST_SUITE_P(Models, WithinTwoPercent, kAcceptanceCases,
                         acceptanceName);

/// The DP with the preset as it is (the measured H100 figures, exchanges
/// priced and issued as NCCL's collectives): within 1% of the exhaustive
/// optimum (issue 44's acceptance; docs/search.md, "DP and MCMC against the
/// exhaustive optimum"). Its raw additive answer is 9-27% off here: the
/// refinement's single-op and pair moves under the simulator close it.
class DpWithinOnePercent : public ::testing::TestWithParam<Acceptance> {};

TEST_P(DpWithinOnePercent, OfTheExhaustiveOptimumWithTheMeasuredPreset) {
  const Acceptance &c = GetParam();
  std::optional<Graph> graph = acceptanceGraph(c);
  ASSERT_TRUE(graph) << "cannot import " << c.model;
  Machine machine = h100(c.devices, /*measured=*/true);
  RooflineCostModel cost;
  Problem problem{*graph, machine, cost, {}};
  ConfigSpace space(*graph, machine, smallSpace(c.maxDegreeVectors));
  SearchOptions options;
  SearchResult best = exhaustive(problem, space, options, 1e8);
  ASSERT_FALSE(best.strategy.empty());
  ASSERT_TRUE(std::isfinite(best.objective));
  SearchResult dp = dynamicProgramming(problem, space, options);
  // The DP stays in the space: it cannot beat the exhaustive optimum.
  EXPECT_GE(dp.objective, best.objective * (1 - 1e-9));
  EXPECT_LE(dp.objective, 1.01 * best.objective)
      << "DP gap " << 100 * (dp.objective / best.objective - 1) << "%";
  std::cout << c.model << " on " << c.devices << ": optimum "
            << best.objective * 1e3 << " ms, DP raw +"
            << 100 * (dp.trace.front().best / best.objective - 1) << "%, DP +"
            << 100 * (dp.objective / best.objective - 1) << "%\n";
}

INSTANTIATE_TEST_SUITE_P(Models, DpWithinOnePercent, kAcceptanceCases,
                         acceptanceName);

} // namespace
