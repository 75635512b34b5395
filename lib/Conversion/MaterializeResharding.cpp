//===- MaterializeResharding.cpp - explicit parallel ops on edges ---------===//
//
// Makes every piece of communication of a partitioned graph an op: a
// ppc.reduce after a producer that leaves partial sums, and a repartition,
// combine or replicate in front of each consumer operand whose partitions
// do not line up with the producer's, each stamped with the kind of
// exchange the communication plan makes of it (`as all_gather`, ...,
// geometry::classifyExchange). PartitionToPlan lowers exactly these.
//
//===----------------------------------------------------------------------===//

#include "PartitionedFunction.h"

#include "ppc/Conversion/Passes.h"
#include "ppc/Dialect/Graph/GraphDialect.h"
#include "ppc/Dialect/Graph/GraphOps.h"
#include "ppc/Support/Exchange.h"

#include "mlir/IR/Builders.h"

#include <map>

using namespace mlir;
using namespace ppc::graph;

namespace ppc {
#define GEN_PASS_DEF_MATERIALIZERESHARDING
#include "ppc/Conversion/Passes.h.inc"

namespace {

using geometry::Box;
using geometry::Piece;

StrategyAttr getStrategyAttr(MLIRContext *context, const OpConfig &config) {
  return StrategyAttr::get(context, config);
}

/// Which parallel op moves `producer` pieces to `consumer` pieces (that do
/// not line up): replicate when some piece is wanted on more devices than
/// hold it, combine when the consumer wants fewer distinct pieces, else
/// repartition.
enum class Movement { Repartition, Combine, Replicate };

Movement classify(const std::vector<Piece> &producer,
                  const std::vector<Piece> &consumer) {
  auto copiesPerBox = [](const std::vector<Piece> &pieces) {
    std::map<std::vector<std::pair<int64_t, int64_t>>, int64_t> counts;
    for (const Piece &piece : pieces) {
      std::vector<std::pair<int64_t, int64_t>> key;
      for (const Range &r : piece.box)
        key.emplace_back(r.lo, r.hi);
      ++counts[key];
    }
    return counts;
  };
  auto produced = copiesPerBox(producer), wanted = copiesPerBox(consumer);
  for (const auto &[box, copies] : wanted)
    if (copies > 1 && copies > produced[box])
      return Movement::Replicate;
  if (wanted.size() < produced.size())
    return Movement::Combine;
  return Movement::Repartition;
}

Value createMovement(OpBuilder &builder, Location loc, Movement movement,
                     Value input, StrategyAttr from, StrategyAttr to,
                     StringAttr exchange) {
  switch (movement) {
  case Movement::Replicate:
    return ReplicateOp::create(builder, loc, input.getType(), input, from, to,
                               exchange);
  case Movement::Combine:
    return CombineOp::create(builder, loc, input.getType(), input, from, to,
                             exchange);
  case Movement::Repartition:
    break;
  }
  return RepartitionOp::create(builder, loc, input.getType(), input, from, to,
                               exchange);
}

/// The kind of exchange the communication plan makes of moving `produced`
/// pieces to `wanted` ones (geometry::classifyExchange).
StringAttr exchangeOf(MLIRContext *context, const std::vector<Piece> &produced,
                      const std::vector<Piece> &wanted,
                      const std::optional<Machine> &machine) {
  auto bandwidth = [&](int64_t from, int64_t to) {
    return machine ? machine->effectiveLink(from, to).bandwidth : 1.0;
  };
  geometry::ExchangeKind kind =
      geometry::classifyExchange(
          geometry::forwardMoves(produced, wanted, bandwidth),
          /*summed=*/false)
          .kind;
  return StringAttr::get(context, geometry::exchangeKindName(kind));
}

struct MaterializeReshardingPass
    : impl::MaterializeReshardingBase<MaterializeReshardingPass> {
  using MaterializeReshardingBase::MaterializeReshardingBase;

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal() || getSimulatedOps(func).empty())
        continue;
      if (failed(materialize(func)))
        return signalPassFailure();
    }
  }

  LogicalResult materialize(func::FuncOp func) {
    FailureOr<conversion::PartitionedFunction> parts =
        conversion::analyzePartitions(func, unassigned);
    if (failed(parts))
      return failure();
    MLIRContext *context = func.getContext();
    OpBuilder builder(context);

    for (auto [index, op] : llvm::enumerate(parts->ops)) {
      const geometry::OpLayout &layout = parts->layouts[index];
      StrategyAttr from = getStrategyAttr(context, parts->strategy[index]);
      for (OpResult result : op->getResults()) {
        unsigned r = result.getResultNumber();
        Value value = result;
        // Partial sums are summed once, right after the producer; every
        // consumer reads the sums.
        if (layout.partial[r]) {
          PartialReduceOp existing;
          if (result.hasOneUse())
            existing = dyn_cast<PartialReduceOp>(*result.getUsers().begin());
          if (!existing) {
            builder.setInsertionPointAfter(op);
            geometry::ExchangeKind sum =
                layout.scattered[r] ? geometry::ExchangeKind::ReduceScatter
                                    : geometry::ExchangeKind::AllReduce;
            existing = PartialReduceOp::create(
                builder, op->getLoc(), result.getType(), result, from, from,
                builder.getStringAttr(geometry::exchangeKindName(sum)));
            result.replaceAllUsesExcept(existing.getResult(), existing);
          }
          value = existing.getResult();
        }
        std::vector<Piece> produced = layout.resultPieces(r);
        for (OpOperand &use : llvm::make_early_inc_range(value.getUses())) {
          Operation *user = use.getOwner();
          if (isParallelOp(user))
            continue; // already materialized
          std::vector<Piece> wanted;
          StrategyAttr to;
          if (isa<func::ReturnOp>(user)) {
            // Results are gathered whole on device 0.
            auto type = cast<RankedTensorType>(value.getType());
            wanted.push_back(
                {0, geometry::wholeBox(std::vector<int64_t>(
                        type.getShape().begin(), type.getShape().end()))});
          } else {
            auto it = parts->indexOf.find(user);
            if (it == parts->indexOf.end())
              continue;
            wanted = parts->layouts[it->second].operandPieces(
                use.getOperandNumber());
            to = getStrategyAttr(context, parts->strategy[it->second]);
          }
          if (geometry::linesUp(produced, wanted))
            continue;
          builder.setInsertionPoint(user);
          Value moved = createMovement(
              builder, user->getLoc(), classify(produced, wanted), value, from,
              to, exchangeOf(context, produced, wanted, parts->machine));
          use.set(moved);
        }
      }
    }
    return success();
  }
};

} // namespace
} // namespace ppc
