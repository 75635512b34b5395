//===- CostScalingTest.cpp - predicted kernel times follow the work -------===//
//
// Sweeps the batch of one instance of every compute op (EveryComputeOp.h)
// and checks, on every machine preset, what any user of the predictions
// relies on: a kernel's predicted time never falls (by more than 1%) as its
// work grows, grows when the work grows 256-fold, is never below the roofline
// of its FLOPs and bytes, and for a small call costs microseconds beyond its
// launch (not a fixed share of a large call's time, as the fused attention's
// half efficiency once was at float32's peak: 1.1 ms a call on an H100).
//
//===----------------------------------------------------------------------===//

#include "EveryComputeOp.h"

#include "ppc/Analysis/SimGraph.h"
#include "ppc/Dialect/Graph/GraphDialect.h"
#include "ppc/Simulator/CostModel.h"
#include "ppc/Simulator/Machine.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <map>

using namespace mlir;
using namespace ppc;

namespace {

constexpr int64_t kBatches[] = {1, 4, 16, 64, 256};

/// One concrete machine per preset: patterns such as "dgx-h100xN" with two
/// of their unit.
std::vector<std::pair<std::string, Machine>> everyPreset() {
  std::vector<std::pair<std::string, Machine>> machines;
  for (const PresetInfo &preset : listPresets()) {
    std::string name = preset.name;
    if (name.size() > 2 && name.substr(name.size() - 2) == "xN")
      name.replace(name.size() - 1, 1, "2");
    std::optional<Machine> machine = lookupPreset(name);
    EXPECT_TRUE(machine) << name;
    if (machine)
      machines.emplace_back(name, std::move(*machine));
  }
  return machines;
}

/// The roofline of one kernel: its FLOPs at the device's peak for its type
/// and its bytes at the device's memory bandwidth, whichever is longer.
/// (The test times whole ops: partition 0 of degrees 1.)
double roofline(const sim::Op &op, sim::Phase phase, const DeviceSpec &device) {
  bool forward = phase == sim::Phase::Forward;
  double flops = forward ? op.cost.fwdFlops : op.cost.bwdFlops;
  double bytes = forward ? op.cost.fwdBytes : op.cost.bwdBytes;
  return std::max(flops / device.getPeakFlops(op.dtype),
                  bytes / device.memoryBandwidth);
}

TEST(CostScaling, EveryOpKindOnEveryPresetTakesLongerForMoreWork) {
  MLIRContext context;
  context.loadDialect<graph::PPCDialect, func::FuncDialect>();
  // graphs[b]: the ops at kBatches[b].
  std::vector<sim::Graph> graphs;
  std::vector<OwningOpRef<ModuleOp>> modules;
  for (int64_t batch : kBatches) {
    modules.push_back(parseSourceString<ModuleOp>(test::everyComputeOp(batch),
                                                  ParserConfig(&context)));
    ASSERT_TRUE(modules.back()) << "batch " << batch;
    auto func = *modules.back()->getOps<func::FuncOp>().begin();
    FailureOr<sim::Graph> graph = buildSimGraph(func);
    ASSERT_TRUE(succeeded(graph)) << "batch " << batch;
    graphs.push_back(std::move(*graph));
  }
  size_t numOps = graphs[0].ops.size();
  ASSERT_EQ(numOps, test::kNumComputeOps);
  for (const sim::Graph &graph : graphs)
    ASSERT_EQ(graph.ops.size(), numOps);

  sim::RooflineCostModel model;
  std::vector<std::pair<std::string, Machine>> machines = everyPreset();
  ASSERT_GE(machines.size(), 8u);
  for (const auto &[name, machine] : machines) {
    const DeviceSpec &device = machine.getSpec(0);
    for (size_t i = 0; i < numOps; ++i) {
      for (sim::Phase phase : {sim::Phase::Forward, sim::Phase::Backward}) {
        std::vector<double> times;
        for (const sim::Graph &graph : graphs) {
          const sim::Op &op = graph.ops[i];
          std::vector<int64_t> degrees(op.space.dims.size(), 1);
          sim::KernelShape shape = sim::kernelShape(op, degrees, 0);
          double time = model.kernelTime(op, shape, phase, device);
          times.push_back(time);
          if (time == 0)
            continue; // a view: no kernel
          EXPECT_GE(time * (1 + 1e-9), roofline(op, phase, device))
              << name << " " << op.kind << " "
              << (phase == sim::Phase::Forward ? "forward" : "backward")
              << ": faster than its roofline at " << graph.ops[i].name;
        }
        const sim::Op &small = graphs.front().ops[i];
        const sim::Op &large = graphs.back().ops[i];
        std::string what =
            name + " " + small.kind + " " +
            std::string(phase == sim::Phase::Forward ? "forward" : "backward");
        // Within 1%: the GEMM model's tile and split-K quantization lets a
        // larger reduction run a hair faster, as cuBLAS's kernel choice
        // does.
        for (size_t b = 1; b < times.size(); ++b)
          EXPECT_GE(times[b], 0.99 * times[b - 1])
              << what << ": faster at batch " << kBatches[b] << " than at "
              << kBatches[b - 1];
        if (times.front() == 0)
          continue;
        // Microseconds beyond the launch for a call of a few KiB.
        EXPECT_LT(times.front() - device.launchOverhead, 20e-6)
            << what << " at batch " << kBatches[0];
        bool moreWork = large.cost.fwdFlops > small.cost.fwdFlops ||
                        large.cost.fwdBytes > small.cost.fwdBytes;
        EXPECT_TRUE(moreWork) << small.kind << ": no more work at batch "
                              << kBatches[std::size(kBatches) - 1];
        EXPECT_GT(times.back(), times.front())
            << what << ": as fast at batch "
            << kBatches[std::size(kBatches) - 1] << " as at " << kBatches[0];
      }
    }
  }
}

} // namespace
