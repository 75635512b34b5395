//===- ImportUpstream.cpp - TOSA / linalg-on-tensors into ppc graph ops ---===//
//
// --ppc-import-upstream: rewrites the tensor functions MLIR front ends emit
// (torch-mlir's TOSA and linalg-on-tensors output) into ppc graph ops, op by
// op in program order. Each converted op's results replace its uses at once,
// so later ops see ppc values; helper values that only parameterize other ops
// (tosa.const_shape, tensor.empty, scalar arith.constant, zero points) are
// read where they are used and erased at the end. Weights and inputs follow
// the ONNX importer's rule (lib/Import): arguments are inputs, float
// constants of more than one element are trainable weights.
//
//===----------------------------------------------------------------------===//

#include "ppc/Dialect/Graph/GraphOps.h"
#include "ppc/Interop/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

#include <limits>
#include <numeric>

namespace ppc {
#define GEN_PASS_DEF_IMPORTUPSTREAM
#include "ppc/Interop/Passes.h.inc"
} // namespace ppc

using namespace mlir;
namespace g = ppc::graph;

void ppc::registerUpstreamDialects(DialectRegistry &registry) {
  registry
      .insert<tosa::TosaDialect, linalg::LinalgDialect, tensor::TensorDialect,
              arith::ArithDialect, math::MathDialect, shard::ShardDialect>();
}

namespace {

/// True for the dialects this pass imports from.
bool isUpstreamOp(Operation *op) {
  return isa<tosa::TosaDialect, linalg::LinalgDialect, tensor::TensorDialect,
             arith::ArithDialect, math::MathDialect>(op->getDialect());
}

/// Ops that only parameterize others (shapes, inits, zero points, scalars):
/// their users read them, they are not graph values themselves.
bool isHelperOp(Operation *op) {
  if (isa<tosa::ConstShapeOp, tensor::EmptyOp>(op))
    return true;
  if (auto c = dyn_cast<arith::ConstantOp>(op))
    return !isa<RankedTensorType>(c.getType());
  return false;
}

/// The splat float value of a constant tensor or scalar, if it is one.
std::optional<double> getSplatFloat(Value v) {
  Attribute attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  if (auto f = dyn_cast<FloatAttr>(attr))
    return f.getValueAsDouble();
  if (auto dense = dyn_cast<DenseFPElementsAttr>(attr))
    if (dense.isSplat())
      return dense.getSplatValue<APFloat>().convertToDouble();
  return std::nullopt;
}

class Importer {
public:
  explicit Importer(func::FuncOp func)
      : func(func), builder(func.getContext()) {}

  LogicalResult run();

private:
  func::FuncOp func;
  OpBuilder builder;
  int64_t numWeights = 0;
  /// Constants created here, erased at the end when nothing reads them (a
  /// zero point, a shift).
  SmallVector<Operation *> createdConstants;

  LogicalResult convert(Operation *op);
  LogicalResult fail(Operation *op, const Twine &reason) {
    return op->emitError() << "cannot import '" << op->getName()
                           << "' into the ppc graph dialect: " << reason;
  }

  Value constant(Location loc, ElementsAttr value, Operation *origin);
  Value splat(Location loc, RankedTensorType type, double value);
  Value transpose(Location loc, Value v, ArrayRef<int64_t> perm);
  Value reshape(Location loc, Value v, ArrayRef<int64_t> shape);
  /// Adds `init` to a contraction's result unless it is a zero splat.
  Value addInit(Location loc, Value result, Value init);
  /// `v` read through the projected permutation `map` of a loop nest over
  /// `shape`: transposed and reshaped so numpy broadcasting lines it up.
  FailureOr<Value> alignTo(Operation *op, Value v, AffineMap map,
                           ArrayRef<int64_t> shape);

  LogicalResult convertTosa(Operation *op);
  LogicalResult convertLinalg(Operation *op);
  LogicalResult convertGeneric(linalg::GenericOp op);
  LogicalResult convertTensor(Operation *op);
  template <typename PoolOp>
  Value nhwcPool(Operation *op, Value in, ArrayRef<int64_t> kernel,
                 ArrayRef<int64_t> stride, ArrayRef<int64_t> pad);
  void recognizeSoftmax();
};

Value Importer::constant(Location loc, ElementsAttr value, Operation *origin) {
  auto type = cast<RankedTensorType>(value.getType());
  Operation *op;
  // As the ONNX importer decides for initializers: a float tensor of more
  // than one element is a trainable parameter.
  if (isa<FloatType>(type.getElementType()) && type.getNumElements() > 1) {
    std::string name;
    if (auto nameLoc = dyn_cast<NameLoc>(origin->getLoc()))
      name = nameLoc.getName().str();
    else
      name = "weight" + std::to_string(numWeights);
    ++numWeights;
    op = g::WeightOp::create(builder, loc, type, builder.getStringAttr(name),
                             UnitAttr(), value);
  } else {
    op = g::ConstantOp::create(builder, loc, value);
  }
  createdConstants.push_back(op);
  return op->getResult(0);
}

Value Importer::splat(Location loc, RankedTensorType type, double value) {
  auto attr = DenseElementsAttr::get(
      type, FloatAttr::get(type.getElementType(), value));
  auto op = g::ConstantOp::create(builder, loc, attr);
  createdConstants.push_back(op);
  return op;
}

Value Importer::transpose(Location loc, Value v, ArrayRef<int64_t> perm) {
  // A transpose of a transpose that restores the order cancels (NHWC ops in
  // a row transpose back and forth).
  if (auto inner = v.getDefiningOp<g::TransposeOp>()) {
    ArrayRef<int64_t> first = inner.getPermutation();
    bool identity = first.size() == perm.size();
    for (size_t i = 0; identity && i < perm.size(); ++i)
      identity = first[perm[i]] == static_cast<int64_t>(i);
    if (identity)
      return inner.getInput();
  }
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(type.getDimSize(p));
  return g::TransposeOp::create(builder, loc, type.clone(shape), v,
                                builder.getDenseI64ArrayAttr(perm));
}

Value Importer::reshape(Location loc, Value v, ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getShape() == shape)
    return v;
  return g::ReshapeOp::create(builder, loc, type.clone(shape), v);
}

Value Importer::addInit(Location loc, Value result, Value init) {
  std::optional<double> c = getSplatFloat(init);
  if (c && *c == 0.0)
    return result;
  return g::AddOp::create(builder, loc, result.getType(), result, init);
}

FailureOr<Value> Importer::alignTo(Operation *op, Value v, AffineMap map,
                                   ArrayRef<int64_t> shape) {
  if (map.isIdentity())
    return v;
  if (!map.isProjectedPermutation(/*allowZeroInResults=*/false))
    return fail(op,
                "an operand's indexing map is not a projected "
                "permutation (only broadcasts and transposes are supported)");
  SmallVector<int64_t> dims;
  for (AffineExpr e : map.getResults())
    dims.push_back(cast<AffineDimExpr>(e).getPosition());
  // Order the operand's dims as the loops are ordered, then insert unit
  // dims for the loops it does not index.
  SmallVector<int64_t> perm(dims.size());
  std::iota(perm.begin(), perm.end(), 0);
  llvm::sort(perm, [&](int64_t a, int64_t b) { return dims[a] < dims[b]; });
  if (!llvm::is_sorted(dims))
    v = transpose(op->getLoc(), v, perm);
  SmallVector<int64_t> aligned(shape.size(), 1);
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> sorted(dims);
  llvm::sort(sorted);
  for (auto [i, d] : llvm::enumerate(sorted))
    aligned[d] = type.getDimSize(i);
  return reshape(op->getLoc(), v, aligned);
}

template <typename PoolOp>
Value Importer::nhwcPool(Operation *op, Value in, ArrayRef<int64_t> kernel,
                         ArrayRef<int64_t> stride, ArrayRef<int64_t> pad) {
  Location loc = op->getLoc();
  auto outType = cast<RankedTensorType>(op->getResult(0).getType());
  Value nchw = transpose(loc, in, {0, 3, 1, 2});
  auto nchwOut = outType.clone({outType.getDimSize(0), outType.getDimSize(3),
                                outType.getDimSize(1), outType.getDimSize(2)});
  // TOSA's pad is [top, bottom, left, right]; ppc's [top, left, bottom,
  // right]. TOSA's average excludes the padding.
  Value pooled = PoolOp::create(
      builder, loc, nchwOut, nchw, builder.getDenseI64ArrayAttr(kernel),
      builder.getDenseI64ArrayAttr(stride),
      builder.getDenseI64ArrayAttr({pad[0], pad[2], pad[1], pad[3]}),
      builder.getBoolAttr(false), builder.getBoolAttr(false));
  return transpose(loc, pooled, {0, 2, 3, 1});
}

LogicalResult Importer::convertTosa(Operation *op) {
  Location loc = op->getLoc();
  auto resultType = op->getNumResults()
                        ? dyn_cast<RankedTensorType>(op->getResult(0).getType())
                        : RankedTensorType();
  if (!resultType || !resultType.hasStaticShape())
    return fail(op, "its result has no static shape");
  auto in = [&](unsigned i) { return op->getOperand(i); };
  auto unary = [&](auto tag) -> Value {
    using OpTy = decltype(tag);
    return OpTy::create(builder, loc, resultType, in(0));
  };
  auto binary = [&](auto tag) -> Value {
    using OpTy = decltype(tag);
    return OpTy::create(builder, loc, resultType, in(0), in(1));
  };
  auto shapeOf = [&](Value v) -> std::optional<SmallVector<int64_t>> {
    auto shape = v.getDefiningOp<tosa::ConstShapeOp>();
    if (!shape)
      return std::nullopt;
    SmallVector<int64_t> values;
    for (const APInt &i : shape.getValues().getValues<APInt>())
      values.push_back(i.getSExtValue());
    return values;
  };

  Value result =
      llvm::TypeSwitch<Operation *, Value>(op)
          .Case(
              [&](tosa::ConstOp c) { return constant(loc, c.getValues(), op); })
          .Case([&](tosa::IdentityOp) { return in(0); })
          .Case([&](tosa::MatMulOp) { return binary(g::MatMulOp()); })
          .Case([&](tosa::AddOp) { return binary(g::AddOp()); })
          .Case([&](tosa::SubOp) { return binary(g::SubOp()); })
          .Case([&](tosa::MulOp m) -> Value {
            Attribute shiftAttr;
            if (matchPattern(m.getShift(), m_Constant(&shiftAttr)))
              if (auto ints = dyn_cast<DenseIntElementsAttr>(shiftAttr))
                if (ints.isSplat() && ints.getSplatValue<APInt>().isZero())
                  return binary(g::MulOp());
            return {};
          })
          .Case([&](tosa::MaximumOp) { return binary(g::MaxOp()); })
          .Case([&](tosa::MinimumOp) { return binary(g::MinOp()); })
          .Case([&](tosa::PowOp) { return binary(g::PowOp()); })
          .Case([&](tosa::ReciprocalOp) { return unary(g::ReciprocalOp()); })
          .Case([&](tosa::RsqrtOp) { return unary(g::RsqrtOp()); })
          .Case([&](tosa::ExpOp) { return unary(g::ExpOp()); })
          .Case([&](tosa::LogOp) { return unary(g::LogOp()); })
          .Case([&](tosa::TanhOp) { return unary(g::TanhOp()); })
          .Case([&](tosa::SigmoidOp) { return unary(g::SigmoidOp()); })
          .Case([&](tosa::ErfOp) { return unary(g::ErfOp()); })
          .Case([&](tosa::AbsOp) { return unary(g::AbsOp()); })
          .Case([&](tosa::NegateOp) { return unary(g::NegOp()); })
          .Case([&](tosa::CastOp) {
            return g::CastOp::create(builder, loc, resultType, in(0));
          })
          .Case([&](tosa::ClampOp c) -> Value {
            auto minAttr = dyn_cast<FloatAttr>(c.getMinValAttr());
            auto maxAttr = dyn_cast<FloatAttr>(c.getMaxValAttr());
            if (!minAttr || !maxAttr)
              return {};
            double lo = minAttr.getValueAsDouble();
            double hi = maxAttr.getValueAsDouble();
            // torch-mlir's relu clamps to the type's largest value.
            bool noMax = hi >= std::numeric_limits<float>::max();
            if (lo == 0.0 && noMax)
              return unary(g::ReluOp());
            return g::ClipOp::create(
                builder, loc, resultType, in(0), builder.getF64FloatAttr(lo),
                noMax ? FloatAttr() : builder.getF64FloatAttr(hi));
          })
          .Case([&](tosa::ReduceSumOp r) {
            return g::ReduceSumOp::create(
                builder, loc, resultType, in(0),
                builder.getDenseI64ArrayAttr({int64_t(r.getAxis())}),
                builder.getBoolAttr(true));
          })
          .Case([&](tosa::ReduceMaxOp r) {
            return g::ReduceMaxOp::create(
                builder, loc, resultType, in(0),
                builder.getDenseI64ArrayAttr({int64_t(r.getAxis())}),
                builder.getBoolAttr(true));
          })
          .Case([&](tosa::ReshapeOp) {
            return g::ReshapeOp::create(builder, loc, resultType, in(0));
          })
          .Case([&](tosa::TransposeOp t) {
            SmallVector<int64_t> perm(t.getPerms().begin(), t.getPerms().end());
            return transpose(loc, in(0), perm);
          })
          .Case([&](tosa::ConcatOp c) {
            return g::ConcatOp::create(builder, loc, resultType,
                                       op->getOperands(),
                                       builder.getI64IntegerAttr(c.getAxis()));
          })
          .Case([&](tosa::SliceOp s) -> Value {
            auto start = shapeOf(s.getStart());
            if (!start)
              return {};
            SmallVector<int64_t> steps(start->size(), 1);
            return g::SliceOp::create(builder, loc, resultType, in(0),
                                      builder.getDenseI64ArrayAttr(*start),
                                      builder.getDenseI64ArrayAttr(steps));
          })
          .Case([&](tosa::Conv2DOp c) -> Value {
            // NHWC input and OHWI weight around ppc's NCHW/OIHW conv2d.
            ArrayRef<int64_t> pad = c.getPad(), stride = c.getStride(),
                              dilation = c.getDilation();
            Value input = transpose(loc, c.getInput(), {0, 3, 1, 2});
            Value weight = transpose(loc, c.getWeight(), {0, 3, 1, 2});
            auto biasType = cast<RankedTensorType>(c.getBias().getType());
            Value bias = c.getBias();
            std::optional<double> biasSplat = getSplatFloat(bias);
            int64_t channels = resultType.getDimSize(3);
            if (biasSplat && *biasSplat == 0.0)
              bias = {};
            else if (biasType.getDimSize(0) != channels)
              bias = g::BroadcastOp::create(builder, loc,
                                            biasType.clone({channels}), bias);
            auto outType = resultType.clone({resultType.getDimSize(0), channels,
                                             resultType.getDimSize(1),
                                             resultType.getDimSize(2)});
            Value conv = g::Conv2DOp::create(
                builder, loc, outType, input, weight, bias,
                builder.getDenseI64ArrayAttr(stride),
                builder.getDenseI64ArrayAttr({pad[0], pad[2], pad[1], pad[3]}),
                builder.getDenseI64ArrayAttr(dilation),
                builder.getI64IntegerAttr(1));
            return transpose(loc, conv, {0, 2, 3, 1});
          })
          .Case([&](tosa::AvgPool2dOp p) {
            return nhwcPool<g::AvgPool2DOp>(op, p.getInput(), p.getKernel(),
                                            p.getStride(), p.getPad());
          })
          .Case([&](tosa::MaxPool2dOp p) {
            return nhwcPool<g::MaxPool2DOp>(op, p.getInput(), p.getKernel(),
                                            p.getStride(), p.getPad());
          })
          .Default([](Operation *) { return Value(); });
  if (!result) {
    if (isa<tosa::MulOp>(op))
      return fail(op, "only a zero shift is supported");
    if (isa<tosa::ClampOp>(op))
      return fail(op, "only floating-point bounds are supported");
    if (isa<tosa::SliceOp>(op))
      return fail(op, "its start is not a tosa.const_shape");
    return fail(op, "ppc has no such op");
  }
  op->getResult(0).replaceAllUsesWith(result);
  return success();
}

LogicalResult Importer::convertGeneric(linalg::GenericOp op) {
  Location loc = op.getLoc();
  if (op.getNumDpsInits() != 1)
    return fail(op, "only generics with one result are supported");
  auto resultType = cast<RankedTensorType>(op.getResult(0).getType());
  Block &body = op.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  Value yielded = yield.getOperand(0);
  AffineMap outMap = op.getIndexingMapsArray().back();
  SmallVector<int64_t> loopShape = op.getStaticLoopRanges();
  unsigned numInputs = op.getNumDpsInputs();

  // The payload value `v` as a ppc value: a block argument (an input read
  // through its map), or a scalar constant defined outside the body.
  auto operandFor = [&](Value v) -> FailureOr<Value> {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner() != &body || arg.getArgNumber() >= numInputs)
        return fail(op, "its payload reads the output");
      return alignTo(
          op, op.getDpsInputOperand(arg.getArgNumber())->get(),
          op.getMatchingIndexingMap(op.getDpsInputOperand(arg.getArgNumber())),
          loopShape);
    }
    if (std::optional<double> c = getSplatFloat(v))
      return splat(loc, resultType.clone(ArrayRef<int64_t>{}), *c);
    return fail(op, "its payload reads a value that is not an input or a "
                    "constant");
  };

  bool allParallel = llvm::all_of(op.getIteratorTypesArray(), [](auto t) {
    return t == utils::IteratorType::parallel;
  });
  Operation *payload = yielded.getDefiningOp();
  if (payload && payload->getBlock() != &body)
    payload = nullptr;

  if (allParallel) {
    if (!outMap.isIdentity())
      return fail(op, "its output map is not the identity");
    Value result;
    if (!payload) {
      // A copy: broadcast or transpose of its input.
      FailureOr<Value> v = operandFor(yielded);
      if (failed(v))
        return failure();
      result = *v;
      if (cast<RankedTensorType>(result.getType()).getShape() !=
          resultType.getShape())
        result = g::BroadcastOp::create(builder, loc, resultType, result);
    } else {
      SmallVector<Value> args;
      for (Value v : payload->getOperands()) {
        FailureOr<Value> a = operandFor(v);
        if (failed(a))
          return failure();
        args.push_back(*a);
      }
      auto binary = [&](auto tag) -> Value {
        using OpTy = decltype(tag);
        return OpTy::create(builder, loc, resultType, args[0], args[1]);
      };
      // Elementwise ops broadcast like numpy; a unary op's input is
      // broadcast first.
      auto unaryInput = [&]() -> Value {
        if (cast<RankedTensorType>(args[0].getType()).getShape() ==
            resultType.getShape())
          return args[0];
        return g::BroadcastOp::create(builder, loc, resultType, args[0]);
      };
      auto unary = [&](auto tag) -> Value {
        using OpTy = decltype(tag);
        return OpTy::create(builder, loc, resultType, unaryInput());
      };
      result = llvm::TypeSwitch<Operation *, Value>(payload)
                   .Case([&](arith::AddFOp) { return binary(g::AddOp()); })
                   .Case([&](arith::SubFOp) { return binary(g::SubOp()); })
                   .Case([&](arith::MulFOp) { return binary(g::MulOp()); })
                   .Case([&](arith::DivFOp) -> Value {
                     std::optional<double> one =
                         getSplatFloat(payload->getOperand(0));
                     if (one && *one == 1.0) {
                       args[0] = args[1];
                       return unary(g::ReciprocalOp());
                     }
                     return binary(g::DivOp());
                   })
                   .Case<arith::MaximumFOp, arith::MaxNumFOp>([&](Operation *) {
                     // max(x, 0): torch-mlir's relu.
                     for (int i = 0; i < 2; ++i) {
                       std::optional<double> c =
                           getSplatFloat(payload->getOperand(i));
                       if (c && *c == 0.0) {
                         args[0] = args[1 - i];
                         return unary(g::ReluOp());
                       }
                     }
                     return binary(g::MaxOp());
                   })
                   .Case<arith::MinimumFOp, arith::MinNumFOp>(
                       [&](Operation *) { return binary(g::MinOp()); })
                   .Case([&](math::PowFOp) { return binary(g::PowOp()); })
                   .Case([&](arith::NegFOp) { return unary(g::NegOp()); })
                   .Case([&](math::ExpOp) { return unary(g::ExpOp()); })
                   .Case([&](math::LogOp) { return unary(g::LogOp()); })
                   .Case([&](math::TanhOp) { return unary(g::TanhOp()); })
                   .Case([&](math::SqrtOp) { return unary(g::SqrtOp()); })
                   .Case([&](math::RsqrtOp) { return unary(g::RsqrtOp()); })
                   .Case([&](math::ErfOp) { return unary(g::ErfOp()); })
                   .Case([&](math::AbsFOp) { return unary(g::AbsOp()); })
                   .Case<arith::ExtFOp, arith::TruncFOp>([&](Operation *) {
                     return g::CastOp::create(builder, loc, resultType,
                                              unaryInput());
                   })
                   .Default([](Operation *) { return Value(); });
      if (!result)
        return fail(op, "its payload '" + payload->getName().getStringRef() +
                            "' has no ppc elementwise op");
    }
    op.getResult(0).replaceAllUsesWith(result);
    return success();
  }

  // A reduction: one input read whole, the output its projection, the
  // payload combining the element with the accumulator.
  if (numInputs != 1 || !payload || payload->getNumOperands() != 2 ||
      !op.getMatchingIndexingMap(op.getDpsInputOperand(0)).isIdentity() ||
      !outMap.isProjectedPermutation() ||
      !llvm::is_sorted(llvm::map_range(outMap.getResults(), [](AffineExpr e) {
        return cast<AffineDimExpr>(e).getPosition();
      })))
    return fail(op, "only elementwise generics and single-input sum/max "
                    "reductions are supported");
  SmallVector<int64_t> axes;
  for (auto [i, type] : llvm::enumerate(op.getIteratorTypesArray()))
    if (type == utils::IteratorType::reduction)
      axes.push_back(i);
  Value input = op.getDpsInputOperand(0)->get();
  Value init = op.getDpsInitOperand(0)->get();
  Value result;
  if (isa<arith::AddFOp>(payload)) {
    result = g::ReduceSumOp::create(builder, loc, resultType, input,
                                    builder.getDenseI64ArrayAttr(axes),
                                    builder.getBoolAttr(false));
    result = addInit(loc, result, init);
  } else if (isa<arith::MaximumFOp, arith::MaxNumFOp>(payload)) {
    result = g::ReduceMaxOp::create(builder, loc, resultType, input,
                                    builder.getDenseI64ArrayAttr(axes),
                                    builder.getBoolAttr(false));
    // The init is -inf (or the lowest float) for a plain max.
    std::optional<double> c = getSplatFloat(init);
    if (!c || *c > std::numeric_limits<float>::lowest())
      result = g::MaxOp::create(builder, loc, resultType, result, init);
  } else {
    return fail(op, "its reduction payload '" +
                        payload->getName().getStringRef() +
                        "' is neither a sum nor a max");
  }
  op.getResult(0).replaceAllUsesWith(result);
  return success();
}

LogicalResult Importer::convertLinalg(Operation *op) {
  Location loc = op->getLoc();
  auto resultType = op->getNumResults()
                        ? dyn_cast<RankedTensorType>(op->getResult(0).getType())
                        : RankedTensorType();
  if (!resultType || !resultType.hasStaticShape())
    return fail(op, "only linalg on tensors of static shape is supported");
  if (auto generic = dyn_cast<linalg::GenericOp>(op))
    return convertGeneric(generic);
  auto linalgOp = cast<linalg::LinalgOp>(op);
  if (linalgOp.hasUserDefinedMaps())
    return fail(op, "user-defined indexing maps are not supported");
  auto in = [&](unsigned i) { return linalgOp.getDpsInputOperand(i)->get(); };
  Value init = linalgOp.getNumDpsInits() ? linalgOp.getDpsInitOperand(0)->get()
                                         : Value();
  auto binary = [&](auto tag) -> Value {
    using OpTy = decltype(tag);
    return OpTy::create(builder, loc, resultType, in(0), in(1));
  };
  auto unary = [&](auto tag) -> Value {
    using OpTy = decltype(tag);
    return OpTy::create(builder, loc, resultType, in(0));
  };
  Value result =
      llvm::TypeSwitch<Operation *, Value>(op)
          .Case([&](linalg::FillOp f) -> Value {
            std::optional<double> c = getSplatFloat(f.getInputs()[0]);
            return c ? splat(loc, resultType, *c) : Value();
          })
          .Case<linalg::MatmulOp, linalg::BatchMatmulOp>([&](Operation *) {
            return addInit(loc, binary(g::MatMulOp()), init);
          })
          .Case([&](linalg::Conv2DNchwFchwOp c) {
            SmallVector<int64_t> strides(c.getStrides().getValues<int64_t>());
            SmallVector<int64_t> dilations(
                c.getDilations().getValues<int64_t>());
            Value conv = g::Conv2DOp::create(
                builder, loc, resultType, in(0), in(1), Value(),
                builder.getDenseI64ArrayAttr(strides),
                builder.getDenseI64ArrayAttr({0, 0, 0, 0}),
                builder.getDenseI64ArrayAttr(dilations),
                builder.getI64IntegerAttr(1));
            return addInit(loc, conv, init);
          })
          .Case([&](linalg::TransposeOp t) {
            return transpose(loc, in(0), t.getPermutation());
          })
          .Case([&](linalg::AddOp) { return binary(g::AddOp()); })
          .Case([&](linalg::SubOp) { return binary(g::SubOp()); })
          .Case([&](linalg::MulOp) { return binary(g::MulOp()); })
          .Case([&](linalg::DivOp) { return binary(g::DivOp()); })
          .Case([&](linalg::MaxOp) { return binary(g::MaxOp()); })
          .Case([&](linalg::MinOp) { return binary(g::MinOp()); })
          .Case([&](linalg::ExpOp) { return unary(g::ExpOp()); })
          .Case([&](linalg::LogOp) { return unary(g::LogOp()); })
          .Case([&](linalg::AbsOp) { return unary(g::AbsOp()); })
          .Case([&](linalg::NegFOp) { return unary(g::NegOp()); })
          .Case([&](linalg::SqrtOp) { return unary(g::SqrtOp()); })
          .Case([&](linalg::RsqrtOp) { return unary(g::RsqrtOp()); })
          .Case([&](linalg::TanhOp) { return unary(g::TanhOp()); })
          .Case([&](linalg::ErfOp) { return unary(g::ErfOp()); })
          .Case([&](linalg::ReciprocalOp) { return unary(g::ReciprocalOp()); })
          .Default([](Operation *) { return Value(); });
  if (!result)
    return fail(op, isa<linalg::FillOp>(op) ? "its value is not a constant"
                                            : "ppc has no such op");
  op->getResult(0).replaceAllUsesWith(result);
  return success();
}

LogicalResult Importer::convertTensor(Operation *op) {
  Location loc = op->getLoc();
  auto resultType = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!resultType || !resultType.hasStaticShape())
    return fail(op, "its result has no static shape");
  Value result =
      llvm::TypeSwitch<Operation *, Value>(op)
          .Case<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(
              [&](Operation *) {
                return g::ReshapeOp::create(builder, loc, resultType,
                                            op->getOperand(0));
              })
          .Case([&](tensor::CastOp c) -> Value {
            return c.getSource().getType() == resultType ? c.getSource()
                                                         : Value();
          })
          .Case([&](arith::ConstantOp c) {
            return constant(loc, cast<ElementsAttr>(c.getValue()), op);
          })
          .Case([&](tensor::PadOp p) -> Value {
            std::optional<double> value =
                getSplatFloat(p.getConstantPaddingValue());
            if (!value)
              return {};
            SmallVector<int64_t> pads(p.getStaticLow());
            llvm::append_range(pads, p.getStaticHigh());
            if (llvm::any_of(pads, ShapedType::isDynamic))
              return {};
            return g::PadOp::create(builder, loc, resultType, p.getSource(),
                                    builder.getDenseI64ArrayAttr(pads),
                                    builder.getF64FloatAttr(*value));
          })
          .Default([](Operation *) { return Value(); });
  if (!result)
    return fail(op, isa<tensor::PadOp>(op)
                        ? "only static padding with a constant is supported"
                        : "ppc has no such op");
  op->getResult(0).replaceAllUsesWith(result);
  return success();
}

LogicalResult Importer::convert(Operation *op) {
  if (isa<tosa::TosaDialect>(op->getDialect()))
    return convertTosa(op);
  if (isa<linalg::LinalgOp>(op))
    return convertLinalg(op);
  return convertTensor(op);
}

/// `exp(x - max(x)) * reciprocal(sum(...))` (or divided by the sum), the
/// sum and max over one axis with kept dims, as front ends decompose
/// softmax: one ppc.softmax.
void Importer::recognizeSoftmax() {
  auto reduceAxis = [](Operation *op, Value input) -> std::optional<int64_t> {
    auto check = [&](auto r) -> std::optional<int64_t> {
      if (r.getInput() != input || r.getAxes().size() != 1 || !r.getKeepDims())
        return std::nullopt;
      return r.getAxes()[0];
    };
    if (auto r = dyn_cast_or_null<g::ReduceSumOp>(op))
      return check(r);
    if (auto r = dyn_cast_or_null<g::ReduceMaxOp>(op))
      return check(r);
    return std::nullopt;
  };
  SmallVector<Operation *> roots;
  func.walk([&](Operation *op) {
    if (isa<g::MulOp, g::DivOp>(op))
      roots.push_back(op);
  });
  for (Operation *root : roots) {
    Value e = root->getOperand(0), denom = root->getOperand(1);
    auto exp = e.getDefiningOp<g::ExpOp>();
    if (!exp || e.getType() != root->getResult(0).getType())
      continue;
    if (isa<g::MulOp>(root)) {
      auto recip = denom.getDefiningOp<g::ReciprocalOp>();
      if (!recip)
        continue;
      denom = recip.getInput();
    }
    auto sub = exp.getInput().getDefiningOp<g::SubOp>();
    if (!sub)
      continue;
    Value x = sub.getLhs();
    std::optional<int64_t> sumAxis = reduceAxis(denom.getDefiningOp(), e);
    std::optional<int64_t> maxAxis =
        reduceAxis(sub.getRhs().getDefiningOp(), x);
    if (!sumAxis || !maxAxis || *sumAxis != *maxAxis ||
        !isa<g::ReduceMaxOp>(sub.getRhs().getDefiningOp()) ||
        x.getType() != root->getResult(0).getType())
      continue;
    builder.setInsertionPoint(root);
    Value softmax =
        g::SoftmaxOp::create(builder, root->getLoc(), x.getType(), x,
                             builder.getI64IntegerAttr(*sumAxis));
    root->getResult(0).replaceAllUsesWith(softmax);
  }
}

LogicalResult Importer::run() {
  bool hasUpstream = false;
  func.walk([&](Operation *op) { hasUpstream |= isUpstreamOp(op); });
  if (!hasUpstream)
    return success();
  if (!func.getBody().hasOneBlock())
    return func.emitError() << "cannot import @" << func.getSymName()
                            << ": only single-block functions are supported";
  Block &block = func.getBody().front();
  SmallVector<Operation *> upstream;
  for (Operation &op : block)
    if (isUpstreamOp(&op))
      upstream.push_back(&op);
  // Ops of other dialects (control flow, calls) would be left reading ppc
  // values: the function cannot become a ppc graph.
  for (Operation &op : block)
    if (!isUpstreamOp(&op) && !isa<func::ReturnOp>(op) &&
        !isa<g::PPCDialect>(op.getDialect()))
      return op.emitError() << "cannot import '" << op.getName()
                            << "' into the ppc graph dialect: ppc has no "
                               "such op";

  for (BlockArgument arg : func.getArguments()) {
    if (!isa<RankedTensorType>(arg.getType()) ||
        !cast<RankedTensorType>(arg.getType()).hasStaticShape())
      return func.emitError()
             << "cannot import @" << func.getSymName() << ": argument #"
             << arg.getArgNumber() << " is not a tensor of static shape";
    if (!func.getArgAttr(arg.getArgNumber(), "ppc.name"))
      func.setArgAttr(arg.getArgNumber(), "ppc.name",
                      builder.getStringAttr("arg" + Twine(arg.getArgNumber())));
  }

  for (Operation *op : upstream) {
    if (isHelperOp(op))
      continue;
    builder.setInsertionPoint(op);
    if (failed(convert(op)))
      return failure();
  }
  recognizeSoftmax();

  // Erase in reverse order: users before what they use. Converted ops have
  // no uses left; helpers are used only by converted ops.
  for (Operation *op : llvm::reverse(upstream)) {
    if (!op->use_empty()) {
      Operation *user = *op->getUsers().begin();
      return user->emitError()
             << "cannot import '" << user->getName() << "': it uses '"
             << op->getName() << "', which has no ppc counterpart here";
    }
    op->erase();
  }
  // Dead ppc ops left by replaced patterns (softmax's pieces, unused zero
  // points and shifts), users before producers.
  SmallVector<Operation *> ppcOps;
  for (Operation &op : block)
    if (isa<g::PPCDialect>(op.getDialect()))
      ppcOps.push_back(&op);
  for (Operation *op : llvm::reverse(ppcOps))
    if (op->use_empty() && isPure(op))
      op->erase();
  return success();
}

struct ImportUpstreamPass
    : public ppc::impl::ImportUpstreamBase<ImportUpstreamPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(Importer(func).run()))
        return signalPassFailure();
  }
};

} // namespace
