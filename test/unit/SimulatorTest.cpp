//===- SimulatorTest.cpp - the simulator against hand-computed timelines --===//
//
// Small graphs on machines with round numbers and a cost model with fixed
// kernel times, so every expected time below is worked out by hand in the
// comments.
//
//===----------------------------------------------------------------------===//

#include "ppc/Simulator/Simulator.h"
#include "StatusText.h"
#include "ppc/Simulator/Pipeline.h"

#include "SimTestGraphs.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>

using namespace ppc;
using namespace ppc::sim;

namespace {

using namespace ppc::sim::testing;
using ppc::test::statusText;

constexpr double kMs = 1e-3;
/// Durations are rounded to multiples of 2^-40 s (about 1 ps; the
/// simulator's kTimeQuantum): a sum of a few is within this of the exact one.
constexpr double kTimeTolerance = 1e-11;

/// Forward 1 ms and backward 2 ms for a whole op, scaled by the share of
/// the iteration points a partition computes; optimizer steps 0.5 ms.
class FixedCostModel : public CostModel {
public:
  double kernelTime(const Op &op, const KernelShape &shape, Phase phase,
                    const DeviceSpec &) const override {
    double points = 1;
    for (const Range &r : shape.iter)
      points *= static_cast<double>(r.size());
    double share = points / static_cast<double>(op.space.numPoints());
    return (phase == Phase::Forward ? 1 : 2) * kMs * share;
  }
  double updateTime(int64_t elements, int64_t, int,
                    const DeviceSpec &) const override {
    return elements > 0 ? 0.5 * kMs : 0;
  }
};

/// `nodes` x `perNode` devices of 1 GB; links of `intraBandwidth` (1 GB/s)
/// with 10 us latency inside a node and 0.1 GB/s with 100 us across nodes.
Machine roundMachine(int64_t nodes, int64_t perNode,
                     double intraBandwidth = 1e9) {
  ClusterSpec c;
  c.nodes = nodes;
  c.devicesPerNode = perNode;
  c.nicsPerNode = perNode;
  c.device.name = "round";
  c.device.setPeakFlops(DType::F32, 1e12);
  c.device.memoryBandwidth = 1e11;
  c.device.memoryBytes = 1'000'000'000;
  c.intra = {LinkKind::NVLink, intraBandwidth, 10e-6};
  c.inter = {LinkKind::InfiniBand, 1e8, 100e-6};
  return Machine::fromCluster(c, "round");
}

/// y = relu(x) on [n, f]; its cost is not used (FixedCostModel).
Op elementwise(std::string name, int64_t n, int64_t f, Source in) {
  return ppc::sim::testing::elementwise(std::move(name), "ppc.relu", n, f, {in},
                                        {});
}

OpConfig on(int64_t device, size_t rank) {
  return {std::vector<int64_t>(rank, 1), device, {}};
}

TEST(Simulator, TwoOpChainAcrossTwoDevices) {
  // A on device 0 feeds B on device 1: 4 x 1000 f32 = 16000 bytes cross an
  // intra-node link: 10 us + 16000 B / 1 GB/s = 26 us each way.
  Graph g;
  g.numInputs = 1;
  g.ops = {elementwise("A", 4, 1000, input()),
           elementwise("B", 4, 1000, fromOp(0))};
  ASSERT_EQ(statusText(g.validate()), "");
  Machine m = roundMachine(1, 2);
  FixedCostModel cost;
  Simulator sim(g, m, cost);
  SimResult r = sim.simulate({on(0, 2), on(1, 2)});
  // A fwd [0, 1], transfer [1, 1.026], B fwd [1.026, 2.026],
  // B bwd [2.026, 4.026], gradient transfer [4.026, 4.052],
  // A bwd [4.052, 6.052] (ms).
  EXPECT_NEAR(r.iterationTime, 6.052 * kMs, kTimeTolerance);
  EXPECT_NEAR(r.devices[0].computeTime, 3 * kMs, kTimeTolerance);
  EXPECT_NEAR(r.devices[1].computeTime, 3 * kMs, kTimeTolerance);
  EXPECT_NEAR(r.devices[0].commTime, 2 * 0.026 * kMs, kTimeTolerance);
  EXPECT_DOUBLE_EQ(r.bytesByLinkKind[static_cast<int>(LinkKind::NVLink)],
                   2 * 16000.0);
  // Both on one device: no transfer, 6 ms of kernels back to back.
  EXPECT_NEAR(sim.simulate({on(0, 2), on(0, 2)}).iterationTime, 6 * kMs,
              kTimeTolerance);
}

TEST(Simulator, DevicesSharingCoresTakeTurns) {
  // Four independent chains A_i -> B_i, one per device. Alone each device
  // runs 1 + 1 forward and 2 + 2 backward: 6 ms. With 2 cores for the 4
  // devices, two devices compute at a time: every kernel waits for a core,
  // 12 ms in all (the cores are never idle).
  Graph g;
  g.numInputs = 4;
  for (int i = 0; i < 4; ++i)
    g.ops.push_back(elementwise("A" + std::to_string(i), 4, 1000, input(i)));
  for (int i = 0; i < 4; ++i)
    g.ops.push_back(elementwise("B" + std::to_string(i), 4, 1000, fromOp(i)));
  ASSERT_EQ(statusText(g.validate()), "");
  std::vector<OpConfig> configs;
  for (int i = 0; i < 8; ++i)
    configs.push_back(on(i % 4, 2));
  FixedCostModel cost;
  ClusterSpec spec = *roundMachine(1, 4).cluster;
  Machine own = Machine::fromCluster(spec);
  EXPECT_NEAR(Simulator(g, own, cost).simulate(configs).iterationTime, 6 * kMs,
              kTimeTolerance);
  spec.coresPerNode = 2;
  Machine shared = Machine::fromCluster(spec);
  SimResult r = Simulator(g, shared, cost).simulate(configs);
  EXPECT_NEAR(r.iterationTime, 12 * kMs, kTimeTolerance);
  EXPECT_NEAR(r.devices[3].computeTime, 6 * kMs, kTimeTolerance);
  // As many cores as devices: as if each had its own.
  spec.coresPerNode = 4;
  EXPECT_NEAR(Simulator(g, Machine::fromCluster(spec), cost)
                  .simulate(configs)
                  .iterationTime,
              6 * kMs, kTimeTolerance);
}

TEST(Simulator, MessagesBetweenProcessesSharingCoresTakeACore) {
  // A on device 0 feeds B on device 1; C on device 1 reads the input only.
  // With one core for both devices (processes copy their own messages),
  // the 26 us transfer waits for the core and holds it:
  //   A [0, 1], C [1, 2], A->B [2, 2.026], B [2.026, 3.026];
  //   backward B [3.026, 5.026], C [5.026, 7.026], B->A [7.026, 7.052],
  //   A [7.052, 9.052] (ms).
  Graph g;
  g.numInputs = 2;
  g.ops = {elementwise("A", 4, 1000, input(0)),
           elementwise("C", 4, 1000, input(1)),
           elementwise("B", 4, 1000, fromOp(0))};
  ASSERT_EQ(statusText(g.validate()), "");
  FixedCostModel cost;
  ClusterSpec spec = *roundMachine(1, 2).cluster;
  spec.coresPerNode = 1;
  Machine shared = Machine::fromCluster(spec);
  Strategy s = {on(0, 2), on(1, 2), on(1, 2)};
  EXPECT_NEAR(Simulator(g, shared, cost).simulate(s).iterationTime, 9.052 * kMs,
              kTimeTolerance);
  // A core each: the transfers overlap C's kernels (6.052 ms).
  Machine own = roundMachine(1, 2);
  EXPECT_NEAR(Simulator(g, own, cost).simulate(s).iterationTime, 6.052 * kMs,
              kTimeTolerance);
}

TEST(Simulator, ProcessesOfAHostCopyTheirOwnMessages) {
  // A on device 0 feeds B on device 1, which first runs C1 and C2 (they
  // read the input only). On GPUs the 26 us transfer A->B moves while C2
  // computes: A [0, 1], C1 [0, 1], C2 [1, 2], A->B [1, 1.026], B [2, 3];
  // backward B [3, 5], C2 [5, 7], C1 [7, 9] (ms). Between processes of a
  // host (shared memory) the receiving rank copies the message itself once
  // it reaches the receive, after C2: A->B [2, 2.026], B [2.026, 3.026],
  // and the backward ends 26 us later.
  Graph g;
  g.numInputs = 2;
  g.ops = {elementwise("A", 4, 1000, input(0)),
           elementwise("C1", 4, 1000, input(1)),
           elementwise("C2", 4, 1000, input(1)),
           elementwise("B", 4, 1000, fromOp(0))};
  ASSERT_EQ(statusText(g.validate()), "");
  FixedCostModel cost;
  Strategy s = {on(0, 2), on(1, 2), on(1, 2), on(1, 2)};
  ClusterSpec spec = *roundMachine(1, 2).cluster;
  EXPECT_NEAR(
      Simulator(g, Machine::fromCluster(spec), cost).simulate(s).iterationTime,
      9 * kMs, kTimeTolerance);
  spec.intra.kind = LinkKind::SharedMemory;
  EXPECT_NEAR(
      Simulator(g, Machine::fromCluster(spec), cost).simulate(s).iterationTime,
      9.026 * kMs, kTimeTolerance);
}

TEST(Simulator, RanksPackTheirOwnMessages) {
  // A on device 0 feeds B on device 1; D on device 0 reads the input only
  // and comes between them in issue order. The message A->B takes 26 us
  // (10 us + 16000 B / 1 GB/s), of which a measured 16 us is the sender's
  // packing (send_bandwidth_by_size: 16000 B at 1 GB/s). The plan sends it
  // where B reads it, after D, and the sending rank packs it itself:
  //   fwd A [0, 1], D [1, 2], A->B packed on device 0 [2, 2.016] and
  //   received [2.016, 2.026], B [2.026, 3.026];
  //   bwd B [3.026, 5.026], its gradient packed on device 1 right after
  //   [5.026, 5.042]; D [2.016, 4.016]; A receives [5.042, 5.052] and runs
  //   [5.052, 7.052] (ms).
  // Without the sender's part the message leaves once A is done: A->B
  // [1, 1.026], B [1.026, 2.026], ..., 6.052 ms.
  Graph g;
  g.numInputs = 2;
  g.ops = {elementwise("A", 4, 1000, input(0)),
           elementwise("D", 4, 1000, input(1)),
           elementwise("B", 4, 1000, fromOp(0))};
  ASSERT_EQ(statusText(g.validate()), "");
  FixedCostModel cost;
  Strategy s = {on(0, 2), on(0, 2), on(1, 2)};
  ClusterSpec spec = *roundMachine(1, 2).cluster;
  spec.intra.kind = LinkKind::SharedMemory;
  EXPECT_NEAR(
      Simulator(g, Machine::fromCluster(spec), cost).simulate(s).iterationTime,
      6.052 * kMs, kTimeTolerance);
  spec.intra.sendBySize.points = {{16000, 1e9}};
  Machine packing = Machine::fromCluster(spec);
  Simulator sim(g, packing, cost, SimOptions{.recordTimeline = true});
  EXPECT_NEAR(sim.simulate(s).iterationTime, 7.052 * kMs, kTimeTolerance);
  // The packing shows on each sender's compute track.
  std::ostringstream os;
  sim.writeChromeTrace(os);
  nlohmann::json trace = nlohmann::json::parse(os.str());
  std::map<std::string, nlohmann::json> events;
  for (const nlohmann::json &event : trace["traceEvents"])
    if (event["ph"] == "X")
      events[event["name"].get<std::string>()] = event;
  for (auto [name, pid, ts] :
       {std::tuple{"A -> B (send)", 0, 2000.0},
        std::tuple{"B -> A (grad) (send)", 1, 5026.0},
        std::tuple{"B fwd", 1, 2026.0}, std::tuple{"A bwd", 0, 5052.0}}) {
    ASSERT_TRUE(events.count(name)) << name << "\n" << os.str();
    EXPECT_EQ(events[name]["pid"], pid) << name;
    EXPECT_EQ(events[name]["tid"], 0) << name;
    EXPECT_NEAR(events[name]["ts"].get<double>(), ts, 1e-6) << name;
  }
  EXPECT_NEAR(events["A -> B (send)"]["dur"].get<double>(), 16, 1e-6);
  // On GPUs (links whose devices do not move their own messages) the curve
  // holds no one: 6.052 ms as without it.
  spec.intra.kind = LinkKind::NVLink;
  EXPECT_NEAR(
      Simulator(g, Machine::fromCluster(spec), cost).simulate(s).iterationTime,
      6.052 * kMs, kTimeTolerance);
}

/// A (4 x 1000, from the input) feeding B.
Graph chainOfTwo() {
  Graph g;
  g.numInputs = 1;
  g.ops = {elementwise("A", 4, 1000, input()),
           elementwise("B", 4, 1000, fromOp(0))};
  return g;
}

/// chainOfTwo with A split by samples over devices 0..n-1 and B whole on
/// each of them: every B gathers A's n pieces.
Strategy splitThenGathered(int64_t n) {
  OpConfig whole = on(0, 2);
  whole.replicas = n;
  return {{{n, 1}, 0, {}}, whole};
}

TEST(Simulator, GathersBetweenGpusMoveAtTheCollectiveRate) {
  // A is split by samples over devices 0 and 1, B runs whole on both: each
  // B gathers A's two halves (a local one and an 8000 B remote one), an
  // all-gather as NCCL runs it. fwd A [0, 0.5] (half of it), the exchange
  // [0.5, 0.5 + t], B [0.5 + t, 1.5 + t]; bwd B [1.5 + t, 3.5 + t], A (its
  // half of the gradient from its own replica of B) [3.5 + t, 4.5 + t]. At
  // the link's rate t = 10 us + 8000 B / 1 GB/s = 18 us; on a link with a
  // measured collective curve (0.2 GB/s bus bandwidth) the pieces move at
  // that rate: t = 10 + 40 us.
  Graph g = chainOfTwo();
  ASSERT_EQ(statusText(g.validate()), "");
  FixedCostModel cost;
  Strategy gather = splitThenGathered(2);
  ClusterSpec spec = *roundMachine(1, 2).cluster;
  EXPECT_NEAR(Simulator(g, Machine::fromCluster(spec), cost)
                  .simulate(gather)
                  .iterationTime,
              4.518 * kMs, kTimeTolerance);
  spec.intra.collectiveBySize.points = {{1e3, 2e8}, {1e7, 2e8}};
  Machine measured = Machine::fromCluster(spec);
  EXPECT_NEAR(Simulator(g, measured, cost).simulate(gather).iterationTime,
              4.55 * kMs, kTimeTolerance);
  // One remote piece alone (a pipeline's send) keeps the link's rate:
  // 10 us + 16000 B / 1 GB/s each way.
  EXPECT_NEAR(
      Simulator(g, measured, cost).simulate({on(0, 2), on(1, 2)}).iterationTime,
      6.052 * kMs, kTimeTolerance);
}

TEST(Simulator, ExchangesMoveInRoundsAndFinishTogether) {
  // A is split by samples over 4 devices, B runs whole on each: every B
  // gathers A's 3 remote quarters, 4000 B each, 10 us + 4000 B / 1 GB/s =
  // 14 us apiece over its device's one port. Issued in rounds (device i to
  // i + r), every B has its pieces after 3 x 14 us: fwd A [0, 0.25], the
  // exchange [0.25, 0.292], B [0.292, 1.292]; bwd B [1.292, 3.292], A (its
  // quarter of the gradient, from its own replica of B) [3.292, 3.792].
  // Issued destination by destination, the senders' ports hold the later
  // destinations back: the last has its pieces 2 x 14 us later.
  Graph g = chainOfTwo();
  ASSERT_EQ(statusText(g.validate()), "");
  FixedCostModel cost;
  Strategy gather = splitThenGathered(4);
  Machine m = roundMachine(1, 4);
  EXPECT_NEAR(Simulator(g, m, cost).simulate(gather).iterationTime, 3.792 * kMs,
              kTimeTolerance);
  SimOptions byDestination;
  byDestination.exchangesAsCollectives = false;
  EXPECT_NEAR(
      Simulator(g, m, cost, byDestination).simulate(gather).iterationTime,
      3.820 * kMs, kTimeTolerance);
}

TEST(Simulator, CompleteExchangesAcrossNodesKeepEveryNicBusy) {
  // A is split by samples over 8 devices on 2 nodes of 4 (a NIC each), B
  // runs whole on each: every B gathers A's 7 remote pieces of 8000 B, 3
  // from its node (10 us + 8 us each) and 4 from the other (100 us + 80 us
  // each), a complete exchange. Paired i with i xor r, rounds 4-7 cross
  // the nodes together, each NIC taking one piece per round beside the
  // in-node rounds: the exchange takes 4 x 180 us plus at most the 3 x 18
  // us before them. Paired i with i + r, each device's crossing rounds
  // start a round after its neighbour's and the NICs' pieces queue in a
  // staircase: about 7 x 180 us. fwd A 0.125 ms, the exchange, B 1 ms;
  // bwd B 2 ms, A 0.25 ms (its gradient from its own replica of B).
  Graph g = chainOfTwo();
  g.ops[0] = elementwise("A", 16, 1000, input());
  g.ops[1] = elementwise("B", 16, 1000, fromOp(0));
  ASSERT_EQ(statusText(g.validate()), "");
  FixedCostModel cost;
  double exchange = Simulator(g, roundMachine(2, 4), cost)
                        .simulate(splitThenGathered(8))
                        .iterationTime -
                    3.375 * kMs;
  EXPECT_GE(exchange, 4 * 0.180 * kMs - kTimeTolerance);
  EXPECT_LE(exchange, (4 * 0.180 + 3 * 0.018) * kMs + kTimeTolerance);
}

TEST(Simulator, AnInputReadTwiceIsOneBuffer) {
  // A and B both read the input (a pipeline stage's input feeds a layer
  // norm and a residual add): activations are the input once (16000 B)
  // and the two results (16000 B each).
  Graph g;
  g.numInputs = 1;
  g.ops = {elementwise("A", 4, 1000, input(0)),
           elementwise("B", 4, 1000, input(0))};
  ASSERT_EQ(statusText(g.validate()), "");
  FixedCostModel cost;
  Machine m = roundMachine(1, 2);
  SimResult r = Simulator(g, m, cost).simulate({on(0, 2), on(0, 2)});
  EXPECT_EQ(r.devices[0].memory.activations, 3 * 16000);
}

TEST(Simulator, AFlatViewHoldsNothingWhereItsBoxesShareTheOrder) {
  // A reshape [4, 6] -> [24] of a relu's result (the importer's space: the
  // result dim walks the operand's rows). Split 2 ways each piece of the
  // result is its operand rows' elements in order: a view (no memory of its
  // own). Split 8 ways a piece is half a row: it holds its 3 elements.
  Graph g;
  g.numInputs = 1;
  g.ops = {elementwise("A", 4, 6, input())};
  Op reshape;
  reshape.name = "R";
  reshape.kind = "ppc.reshape";
  reshape.space.dims = {{24, IterKind::Sample}};
  reshape.space.operands = {{{4, 6}, {{0, 6, 1, 0, 1}, DimAccess::whole()}}};
  reshape.space.results = {TensorAccess::identity({24})};
  reshape.space.flatView = true;
  reshape.operands = {fromOp(0)};
  g.ops.push_back(reshape);
  ASSERT_EQ(statusText(g.validate()), "");
  Machine m = roundMachine(1, 8);
  FixedCostModel cost;
  auto activations = [&](int64_t ways, bool flatView) {
    g.ops[1].space.flatView = flatView;
    Simulator sim(g, m, cost);
    OpConfig split{{ways}, 0, {}};
    OpConfig rows{{std::min<int64_t>(ways, 4), 1}, 0, {}};
    return sim.simulate({rows, split}).devices[0].memory.activations;
  };
  // Device 0: A's input and result rows (2 x 6 floats each), R's 12.
  EXPECT_EQ(activations(2, false), 3 * 48);
  EXPECT_EQ(activations(2, true), 2 * 48);
  // 8 ways: A's row (6 floats, twice), R's 3 floats whatever the flag.
  EXPECT_EQ(activations(8, true), 2 * 24 + 12);
  EXPECT_EQ(activations(8, false), 2 * 24 + 12);
}

TEST(Simulator, TransferAcrossNodes) {
  // The same chain with A and B on different nodes: 100 us + 16000 B /
  // 0.1 GB/s = 260 us each way, so 6 ms + 2 * 0.26 ms.
  Graph g;
  g.numInputs = 1;
  g.ops = {elementwise("A", 4, 1000, input()),
           elementwise("B", 4, 1000, fromOp(0))};
  Machine m = roundMachine(2, 1);
  FixedCostModel cost;
  Simulator sim(g, m, cost);
  SimResult r = sim.simulate({on(0, 2), on(1, 2)});
  EXPECT_NEAR(r.iterationTime, 6.52 * kMs, kTimeTolerance);
  EXPECT_DOUBLE_EQ(r.bytesByLinkKind[static_cast<int>(LinkKind::InfiniBand)],
                   2 * 16000.0);
}

TEST(Simulator, RingAllReduceMatchesAlphaBeta) {
  Machine m = roundMachine(1, 4);
  // Ring of 4: 2 (k - 1) alpha + 2 (k - 1) / k * S / B.
  double bytes = 4e6;
  double expected = 2 * 3 * 10e-6 + 2.0 * 3 / 4 * bytes / 1e9;
  EXPECT_NEAR(allReduceTime(m, {0, 1, 2, 3}, bytes), expected, kTimeTolerance);
  EXPECT_NEAR(reduceScatterTime(m, {0, 1, 2, 3}, bytes), expected / 2,
              kTimeTolerance);
  EXPECT_EQ(allReduceTime(m, {2}, bytes), 0);

  // 2 nodes x 2: a flat ring crosses the network at 0.1 GB/s; hierarchical
  // does an intra all-reduce (2 alpha + S / B) and a cross-node all-reduce
  // of S / 2 per rail (2 alpha' + (S / 2) / B'), which is faster.
  Machine two = roundMachine(2, 2);
  double ring = 2 * 3 * 100e-6 + 2.0 * 3 / 4 * bytes / 1e8;
  double hier = (2 * 10e-6 + bytes / 1e9) + (2 * 100e-6 + bytes / 2 / 1e8);
  ASSERT_LT(hier, ring);
  EXPECT_NEAR(allReduceTime(two, {0, 1, 2, 3}, bytes), hier, kTimeTolerance);

  // A measured bus bandwidth replaces both: 2 (k - 1) / k * S / busbw(S),
  // within a node by the intra link's curve, across nodes by the inter's,
  // which is per rail: two devices per node (each with a NIC) move half
  // the buffer each at the rail's rate for half the buffer.
  ClusterSpec spec = *two.cluster;
  spec.intra.collectiveBySize.points = {{1e3, 1e8}, {1e7, 5e8}};
  spec.inter.collectiveBySize.points = {{1e3, 1e7}, {1e7, 5e7}};
  Machine measured = Machine::fromCluster(spec);
  EXPECT_NEAR(allReduceTime(measured, {0, 1}, 1e7), 1e7 / 5e8, kTimeTolerance);
  EXPECT_NEAR(allReduceTime(measured, {0, 1, 2, 3}, 2e7), 1.5 * 1e7 / 5e7,
              kTimeTolerance);
  // One device per node: one rail.
  EXPECT_NEAR(allReduceTime(measured, {0, 2}, 1e7), 1e7 / 5e7, kTimeTolerance);
  EXPECT_NEAR(reduceScatterTime(measured, {0, 2}, 10), 0.5 * 1e3 / 1e7, 1e-15);
  // With one NIC per node the two devices share one rail.
  spec.nicsPerNode = 1;
  EXPECT_NEAR(allReduceTime(Machine::fromCluster(spec), {0, 1, 2, 3}, 1e7),
              1.5 * 1e7 / 5e7, kTimeTolerance);

  // An exchange ceiling below the curve slows reduce-scatter and
  // all-gather to (k - 1) / k * S / ceiling, not the all-reduce; above the
  // curve's rate it changes nothing.
  spec.nicsPerNode = 2;
  spec.intra.exchangeBusBandwidth = 2e8;
  Machine capped = Machine::fromCluster(spec);
  EXPECT_NEAR(allReduceTime(capped, {0, 1}, 1e7), 1e7 / 5e8, kTimeTolerance);
  EXPECT_NEAR(reduceScatterTime(capped, {0, 1}, 1e7), 0.5 * 1e7 / 2e8,
              kTimeTolerance);
  EXPECT_NEAR(reduceScatterTime(capped, {0, 1}, 1e3), 0.5 * 1e3 / 1e8,
              kTimeTolerance);
  spec.intra.exchangeBusBandwidth = 1e9;
  EXPECT_NEAR(reduceScatterTime(Machine::fromCluster(spec), {0, 1}, 1e7),
              0.5 * 1e7 / 5e8, kTimeTolerance);
}

TEST(Simulator, RingAllReduceRunsThroughEachNodeTogether) {
  // A measured curve prices the flat ring, whose bytes NCCL moves through
  // each node's members together: a group listed across the nodes in turn
  // (a tensor-parallel group strided over them) crosses between the nodes
  // twice, as the same group in order does, not at every step.
  ClusterSpec spec = *roundMachine(2, 2).cluster;
  spec.intra.collectiveBySize.points = {{1e3, 1e8}, {1e7, 5e8}};
  spec.inter.collectiveBySize.points = {{1e3, 1e7}, {1e7, 5e7}};
  Machine m = Machine::fromCluster(spec);
  double bytes = 4e6;
  std::array<double, 8> inOrder =
      allReduceBytesByLinkKind(m, {0, 1, 2, 3}, bytes);
  std::array<double, 8> inTurn =
      allReduceBytesByLinkKind(m, {0, 2, 1, 3}, bytes);
  EXPECT_EQ(inTurn, inOrder);
  int inter = static_cast<int>(spec.inter.kind);
  EXPECT_DOUBLE_EQ(inOrder[inter], 2 * 2.0 * 3 / 4 * bytes);
  EXPECT_DOUBLE_EQ(allReduceTime(m, {0, 2, 1, 3}, bytes),
                   allReduceTime(m, {0, 1, 2, 3}, bytes));
}

/// Two linear layers with 1000 x 1000 f32 weights (4 MB each), data
/// parallel over two devices of one node.
Graph twoLayerMlp() {
  Graph g;
  g.numInputs = 1;
  g.weights = {{"w0", {1000, 1000}, 4, true}, {"w1", {1000, 1000}, 4, true}};
  g.ops = {linear("fc0", 8, 1000, 1000, input(), 0),
           linear("fc1", 8, 1000, 1000, fromOp(0), 1)};
  return g;
}

TEST(Simulator, GradientBucketsSyncAtABucketsRate) {
  // With 40 MB buckets each 4 MB gradient moves as a tenth of a 40 MB
  // all-reduce: (2 * 10 us + 40e6 B / 1 GB/s) / 10 = 4.002 ms instead of
  // 4.02 (its own latency is shared with the bucket's other weights).
  Graph g = twoLayerMlp();
  Machine m = roundMachine(1, 2);
  FixedCostModel cost;
  Strategy dp = {{{2, 1, 1}, 0, {}}, {{2, 1, 1}, 0, {}}};
  SimOptions buckets;
  buckets.gradBucketBytes = 40'000'000;
  Simulator sim(g, m, cost, buckets);
  SimResult r = sim.simulate(dp);
  double sync = (2 * 10e-6 + 40e6 / 1e9) / 10;
  EXPECT_NEAR(r.iterationTime, 2 * kMs + 2 * sync + 0.5 * kMs, kTimeTolerance);
  // The bytes moved are the gradients' own.
  Simulator plain(g, m, cost);
  EXPECT_EQ(r.bytesByLinkKind, plain.simulate(dp).bytesByLinkKind);
  // A bucket smaller than the gradient changes nothing.
  buckets.gradBucketBytes = 1000;
  Simulator small(g, m, cost, buckets);
  EXPECT_EQ(small.simulate(dp).iterationTime, plain.simulate(dp).iterationTime);
}

TEST(Simulator, GradientSyncOverlapsBackward) {
  Graph g = twoLayerMlp();
  Machine m = roundMachine(1, 2);
  FixedCostModel cost;
  // A 4 MB all-reduce over 2 devices: 2 * 10 us + 4e6 B / 1 GB/s = 4.02 ms.
  double sync = 2 * 10e-6 + 4e6 / 1e9;
  Strategy dp = {{{2, 1, 1}, 0, {}}, {{2, 1, 1}, 0, {}}};
  {
    SimOptions opts;
    opts.overlapGradSync = true;
    Simulator sim(g, m, cost, opts);
    SimResult r = sim.simulate(dp);
    // Per device: fwd0 [0, .5], fwd1 [.5, 1], bwd1 [1, 2], sync1 on the
    // communication stream [2, 2 + sync] while bwd0 runs [2, 3], sync0
    // [2 + sync, 2 + 2 sync], then update1 (0.5 ms) at max(3, 2 + sync)
    // and update0 after sync0: the end is 2 + 2 sync + 0.5 ms.
    EXPECT_NEAR(r.iterationTime, 2 * kMs + 2 * sync + 0.5 * kMs,
                kTimeTolerance);
    EXPECT_NEAR(r.devices[0].commTime, 2 * sync, kTimeTolerance);
  }
  {
    SimOptions opts;
    opts.overlapGradSync = false;
    Simulator sim(g, m, cost, opts);
    // Syncs wait for the whole backward (3 ms): 3 + 2 sync + 0.5 ms.
    EXPECT_NEAR(sim.simulate(dp).iterationTime, 3 * kMs + 2 * sync + 0.5 * kMs,
                kTimeTolerance);
  }
}

TEST(Simulator, ReductionSplitAllReducesPartialSums) {
  // fc0 split along its reduction dim k over 2 devices: each computes a
  // partial [8, 1000] result that is all-reduced (32000 B: 2 * 10 us +
  // 32000 / 1e9 s = 52 us) before fc1 on device 0 reads it.
  Graph g = twoLayerMlp();
  Machine m = roundMachine(1, 2);
  FixedCostModel cost;
  Simulator sim(g, m, cost);
  SimResult r = sim.simulate({{{1, 1, 2}, 0, {}}, on(0, 3)});
  // fwd0 [0, .5] on both, all-reduce [.5, .552], fwd1 [.552, 1.552],
  // bwd1 [1.552, 3.552]; bwd0 on device 0 [3.552, 4.552]; device 1 gets
  // its gradient (32000 B: 42 us) at 3.594 and runs [3.594, 4.594]. No
  // weight is replicated, so no sync; updates: device 0 runs fc1's and
  // then fc0's [4.552, 5.052, 5.552], device 1 fc0's [4.594, 5.094].
  EXPECT_NEAR(r.iterationTime, 5.552 * kMs, kTimeTolerance);
  std::vector<Simulator::OpTimes> times = sim.opTimes();
  EXPECT_NEAR(times[0].forward, 0.5 * kMs, kTimeTolerance);
  EXPECT_NEAR(times[0].communication, 52e-6, kTimeTolerance);
}

TEST(Simulator, ReduceScatterLeavesPartialSumsInTheSplitConsumer) {
  // fc splits its reduction dim over 2 devices; relu splits the rows. All-
  // reduced, the partial [8, 1000] result (32000 B) costs 2 * 10 us +
  // 32000 B / 1 GB/s = 52 us and each device keeps all of it; reduce-
  // scattered along the rows (scatter = 0), half of that (26 us, half the
  // bytes) and each device keeps the 4 rows its relu reads (16000 B). The
  // backward is the same: each relu half's gradient goes to both partial
  // instances (16000 B to the other device).
  Graph g;
  g.numInputs = 1;
  g.ops.push_back(linear(g, "fc", 8, 1000, 1000, input()));
  g.ops.push_back(elementwise("A", 8, 1000, fromOp(0)));
  ASSERT_EQ(statusText(g.validate()), "");
  Machine m = roundMachine(1, 2);
  FixedCostModel cost;
  Simulator sim(g, m, cost);
  OpConfig summed{{1, 1, 2}, 0, {}};
  OpConfig scattered = summed;
  scattered.scatterDim = 0;
  OpConfig rows{{2, 1}, 0, {}};
  SimResult ar = sim.simulate({summed, rows});
  double arComm = sim.opTimes()[0].communication;
  SimResult rs = sim.simulate({scattered, rows});
  EXPECT_NEAR(arComm, 52e-6, kTimeTolerance);
  EXPECT_NEAR(sim.opTimes()[0].communication, 26e-6, kTimeTolerance);
  // Nothing else changes: the whole iteration is 26 us shorter.
  EXPECT_NEAR(ar.iterationTime - rs.iterationTime, 26e-6, kTimeTolerance);
  EXPECT_EQ(ar.devices[0].memory.activations - rs.devices[0].memory.activations,
            16000);
  int nvlink = static_cast<int>(LinkKind::NVLink);
  // Both move 2 x 16000 B of gradients; the reduce-scatter half the bytes
  // of the all-reduce.
  EXPECT_EQ(rs.bytesByLinkKind[nvlink] - 2 * 16000,
            (ar.bytesByLinkKind[nvlink] - 2 * 16000) / 2);
  // Delta simulation agrees, both ways.
  EXPECT_EQ(sim.update(0, summed).iterationTime, ar.iterationTime);
  EXPECT_EQ(sim.update(0, scattered).iterationTime, rs.iterationTime);

  // Scattered along the columns instead, each relu half needs the other
  // device's piece: 2 x 8000 B forward moves on top of the reduce-scatter.
  OpConfig columns = summed;
  columns.scatterDim = 1;
  SimResult cols = sim.simulate({columns, rows});
  EXPECT_EQ(cols.bytesByLinkKind[nvlink] - rs.bytesByLinkKind[nvlink],
            2 * 8000);

  // Only partial sums scatter, and only into equal pieces.
  EXPECT_NE(
      statusText(
          sim.checkConfig(
              1, OpConfig{{2, 1}, 0, {}, 1, false, StateSharding::None, 0}))
          .find("is not a partial sum"),
      std::string::npos);
  OpConfig uneven{{1, 1, 2}, 0, {}};
  uneven.scatterDim = 2;
  EXPECT_NE(
      statusText(sim.checkConfig(0, uneven)).find("is not a dim of result 0"),
      std::string::npos);
}

TEST(Simulator, ReplicatedOpFeedsColumnParallelThroughAnAllReduce) {
  // Megatron-LM's pattern: A runs whole on both devices (replicas 2), fc is
  // split by output features over them. Forward needs no transfer; in
  // backward each fc partition computes a partial gradient of all of A's
  // [4, 1000] result, summed by one all-reduce of 16000 B over 2 devices:
  // 2 * 10 us + 16000 B / 1 GB/s = 36 us, each device sending 16000 B.
  Graph g;
  g.numInputs = 1;
  g.ops.push_back(elementwise("A", 4, 1000, input()));
  g.ops.push_back(linear(g, "fc", 4, 1000, 1000, fromOp(0)));
  ASSERT_EQ(statusText(g.validate()), "");
  Machine m = roundMachine(1, 2);
  FixedCostModel cost;
  Simulator sim(g, m, cost, SimOptions{.recordTimeline = true});
  OpConfig replicated = on(0, 2);
  replicated.replicas = 2;
  SimResult r = sim.simulate({replicated, {{1, 2, 1}, 0, {}}});
  // fwd A [0, 1] on both (whole), fc [1, 1.5]; bwd fc [1.5, 2.5]; the
  // all-reduce [2.5, 2.536]; bwd A [2.536, 4.536]; fc's halves of its
  // weight need no sync, each updates at [4.536, 5.036].
  EXPECT_NEAR(r.iterationTime, 5.036 * kMs, kTimeTolerance);
  EXPECT_EQ(r.bytesByLinkKind[static_cast<int>(LinkKind::NVLink)], 32000);
  std::ostringstream trace;
  sim.writeChromeTrace(trace);
  EXPECT_NE(trace.str().find("A input-gradient all-reduce"), std::string::npos);

  // The same with A on device 0 only: A's result moves to device 1 and
  // device 1's partial gradient moves back to be summed there.
  SimResult single = sim.simulate({on(0, 2), {{1, 2, 1}, 0, {}}});
  EXPECT_EQ(single.bytesByLinkKind[static_cast<int>(LinkKind::NVLink)],
            2 * 16000);
  EXPECT_EQ(sim.update(0, replicated).iterationTime, r.iterationTime);
}

TEST(Simulator, TensorParallelCommunicationOverlapsTheLinearLayer) {
  // overlapTensorParallel (Megatron-Core's --tp-comm-overlap): the pattern
  // above, where fc's backward produces the partial input gradients that
  // one 36 us all-reduce sums. Overlapped, the reduction starts with fc's
  // first quarter of backward ([1.5, 2.5]) and ends a quarter of its 36 us
  // after fc: 2.509 ms; bwd A [2.509, 4.509], updates [4.509, 5.009].
  Graph g;
  g.numInputs = 1;
  g.ops.push_back(elementwise("A", 4, 1000, input()));
  g.ops.push_back(linear(g, "fc", 4, 1000, 1000, fromOp(0)));
  Machine m = roundMachine(1, 2);
  FixedCostModel cost;
  SimOptions overlap;
  overlap.overlapTensorParallel = true;
  Simulator sim(g, m, cost, overlap);
  OpConfig replicated = on(0, 2);
  replicated.replicas = 2;
  Strategy s = {replicated, {{1, 2, 1}, 0, {}}};
  EXPECT_NEAR(sim.simulate(s).iterationTime, 5.009 * kMs, kTimeTolerance);
  // Without the option it is the 5.036 ms above.
  Simulator plain(g, m, cost);
  EXPECT_NEAR(plain.simulate(s).iterationTime, 5.036 * kMs, kTimeTolerance);
  // Delta simulation agrees with the full one.
  EXPECT_EQ(sim.update(0, replicated).iterationTime,
            sim.simulate(s).iterationTime);

  // Forward: fc0 split by output features hands fc1 (whole on both
  // devices) the other half of its input, 16 KB in 26 us. fc1 starts once
  // fc0 is done (0.5 ms) and ends 1 ms later; the data is there long
  // before its last quarter: forward 1.5 ms, not 1.526.
  Graph mlp = twoLayerMlp();
  OpConfig whole = on(0, 3);
  whole.replicas = 2;
  Strategy gather = {{{1, 2, 1}, 0, {}}, whole};
  Simulator mlpSim(mlp, m, cost, overlap);
  EXPECT_NEAR(mlpSim.simulate(gather).forwardTime, 1.5 * kMs, kTimeTolerance);
  Simulator mlpPlain(mlp, m, cost);
  EXPECT_NEAR(mlpPlain.simulate(gather).forwardTime, 1.526 * kMs,
              kTimeTolerance);
  // Across nodes (0.1 GB/s, 100 us) nothing overlaps: 0.5 + 0.26 + 1 ms.
  Machine twoNodes = roundMachine(2, 1);
  Simulator apart(mlp, twoNodes, cost, overlap);
  EXPECT_NEAR(apart.simulate(gather).forwardTime, 1.76 * kMs, kTimeTolerance);
}

TEST(Simulator, RegatheredInputsAreNotKeptAndComeBackInBackward) {
  // regatherInputs (Megatron-LM's sequence parallelism): fc0 split by
  // output features hands fc1 (whole on both devices) the other half of
  // its input, 16 KB over a 10 MB/s link: 10 us + 1.6 ms. With the option
  // fc1 keeps none of it for backward (a transient buffer instead) and
  // fetches it again once its backward starts; its weight-gradient half
  // (1 of its 2 ms) waits for it.
  Machine m = roundMachine(1, 2, 1e7);
  Graph g = twoLayerMlp();
  FixedCostModel cost;
  OpConfig whole = on(0, 3);
  whole.replicas = 2;
  Strategy gather = {{{1, 2, 1}, 0, {}}, whole};
  SimOptions regather;
  regather.regatherInputs = true;
  Simulator sim(g, m, cost, regather);
  Simulator plain(g, m, cost);
  SimResult r = sim.simulate(gather), p = plain.simulate(gather);
  for (int d = 0; d < 2; ++d) {
    EXPECT_EQ(r.devices[d].memory.activations,
              p.devices[d].memory.activations - 16'000);
    EXPECT_GE(r.devices[d].memory.workspace, 16'000);
  }
  // fwd fc0 [0, 0.5], the transfer [0.5, 2.11], fc1 [2.11, 3.11]; bwd
  // fc1 from 3.11: plain it ends at 5.11, regathered the input is back
  // at 4.72 and the weight-gradient half ends at 5.72.
  EXPECT_NEAR(r.backwardTime - p.backwardTime, 0.61 * kMs, kTimeTolerance);
  EXPECT_NEAR(r.iterationTime - p.iterationTime, 0.61 * kMs, kTimeTolerance);
  EXPECT_EQ(r.bytesByLinkKind, p.bytesByLinkKind);
  // A fast link hides it behind the input-gradient half.
  Machine fast = roundMachine(1, 2);
  EXPECT_EQ(Simulator(g, fast, cost, regather).simulate(gather).iterationTime,
            Simulator(g, fast, cost).simulate(gather).iterationTime);
  // Delta simulation agrees with the full one.
  EXPECT_EQ(sim.update(1, whole).iterationTime, r.iterationTime);
  EXPECT_EQ(sim.update(0, {{1, 2, 1}, 0, {}}).iterationTime, r.iterationTime);
}

TEST(Simulator, ReplicasSynchronizeAndReducePerReplica) {
  // On 4 devices fc0 is data parallel over 2 with each half replicated
  // twice (instances: half 0 on devices 0, 1; half 1 on devices 2, 3) and
  // fc1 runs whole on all 4. Replicas compute identical weight gradients,
  // so fc0 synchronizes within each replica: {0, 2} and {1, 3}, two ring
  // all-reduces of 4 MB over 2 devices (each member sends 4 MB); fc1 needs
  // no sync at all. Each fc1 replica reads the half it lacks (16000 B)
  // from a copy of the other half; in backward each fc0 instance takes the
  // gradient from the fc1 replica on its own device: no transfer.
  Graph g = twoLayerMlp();
  Machine m = roundMachine(1, 4);
  FixedCostModel cost;
  Simulator sim(g, m, cost);
  OpConfig fc0{{2, 1, 1}, 0, {}};
  fc0.replicas = 2;
  OpConfig fc1 = on(0, 3);
  fc1.replicas = 4;
  SimResult r = sim.simulate({fc0, fc1});
  EXPECT_EQ(r.bytesByLinkKind[static_cast<int>(LinkKind::NVLink)],
            2 * 2 * 4'000'000 + 4 * 16'000);
  for (const DeviceStats &d : r.devices)
    EXPECT_EQ(d.memory.weights, 8'000'000);

  // Partial sums: fc0 split along k, each of the two pieces on 2 replicas.
  // Each replica all-reduces its own pair ({0, 2}, {1, 3}: 32000 B, each
  // member sending 32000 B); fc0's weight is split, so nothing to sync.
  OpConfig partial{{1, 1, 2}, 0, {}};
  partial.replicas = 2;
  SimResult p = sim.simulate({partial, fc1});
  EXPECT_EQ(p.bytesByLinkKind[static_cast<int>(LinkKind::NVLink)],
            2 * 2 * 32'000);
  EXPECT_NEAR(sim.opTimes()[0].communication, 2 * 10e-6 + 32e-6,
              kTimeTolerance);
}

TEST(Simulator, ReadersOnOneDeviceShareOneCopy) {
  // A on device 0 feeds B and C, both on device 1: A's [4, 1000] result
  // (16000 B) crosses the link once and both read that copy; their
  // gradients are summed there and cross back once (26 us each way). The
  // received copy is kept once.
  Graph g;
  g.numInputs = 1;
  g.ops = {elementwise("A", 4, 1000, input()),
           elementwise("B", 4, 1000, fromOp(0)),
           elementwise("C", 4, 1000, fromOp(0))};
  ASSERT_EQ(statusText(g.validate()), "");
  Machine m = roundMachine(1, 2);
  FixedCostModel cost;
  Simulator sim(g, m, cost);
  Strategy s = {on(0, 2), on(1, 2), on(1, 2)};
  SimResult r = sim.simulate(s);
  EXPECT_EQ(r.bytesByLinkKind[static_cast<int>(LinkKind::NVLink)], 32000);
  // Device 1 keeps B's and C's results and the one received copy.
  EXPECT_EQ(r.devices[1].memory.activations, 3 * 16000);
  EXPECT_EQ(sim.forwardBytes(1, 0), 16000);
  EXPECT_EQ(sim.forwardBytes(2, 0), 0);
  // fwd A [0, 1], transfer [1, 1.026], B [1.026, 2.026], C [2.026, 3.026];
  // bwd C [3.026, 5.026], B [5.026, 7.026], the summed gradient back
  // [7.026, 7.052], bwd A [7.052, 9.052].
  EXPECT_NEAR(r.iterationTime, 9.052 * kMs, kTimeTolerance);

  // Delta: moving B away leaves C to fetch its own copy, and back again.
  Simulator full(g, m, cost);
  SimResult moved = sim.update(1, on(0, 2));
  EXPECT_EQ(moved.bytesByLinkKind,
            full.simulate({on(0, 2), on(0, 2), on(1, 2)}).bytesByLinkKind);
  EXPECT_EQ(moved.iterationTime,
            full.simulate({on(0, 2), on(0, 2), on(1, 2)}).iterationTime);
  EXPECT_EQ(sim.forwardBytes(2, 0), 16000);
  EXPECT_EQ(sim.update(1, on(1, 2)).iterationTime, r.iterationTime);
}

TEST(Simulator, MemoryOfASmallMlp) {
  // Adam, data parallel over 2: each device holds both 4 MB weights, their
  // gradients and 2 x 4 MB of Adam state each; activations are each op's
  // [4, 1000] result slice (16 KB) plus the [4, 1000] input slice (16 KB);
  // the workspace is the largest result gradient (16 KB).
  Graph g = twoLayerMlp();
  Machine m = roundMachine(1, 2);
  FixedCostModel cost;
  SimOptions opts;
  opts.optimizer = Optimizer::Adam;
  Simulator sim(g, m, cost, opts);
  Strategy dp = {{{2, 1, 1}, 0, {}}, {{2, 1, 1}, 0, {}}};
  SimResult r = sim.simulate(dp);
  const MemoryUse &mem = r.devices[1].memory;
  EXPECT_EQ(mem.weights, 8'000'000);
  EXPECT_EQ(mem.gradients, 8'000'000);
  EXPECT_EQ(mem.optimizerState, 16'000'000);
  EXPECT_EQ(mem.activations, 3 * 16'000);
  EXPECT_EQ(mem.workspace, 16'000);
  EXPECT_EQ(r.peakMemory(), 32'000'000 + 4 * 16'000);
  EXPECT_FALSE(r.outOfMemory);

  // Sharded sync (reduce-scatter + all-gather) divides Adam state by 2.
  opts.gradSync = GradSync::ReduceScatterAllGather;
  Simulator sharded(g, m, cost, opts);
  EXPECT_EQ(sharded.simulate(dp).devices[1].memory.optimizerState, 8'000'000);

  // On 1 GB devices, 1e8-element weights do not fit.
  Graph big = g;
  big.weights[0].shape = {10000, 10000};
  big.ops[0] = linear("fc0", 8, 10000, 10000, input(), 0);
  big.ops[1] = linear("fc1", 8, 10000, 1000, fromOp(0), 1);
  big.weights[1].shape = {10000, 1000};
  Simulator oom(big, m, cost, opts);
  EXPECT_TRUE(oom.simulate(dp).outOfMemory);
}

TEST(Simulator, ZeroStagesShardTrainingState) {
  // The data-parallel MLP of MemoryOfASmallMlp (Adam; two 4 MB weights,
  // each replicated on 2 devices) with every ZeRO stage. Each weight's sync
  // group has 2 members and its [1000, 1000] piece splits evenly.
  Graph g = twoLayerMlp();
  Machine m = roundMachine(1, 2);
  FixedCostModel cost;
  SimOptions opts;
  opts.optimizer = Optimizer::Adam;
  auto withStage = [](StateSharding stage) {
    Strategy s = {{{2, 1, 1}, 0, {}}, {{2, 1, 1}, 0, {}}};
    for (OpConfig &c : s)
      c.sharding = stage;
    return s;
  };
  Simulator sim(g, m, cost, opts);
  auto nvlink = [](const SimResult &r) {
    return r.bytesByLinkKind[static_cast<int>(LinkKind::NVLink)];
  };
  SimResult none = sim.simulate(withStage(StateSharding::None));
  EXPECT_EQ(none.devices[1].memory.optimizerState, 16'000'000);
  // An all-reduce of 4 MB over 2: each member sends 4 MB.
  EXPECT_EQ(nvlink(none), 2 * 2 * 4'000'000);

  // Stage 1: optimizer state halved; reduce-scatter + all-gather move what
  // the all-reduce moved.
  SimResult one = sim.simulate(withStage(StateSharding::Optimizer));
  const MemoryUse &m1 = one.devices[1].memory;
  EXPECT_EQ(m1.weights, 8'000'000);
  EXPECT_EQ(m1.gradients, 8'000'000);
  EXPECT_EQ(m1.optimizerState, 8'000'000);
  EXPECT_EQ(nvlink(one), nvlink(none));
  // The same as grad-sync=reduce-scatter everywhere.
  SimOptions rs = opts;
  rs.gradSync = GradSync::ReduceScatterAllGather;
  Simulator global(g, m, cost, rs);
  SimResult viaOption = global.simulate(withStage(StateSharding::None));
  EXPECT_EQ(viaOption.iterationTime, one.iterationTime);
  EXPECT_EQ(viaOption.devices[1].memory.total(), m1.total());

  // Gathering the updated shards during the next forward
  // (overlapParamGather) takes them off the iteration's end.
  SimOptions deferred = opts;
  deferred.overlapParamGather = true;
  Simulator overlapped(g, m, cost, deferred);
  SimResult later = overlapped.simulate(withStage(StateSharding::Optimizer));
  EXPECT_LT(later.iterationTime, one.iterationTime);
  EXPECT_EQ(nvlink(later), nvlink(one));
  EXPECT_EQ(later.devices[1].memory.total(), m1.total());
  // Without sharded state there is nothing to defer.
  EXPECT_EQ(overlapped.simulate(withStage(StateSharding::None)).iterationTime,
            none.iterationTime);

  // Stage 2: gradients halved too.
  SimResult two = sim.simulate(withStage(StateSharding::Gradients));
  EXPECT_EQ(two.devices[1].memory.gradients, 4'000'000);
  EXPECT_EQ(two.devices[1].memory.optimizerState, 8'000'000);
  EXPECT_EQ(two.iterationTime, one.iterationTime);

  // Stage 3: the weights halved as well; the gathered whole weights are
  // the workspace, both layers' (4 MB each) at once, since the lowering
  // allocates the second's gather while the first runs; an all-gather
  // before each forward and backward, none after the update: 1.5
  // all-reduces' worth of bytes, and more time.
  SimResult three = sim.simulate(withStage(StateSharding::Parameters));
  const MemoryUse &m3 = three.devices[1].memory;
  EXPECT_EQ(m3.weights, 4'000'000);
  EXPECT_EQ(m3.gradients, 4'000'000);
  EXPECT_EQ(m3.optimizerState, 8'000'000);
  EXPECT_EQ(m3.workspace, 2 * 4'000'000);
  EXPECT_EQ(nvlink(three), 3 * 2 * 4'000'000);
  EXPECT_GT(three.iterationTime, none.iterationTime);

  // Rows that do not divide by the members split as evenly as they can:
  // 1000 rows over 3 members are 334, 333 and 333 rows (Adam: 8 B each).
  {
    Graph g6;
    g6.numInputs = 1;
    g6.weights = {{"w0", {1000, 1000}, 4, true}};
    g6.ops = {linear("fc0", 6, 1000, 1000, input(), 0)};
    Machine threeDevices = roundMachine(1, 3);
    Simulator sim6(g6, threeDevices, cost, opts);
    Strategy dp3 = {{{3, 1, 1}, 0, {}}};
    dp3[0].sharding = StateSharding::Optimizer;
    SimResult r = sim6.simulate(dp3);
    EXPECT_EQ(r.devices[0].memory.optimizerState, 334 * 1000 * 8);
    EXPECT_EQ(r.devices[2].memory.optimizerState, 333 * 1000 * 8);
    EXPECT_EQ(r.devices[2].memory.gradients, 1000 * 1000 * 4);
  }

  // Replicas of one piece keep all its state: 3 devices.
  Machine odd = roundMachine(1, 3);
  Graph g3 = twoLayerMlp();
  Simulator sim3(g3, odd, cost, opts);
  Strategy s3 = {{{1, 1, 1}, 0, {}}, {{1, 1, 1}, 0, {}}};
  for (OpConfig &c : s3) {
    c.replicas = 3;
    c.sharding = StateSharding::Parameters;
  }
  // Replicas synchronize nothing, so there is nothing to shard.
  EXPECT_EQ(sim3.simulate(s3).devices[2].memory.optimizerState, 16'000'000);
}

TEST(Simulator, RecomputationTradesMemoryForTime) {
  // A -> B -> C on device 0, [4, 1000] each (16000 B), forward 1 ms and
  // backward 2 ms each, no weights.
  Graph g;
  g.numInputs = 1;
  g.ops = {elementwise("A", 4, 1000, input()),
           elementwise("B", 4, 1000, fromOp(0)),
           elementwise("C", 4, 1000, fromOp(1))};
  Machine m = roundMachine(1, 1);
  FixedCostModel cost;
  Simulator sim(g, m, cost, SimOptions{.recordTimeline = true});
  Strategy keep = {on(0, 2), on(0, 2), on(0, 2)};
  SimResult kept = sim.simulate(keep);
  // Forward 3 ms, backward 6 ms; A's input slice and three results kept.
  EXPECT_NEAR(kept.iterationTime, 9 * kMs, kTimeTolerance);
  EXPECT_EQ(kept.devices[0].memory.activations, 4 * 16000);

  // B recomputed: dropped after forward, run again right before C's
  // backward (its only reader): fwd [0, 3], B again [3, 4], bwd C [4, 6],
  // B [6, 8], A [8, 10].
  Strategy one = keep;
  one[1].recompute = true;
  ASSERT_EQ(statusText(sim.checkConfig(1, one[1])), "");
  SimResult r1 = sim.simulate(one);
  EXPECT_NEAR(r1.iterationTime, 10 * kMs, kTimeTolerance);
  EXPECT_EQ(r1.devices[0].memory.activations, 3 * 16000);
  EXPECT_EQ(r1.devices[0].memory.workspace, 16000);
  EXPECT_NEAR(sim.opTimes()[1].backward, 3 * kMs, kTimeTolerance);
  std::ostringstream trace;
  sim.writeChromeTrace(trace);
  EXPECT_NE(trace.str().find("B recompute"), std::string::npos);

  // A and B recomputed: before C's backward, A (which B reads) and then B
  // run again, A once only: [3, 4], [4, 5]; bwd C [5, 7], B [7, 9], A
  // [9, 11].
  Strategy two = one;
  two[0].recompute = true;
  SimResult r2 = sim.simulate(two);
  EXPECT_NEAR(r2.iterationTime, 11 * kMs, kTimeTolerance);
  EXPECT_EQ(r2.devices[0].memory.activations, 2 * 16000);
  // The two come back together: both alive until B's backward.
  EXPECT_EQ(r2.devices[0].memory.workspace, 2 * 16000);
  // Delta simulation agrees.
  sim.simulate(keep);
  sim.update(1, one[1]);
  EXPECT_EQ(sim.update(0, two[0]).iterationTime, r2.iterationTime);

  // C's result is the graph's output (nothing reads it): kept.
  Strategy last = keep;
  last[2].recompute = true;
  EXPECT_EQ(sim.simulate(last).iterationTime, kept.iterationTime);

  // An op whose forward updates state (a frozen weight) is not recomputed.
  Graph bn = g;
  bn.weights.push_back({"stats", {4, 1000}, 4, /*trainable=*/false});
  bn.ops[1].operands.push_back(weight(0));
  bn.ops[1].space.operands.push_back(TensorAccess::identity({4, 1000}));
  ASSERT_EQ(statusText(bn.validate()), "");
  Simulator withState(bn, m, cost);
  EXPECT_EQ(statusText(withState.checkConfig(1, one[1])),
            "'B' updates state in its forward (stats): recomputing it would "
            "update it twice");
}

TEST(Simulator, DeltaEqualsFullOnHandBuiltGraph) {
  Graph g = twoLayerMlp();
  g.ops.push_back(elementwise("act", 8, 1000, fromOp(1)));
  Machine m = roundMachine(2, 2);
  FixedCostModel cost;
  Simulator delta(g, m, cost), full(g, m, cost);
  Strategy s = {on(0, 3), on(0, 3), on(0, 2)};
  delta.simulate(s);
  std::vector<OpConfig> choices = {{{2, 1, 1}, 0, {}}, {{1, 2, 1}, 1, {2}},
                                   {{1, 1, 2}, 2, {}}, {{2, 2, 1}, 0, {}},
                                   {{4, 1, 1}, 0, {}}, {{1, 1, 1}, 3, {}}};
  for (int step = 0; step < 60; ++step) {
    size_t op = step % 2;
    const OpConfig &c = choices[(step * 7 + op) % choices.size()];
    ASSERT_EQ(statusText(delta.checkConfig(op, c)), "");
    s[op] = c;
    SimResult a = delta.update(op, c);
    SimResult b = full.simulate(s);
    ASSERT_EQ(a.iterationTime, b.iterationTime) << "step " << step;
    for (size_t d = 0; d < a.devices.size(); ++d)
      ASSERT_EQ(a.devices[d].memory.total(), b.devices[d].memory.total());
  }
}

TEST(Simulator, CheckConfigRejectsBadConfigs) {
  Graph g = twoLayerMlp();
  Machine m = roundMachine(1, 2);
  FixedCostModel cost;
  Simulator sim(g, m, cost);
  EXPECT_EQ(statusText(sim.checkConfig(0, {{2, 1, 1}, 0, {}})), "");
  EXPECT_NE(statusText(sim.checkConfig(0, {{4, 1, 1}, 0, {}})),
            ""); // device 3 of 2
  EXPECT_NE(statusText(sim.checkConfig(0, {{3, 1, 1}, 0, {}})),
            ""); // 3 does not divide 8
  EXPECT_NE(statusText(sim.checkConfig(0, {{2, 1}, 0, {}})), ""); // wrong rank
  EXPECT_NE(statusText(sim.checkConfig(5, {{1, 1, 1}, 0, {}})),
            ""); // no such op
}

TEST(Simulator, ChromeTraceHasEveryTask) {
  Graph g;
  g.numInputs = 1;
  // A name JSON must escape: quotes, a backslash and a control character.
  g.ops = {elementwise("A \"x\\y\"\t", 4, 1000, input()),
           elementwise("B", 4, 1000, fromOp(0))};
  Machine m = roundMachine(1, 2);
  FixedCostModel cost;
  SimOptions opts;
  opts.recordTimeline = true;
  Simulator sim(g, m, cost, opts);
  sim.simulate({on(0, 2), on(1, 2)});
  std::ostringstream os;
  sim.writeChromeTrace(os);
  nlohmann::json trace = nlohmann::json::parse(os.str()); // throws if broken
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  std::map<std::string, nlohmann::json> complete;
  std::set<std::string> threads;
  for (const nlohmann::json &event : trace["traceEvents"]) {
    if (event["ph"] == "X")
      complete[event["name"].get<std::string>()] = event;
    else if (event["name"] == "thread_name")
      threads.insert(event["args"]["name"].get<std::string>());
  }
  std::string a = "A \"x\\y\"\t";
  for (const std::string &name : {a + " fwd", std::string("B bwd"), a + " -> B",
                                  std::string("B -> ") + a + " (grad)"})
    EXPECT_TRUE(complete.count(name)) << name << "\n" << os.str();
  EXPECT_TRUE(threads.count("compute"));
  EXPECT_TRUE(threads.count("communication"));
  // B fwd starts at 1.026 ms = 1026 us, on device 1's compute thread.
  ASSERT_TRUE(complete.count("B fwd"));
  const nlohmann::json &b = complete["B fwd"];
  EXPECT_EQ(b["pid"], 1);
  EXPECT_EQ(b["tid"], 0);
  EXPECT_NEAR(b["ts"].get<double>(), 1026, kTimeTolerance * 1e6);
  EXPECT_GT(b["dur"].get<double>(), 0);
}

} // namespace

namespace {

TEST(Simulator, RandomConfigsAreValidAndVaried) {
  Graph g = twoLayerMlp();
  Machine m = roundMachine(2, 4);
  FixedCostModel cost;
  Simulator sim(g, m, cost);
  std::mt19937_64 rng(7);
  std::set<std::vector<int64_t>> seen;
  for (int i = 0; i < 500; ++i) {
    OpConfig c = randomConfig(g.ops[i % 2], m.numDevices(), rng);
    ASSERT_EQ(statusText(sim.checkConfig(i % 2, c)), "");
    seen.insert(c.degrees);
  }
  // Splits of n = 8, m = 1000 and k = 1000 by 2, 4 and 8 in many mixes.
  EXPECT_GT(seen.size(), 8u);
}

} // namespace

namespace {

TEST(Simulator, HierarchicalAllReduceCountsBytesPerLinkKind) {
  // Data parallel over 2 nodes x 2: each 4 MB weight gradient is all-reduced
  // hierarchically. Inside a node each of 2 devices sends 2 (2-1)/2 S = S
  // (4 S over both nodes); across nodes 2 rails of 2 devices each send S / 2
  // (2 S in all). Two weights: 8 S over NVLink, 4 S over InfiniBand.
  Graph g = twoLayerMlp();
  Machine m = roundMachine(2, 2);
  FixedCostModel cost;
  Simulator sim(g, m, cost);
  SimResult r = sim.simulate({{{4, 1, 1}, 0, {}}, {{4, 1, 1}, 0, {}}});
  double s = 4e6;
  EXPECT_DOUBLE_EQ(r.bytesByLinkKind[static_cast<int>(LinkKind::NVLink)],
                   8 * s);
  EXPECT_DOUBLE_EQ(r.bytesByLinkKind[static_cast<int>(LinkKind::InfiniBand)],
                   4 * s);
}

} // namespace

namespace {

TEST(Simulator, AdditiveCostsForDynamicProgramming) {
  Graph g;
  g.numInputs = 1;
  g.ops = {elementwise("A", 4, 1000, input()),
           elementwise("B", 4, 1000, fromOp(0))};
  Machine m = roundMachine(1, 2);
  FixedCostModel cost;
  Simulator sim(g, m, cost);
  // Whole on one device: 1 ms forward + 2 ms backward; split in two: each
  // partition does half.
  EXPECT_NEAR(sim.nodeCost(0, on(0, 2)), 3 * kMs, kTimeTolerance);
  EXPECT_NEAR(sim.nodeCost(0, {{2, 1}, 0, {}}), 1.5 * kMs, kTimeTolerance);
  // A on device 0 feeding B on device 1: 26 us each way.
  EXPECT_NEAR(sim.edgeCost(1, 0, on(0, 2), on(1, 2)), 2 * 26e-6,
              kTimeTolerance);
  EXPECT_EQ(sim.edgeCost(1, 0, on(0, 2), on(0, 2)), 0);
  // Queries leave the simulator's own strategy alone.
  sim.simulate({on(0, 2), on(1, 2)});
  sim.nodeCost(1, on(0, 2));
  EXPECT_EQ(sim.currentStrategy()[1], on(1, 2));
}

TEST(Simulator, EdgeCostsOfTheSameGeometryAreTheSame) {
  // mlp6's fc1 -> fc2, fc2 -> fc3 and fc3 -> fc4 are edges of the same
  // geometry: one simulator answers the later ones from what it built for
  // the first (edgeCost's memo). Each answer must be what a fresh simulator
  // builds for that edge alone, for every pair of configurations tried.
  Graph g = mlp6();
  Machine m = roundMachine(2, 2);
  FixedCostModel cost;
  std::vector<OpConfig> configs;
  for (int64_t n : {1, 2, 4})
    for (int64_t mm : {1, 2, 4})
      for (int64_t k : {1, 2, 4})
        if (4 % (n * mm * k) == 0)
          for (int64_t start = 0; start + n * mm * k <= 4; start += 2)
            configs.push_back({{n, mm, k}, start, {}});
  Simulator shared(g, m, cost);
  std::set<double> distinct;
  for (size_t consumer : {2, 3, 4})
    for (const OpConfig &a : configs)
      for (const OpConfig &b : configs) {
        double memoized = shared.edgeCost(consumer, 0, a, b);
        Simulator fresh(g, m, cost);
        EXPECT_EQ(memoized, fresh.edgeCost(consumer, 0, a, b))
            << "edge into op " << consumer;
        distinct.insert(memoized);
      }
  // Different layouts cost differently: the memo does not merge them.
  EXPECT_GT(distinct.size(), 10u);
}

} // namespace

namespace {

TEST(Simulator, MixedPrecisionKeepsFp32MasterWeightsAndState) {
  // 16-bit weights train in mixed precision: the bf16 copy and gradient
  // (2 + 2 B) plus an fp32 master copy and fp32 Adam moments (12 B), 16 B
  // per parameter as ZeRO counts it; f32 keeps 4 + 4 + 8.
  EXPECT_EQ(trainingStateBytes(2, true, Optimizer::Adam).total(), 16);
  EXPECT_EQ(trainingStateBytes(2, true, Optimizer::Adam).optimizerState, 12);
  EXPECT_EQ(trainingStateBytes(2, true, Optimizer::SGD).optimizerState, 4);
  EXPECT_EQ(trainingStateBytes(4, true, Optimizer::Adam).total(), 16);
  EXPECT_EQ(trainingStateBytes(4, true, Optimizer::SGD).total(), 8);
  EXPECT_EQ(trainingStateBytes(2, false, Optimizer::Adam).total(), 2);

  Graph g = twoLayerMlp();
  for (Weight &w : g.weights)
    w.elemBytes = 2;
  Machine m = roundMachine(1, 2);
  FixedCostModel cost;
  SimOptions options;
  options.optimizer = Optimizer::Adam;
  Simulator sim(g, m, cost, options);
  SimResult r = sim.simulate({{{1, 1, 1}, 0, {}}, {{1, 1, 1}, 0, {}}});
  const MemoryUse &mem = r.devices[0].memory;
  EXPECT_EQ(mem.weights, 2 * 2'000'000);
  EXPECT_EQ(mem.gradients, 2 * 2'000'000);
  EXPECT_EQ(mem.optimizerState, 2 * 12'000'000);
}

TEST(Simulator, Fp32GradientsDoubleTheGradientsOf16BitWeights) {
  // fp32Gradients (Megatron-LM's main_grad): a bf16 weight's gradient is
  // float32, 2 + 4 + 12 = 18 B per parameter with Adam; f32 is unchanged.
  EXPECT_EQ(trainingStateBytes(2, true, Optimizer::Adam, true).gradient, 4);
  EXPECT_EQ(trainingStateBytes(2, true, Optimizer::Adam, true).total(), 18);
  EXPECT_EQ(trainingStateBytes(4, true, Optimizer::Adam, true).total(), 16);
  EXPECT_EQ(trainingStateBytes(2, false, Optimizer::Adam, true).total(), 2);

  // The data-parallel MLP in bf16 (two 1M-parameter weights on 2 devices):
  // each all-reduce moves 4 MB of fp32 gradients instead of 2 MB.
  Graph g = twoLayerMlp();
  for (Weight &w : g.weights)
    w.elemBytes = 2;
  Machine m = roundMachine(1, 2);
  FixedCostModel cost;
  SimOptions bf16, fp32 = bf16;
  fp32.fp32Gradients = true;
  Strategy dp = {{{2, 1, 1}, 0, {}}, {{2, 1, 1}, 0, {}}};
  auto nvlink = [](const SimResult &r) {
    return r.bytesByLinkKind[static_cast<int>(LinkKind::NVLink)];
  };
  SimResult half = Simulator(g, m, cost, bf16).simulate(dp);
  SimResult full = Simulator(g, m, cost, fp32).simulate(dp);
  EXPECT_EQ(nvlink(half), 2 * 2 * 2'000'000);
  EXPECT_EQ(nvlink(full), 2 * nvlink(half));
  EXPECT_EQ(full.devices[0].memory.gradients, 2 * 4'000'000);
  EXPECT_EQ(half.devices[0].memory.gradients, 2 * 2'000'000);
  // fwd [0, 1], bwd1 [1, 2], its 4 MB all-reduce [2, 6.02], bwd0 [2, 3],
  // the second all-reduce [6.02, 10.04] and fc0's update after it.
  EXPECT_NEAR(full.iterationTime, (10.04 + 0.5) * kMs, kTimeTolerance);

  // Sharded optimizer state: the gradients are reduce-scattered in fp32
  // (half a 4 MB all-reduce, 2.01 ms) and the bf16 parameters gathered
  // (half a 2 MB one, 1.01 ms); each moves half its all-reduce's bytes.
  for (OpConfig &c : dp)
    c.sharding = StateSharding::Optimizer;
  Simulator sharded(g, m, cost, fp32);
  SimResult r = sharded.simulate(dp);
  EXPECT_EQ(nvlink(r), 2 * (2 * 4'000'000 + 2 * 2'000'000) / 2);
  EXPECT_NEAR(sharded.opTimes()[0].communication, 2.01e-3 + 1.01e-3,
              kTimeTolerance);
}

TEST(Simulator, SharedWeightIsHeldAndSynchronizedOnce) {
  // Both layers use w0 (an unrolled RNN cell, tied weights): data parallel
  // over 2 devices keeps one 4 MB copy with one gradient per device and
  // all-reduces it once (2 * 10 us + 4e6 B / 1 GB/s = 4.02 ms), after the
  // backward of its first user, fc0.
  Graph g = twoLayerMlp();
  g.ops[1].operands[1].index = 0;
  Machine m = roundMachine(1, 2);
  FixedCostModel cost;
  Simulator sim(g, m, cost);
  SimResult r = sim.simulate({{{2, 1, 1}, 0, {}}, {{2, 1, 1}, 0, {}}});
  double sync = 2 * 10e-6 + 4e6 / 1e9;
  EXPECT_EQ(r.devices[0].memory.weights, 4'000'000);
  EXPECT_EQ(r.devices[0].memory.gradients, 4'000'000);
  EXPECT_NEAR(r.devices[0].commTime, sync, kTimeTolerance);
  // fwd [0, 1], bwd1 [1, 2], bwd0 [2, 3], sync [3, 3 + sync], update.
  EXPECT_NEAR(r.iterationTime, 3 * kMs + sync + 0.5 * kMs, kTimeTolerance);
}

TEST(Simulator, SharedWeightReadElsewhereMovesFromItsHolder) {
  // fc0 holds w0 whole on device 0; fc1 reads it whole on device 1: the
  // 4 MB weight goes 0 -> 1 in forward and its gradient 1 -> 0 in backward
  // (as the lowering sends it), besides fc0's 32 KB result and its
  // gradient. Device 1 keeps no copy of the weight, its gradient or state.
  Graph g = twoLayerMlp();
  g.ops[1].operands[1].index = 0;
  Machine m = roundMachine(1, 2);
  FixedCostModel cost;
  Simulator sim(g, m, cost);
  SimResult r = sim.simulate({{{1, 1, 1}, 0, {}}, {{1, 1, 1}, 1, {}}});
  EXPECT_EQ(r.devices[0].memory.weights, 4'000'000);
  EXPECT_EQ(r.devices[0].memory.gradients, 4'000'000);
  EXPECT_EQ(r.devices[1].memory.weights, 0);
  EXPECT_EQ(r.devices[1].memory.gradients, 0);
  EXPECT_NEAR(r.totalBytes(), 2 * 4e6 + 2 * 8 * 1000 * 4, 1e-6);

  // fc1 splitting w0's columns on both devices reads pieces that the data
  // parallel holder keeps on each device: nothing moves for the weight.
  SimResult local = sim.simulate({{{2, 1, 1}, 0, {}}, {{1, 2, 1}, 0, {}}});
  EXPECT_EQ(local.devices[1].memory.weights, 4'000'000);
  // Only fc0's result moves (each device sends the other its half of the
  // batch, 16 KB, and gets the gradient of it back) besides the holder's
  // gradient all-reduce (each of the 2 devices sends 4 MB).
  EXPECT_NEAR(local.totalBytes(), 4 * 4 * 1000 * 4.0 + 2 * 4e6, 1e-6);
}

} // namespace

TEST(Simulator, GraphsTooLargeForInt64AreRejected) {
  // A batch of 2^50 rows of 1024 floats: 2^62 bytes per tensor, past what
  // the int64 memory accounting can add up (the simulation predicted 0 ms).
  Graph g;
  g.numInputs = 1;
  g.ops.push_back(elementwise("act", int64_t(1) << 50, 1024, input()));
  EXPECT_EQ(statusText(g.validate()),
            "op 0 'act' (ppc.relu): operand 0 of shape [1125899906842624, "
            "1024] takes the graph's tensors past 2^60 bytes (1 EiB), more "
            "than the simulator's int64 memory accounting can represent");
  // Bytes of one tensor that overflow int64 outright.
  g.ops[0] = elementwise("act", int64_t(1) << 61, 1, input());
  g.ops[0].elemBytes = 8;
  EXPECT_NE(statusText(g.validate()).find("past 2^60 bytes"),
            std::string::npos);
  // Weights count as well.
  Graph w;
  w.weights = {{"huge", {int64_t(1) << 40, int64_t(1) << 30}}};
  EXPECT_NE(statusText(w.validate()).find("weight 0 'huge' of shape"),
            std::string::npos);
  // A billion rows is large but representable.
  g.ops[0] = elementwise("act", 1'000'000'000, 1024, input());
  EXPECT_EQ(statusText(g.validate()), "");
}

TEST(Simulator, LargestMachineSimulatesWithSparseRoutes) {
  // kMaxDevices devices: a dense devices^2 route table was 16 GiB here (and
  // out of memory above); routes are now kept per device pair used.
  Machine m = roundMachine(kMaxDevices / 8, 8);
  Graph g;
  g.numInputs = 1;
  g.ops.push_back(elementwise("a", 8192, 16, input()));
  g.ops.push_back(elementwise("b", 8192, 16, fromOp(0)));
  FixedCostModel cost;
  Simulator simulator(g, m, cost);
  // `a` on the first 8192 devices, `b` on the last device of every node:
  // most transfers cross the network, and the highest device is used.
  // (Transfers pair every producer and consumer partition, so the ops stay
  // narrower than the machine.)
  Strategy s = {{{8192, 1}, 0, {}}, {{8192, 1}, 7, {8}}};
  ASSERT_EQ(statusText(simulator.checkConfig(1, s[1])), "");
  SimResult r = simulator.simulate(s);
  EXPECT_GT(r.iterationTime, 0);
  EXPECT_EQ(r.devices.size(), static_cast<size_t>(kMaxDevices));
}

//===----------------------------------------------------------------------===//
// Pipelines
//===----------------------------------------------------------------------===//

namespace {

/// fc0 -> fc1 -> fc2 -> fc3 ([8, 1000] x [1000, 1000]), fc0 and fc1 in
/// stage 0 on device 0, fc2 and fc3 in stage 1 on device 1.
struct TwoStages {
  Graph g;
  Strategy strategy;
  Pipeline pipeline;
  TwoStages(int64_t microbatches, PipelineSchedule schedule) {
    g.numInputs = 1;
    Source in = input();
    for (int l = 0; l < 4; ++l) {
      g.ops.push_back(linear(g, "fc" + std::to_string(l), 8, 1000, 1000, in));
      in = fromOp(l);
      OpConfig config = on(l < 2 ? 0 : 1, 3);
      config.stage = l < 2 ? 0 : 1;
      strategy.push_back(config);
    }
    pipeline.firstDevice = {0, 1};
    pipeline.numDevices = {1, 1};
    pipeline.microbatches = microbatches;
    pipeline.schedule = schedule;
  }
};

} // namespace

TEST(Pipeline, AStopRequestStopsTheStagesSimulations) {
  // A stopped stage simulation makes the pipeline's result stopped, with no
  // finite time, never a partial schedule.
  Machine m = roundMachine(1, 2);
  FixedCostModel cost;
  TwoStages two(4, PipelineSchedule::OneFOneB);
  std::atomic<bool> stop{true};
  SimOptions options;
  options.stop = &stop;
  PipelineResult r =
      simulatePipeline(two.g, m, cost, options, two.strategy, two.pipeline);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.iterationTime, std::numeric_limits<double>::infinity());
  EXPECT_TRUE(r.asSimResult().stopped);
  stop = false;
  PipelineResult whole =
      simulatePipeline(two.g, m, cost, options, two.strategy, two.pipeline);
  EXPECT_FALSE(whole.stopped);
  EXPECT_EQ(whole.iterationTime,
            simulatePipeline(two.g, m, cost, {}, two.strategy, two.pipeline)
                .iterationTime);
}

TEST(Pipeline, GPipeAndOneFOneBScheduleTwoStages) {
  // Per micro-batch (FixedCostModel: 1 ms forward, 2 ms backward per whole
  // op) a stage runs 2 ms forward and 4 ms backward, then updates its two
  // weights (1 ms). Between the stages one micro-batch of fc1's result,
  // [2, 1000] f32 = 8000 B, takes T = 10 us + 8 us. With 4 micro-batches
  // GPipe runs (m + S - 1)(F + B) = 30 ms plus T each way and the update:
  // 31 ms + 2T. In 1F1B stage 0 waits for stage 1's backward of micro-batch
  // j before its forward j + 2, which adds two more T: 31 ms + 4T.
  Machine m = roundMachine(1, 2);
  FixedCostModel cost;
  double transfer = 10e-6 + 8000 / 1e9;
  TwoStages gpipe(4, PipelineSchedule::GPipe);
  ASSERT_EQ(
      statusText(checkPipeline(gpipe.g, gpipe.strategy, gpipe.pipeline, 2)),
      "");
  PipelineResult r =
      simulatePipeline(gpipe.g, m, cost, {}, gpipe.strategy, gpipe.pipeline);
  ASSERT_EQ(r.stages.size(), 2u);
  EXPECT_NEAR(r.stages[0].forward, 2 * kMs, kTimeTolerance);
  EXPECT_NEAR(r.stages[0].backward, 4 * kMs, kTimeTolerance);
  EXPECT_NEAR(r.stages[0].tail, 1 * kMs, kTimeTolerance);
  EXPECT_NEAR(r.stages[0].send, transfer, kTimeTolerance);
  EXPECT_NEAR(r.iterationTime, 31 * kMs + 2 * transfer, kTimeTolerance);
  // Each stage computes 24 ms of the iteration.
  EXPECT_NEAR(r.bubbleFraction, 1 - 24 * kMs / r.iterationTime,
              kTimeTolerance / r.iterationTime);
  EXPECT_EQ(r.stages[0].inFlight, 4);
  EXPECT_EQ(r.stages[1].inFlight, 4);

  TwoStages oneF(4, PipelineSchedule::OneFOneB);
  PipelineResult o =
      simulatePipeline(oneF.g, m, cost, {}, oneF.strategy, oneF.pipeline);
  EXPECT_NEAR(o.iterationTime, 31 * kMs + 4 * transfer, kTimeTolerance);
  EXPECT_EQ(o.stages[0].inFlight, 2);
  EXPECT_EQ(o.stages[1].inFlight, 1);
  // Per micro-batch stage 0 keeps fc0's input and both results (3 x 8000
  // B), stage 1 the received value and its two results: GPipe keeps 4
  // micro-batches of that, 1F1B 2 on stage 0 and 1 on stage 1.
  EXPECT_EQ(r.devices[0].memory.activations, 4 * 24000);
  EXPECT_EQ(o.devices[0].memory.activations, 2 * 24000);
  EXPECT_EQ(o.devices[1].memory.activations, 1 * 24000);
  // Weights, gradients and (SGD) no state: 2 x 4 MB each, once.
  EXPECT_EQ(o.devices[0].memory.weights, 2 * 4000000);
}

TEST(Pipeline, InterleavedStagesShareTheirGroupsDevices) {
  // TwoStages' four linears as four stages dealt to the two devices (stages
  // 0 and 2 on device 0, 1 and 3 on device 1), 4 micro-batches,
  // interleaved 1F1B. Per micro-batch a stage runs 1 ms forward and 2 ms
  // backward. Without transfers the orders of pipelineOrder (see
  // IterationSpaceTest) end group 0's last backward at 27 ms, then it
  // updates two weights (1 ms): 28 ms, where 1F1B on two stages of two ops
  // takes 31 ms. Each of the 15 cross-device waits on the critical path
  // adds at most one transfer T.
  Machine m = roundMachine(1, 2);
  FixedCostModel cost;
  double transfer = 10e-6 + 8000 / 1e9;
  TwoStages t(4, PipelineSchedule::Interleaved);
  for (int l = 0; l < 4; ++l) {
    t.strategy[l] = on(l % 2, 3);
    t.strategy[l].stage = l;
  }
  t.pipeline.firstDevice = {0, 1, 0, 1};
  t.pipeline.numDevices = {1, 1, 1, 1};
  ASSERT_EQ(statusText(checkPipeline(t.g, t.strategy, t.pipeline, 2)), "");
  PipelineResult r = simulatePipeline(t.g, m, cost, {}, t.strategy, t.pipeline);
  EXPECT_GT(r.iterationTime, 28 * kMs);
  EXPECT_LT(r.iterationTime, 28 * kMs + 15 * transfer);
  // Each device computes 2 stages x 4 micro-batches x 3 ms.
  EXPECT_NEAR(r.devices[0].computeTime, 24 * kMs, kTimeTolerance);
  EXPECT_NEAR(r.devices[1].computeTime, 24 * kMs, kTimeTolerance);
  TwoStages oneF(4, PipelineSchedule::OneFOneB);
  EXPECT_LT(r.iterationTime,
            simulatePipeline(oneF.g, m, cost, {}, oneF.strategy, oneF.pipeline)
                .iterationTime);
  // Stage 0 keeps all 4 micro-batches (fc0's input and result, 16000 B
  // each) and stage 2 at most 2 (fc2's, the received input and its
  // result): the peak of their sum on device 0 is 4 x 16000 + 0 when stage
  // 2's backward of micro-batch 0 starts after stage 0's 4 forwards, or
  // less, never more than 4 x 16000 + 2 x 16000.
  EXPECT_EQ(r.stages[0].inFlight, 4);
  EXPECT_EQ(r.stages[2].inFlight, 2);
  EXPECT_GE(r.devices[0].memory.activations, 4 * 16000);
  EXPECT_LE(r.devices[0].memory.activations, 6 * 16000);
  // Both stages' weights live on device 0: 2 x 4 MB.
  EXPECT_EQ(r.devices[0].memory.weights, 2 * 4000000);
}

TEST(Pipeline, OneStageIsThePlainSimulation) {
  // One stage over the whole machine and one micro-batch is exactly the
  // plain simulation; two micro-batches run one after the other, gradients
  // synchronized only with the last (stageSimOptions): during its backward
  // when overlapped, after it otherwise.
  Graph g = twoLayerMlp();
  Machine m = roundMachine(1, 2);
  FixedCostModel cost;
  Strategy dp = {{{2, 1, 1}, 0, {}}, {{2, 1, 1}, 0, {}}};
  Pipeline one;
  one.firstDevice = {0};
  one.numDevices = {2};
  Simulator sim(g, m, cost);
  double plain = sim.simulate(dp).iterationTime;
  EXPECT_NEAR(simulatePipeline(g, m, cost, {}, dp, one).iterationTime, plain,
              1e-15);
  one.microbatches = 2;
  Graph half = microBatchGraph(g, 2);
  SimOptions accumulate;
  accumulate.overlapGradSync = false;
  EXPECT_FALSE(stageSimOptions({}, 2).overlapGradSync);
  EXPECT_TRUE(stageSimOptions({}, 1).overlapGradSync);
  Simulator halfSim(half, m, cost, accumulate);
  SimResult h = halfSim.simulate(dp);
  PipelineResult after = simulatePipeline(g, m, cost, accumulate, dp, one);
  EXPECT_NEAR(after.iterationTime,
              2 * h.backwardTime + h.iterationTime - h.backwardTime, 1e-15);
  // Overlapped: the tail is what the last backward's overlapped sync and
  // the update take beyond the backward.
  Simulator overlappedSim(half, m, cost);
  SimResult o = overlappedSim.simulate(dp);
  EXPECT_LT(o.iterationTime, h.iterationTime);
  PipelineResult two = simulatePipeline(g, m, cost, {}, dp, one);
  EXPECT_NEAR(two.iterationTime,
              2 * h.backwardTime + o.iterationTime - h.backwardTime, 1e-15);
}

TEST(Pipeline, AlikeStagesArePricedAsEachAlone) {
  // Eight linears in four stages of two on a node each, data parallel in
  // the node: stages 1 and 2 are alike (simulated once), stage 0 reads the
  // graph's input, stage 3 ends narrower. Each stage's figures must be
  // what simulating it alone gives.
  Graph g;
  g.numInputs = 1;
  Source in = input();
  Strategy strategy;
  std::vector<int32_t> stages;
  for (int l = 0; l < 8; ++l) {
    g.ops.push_back(
        linear(g, "fc" + std::to_string(l), 64, 256, l == 7 ? 16 : 256, in));
    in = fromOp(l);
    OpConfig config = on(2 * (l / 2), 3);
    config.degrees[0] = 2;
    config.stage = l / 2;
    strategy.push_back(config);
    stages.push_back(l / 2);
  }
  Machine m = roundMachine(4, 2);
  FixedCostModel cost;
  Pipeline pipeline;
  pipeline.firstDevice = {0, 2, 4, 6};
  pipeline.numDevices = {2, 2, 2, 2};
  pipeline.microbatches = 4;
  ASSERT_EQ(statusText(checkPipeline(g, strategy, pipeline, 8)), "");
  Graph micro = microBatchGraph(g, 4);
  EXPECT_TRUE(
      sameButNames(stageGraph(micro, stages, 1), stageGraph(micro, stages, 2)));
  EXPECT_FALSE(
      sameButNames(stageGraph(micro, stages, 2), stageGraph(micro, stages, 3)));
  PipelineResult r = simulatePipeline(g, m, cost, {}, strategy, pipeline);
  ASSERT_EQ(r.stages.size(), 4u);
  for (int32_t s = 0; s < 4; ++s) {
    Strategy local(strategy.begin() + 2 * s, strategy.begin() + 2 * s + 2);
    for (OpConfig &config : local) {
      config.start = 0;
      config.stage = 0;
    }
    StageAlone alone =
        simulateStageAlone(stageGraph(micro, stages, s), m.subMachine(2 * s, 2),
                           cost, {}, 4, local);
    EXPECT_EQ(r.stages[s].forward, alone.result.forwardTime) << s;
    EXPECT_EQ(r.stages[s].backward,
              alone.result.backwardTime - alone.result.forwardTime)
        << s;
    EXPECT_EQ(r.stages[s].tail, alone.tail) << s;
    EXPECT_EQ(r.devices[2 * s].memory.weights,
              alone.result.devices[0].memory.weights)
        << s;
  }
}

TEST(Graph, SameButNamesComparesEverythingElse) {
  Graph g = mlp6();
  Graph renamed = g;
  for (Op &op : renamed.ops)
    op.name += ".renamed";
  for (Weight &w : renamed.weights)
    w.name += ".renamed";
  EXPECT_TRUE(sameButNames(g, renamed));
  std::vector<std::pair<std::string, std::function<void(Graph &)>>> changes = {
      {"dim size", [](Graph &h) { h.ops[2].space.dims[0].size = 32; }},
      {"dim kind",
       [](Graph &h) { h.ops[2].space.dims[1].kind = IterKind::Attribute; }},
      {"splittable", [](Graph &h) { h.ops[2].space.dims[1].splittable = 0; }},
      {"access",
       [](Graph &h) { h.ops[2].space.operands[0].dims[1].divisor = 2; }},
      {"result shape", [](Graph &h) { h.ops[2].space.results[0].shape[1]++; }},
      {"staged", [](Graph &h) { h.ops[2].space.staged = StagedKernel(); }},
      {"flat view", [](Graph &h) { h.ops[2].space.flatView = true; }},
      {"matrix product", [](Graph &h) { h.ops[2].space.matrixProduct = 0; }},
      {"causal",
       [](Graph &h) {
         h.ops[2].space.causal = CausalDomain{0, 1};
       }},
      {"expert dim", [](Graph &h) { h.ops[2].space.expertDim = 1; }},
      {"flops", [](Graph &h) { h.ops[2].cost.bwdFlops *= 2; }},
      {"kernel",
       [](Graph &h) { h.ops[2].cost.kernel = KernelKind::FusedAttention; }},
      {"kind", [](Graph &h) { h.ops[2].kind = "ppc.matmul"; }},
      {"dtype", [](Graph &h) { h.ops[2].dtype = DType::BF16; }},
      {"element bytes", [](Graph &h) { h.ops[2].elemBytes = 2; }},
      {"differentiable", [](Graph &h) { h.ops[2].differentiable = false; }},
      {"source", [](Graph &h) { h.ops[2].operands[0] = fromOp(0); }},
      {"weight shape", [](Graph &h) { h.weights[1].shape[0]++; }},
      {"trainable", [](Graph &h) { h.weights[1].trainable = false; }},
      {"inputs", [](Graph &h) { h.numInputs = 2; }},
      {"one op fewer", [](Graph &h) { h.ops.pop_back(); }},
  };
  for (const auto &[what, change] : changes) {
    Graph other = g;
    change(other);
    EXPECT_FALSE(sameButNames(g, other)) << what;
  }
}

TEST(Pipeline, MicroBatchGraphScalesTheBatch) {
  Graph g = twoLayerMlp();
  Graph half = microBatchGraph(g, 2);
  const Op &whole = g.ops[0], &micro = half.ops[0];
  EXPECT_EQ(micro.space.dims[0].size, 4);    // n: 8 -> 4
  EXPECT_EQ(micro.space.dims[1].size, 1000); // m, k kept
  EXPECT_EQ(micro.space.operands[0].shape, (std::vector<int64_t>{4, 1000}));
  EXPECT_EQ(micro.space.operands[1].shape, (std::vector<int64_t>{1000, 1000}));
  EXPECT_EQ(micro.space.results[0].shape, (std::vector<int64_t>{4, 1000}));
  EXPECT_DOUBLE_EQ(micro.cost.fwdFlops, whole.cost.fwdFlops / 2);
  // The 4 MB weight is still read whole; the 32 KB input and result halve.
  EXPECT_DOUBLE_EQ(micro.cost.fwdBytes, 4e6 + (whole.cost.fwdBytes - 4e6) / 2);
}

TEST(Pipeline, CheckPipelineNamesTheProblem) {
  TwoStages t(4, PipelineSchedule::OneFOneB);
  auto problem = [&](const Strategy &s, const Pipeline &p) {
    return statusText(checkPipeline(t.g, s, p, 2));
  };
  Strategy backwards = t.strategy;
  backwards[3].stage = 0;
  EXPECT_NE(problem(backwards, t.pipeline)
                .find("op 3 ('fc3') is in stage 0 after stage 1"),
            std::string::npos);
  Strategy outside = t.strategy;
  outside[2].start = 0;
  EXPECT_NE(problem(outside, t.pipeline)
                .find("op 'fc2' runs on device 0, outside its stage 1's "
                      "devices [1, 2)"),
            std::string::npos);
  Pipeline uneven = t.pipeline;
  uneven.microbatches = 3;
  EXPECT_NE(problem(t.strategy, uneven)
                .find("has 8 samples per partition along dim 0, which do "
                      "not divide into 3 micro-batches"),
            std::string::npos);
  Pipeline shared = t.pipeline;
  shared.firstDevice = {0, 0};
  EXPECT_NE(problem(t.strategy, shared).find("stages 0 and 1 share devices"),
            std::string::npos);
  EXPECT_NE(problem(t.strategy, Pipeline())
                .find("op 'fc2' is in stage 1 but the strategy has no "
                      "pipeline"),
            std::string::npos);
}

namespace {

/// o = attention(q, k, v) over [S, D] each (q, k, v relu'd from three
/// inputs): dims S (attribute), T (reduction), D (reduction), Dv
/// (parameter), D and Dv unsplittable; its keys stream around rings that
/// split S (RingSpec, as AttentionOp's).
Graph ringAttention(int64_t s, int64_t d) {
  Graph g;
  g.numInputs = 3;
  for (int i = 0; i < 3; ++i)
    g.ops.push_back(elementwise(std::string(1, "qkv"[i]), s, d, input(i)));
  Op att;
  att.name = "attention";
  att.kind = "ppc.attention";
  att.space.dims = {{s, IterKind::Attribute},
                    {s, IterKind::Reduction},
                    {d, IterKind::Reduction, false},
                    {d, IterKind::Parameter, false}};
  auto access = [](int64_t rows, int64_t cols, int32_t a, int32_t b) {
    return TensorAccess{{rows, cols},
                        {DimAccess::identity(a), DimAccess::identity(b)}};
  };
  att.space.operands = {access(s, d, 0, 2), access(s, d, 1, 2),
                        access(s, d, 1, 3)};
  att.space.results = {access(s, d, 0, 3)};
  att.space.ring = RingSpec{1, 0, {1, 2}};
  att.operands = {fromOp(0), fromOp(1), fromOp(2)};
  g.ops.push_back(std::move(att));
  return g;
}

TEST(Simulator, RingPassesBlocksBesideItsKernels) {
  // S = T = 64, D = 250 on 4 devices: a member's key and value blocks are
  // 16 x 250 f32 each, 32,000 bytes: 10 us + 32 us over the 1 GB/s links.
  // FixedCostModel: a step's kernel is 1/16 of the op's 1 ms forward and
  // 2 ms backward. Forward: 4 steps of 62.5 us (the sends hide under
  // them); backward: 4 steps of 125 us, the last block's gradients (42 us)
  // after them.
  Graph g = ringAttention(64, 250);
  ASSERT_EQ(statusText(g.validate()), "");
  Machine m = roundMachine(1, 4);
  FixedCostModel cost;
  std::vector<OpConfig> strategy(4, OpConfig{{4, 1}, 0, {}});
  strategy[3] = {{4, 1, 1, 1}, 0, {}};
  strategy[3].ring = true;
  ASSERT_EQ(statusText(checkConfig(g.ops[3].space, strategy[3], 4)), "");
  Simulator sim(g, m, cost);
  SimResult ring = sim.simulate(strategy);
  std::vector<Simulator::OpTimes> times = sim.opTimes();
  EXPECT_NEAR(times[3].forward, 4 * 62.5e-6, kTimeTolerance);
  EXPECT_NEAR(times[3].backward, 4 * 125e-6 + 42e-6, kTimeTolerance);
  // Per member 3 blocks forward, 3 blocks and 4 blocks of gradients
  // backward; the queries, keys and values are read where they are.
  const double block = 32000;
  EXPECT_DOUBLE_EQ(ring.bytesByLinkKind[static_cast<int>(LinkKind::NVLink)],
                   4 * (3 + 7) * block);
  const auto &count =
      ring.exchanges[static_cast<size_t>(geometry::ExchangeKind::Ring)];
  EXPECT_EQ(count.count, 2); // one ring, forward and backward
  EXPECT_DOUBLE_EQ(count.bytes, 4 * (3 + 7) * block);
  EXPECT_EQ(sim.forwardBytes(3, 1), 0.0);
  // Two blocks and their two gradients in flight, beside the chunks.
  EXPECT_GE(ring.devices[0].memory.workspace, 4 * 32000);

  // The same split without the ring all-gathers the keys and values: each
  // member receives the 3 others' blocks and sends their gradients back,
  // and holds the whole keys and values.
  strategy[3].ring = false;
  SimResult gathered = sim.simulate(strategy);
  EXPECT_DOUBLE_EQ(gathered.bytesByLinkKind[static_cast<int>(LinkKind::NVLink)],
                   4 * (3 + 3) * block);
  EXPECT_GT(gathered.devices[0].memory.activations,
            ring.devices[0].memory.activations);

  // On links 10x slower the sends take 330 us, longer than the kernels:
  // forward 3 sends and the last kernel.
  Machine slow = roundMachine(1, 4, 1e8);
  strategy[3].ring = true;
  Simulator slowSim(g, slow, cost);
  slowSim.simulate(strategy);
  EXPECT_NEAR(slowSim.opTimes()[3].forward, 3 * 330e-6 + 62.5e-6,
              kTimeTolerance);
}

} // namespace
