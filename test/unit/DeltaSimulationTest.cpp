//===- DeltaSimulationTest.cpp - delta simulation equals full -------------===//
//
// Imports the bundled example models, then applies thousands of random
// single-op changes (kept, and proposed-then-reverted as a rejected MCMC step
// does, then done again) and checks after each that the delta simulation's
// result is identical, to the last bit, to a full simulation of the same
// strategy.
//
//===----------------------------------------------------------------------===//

#include "SimTestGraphs.h"
#include "StatusText.h"
#include "ppc/Import/OnnxImporter.h"
#include "ppc/ModelLoader/ModelLoader.h"
#include "ppc/Simulator/Simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <limits>
#include <memory>
#include <sstream>

#include <random>

using namespace ppc;
using ppc::test::statusText;
using namespace ppc::sim;

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

void expectIdentical(const SimResult &delta, const SimResult &full, int step) {
  ASSERT_EQ(delta.iterationTime, full.iterationTime) << "step " << step;
  ASSERT_EQ(delta.forwardTime, full.forwardTime) << "step " << step;
  ASSERT_EQ(delta.backwardTime, full.backwardTime) << "step " << step;
  ASSERT_EQ(delta.outOfMemory, full.outOfMemory) << "step " << step;
  ASSERT_EQ(delta.bytesByLinkKind, full.bytesByLinkKind) << "step " << step;
  ASSERT_EQ(delta.devices.size(), full.devices.size());
  for (size_t d = 0; d < delta.devices.size(); ++d) {
    const DeviceStats &a = delta.devices[d], &b = full.devices[d];
    ASSERT_EQ(a.computeTime, b.computeTime) << "step " << step;
    ASSERT_EQ(a.commTime, b.commTime) << "step " << step;
    ASSERT_EQ(a.memory.total(), b.memory.total()) << "step " << step;
    ASSERT_EQ(a.memory.workspace, b.memory.workspace) << "step " << step;
  }
}

struct Case {
  const char *model;
  const char *machine;
  Optimizer optimizer;
  bool overlap;
  GradSync sync;
};

/// The case's model and machine, and a delta and a full simulator of them
/// (the delta one at data parallel).
class DeltaSimulation : public ::testing::TestWithParam<Case> {
protected:
  void SetUp() override {
    const Case &c = GetParam();
    graph = importExample(c.model, 16);
    ASSERT_TRUE(graph) << "cannot import " << c.model;
    absl::StatusOr<Machine> loaded = loadMachine(c.machine);
    ASSERT_TRUE(loaded.ok()) << statusText(loaded);
    machine = std::move(*loaded);
    options.optimizer = c.optimizer;
    options.overlapGradSync = c.overlap;
    options.gradSync = c.sync;
    delta = std::make_unique<Simulator>(*graph, *machine, cost, options);
    full = std::make_unique<Simulator>(*graph, *machine, cost, options);
    numDevices = machine->numDevices();
    strategy = dataParallel(*graph, numDevices);
    delta->simulate(strategy);
  }

  std::optional<Graph> graph;
  std::optional<Machine> machine;
  RooflineCostModel cost;
  /// The case's simulation options, as `delta` and `full` have them.
  SimOptions options;
  std::unique_ptr<Simulator> delta, full;
  int64_t numDevices = 0;
  Strategy strategy;
};

TEST_P(DeltaSimulation, EqualsFullOverRandomChanges) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<size_t> pickOp(0, graph->ops.size() - 1);
  std::bernoulli_distribution revert(0.7);
  for (int step = 0; step < 1000; ++step) {
    size_t op = pickOp(rng);
    OpConfig config = randomConfig(graph->ops[op], numDevices, rng);
    // Recomputation, where the op allows it.
    config.recompute =
        recomputeProblem(*graph, op).ok() && revert(rng) && revert(rng);
    ASSERT_EQ(statusText(delta->checkConfig(op, config)), "");
    Strategy proposed = strategy;
    proposed[op] = config;
    expectIdentical(delta->update(op, config), full->simulate(proposed), step);
    if (revert(rng))
      expectIdentical(delta->update(op, strategy[op]), full->simulate(strategy),
                      step);
    else
      strategy = proposed;
  }
}

/// Up to `most` distinct ops changed to random configurations: the changes,
/// the changes that take them back, and the strategy they make.
struct SeveralChanges {
  std::vector<std::pair<size_t, OpConfig>> changes, undo;
  Strategy proposed;
};

SeveralChanges randomChanges(const Graph &graph, const Strategy &strategy,
                             int64_t numDevices, int most,
                             std::mt19937_64 &rng) {
  std::uniform_int_distribution<size_t> pickOp(0, graph.ops.size() - 1);
  std::uniform_int_distribution<int> pickCount(1, most);
  SeveralChanges c;
  c.proposed = strategy;
  for (int k = pickCount(rng); k > 0; --k) {
    size_t op = pickOp(rng);
    if (std::any_of(c.changes.begin(), c.changes.end(),
                    [&](const auto &change) { return change.first == op; }))
      continue;
    OpConfig config = randomConfig(graph.ops[op], numDevices, rng);
    c.changes.push_back({op, config});
    c.undo.push_back({op, strategy[op]});
    c.proposed[op] = config;
  }
  return c;
}

TEST_P(DeltaSimulation, EqualsFullOverRandomChangesOfSeveralOps) {
  // Several ops changed in one update (MCMC's moves of a layer's op in
  // every layer), and reverted in one, equal a full simulation each time.
  std::mt19937_64 rng(7);
  std::bernoulli_distribution revert(0.5);
  for (int step = 0; step < 300; ++step) {
    SeveralChanges c = randomChanges(*graph, strategy, numDevices, 5, rng);
    for (const auto &[op, config] : c.changes)
      ASSERT_EQ(statusText(delta->checkConfig(op, config)), "");
    expectIdentical(delta->update(c.changes), full->simulate(c.proposed), step);
    if (revert(rng))
      expectIdentical(delta->update(c.undo), full->simulate(strategy), step);
    else
      strategy = c.proposed;
  }
}

TEST_P(DeltaSimulation, TakingBackAndRedoingEqualsFull) {
  // A change taken back, done again, taken back again (or kept), each
  // equal to a full simulation.
  std::mt19937_64 rng(11);
  for (int step = 0; step < 60; ++step) {
    SeveralChanges c = randomChanges(*graph, strategy, numDevices, 4, rng);
    expectIdentical(delta->update(c.changes), full->simulate(c.proposed), step);
    expectIdentical(delta->update(c.undo), full->simulate(strategy), step);
    expectIdentical(delta->update(c.changes), full->simulate(c.proposed), step);
    if (step % 2 == 0)
      expectIdentical(delta->update(c.undo), full->simulate(strategy), step);
    else
      strategy = c.proposed;
  }
}

TEST_P(DeltaSimulation, RevertRestoresTheStateBeforeTheUpdate) {
  // A proposal taken back by revert() (MCMC's rejected move) leaves the
  // simulator as it was: the strategy, and every later delta simulation,
  // as if the proposal had never been made. Several reverts in a row, and
  // reverts of updates that changed one op twice, too.
  std::mt19937_64 rng(13);
  std::bernoulli_distribution coin(0.5);
  for (int step = 0; step < 300; ++step) {
    SeveralChanges c = randomChanges(*graph, strategy, numDevices, 5, rng);
    if (coin(rng)) // the first op changed again, to its second proposal
      c.changes.push_back(
          {c.changes.front().first,
           randomConfig(graph->ops[c.changes.front().first], numDevices, rng)});
    Strategy proposed = strategy;
    for (const auto &[op, config] : c.changes)
      proposed[op] = config;
    expectIdentical(delta->update(c.changes), full->simulate(proposed), step);
    if (coin(rng)) {
      delta->revert();
      ASSERT_EQ(delta->currentStrategy(), strategy) << "step " << step;
      // Nothing changed since: a delta simulation of no change times the
      // restored state alone.
      expectIdentical(delta->update({}), full->simulate(strategy), step);
    } else {
      strategy = proposed;
    }
  }
}

TEST_P(DeltaSimulation, AStoppedSimulatorStaysStoppedUntilSimulated) {
  // A stop request (Ctrl-C, a search phase's deadline) stops the next
  // simulation; every update() after it answers stopped, even once the
  // request is withdrawn, and revert() has nothing to take back; the next
  // simulate() starts afresh and delta simulation goes on exactly.
  std::atomic<bool> stop{false};
  SimOptions stopping = options;
  stopping.stop = &stop;
  Simulator stoppable(*graph, *machine, cost, stopping);
  expectIdentical(stoppable.simulate(strategy), full->simulate(strategy), 0);
  std::mt19937_64 rng(17);
  SeveralChanges c = randomChanges(*graph, strategy, numDevices, 3, rng);
  stop = true;
  SimResult stopped = stoppable.update(c.changes);
  EXPECT_TRUE(stopped.stopped);
  EXPECT_EQ(stopped.iterationTime, std::numeric_limits<double>::infinity());
  EXPECT_EQ(stopped.devices.size(), static_cast<size_t>(numDevices));
  stoppable.revert();
  stop = false;
  EXPECT_TRUE(stoppable.update(c.changes).stopped);
  EXPECT_TRUE(stoppable.update({}).stopped);
  expectIdentical(stoppable.simulate(c.proposed), full->simulate(c.proposed),
                  1);
  EXPECT_FALSE(stoppable.update(c.undo).stopped);
  expectIdentical(stoppable.update(c.changes), full->simulate(c.proposed), 2);

  // A deadline already past stops a full simulation too.
  SimOptions late = options;
  late.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  EXPECT_TRUE(
      Simulator(*graph, *machine, cost, late).simulate(strategy).stopped);
}

TEST_P(DeltaSimulation, RevertRestoresTheTimeline) {
  // With a timeline recorded, a reverted proposal's trace is the one
  // before it.
  SimOptions recording;
  recording.recordTimeline = true;
  Simulator traced(*graph, *machine, cost, recording);
  traced.simulate(strategy);
  std::ostringstream before, after;
  traced.writeChromeTrace(before);
  std::mt19937_64 rng(3);
  SeveralChanges c = randomChanges(*graph, strategy, numDevices, 5, rng);
  traced.update(c.changes);
  std::ostringstream during;
  traced.writeChromeTrace(during);
  ASSERT_NE(during.str(), before.str()) << "the change changed nothing";
  traced.revert();
  traced.writeChromeTrace(after);
  EXPECT_EQ(after.str(), before.str());
}

/// A residual MLP of `layers` layers (linear, relu, add of the layer's
/// input) and a loss-like last linear: deep enough for many timing blocks,
/// with skip connections across their boundaries.
Graph residualMlp(int layers) {
  using namespace ppc::sim::testing;
  Graph g;
  g.numInputs = 1;
  Source in = input();
  OpCost cheap = {4096, 8192, 3 * 4 * 4096, 6 * 4 * 4096};
  for (int l = 0; l < layers; ++l) {
    std::string name = "l" + std::to_string(l);
    g.ops.push_back(linear(g, name + ".fc", 64, 256, 256, in));
    Source fc = fromOp(static_cast<int32_t>(g.ops.size() - 1));
    g.ops.push_back(
        elementwise(name + ".relu", "ppc.relu", 64, 256, {fc}, cheap));
    Source relu = fromOp(static_cast<int32_t>(g.ops.size() - 1));
    g.ops.push_back(
        elementwise(name + ".add", "ppc.add", 64, 256, {relu, in}, cheap));
    in = fromOp(static_cast<int32_t>(g.ops.size() - 1));
  }
  g.ops.push_back(linear(g, "head", 64, 256, 16, in));
  return g;
}

struct DeepCase {
  const char *machine;
  bool overlap;
  GradSync sync;
  /// Tensor-parallel communication overlapped in chunks, inputs gathered
  /// again in backward, ZeRO gathers deferred to the next forward.
  bool overlapTensorParallel = false, regatherInputs = false,
       overlapParamGather = false;
};

class DeltaSimulationDeep : public ::testing::TestWithParam<DeepCase> {};

TEST_P(DeltaSimulationDeep, MovesUnchangedBlocksAndEqualsFull) {
  // Changes to a deep model near data parallel, as a search's are: most
  // timing blocks after (and in backward, before) a change are the last
  // pass's moved, and the result is still a full simulation's to the bit,
  // for updates kept, taken back by revert() and undone by update().
  const DeepCase &c = GetParam();
  Graph graph = residualMlp(40);
  absl::StatusOr<Machine> machine = loadMachine(c.machine);
  ASSERT_TRUE(machine.ok()) << statusText(machine);
  SimOptions options;
  options.optimizer = Optimizer::Adam;
  options.overlapGradSync = c.overlap;
  options.gradSync = c.sync;
  options.overlapTensorParallel = c.overlapTensorParallel;
  options.regatherInputs = c.regatherInputs;
  options.overlapParamGather = c.overlapParamGather;
  RooflineCostModel cost;
  Simulator delta(graph, *machine, cost, options);
  Simulator full(graph, *machine, cost, options);
  int64_t numDevices = machine->numDevices();
  Strategy strategy = dataParallel(graph, numDevices);
  delta.simulate(strategy);
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<size_t> pickOp(0, graph.ops.size() - 1);
  std::bernoulli_distribution coin(0.5);
  int64_t timed = 0, moved = 0, updatesTimed = 0, updatesMoved = 0;
  for (int step = 0; step < 400; ++step) {
    size_t op = pickOp(rng);
    // Half the changes keep the layout and change the memory choices,
    // which (but for recomputation) moves what follows by one shift.
    OpConfig config = strategy[op];
    bool layout = coin(rng);
    if (layout) {
      config = randomConfig(graph.ops[op], numDevices, rng);
    } else {
      config.recompute =
          coin(rng) && coin(rng) && recomputeProblem(graph, op).ok();
      config.sharding = static_cast<StateSharding>(
          std::uniform_int_distribution<int>(0, kMaxStateSharding)(rng));
    }
    if (!delta.checkConfig(op, config).ok())
      continue;
    Strategy proposed = strategy;
    proposed[op] = config;
    expectIdentical(delta.update(op, config), full.simulate(proposed), step);
    if (!layout) {
      Simulator::TimingStats stats = delta.lastTimingStats();
      timed += stats.opsTimed;
      moved += stats.opsMoved;
      updatesTimed += stats.updatesTimed;
      updatesMoved += stats.updatesMoved;
    }
    // Layouts are taken back (the strategy stays near data parallel, where
    // a search spends its time), memory choices kept one time in three.
    switch (step % 3) {
    case 0:
      delta.revert();
      break;
    case 1:
      expectIdentical(delta.update(op, strategy[op]), full.simulate(strategy),
                      step);
      break;
    default:
      if (layout)
        delta.revert();
      else
        strategy = proposed;
    }
  }
  // Moves of a layer's op in every layer (the search's structure moves):
  // the counterparts' states are built once and copied.
  for (int step = 0; step < 60; ++step) {
    size_t op = pickOp(rng);
    size_t dot = graph.ops[op].name.find('.');
    if (dot == std::string::npos) // the head: no counterparts
      continue;
    std::string role = graph.ops[op].name.substr(dot);
    OpConfig config = randomConfig(graph.ops[op], numDevices, rng);
    config.recompute = coin(rng) && recomputeProblem(graph, op).ok();
    std::vector<std::pair<size_t, OpConfig>> changes;
    Strategy proposed = strategy;
    for (size_t other = 0; other < graph.ops.size(); ++other)
      if (graph.ops[other].name.size() > role.size() &&
          graph.ops[other].name.compare(
              graph.ops[other].name.size() - role.size(), role.size(), role) ==
              0 &&
          delta.checkConfig(other, config).ok()) {
        changes.push_back({other, config});
        proposed[other] = config;
      }
    expectIdentical(delta.update(changes), full.simulate(proposed), step);
    if (coin(rng))
      delta.revert();
    else
      strategy = proposed;
  }
  EXPECT_EQ(delta.simulate(strategy).iterationTime,
            full.simulate(strategy).iterationTime);
  // Over the changes that keep layouts, moving is the common case, not an
  // accident. (A layout change that delays some devices and not others is
  // no one shift: what follows it is timed again.)
  EXPECT_GT(moved, timed) << "timed " << timed << ", moved " << moved;
  // The updates move too where the syncs overlap the backward (after it,
  // or with gathers deferred to the next forward, they are timed whole);
  // mostly, where no all-gather follows them on
  // the communication streams, whose state moves apart from the compute
  // streams'.
  std::string updates = "updates timed " + std::to_string(updatesTimed) +
                        ", moved " + std::to_string(updatesMoved);
  if (!c.overlap || c.overlapParamGather)
    EXPECT_EQ(updatesMoved, 0) << updates;
  else if (c.sync == GradSync::AllReduce)
    EXPECT_GT(updatesMoved, updatesTimed) << updates;
  else
    EXPECT_GT(updatesMoved, 0) << updates;
}

INSTANTIATE_TEST_SUITE_P(
    Deep, DeltaSimulationDeep,
    ::testing::Values(
        DeepCase{"cpux4", true, GradSync::AllReduce},
        DeepCase{"dgx-a100x2", true, GradSync::ReduceScatterAllGather},
        DeepCase{"dgx-h100", false, GradSync::AllReduce},
        DeepCase{"dgx-a100x2", true, GradSync::ReduceScatterAllGather, true,
                 true, true}),
    [](const ::testing::TestParamInfo<DeepCase> &info) {
      std::string name =
          std::string(info.param.machine) + "_" + std::to_string(info.index);
      std::replace_if(
          name.begin(), name.end(),
          [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); },
          '_');
      return name;
    });

INSTANTIATE_TEST_SUITE_P(
    Examples, DeltaSimulation,
    ::testing::Values(Case{"mlp.onnx", "dgx-a100x2", Optimizer::SGD, true,
                           GradSync::AllReduce},
                      Case{"cnn.onnx", "p100x16", Optimizer::Adam, true,
                           GradSync::AllReduce},
                      Case{"cnn.onnx", "dgx-h100", Optimizer::Momentum, false,
                           GradSync::ReduceScatterAllGather},
                      Case{"transformer.onnx", "k80x64", Optimizer::Adam, true,
                           GradSync::ReduceScatterAllGather},
                      Case{"transformer.onnx", "dgx-a100x2", Optimizer::SGD,
                           false, GradSync::AllReduce},
                      // Shared weights: their other users read them from
                      // the holder, which a change to either must follow.
                      Case{"tied.onnx", "dgx-a100x2", Optimizer::Adam, true,
                           GradSync::AllReduce},
                      Case{"tied.onnx", "p100x16", Optimizer::SGD, false,
                           GradSync::ReduceScatterAllGather}),
    [](const ::testing::TestParamInfo<Case> &info) {
      // "transformer_k80x64_3": the model's stem, the machine, the index.
      std::string name = std::string(info.param.model) + "_" +
                         info.param.machine + "_" + std::to_string(info.index);
      name = name.substr(0, name.find('.')) + name.substr(name.find('_'));
      std::replace_if(
          name.begin(), name.end(),
          [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); },
          '_');
      return name;
    });

} // namespace
