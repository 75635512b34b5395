//===- PartitionToPlan.cpp - per-rank programs of a partitioned graph -----===//
//
// Lowers a function of graph ops with their strategies (and the parallel ops
// of --ppc-materialize-resharding) to a plan.plan: the global tensors and
// ops, and one program per rank. Every partition of every op becomes a kernel
// on buffers holding exactly the boxes its iteration ranges touch; the
// parallel ops become copies and send/recv pairs of the pieces
// geometry::SourceChooser picks, one all-gather or all-to-all per group
// where the op's `exchange` says so and one collective can move it, and
// all-reduces or reduce-scatters of partial sums; the backward
// pass sends each gradient along geometry::gradientRoutes (to every copy of
// an activation, to one instance of each group synchronizing a weight, from
// one replica of each consumer partition) or sums it with the all-reduce of
// geometry::allReducedGradientGroups, accumulating at the producer; the
// instances holding a weight piece in one replica all-reduce its gradient;
// each rank updates the weight pieces it holds. Replicas of an op
// (OpConfig::replicas) run the same kernels on their own buffers. A weight used
// by several ops lives in the layout of its holding use (sim::weightHolders);
// the other uses gather their pieces from it and send their gradients back.
//
// Instructions are emitted in one global order and each rank's program is
// its subsequence, so with non-blocking sends the programs cannot deadlock:
// every recv and collective waits only for instructions earlier in that order.
//
//===----------------------------------------------------------------------===//

#include "PlanEmitter.h"
#include "PlanTraffic.h"

#include "ppc/Runtime/PlanIO.h"
#include "ppc/Search/StrategyJson.h"

using namespace mlir;

namespace ppc {
#define GEN_PASS_DEF_PARTITIONTOPLAN
#include "ppc/Conversion/Passes.h.inc"

namespace conversion {

FailureOr<plan::PlanOp> PlanEmitter::emit(OpBuilder &top) {
  // A function returning the scalar of a loss op trains; anything else is
  // a forward-only plan.
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  if (ret.getNumOperands() == 1) {
    Value value = stripParallelOps(ret.getOperand(0));
    if (auto op = value.getDefiningOp<ParallelizableOpInterface>();
        op && op.isLoss())
      loss = parts.producerOf(value);
  }
  training = loss.has_value();
  weightHolders = sim::weightHolders(parts.graph);

  int64_t numRanks = parts.numDevices;
  int64_t batch = 1;
  if (func.getNumArguments() > 0 && !shapeOf(func.getArgument(0)).empty())
    batch = shapeOf(func.getArgument(0))[0];
  std::string strategyJson;
  if (parts.machine)
    strategyJson =
        search::writeStrategyJson(parts.graph, *parts.machine, parts.strategy,
                                  nullptr, nullptr, parts.pipeline);

  DictionaryAttr optimizer;
  if (training) {
    const sim::OptimizerInfo *info = sim::findOptimizer(options.optimizer);
    if (!info)
      return func.emitError() << "unknown optimizer '" << options.optimizer
                              << "': expected " << sim::optimizerNames();
    if (!(options.learningRate >= 0) || std::isinf(options.learningRate))
      return func.emitError() << "learning rate " << options.learningRate
                              << " is not a finite number >= 0";
    // 0 asks for the optimizer's conventional rate.
    double lr = options.learningRate > 0 ? options.learningRate
                                         : info->defaultLearningRate;
    NamedAttrList attrs;
    attrs.set("kind", builder.getStringAttr(options.optimizer));
    attrs.set("lr", builder.getF64FloatAttr(lr));
    attrs.set("momentum", builder.getF64FloatAttr(options.momentum));
    attrs.set("beta1", builder.getF64FloatAttr(options.beta1));
    attrs.set("beta2", builder.getF64FloatAttr(options.beta2));
    attrs.set("epsilon", builder.getF64FloatAttr(options.epsilon));
    attrs.set("weight_decay", builder.getF64FloatAttr(options.weightDecay));
    optimizer = attrs.getDictionary(context);
  }
  planOp = plan::PlanOp::create(
      top, func.getLoc(), top.getI64IntegerAttr(runtime::kPlanVersion),
      top.getI64IntegerAttr(numRanks), top.getStringAttr(parts.machineName),
      top.getStringAttr(parts.machineName), top.getStringAttr(strategyJson),
      top.getI64IntegerAttr(batch), optimizer, FlatSymbolRefAttr(),
      top.getF64FloatAttr(sim::modelFlops(parts.graph)));
  Block *body = new Block();
  planOp.getBody().push_back(body);
  builder.setInsertionPointToEnd(body);

  if (failed(emitTensors()) || failed(emitGraphOps()))
    return failure();
  if (loss)
    planOp.setLossAttr(FlatSymbolRefAttr::get(
        context, tensorOf[parts.ops[loss->first]->getResult(loss->second)]));

  for (int64_t rank = 0; rank < numRanks; ++rank) {
    auto program =
        plan::ProgramOp::create(builder, loc, builder.getI64IntegerAttr(rank));
    program.getBody().push_back(new Block());
    programs.push_back(program);
    builders.emplace_back(context);
    builders.back().setInsertionPointToEnd(&program.getBody().front());
  }

  if (failed(planRecomputation()))
    return failure();
  // ZeRO-3 keeps a weight in shards at its holder: other ops cannot read
  // it from there.
  for (size_t k = 0; k < parts.graph.ops.size(); ++k)
    for (auto [i, src] : llvm::enumerate(parts.graph.ops[k].operands)) {
      if (src.kind != sim::Source::Kind::Weight)
        continue;
      const sim::WeightUse &holder = weightHolders[src.index];
      if (holder.op != static_cast<int32_t>(k) &&
          parts.strategy[holder.op].sharding == StateSharding::Parameters)
        return parts.ops[k]->emitError()
               << "weight '" << parts.graph.weights[src.index].name
               << "' is read by other ops too: ZeRO stage 3 of a shared "
                  "weight is not lowered; use zero = 1 or 2 on '"
               << parts.graph.ops[holder.op].name << "'";
    }
  if (failed(emitSchedule()))
    return failure();
  if (training) {
    if (failed(emitGradSyncAndUpdate()))
      return failure();
  }
  // Step-local buffers go at the end of the step; weights and their
  // gradients persist.
  for (const Transient &t : transient)
    if (!freedEarly.contains(t.buffer))
      plan::FreeOp::create(at(t.rank), loc, t.buffer);
  return planOp;
}

} // namespace conversion

namespace {

struct PartitionToPlanPass : impl::PartitionToPlanBase<PartitionToPlanPass> {
  using PartitionToPlanBase::PartitionToPlanBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> funcs;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() && !getSimulatedOps(func).empty())
        funcs.push_back(func);
    if (funcs.size() != 1) {
      module.emitError() << "ppc-partition-to-plan needs exactly one function "
                            "of graph ops, found "
                         << funcs.size();
      return signalPassFailure();
    }
    func::FuncOp func = funcs.front();
    FailureOr<conversion::PartitionedFunction> parts =
        conversion::analyzePartitions(func, unassigned);
    if (failed(parts))
      return signalPassFailure();
    PartitionToPlanOptions options{optimizer,   learningRate, momentum,
                                   beta1,       beta2,        epsilon,
                                   weightDecay, unassigned};
    OpBuilder top(module.getContext());
    top.setInsertionPointToEnd(module.getBody());
    conversion::PlanEmitter emitter(func, *parts, options);
    FailureOr<plan::PlanOp> plan = emitter.emit(top);
    if (failed(plan)) {
      // Leave the module as it was.
      module.walk([](plan::PlanOp op) { op.erase(); });
      return signalPassFailure();
    }
    const sim::OptimizerInfo *info = sim::findOptimizer(optimizer);
    if (info && failed(conversion::reportTraffic(*plan, *parts, info->kind,
                                                 traffic, func.getLoc()))) {
      plan->erase();
      return signalPassFailure();
    }
    // The plan replaces the graph: it holds everything the runtime needs.
    for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
      if (&op != plan->getOperation())
        op.erase();
    module->removeAttr("ppc.machine");
  }
};

} // namespace
} // namespace ppc
