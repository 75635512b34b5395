//===- ElideZeroFills.cpp - fills a plan does not need --------------------===//
//
// ppc-elide-zero-fills (Passes.td): per buffer of every rank's program, the
// instructions that use it in program order decide whether its allocation
// must be zero-filled and whether its fill with 0 can go, the first
// contribution writing instead of adding.
//
//===----------------------------------------------------------------------===//

#include "ppc/Conversion/Passes.h"
#include "ppc/Dialect/Plan/PlanOps.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

namespace ppc {
#define GEN_PASS_DEF_ELIDEZEROFILLS
#include "ppc/Conversion/Passes.h.inc"

namespace {

using namespace mlir;

/// The instructions using `buffer`, in program order, frees aside.
SmallVector<Operation *> usersInOrder(Value buffer) {
  SmallVector<Operation *> users;
  for (Operation *user : buffer.getUsers())
    if (!isa<plan::FreeOp>(user) && !llvm::is_contained(users, user))
      users.push_back(user);
  llvm::sort(users,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return users;
}

/// How many operands of `op` are `buffer`.
unsigned countUses(Operation *op, Value buffer) {
  return llvm::count(op->getOperands(), buffer);
}

/// Whether [lo, hi) is the box `alloc` holds.
bool coversAlloc(plan::AllocOp alloc, ArrayRef<int64_t> lo,
                 ArrayRef<int64_t> hi) {
  return alloc.getLo() == lo && alloc.getHi() == hi;
}

/// Whether `op`, the first instruction using the buffer of `alloc`, writes
/// every element of it without reading it.
bool writesWhole(Operation *op, plan::AllocOp alloc) {
  Value buffer = alloc.getBuffer();
  if (countUses(op, buffer) != 1)
    return false;
  return llvm::TypeSwitch<Operation *, bool>(op)
      .Case([](plan::LoadOp) { return true; })
      .Case([](plan::FillOp) { return true; })
      .Case([&](plan::CopyOp copy) {
        return copy.getDst() == buffer && !copy.getAccumulate() &&
               coversAlloc(alloc, copy.getLo(), copy.getHi());
      })
      .Case([&](plan::RecvOp recv) {
        return !recv.getAccumulate() &&
               coversAlloc(alloc, recv.getLo(), recv.getHi());
      })
      // A forward kernel computes exactly the elements of its output boxes
      // (runtime/Kernels.h); later stages continue from earlier ones.
      .Case([&](plan::KernelOp kernel) {
        return kernel.getStageAttr().getInt() == 0 &&
               llvm::is_contained(kernel.getOutputs(), buffer);
      })
      .Case([&](plan::CollectiveOp collective) {
        using plan::CollectiveKind;
        CollectiveKind kind = collective.getKind();
        return collective.getResult() == buffer &&
               (kind == CollectiveKind::all_gather ||
                kind == CollectiveKind::reduce_scatter ||
                kind == CollectiveKind::all_to_all);
      })
      .Default([](Operation *) { return false; });
}

/// Makes `op`, the next contribution to the buffer of `alloc` after its
/// fill with 0, write instead of add; false where it cannot.
bool makeOverwrite(Operation *op, plan::AllocOp alloc) {
  Value buffer = alloc.getBuffer();
  if (countUses(op, buffer) != 1)
    return false;
  return llvm::TypeSwitch<Operation *, bool>(op)
      .Case([&](plan::KernelBackwardOp kernel) {
        auto grads = kernel.getInputGrads();
        auto it = llvm::find(grads, buffer);
        if (it == grads.end())
          return false;
        SmallVector<bool> overwrite(grads.size(), false);
        if (std::optional<ArrayRef<bool>> old = kernel.getOverwrite())
          overwrite.assign(old->begin(), old->end());
        overwrite[std::distance(grads.begin(), it)] = true;
        kernel.setOverwrite(overwrite);
        return true;
      })
      .Case([&](plan::CopyOp copy) {
        if (copy.getDst() != buffer || !copy.getAccumulate() ||
            !coversAlloc(alloc, copy.getLo(), copy.getHi()))
          return false;
        copy.setAccumulate(false);
        return true;
      })
      .Case([&](plan::RecvOp recv) {
        if (!recv.getAccumulate() ||
            !coversAlloc(alloc, recv.getLo(), recv.getHi()))
          return false;
        recv.setAccumulate(false);
        return true;
      })
      .Default([](Operation *) { return false; });
}

struct ElideZeroFillsPass
    : public impl::ElideZeroFillsBase<ElideZeroFillsPass> {
  void runOnOperation() override {
    SmallVector<plan::AllocOp> allocs;
    getOperation().walk([&](plan::AllocOp alloc) { allocs.push_back(alloc); });
    for (plan::AllocOp alloc : allocs) {
      SmallVector<Operation *> users = usersInOrder(alloc.getBuffer());
      if (users.empty() || !writesWhole(users.front(), alloc))
        continue;
      alloc.setUninitialized(true);
      auto fill = dyn_cast<plan::FillOp>(users.front());
      if (fill && fill.getValue().isZero() && users.size() > 1 &&
          makeOverwrite(users[1], alloc))
        fill.erase();
    }
  }
};

} // namespace
} // namespace ppc
