//===- PartitionedFunction.cpp - a function with its op layouts -----------===//

#include "PartitionedFunction.h"

#include "ppc/Dialect/Graph/GraphOps.h"
#include "ppc/Dialect/Topology/MachineConversion.h"

using namespace mlir;

namespace ppc::conversion {

std::optional<std::pair<int64_t, unsigned>>
PartitionedFunction::producerOf(Value value) {
  value = graph::stripParallelOps(value);
  Operation *def = value.getDefiningOp();
  if (!def)
    return std::nullopt;
  auto it = indexOf.find(def);
  if (it == indexOf.end())
    return std::nullopt;
  return std::make_pair(it->second, cast<OpResult>(value).getResultNumber());
}

FailureOr<PartitionedFunction> analyzePartitions(func::FuncOp func,
                                                 UnassignedPolicy policy) {
  PartitionedFunction result;
  FailureOr<sim::Graph> graph = buildSimGraph(func);
  if (failed(graph))
    return failure();
  result.graph = std::move(*graph);
  std::optional<Machine> machine = topo::lookupMachine(func);
  result.machine = machine;
  if (machine) {
    result.numDevices = machine->numDevices();
    result.machineName = machine->name.empty()
                             ? std::to_string(machine->numDevices()) + " x " +
                                   machine->getSpec(0).name
                             : machine->name;
  } else if (policy == UnassignedPolicy::DataParallel) {
    return func.emitError("data parallel for ops without a strategy needs a "
                          "machine: run --ppc-attach-machine first");
  }
  FailureOr<sim::Strategy> strategy =
      readStrategy(func, result.graph, policy, result.numDevices);
  if (failed(strategy))
    return failure();
  result.strategy = std::move(*strategy);
  result.ops = getSimulatedOps(func);

  if (!machine) {
    int64_t last = 0;
    for (const OpConfig &config : result.strategy)
      for (int64_t device : config.devices())
        last = std::max(last, device);
    result.numDevices = last + 1;
    result.machineName = "devices:" + std::to_string(result.numDevices);
  }
  for (auto [index, op] : llvm::enumerate(result.ops)) {
    const sim::Op &simOp = result.graph.ops[index];
    const OpConfig &config = result.strategy[index];
    absl::Status problem = checkConfig(simOp.space, config, result.numDevices);
    if (!problem.ok())
      return op->emitError() << "cannot partition '" << simOp.name
                             << "': " << ppc::messageOf(problem);
    result.indexOf[op] = index;
    result.layouts.push_back(geometry::computeLayout(simOp.space, config));
  }
  FailureOr<sim::Pipeline> pipeline = readPipeline(func);
  if (failed(pipeline))
    return failure();
  // Whether batch statistics forbid micro-batches depends on whether the
  // function trains: the plan emitter asks, at the op, once it knows.
  if (absl::Status problem =
          sim::checkPipeline(result.graph, result.strategy, *pipeline,
                             result.numDevices, /*training=*/false);
      !problem.ok())
    return func.emitError() << "cannot partition @" << func.getSymName() << ": "
                            << ppc::messageOf(problem);
  result.pipeline = *pipeline;
  if (pipeline->enabled())
    for (int64_t j = 0; j < pipeline->microbatches; ++j) {
      std::vector<geometry::OpLayout> &layouts =
          result.microLayouts.emplace_back();
      for (auto [index, simOp] : llvm::enumerate(result.graph.ops))
        layouts.push_back(geometry::computeLayout(
            simOp.space, result.strategy[index], {pipeline->microbatches, j}));
    }
  return result;
}

} // namespace ppc::conversion
