//===- AliasViews.cpp - reshapes that share their operand's buffer --------===//
//
// ppc-alias-views (Passes.td): per rank's program, the kernels of flat-view
// ops (reshapes) whose boxes visit the same elements in the same order
// become views: the forward's result buffer views the operand buffer, the
// backward's operand gradient views the result gradient, and the kernel
// goes. The checks keep the program's meaning: nothing writes the shared
// memory after the view is made while the other buffer still reads it.
//
//===----------------------------------------------------------------------===//

#include "ppc/Conversion/Passes.h"
#include "ppc/Dialect/Plan/PlanOps.h"
#include "ppc/Support/Layout.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

namespace ppc {
#define GEN_PASS_DEF_ALIASVIEWS
#include "ppc/Conversion/Passes.h.inc"

namespace {

using namespace mlir;

plan::AllocOp allocOf(Value buffer) {
  return buffer.getDefiningOp<plan::AllocOp>();
}

/// The buffer whose allocation holds the memory of `buffer`: itself, or
/// for a view the buffer it views, followed to the end.
Value memoryOf(Value buffer) {
  while (plan::AllocOp alloc = allocOf(buffer)) {
    if (!alloc.getView())
      break;
    buffer = alloc.getView();
  }
  return buffer;
}

/// Whether `op` may write the memory of `buffer` (an operand of it): every
/// instruction but those that only read their buffers.
bool writes(Operation *op, Value buffer) {
  return llvm::TypeSwitch<Operation *, bool>(op)
      .Case([](plan::FreeOp) { return false; })
      .Case([](plan::SendOp) { return false; })
      .Case([](plan::OutputOp) { return false; })
      .Case([](plan::AllocOp) { return false; }) // a view of it
      .Case([&](plan::CopyOp copy) { return copy.getDst() == buffer; })
      .Case([&](plan::KernelOp kernel) {
        return llvm::is_contained(kernel.getOutputs(), buffer) ||
               llvm::is_contained(kernel.getScratch(), buffer);
      })
      .Case([&](plan::KernelBackwardOp kernel) {
        return llvm::is_contained(kernel.getInputGrads(), buffer) ||
               llvm::is_contained(kernel.getScratch(), buffer);
      })
      .Case([&](plan::CollectiveOp collective) {
        using plan::CollectiveKind;
        CollectiveKind kind = collective.getKind();
        if (kind == CollectiveKind::all_reduce ||
            kind == CollectiveKind::broadcast)
          return true;
        return collective.getResult() == buffer;
      })
      .Case([&](plan::UpdateOp update) { return update.getWeight() == buffer; })
      .Default([](Operation *) { return true; });
}

/// The instructions after `from` in its program that use the memory of
/// `buffer` (through it or any view of the same memory), with the buffer
/// they use it through.
SmallVector<std::pair<Operation *, Value>> usesAfter(Operation *from,
                                                     Value buffer) {
  SmallVector<std::pair<Operation *, Value>> uses;
  Value memory = memoryOf(buffer);
  for (Operation *op = from->getNextNode(); op; op = op->getNextNode())
    for (Value operand : op->getOperands())
      if (isa<plan::BufferType>(operand.getType()) &&
          memoryOf(operand) == memory)
        uses.emplace_back(op, operand);
  return uses;
}

/// Whether `op` is the first instruction using `buffer`, and uses it once.
bool firstUse(Operation *op, Value buffer) {
  for (Operation *user : buffer.getUsers())
    if (user != op && user->isBeforeInBlock(op))
      return false;
  return llvm::count(op->getOperands(), buffer) == 1;
}

struct AliasViewsPass : public impl::AliasViewsBase<AliasViewsPass> {
  void runOnOperation() override {
    getOperation().walk([&](plan::PlanOp plan) { runOnPlan(plan); });
  }

  void runOnPlan(plan::PlanOp plan) {
    SmallVector<Operation *> kernels;
    plan.walk([&](Operation *op) {
      if (isa<plan::KernelOp, plan::KernelBackwardOp>(op))
        kernels.push_back(op);
    });
    for (Operation *op : kernels) {
      FlatSymbolRefAttr opName = op->getAttrOfType<FlatSymbolRefAttr>("op");
      auto graphOp = plan.lookupSymbol<plan::GraphOp>(opName.getAttr());
      if (!graphOp || !graphOp.getFlatView() ||
          op->getAttrOfType<IntegerAttr>("stage").getInt() != 0)
        continue;
      plan::TensorOp operand = plan.lookupSymbol<plan::TensorOp>(
          cast<FlatSymbolRefAttr>(graphOp.getOperandsAttr()[0]).getAttr());
      plan::TensorOp result = plan.lookupSymbol<plan::TensorOp>(
          cast<FlatSymbolRefAttr>(graphOp.getResultsAttr()[0]).getAttr());
      if (!operand || !result ||
          operand.getElementType() != result.getElementType())
        continue;
      if (auto kernel = dyn_cast<plan::KernelOp>(op))
        aliasForward(kernel, operand, result);
      else
        aliasBackward(cast<plan::KernelBackwardOp>(op), operand, result);
    }
  }

  /// Whether the boxes of `from` (holding `fromTensor`) and `to` visit the
  /// same elements in the same order.
  static bool sameOrder(plan::AllocOp from, plan::TensorOp fromTensor,
                        plan::AllocOp to, plan::TensorOp toTensor) {
    auto box = [](plan::AllocOp alloc) {
      geometry::Box box;
      for (auto [lo, hi] : llvm::zip(alloc.getLo(), alloc.getHi()))
        box.push_back({lo, hi});
      return box;
    };
    return geometry::sameFlatOrder(
        {fromTensor.getShape().begin(), fromTensor.getShape().end()}, box(from),
        {toTensor.getShape().begin(), toTensor.getShape().end()}, box(to));
  }

  /// Whether `alloc` holds a weight's values, kept across steps.
  static bool persistent(plan::AllocOp alloc, plan::TensorOp tensor) {
    return !alloc.getGrad() && !alloc.getStaging() &&
           (tensor.getRole() == plan::Role::weight ||
            tensor.getRole() == plan::Role::frozen);
  }

  /// Replaces `alloc` by a view of `base` made just before `at`.
  static void replaceByView(plan::AllocOp alloc, Value base, Operation *at) {
    OpBuilder builder(at);
    auto view = plan::AllocOp::create(
        builder, alloc.getLoc(), alloc.getBuffer().getType(),
        alloc.getTensorAttr(), alloc.getLoAttr(), alloc.getHiAttr(),
        alloc.getGradAttr(), UnitAttr(), UnitAttr(), base);
    alloc.getBuffer().replaceAllUsesWith(view.getBuffer());
    alloc.erase();
  }

  static void aliasForward(plan::KernelOp kernel, plan::TensorOp operand,
                           plan::TensorOp result) {
    if (kernel.getInputs().size() != 1 || kernel.getOutputs().size() != 1 ||
        !kernel.getScratch().empty())
      return;
    Value from = kernel.getInputs()[0], to = kernel.getOutputs()[0];
    plan::AllocOp fromAlloc = allocOf(from), toAlloc = allocOf(to);
    if (!fromAlloc || !toAlloc || fromAlloc.getGrad() || toAlloc.getGrad() ||
        toAlloc.getStaging() || persistent(fromAlloc, operand) ||
        persistent(toAlloc, result) || toAlloc.getView() ||
        !firstUse(kernel, to) ||
        !sameOrder(fromAlloc, operand, toAlloc, result))
      return;
    // From here on the two share memory: neither may be written.
    for (Value buffer : {from, to})
      for (auto [user, through] : usesAfter(kernel, buffer))
        if (writes(user, through))
          return;
    replaceByView(toAlloc, from, kernel);
    kernel.erase();
  }

  static void aliasBackward(plan::KernelBackwardOp kernel,
                            plan::TensorOp operand, plan::TensorOp result) {
    std::optional<ArrayRef<bool>> overwrite = kernel.getOverwrite();
    if (kernel.getOutputGrads().size() != 1 ||
        kernel.getInputGrads().size() != 1 || !kernel.getScratch().empty() ||
        !overwrite || !(*overwrite)[0])
      return;
    Value resultGrad = kernel.getOutputGrads()[0];
    Value operandGrad = kernel.getInputGrads()[0];
    plan::AllocOp resultAlloc = allocOf(resultGrad);
    plan::AllocOp operandAlloc = allocOf(operandGrad);
    if (!resultAlloc || !operandAlloc || operandAlloc.getView() ||
        !firstUse(kernel, operandGrad) ||
        !sameOrder(operandAlloc, operand, resultAlloc, result))
      return;
    // The operand's gradient takes over the memory: nothing else may use
    // it after the kernel but frees.
    for (auto [user, through] : usesAfter(kernel, resultGrad))
      if (!isa<plan::FreeOp>(user))
        return;
    replaceByView(operandAlloc, resultGrad, kernel);
    kernel.erase();
  }
};

} // namespace
} // namespace ppc
