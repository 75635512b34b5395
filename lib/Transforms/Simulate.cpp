//===- Simulate.cpp - simulate one training iteration of a strategy -------===//
//
// Reads the module as the simulator sees it (SimGraph), the strategy from the
// ops' #ppc.strategy attributes and the machine from `ppc.machine`, runs the
// simulator once, and prints what the iteration costs. Nothing is written to
// the IR: a strategy is judged here, chosen elsewhere.
//
//===----------------------------------------------------------------------===//

#include "SimulationOptions.h"

#include "ppc/Analysis/SimGraph.h"
#include "ppc/Dialect/Graph/GraphOps.h"
#include "ppc/Dialect/Topology/MachineConversion.h"
#include "ppc/Search/ProfileRequests.h"
#include "ppc/Simulator/CostModel.h"
#include "ppc/Simulator/Pipeline.h"
#include "ppc/Simulator/Simulator.h"
#include "ppc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

#include <numeric>
#include <sstream>

namespace ppc {
#define GEN_PASS_DEF_SIMULATE
#include "ppc/Transforms/Passes.h.inc"
} // namespace ppc

using namespace mlir;
using namespace ppc;

namespace {

/// Ops listed in the per-op table; the rest are summed in one line.
constexpr size_t kTopOps = 20;

const char *stringifyOptimizer(sim::Optimizer optimizer) {
  return sim::optimizerInfo(optimizer).name;
}

double toMs(double seconds) { return seconds * 1e3; }

/// Bytes in the largest binary unit that keeps the number >= 1.
std::string formatBytes(double bytes) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  if (unit == 0)
    return llvm::formatv("{0} B", static_cast<int64_t>(bytes)).str();
  return llvm::formatv("{0:f2} {1}", bytes, units[unit]).str();
}

std::string formatDegrees(const OpConfig &config) {
  std::string text =
      "[" +
      llvm::join(llvm::map_range(config.degrees,
                                 [](int64_t d) { return std::to_string(d); }),
                 ",") +
      "]";
  if (config.start != 0)
    text += " @" + std::to_string(config.start);
  return text;
}

/// The batch size, when the first input's dim 0 is static: with it the
/// iteration time becomes a throughput.
std::optional<int64_t> getBatchSize(func::FuncOp func) {
  if (func.getNumArguments() == 0)
    return std::nullopt;
  auto type = dyn_cast<RankedTensorType>(func.getArgumentTypes()[0]);
  if (!type || type.getRank() == 0 || type.isDynamicDim(0))
    return std::nullopt;
  return type.getDimSize(0);
}

/// `path` with `.<suffix>` before its extension: one trace per function when
/// the module has several.
std::string withSuffix(StringRef path, StringRef suffix) {
  StringRef extension = llvm::sys::path::extension(path);
  return (path.drop_back(extension.size()) + "." + suffix + extension).str();
}

/// The machine in one line, e.g. "dgx-h100x2: 16 x H100-SXM5-80GB in 2
/// nodes"; a machine attached as a #topo.cluster has no name.
std::string describeMachine(const Machine &machine) {
  llvm::MapVector<StringRef, int64_t> counts;
  for (const Device &device : machine.devices)
    ++counts[machine.specs[device.spec].name];
  std::string text = machine.name.empty() ? "" : machine.name + ": ";
  text += llvm::join(llvm::map_range(counts,
                                     [](auto &entry) {
                                       return std::to_string(entry.second) +
                                              " x " + entry.first.str();
                                     }),
                     " + ");
  if (int64_t nodes = machine.numNodes(); nodes > 1)
    text += " in " + std::to_string(nodes) + " nodes";
  return text;
}

struct SimulatePass : public ppc::impl::SimulateBase<SimulatePass> {
  using Base::Base;

  void runOnOperation() override;

private:
  /// Simulates one function and writes its report; fails after emitting an
  /// error when it cannot be simulated.
  LogicalResult simulateFunction(func::FuncOp func, const Machine &machine,
                                 const sim::CostModel &costModel,
                                 StringRef tracePathForFunc, raw_ostream &os);
  void writeReport(func::FuncOp func, const Machine &machine,
                   const sim::Graph &graph, const sim::Strategy &strategy,
                   int64_t numAssigned, const sim::SimResult &result,
                   const sim::Simulator &simulator, raw_ostream &os);
  /// What every report starts with: the function, machine, ops, optimizer
  /// and cost model.
  void writeHeader(func::FuncOp func, const Machine &machine,
                   const sim::Graph &graph, int64_t numAssigned,
                   raw_ostream &os);
  /// The report of a pipelined strategy: stages, micro-batches, schedule,
  /// per stage its devices, times, bubble and memory, and every device's
  /// memory.
  void writePipelineReport(func::FuncOp func, const Machine &machine,
                           const sim::Graph &graph, int64_t numAssigned,
                           const sim::Pipeline &pipeline,
                           const sim::PipelineResult &result, raw_ostream &os);
  void writeDeviceTable(const std::vector<sim::DeviceStats> &devices,
                        raw_ostream &os);
  /// The iteration time, the throughput when the batch is known, and the
  /// model FLOPs utilization.
  void writeTime(func::FuncOp func, const sim::Graph &graph,
                 const Machine &machine, double iterationTime, raw_ostream &os);
  /// Bytes per link kind and the ops that take the most time.
  void writeOpTables(const sim::Graph &graph, const sim::Strategy &strategy,
                     const sim::SimResult &result,
                     const sim::Simulator &simulator, raw_ostream &os);

  template <typename Pass>
  friend FailureOr<sim::SimOptions>
  transforms_detail::readSimulationOptions(const Pass &, Location, StringRef);

  std::optional<sim::ProfiledCostModel> profile;
};

void SimulatePass::runOnOperation() {
  ModuleOp module = getOperation();
  // The pass only reads the module.
  markAllAnalysesPreserved();
  profile.reset();

  std::optional<Machine> machine = topo::lookupMachine(module);
  if (!machine) {
    module.emitError() << "ppc-simulate: no machine attached; use "
                          "--ppc-attach-machine=machine=NAME";
    return signalPassFailure();
  }

  sim::RooflineCostModel roofline;
  const sim::CostModel *costModel = &roofline;
  if (!profilePath.empty()) {
    absl::StatusOr<sim::ProfiledCostModel> read =
        sim::ProfiledCostModel::readFile(profilePath);
    if (!read.ok()) {
      module.emitError() << "ppc-simulate: cannot read the profile: "
                         << ppc::messageOf(read.status());
      return signalPassFailure();
    }
    profile = std::move(*read);
    costModel = &*profile;
  }

  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputPath, &error);
  if (!output) {
    module.emitError() << "ppc-simulate: cannot open the report output '"
                       << outputPath << "': " << error;
    return signalPassFailure();
  }

  // Functions without graph ops (helpers, empty stubs) have nothing to cost.
  SmallVector<func::FuncOp> funcs;
  for (auto func : module.getOps<func::FuncOp>())
    if (!func.isExternal() && !getSimulatedOps(func).empty())
      funcs.push_back(func);
  if (funcs.empty())
    output->os() << "ppc-simulate: no function with graph ops to simulate\n";

  bool failed = false;
  for (func::FuncOp func : funcs) {
    std::string tracePathForFunc;
    if (!tracePath.empty())
      tracePathForFunc = funcs.size() == 1 ? tracePath.getValue()
                                           : withSuffix(tracePath.getValue(),
                                                        func.getSymName());
    failed |= mlir::failed(simulateFunction(func, *machine, *costModel,
                                            tracePathForFunc, output->os()));
  }
  output->keep();
  if (failed)
    signalPassFailure();
}

/// Writes the trace `write` produces to `path`, unless `path` is empty.
LogicalResult writeTrace(func::FuncOp func, StringRef path,
                         llvm::function_ref<void(std::ostream &)> write) {
  if (path.empty())
    return success();
  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> trace = openOutputFile(path, &error);
  if (!trace)
    return func.emitError() << "ppc-simulate: cannot open the trace output '"
                            << path << "': " << error;
  std::ostringstream json;
  write(json);
  trace->os() << json.str();
  trace->keep();
  return success();
}

LogicalResult SimulatePass::simulateFunction(func::FuncOp func,
                                             const Machine &machine,
                                             const sim::CostModel &costModel,
                                             StringRef tracePathForFunc,
                                             raw_ostream &os) {
  FailureOr<sim::Graph> graph = buildSimGraph(func);
  if (mlir::failed(graph))
    return failure();
  FailureOr<sim::Strategy> strategy =
      readStrategy(func, *graph, unassigned, machine.numDevices());
  if (mlir::failed(strategy))
    return failure();
  warnIneffectiveSharding(func, *graph, *strategy);

  FailureOr<sim::SimOptions> parsed = transforms_detail::readSimulationOptions(
      *this, func.getLoc(), "ppc-simulate");
  if (mlir::failed(parsed))
    return failure();
  sim::SimOptions options = *parsed;
  options.recordTimeline = !tracePathForFunc.empty();
  options.countExchanges = true;
  // Kernels the profile lacks are priced as ppc-search prices them.
  if (profile) {
    size_t total = 0;
    search::calibrateProfileMisses(*profile, *graph, machine, total);
  }
  sim::Simulator simulator(*graph, machine, costModel, options);

  // Every bad configuration is reported, not only the first.
  SmallVector<Operation *> ops = getSimulatedOps(func);
  int64_t numAssigned = 0;
  bool invalid = false;
  for (auto [index, op] : llvm::enumerate(ops)) {
    if (op->hasAttr(graph::PPCDialect::getStrategyAttrName()))
      ++numAssigned;
    absl::Status problem = simulator.checkConfig(index, (*strategy)[index]);
    if (problem.ok())
      continue;
    op->emitError() << "ppc-simulate: invalid configuration "
                    << formatDegrees((*strategy)[index]) << " for op '"
                    << graph->ops[index].name
                    << "': " << ppc::messageOf(problem);
    invalid = true;
  }
  if (invalid)
    return failure();

  FailureOr<sim::Pipeline> pipeline = readPipeline(func);
  if (mlir::failed(pipeline))
    return failure();
  if (absl::Status problem = sim::checkPipeline(*graph, *strategy, *pipeline,
                                                machine.numDevices());
      !problem.ok())
    return func.emitError() << "ppc-simulate: " << ppc::messageOf(problem);

  // The profile's hit counts are per function.
  if (profile) {
    profile->hits = 0;
    profile->misses = 0;
  }
  if (pipeline->enabled()) {
    options.recordTimeline = false;
    sim::PipelineResult result = sim::simulatePipeline(
        *graph, machine, costModel, options, *strategy, *pipeline);
    if (result.outOfMemory)
      emitWarning(func.getLoc())
          << "ppc-simulate: @" << func.getSymName()
          << " does not fit in memory: a stage's devices need more than "
             "they have (see its report)";
    auto writeSchedule = [&](std::ostream &json) {
      sim::writePipelineTrace(result, json);
    };
    if (mlir::failed(writeTrace(func, tracePathForFunc, writeSchedule)))
      return failure();
    writePipelineReport(func, machine, *graph, numAssigned, *pipeline, result,
                        os);
    return success();
  }
  sim::SimResult result = simulator.simulate(*strategy);
  if (result.outOfMemory) {
    const sim::DeviceStats &tightest = result.devices[result.tightestDevice];
    // At the location, not the op: a warning need not dump the function.
    emitWarning(func.getLoc())
        << "ppc-simulate: @" << func.getSymName()
        << " does not fit in memory: device " << result.tightestDevice
        << " needs " << formatBytes(tightest.memory.total()) << " of "
        << formatBytes(tightest.capacity);
  }

  if (mlir::failed(writeTrace(func, tracePathForFunc, [&](std::ostream &json) {
        simulator.writeChromeTrace(json);
      })))
    return failure();

  writeReport(func, machine, *graph, *strategy, numAssigned, result, simulator,
              os);
  return success();
}

void SimulatePass::writeReport(func::FuncOp func, const Machine &machine,
                               const sim::Graph &graph,
                               const sim::Strategy &strategy,
                               int64_t numAssigned,
                               const sim::SimResult &result,
                               const sim::Simulator &simulator,
                               raw_ostream &os) {
  writeHeader(func, machine, graph, numAssigned, os);
  writeTime(func, graph, machine, result.iterationTime, os);
  if (result.outOfMemory) {
    const sim::DeviceStats &tightest = result.devices[result.tightestDevice];
    os << llvm::formatv("  warning: out of memory: device {0} needs {1} of "
                        "{2}\n",
                        result.tightestDevice,
                        formatBytes(tightest.memory.total()),
                        formatBytes(tightest.capacity));
  }
  writeDeviceTable(result.devices, os);
  writeOpTables(graph, strategy, result, simulator, os);
}

void SimulatePass::writeHeader(func::FuncOp func, const Machine &machine,
                               const sim::Graph &graph, int64_t numAssigned,
                               raw_ostream &os) {
  os << "ppc simulation @" << func.getSymName() << " on "
     << describeMachine(machine) << "\n";
  os << llvm::formatv(
      "  ops: {0} ({1} with ppc.strategy, {2} {3})\n", graph.ops.size(),
      numAssigned, graph.ops.size() - numAssigned,
      unassigned == UnassignedPolicy::DataParallel ? "data parallel by default"
                                                   : "on device 0 by default");
  os << "  optimizer: " << stringifyOptimizer(optimizer) << ", gradient sync: "
     << (gradSync == sim::GradSync::AllReduce ? "all-reduce" : "reduce-scatter")
     << (overlap ? " overlapped with backward" : " after backward")
     << (overlapParamGather ? ", parameter gathers overlapped with forward"
                            : "")
     << (overlapTensorParallel ? ", tensor-parallel communication "
                                 "overlapped with its linear layers"
                               : "")
     << (regatherInputs ? ", received linear-layer inputs gathered again "
                          "in backward"
                        : "")
     << (fp32Gradients ? ", float32 gradients" : "") << "\n";
  os << "  cost model: ";
  if (profile)
    os << llvm::formatv("profile '{0}' ({1} kernels measured, {2} from the "
                        "roofline model x {3:f2}, the measured kernels' "
                        "median ratio to it)\n",
                        profilePath, profile->hits.load(),
                        profile->misses.load(), profile->missScale(""));
  else
    os << "roofline\n";
}

void SimulatePass::writeTime(func::FuncOp func, const sim::Graph &graph,
                             const Machine &machine, double iterationTime,
                             raw_ostream &os) {
  os << llvm::formatv("  iteration time: {0:f3} ms\n", toMs(iterationTime));
  if (iterationTime <= 0)
    return;
  if (std::optional<int64_t> batch = getBatchSize(func))
    os << llvm::formatv("  throughput: {0:f1} samples/s (batch {1})\n",
                        *batch / iterationTime, *batch);
  double flops = sim::modelFlops(graph);
  os << llvm::formatv("  model FLOPs: {0:e3} per iteration (forward and "
                      "backward, recomputation not counted)\n",
                      flops);
  os << llvm::formatv("  model TFLOP/s per device: {0:f1}\n",
                      flops / iterationTime /
                          static_cast<double>(machine.numDevices()) / 1e12);
  os << llvm::formatv(
      "  MFU: {0:f1}% (the graph's FLOPs at device 0's peak rates over "
      "the time and {1} devices)\n",
      100 * sim::peakComputeSeconds(graph, machine.getSpec(0)) /
          (iterationTime * static_cast<double>(machine.numDevices())),
      machine.numDevices());
}

void SimulatePass::writeDeviceTable(
    const std::vector<sim::DeviceStats> &devices, raw_ostream &os) {
  os << "\n  devices:\n";
  os << llvm::formatv("  {0,6} {1,11} {2,11} {3,11}  {4,11} {5,11} {6,11} "
                      "{7,11} {8,11} {9,11} {10,11}\n",
                      "device", "compute ms", "comm ms", "idle ms", "weights",
                      "gradients", "optimizer", "activations", "workspace",
                      "total", "capacity");
  for (auto [index, device] : llvm::enumerate(devices)) {
    const sim::MemoryUse &memory = device.memory;
    os << llvm::formatv(
        "  {0,6} {1,11:f3} {2,11:f3} {3,11:f3}  {4,11} {5,11} "
        "{6,11} {7,11} {8,11} {9,11} {10,11}",
        index, toMs(device.computeTime), toMs(device.commTime),
        toMs(device.idleTime), formatBytes(memory.weights),
        formatBytes(memory.gradients), formatBytes(memory.optimizerState),
        formatBytes(memory.activations), formatBytes(memory.workspace),
        formatBytes(memory.total()), formatBytes(device.capacity));
    if (memory.total() > device.capacity)
      os << "  OOM";
    os << "\n";
  }
}

void SimulatePass::writePipelineReport(
    func::FuncOp func, const Machine &machine, const sim::Graph &graph,
    int64_t numAssigned, const sim::Pipeline &pipeline,
    const sim::PipelineResult &result, raw_ostream &os) {
  writeHeader(func, machine, graph, numAssigned, os);
  writeTime(func, graph, machine, result.iterationTime, os);
  os << llvm::formatv("  pipeline: {0} stages x {1} micro-batches, schedule "
                      "{2}, bubble {3:f1}%\n",
                      pipeline.numStages(), pipeline.microbatches,
                      pipelineScheduleInfo(pipeline.schedule).name,
                      100 * result.bubbleFraction);
  if (result.outOfMemory)
    os << "  warning: out of memory (OOM below)\n";
  os << "\n  stages (per micro-batch: forward, backward, send):\n";
  os << llvm::formatv("  {0,5} {1,12} {2,6} {3,10} {4,10} {5,10} {6,10} "
                      "{7,9} {8,8} {9,11} {10,11}\n",
                      "stage", "devices", "ops", "fwd ms", "bwd ms", "send ms",
                      "tail ms", "in flight", "bubble", "peak memory",
                      "capacity");
  for (auto [s, stage] : llvm::enumerate(result.stages)) {
    os << llvm::formatv(
        "  {0,5} {1,12} {2,6} {3,10:f3} {4,10:f3} {5,10:f3} {6,10:f3} {7,9} "
        "{8,7:f1}% {9,11} {10,11}",
        s,
        llvm::formatv("{0}..{1}", stage.firstDevice,
                      stage.firstDevice + stage.numDevices - 1)
            .str(),
        stage.numOps, toMs(stage.forward), toMs(stage.backward),
        toMs(stage.send), toMs(stage.tail), stage.inFlight, 100 * stage.bubble,
        formatBytes(stage.peakMemory), formatBytes(stage.capacity));
    if (stage.peakMemory > stage.capacity)
      os << "  OOM";
    os << "\n";
  }
  writeDeviceTable(result.devices, os);
  os << "\n";
}

void SimulatePass::writeOpTables(const sim::Graph &graph,
                                 const sim::Strategy &strategy,
                                 const sim::SimResult &result,
                                 const sim::Simulator &simulator,
                                 raw_ostream &os) {
  os << "\n  bytes moved by link kind:\n";
  bool movedAny = false;
  for (auto [kind, bytes] : llvm::enumerate(result.bytesByLinkKind)) {
    if (bytes <= 0)
      continue;
    movedAny = true;
    os << llvm::formatv("  {0,-16} {1,12}  ({2:e3} B)\n",
                        stringifyLinkKind(static_cast<LinkKind>(kind)),
                        formatBytes(bytes), bytes);
  }
  if (!movedAny)
    os << "  none\n";
  // The resharding between ops, by the collective its pieces make.
  bool exchanged = false;
  for (geometry::ExchangeKind kind : geometry::kExchangeKinds) {
    const sim::SimResult::ExchangeCount &c =
        result.exchanges[static_cast<size_t>(kind)];
    if (c.count == 0)
      continue;
    if (!exchanged)
      os << "\n  exchanges between ops by kind:\n";
    exchanged = true;
    os << llvm::formatv("  {0,-16} {1,6}  {2,12}\n",
                        geometry::exchangeKindName(kind), c.count,
                        formatBytes(c.bytes));
  }

  std::vector<sim::Simulator::OpTimes> times = simulator.opTimes();
  auto total = [&](size_t op) {
    return times[op].forward + times[op].backward + times[op].communication;
  };
  std::vector<size_t> order(times.size());
  std::iota(order.begin(), order.end(), 0);
  // Stable: ties keep program order, so the table is deterministic.
  llvm::stable_sort(order,
                    [&](size_t a, size_t b) { return total(a) > total(b); });
  size_t shown = std::min(order.size(), kTopOps);
  os << llvm::formatv("\n  ops by time (top {0} of {1}):\n", shown,
                      order.size());
  os << llvm::formatv("  {0,-32} {1,-26} {2,-16} {3,10} {4,10} {5,10} "
                      "{6,10}\n",
                      "op", "kind", "degrees", "fwd ms", "bwd ms", "comm ms",
                      "total ms");
  for (size_t op : ArrayRef(order).take_front(shown)) {
    std::string name = graph.ops[op].name;
    if (name.size() > 32)
      name = name.substr(0, 29) + "...";
    os << llvm::formatv("  {0,-32} {1,-26} {2,-16} {3,10:f3} {4,10:f3} "
                        "{5,10:f3} {6,10:f3}\n",
                        name, graph.ops[op].kind, formatDegrees(strategy[op]),
                        toMs(times[op].forward), toMs(times[op].backward),
                        toMs(times[op].communication), toMs(total(op)));
  }
  if (shown < order.size()) {
    double rest = 0;
    for (size_t op : ArrayRef(order).drop_front(shown))
      rest += total(op);
    os << llvm::formatv(
        "  {0,-32} {1,-26} {2,-16} {3,10} {4,10} {5,10} "
        "{6,10:f3}\n",
        llvm::formatv("({0} more ops)", order.size() - shown).str(), "", "", "",
        "", "", toMs(rest));
  }
  os << "\n";
}

} // namespace
