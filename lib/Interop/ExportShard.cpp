//===- ExportShard.cpp - a strategy as upstream shard annotations ---------===//
//
// --ppc-export-shard: rewrites a ppc graph carrying #ppc.strategy into
// linalg.generic ops on tensors annotated with the upstream `shard` dialect,
// for upstream sharding-propagation and shard-partition.
//
// Everything about an op's loops comes from its ParallelizableOpInterface:
// the iteration dims give the generic's iterator types (reduction or
// parallel), the operand and result accesses its indexing maps and the
// tensor dims each split degree lands on. Only the scalar payload is per op.
//
// The grid: every partitioned dim (and replica group) of every op's machine
// view covers the device strides [stride, stride * degree). All those
// boundaries, sorted, cut the devices into levels; each level is one grid
// axis (the largest stride first), so a dim of degree d at stride s is split
// along the axes between s and s * d, and partition coordinate c lands on
// device c * s as the view says.
//
//===----------------------------------------------------------------------===//

#include "ppc/Dialect/Graph/GraphOps.h"
#include "ppc/Dialect/Graph/ParallelizableOpInterface.h"
#include "ppc/Interop/Passes.h"
#include "ppc/Support/IterationSpace.h"
#include "ppc/Support/MachineView.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/TypeSwitch.h"

#include <set>

namespace ppc {
#define GEN_PASS_DEF_EXPORTSHARD
#include "ppc/Interop/Passes.h.inc"
} // namespace ppc

using namespace mlir;
namespace g = ppc::graph;

namespace {

constexpr llvm::StringLiteral kGridName = "grid";

/// The device grid shared by every op's view: the sorted stride boundaries
/// (boundaries[0] = 1; axis i, counted from the smallest stride, spans
/// [boundaries[i], boundaries[i + 1])).
struct DeviceGrid {
  SmallVector<int64_t> boundaries{1};

  int64_t numAxes() const { return boundaries.size() - 1; }
  /// Grid shape, the largest stride first.
  SmallVector<int64_t> shape() const {
    SmallVector<int64_t> s;
    for (int64_t i = numAxes() - 1; i >= 0; --i)
      s.push_back(boundaries[i + 1] / boundaries[i]);
    return s;
  }
  /// The grid axes (major first) that a split of `degree` at device stride
  /// `stride` runs along.
  SmallVector<int16_t> axesOf(int64_t stride, int64_t degree) const {
    SmallVector<int16_t> axes;
    for (int64_t i = numAxes() - 1; i >= 0; --i)
      if (boundaries[i] >= stride && boundaries[i + 1] <= stride * degree)
        axes.push_back(static_cast<int16_t>(numAxes() - 1 - i));
    return axes;
  }
};

/// (stride, degree) of each partitioned dim of `config` and of its replicas.
SmallVector<std::pair<int64_t, int64_t>> levelsOf(const ppc::OpConfig &config) {
  SmallVector<std::pair<int64_t, int64_t>> levels;
  std::vector<int64_t> strides = config.effectiveStrides();
  size_t next = 0;
  for (int64_t degree : config.degrees)
    if (degree > 1)
      levels.push_back({strides[next++], degree});
  if (config.replicas > 1)
    levels.push_back({strides[next], config.replicas});
  return levels;
}

class Exporter {
public:
  Exporter(ModuleOp module) : module(module), builder(module.getContext()) {}
  LogicalResult run();

private:
  ModuleOp module;
  OpBuilder builder;
  DeviceGrid grid;

  LogicalResult fail(Operation *op, const Twine &reason) {
    return op->emitError() << "cannot export '" << op->getName()
                           << "' to the shard dialect: " << reason;
  }
  ppc::OpConfig configOf(Operation *op) const;
  LogicalResult buildGrid(ArrayRef<Operation *> ops);
  /// shard.shard `v` with the split of `access` under `axesOfDim`.
  Value annotate(Location loc, Value v, const ppc::TensorAccess &access,
                 ArrayRef<SmallVector<int16_t>> axesOfDim, bool forUsers);
  LogicalResult exportOp(Operation *op, func::FuncOp func);
  /// The generic's body for `op`: the result element from the operand
  /// elements (and the accumulator for a contraction).
  Value payload(Operation *op, OpBuilder &b, Location loc, ValueRange args);
};

ppc::OpConfig Exporter::configOf(Operation *op) const {
  if (auto attr = op->getAttrOfType<g::StrategyAttr>(
          g::PPCDialect::getStrategyAttrName()))
    return attr.getConfig();
  // No strategy: the op runs whole, replicated over the grid.
  ppc::OpConfig config;
  config.degrees.assign(
      cast<g::ParallelizableOpInterface>(op).getIterationSpace().dims.size(),
      1);
  return config;
}

LogicalResult Exporter::buildGrid(ArrayRef<Operation *> ops) {
  std::set<int64_t> boundaries{1};
  for (Operation *op : ops) {
    ppc::OpConfig config = configOf(op);
    if (config.start != 0 || config.stage != 0)
      return fail(op, "its machine view starts at device " +
                          Twine(config.start) + " (stage " +
                          Twine(config.stage) +
                          "); a shard grid holds whole-grid layouts only");
    for (auto [stride, degree] : levelsOf(config)) {
      boundaries.insert(stride);
      boundaries.insert(stride * degree);
    }
  }
  grid.boundaries.assign(boundaries.begin(), boundaries.end());
  for (int64_t i = 0; i < grid.numAxes(); ++i)
    if (grid.boundaries[i + 1] % grid.boundaries[i] != 0)
      return module.emitError()
             << "cannot export to the shard dialect: the machine views do "
                "not nest into one device grid (device strides "
             << grid.boundaries[i] << " and " << grid.boundaries[i + 1] << ")";
  return success();
}

Value Exporter::annotate(Location loc, Value v, const ppc::TensorAccess &access,
                         ArrayRef<SmallVector<int16_t>> axesOfDim,
                         bool forUsers) {
  SmallVector<SmallVector<int16_t>> split(access.dims.size());
  for (auto [i, dim] : llvm::enumerate(access.dims))
    if (!dim.isWhole())
      split[i] = axesOfDim[dim.iterDim];
  while (split.size() > 1 && split.back().empty())
    split.pop_back();
  if (split.empty())
    split.emplace_back();
  SmallVector<shard::GridAxesAttr> axes;
  for (ArrayRef<int16_t> a : split)
    axes.push_back(builder.getDenseI16ArrayAttr(a));
  Value sharding = shard::ShardingOp::create(builder, loc, kGridName, axes);
  return shard::ShardOp::create(builder, loc, v, sharding, forUsers);
}

Value Exporter::payload(Operation *op, OpBuilder &b, Location loc,
                        ValueRange args) {
  auto zero = [&](Type t) {
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(t, 0.0));
  };
  auto one = [&](Type t) {
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(t, 1.0));
  };
  Type t = args.back().getType();
  return llvm::TypeSwitch<Operation *, Value>(op)
      .Case<g::MatMulOp, g::LinearOp>([&](Operation *) {
        Value product = arith::MulFOp::create(b, loc, args[0], args[1]);
        return arith::AddFOp::create(b, loc, args[2], product);
      })
      .Case([&](g::AddOp) {
        return arith::AddFOp::create(b, loc, args[0], args[1]);
      })
      .Case([&](g::SubOp) {
        return arith::SubFOp::create(b, loc, args[0], args[1]);
      })
      .Case([&](g::MulOp) {
        return arith::MulFOp::create(b, loc, args[0], args[1]);
      })
      .Case([&](g::DivOp) {
        return arith::DivFOp::create(b, loc, args[0], args[1]);
      })
      .Case([&](g::MaxOp) {
        return arith::MaximumFOp::create(b, loc, args[0], args[1]);
      })
      .Case([&](g::MinOp) {
        return arith::MinimumFOp::create(b, loc, args[0], args[1]);
      })
      .Case([&](g::ReluOp) {
        return arith::MaximumFOp::create(b, loc, args[0], zero(t));
      })
      .Case([&](g::NegOp) { return arith::NegFOp::create(b, loc, args[0]); })
      .Case([&](g::ExpOp) { return math::ExpOp::create(b, loc, args[0]); })
      .Case([&](g::LogOp) { return math::LogOp::create(b, loc, args[0]); })
      .Case([&](g::TanhOp) { return math::TanhOp::create(b, loc, args[0]); })
      .Case([&](g::SqrtOp) { return math::SqrtOp::create(b, loc, args[0]); })
      .Case([&](g::RsqrtOp) { return math::RsqrtOp::create(b, loc, args[0]); })
      .Case([&](g::ErfOp) { return math::ErfOp::create(b, loc, args[0]); })
      .Case([&](g::AbsOp) { return math::AbsFOp::create(b, loc, args[0]); })
      .Case([&](g::ReciprocalOp) {
        return arith::DivFOp::create(b, loc, one(t), args[0]);
      })
      .Case([&](g::SigmoidOp) {
        Value e =
            math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, args[0]));
        return arith::DivFOp::create(b, loc, one(t),
                                     arith::AddFOp::create(b, loc, one(t), e));
      })
      .Default([](Operation *) { return Value(); });
}

LogicalResult Exporter::exportOp(Operation *op, func::FuncOp func) {
  Location loc = op->getLoc();
  if (auto weight = dyn_cast<g::WeightOp>(op)) {
    // A weight becomes an argument: each device is handed its shard.
    unsigned index = func.getNumArguments();
    if (failed(
            func.insertArgument(index, weight.getType(),
                                builder.getDictionaryAttr(builder.getNamedAttr(
                                    "ppc.name", weight.getNameAttr())),
                                loc)))
      return failure();
    weight.getResult().replaceAllUsesWith(func.getArgument(index));
    return success();
  }
  if (auto constant = dyn_cast<g::ConstantOp>(op)) {
    auto value = dyn_cast<TypedAttr>(constant.getValue());
    if (!value)
      return fail(op, "its value is not a typed attribute");
    Value c = arith::ConstantOp::create(builder, loc, value);
    constant.getResult().replaceAllUsesWith(c);
    return success();
  }
  auto parallelizable = dyn_cast<g::ParallelizableOpInterface>(op);
  if (!parallelizable || op->getNumResults() != 1)
    return fail(op, "it is not a single-result computation of the graph");
  // Checked before building anything, so a failure leaves no half-built IR.
  {
    OpBuilder probe(op->getContext());
    Block scratch;
    SmallVector<Value> args;
    for (Value v : op->getOperands())
      args.push_back(
          scratch.addArgument(getElementTypeOrSelf(v.getType()), loc));
    args.push_back(scratch.addArgument(
        getElementTypeOrSelf(op->getResult(0).getType()), loc));
    probe.setInsertionPointToEnd(&scratch);
    bool supported = static_cast<bool>(payload(op, probe, loc, args));
    scratch.dropAllReferences();
    if (!supported)
      return fail(op, "it has no linalg.generic form here (elementwise ops, "
                      "matmul and linear are exported)");
  }

  ppc::IterationSpace space = parallelizable.getIterationSpace();
  ppc::OpConfig config = configOf(op);
  auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
  if (!isa<FloatType>(resultType.getElementType()))
    return fail(op, "only floating-point results are exported");

  // Grid axes of every iteration dim.
  SmallVector<SmallVector<int16_t>> axesOfDim(space.dims.size());
  {
    std::vector<int64_t> strides = config.effectiveStrides();
    size_t next = 0;
    for (auto [d, degree] : llvm::enumerate(config.degrees))
      if (degree > 1)
        axesOfDim[d] = grid.axesOf(strides[next++], degree);
  }

  // Indexing maps from the accesses: identity accesses become loop dims. A
  // broadcast size-1 dim would need the constant 0 in the map, which LLVM
  // 22's sharding interface of linalg rejects (a lower-rank operand, as
  // linalg front ends broadcast, is a projection and fine).
  MLIRContext *ctx = op->getContext();
  auto mapOf = [&](const ppc::TensorAccess &access,
                   const Twine &what) -> FailureOr<AffineMap> {
    SmallVector<AffineExpr> exprs;
    for (auto [i, dim] : llvm::enumerate(access.dims)) {
      if (dim.isWhole())
        return fail(op, what + " broadcasts its size-1 dim " + Twine(i) +
                            ", which upstream sharding does not accept in "
                            "an indexing map (drop the unit dim instead)");
      if (!(dim == ppc::DimAccess::identity(dim.iterDim)))
        return fail(op, what + " is read through a window (a halo), which "
                               "an indexing map cannot express");
      exprs.push_back(getAffineDimExpr(dim.iterDim, ctx));
    }
    return AffineMap::get(space.dims.size(), 0, exprs, ctx);
  };
  // A linear layer's bias is added after the contraction, by its own
  // generic: it must not be summed once per reduction step.
  bool isLinear = isa<g::LinearOp>(op);
  unsigned numInputs = isLinear ? 2 : op->getNumOperands();
  SmallVector<AffineMap> maps;
  for (unsigned i = 0; i < numInputs; ++i) {
    FailureOr<AffineMap> map = mapOf(space.operands[i], "operand #" + Twine(i));
    if (failed(map))
      return failure();
    maps.push_back(*map);
  }
  FailureOr<AffineMap> resultMap = mapOf(space.results[0], "its result");
  if (failed(resultMap))
    return failure();
  maps.push_back(*resultMap);
  SmallVector<utils::IteratorType> iterators;
  for (const ppc::IterDim &dim : space.dims)
    iterators.push_back(dim.kind == ppc::IterKind::Reduction
                            ? utils::IteratorType::reduction
                            : utils::IteratorType::parallel);

  SmallVector<Value> inputs;
  for (unsigned i = 0; i < numInputs; ++i)
    inputs.push_back(annotate(loc, op->getOperand(i), space.operands[i],
                              axesOfDim, /*forUsers=*/true));
  Value init = tensor::EmptyOp::create(builder, loc, resultType.getShape(),
                                       resultType.getElementType());
  // A contraction accumulates into zeros.
  if (llvm::is_contained(iterators, utils::IteratorType::reduction))
    init = linalg::FillOp::create(
               builder, loc,
               ValueRange{arith::ConstantOp::create(
                   builder, loc,
                   builder.getFloatAttr(resultType.getElementType(), 0.0))},
               ValueRange{init})
               .getResult(0);
  auto generic = linalg::GenericOp::create(
      builder, loc, resultType, inputs, init, maps, iterators,
      [&](OpBuilder &b, Location l, ValueRange args) {
        linalg::YieldOp::create(b, l, payload(op, b, l, args));
      });
  // Partial sums of split reduction dims are all-reduced: the result is not
  // split along the reduction's axes. A `scatter` strategy is exported the
  // same way (the consumer's operand annotation then slices it): LLVM 22's
  // shard-partition crashes on a result split along the axes of its own
  // reduction.
  Value result = annotate(loc, generic.getResult(0), space.results[0],
                          axesOfDim, /*forUsers=*/false);
  if (isLinear) {
    if (Value bias = cast<g::LinearOp>(op).getBias()) {
      int64_t rank = resultType.getRank();
      SmallVector<AffineMap> biasMaps{
          AffineMap::getMultiDimIdentityMap(rank, ctx),
          AffineMap::get(rank, 0, getAffineDimExpr(rank - 1, ctx)),
          AffineMap::getMultiDimIdentityMap(rank, ctx)};
      // The bias add runs where the linear layer's result lives.
      ppc::TensorAccess resultAccess = space.results[0];
      Value lhs = annotate(loc, result, resultAccess, axesOfDim,
                           /*forUsers=*/true);
      Value rhs =
          annotate(loc, bias, space.operands[2], axesOfDim, /*forUsers=*/true);
      Value empty = tensor::EmptyOp::create(builder, loc, resultType.getShape(),
                                            resultType.getElementType());
      auto add = linalg::GenericOp::create(
          builder, loc, resultType, ValueRange{lhs, rhs}, empty, biasMaps,
          SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
          [&](OpBuilder &b, Location l, ValueRange args) {
            Value sum = arith::AddFOp::create(b, l, args[0], args[1]);
            linalg::YieldOp::create(b, l, sum);
          });
      result = annotate(loc, add.getResult(0), resultAccess, axesOfDim,
                        /*forUsers=*/false);
    }
  }
  op->getResult(0).replaceAllUsesWith(result);
  return success();
}

LogicalResult Exporter::run() {
  SmallVector<func::FuncOp> funcs(module.getOps<func::FuncOp>());
  SmallVector<Operation *> graphOps;
  for (func::FuncOp func : funcs)
    func.walk([&](Operation *op) {
      if (isa<g::ParallelizableOpInterface>(op))
        graphOps.push_back(op);
    });
  if (module.lookupSymbol(kGridName))
    return module.emitError() << "cannot export to the shard dialect: the "
                                 "module already has a symbol @"
                              << kGridName;
  if (failed(buildGrid(graphOps)))
    return failure();

  for (func::FuncOp func : funcs) {
    SmallVector<Operation *> ops;
    for (Operation &op : func.getBody().front())
      if (isa<g::PPCDialect>(op.getDialect()))
        ops.push_back(&op);
    for (Operation *op : ops) {
      builder.setInsertionPoint(op);
      if (failed(exportOp(op, func)))
        return failure();
    }
    for (Operation *op : llvm::reverse(ops))
      op->erase();
  }
  builder.setInsertionPointToStart(module.getBody());
  SmallVector<int64_t> shape = grid.shape();
  if (shape.empty())
    shape.push_back(1);
  shard::GridOp::create(builder, module.getLoc(), kGridName, shape);
  // The ppc module attributes (machine, search results) mean nothing
  // upstream.
  for (NamedAttribute attr : llvm::to_vector(module->getAttrs()))
    if (attr.getName().strref().starts_with("ppc."))
      module->removeAttr(attr.getName());
  return success();
}

struct ExportShardPass : public ppc::impl::ExportShardBase<ExportShardPass> {
  void runOnOperation() override {
    if (failed(Exporter(getOperation()).run()))
      signalPassFailure();
  }
};

} // namespace
