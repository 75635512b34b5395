//===- GraphDialect.cpp - ppc graph dialect -------------------------------===//

#include "ppc/Dialect/Graph/GraphDialect.h"
#include "ppc/Dialect/Graph/GraphOps.h"
#include "ppc/Dialect/Topology/TopologyDialect.h"
#include "ppc/Support/PipelineSchedule.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace ppc::graph;

#include "ppc/Dialect/Graph/GraphDialect.cpp.inc"
#include "ppc/Dialect/Graph/GraphEnums.cpp.inc"
#include "ppc/Dialect/Graph/ParallelizableOpInterface.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "ppc/Dialect/Graph/GraphAttrs.cpp.inc"

void PPCDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "ppc/Dialect/Graph/GraphOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "ppc/Dialect/Graph/GraphAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// StrategyAttr
//===----------------------------------------------------------------------===//

LogicalResult StrategyAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   ArrayRef<int64_t> degrees, int64_t start,
                                   ArrayRef<int64_t> strides, int64_t replicas,
                                   bool recompute, int64_t zero,
                                   int64_t scatter, int64_t stage, bool) {
  for (auto [i, d] : llvm::enumerate(degrees))
    if (d < 1)
      return emitError() << "degree " << i << " is " << d
                         << "; degrees must be >= 1";
  if (start < 0)
    return emitError() << "start device " << start << " is negative";
  if (replicas < 1)
    return emitError() << "replicas is " << replicas << "; it must be >= 1";
  if (zero < 0 || zero > ppc::kMaxStateSharding)
    return emitError() << "zero = " << zero << " is not a ZeRO stage (0 to "
                       << ppc::kMaxStateSharding << ")";
  if (scatter < -1)
    return emitError() << "scatter = " << scatter
                       << " is not a result dim (-1 for all-reduced sums)";
  if (stage < 0)
    return emitError() << "stage " << stage << " is negative";
  int64_t partitioned =
      llvm::count_if(degrees, [](int64_t d) { return d > 1; }) + (replicas > 1);
  if (!strides.empty() && static_cast<int64_t>(strides.size()) != partitioned)
    return emitError() << "expected " << partitioned
                       << " strides (one per dim with degree > 1, and one for "
                          "the replicas when replicas > 1), got "
                       << strides.size();
  for (int64_t s : strides)
    if (s < 1)
      return emitError() << "stride " << s << " must be >= 1";
  return success();
}

//===----------------------------------------------------------------------===//
// PipelineAttr
//===----------------------------------------------------------------------===//

LogicalResult PipelineAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   int64_t microbatches, StringRef schedule,
                                   ArrayRef<int64_t> firstDevices,
                                   ArrayRef<int64_t> devices) {
  const ppc::PipelineScheduleInfo *info = ppc::findPipelineSchedule(
      std::string_view(schedule.data(), schedule.size()));
  if (!info)
    return emitError() << "unknown schedule '" << schedule << "': expected "
                       << ppc::pipelineScheduleNames();
  absl::Status problem =
      ppc::checkPipelineShape(microbatches, info->kind, firstDevices.vec(),
                              devices.vec(), std::nullopt);
  if (!problem.ok())
    return emitError() << ppc::messageOf(problem);
  return success();
}

ppc::OpConfig StrategyAttr::getConfig() const {
  ppc::OpConfig config{getDegrees().vec(), getStart(), getStrides().vec()};
  config.replicas = getReplicas();
  config.recompute = getRecompute();
  config.sharding = static_cast<ppc::StateSharding>(getZero());
  config.scatterDim = getScatter();
  config.stage = getStage();
  config.ring = getRing();
  return config;
}

StrategyAttr StrategyAttr::get(MLIRContext *context,
                               const ppc::OpConfig &config) {
  return get(context, config.degrees, config.start, config.strides,
             config.replicas, config.recompute,
             static_cast<int64_t>(config.sharding), config.scatterDim,
             config.stage, config.ring);
}

int64_t StrategyAttr::getNumPartitions() const {
  return getConfig().numPartitions();
}

SmallVector<int64_t> StrategyAttr::getDevices() const {
  std::vector<int64_t> devices = getConfig().devices();
  return SmallVector<int64_t>(devices.begin(), devices.end());
}

//===----------------------------------------------------------------------===//
// Strategy verification against the op and the machine
//===----------------------------------------------------------------------===//

LogicalResult PPCDialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attr) {
  // The module's target machine is described by the topo dialect.
  if (attr.getName() == ppc::topo::kMachineAttrName)
    return ppc::topo::verifyMachineAttribute(op, attr.getValue());
  if (attr.getName() == getSourceModelAttrName()) {
    if (!isa<ModuleOp>(op) || !isa<StringAttr>(attr.getValue()))
      return op->emitError() << "'" << getSourceModelAttrName()
                             << "' must be a string on a module";
    return success();
  }
  if (attr.getName() == getStackedWeightsAttrName()) {
    auto stacks = dyn_cast<DictionaryAttr>(attr.getValue());
    bool wellFormed = stacks && isa<ModuleOp>(op);
    for (NamedAttribute stack :
         stacks ? stacks.getValue() : ArrayRef<NamedAttribute>{}) {
      auto parts = dyn_cast<ArrayAttr>(stack.getValue());
      wellFormed &=
          parts && !parts.empty() && llvm::all_of(parts, [](Attribute part) {
            return isa<StringAttr>(part);
          });
    }
    if (!wellFormed)
      return op->emitError()
             << "'" << getStackedWeightsAttrName()
             << "' must be a dictionary of non-empty arrays of strings on a "
                "module";
    return success();
  }
  if (attr.getName() == getNameAttrName()) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitError()
             << "'" << getNameAttrName() << "' must be a string";
    return success();
  }
  if (attr.getName() == getSequenceOrderAttrName()) {
    if (!isa<UnitAttr>(attr.getValue()) || !isa<GatherOp>(op))
      return op->emitError() << "'" << getSequenceOrderAttrName()
                             << "' must be a unit attribute on a ppc.gather";
    return success();
  }
  if (attr.getName() == getPipelineAttrName()) {
    auto pipeline = dyn_cast<PipelineAttr>(attr.getValue());
    if (!pipeline || !isa<func::FuncOp>(op))
      return op->emitError() << "'" << getPipelineAttrName()
                             << "' must be a #ppc.pipeline attribute on a "
                                "function";
    StringRef name = pipeline.getSchedule();
    const ppc::PipelineScheduleInfo *info = ppc::findPipelineSchedule(
        std::string_view(name.data(), name.size()));
    absl::Status problem = ppc::checkPipelineShape(
        pipeline.getMicrobatches(),
        info ? info->kind : ppc::PipelineSchedule::OneFOneB,
        pipeline.getFirstDevices().vec(), pipeline.getDevices().vec(),
        ppc::topo::lookupMachineDeviceCount(op));
    if (!problem.ok())
      return op->emitError() << "#ppc.pipeline: " << ppc::messageOf(problem);
    return success();
  }
  if (attr.getName() != getStrategyAttrName())
    return op->emitError() << "unknown ppc dialect attribute '"
                           << attr.getName().getValue() << "'";
  auto strategy = dyn_cast<StrategyAttr>(attr.getValue());
  if (!strategy)
    return op->emitError() << "'" << getStrategyAttrName()
                           << "' must be a #ppc.strategy attribute";
  auto parallelizable = dyn_cast<ParallelizableOpInterface>(op);
  if (!parallelizable)
    return op->emitError() << "'" << getStrategyAttrName()
                           << "' on an op that is not parallelizable";
  // Discardable attributes are verified before the op itself, and only a
  // valid op can describe its iteration space: check the op first.
  if (failed(op->getName().getRegisteredInfo()->verifyInvariants(op)))
    return failure();

  absl::Status problem =
      ppc::checkConfig(parallelizable.getIterationSpace(), strategy.getConfig(),
                       ppc::topo::lookupMachineDeviceCount(op));
  if (!problem.ok())
    return op->emitError() << ppc::messageOf(problem);
  return success();
}
