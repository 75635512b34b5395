//===- SearchTest.cpp - configuration space, baselines and MCMC -----------===//
//
// Hand-built graphs on small round machines: the configuration space of a
// convolution counted by hand, strided views across nodes, the memory
// objective, Megatron on a feed-forward block, and the MCMC's guarantees
// (improves, never worse than its starts, deterministic, budgets, cancel).
//
//===----------------------------------------------------------------------===//

#include "ppc/Search/Search.h"
#include "StatusText.h"
#include "ppc/Search/Blocks.h"
#include "ppc/Search/StrategyJson.h"
#include "ppc/Support/Layout.h"

#include "Propagation.h"
#include "StageDp.h"

#include "SimTestGraphs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <thread>

using namespace ppc;
using namespace ppc::sim;
using namespace ppc::search;

namespace {

using namespace ppc::sim::testing;
using ppc::test::statusText;

/// `nodes` x `perNode` devices of 1 GB, 1 TFLOP/s; 10 GB/s inside a node,
/// 1 GB/s across nodes.
Machine roundMachine(int64_t nodes, int64_t perNode,
                     int64_t memoryBytes = 1'000'000'000) {
  ClusterSpec c;
  c.nodes = nodes;
  c.devicesPerNode = perNode;
  c.nicsPerNode = perNode;
  c.device.name = "round";
  c.device.setPeakFlops(DType::F32, 1e12);
  c.device.memoryBandwidth = 1e11;
  c.device.memoryBytes = memoryBytes;
  c.device.launchOverhead = 5e-6;
  c.intra = {LinkKind::NVLink, 1e10, 5e-6};
  c.inter = {LinkKind::InfiniBand, 1e9, 20e-6};
  return Machine::fromCluster(c, "round");
}

/// 3x3 convolution, padding 1, on x [n, c, h, w] with weight [f, c, 3, 3]:
/// dims n (sample), f (parameter), oh, ow (attribute), c (reduction), kh, kw
/// (reduction, unsplittable), as the graph dialect describes conv2d.
Op conv(std::string name, int64_t n, int64_t c, int64_t f, int64_t hw,
        Source in, int32_t w) {
  Op op;
  op.name = std::move(name);
  op.kind = "ppc.conv2d";
  op.space.dims = {
      {n, IterKind::Sample},          {f, IterKind::Parameter},
      {hw, IterKind::Attribute},      {hw, IterKind::Attribute},
      {c, IterKind::Reduction},       {3, IterKind::Reduction, false},
      {3, IterKind::Reduction, false}};
  op.space.operands = {
      {{n, c, hw, hw},
       {DimAccess::identity(0), DimAccess::identity(4),
        DimAccess::window(2, 1, -1, 3), DimAccess::window(3, 1, -1, 3)}},
      {{f, c, 3, 3},
       {DimAccess::identity(1), DimAccess::identity(4), DimAccess::identity(5),
        DimAccess::identity(6)}}};
  op.space.results = {TensorAccess::identity({n, f, hw, hw})};
  op.operands = {in, weight(w)};
  double points = static_cast<double>(op.space.numPoints());
  op.cost = {2 * points, 4 * points, 4.0 * n * (c + f) * hw * hw,
             8.0 * n * (c + f) * hw * hw};
  return op;
}

/// An elementwise op on [n, f]: dims n (sample), f (parameter).
Op elementwise(std::string name, std::string kind, int64_t n, int64_t f,
               Source in) {
  return ppc::sim::testing::elementwise(
      std::move(name), std::move(kind), n, f, {in},
      {8.0 * n * f, 8.0 * n * f, 8.0 * n * f, 16.0 * n * f});
}

/// image [n, 4, 8, 8] -> conv 4->8 -> relu -> conv 8->8 (as [n, f] views
/// are not needed, the relu is a conv-shaped elementwise op).
Graph smallConvGraph() {
  Graph g;
  g.numInputs = 1;
  g.weights = {{"c1.w", {8, 4, 3, 3}}, {"c2.w", {8, 8, 3, 3}}};
  g.ops.push_back(conv("c1", 8, 4, 8, 8, input(), 0));
  g.ops.push_back(conv("c2", 8, 8, 8, 8, fromOp(0), 1));
  return g;
}

/// x [n, k0] -> linear -> relu -> linear -> relu -> linear: an MLP whose
/// layers are large enough that parallelism pays.
Graph mlpGraph(int64_t n = 64, int64_t width = 1024) {
  Graph g;
  g.numInputs = 1;
  g.weights = {
      {"w1", {width, width}}, {"w2", {width, width}}, {"w3", {width, 16}}};
  g.ops.push_back(linear("fc1", n, width, width, input(), 0));
  g.ops.push_back(elementwise("relu1", "ppc.relu", n, width, fromOp(0)));
  g.ops.push_back(linear("fc2", n, width, width, fromOp(1), 1));
  g.ops.push_back(elementwise("relu2", "ppc.relu", n, width, fromOp(2)));
  g.ops.push_back(linear("fc3", n, width, 16, fromOp(3), 2));
  return g;
}

void expectValid(const Graph &graph, const Strategy &strategy,
                 int64_t numDevices) {
  ASSERT_EQ(strategy.size(), graph.ops.size());
  for (size_t op = 0; op < graph.ops.size(); ++op)
    EXPECT_EQ(
        statusText(checkConfig(graph.ops[op].space, strategy[op], numDevices)),
        "")
        << "op " << op << " (" << graph.ops[op].name << ")";
}

/// Degree vectors of the configurations, without their views.
std::set<std::vector<int64_t>> degreeSet(const std::vector<OpConfig> &configs) {
  std::set<std::vector<int64_t>> result;
  for (const OpConfig &config : configs)
    result.insert(config.degrees);
  return result;
}

//===----------------------------------------------------------------------===//
// Configuration space
//===----------------------------------------------------------------------===//

TEST(ConfigSpace, ConvolutionOnFourDevices) {
  // conv c1: n 8, f 8, oh 8, ow 8, c 4 (reduction), kh, kw unsplittable.
  // Degree vectors with product 1, 2 or 4 over the 5 splittable dims: 1,
  // 5 of product 2, and 5 (one dim 4) + 10 (two dims 2) of product 4 = 21.
  // Views on one node of 4: 4 starts for 1 partition, 2 for 2, 1 for 4:
  // 4 + 5 * 2 + 15 = 29, plus the 6 vectors of fewer than 4 partitions
  // replicated over the machine: 35.
  Graph g = smallConvGraph();
  ASSERT_EQ(statusText(g.validate()), "");
  Machine m = roundMachine(1, 4);
  SpaceOptions noScatter;
  noScatter.scatter = false;
  ConfigSpace space(g, m, noScatter);
  ASSERT_EQ(space.numOps(), 2u);
  const std::vector<OpConfig> &configs = space.configs(0);
  EXPECT_EQ(degreeSet(configs).size(), 21u);
  EXPECT_EQ(configs.size(), 35u);
  for (const OpConfig &config : configs)
    EXPECT_EQ(statusText(checkConfig(g.ops[0].space, config, 4)), "");
  int64_t replicated = 0;
  for (const OpConfig &config : configs)
    if (config.replicas > 1) {
      ++replicated;
      EXPECT_EQ(config.numInstances(), 4);
    }
  EXPECT_EQ(replicated, 6);
  // Spatial splits (with halos), which FlexFlow never searched.
  std::set<std::vector<int64_t>> degrees = degreeSet(configs);
  EXPECT_TRUE(degrees.count({1, 1, 4, 1, 1, 1, 1}));
  EXPECT_TRUE(degrees.count({1, 1, 2, 2, 1, 1, 1}));
  EXPECT_TRUE(degrees.count({2, 1, 1, 1, 2, 1, 1}));  // reduction split
  EXPECT_FALSE(degrees.count({1, 1, 1, 1, 1, 2, 1})); // kernel window
  // Largest total degree first.
  EXPECT_EQ(configs.front().numPartitions(), 4);
  EXPECT_EQ(configs.back().numPartitions(), 1);
  // log10 of 35 * 35 strategies.
  EXPECT_NEAR(space.log10Size(), 2 * std::log10(35.0), 1e-12);

  // The 8 configurations that split c (c 2: 2 views and one replicated;
  // c 4: 1; c 2 with one other dim 2: 4) also come reduce-scattered, along
  // oh (the first result dim an attribute dim indexes).
  ConfigSpace scattered(g, m);
  const std::vector<OpConfig> &all = scattered.configs(0);
  ASSERT_EQ(all.size(), 35u + 8u);
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(statusText(checkConfig(g.ops[0].space, all[i], 4)), "");
    bool partial = all[i].degrees[4] > 1;
    if (i < 35) {
      EXPECT_EQ(all[i].scatterDim, -1);
      continue;
    }
    EXPECT_TRUE(partial);
    EXPECT_EQ(all[i].scatterDim, 2);
    OpConfig summed = all[i];
    summed.scatterDim = -1;
    EXPECT_NE(std::find(all.begin(), all.begin() + 35, summed),
              all.begin() + 35);
  }

  // Without reduction splits: 1 + 4 + (4 + 6) = 15 vectors,
  // 4 + 4 * 2 + 10 = 22 configurations, + 5 replicated.
  SpaceOptions noReduction;
  noReduction.reductionSplits = false;
  ConfigSpace smaller(g, m, noReduction);
  EXPECT_EQ(degreeSet(smaller.configs(0)).size(), 15u);
  EXPECT_EQ(smaller.configs(0).size(), 27u);
}

TEST(ConfigSpace, ConvolutionOnEightDevices) {
  // Exponents of 2 summing to 3 over n, f, oh, ow (each <= 3, size 8) and
  // c (<= 2, size 4): C(7, 4) = 35 minus the one with c = 3 = 34 of product
  // 8; C(6, 4) = 15 of product 4; 5 of product 2; 1. Views on one node of
  // 8: 8 + 5 * 4 + 15 * 2 + 34 = 92, and the 21 vectors of fewer than 8
  // partitions replicated over the machine: 113.
  Graph g = smallConvGraph();
  Machine m = roundMachine(1, 8);
  SpaceOptions noScatter;
  noScatter.scatter = false;
  ConfigSpace space(g, m, noScatter);
  const std::vector<OpConfig> &configs = space.configs(0);
  EXPECT_EQ(degreeSet(configs).size(), 55u);
  EXPECT_EQ(configs.size(), 113u);
  for (size_t op = 0; op < space.numOps(); ++op)
    for (const OpConfig &config : space.configs(op))
      EXPECT_EQ(statusText(checkConfig(g.ops[op].space, config, 8)), "");

  // A cap keeps the largest degrees: the 34 vectors of 8 partitions and 6
  // of the 15 of 4, in a fixed order.
  SpaceOptions capped = noScatter;
  capped.maxDegreeVectors = 40;
  ConfigSpace small(g, m, capped);
  std::set<std::vector<int64_t>> kept = degreeSet(small.configs(0));
  EXPECT_EQ(kept.size(), 40u);
  int64_t eights = 0;
  for (const std::vector<int64_t> &degrees : kept)
    eights += OpConfig{degrees, 0, {}}.numPartitions() == 8;
  EXPECT_EQ(eights, 34);
  EXPECT_EQ(small.configs(0).size(), 34u + 6u * 2u + 6u);
  ConfigSpace again(g, m, capped);
  EXPECT_EQ(again.configs(0), small.configs(0));

  // Anchored views (the DP's tables on large machines): one contiguous
  // view per vector, at device 0, plus the 21 replicated ones.
  SpaceOptions anchored = noScatter;
  anchored.anchoredViews = true;
  ConfigSpace at0(g, m, anchored);
  EXPECT_EQ(at0.configs(0).size(), 55u + 21u);
  for (const OpConfig &config : at0.configs(0))
    EXPECT_EQ(config.start, 0);
  // At most two split dims: the 10 vectors (2, 2, 2) go.
  anchored.maxSplitDims = 2;
  ConfigSpace twoDims(g, m, anchored);
  EXPECT_EQ(degreeSet(twoDims.configs(0)).size(), 45u);
  EXPECT_EQ(twoDims.configs(0).size(), 45u + 21u);
  for (const OpConfig &config : twoDims.configs(0)) {
    int64_t split = 0;
    for (int64_t d : config.degrees)
      split += d > 1;
    EXPECT_LE(split, 2);
  }
  EXPECT_EQ(twoDims.options().maxSplitDims, 2);
}

TEST(ConfigSpace, StridedViewsAcrossNodes) {
  // 2 nodes x 2 devices; an elementwise op on [4, 4].
  Graph g;
  g.numInputs = 1;
  g.ops.push_back(elementwise("relu", "ppc.relu", 4, 4, input()));
  Machine m = roundMachine(2, 2);
  ConfigSpace space(g, m);
  const std::vector<OpConfig> &configs = space.configs(0);
  std::set<std::vector<int64_t>> placements;
  bool acrossNodes = false, transposed = false;
  for (const OpConfig &config : configs) {
    EXPECT_EQ(statusText(checkConfig(g.ops[0].space, config, 4)), "");
    std::vector<int64_t> devices = config.devices();
    // No two configurations place the same partitions the same way.
    std::vector<int64_t> key = config.degrees;
    key.insert(key.end(), devices.begin(), devices.end());
    EXPECT_TRUE(placements.insert(key).second);
    // A 2-way sample split with one partition per node.
    if (config.degrees == std::vector<int64_t>{2, 1} &&
        devices == std::vector<int64_t>{0, 2})
      acrossNodes = true;
    // 2 x 2 with the parameter dim across nodes.
    if (config.degrees == std::vector<int64_t>{2, 2} &&
        devices == std::vector<int64_t>{0, 2, 1, 3})
      transposed = true;
  }
  EXPECT_TRUE(acrossNodes);
  EXPECT_TRUE(transposed);
  // (1,1): 4 starts; (2,1), (1,2): 2 contiguous + 2 across nodes each;
  // (4,1), (1,4): 1 each (4 across nodes would need 4 nodes); (2,2): 1
  // contiguous + 1 with the parameter dim across nodes; (1,1), (2,1) and
  // (1,2) replicated over the machine.
  EXPECT_EQ(configs.size(), 4u + 2 * 4u + 2u + 2u + 3u);

  SpaceOptions contiguousOnly;
  contiguousOnly.stridedViews = false;
  ConfigSpace plain(g, m, contiguousOnly);
  EXPECT_EQ(plain.configs(0).size(), 4u + 2 * 2u + 2u + 1u + 3u);
  for (const OpConfig &config : plain.configs(0))
    EXPECT_TRUE(config.strides.empty());
}

TEST(ConfigSpace, NoTwoViewsPlaceInstancesAlike) {
  // Views are told apart by their starts and strides (ConfigSpace's
  // appendViews), not by listing devices: on nodes of one device, of two,
  // of four and of eight, no configuration of a linear layer places its
  // instances as another does.
  Graph g;
  g.numInputs = 1;
  g.ops.push_back(linear(g, "fc0", 16, 16, 16, input()));
  for (auto [nodes, perNode] :
       {std::pair{4, 1}, std::pair{2, 2}, std::pair{4, 4}, std::pair{2, 8}}) {
    Machine m = roundMachine(nodes, perNode);
    ConfigSpace space(g, m);
    std::set<std::vector<int64_t>> placements;
    for (const OpConfig &config : space.configs(0)) {
      std::vector<int64_t> key = config.degrees;
      key.push_back(config.replicas);
      key.push_back(config.scatterDim);
      std::vector<int64_t> devices = config.devices();
      key.insert(key.end(), devices.begin(), devices.end());
      EXPECT_TRUE(placements.insert(key).second)
          << nodes << " x " << perNode << ": start " << config.start;
    }
    EXPECT_GT(placements.size(), 0u);
  }
}

//===----------------------------------------------------------------------===//
// Sharding propagation (run moves)
//===----------------------------------------------------------------------===//

/// fc0 (a linear layer [8, 16] x [16, 8]) feeding relu ([8, 8]).
Graph linearThenRelu(bool reluSplittable = true) {
  Graph g;
  g.numInputs = 1;
  g.ops.push_back(linear(g, "fc0", 8, 16, 8, input()));
  g.ops.push_back(elementwise("relu", "ppc.relu", 8, 8, fromOp(0)));
  g.ops[1].space.dims[1].splittable = reluSplittable;
  return g;
}

OpConfig configOf(std::vector<int64_t> degrees, int64_t start = 0,
                  std::vector<int64_t> strides = {}, int64_t replicas = 1) {
  OpConfig c;
  c.degrees = std::move(degrees);
  c.start = start;
  c.strides = std::move(strides);
  c.replicas = replicas;
  return c;
}

/// Whether relu reads fc0's result where fc0 holds it, under these
/// configurations (the edge needs no resharding).
bool edgeLinesUp(const Graph &g, const OpConfig &fc0, const OpConfig &relu) {
  return geometry::linesUp(
      geometry::computeLayout(g.ops[0].space, fc0).resultPieces(0),
      geometry::computeLayout(g.ops[1].space, relu).operandPieces(0));
}

TEST(Propagation, ConsumerTakesTheProducersSplit) {
  Graph g = linearThenRelu();
  // Samples by 2 and columns by 2, on devices 4..7 with the column split
  // innermost: relu splits its two dims alike on the same devices.
  OpConfig fc0 = configOf({2, 2, 1}, 4);
  std::optional<OpConfig> relu =
      detail::alignedConfig(g, 1, 0, fc0, OpConfig{}, 8);
  ASSERT_TRUE(relu.has_value());
  EXPECT_EQ(relu->degrees, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(relu->start, 4);
  EXPECT_TRUE(relu->strides.empty()); // contiguous
  EXPECT_TRUE(edgeLinesUp(g, fc0, *relu));
  // Strided: the sample split across nodes (stride 4), columns inside.
  fc0 = configOf({2, 2, 1}, 0, {4, 1});
  relu = detail::alignedConfig(g, 1, 0, fc0, OpConfig{}, 8);
  ASSERT_TRUE(relu.has_value());
  EXPECT_EQ(relu->strides, (std::vector<int64_t>{4, 1}));
  EXPECT_TRUE(edgeLinesUp(g, fc0, *relu));
  // A permuted grid: columns outermost (stride 1 for samples, 2 for
  // columns) is not contiguous for relu either and keeps its strides.
  fc0 = configOf({2, 2, 1}, 0, {1, 2});
  relu = detail::alignedConfig(g, 1, 0, fc0, OpConfig{}, 4);
  ASSERT_TRUE(relu.has_value());
  EXPECT_EQ(relu->strides, (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(edgeLinesUp(g, fc0, *relu));
}

TEST(Propagation, ProducerTakesTheConsumersSplit) {
  Graph g = linearThenRelu();
  OpConfig relu = configOf({1, 4});
  OpConfig keep;
  keep.recompute = true;
  keep.sharding = StateSharding::Optimizer;
  std::optional<OpConfig> fc0 = detail::alignedConfig(g, 0, 1, relu, keep, 4);
  ASSERT_TRUE(fc0.has_value());
  // Megatron's column-parallel layer; its memory choices are kept.
  EXPECT_EQ(fc0->degrees, (std::vector<int64_t>{1, 4, 1}));
  EXPECT_TRUE(fc0->recompute);
  EXPECT_EQ(fc0->sharding, StateSharding::Optimizer);
  EXPECT_TRUE(edgeLinesUp(g, *fc0, relu));
  // Consumers sharing pieces (replicas) do not make their producer copies:
  // replication is not carried backwards.
  EXPECT_FALSE(detail::alignedConfig(g, 0, 1, configOf({2, 1}, 0, {}, 2),
                                     OpConfig{}, 4));
}

TEST(Propagation, PartialSumsAllReducedAreReadByReplicas) {
  Graph g = linearThenRelu();
  // The reduction split by 4: every member of the group holds the sum.
  OpConfig fc0 = configOf({1, 1, 4});
  std::optional<OpConfig> relu =
      detail::alignedConfig(g, 1, 0, fc0, OpConfig{}, 4);
  ASSERT_TRUE(relu.has_value());
  EXPECT_EQ(relu->degrees, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(relu->replicas, 4);
  EXPECT_TRUE(edgeLinesUp(g, fc0, *relu));
}

TEST(Propagation, RefusesWhatCannotLineUp) {
  // relu's second dim may not be split (as a softmax axis).
  Graph g = linearThenRelu(/*reluSplittable=*/false);
  EXPECT_FALSE(
      detail::alignedConfig(g, 1, 0, configOf({1, 4, 1}), OpConfig{}, 4));
  // Reduce-scattered partial sums are held in pieces of the scatter dim.
  g = linearThenRelu();
  OpConfig scattered = configOf({1, 1, 4});
  scattered.scatterDim = 0;
  EXPECT_FALSE(detail::alignedConfig(g, 1, 0, scattered, OpConfig{}, 4));
  // Two groups of copies (a split reduction and replicas) need two replica
  // strides.
  EXPECT_FALSE(detail::alignedConfig(g, 1, 0, configOf({1, 1, 2}, 0, {}, 2),
                                     OpConfig{}, 4));
  // Ops with no edge between them.
  g.ops.push_back(elementwise("other", "ppc.relu", 8, 8, input()));
  EXPECT_FALSE(
      detail::alignedConfig(g, 2, 0, configOf({2, 1, 1}), OpConfig{}, 4));
}

/// MCMC on mlp6 from data parallel over `m` with `options` (300
/// proposals): its answer is valid, never worse than its start, and its
/// objective is the answer's own simulation.
void expectMcmcValidFromDataParallel(const Machine &m, SearchOptions options) {
  Graph g = mlp6();
  int64_t n = m.numDevices();
  RooflineCostModel cost;
  Problem problem{g, m, cost, {}};
  ConfigSpace space(g, m);
  options.iterations = 300;
  SearchResult r = mcmc(problem, space, {dataParallel(g, n)}, options);
  Simulator sim(g, m, cost);
  EXPECT_LE(r.objective, sim.simulate(dataParallel(g, n)).iterationTime);
  expectValid(g, r.strategy, n);
  EXPECT_NEAR(sim.simulate(r.strategy).iterationTime, r.objective, 1e-12);
}

TEST(Propagation, RunMovesKeepTheSearchValid) {
  // Every placement proposal a run move.
  SearchOptions options;
  options.runMoveProbability = 1;
  expectMcmcValidFromDataParallel(roundMachine(2, 4), options);
}

//===----------------------------------------------------------------------===//
// Repeated structure
//===----------------------------------------------------------------------===//

TEST(RepeatedOps, LayersOfTheSameShapeAreCounterparts) {
  // fc1..fc4 (1024 -> 1024, each reading the op before) repeat; fc0
  // (784 -> 1024, reading the input) and fc5 (-> 16) have no counterpart.
  Graph g = mlp6();
  RepeatedOps r = findRepeatedOps(g);
  ASSERT_EQ(r.classes.size(), 1u);
  EXPECT_EQ(r.classes[0], (std::vector<size_t>{1, 2, 3, 4}));
  EXPECT_EQ(r.classOf[0], -1);
  EXPECT_EQ(r.classOf[5], -1);
  EXPECT_EQ(r.classOf[3], 0);

  // Two elementwise ops of the same shape reading different distances back
  // are not counterparts: the wiring differs.
  Graph h;
  h.numInputs = 1;
  h.ops = {elementwise("a", "ppc.relu", 4, 8, input()),
           elementwise("b", "ppc.relu", 4, 8, fromOp(0)),
           elementwise("c", "ppc.relu", 4, 8, fromOp(0))};
  RepeatedOps rh = findRepeatedOps(h);
  EXPECT_TRUE(rh.classes.empty());
}

TEST(RepeatedOps, RunsOfBlocksCoverTheLayers) {
  // The MLP's four hidden layers are one run of one-op blocks.
  std::vector<BlockRun> mlp = findRepeatedBlocks(mlp6());
  ASSERT_EQ(mlp.size(), 1u);
  EXPECT_EQ(mlp[0].begin, 1u);
  EXPECT_EQ(mlp[0].length, 1u);
  EXPECT_EQ(mlp[0].count, 4u);

  // A stem, three residual blocks (linear, relu, add of the relu and the
  // block's input) and a head: one run of three three-op blocks.
  Graph g;
  g.numInputs = 1;
  OpCost unit{1, 1, 1, 1};
  g.ops.push_back(linear(g, "stem", 32, 784, 64, input()));
  for (int b = 0; b < 3; ++b) {
    auto in = static_cast<int32_t>(g.ops.size() - 1);
    std::string p = "blocks." + std::to_string(b) + ".";
    g.ops.push_back(linear(g, p + "fc", 32, 64, 64, fromOp(in)));
    g.ops.push_back(
        elementwise(p + "relu", "ppc.relu", 32, 64, fromOp(in + 1)));
    g.ops.push_back(ppc::sim::testing::elementwise(
        p + "add", "ppc.add", 32, 64, {fromOp(in + 2), fromOp(in)}, unit));
  }
  g.ops.push_back(linear(g, "head", 32, 64, 16, fromOp(9)));
  ASSERT_EQ(statusText(g.validate()), "");
  std::vector<BlockRun> runs = findRepeatedBlocks(g);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].begin, 1u);
  EXPECT_EQ(runs[0].length, 3u);
  EXPECT_EQ(runs[0].count, 3u);
  EXPECT_EQ(runs[0].end(), 10u);

  // Without counterparts there are no runs.
  Graph h;
  h.numInputs = 1;
  h.ops = {elementwise("a", "ppc.relu", 4, 8, input()),
           elementwise("b", "ppc.relu", 4, 8, fromOp(0)),
           elementwise("c", "ppc.relu", 4, 8, fromOp(0))};
  EXPECT_TRUE(findRepeatedBlocks(h).empty());
}

TEST(RepeatedOps, BlockMovesFindTheLayoutOfEveryLayer) {
  // With every proposal a structure move (no run moves), MCMC from data
  // parallel changes all repeated layers together; the result is never
  // worse than the start and is a valid strategy.
  SearchOptions options;
  options.runMoveProbability = 0;
  options.blockMoveProbability = 1;
  expectMcmcValidFromDataParallel(roundMachine(1, 4), options);
}

//===----------------------------------------------------------------------===//
// Objective
//===----------------------------------------------------------------------===//

TEST(Objective, OutOfMemoryIsInfinite) {
  Graph g = mlpGraph(8, 256);
  Machine m = roundMachine(1, 2);
  RooflineCostModel cost;
  Problem problem{g, m, cost, {}};
  Simulator simulator(g, m, cost);
  SimResult result = simulator.simulate(dataParallel(g, 2));
  EXPECT_EQ(objective(problem, result), result.iterationTime);
  EXPECT_GT(result.iterationTime, 0);

  EXPECT_FALSE(result.outOfMemory);

  // The weights alone (2 * 256^2 floats) exceed a 100 kB limit: the
  // simulation under it holds every device to it and says so, and the
  // objective is infinite.
  SimOptions tightOptions;
  tightOptions.memoryLimit = 100'000;
  Problem tight{g, m, cost, tightOptions};
  SimResult tightResult =
      Simulator(g, m, cost, tightOptions).simulate(dataParallel(g, 2));
  for (const DeviceStats &device : tightResult.devices)
    EXPECT_EQ(device.capacity, 100'000);
  EXPECT_TRUE(tightResult.outOfMemory);
  EXPECT_EQ(objective(tight, tightResult),
            std::numeric_limits<double>::infinity());

  // Without a limit, each device's capacity counts.
  SimResult crafted = result;
  crafted.devices[1].memory.activations = crafted.devices[1].capacity + 1;
  EXPECT_EQ(objective(problem, crafted),
            std::numeric_limits<double>::infinity());
  // A limit above the capacity takes its place.
  SimOptions looseOptions;
  looseOptions.memoryLimit = 4 * result.devices[1].capacity;
  SimResult loose =
      Simulator(g, m, cost, looseOptions).simulate(dataParallel(g, 2));
  loose.devices[1].memory.activations = result.devices[1].capacity + 1;
  EXPECT_EQ(objective(Problem{g, m, cost, looseOptions}, loose),
            loose.iterationTime);
}

//===----------------------------------------------------------------------===//
// Baselines
//===----------------------------------------------------------------------===//

TEST(Baselines, MegatronFeedForwardBlock) {
  // x -> ff1 (32 -> 64) -> gelu -> ff2 (64 -> 32) -> relu, on 2 nodes x 4:
  // tensor parallel 4 inside each node, data parallel 2 across nodes.
  Graph g;
  g.numInputs = 1;
  g.weights = {{"ff1.w", {32, 64}}, {"ff2.w", {64, 32}}};
  g.ops.push_back(linear("ff1", 16, 32, 64, input(), 0));
  g.ops.push_back(elementwise("gelu", "ppc.gelu", 16, 64, fromOp(0)));
  g.ops.push_back(linear("ff2", 16, 64, 32, fromOp(1), 1));
  g.ops.push_back(elementwise("relu", "ppc.relu", 16, 32, fromOp(2)));
  ASSERT_EQ(statusText(g.validate()), "");
  Machine m = roundMachine(2, 4);
  Strategy s = megatron(g, m, 4);
  expectValid(g, s, 8);
  // Column parallel, then the gelu on its last dim, then row parallel.
  EXPECT_EQ(s[0].degrees, (std::vector<int64_t>{2, 4, 1}));
  EXPECT_EQ(s[1].degrees, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(s[2].degrees, (std::vector<int64_t>{2, 1, 4}));
  // Outside the block: data parallel across groups and replicated on every
  // device of its group, as Megatron runs the ops between blocks.
  EXPECT_EQ(s[3].degrees, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(s[3].replicas, 4);
  EXPECT_EQ(s[3].devices(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  // Sequence parallel splits it along... nothing here: [N, F] has no
  // sequence dim, so it stays replicated; the distributed optimizer shards
  // the state of the weights over the data-parallel replicas.
  Strategy sp = megatron(g, m, MegatronOptions{4, true, true});
  expectValid(g, sp, 8);
  EXPECT_EQ(sp[3].replicas, 4);
  EXPECT_EQ(sp[0].sharding, StateSharding::Optimizer);
  EXPECT_EQ(sp[1].sharding, StateSharding::None);
  // Selective recomputation: in the block, the gelu (no weight) is
  // recomputed; the linears and the relu outside the block keep their
  // results.
  MegatronOptions selective{4, true, true};
  selective.selectiveRecompute = true;
  Strategy sel = megatron(g, m, selective);
  expectValid(g, sel, 8);
  EXPECT_FALSE(sel[0].recompute);
  EXPECT_TRUE(sel[1].recompute);
  EXPECT_FALSE(sel[2].recompute);
  EXPECT_FALSE(sel[3].recompute);
  // Without tensor parallelism the blocks are the same: the gelu is
  // recomputed, every op data parallel.
  MegatronOptions dpOnly{1, false, false};
  dpOnly.selectiveRecompute = true;
  Strategy sel1 = megatron(g, m, dpOnly);
  expectValid(g, sel1, 8);
  EXPECT_TRUE(sel1[1].recompute);
  EXPECT_FALSE(sel1[0].recompute);
  EXPECT_EQ(sel1[1].degrees, (std::vector<int64_t>{8, 1}));
  EXPECT_EQ(sel1[0].degrees, (std::vector<int64_t>{8, 1, 1}));
  // A gelu read by two ops is kept (recomputing it once per reader).
  Graph twice = g;
  twice.ops.push_back(elementwise("relu2", "ppc.relu", 16, 64, fromOp(1)));
  ASSERT_EQ(statusText(twice.validate()), "");
  EXPECT_FALSE(megatron(twice, m, selective)[1].recompute);
  EXPECT_NE(findBaseline("megatron-sp-distopt-selective"), nullptr);
  // Each tensor-parallel group sits inside one node.
  for (size_t op = 0; op < 3; ++op) {
    std::vector<int64_t> devices = s[op].devices();
    ASSERT_EQ(devices.size(), 8u);
    for (size_t group = 0; group < 2; ++group)
      for (size_t i = 0; i < 4; ++i)
        EXPECT_EQ(m.getNode(devices[group * 4 + i]),
                  m.getNode(devices[group * 4]));
  }
  RooflineCostModel cost;
  Simulator simulator(g, m, cost);
  EXPECT_GT(simulator.simulate(s).iterationTime, 0);

  // tp = 1 is data parallel; a tp that does not divide the machine is cut
  // to one that does (3 -> 1).
  EXPECT_EQ(megatron(g, m, 1), dataParallel(g, 8));
  expectValid(g, megatron(g, m, 3), 8);
  // A block whose output goes nowhere is no block: its linear layer is
  // column parallel on its own (like Megatron's vocabulary-parallel head)
  // and the op after it is replicated in its group.
  Graph open = g;
  open.ops.resize(2);
  Strategy s2 = megatron(open, m, 4);
  expectValid(open, s2, 8);
  EXPECT_EQ(s2[0].degrees, (std::vector<int64_t>{2, 4, 1}));
  EXPECT_EQ(s2[1].degrees, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(s2[1].replicas, 4);
}

TEST(Baselines, MegatronVocabularyParallelLoss) {
  // x -> head (32 -> 64 classes) -> softmax cross-entropy with labels, as
  // SoftmaxCrossEntropyOp describes it: the block of the column-parallel
  // head ends in the loss, which splits its classes the same way (the
  // logits are never gathered) and is not recomputed by selective
  // recomputation.
  Graph g;
  g.numInputs = 2;
  g.weights = {{"head.w", {32, 64}}};
  g.ops.push_back(linear("head", 16, 32, 64, input(), 0));
  Op loss;
  loss.name = "loss";
  loss.kind = "ppc.softmax_cross_entropy";
  loss.space.dims = {{16, IterKind::Sample}, {64, IterKind::Reduction}};
  loss.space.operands = {TensorAccess::identity({16, 64}),
                         TensorAccess::identity({16})};
  loss.space.results = {TensorAccess{{}, {}}};
  StagedKernel staged;
  staged.forwardStages = 3;
  staged.forward = {{{{1, 0}}, 0, true}, {{{2}, {1, 0}}, 1}};
  staged.acrossDims = {1};
  loss.space.staged = staged;
  loss.cost = {6 * 16 * 64, 3 * 16 * 64, 4 * 16 * 64, 4 * 16 * 64};
  loss.operands = {fromOp(0), input(1)};
  g.ops.push_back(loss);
  ASSERT_EQ(statusText(g.validate()), "");
  Machine m = roundMachine(2, 4);
  MegatronOptions options{4, true, true};
  options.selectiveRecompute = true;
  Strategy s = megatron(g, m, options);
  expectValid(g, s, 8);
  EXPECT_EQ(s[0].degrees, (std::vector<int64_t>{2, 4, 1}));
  EXPECT_EQ(s[1].degrees, (std::vector<int64_t>{2, 4}));
  EXPECT_FALSE(s[1].recompute);
  // The two statistics reductions per group cost time: the same strategy
  // without them (a loss that needed none) is faster.
  RooflineCostModel cost;
  double staged3 = Simulator(g, m, cost).simulate(s).iterationTime;
  g.ops[1].space.staged.reset();
  double unstaged = Simulator(g, m, cost).simulate(s).iterationTime;
  EXPECT_GT(staged3, unstaged);
}

TEST(Baselines, OneWeirdTrick) {
  // Convolutions data parallel, the fully connected layers model parallel.
  Graph g = mlpGraph(16, 64);
  Graph convs = smallConvGraph();
  Machine m = roundMachine(1, 4);
  Strategy s = oneWeirdTrick(g, m);
  expectValid(g, s, 4);
  EXPECT_EQ(s[0].degrees, (std::vector<int64_t>{1, 4, 1}));
  EXPECT_EQ(s[1].degrees, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(s[2].degrees, (std::vector<int64_t>{1, 4, 1}));
  EXPECT_EQ(s[4].degrees, (std::vector<int64_t>{1, 4, 1}));
  EXPECT_EQ(oneWeirdTrick(convs, m), dataParallel(convs, 4));
  // 6 output features on 4 devices: 2-way model parallel, and the other
  // factor 2 on the batch.
  Graph odd;
  odd.numInputs = 1;
  odd.weights = {{"w", {64, 6}}};
  odd.ops.push_back(linear("fc", 16, 64, 6, input(), 0));
  Strategy t = oneWeirdTrick(odd, m);
  expectValid(odd, t, 4);
  EXPECT_EQ(t[0].degrees, (std::vector<int64_t>{2, 2, 1}));
  // On 2 nodes of 4: model parallel within each node, the nodes splitting
  // the batch.
  Machine two = roundMachine(2, 4);
  Strategy w = oneWeirdTrick(g, two);
  expectValid(g, w, 8);
  EXPECT_EQ(w[0].degrees, (std::vector<int64_t>{2, 4, 1}));
  EXPECT_EQ(w[1].degrees, (std::vector<int64_t>{8, 1}));
}

TEST(Baselines, SampleByParameter) {
  // Every op split 2 ways on its parameter dim inside contiguous pairs of
  // devices and 2 ways on the batch across the pairs; at degree 1, data
  // parallel.
  Graph g = mlpGraph(16, 64);
  Machine m = roundMachine(1, 4);
  Strategy s = sampleByParameter(g, m, 2);
  expectValid(g, s, 4);
  for (size_t op = 0; op < g.ops.size(); ++op) {
    EXPECT_EQ(s[op].numInstances(), 4) << op;
    if (g.ops[op].kind == "ppc.linear") {
      EXPECT_EQ(s[op].degrees, (std::vector<int64_t>{2, 2, 1})) << op;
      // Contiguous: the parameter split innermost, each pair one group.
      EXPECT_TRUE(s[op].strides.empty()) << op;
    }
  }
  EXPECT_EQ(sampleByParameter(g, m, 1), dataParallel(g, 4));
  // 6 output features do not split 4 ways: the layer runs whole on every
  // device of its group of 4 (the whole machine), as Megatron-LM runs what
  // its tensor split does not fit.
  Graph odd;
  odd.numInputs = 1;
  odd.weights = {{"w", {64, 6}}};
  odd.ops.push_back(linear("fc", 16, 64, 6, input(), 0));
  Strategy t = sampleByParameter(odd, m, 4);
  expectValid(odd, t, 4);
  EXPECT_EQ(t[0].degrees, (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(t[0].replicas, 4);
}

//===----------------------------------------------------------------------===//
// MCMC
//===----------------------------------------------------------------------===//

struct McmcFixture : ::testing::Test {
  Graph graph = mlpGraph();
  Machine machine = roundMachine(2, 4);
  RooflineCostModel cost;
  Problem problem{graph, machine, cost, {}};
  ConfigSpace space{graph, machine};

  double evaluate(const Strategy &strategy) {
    Simulator simulator(graph, machine, cost);
    return objective(problem, simulator.simulate(strategy));
  }
};

TEST_F(McmcFixture, ImprovesOnSingleDevice) {
  SearchOptions options;
  options.iterations = 2000;
  options.seed = 7;
  Strategy start = singleDevice(graph);
  SearchResult r = mcmc(problem, space, {start}, options);
  expectValid(graph, r.strategy, 8);
  EXPECT_EQ(r.algorithm, "MCMC");
  // 2.32 ms on one device; data parallel 4.38 ms (the weight all-reduce
  // crosses nodes), Megatron with tp 8 1.58 ms; the search finds 1.32 ms.
  double startTime = evaluate(start);
  EXPECT_LT(r.objective, 0.7 * startTime);
  EXPECT_LT(r.objective, evaluate(dataParallel(graph, 8)));
  EXPECT_LT(r.objective, evaluate(megatron(graph, machine, 8)));
  EXPECT_EQ(r.objective, evaluate(r.strategy));
  EXPECT_EQ(r.objective, r.result.iterationTime);
  EXPECT_EQ(r.iterations, 2000);
  EXPECT_GT(r.seconds, 0);
  // Trace: iteration 0, then every 100 iterations; best never increases.
  ASSERT_EQ(r.trace.size(), 21u);
  EXPECT_EQ(r.trace.front().iteration, 0);
  EXPECT_EQ(r.trace.front().current, startTime);
  EXPECT_EQ(r.trace.back().iteration, 2000);
  for (size_t i = 1; i < r.trace.size(); ++i)
    EXPECT_LE(r.trace[i].best, r.trace[i - 1].best);
  EXPECT_EQ(r.trace.back().best, r.objective);
}

TEST_F(McmcFixture, NeverWorseThanTheBestStart) {
  // A random walk (every proposal accepted that fits in memory, no reset)
  // from a poor start and a good one.
  std::vector<Strategy> starts = {singleDevice(graph), dataParallel(graph, 8),
                                  megatron(graph, machine, 4)};
  double bestStart = std::numeric_limits<double>::infinity();
  for (const Strategy &s : starts)
    bestStart = std::min(bestStart, evaluate(s));
  SearchOptions options;
  options.iterations = 50;
  options.beta = 0;
  options.resetAfter = 0;
  for (uint64_t seed : {1, 2, 3}) {
    options.seed = seed;
    SearchResult r = mcmc(problem, space, starts, options);
    EXPECT_LE(r.objective, bestStart);
  }
  // No budget: the best start, evaluated.
  SearchOptions none;
  SearchResult r = mcmc(problem, space, starts, none);
  EXPECT_EQ(r.iterations, 0);
  EXPECT_EQ(r.objective, bestStart);
}

TEST_F(McmcFixture, DeterministicForASeed) {
  SearchOptions options;
  options.iterations = 500;
  options.threads = 2;
  options.seed = 11;
  std::vector<Strategy> starts = {singleDevice(graph), dataParallel(graph, 8)};
  SearchResult a = mcmc(problem, space, starts, options);
  SearchResult b = mcmc(problem, space, starts, options);
  EXPECT_EQ(a.strategy, b.strategy);
  EXPECT_EQ(a.objective, b.objective);
  ASSERT_EQ(a.trace.size(), b.trace.size());
  for (size_t i = 0; i < a.trace.size(); ++i)
    EXPECT_EQ(a.trace[i].current, b.trace[i].current);
  // Another seed walks elsewhere (its result may or may not coincide).
  options.seed = 12;
  SearchResult c = mcmc(problem, space, starts, options);
  expectValid(graph, c.strategy, 8);
  bool sameWalk = a.trace.size() == c.trace.size();
  for (size_t i = 0; sameWalk && i < a.trace.size(); ++i)
    sameWalk = a.trace[i].current == c.trace[i].current;
  EXPECT_FALSE(sameWalk);
}

TEST_F(McmcFixture, TwoThreads) {
  SearchOptions options;
  options.iterations = 300;
  options.threads = 2;
  SearchResult r = mcmc(problem, space, {singleDevice(graph)}, options);
  EXPECT_EQ(r.iterations, 600);
  expectValid(graph, r.strategy, 8);
  EXPECT_LT(r.objective, evaluate(singleDevice(graph)));
}

TEST_F(McmcFixture, IterationBudget) {
  SearchOptions options;
  options.iterations = 250;
  options.traceEvery = 100;
  SearchResult r = mcmc(problem, space, {dataParallel(graph, 8)}, options);
  EXPECT_EQ(r.iterations, 250);
  // 0, 100, 200 and the final point.
  ASSERT_EQ(r.trace.size(), 4u);
  EXPECT_EQ(r.trace.back().iteration, 250);
}

TEST_F(McmcFixture, SecondsBudget) {
  SearchOptions options;
  options.seconds = 0.2;
  options.progress = true; // a line on stderr when it is a terminal
  SearchResult r = mcmc(problem, space, {dataParallel(graph, 8)}, options);
  EXPECT_GT(r.iterations, 0);
  EXPECT_LT(r.seconds, 2.0);
  EXPECT_GE(r.seconds, 0.2);
}

TEST_F(McmcFixture, CancelStopsEarly) {
  std::atomic<bool> cancel{true};
  SearchOptions options;
  options.iterations = 1'000'000'000;
  options.cancel = &cancel;
  SearchResult r = mcmc(problem, space, {dataParallel(graph, 8)}, options);
  EXPECT_EQ(r.iterations, 0);
  EXPECT_EQ(r.objective, evaluate(dataParallel(graph, 8)));

  // Cancelled from another thread while running on two.
  cancel = false;
  options.threads = 2;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    cancel = true;
  });
  SearchResult running =
      mcmc(problem, space, {dataParallel(graph, 8)}, options);
  canceller.join();
  EXPECT_GT(running.iterations, 0);
  EXPECT_LT(running.iterations, 2 * options.iterations);
  expectValid(graph, running.strategy, 8);
}

TEST_F(McmcFixture, InvalidStartsAreSkipped) {
  Strategy bad = singleDevice(graph);
  bad[0].start = 100; // no such device
  SearchOptions options;
  options.iterations = 10;
  SearchResult r = mcmc(problem, space, {bad}, options);
  expectValid(graph, r.strategy, 8);
  EXPECT_LE(r.objective, evaluate(dataParallel(graph, 8)));
}

TEST_F(McmcFixture, LeavesOutOfMemoryStart) {
  // Every op on device 0 needs more than the limit; data parallel does
  // not (the weights are replicated, the activations split).
  Strategy single = singleDevice(graph);
  Simulator simulator(graph, machine, cost);
  SimResult singleResult = simulator.simulate(single);
  SimResult dpResult = simulator.simulate(dataParallel(graph, 8));
  int64_t limit = (singleResult.peakMemory() + dpResult.peakMemory()) / 2;
  ASSERT_LT(dpResult.peakMemory(), limit);
  SimOptions limited;
  limited.memoryLimit = limit;
  Problem tight{graph, machine, cost, limited};
  ASSERT_EQ(
      objective(tight,
                Simulator(graph, machine, cost, limited).simulate(single)),
      std::numeric_limits<double>::infinity());
  SearchOptions options;
  options.iterations = 3000;
  SearchResult r = mcmc(tight, space, {single}, options);
  EXPECT_TRUE(std::isfinite(r.objective));
  EXPECT_LE(r.result.peakMemory(), limit);
}

TEST_F(McmcFixture, ThreadsAboveTheLimitAreClamped) {
  // 100000 threads ended in an uncaught std::system_error.
  SearchOptions options;
  options.iterations = 1;
  options.threads = 100000;
  SearchResult r = mcmc(problem, space, {dataParallel(graph, 8)}, options);
  EXPECT_EQ(r.iterations, kMaxSearchThreads);
  expectValid(graph, r.strategy, 8);
}

TEST_F(McmcFixture, StartObjectivesAreTheStartsSimulations) {
  // In the order given, NaN for a start that does not fit the machine;
  // the result is the winner's simulation, not a new one.
  Strategy bad = singleDevice(graph);
  bad[0].start = 100;
  std::vector<Strategy> starts = {singleDevice(graph), bad,
                                  dataParallel(graph, 8)};
  SearchOptions options;
  options.iterations = 20;
  SearchResult r = mcmc(problem, space, starts, options);
  ASSERT_EQ(r.startObjectives.size(), 3u);
  EXPECT_EQ(r.startObjectives[0], evaluate(starts[0]));
  EXPECT_TRUE(std::isnan(r.startObjectives[1]));
  EXPECT_EQ(r.startObjectives[2], evaluate(starts[2]));
  EXPECT_TRUE(r.cutShort.empty());
  EXPECT_EQ(r.objective, evaluate(r.strategy));
  EXPECT_EQ(r.result.iterationTime, r.objective);
}

TEST_F(McmcFixture, TheFirstStartsSimulationIsTakenAsGiven) {
  // The DP hands over its answer with its simulation: MCMC does not
  // simulate it again (a doctored result shows it was taken).
  Strategy start = dataParallel(graph, 8);
  SimResult given = Simulator(graph, machine, cost).simulate(start);
  given.iterationTime = 1e-9;
  SearchOptions none;
  SearchResult r =
      mcmc(problem, space, {start, singleDevice(graph)}, none, &given);
  EXPECT_EQ(r.startObjectives[0], 1e-9);
  EXPECT_EQ(r.startObjectives[1], evaluate(singleDevice(graph)));
  EXPECT_EQ(r.objective, 1e-9);
  EXPECT_EQ(r.strategy, start);
}

TEST_F(McmcFixture, StartsAreSimulatedUntilTheBudgetRunsOut) {
  // A budget spent before the second start: the first alone is simulated
  // (on a large model each takes seconds), no chain starts, and the
  // result says so.
  std::vector<Strategy> starts = {dataParallel(graph, 8), singleDevice(graph),
                                  megatron(graph, machine, 4)};
  SearchOptions options;
  options.seconds = 1e-12;
  SearchResult r = mcmc(problem, space, starts, options);
  EXPECT_EQ(r.iterations, 0);
  EXPECT_EQ(r.startObjectives[0], evaluate(starts[0]));
  EXPECT_TRUE(std::isnan(r.startObjectives[1]));
  EXPECT_TRUE(std::isnan(r.startObjectives[2]));
  EXPECT_EQ(r.strategy, starts[0]);
  EXPECT_EQ(r.objective, evaluate(starts[0]));
  ASSERT_EQ(r.cutShort.size(), 2u);
  EXPECT_EQ(r.cutShort[0],
            "mcmc: 1 of its 3 starts simulated before the budget ran out");
  EXPECT_EQ(r.cutShort[1], "mcmc: no proposal made: the budget ran out while "
                           "its starts were simulated");
  ASSERT_EQ(r.trace.size(), 1u);
}

TEST_F(McmcFixture, StoppedSimulationsAreNeverAnAnswer) {
  // Simulations stopped part way (a phase's deadline on a model whose one
  // simulation outlasts it) count as not simulated: no start objective, no
  // chain, the objective infinite and the result saying it stopped; a
  // stopped simulation handed over as the first start's is simulated again.
  std::atomic<bool> stop{true};
  Problem stopping = problem;
  stopping.simOptions.stop = &stop;
  std::vector<Strategy> starts = {dataParallel(graph, 8), singleDevice(graph)};
  SearchOptions options;
  options.iterations = 100;
  SearchResult r = mcmc(stopping, space, starts, options);
  EXPECT_EQ(r.iterations, 0);
  EXPECT_TRUE(std::isnan(r.startObjectives[0]));
  EXPECT_TRUE(std::isnan(r.startObjectives[1]));
  EXPECT_TRUE(r.result.stopped);
  EXPECT_EQ(r.objective, std::numeric_limits<double>::infinity());
  ASSERT_EQ(r.cutShort.size(), 1u);
  EXPECT_EQ(r.cutShort[0],
            "mcmc: 0 of its 2 starts simulated before the budget ran out");
  EXPECT_EQ(objective(problem, r.result),
            std::numeric_limits<double>::infinity());

  stop = false;
  SimResult handedOver;
  handedOver.stopped = true;
  SearchResult again = mcmc(stopping, space, starts, options, &handedOver);
  EXPECT_EQ(again.startObjectives[0], evaluate(starts[0]));
  EXPECT_FALSE(again.result.stopped);
  EXPECT_EQ(again.iterations, 100);
}

TEST_F(McmcFixture, NothingFittingStopsAtStopUnfitAfter) {
  // Memory no strategy fits: with stopUnfitAfter the chains give up at
  // that point instead of spending the whole budget (which the pipeline
  // search then gets), and say so.
  SimOptions limited;
  limited.memoryLimit = 1;
  Problem impossible{graph, machine, cost, limited};
  SearchOptions options;
  options.seconds = 30;
  options.stopUnfitAfter = 0.05;
  SearchResult r =
      mcmc(impossible, space, {dataParallel(graph, 8)}, options);
  EXPECT_FALSE(std::isfinite(r.objective));
  EXPECT_GT(r.iterations, 0);
  EXPECT_LT(r.seconds, options.seconds);
  ASSERT_EQ(r.cutShort.size(), 1u);
  EXPECT_EQ(r.cutShort[0], "mcmc: stopped at 0.05 s with nothing that fits in "
                           "memory, leaving the rest of the budget to the "
                           "pipeline search");
  // Starts too: none after stopUnfitAfter while none simulated fits.
  options.stopUnfitAfter = 1e-12;
  SearchResult first = mcmc(impossible, space,
                            {dataParallel(graph, 8), singleDevice(graph)},
                            options);
  EXPECT_EQ(first.iterations, 0);
  ASSERT_FALSE(first.cutShort.empty());
  EXPECT_EQ(first.cutShort[0],
            "mcmc: 1 of its 2 starts simulated before the budget ran out");
  EXPECT_TRUE(std::isnan(first.startObjectives[1]));
  // Something that fits: the whole budget is the chains' (a short one).
  options.seconds = 0.3;
  options.stopUnfitAfter = 0.05;
  SearchResult fits = mcmc(problem, space, {dataParallel(graph, 8)}, options);
  EXPECT_GE(fits.seconds, 0.3);
  EXPECT_TRUE(fits.cutShort.empty());
}

TEST(StrategyJson, DegreesThatOverflowAreErrors) {
  constexpr int64_t k2p62 = int64_t(1) << 62;
  Graph g;
  g.numInputs = 1;
  g.ops.push_back(elementwise("act", "ppc.relu", k2p62, 4, input()));
  Machine m = roundMachine(1, 8);
  std::string error;
  // 2^62 x 4 overflows int64.
  error = statusText(readStrategyJson(
      R"({"ops": [{"name": "act", "degrees": [4611686018427387904, 4]}]})",
      "s.json", g, m));
  EXPECT_NE(error, "");
  EXPECT_EQ(error.rfind("s.json: ops[0]: degrees [4611686018427387904, 4] "
                        "start 0 do not fit op 'act' (ppc.relu) on 8 devices: "
                        "strategy uses devices beyond 2^63",
                        0),
            0u)
      << error;
  // Above INT64_MAX a JSON integer is unsigned; it must not wrap.
  error = statusText(readStrategyJson(
      R"({"ops": [{"name": "act", "degrees": [18446744073709551615, 1]}]})",
      "s.json", g, m));
  EXPECT_NE(error, "");
  EXPECT_EQ(error, "s.json: ops[0].degrees[0]: must be less than 2^63");
  error = statusText(readStrategyJson(
      R"({"ops": [{"name": "act", "degrees": [1, 1], "start": 9223372036854775808}]})",
      "s.json", g, m));
  EXPECT_NE(error, "");
  EXPECT_EQ(error, "s.json: ops[0].start: must be less than 2^63");
}

} // namespace

//===----------------------------------------------------------------------===//
// Pipeline search
//===----------------------------------------------------------------------===//

TEST(PipelineSearch, RefusesCountsThatCannotWorkAndSaysWhy) {
  Graph g = mlp6(); // batch 64
  Machine m = roundMachine(1, 4);
  RooflineCostModel cost;
  Problem problem{g, m, cost, {}};
  SearchOptions options;
  options.seconds = 10;
  auto refusal = [&](int64_t stages, int64_t microbatches) {
    PipelineSearchOptions fixed;
    fixed.stages = stages;
    fixed.microbatches = microbatches;
    SearchResult r = pipelineSearch(problem, options, fixed);
    EXPECT_TRUE(r.strategy.empty());
    return r.algorithm;
  };
  EXPECT_EQ(refusal(3, 0),
            "pipeline search: stages = 3 does not divide the 4 devices into "
            "equal submeshes: take 1, 2 or 4 (0: searched)");
  EXPECT_EQ(refusal(2, 3),
            "pipeline search: microbatches = 3 does not divide the batch of "
            "64 samples: take 1, 2, 4, 8, 16, 32 or 64 (0: searched)");
  EXPECT_NE(refusal(INT64_MAX, 0).find("does not divide the 4 devices"),
            std::string::npos);

  // fc2 normalizes by its batch's statistics (as batch norm does): no
  // micro-batches for it, asked for or searched.
  StagedKernel statistics;
  statistics.acrossDims = {0};
  g.ops[2].space.staged = statistics;
  Problem normalized{g, m, cost, {}};
  PipelineSearchOptions two;
  two.microbatches = 2;
  SearchResult refused = pipelineSearch(normalized, options, two);
  EXPECT_TRUE(refused.strategy.empty());
  EXPECT_NE(refused.algorithm.find("'fc2' normalizes by statistics of the "
                                   "whole batch, which a pipeline of 2 "
                                   "micro-batches never has at once"),
            std::string::npos)
      << refused.algorithm;
  SearchResult searched = pipelineSearch(normalized, options);
  ASSERT_EQ(searched.strategy.size(), g.ops.size());
  EXPECT_LE(searched.pipeline.microbatches, 1);
  EXPECT_EQ(
      statusText(checkPipeline(g, searched.strategy, searched.pipeline, 4)),
      "");
  // Inference reads running statistics: micro-batches are fine then.
  g.ops[2].space.staged->trainingOnly = true;
  EXPECT_EQ(statusText(checkMicroBatching(g, 2, /*training=*/false)), "");
  EXPECT_NE(statusText(checkMicroBatching(g, 2)), "");
}

TEST(PipelineSearch, PicksTheFastestCandidateAndBuildsValidStages) {
  // Eight wide linear layers (2048 x 2048, 16 MB each) on two nodes of two
  // devices with 1 GB/s between the nodes. Whatever wins (here one weird
  // trick, whose parameter splits synchronize no gradient), it is no slower
  // than any unpipelined baseline or any 2-stage pipeline, and its
  // objective is its own simulation.
  Graph g;
  g.numInputs = 1;
  Source in = input();
  for (int l = 0; l < 8; ++l) {
    g.ops.push_back(linear(g, "fc" + std::to_string(l), 32, 2048, 2048, in));
    in = fromOp(l);
  }
  ASSERT_EQ(statusText(g.validate()), "");
  Machine m = roundMachine(2, 2, 4'000'000'000);
  RooflineCostModel cost;
  Problem problem{g, m, cost, {}};
  SearchOptions options;
  options.seconds = 60;
  SearchResult found = pipelineSearch(problem, options);
  ASSERT_EQ(found.strategy.size(), g.ops.size());
  EXPECT_EQ(statusText(checkPipeline(g, found.strategy, found.pipeline, 4)),
            "");
  // The objective is the strategy's own simulation...
  PipelineResult again =
      simulatePipeline(g, m, cost, {}, found.strategy, found.pipeline);
  EXPECT_DOUBLE_EQ(found.objective, again.iterationTime);
  // ...and no unpipelined baseline is faster.
  for (const BaselineInfo &info : baselines()) {
    Simulator simulator(g, m, cost);
    SimResult r = simulator.simulate(info.build(g, m));
    if (!r.outOfMemory) {
      EXPECT_LE(found.objective, r.iterationTime) << info.name;
    }
  }
  EXPECT_GT(found.iterations, 10);
  PipelineSearchOptions twoStages;
  twoStages.stages = 2;
  SearchResult pipelined = pipelineSearch(problem, options, twoStages);
  ASSERT_TRUE(pipelined.pipeline.enabled());
  // Two submeshes (each with several stages when interleaving wins).
  EXPECT_EQ(pipelined.pipeline.numGroups(), 2);
  EXPECT_LE(found.objective, pipelined.objective);

  // Fixed choices are kept: 2 stages of data parallel, 4 micro-batches,
  // 1F1B.
  PipelineSearchOptions fixed;
  fixed.stages = 2;
  fixed.microbatches = 4;
  fixed.stageBaseline = "data-parallel";
  fixed.schedule = PipelineSchedule::OneFOneB;
  SearchResult two = pipelineSearch(problem, options, fixed);
  ASSERT_TRUE(two.pipeline.enabled());
  EXPECT_EQ(two.pipeline.microbatches, 4);
  EXPECT_EQ(two.pipeline.firstDevice, (std::vector<int64_t>{0, 2}));
  for (size_t op = 0; op < g.ops.size(); ++op) {
    EXPECT_EQ(two.strategy[op].stage, op < 4 ? 0 : 1) << op;
    // Data parallel over the stage's two devices, micro-batch 8 each.
    EXPECT_EQ(two.strategy[op].degrees[0], 2) << op;
    EXPECT_EQ(two.strategy[op].start, op < 4 ? 0 : 2) << op;
  }
  EXPECT_NE(two.algorithm.find("data-parallel in each stage"),
            std::string::npos);

  // A candidate too large to simulate is skipped; when all are, the result
  // says why instead of holding a strategy.
  PipelineSearchOptions tiny = fixed;
  tiny.maxTransferPairs = 1;
  SearchResult skipped = pipelineSearch(problem, options, tiny);
  EXPECT_TRUE(skipped.strategy.empty());
  EXPECT_NE(skipped.algorithm.find("every candidate was skipped: simulating "
                                   "each would need more than 1 "
                                   "point-to-point transfers (1 candidates)"),
            std::string::npos)
      << skipped.algorithm;

  // Interleaved: the two submeshes take the stages of a finer cut in turn.
  PipelineSearchOptions interleaved = fixed;
  interleaved.schedule = PipelineSchedule::Interleaved;
  SearchResult dealt = pipelineSearch(problem, options, interleaved);
  ASSERT_EQ(dealt.pipeline.schedule, PipelineSchedule::Interleaved);
  EXPECT_EQ(statusText(checkPipeline(g, dealt.strategy, dealt.pipeline, 4)),
            "");
  int32_t stages = dealt.pipeline.numStages();
  EXPECT_GE(stages, 4);
  EXPECT_EQ(dealt.pipeline.numGroups(), 2);
  for (int32_t s = 0; s < stages; ++s)
    EXPECT_EQ(dealt.pipeline.firstDevice[s], s % 2 == 0 ? 0 : 2) << s;
  EXPECT_NE(dealt.algorithm.find("(2 submeshes x " +
                                 std::to_string(stages / 2) + ")"),
            std::string::npos)
      << dealt.algorithm;
}

//===----------------------------------------------------------------------===//
// Stage DP (Alpa's inter-operator pass)
//===----------------------------------------------------------------------===//

namespace {

/// The cost of an elementwise op on a [32, 64] tensor below.
const OpCost kSublayerElementwise{2048, 2048, 3 * 8192, 6 * 8192};

/// Appends two residual sublayers of [32, 64] tensors reading `in` (of
/// `inFeatures`): a = fc0(in); b = fc2(relu1(a)); c = add3(a, b);
/// d = fc5(relu4(c)); out = add6(c, d), seven ops numbered from the first.
void addTwoResidualSublayers(Graph &g, Source in, int64_t inFeatures) {
  const int32_t a = static_cast<int32_t>(g.ops.size());
  const OpCost &unit = kSublayerElementwise;
  g.ops.push_back(linear(g, "fc0", 32, inFeatures, 64, in));
  g.ops.push_back(ppc::sim::testing::elementwise("relu1", "ppc.relu", 32, 64,
                                                 {fromOp(a)}, unit));
  g.ops.push_back(linear(g, "fc2", 32, 64, 64, fromOp(a + 1)));
  g.ops.push_back(ppc::sim::testing::elementwise(
      "add3", "ppc.add", 32, 64, {fromOp(a), fromOp(a + 2)}, unit));
  g.ops.push_back(ppc::sim::testing::elementwise("relu4", "ppc.relu", 32, 64,
                                                 {fromOp(a + 3)}, unit));
  g.ops.push_back(linear(g, "fc5", 32, 64, 64, fromOp(a + 4)));
  g.ops.push_back(ppc::sim::testing::elementwise(
      "add6", "ppc.add", 32, 64, {fromOp(a + 3), fromOp(a + 5)}, unit));
}

/// Which ops recomputeLayers marks in `g`'s data-parallel strategy.
std::vector<bool> recomputedByLayers(const Graph &g) {
  Strategy strategy = dataParallel(g, 1);
  recomputeLayers(g, strategy);
  std::vector<bool> recomputed;
  for (const OpConfig &config : strategy)
    recomputed.push_back(config.recompute);
  return recomputed;
}

} // namespace

TEST(Baselines, FullRecomputationKeepsEverySecondCheapestCut) {
  // Two residual sublayers: a = fc0(x); b = fc2(relu(a)); c = a + b;
  // d = fc5(relu(c)); out = c + d. The cheapest cuts (one [32, 64] tensor
  // crossing) are after a and after c. One checkpoint per two, counted
  // back from the end (as Megatron-LM keeps one per layer of two residual
  // sublayers): a is kept, c is not; the output (nothing reads it) keeps
  // its result; the rest is recomputed.
  Graph g;
  g.numInputs = 1;
  addTwoResidualSublayers(g, input(), 64);
  ASSERT_EQ(statusText(g.validate()), "");
  std::vector<bool> recomputed = recomputedByLayers(g);
  EXPECT_EQ(recomputed,
            (std::vector<bool>{false, true, true, true, true, true, false}));
}

TEST(Baselines, FullRecomputationCutsNoLayerBeforeTheFirstWeight) {
  // The two sublayers above behind two ops without weights (a model whose
  // labels and tokens ppc-zigzag-sequence reorders): "labels" is read by
  // the last op, "tokens" [32, 4] by fc0. The cuts before fc0 carry fewer
  // bytes than any between the layers (labels plus the tokens) but hold no
  // layer: the cheapest cuts are still the residual stream's (after c and
  // before the loss), of which the one after c is kept, counted back from
  // the end.
  Graph g;
  g.numInputs = 2;
  g.ops.push_back(elementwise("labels", "ppc.relu", 32, 64, {input(1)},
                              kSublayerElementwise));
  g.ops.push_back(elementwise("tokens", "ppc.relu", 32, 4, {input()},
                              {128, 128, 3 * 512, 6 * 512}));
  addTwoResidualSublayers(g, fromOp(1), 4);
  g.ops.push_back(elementwise("loss", "ppc.add", 32, 64, {fromOp(8), fromOp(0)},
                              kSublayerElementwise));
  ASSERT_EQ(statusText(g.validate()), "");
  std::vector<bool> recomputed = recomputedByLayers(g);
  EXPECT_EQ(recomputed, (std::vector<bool>{false, true, true, true, true, false,
                                           true, true, true, false}));
}

namespace {

/// `layers` linear layers of equal FLOPs, batch `batch`, whose outputs
/// alternate `wide` and `narrow` features, narrow first: the cheap cuts
/// are after the narrow ones (odd cut positions).
Graph wideNarrowChain(int layers, int64_t batch = 32, int64_t wide = 1024,
                      int64_t narrow = 64) {
  Graph g;
  g.numInputs = 1;
  Source in = input();
  for (int l = 0; l < layers; ++l) {
    bool odd = l % 2 == 1;
    g.ops.push_back(linear(g, "fc" + std::to_string(l), batch,
                           odd ? narrow : wide, odd ? wide : narrow, in));
    in = fromOp(l);
  }
  return g;
}

} // namespace

TEST(StageDp, ClustersCutWhereTheFewestBytesCross) {
  Graph g = wideNarrowChain(8);
  ASSERT_EQ(statusText(g.validate()), "");
  std::vector<int64_t> crossing = detail::crossingBytes(g);
  ASSERT_EQ(crossing.size(), 9u);
  EXPECT_EQ(crossing[0], 0);
  EXPECT_EQ(crossing[3], 32 * 64 * 4);   // after a narrow output
  EXPECT_EQ(crossing[4], 32 * 1024 * 4); // after a wide one
  EXPECT_EQ(crossing[8], 0);
  // The equal-FLOP point is cut 4; within a quarter cluster (one op) of it,
  // cuts 3 and 5 carry 16 times fewer bytes: the nearer-first, 3, wins.
  EXPECT_EQ(detail::layerClusters(g, 2),
            (std::vector<int32_t>{0, 0, 0, 1, 1, 1, 1, 1}));
  // As many clusters as ops (or more): one op each.
  EXPECT_EQ(detail::layerClusters(g, 20),
            (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(detail::layerClusters(g, 1), std::vector<int32_t>(8, 0));
}

TEST(StageDp, FindsTheBestCoverOfClustersAndDevices) {
  // Four layers of different costs, one cluster each, on one node of four
  // devices (blocks of 1, 2 or 4), data parallel inside, 4 micro-batches.
  // Oracle: every split of the clusters into contiguous stages times every
  // sequence of block sizes covering the devices, each costed as the DP's
  // model says (the clusters' simulated latencies summed, the boundary
  // transfers, (m - 1) x the slowest stage).
  Graph g;
  g.numInputs = 1;
  int64_t dims[5] = {512, 2048, 512, 512, 256};
  for (int l = 0; l < 4; ++l)
    g.ops.push_back(linear(g, "fc" + std::to_string(l), 64, dims[l],
                           dims[l + 1], l ? fromOp(l - 1) : input()));
  ASSERT_EQ(statusText(g.validate()), "");
  Machine m = roundMachine(1, 4);
  RooflineCostModel cost;
  Problem problem{g, m, cost, {}};
  const int64_t micro = 4;
  const BaselineInfo *dp = findBaseline("data-parallel");
  ASSERT_NE(dp, nullptr);
  detail::StageDpOptions options;
  options.maxClusters = 4;
  options.plansPerMicrobatchCount = 1000;
  std::vector<detail::StagePlan> plans =
      detail::stageDp(problem, {dp}, {micro}, options);
  ASSERT_FALSE(plans.empty());

  std::vector<int32_t> clusters = detail::layerClusters(g, 4);
  ASSERT_EQ(clusters, (std::vector<int32_t>{0, 1, 2, 3}));
  Graph microGraph = microBatchGraph(g, micro);
  std::map<std::pair<int32_t, int64_t>, double> clusterLatency;
  for (int32_t c = 0; c < 4; ++c)
    for (int64_t d : {1, 2, 4}) {
      Graph part = stageGraph(microGraph, clusters, c);
      Machine mesh = m.subMachine(0, d);
      Simulator simulator(part, mesh, cost);
      clusterLatency[{c, d}] =
          simulator.simulate(dp->build(part, mesh)).backwardTime;
    }
  std::vector<int64_t> crossing = detail::crossingBytes(g);
  auto boundary = [&](int32_t cut, int64_t next) {
    if (cut == 4 || next == 4)
      return 0.0;
    double bytes = static_cast<double>(crossing[cut]) / micro;
    return 2 * m.effectiveLink(next - 1, next, bytes).transferTime(bytes);
  };
  // ends: the clusters each stage ends before; sizes: its devices.
  auto modelled = [&](const std::vector<int32_t> &ends,
                      const std::vector<int64_t> &sizes) {
    double sum = 0, slowest = 0;
    int32_t begin = 0;
    int64_t first = 0;
    for (size_t s = 0; s < ends.size(); ++s) {
      double latency = 0;
      for (int32_t c = begin; c < ends[s]; ++c)
        latency += clusterLatency[{c, sizes[s]}];
      sum += latency + boundary(ends[s], first + sizes[s]);
      slowest = std::max(slowest, latency);
      begin = ends[s];
      first += sizes[s];
    }
    return sum + (micro - 1) * slowest;
  };
  double oracle = std::numeric_limits<double>::infinity();
  // Stage ends as a bit mask over the cuts 1..3; block sizes by recursion.
  std::function<void(std::vector<int64_t> &, int64_t,
                     const std::vector<int32_t> &)>
      cover = [&](std::vector<int64_t> &sizes, int64_t used,
                  const std::vector<int32_t> &ends) {
        if (sizes.size() == ends.size()) {
          if (used == 4)
            oracle = std::min(oracle, modelled(ends, sizes));
          return;
        }
        for (int64_t d : {1, 2, 4}) {
          sizes.push_back(d);
          cover(sizes, used + d, ends);
          sizes.pop_back();
        }
      };
  for (int mask = 0; mask < 8; ++mask) {
    std::vector<int32_t> ends;
    for (int32_t cut = 1; cut < 4; ++cut)
      if (mask & (1 << (cut - 1)))
        ends.push_back(cut);
    ends.push_back(4);
    std::vector<int64_t> sizes;
    cover(sizes, 0, ends);
  }

  double bestPlan = std::numeric_limits<double>::infinity();
  for (const detail::StagePlan &plan : plans) {
    // Each plan is a pipeline: contiguous stages covering the devices.
    ASSERT_EQ(plan.microbatches, micro);
    std::vector<int32_t> ends;
    for (size_t op = 0; op < 4; ++op) {
      if (op > 0 && plan.stageOf[op] != plan.stageOf[op - 1]) {
        EXPECT_EQ(plan.stageOf[op], plan.stageOf[op - 1] + 1);
        ends.push_back(static_cast<int32_t>(op));
      }
    }
    ends.push_back(4);
    ASSERT_EQ(ends.size(), plan.numDevices.size());
    int64_t next = 0;
    for (size_t s = 0; s < plan.numDevices.size(); ++s) {
      EXPECT_EQ(plan.firstDevice[s], next);
      next += plan.numDevices[s];
      EXPECT_EQ(plan.inside[s], dp);
    }
    EXPECT_EQ(next, 4);
    // Its latencies are the clusters' summed.
    int32_t begin = 0;
    for (size_t s = 0; s < ends.size(); ++s) {
      double latency = 0;
      for (int32_t c = begin; c < ends[s]; ++c)
        latency += clusterLatency[{c, plan.numDevices[s]}];
      EXPECT_NEAR(plan.latency[s], latency, 1e-12) << s;
      begin = ends[s];
    }
    double value = modelled(ends, plan.numDevices);
    EXPECT_GE(plan.estimate, value - 1e-12);
    bestPlan = std::min(bestPlan, value);
  }
  EXPECT_NEAR(bestPlan, oracle, 1e-12 * oracle);
}

TEST(StageDp, CheapCutsBeatEqualFlopCutsOnASlowLink) {
  // Three nodes of two devices, 1 GB/s between nodes: the equal-FLOP cuts
  // of twelve equal layers into 3 stages (before ops 4 and 8) cross wide
  // outputs; the stage DP's clusters cut after narrow ones.
  Graph g = wideNarrowChain(12, 512, 4096, 256);
  ASSERT_EQ(statusText(g.validate()), "");
  Machine m = roundMachine(3, 2);
  RooflineCostModel cost;
  Problem problem{g, m, cost, {}};
  SearchOptions options;
  options.seconds = 60;
  PipelineSearchOptions equalOnly;
  equalOnly.stageDp = false;
  SearchResult equal = pipelineSearch(problem, options, equalOnly);
  SearchResult found = pipelineSearch(problem, options);
  ASSERT_TRUE(std::isfinite(equal.objective));
  ASSERT_TRUE(found.pipeline.enabled()) << found.algorithm;
  EXPECT_EQ(statusText(checkPipeline(g, found.strategy, found.pipeline, 6)),
            "");
  EXPECT_LT(found.objective, 0.99 * equal.objective)
      << found.algorithm << " vs " << equal.algorithm;
  // Its stage boundaries are cheap cuts (after a narrow output).
  for (size_t op = 1; op < g.ops.size(); ++op) {
    if (found.strategy[op].stage != found.strategy[op - 1].stage) {
      EXPECT_EQ(op % 2, 1u) << op << ": " << found.algorithm;
    }
  }
}
