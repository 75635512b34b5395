//===- SearchModelsTest.cpp - baselines and MCMC on the example models ----===//
//
// The bundled example models, imported as the compiler imports them:
// Megatron recognizes the transformer's blocks, "one weird trick" the CNN's
// fully connected layer, and MCMC improves on data parallelism.
//
//===----------------------------------------------------------------------===//

#include "StatusText.h"
#include "ppc/Import/OnnxImporter.h"
#include "ppc/ModelLoader/ModelLoader.h"
#include "ppc/Search/Search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>

using namespace ppc;
using namespace ppc::sim;
using namespace ppc::search;
using ppc::test::statusText;

namespace {

std::optional<Graph> importExample(const std::string &name, int64_t batch) {
  OnnxImportOptions options;
  options.batchSize = batch;
  std::string error;
  std::optional<Graph> graph = loadSimGraph(
      std::string(PPC_SOURCE_DIR) + "/examples/" + name, options, error);
  EXPECT_TRUE(graph) << error;
  return graph;
}

Machine preset(const std::string &name) {
  absl::StatusOr<Machine> machine = loadMachine(name);
  EXPECT_TRUE(machine.ok()) << statusText(machine);
  return *machine;
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

TEST(SearchModels, MegatronOnTheTransformer) {
  std::optional<Graph> graph = importExample("transformer.onnx", 16);
  ASSERT_TRUE(graph);
  Machine machine = preset("p100x16"); // 4 nodes x 4
  Strategy s = megatron(*graph, machine, 4);
  expectValid(*graph, s, 16);

  // 2 blocks x (q, k, v, ff1 column parallel; out, ff2 row parallel); the
  // LM head feeds the output and stays data parallel.
  int columns = 0, rows = 0, heads = 0;
  for (size_t i = 0; i < graph->ops.size(); ++i) {
    const Op &op = graph->ops[i];
    const std::vector<int64_t> &degrees = s[i].degrees;
    for (size_t d = 0; d < degrees.size(); ++d) {
      if (degrees[d] != 4)
        continue;
      IterKind kind = op.space.dims[d].kind;
      if (op.kind == "ppc.linear" && kind == IterKind::Parameter)
        ++columns;
      else if (op.kind == "ppc.linear" && kind == IterKind::Reduction)
        ++rows;
      else if (op.kind == "ppc.attention" && d == 1)
        ++heads; // the fused attention core, split by heads
    }
    // Data parallel on the remaining 4 devices, everywhere.
    if (!op.space.dims.empty() && op.space.dims[0].kind == IterKind::Sample &&
        op.space.dims[0].splittable) {
      EXPECT_EQ(degrees[0], 4) << op.name;
    }
  }
  // q, k, v, ff1 of both blocks, and the vocabulary head on its own.
  EXPECT_EQ(columns, 9);
  EXPECT_EQ(rows, 4);
  EXPECT_EQ(heads, 2);
  // Tensor-parallel groups inside a node: partitions 4g..4g+3 share one.
  for (size_t i = 0; i < graph->ops.size(); ++i) {
    std::vector<int64_t> devices = s[i].devices();
    if (devices.size() != 16)
      continue;
    for (size_t p = 0; p < 16; ++p)
      EXPECT_EQ(machine.getNode(devices[p]),
                machine.getNode(devices[p / 4 * 4]));
  }

  RooflineCostModel cost;
  Simulator simulator(*graph, machine, cost);
  SimResult result = simulator.simulate(s);
  EXPECT_GT(result.iterationTime, 0);
  std::printf("transformer on p100x16: data parallel %.3f ms, megatron tp4 "
              "%.3f ms\n",
              simulator.simulate(dataParallel(*graph, 16)).iterationTime * 1e3,
              result.iterationTime * 1e3);
}

TEST(SearchModels, MegatronOnTheMlp) {
  // fc1 -> relu -> fc2 is one pair; fc3 feeds the output.
  std::optional<Graph> graph = importExample("mlp.onnx", 32);
  ASSERT_TRUE(graph);
  Machine machine = preset("dgx-a100"); // 8 devices
  Strategy s = megatron(*graph, machine, 8);
  expectValid(*graph, s, 8);
  std::vector<size_t> linears;
  for (size_t i = 0; i < graph->ops.size(); ++i)
    if (graph->ops[i].kind == "ppc.linear")
      linears.push_back(i);
  ASSERT_EQ(linears.size(), 3u);
  EXPECT_EQ(s[linears[0]].degrees, (std::vector<int64_t>{1, 8, 1}));
  EXPECT_EQ(s[linears[1]].degrees, (std::vector<int64_t>{1, 1, 8}));
  // fc3, outside the pair, is column parallel on its own where its 10
  // outputs divide by tp: not with tp 8 (it runs on the first device of the
  // one group), but with tp 2 (and 4-way over the batch).
  EXPECT_EQ(s[linears[2]].degrees, (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(megatron(*graph, machine, 2)[linears[2]].degrees,
            (std::vector<int64_t>{4, 2, 1}));
}

TEST(SearchModels, OneWeirdTrickOnTheCnn) {
  std::optional<Graph> graph = importExample("cnn.onnx", 16);
  ASSERT_TRUE(graph);
  Machine machine = preset("dgx-h100"); // 8 devices
  Strategy s = oneWeirdTrick(*graph, machine);
  expectValid(*graph, s, 8);
  Strategy dp = dataParallel(*graph, 8);
  int convs = 0, linears = 0;
  for (size_t i = 0; i < graph->ops.size(); ++i) {
    const Op &op = graph->ops[i];
    if (op.kind == "ppc.linear") {
      // 10 output features: 2-way model parallel, 4-way over the batch.
      ++linears;
      EXPECT_EQ(s[i].degrees, (std::vector<int64_t>{4, 2, 1}));
    } else {
      convs += op.kind == "ppc.conv2d";
      EXPECT_EQ(s[i], dp[i]) << op.name;
    }
  }
  EXPECT_EQ(convs, 3);
  EXPECT_EQ(linears, 1);
  RooflineCostModel cost;
  Simulator simulator(*graph, machine, cost);
  EXPECT_GT(simulator.simulate(s).iterationTime, 0);
}

/// Every layout of the Megatron layouts phase's grid, simulated: pp in
/// {1, 2, 4}, tp and cp in powers of two, every context exchange, every
/// recomputation, the micro-batch counts megatronLayout sweeps itself; and
/// Ulysses x ZeRO-3. The fastest that fits (objective +infinity if none
/// does) and how many simulations that took.
struct GridBest {
  double objective = std::numeric_limits<double>::infinity();
  std::string layout;
  int64_t simulations = 0;
};
GridBest bruteForceMegatron(const Problem &problem) {
  int64_t devices = problem.machine.numDevices();
  GridBest best;
  auto consider = [&](const MegatronLayout &layout) {
    absl::StatusOr<SearchResult> r = megatronLayout(problem, layout);
    if (!r.ok())
      return;
    best.simulations += r->iterations;
    if (r->objective < best.objective) {
      best.objective = r->objective;
      best.layout = r->algorithm;
    }
  };
  for (int64_t pp : {1, 2, 4})
    for (int64_t tp = 1; tp * pp <= devices; tp *= 2)
      for (int64_t cp = 1; tp * cp * pp <= devices; cp *= 2)
        for (const ContextExchangeInfo &exchange : contextExchanges()) {
          if (cp == 1 && exchange.kind != contextExchanges().front().kind)
            continue;
          for (const RecomputeInfo &recompute : recomputeModes()) {
            MegatronLayout layout;
            layout.tensorParallel = tp;
            layout.pipelineParallel = pp;
            layout.contextParallel = cp;
            layout.contextExchange = exchange.kind;
            layout.recompute = recompute.mode;
            layout.sequenceParallel = tp > 1;
            layout.distributedOptimizer = true;
            consider(layout);
            if (pp == 1 && tp == 1 && cp > 1 &&
                exchange.kind == ContextExchange::AllToAll) {
              layout.sequenceParallel = false;
              layout.distributedOptimizer = false;
              layout.shardWeights = true;
              consider(layout);
            }
          }
        }
  return best;
}

TEST(SearchModels, MegatronLayoutsFindTheGridsBestWithFewerSimulations) {
  // The example transformer on 16 P100s (4 nodes x 4), Adam: with all the
  // memory, and with a half down to an eighth of one replica's training
  // state per device (then pipelines, more tensor parallelism, full
  // recomputation and, at an eighth, context parallelism are needed). The
  // phase's rules (the smallest cp that fits, the least recomputation,
  // halving micro-batch counts while faster, nothing simulated that the
  // memory order decides) find the fastest layout of the whole grid with a
  // fraction of its simulations.
  std::optional<Graph> graph = importExample("transformer.onnx", 16);
  ASSERT_TRUE(graph);
  Machine machine = preset("p100x16");
  RooflineCostModel cost;
  SimOptions options;
  options.optimizer = Optimizer::Adam;
  int64_t state = 0;
  for (const Weight &weight : graph->weights) {
    int64_t elems = 1;
    for (int64_t d : weight.shape)
      elems *= d;
    state += elems * trainingStateBytes(weight.elemBytes, weight.trainable,
                                        Optimizer::Adam)
                         .total();
  }
  for (int64_t limit :
       {int64_t(0), state / 2, state / 4, state / 6, state / 8}) {
    SCOPED_TRACE("memory limit " + std::to_string(limit));
    options.memoryLimit = limit;
    Problem problem{*graph, machine, cost, options};
    GridBest grid = bruteForceMegatron(problem);
    ASSERT_TRUE(std::isfinite(grid.objective));
    SearchOptions budget;
    SearchResult found = megatronLayouts(problem, budget);
    ASSERT_FALSE(found.strategy.empty());
    EXPECT_TRUE(found.cutShort.empty());
    EXPECT_LE(found.objective, grid.objective * (1 + 1e-9))
        << found.algorithm << " against " << grid.layout;
    EXPECT_LT(found.iterations, grid.simulations / 2);
    std::printf("Megatron layouts, memory limit %lld: %s, %.3f ms (the "
                "grid's best: %s, %.3f ms) in %lld simulations (the grid: "
                "%lld)\n",
                static_cast<long long>(limit), found.algorithm.c_str(),
                found.objective * 1e3, grid.layout.c_str(),
                grid.objective * 1e3, static_cast<long long>(found.iterations),
                static_cast<long long>(grid.simulations));
  }
}

TEST(SearchModels, McmcOnTheTransformer) {
  std::optional<Graph> graph = importExample("transformer.onnx", 64);
  ASSERT_TRUE(graph);
  Machine machine = preset("p100x16");
  RooflineCostModel cost;
  Problem problem{*graph, machine, cost, {}};
  ConfigSpace space(*graph, machine);
  EXPECT_GT(space.log10Size(), 10);
  Strategy dp = dataParallel(*graph, 16);
  Strategy tp = megatron(*graph, machine, 4);
  SearchOptions options;
  options.iterations = 3000;
  options.threads = 2;
  SearchResult r = mcmc(problem, space, {dp, tp}, options);
  expectValid(*graph, r.strategy, 16);
  Simulator simulator(*graph, machine, cost);
  double dpTime = simulator.simulate(dp).iterationTime;
  double tpTime = simulator.simulate(tp).iterationTime;
  EXPECT_LE(r.objective, std::min(dpTime, tpTime));
  std::printf("transformer batch 64 on p100x16: %zu ops, 10^%.1f strategies; "
              "data parallel %.3f ms, megatron %.3f ms, mcmc %.3f ms; "
              "%lld iterations in %.2f s (%.0f/s on %d threads)\n",
              graph->ops.size(), space.log10Size(), dpTime * 1e3, tpTime * 1e3,
              r.objective * 1e3, static_cast<long long>(r.iterations),
              r.seconds, r.iterations / r.seconds, options.threads);
}

} // namespace
