//===- SimGraph.cpp - a ppc function as the simulator's Graph -------------===//

#include "ppc/Analysis/SimGraph.h"

#include "ppc/Dialect/Graph/GraphOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace ppc;
using namespace ppc::graph;

namespace {

/// The rate class of an element type. Integer ops (index arithmetic, casts
/// of labels) have no rate of their own in the machine model: they are
/// charged at the f32 rate.
DType getDType(Type elementType) {
  return TypeSwitch<Type, DType>(elementType)
      .Case<Float64Type>([](auto) { return DType::F64; })
      .Case<Float16Type>([](auto) { return DType::F16; })
      .Case<BFloat16Type>([](auto) { return DType::BF16; })
      .Default([](auto) { return DType::F32; });
}

/// Bytes per element; sub-byte types (i1) still take a byte.
int64_t getElemBytes(Type elementType) {
  if (!elementType.isIntOrFloat())
    return 4;
  return std::max<int64_t>(1, (elementType.getIntOrFloatBitWidth() + 7) / 8);
}

Type getElementType(Value value) {
  return cast<ShapedType>(value.getType()).getElementType();
}

/// The op's name in the model: its NameLoc (the importer names every op
/// after its ONNX node), looked for through fused and call-site locations.
std::string getOpName(Operation *op, size_t index) {
  if (auto attr = op->getAttrOfType<StringAttr>(PPCDialect::getNameAttrName()))
    return attr.getValue().str();
  std::string name;
  op->getLoc()->walk([&](Location loc) {
    if (auto nameLoc = dyn_cast<NameLoc>(loc)) {
      name = nameLoc.getName().str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (name.empty())
    name = (op->getName().getStringRef() + "#" + Twine(index)).str();
  return name;
}

bool isSimulated(Operation *op) {
  return isa<ParallelizableOpInterface>(op) &&
         isa<PPCDialect>(op->getDialect());
}

} // namespace

SmallVector<Operation *> ppc::getSimulatedOps(func::FuncOp func) {
  SmallVector<Operation *> ops;
  for (Block &block : func.getBody())
    for (Operation &op : block)
      if (isSimulated(&op))
        ops.push_back(&op);
  return ops;
}

FailureOr<sim::Graph> ppc::buildSimGraph(func::FuncOp func) {
  if (func.isExternal())
    return func.emitError()
           << "cannot simulate @" << func.getSymName() << ": it has no body";
  // Ops run in program order; branches would need a schedule the simulator
  // does not model.
  if (!func.getBody().hasOneBlock())
    return func.emitError() << "cannot simulate @" << func.getSymName()
                            << ": its body has several blocks";

  sim::Graph graph;
  graph.numInputs = func.getNumArguments();
  DenseMap<Value, sim::Source> sources;
  for (BlockArgument arg : func.getArguments())
    sources[arg] = {sim::Source::Kind::Input,
                    static_cast<int32_t>(arg.getArgNumber()), 0};

  for (Operation &op : func.getBody().front()) {
    if (auto weight = dyn_cast<WeightOp>(op)) {
      auto type = cast<RankedTensorType>(weight.getType());
      sim::Weight simWeight;
      simWeight.name = weight.getName().str();
      simWeight.shape.assign(type.getShape().begin(), type.getShape().end());
      simWeight.elemBytes = getElemBytes(type.getElementType());
      simWeight.trainable = !weight.getFrozen();
      sources[weight.getResult()] = {sim::Source::Kind::Weight,
                                     static_cast<int32_t>(graph.weights.size()),
                                     0};
      graph.weights.push_back(std::move(simWeight));
      continue;
    }
    if (auto constant = dyn_cast<graph::ConstantOp>(op)) {
      sources[constant.getResult()] = {sim::Source::Kind::Constant, 0, 0};
      continue;
    }
    if (isa<func::ReturnOp>(op))
      continue;
    // Parallel ops move data between the ops they connect; the simulator
    // costs that movement on the edge itself.
    if (isParallelOp(&op)) {
      // Copied out first: inserting may grow the map and move `it`.
      auto it = sources.find(op.getOperand(0));
      if (it != sources.end()) {
        sim::Source source = it->second;
        sources[op.getResult(0)] = source;
      }
      continue;
    }
    auto parallelizable = dyn_cast<ParallelizableOpInterface>(op);
    if (!parallelizable || !isSimulated(&op))
      return op.emitError() << "cannot simulate '" << op.getName()
                            << "': only ppc graph ops, weights and constants "
                               "can be costed";

    size_t index = graph.ops.size();
    sim::Op simOp;
    simOp.name = getOpName(&op, index);
    simOp.kind = op.getName().getStringRef().str();
    simOp.space = parallelizable.getIterationSpace();
    simOp.cost = parallelizable.getCost();
    if (op.getNumResults() > 0) {
      Type elementType = getElementType(op.getResult(0));
      simOp.dtype = getDType(elementType);
      simOp.elemBytes = getElemBytes(elementType);
      simOp.differentiable = isa<FloatType>(elementType);
    }
    if (simOp.space.operands.size() != op.getNumOperands())
      return op.emitError()
             << "cannot simulate '" << op.getName() << "': its iteration space "
             << "describes " << simOp.space.operands.size()
             << " operands, the op has " << op.getNumOperands();
    for (OpOperand &operand : op.getOpOperands()) {
      auto it = sources.find(operand.get());
      if (it == sources.end())
        return op.emitError()
               << "cannot simulate '" << op.getName() << "': operand #"
               << operand.getOperandNumber()
               << " is not a function argument, ppc.weight, ppc.constant or "
                  "the result of a graph op of the same function body";
      simOp.operands.push_back(it->second);
    }
    for (OpResult result : op.getResults())
      sources[result] = {sim::Source::Kind::Op, static_cast<int32_t>(index),
                         static_cast<int32_t>(result.getResultNumber())};
    graph.ops.push_back(std::move(simOp));
  }

  absl::Status problem = graph.validate();
  if (!problem.ok())
    return func.emitError() << "cannot simulate @" << func.getSymName() << ": "
                            << ppc::messageOf(problem);

  // The batch is dim 0 of each input unless the argument says otherwise
  // (`ppc.batch_dim`, -1 for an input without one).
  std::vector<int> inputBatchDims;
  for (BlockArgument arg : func.getArguments()) {
    int dim = 0;
    auto shaped = dyn_cast<ShapedType>(arg.getType());
    int64_t rank = shaped && shaped.hasRank() ? shaped.getRank() : 0;
    if (auto attr = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                       "ppc.batch_dim")) {
      dim = static_cast<int>(attr.getInt());
      if (dim < -1 || dim >= rank)
        return func.emitError()
               << "argument #" << arg.getArgNumber() << " has ppc.batch_dim "
               << attr.getInt() << " but rank " << rank;
    }
    inputBatchDims.push_back(rank == 0 ? -1 : dim);
  }
  sim::followBatch(graph, inputBatchDims);
  return graph;
}

FailureOr<sim::Strategy> ppc::readStrategy(func::FuncOp func,
                                           const sim::Graph &graph,
                                           UnassignedPolicy policy,
                                           int64_t numDevices) {
  SmallVector<Operation *> ops = getSimulatedOps(func);
  if (ops.size() != graph.ops.size())
    return func.emitError() << "the simulator graph of @" << func.getSymName()
                            << " has " << graph.ops.size() << " ops but the "
                            << "function " << ops.size()
                            << "; was it built from another function?";

  // Built only if some op needs it.
  std::optional<sim::Strategy> fallback;
  sim::Strategy strategy;
  strategy.reserve(ops.size());
  for (auto [index, op] : llvm::enumerate(ops)) {
    if (Attribute attr = op->getAttr(PPCDialect::getStrategyAttrName())) {
      auto strategyAttr = dyn_cast<StrategyAttr>(attr);
      if (!strategyAttr)
        return op->emitError() << "'" << PPCDialect::getStrategyAttrName()
                               << "' must be a #ppc.strategy attribute";
      strategy.push_back(strategyAttr.getConfig());
      continue;
    }
    if (!fallback)
      fallback = policy == UnassignedPolicy::DataParallel
                     ? sim::dataParallel(graph, numDevices)
                     : sim::singleDevice(graph);
    strategy.push_back((*fallback)[index]);
  }
  return strategy;
}

void ppc::warnIneffectiveSharding(func::FuncOp func, const sim::Graph &graph,
                                  const sim::Strategy &strategy) {
  SmallVector<Operation *> ops = getSimulatedOps(func);
  for (auto [index, op] : llvm::enumerate(ops)) {
    if (index >= strategy.size() || index >= graph.ops.size() ||
        strategy[index].sharding == StateSharding::None)
      continue;
    const sim::Op &simOp = graph.ops[index];
    if (llvm::none_of(simOp.operands, [](const sim::Source &src) {
          return src.kind == sim::Source::Kind::Weight;
        }))
      op->emitWarning() << "'" << simOp.name << "': zero = "
                        << static_cast<int>(strategy[index].sharding)
                        << " shards the state of an op's weights, and this "
                           "op has none: the stage changes nothing";
  }
}

FailureOr<sim::Pipeline> ppc::readPipeline(func::FuncOp func) {
  sim::Pipeline pipeline;
  Attribute attr = func->getAttr(PPCDialect::getPipelineAttrName());
  if (!attr)
    return pipeline;
  auto pipelineAttr = dyn_cast<PipelineAttr>(attr);
  if (!pipelineAttr)
    return func.emitError() << "'" << PPCDialect::getPipelineAttrName()
                            << "' must be a #ppc.pipeline attribute";
  pipeline.microbatches = pipelineAttr.getMicrobatches();
  StringRef schedule = pipelineAttr.getSchedule();
  // The attribute's verifier accepted the name.
  pipeline.schedule =
      findPipelineSchedule(std::string_view(schedule.data(), schedule.size()))
          ->kind;
  pipeline.firstDevice = pipelineAttr.getFirstDevices().vec();
  pipeline.numDevices = pipelineAttr.getDevices().vec();
  return pipeline;
}
