//===- StrategyIO.cpp - strategy files: export and import -----------------===//
//
// The strategy file (docs/strategy-format.md) is how people read, edit and
// reuse a strategy: export writes the module's #ppc.strategy attributes with
// predictions, import sets them from a file — all or nothing, so a bad file
// never leaves a half-applied strategy behind.
//
//===----------------------------------------------------------------------===//

#include "StrategyUtils.h"

#include "ppc/Analysis/SimGraph.h"
#include "ppc/Dialect/Graph/GraphDialect.h"
#include "ppc/Dialect/Topology/MachineConversion.h"
#include "ppc/Search/StrategyJson.h"
#include "ppc/Simulator/CostModel.h"
#include "ppc/Simulator/Simulator.h"
#include "ppc/Transforms/Passes.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

namespace ppc {
#define GEN_PASS_DEF_EXPORTSTRATEGY
#define GEN_PASS_DEF_IMPORTSTRATEGY
#include "ppc/Transforms/Passes.h.inc"
} // namespace ppc

using namespace mlir;
using namespace ppc;

namespace {

struct ExportStrategyPass
    : public ppc::impl::ExportStrategyBase<ExportStrategyPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    markAllAnalysesPreserved();
    if (file.empty()) {
      module.emitError() << "ppc-export-strategy needs file=<path.json>";
      return signalPassFailure();
    }
    std::optional<Machine> machine = topo::lookupMachine(module);
    if (!machine) {
      module.emitError() << "ppc-export-strategy: no machine attached; use "
                            "--ppc-attach-machine=machine=NAME";
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> funcs =
        transforms_detail::getFunctionsToSplit(module);
    for (func::FuncOp func : funcs)
      if (failed(exportFunction(
              func, *machine,
              transforms_detail::pathForFunction(file, func, funcs.size()))))
        return signalPassFailure();
  }

  LogicalResult exportFunction(func::FuncOp func, const Machine &machine,
                               StringRef path) {
    FailureOr<sim::Graph> graph = buildSimGraph(func);
    if (failed(graph))
      return failure();
    // Ops without a strategy are written as what they run as elsewhere
    // (ppc-simulate's default), so the file always covers every op.
    FailureOr<sim::Strategy> strategy = readStrategy(
        func, *graph, UnassignedPolicy::DataParallel, machine.numDevices());
    if (failed(strategy))
      return failure();
    FailureOr<sim::Pipeline> pipeline = readPipeline(func);
    if (failed(pipeline))
      return failure();
    if (absl::Status problem = sim::checkPipeline(*graph, *strategy, *pipeline,
                                                  machine.numDevices());
        !problem.ok())
      return func.emitError()
             << "ppc-export-strategy: " << ppc::messageOf(problem);

    std::optional<sim::SimResult> result;
    std::vector<sim::Simulator::OpTimes> times;
    // Per-op predictions are for strategies without a pipeline.
    if (predict && !pipeline->enabled()) {
      sim::RooflineCostModel costModel;
      sim::SimOptions options;
      options.optimizer = optimizer;
      sim::Simulator simulator(*graph, machine, costModel, options);
      for (auto [index, op] : llvm::enumerate(getSimulatedOps(func))) {
        absl::Status problem = simulator.checkConfig(index, (*strategy)[index]);
        if (!problem.ok())
          return op->emitError()
                 << "ppc-export-strategy: invalid configuration for op '"
                 << graph->ops[index].name << "': " << ppc::messageOf(problem);
      }
      result = simulator.simulate(*strategy);
      times = simulator.opTimes();
    }

    std::string error;
    std::unique_ptr<llvm::ToolOutputFile> output = openOutputFile(path, &error);
    if (!output)
      return emitError(func.getLoc())
             << "ppc-export-strategy: cannot open '" << path << "': " << error;
    output->os() << search::writeStrategyJson(
        *graph, machine, *strategy, result ? &times : nullptr,
        result ? &*result : nullptr, *pipeline);
    output->keep();
    return success();
  }
};

struct ImportStrategyPass
    : public ppc::impl::ImportStrategyBase<ImportStrategyPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (file.empty()) {
      module.emitError() << "ppc-import-strategy needs file=<path.json>";
      return signalPassFailure();
    }
    std::optional<Machine> machine = topo::lookupMachine(module);
    if (!machine) {
      module.emitError() << "ppc-import-strategy: no machine attached; use "
                            "--ppc-attach-machine=machine=NAME";
      return signalPassFailure();
    }

    // Read and check every function's file before setting any strategy (a
    // model reordered for one is discarded with it if another fails).
    SmallVector<func::FuncOp> funcs =
        transforms_detail::getFunctionsToSplit(module);
    SmallVector<sim::Strategy> strategies;
    SmallVector<sim::Pipeline> pipelines;
    for (func::FuncOp func : funcs) {
      std::string path =
          transforms_detail::pathForFunction(file, func, funcs.size());
      std::string error;
      std::unique_ptr<llvm::MemoryBuffer> buffer = openInputFile(path, &error);
      if (!buffer) {
        emitError(func.getLoc())
            << "ppc-import-strategy: cannot read '" << path << "': " << error;
        return signalPassFailure();
      }
      // A strategy written for the sequence in zigzag order names that
      // order's gathers: a model in natural order is reordered first.
      absl::StatusOr<int64_t> pairs =
          search::readStrategyZigzagPairs(buffer->getBuffer().str(), path);
      if (!pairs.ok()) {
        emitError(func.getLoc())
            << "ppc-import-strategy: " << ppc::messageOf(pairs.status());
        return signalPassFailure();
      }
      if (*pairs > 0 && failed(transforms_detail::orderInZigzag(func, *pairs)))
        return signalPassFailure();
      FailureOr<sim::Graph> graph = buildSimGraph(func);
      if (failed(graph))
        return signalPassFailure();
      sim::Pipeline pipeline;
      absl::StatusOr<sim::Strategy> strategy = search::readStrategyJson(
          buffer->getBuffer().str(), path, *graph, *machine, &pipeline);
      if (!strategy.ok()) {
        emitError(func.getLoc())
            << "ppc-import-strategy: " << ppc::messageOf(strategy.status());
        return signalPassFailure();
      }
      warnIneffectiveSharding(func, *graph, *strategy);
      strategies.push_back(std::move(*strategy));
      pipelines.push_back(std::move(pipeline));
    }
    for (auto [func, strategy, pipeline] :
         llvm::zip_equal(funcs, strategies, pipelines)) {
      transforms_detail::applyStrategy(func, strategy);
      transforms_detail::applyPipeline(func, pipeline);
    }
  }
};

} // namespace
