//===- ZigzagSequence.cpp - a causal sequence in zigzag order and back ----===//
//
// Causal attention split along its sequence does unequal work per part; the
// zigzag order (ppc/Support/SequenceOrder.h) balances it, as Megatron-Core's
// context parallelism does by permuting each batch's sequence when it loads
// it. Here the model permutes itself: the sequence dims that the causal
// attentions' positions reach through the graph form classes (every op on
// the way indexes the positions one to one, so it computes the same values,
// permuted). Where a class begins (a function argument, a weight, a
// constant, an op that broadcasts into the sequence) a gather stores the
// sequence in zigzag order; where it leaves (a function result) a gather
// restores the natural order; the attentions compare natural positions
// (`zigzag`). Losses and weight gradients are the same sums, added in
// another order. Dropout draws its masks over the stored order.
//
// Refused, naming the op: a class reaching a dim read whole, through a
// window, slice or stride, computed across (an unsplittable dim, as a
// cumulative sum's), or selected by index (a gather's table rows); a
// reshape that splits the positions over two dims; a sequence that 2 *
// pairs does not divide.
//
// pairs=auto takes the pairs from the machine and turns a refusal into a
// remark (the pipeline's default asked, not the user). The gathers carry
// `ppc.sequence_order`; ppc-restore-sequence-order (here too) removes them
// again where the strategy splits no causal attention's positions.
//
//===----------------------------------------------------------------------===//

#include "StrategyUtils.h"

#include "ppc/Dialect/Graph/GraphDialect.h"
#include "ppc/Dialect/Graph/GraphOps.h"
#include "ppc/Dialect/Topology/TopologyDialect.h"
#include "ppc/Support/SequenceOrder.h"
#include "ppc/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"

namespace ppc {
#define GEN_PASS_DEF_ZIGZAGSEQUENCE
#define GEN_PASS_DEF_RESTORESEQUENCEORDER
#include "ppc/Transforms/Passes.h.inc"
} // namespace ppc

using namespace mlir;
using namespace ppc;

namespace {

ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

/// Positions of a sequence inside tensor dim `dim` of a value: the dim's
/// index is (outer * length + position) * inner + within.
struct Factor {
  int64_t length = 0;
  int64_t inner = 1;
  bool operator==(const Factor &o) const {
    return length == o.length && inner == o.inner;
  }
};

using FactorKey = std::pair<Value, int64_t>;

class SequenceClasses {
public:
  explicit SequenceClasses(func::FuncOp func) : func(func) {}

  /// Adds the positions of `value`'s dim `dim` and everything they reach.
  LogicalResult add(Value value, int64_t dim, Factor factor) {
    if (failed(insert(value, dim, factor)))
      return failure();
    while (!work.empty()) {
      FactorKey key = work.pop_back_val();
      Factor f = factors[key];
      SmallVector<Operation *> ops(key.first.getUsers().begin(),
                                   key.first.getUsers().end());
      if (Operation *def = key.first.getDefiningOp())
        ops.push_back(def);
      for (Operation *op : ops)
        if (failed(propagate(op, key.first, key.second, f)))
          return failure();
    }
    return success();
  }

  const llvm::DenseMap<FactorKey, Factor> &all() const { return factors; }

  /// Whether the positions of `value`'s `dim` begin here: nothing the op
  /// defining it reads carries them.
  bool beginsAt(Value value, int64_t dim) {
    Operation *def = value.getDefiningOp();
    if (!def)
      return true;
    auto iface = dyn_cast<graph::ParallelizableOpInterface>(def);
    if (!iface)
      return true;
    const IterationSpace &space = spaceOf(iface);
    if (space.flatView)
      return false; // a reshape's positions are its operand's
    unsigned r = cast<OpResult>(value).getResultNumber();
    int32_t d = space.results[r].dims[dim].iterDim;
    for (const TensorAccess &operand : space.operands)
      if (operand.indexes(d))
        return false;
    return true;
  }

private:
  LogicalResult insert(Value value, int64_t dim, Factor factor) {
    auto [it, inserted] = factors.try_emplace({value, dim}, factor);
    if (inserted) {
      work.push_back({value, dim});
      return success();
    }
    if (it->second == factor)
      return success();
    return emitAt(value) << "ppc-zigzag-sequence: dim " << dim
                         << " holds two different sequences ("
                         << it->second.length << " and " << factor.length
                         << " positions)";
  }

  InFlightDiagnostic emitAt(Value value) {
    if (Operation *def = value.getDefiningOp())
      return def->emitError();
    return func.emitError();
  }

  const IterationSpace &spaceOf(graph::ParallelizableOpInterface iface) {
    auto [it, inserted] = spaces.try_emplace(iface.getOperation());
    if (inserted)
      it->second = iface.getIterationSpace();
    return it->second;
  }

  /// Flat stride of tensor dim `dim` of `shape`.
  static int64_t strideOf(ArrayRef<int64_t> shape, int64_t dim) {
    int64_t stride = 1;
    for (int64_t d = dim + 1; d < static_cast<int64_t>(shape.size()); ++d)
      stride *= shape[d];
    return stride;
  }

  /// A reshape (a flat view: IterationSpace::flatView) keeps the elements'
  /// row-major order: the positions, a factor of flat stride `inner *
  /// stride(dim)`, lie inside one dim of the other side, or the reshape
  /// splits them.
  LogicalResult throughReshape(Operation *op, Value from, int64_t dim,
                               Factor f) {
    Value to = from == op->getOperand(0) ? op->getResult(0) : op->getOperand(0);
    ArrayRef<int64_t> fromShape = shapeOf(from), toShape = shapeOf(to);
    int64_t flat = f.inner * strideOf(fromShape, dim);
    for (int64_t e = 0; e < static_cast<int64_t>(toShape.size()); ++e) {
      int64_t stride = strideOf(toShape, e), span = stride * toShape[e];
      if (toShape[e] > 1 && flat % stride == 0 && span % (flat * f.length) == 0)
        return insert(to, e, {f.length, flat / stride});
    }
    return op->emitError() << "ppc-zigzag-sequence: the reshape splits the "
                           << f.length
                           << " sequence positions over two dims of "
                           << to.getType();
  }

  LogicalResult propagate(Operation *op, Value value, int64_t dim, Factor f) {
    auto iface = dyn_cast<graph::ParallelizableOpInterface>(op);
    if (!iface)
      return success(); // a weight, a constant, the function's return
    const IterationSpace &space = spaceOf(iface);
    if (space.flatView)
      return throughReshape(op, value, dim, f);
    auto refuse = [&](StringRef why) {
      return op->emitError()
             << "ppc-zigzag-sequence: the op " << why << " of the " << f.length
             << " sequence positions that a causal attention reads, so "
                "storing them in zigzag order would change what it computes";
    };
    auto isIdentity = [](const DimAccess &a) {
      return !a.isWhole() && a.divisor == 1 && a.stride == 1 && a.offset == 0 &&
             a.extent == 1;
    };
    // The access of `value`'s dim: as an operand (each use) or a result.
    std::vector<DimAccess> accesses;
    for (OpOperand &use : op->getOpOperands())
      if (use.get() == value)
        accesses.push_back(space.operands[use.getOperandNumber()].dims[dim]);
    for (OpResult result : op->getResults())
      if (result == value)
        accesses.push_back(space.results[result.getResultNumber()].dims[dim]);
    bool indexed = llvm::any_of(op->getOperandTypes(), [](Type type) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      return tensor && isa<IntegerType>(tensor.getElementType());
    });
    for (const DimAccess &access : accesses) {
      if (access.isWhole())
        return refuse("reads every one");
      if (!isIdentity(access))
        return refuse("reads through a window, slice or stride each");
      const IterDim &iter = space.dims[access.iterDim];
      if (!iter.splittable)
        return refuse("computes across all");
      if (iter.kind == IterKind::Reduction && indexed)
        return refuse("selects by index one");
      // Every tensor dim the same iteration dim indexes holds them too.
      auto link = [&](Value other, const TensorAccess &t) -> LogicalResult {
        for (auto [e, a] : llvm::enumerate(t.dims)) {
          if (a.isWhole() || a.iterDim != access.iterDim)
            continue;
          if (!isIdentity(a))
            return refuse("reads through a window, slice or stride each");
          if (failed(insert(other, static_cast<int64_t>(e), f)))
            return failure();
        }
        return success();
      };
      for (OpOperand &use : op->getOpOperands())
        if (failed(link(use.get(), space.operands[use.getOperandNumber()])))
          return failure();
      for (OpResult result : op->getResults())
        if (failed(link(result, space.results[result.getResultNumber()])))
          return failure();
    }
    return success();
  }

  func::FuncOp func;
  llvm::DenseMap<FactorKey, Factor> factors;
  SmallVector<FactorKey> work;
  llvm::DenseMap<Operation *, IterationSpace> spaces;
};

/// The tensor dim of an attention's operands that holds the positions.
int64_t positionsDim(graph::AttentionOp op) {
  return op.logicalDims()[shapeOf(op.getQuery()).size() - 2];
}

/// What the gathers of `value` are named after: a function argument's
/// ppc.name (else argN), an op's name (NameLoc), else its kind.
std::string baseName(Value value) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    auto func = cast<func::FuncOp>(arg.getOwner()->getParentOp());
    if (auto name =
            func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "ppc.name"))
      return name.str();
    return "arg" + std::to_string(arg.getArgNumber());
  }
  Operation *def = value.getDefiningOp();
  if (auto name = dyn_cast<NameLoc>(def->getLoc()))
    return name.getName().str();
  if (auto weight = dyn_cast<graph::WeightOp>(def))
    return weight.getName().str();
  return def->getName().getStringRef().str();
}

/// The gather index along a dim of `size` holding `f`: stored element p
/// reads natural element index[p] (`inverse`: the other way round).
Value indices(OpBuilder &builder, Location loc, int64_t size, Factor f,
              int64_t pairs, bool inverse) {
  SmallVector<int64_t> values(size);
  int64_t block = f.length * f.inner;
  for (int64_t p = 0; p < size; ++p) {
    int64_t outer = p / block, position = p % block / f.inner,
            within = p % f.inner;
    int64_t moved = inverse ? zigzagIndex(position, f.length, pairs)
                            : zigzagPosition(position, f.length, pairs);
    values[p] = (outer * f.length + moved) * f.inner + within;
  }
  auto type = RankedTensorType::get({size}, builder.getI64Type());
  return graph::ConstantOp::create(
      builder, loc, DenseElementsAttr::get(type, ArrayRef<int64_t>(values)));
}

/// A gather of `current` (`value`, or a gather of it) along `dim` into
/// zigzag order (`inverse`: back into natural order), named after `value`
/// and marked for ppc-restore-sequence-order.
Value reorder(OpBuilder &builder, Value value, Value current, int64_t dim,
              Factor factor, int64_t pairs, bool inverse) {
  Location loc = NameLoc::get(
      builder.getStringAttr((inverse ? "unzigzag." : "zigzag.") +
                            baseName(value) + "." + std::to_string(dim)),
      value.getLoc());
  Value index =
      indices(builder, loc, shapeOf(value)[dim], factor, pairs, inverse);
  auto gather = graph::GatherOp::create(builder, loc, value.getType(), current,
                                        index, builder.getI64IntegerAttr(dim));
  gather->setAttr(graph::PPCDialect::getSequenceOrderAttrName(),
                  builder.getUnitAttr());
  return gather.getResult();
}

/// The causal attentions of `func` into `attentions`; false where there are
/// none or the function is in zigzag order already.
bool unorderedCausalAttentions(
    func::FuncOp func, SmallVectorImpl<graph::AttentionOp> &attentions) {
  bool ordered = false;
  func.walk([&](graph::AttentionOp op) {
    ordered |= op.getZigzag() != 0;
    if (op.getCausal())
      attentions.push_back(op);
  });
  return !ordered && !attentions.empty();
}

/// Checks every class first and changes the function only if all pass.
LogicalResult orderCausalSequences(func::FuncOp func,
                                   ArrayRef<graph::AttentionOp> attentions,
                                   int64_t pairs) {
  SequenceClasses classes(func);
  for (graph::AttentionOp op : attentions) {
    int64_t dim = positionsDim(op);
    int64_t length = shapeOf(op.getQuery())[dim];
    if (shapeOf(op.getKey())[dim] != length || length % (2 * pairs) != 0)
      return op.emitError()
             << "ppc-zigzag-sequence: " << 2 * pairs
             << " chunks need as many keys as queries and a sequence they "
                "divide; the attention has "
             << length << " queries and " << shapeOf(op.getKey())[dim]
             << " keys";
    for (Value value : SmallVector<Value>{op.getQuery(), op.getKey(),
                                          op.getValue(), op.getResult()})
      if (failed(classes.add(value, dim, {length, 1})))
        return failure();
  }

  // Deterministic order: the function's values as they appear.
  SmallVector<std::pair<FactorKey, Factor>> sources, sinks;
  auto returnOp = cast<func::ReturnOp>(func.getBody().front().back());
  auto visit = [&](Value value) {
    int64_t rank = shapeOf(value).size();
    for (int64_t dim = 0; dim < rank; ++dim) {
      auto it = classes.all().find({value, dim});
      if (it == classes.all().end())
        continue;
      if (classes.beginsAt(value, dim))
        sources.push_back(*it);
      if (llvm::is_contained(returnOp.getOperands(), value))
        sinks.push_back(*it);
    }
  };
  for (BlockArgument arg : func.getArguments())
    visit(arg);
  func.walk([&](Operation *op) {
    for (Value result : op->getResults())
      if (isa<RankedTensorType>(result.getType()))
        visit(result);
  });

  OpBuilder builder(func.getContext());
  for (auto &[key, factor] : sources) {
    auto [value, dim] = key;
    // A value whose two dims hold positions (a mask) is gathered twice:
    // the second gather reads the first.
    Value current = value;
    for (Operation *user : value.getUsers())
      if (user->hasAttr(graph::PPCDialect::getSequenceOrderAttrName()))
        current = user->getResult(0);
    if (auto arg = dyn_cast<BlockArgument>(current))
      builder.setInsertionPointToStart(arg.getOwner());
    else
      builder.setInsertionPointAfterValue(current);
    Value gathered = reorder(builder, value, current, dim, factor, pairs,
                             /*inverse=*/false);
    current.replaceAllUsesExcept(gathered, gathered.getDefiningOp());
  }
  // A result whose two dims hold positions is gathered back twice.
  llvm::DenseMap<Value, Value> returned;
  for (auto &[key, factor] : sinks) {
    auto [value, dim] = key;
    Value current = returned.lookup(value);
    if (!current)
      current = value;
    builder.setInsertionPoint(returnOp);
    Value gathered = reorder(builder, value, current, dim, factor, pairs,
                             /*inverse=*/true);
    for (OpOperand &use : returnOp->getOpOperands())
      if (use.get() == current)
        use.set(gathered);
    returned[value] = gathered;
  }
  for (graph::AttentionOp op : attentions)
    op.setZigzag(pairs);
  return success();
}

struct ZigzagSequencePass
    : public ppc::impl::ZigzagSequenceBase<ZigzagSequencePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t devices = 0;
    if (pairs == "auto") {
      devices = topo::lookupMachineDeviceCount(module).value_or(0);
      if (devices <= 0) {
        module.emitError()
            << "ppc-zigzag-sequence: pairs=auto takes the pairs from the "
               "machine's devices; attach one first "
               "(--ppc-attach-machine=machine=NAME) or give pairs=N";
        return signalPassFailure();
      }
    } else if (!llvm::to_integer(pairs.getValue(), count) || count < 1) {
      module.emitError() << "ppc-zigzag-sequence: pairs must be auto or a "
                            "whole number of at least 1, got '"
                         << pairs.getValue() << "'";
      return signalPassFailure();
    }
    for (func::FuncOp func : transforms_detail::getFunctionsToSplit(module))
      if (failed(orderFunction(func, devices)))
        return signalPassFailure();
  }

  /// Pairs from a machine of `devices` (pairs=auto): the most that divide the
  /// devices (so every context-parallel degree the search may pick is
  /// balanced) and every causal sequence into 2 * pairs chunks; 0 where
  /// fewer than 2 do (a single device has nothing to balance).
  static int64_t pairsFor(int64_t devices, ArrayRef<int64_t> lengths) {
    for (int64_t n = devices; n >= 2; --n)
      if (devices % n == 0 && llvm::all_of(lengths, [&](int64_t length) {
            return length % (2 * n) == 0;
          }))
        return n;
    return 0;
  }

  /// The pairs asked for (`pairs` other than auto).
  int64_t count = 0;

  /// Stores `func`'s causal sequences in zigzag order: of `count` pairs, or
  /// (devices > 0) of the pairs a machine of that many devices takes, where
  /// a refusal leaves the function as it is with a remark instead of an
  /// error (the pipeline's default asked for it, not the user).
  LogicalResult orderFunction(func::FuncOp func, int64_t devices) {
    SmallVector<graph::AttentionOp> attentions;
    if (!unorderedCausalAttentions(func, attentions))
      return success(); // already in zigzag order, or nothing to balance
    const bool automatic = devices > 0;
    int64_t pairs = count;
    if (automatic) {
      SmallVector<int64_t> lengths;
      for (graph::AttentionOp op : attentions)
        lengths.push_back(shapeOf(op.getQuery())[positionsDim(op)]);
      pairs = pairsFor(devices, lengths);
      if (pairs == 0) {
        if (devices > 1)
          emitRemark(func.getLoc())
              << "ppc-zigzag-sequence: causal sequences left in natural "
                 "order: no 2 or more pairs of chunks both divide the "
              << devices << " devices and every sequence length";
        return success();
      }
    }
    // A refusal of the automatic order is the reason it was not applied.
    std::string refusal;
    std::optional<Location> refusedAt;
    std::optional<ScopedDiagnosticHandler> soft;
    if (automatic)
      soft.emplace(func.getContext(), [&](Diagnostic &diag) {
        if (diag.getSeverity() != DiagnosticSeverity::Error)
          return failure(); // not ours: passed on
        if (!refusedAt) {
          refusal = diag.str();
          refusedAt = diag.getLocation();
        }
        return success();
      });
    if (failed(orderCausalSequences(func, attentions, pairs))) {
      if (!automatic)
        return failure();
      soft.reset();
      emitRemark(*refusedAt)
          << "causal sequences left in natural order (a context-parallel "
             "split of them does unequal work per part): "
          << refusal;
    }
    return success();
  }
};

/// Whether `op`'s strategy splits the positions of its causal attention
/// (query or key positions: a context-parallel split).
bool splitsCausalPositions(graph::AttentionOp op) {
  auto strategy = op->getAttrOfType<graph::StrategyAttr>(
      graph::PPCDialect::getStrategyAttrName());
  if (!strategy)
    return false;
  IterationSpace space =
      cast<graph::ParallelizableOpInterface>(op.getOperation())
          .getIterationSpace();
  if (!space.causal)
    return false;
  ArrayRef<int64_t> degrees = strategy.getDegrees();
  return degrees[space.causal->query] > 1 || degrees[space.causal->key] > 1;
}

struct RestoreSequenceOrderPass
    : public ppc::impl::RestoreSequenceOrderBase<RestoreSequenceOrderPass> {
  using Base::Base;

  void runOnOperation() override {
    for (func::FuncOp func :
         transforms_detail::getFunctionsToSplit(getOperation())) {
      SmallVector<graph::AttentionOp> ordered;
      func.walk([&](graph::AttentionOp op) {
        if (op.getZigzag() != 0)
          ordered.push_back(op);
      });
      if (ordered.empty() ||
          (!all && llvm::any_of(ordered, splitsCausalPositions)))
        continue;
      // The gathers index the positions one to one and so does everything
      // between them: without both ends, the function computes the same in
      // natural order.
      SmallVector<Operation *> gathers;
      func.walk([&](Operation *op) {
        if (op->hasAttr(graph::PPCDialect::getSequenceOrderAttrName()))
          gathers.push_back(op);
      });
      for (Operation *gather : gathers) {
        Operation *index = gather->getOperand(1).getDefiningOp();
        gather->getResult(0).replaceAllUsesWith(gather->getOperand(0));
        gather->erase();
        if (index && index->use_empty())
          index->erase();
      }
      for (graph::AttentionOp op : ordered)
        op.setZigzag(0);
    }
  }
};

} // namespace

LogicalResult ppc::transforms_detail::orderInZigzag(func::FuncOp func,
                                                    int64_t pairs) {
  SmallVector<graph::AttentionOp> attentions;
  if (!unorderedCausalAttentions(func, attentions))
    return success();
  return orderCausalSequences(func, attentions, pairs);
}
