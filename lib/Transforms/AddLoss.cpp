//===- AddLoss.cpp - append a training loss to an inference graph ---------===//
//
// ONNX files are inference graphs; an iteration of training starts from a
// scalar loss. The loss takes the function's first result and a new argument
// (labels or targets), and becomes the function's only result, so the
// simulator and the lowering see forward + loss, then backward from it.
//
//===----------------------------------------------------------------------===//

#include "StrategyUtils.h"

#include "ppc/Dialect/Graph/GraphDialect.h"
#include "ppc/Dialect/Graph/GraphOps.h"
#include "ppc/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/BitVector.h"

namespace ppc {
#define GEN_PASS_DEF_ADDLOSS
#include "ppc/Transforms/Passes.h.inc"
} // namespace ppc

using namespace mlir;
using namespace ppc;

namespace {

enum class LossKind { Auto, SoftmaxCE, MSE, None };

std::optional<LossKind> parseLoss(StringRef name) {
  return llvm::StringSwitch<std::optional<LossKind>>(name)
      .Case("auto", LossKind::Auto)
      .Case("softmax-ce", LossKind::SoftmaxCE)
      .Case("mse", LossKind::MSE)
      .Case("none", LossKind::None)
      .Default(std::nullopt);
}

/// Class logits: [N, C] with more than one class, or [N, S, C] per token.
bool looksLikeLogits(RankedTensorType type) {
  return (type.getRank() == 2 || type.getRank() == 3) &&
         type.getShape().back() > 1;
}

bool hasLoss(func::FuncOp func) {
  return func
      .walk([](Operation *op) {
        auto compute = dyn_cast<graph::ParallelizableOpInterface>(op);
        return compute && compute.isLoss() ? WalkResult::interrupt()
                                           : WalkResult::advance();
      })
      .wasInterrupted();
}

struct AddLossPass : public ppc::impl::AddLossBase<AddLossPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<LossKind> kind = parseLoss(loss);
    if (!kind) {
      module.emitError() << "ppc-add-loss: unknown loss '" << loss
                         << "'; expected auto, softmax-ce, mse or none";
      return signalPassFailure();
    }
    if (*kind == LossKind::None)
      return markAllAnalysesPreserved();
    for (func::FuncOp func : transforms_detail::getFunctionsToSplit(module))
      if (!hasLoss(func) && failed(addLoss(func, *kind)))
        return signalPassFailure();
  }

  LogicalResult addLoss(func::FuncOp func, LossKind kind) {
    if (func.getNumResults() == 0)
      return func.emitError() << "ppc-add-loss: @" << func.getSymName()
                              << " has no result to take a loss of";
    auto returnOp = cast<func::ReturnOp>(func.getBody().front().back());
    Value prediction = returnOp.getOperand(0);
    auto type = dyn_cast<RankedTensorType>(prediction.getType());
    if (!type || !isa<FloatType>(type.getElementType()) ||
        !type.hasStaticShape())
      return func.emitError()
             << "ppc-add-loss: the first result of @" << func.getSymName()
             << " must be a static floating-point tensor, not "
             << prediction.getType();
    if (kind == LossKind::Auto)
      kind = looksLikeLogits(type) ? LossKind::SoftmaxCE : LossKind::MSE;
    if (kind == LossKind::SoftmaxCE && type.getRank() != 2 &&
        type.getRank() != 3)
      return func.emitError() << "ppc-add-loss: softmax-ce needs class "
                                 "logits [N, C] or [N, S, C], not "
                              << type;

    MLIRContext *context = &getContext();
    OpBuilder builder(returnOp);
    // Named locations: the loss ops get readable names in reports and
    // strategy files.
    auto named = [&](StringRef name) {
      return NameLoc::get(StringAttr::get(context, name), returnOp.getLoc());
    };
    // ... and the name as an attribute too, which survives printing without
    // locations, as the importer's ops do.
    auto withName = [&](Operation *op) {
      op->setAttr(graph::PPCDialect::getNameAttrName(),
                  cast<NameLoc>(op->getLoc()).getName());
      return op->getResult(0);
    };
    Type elementType = type.getElementType();
    bool crossEntropy = kind == LossKind::SoftmaxCE;
    ArrayRef<int64_t> shape = type.getShape();
    Type targetType = crossEntropy
                          ? RankedTensorType::get(shape.drop_back(),
                                                  builder.getIntegerType(64))
                          : Type(type);
    StringRef argName = crossEntropy ? "labels" : "targets";
    unsigned argIndex = func.getNumArguments();
    auto argAttrs = builder.getDictionaryAttr(
        builder.getNamedAttr("ppc.name", builder.getStringAttr(argName)));
    if (failed(func.insertArgument(argIndex, targetType, argAttrs,
                                   named(argName))))
      return func.emitError() << "ppc-add-loss: cannot add an argument";
    Value target = func.getArgument(argIndex);

    auto lossType = RankedTensorType::get({}, elementType);
    Value lossValue;
    if (crossEntropy) {
      Value logits = prediction;
      if (type.getRank() == 3) {
        // Per-token logits: one row per token, as the op takes [N, C].
        int64_t rows = shape[0] * shape[1];
        logits = withName(graph::ReshapeOp::create(
            builder, named("loss.logits"),
            RankedTensorType::get({rows, shape[2]}, elementType), logits));
        target = withName(graph::ReshapeOp::create(
            builder, named("loss.labels"),
            RankedTensorType::get({rows}, builder.getIntegerType(64)), target));
      }
      lossValue = withName(graph::SoftmaxCrossEntropyOp::create(
          builder, named("loss"), lossType, logits, target));
    } else {
      lossValue = withName(graph::MseLossOp::create(
          builder, named("loss"), lossType, prediction, target));
    }

    returnOp->setOperands(lossValue);
    llvm::BitVector allResults(func.getNumResults(), true);
    if (failed(func.eraseResults(allResults)) ||
        failed(
            func.insertResult(0, lossType,
                              builder.getDictionaryAttr(builder.getNamedAttr(
                                  "ppc.name", builder.getStringAttr("loss"))))))
      return func.emitError() << "ppc-add-loss: cannot change the results";
    return success();
  }
};

} // namespace
