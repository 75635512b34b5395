//===- Patterns.cpp - Recognize norm, GELU and attention chains -----------===//
//
// Exporters before opset 17 (and before GELU became an ONNX op) write
// LayerNorm, RMSNorm, GELU and SiLU as chains of elementwise ops. The search
// and the cost model should see one op each: the chains are matched on the
// imported ppc ops and replaced. The attention core (scores, scale, causal
// mask, softmax, dropout, context) becomes one fused ppc.attention, which reads
// per-head [B, S, H, D] tensors as they are (layout "bshd") where the
// exporter transposed them to [B, H, S, D] only for the attention. A bias Add
// after a bias-less ppc.linear (MatMul + Add, the way PyTorch exports
// nn.Linear on 3-D inputs) is folded into the linear.
//
//===----------------------------------------------------------------------===//

#include "ImporterInternal.h"

#include "ppc/Dialect/Graph/GraphOps.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <cmath>

using namespace mlir;
using namespace ppc;
using namespace ppc::onnx_import;

namespace g = ppc::graph;

/// The value of a one-element (or splat) float ppc.constant.
static std::optional<double> getScalarConstant(Value v) {
  auto op = v.getDefiningOp<g::ConstantOp>();
  if (!op)
    return std::nullopt;
  auto attr = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!attr || !isa<FloatType>(attr.getElementType()) || !attr.isSplat())
    return std::nullopt;
  APFloat value = attr.getSplatValue<APFloat>();
  if (&value.getSemantics() == &APFloat::IEEEsingle())
    return widenFloat(value.convertToFloat());
  bool lost;
  value.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
  return value.convertToDouble();
}

static bool isConstantNear(Value v, double expected) {
  std::optional<double> c = getScalarConstant(v);
  return c &&
         std::fabs(*c - expected) <= 1e-4 * std::max(1.0, std::fabs(expected));
}

/// Flattens a tree of single-use multiplications into its factors.
static void collectFactors(Value v, bool isRoot,
                           SmallVectorImpl<Value> &factors) {
  auto mul = v.getDefiningOp<g::MulOp>();
  if (mul && (isRoot || v.hasOneUse())) {
    collectFactors(mul.getLhs(), false, factors);
    collectFactors(mul.getRhs(), false, factors);
    return;
  }
  factors.push_back(v);
}

/// If `v` is `c + other` (either order) with c ~= `constant`, returns other.
static Value matchAddConstant(Value v, double constant) {
  auto add = v.getDefiningOp<g::AddOp>();
  if (!add || !v.hasOneUse())
    return {};
  if (isConstantNear(add.getLhs(), constant))
    return add.getRhs();
  if (isConstantNear(add.getRhs(), constant))
    return add.getLhs();
  return {};
}

/// Removes from `factors` one constant ~= `constant`; false if none.
static bool takeConstant(SmallVectorImpl<Value> &factors, double constant) {
  auto it = llvm::find_if(factors,
                          [&](Value f) { return isConstantNear(f, constant); });
  if (it == factors.end())
    return false;
  factors.erase(it);
  return true;
}

/// erf(x / sqrt(2)) or erf(x * (1 / sqrt(2))): returns x.
static Value matchErfArgument(Value v) {
  auto erf = v.getDefiningOp<g::ErfOp>();
  if (!erf || !v.hasOneUse() || !erf.getInput().hasOneUse())
    return {};
  Value t = erf.getInput();
  if (auto div = t.getDefiningOp<g::DivOp>())
    return isConstantNear(div.getRhs(), M_SQRT2) ? div.getLhs() : Value();
  SmallVector<Value> factors;
  collectFactors(t, true, factors);
  if (factors.size() == 2 && takeConstant(factors, M_SQRT1_2))
    return factors[0];
  return {};
}

/// tanh(sqrt(2/pi) * (x + 0.044715 * x^3)): returns x.
static Value matchTanhArgument(Value v) {
  auto tanh = v.getDefiningOp<g::TanhOp>();
  if (!tanh || !v.hasOneUse())
    return {};
  SmallVector<Value> outer;
  collectFactors(tanh.getInput(), true, outer);
  if (outer.size() != 2 || !takeConstant(outer, std::sqrt(2.0 / M_PI)))
    return {};
  auto sum = outer[0].getDefiningOp<g::AddOp>();
  if (!sum || !outer[0].hasOneUse())
    return {};
  for (auto operands : {std::pair(sum.getLhs(), sum.getRhs()),
                        std::pair(sum.getRhs(), sum.getLhs())}) {
    Value x = operands.first, cubic = operands.second;
    SmallVector<Value> factors;
    collectFactors(cubic, false, factors);
    if (!cubic.hasOneUse() || !takeConstant(factors, 0.044715))
      continue;
    if (factors.size() == 1) {
      auto pow = factors[0].getDefiningOp<g::PowOp>();
      if (pow && pow.getLhs() == x && isConstantNear(pow.getRhs(), 3.0))
        return x;
    } else if (factors.size() == 3 &&
               llvm::all_of(factors, [&](Value f) { return f == x; })) {
      return x;
    }
  }
  return {};
}

/// x * 0.5 * (1 + erf(x / sqrt2)) or the tanh form, in any operand order.
static bool matchGelu(g::MulOp root, OpBuilder &builder) {
  SmallVector<Value> factors;
  collectFactors(root.getResult(), true, factors);
  if (factors.size() != 3 || !takeConstant(factors, 0.5))
    return false;
  for (int i = 0; i < 2; ++i) {
    Value x = factors[i], inner = matchAddConstant(factors[1 - i], 1.0);
    if (!inner || x.getType() != root.getType())
      continue;
    std::optional<g::GeluApproximation> approx;
    if (matchErfArgument(inner) == x)
      approx = g::GeluApproximation::none;
    else if (matchTanhArgument(inner) == x)
      approx = g::GeluApproximation::tanh;
    if (!approx)
      continue;
    builder.setInsertionPoint(root);
    auto gelu =
        g::GeluOp::create(builder, root.getLoc(), root.getType(), x, *approx);
    root.getResult().replaceAllUsesWith(gelu.getResult());
    return true;
  }
  return false;
}

/// The first normalized dim if `axes` are the trailing dims of a rank-`rank`
/// tensor, else -1.
static int64_t getTrailingAxis(ArrayRef<int64_t> axes, int64_t rank) {
  if (axes.empty())
    return -1;
  SmallVector<int64_t> sorted;
  for (int64_t a : axes)
    sorted.push_back(a < 0 ? a + rank : a);
  llvm::sort(sorted);
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != rank - static_cast<int64_t>(sorted.size() - i))
      return -1;
  return sorted.front();
}

/// If `user` is the only user of `v` and an op of `OpTy`, returns it.
template <typename OpTy> static OpTy getSingleUser(Value v) {
  if (!v.hasOneUse())
    return {};
  return dyn_cast<OpTy>(*v.getUsers().begin());
}

/// An affine parameter (scale or bias) applied by `op` to `v`: the other
/// operand, when it holds exactly the normalized dims.
template <typename OpTy>
static Value matchAffine(OpTy op, Value v, ArrayRef<int64_t> normShape) {
  if (!op || op.getType() != v.getType())
    return {};
  Value other = op.getLhs() == v ? op.getRhs() : op.getLhs();
  auto type = cast<RankedTensorType>(other.getType());
  // Leading 1s broadcast away: [1, 1, D] acts as [D].
  ArrayRef<int64_t> shape = type.getShape();
  while (shape.size() > normShape.size() && shape.front() == 1)
    shape = shape.drop_front();
  return shape == normShape ? other : Value();
}

/// `stats + eps` (either order), the single user of `stats`: the add, or
/// null where there is none or eps is not a scalar constant.
static g::AddOp matchEpsilonAdd(Value stats, double &eps) {
  auto add = getSingleUser<g::AddOp>(stats);
  if (!add)
    return {};
  std::optional<double> value =
      getScalarConstant(add.getLhs() == stats ? add.getRhs() : add.getLhs());
  if (!value)
    return {};
  eps = *value;
  return add;
}

/// Replaces `root`'s result with layer_norm over x's dims from `axis` on:
/// `scale` (ones where null) and `bias` (none where null) reshaped to the
/// normalized shape.
static void replaceWithLayerNorm(OpBuilder &builder, Operation *root, Value x,
                                 int64_t axis, Value scale, Value bias,
                                 double eps, bool rms) {
  auto xType = cast<RankedTensorType>(x.getType());
  auto normType = RankedTensorType::get(xType.getShape().drop_front(axis),
                                        xType.getElementType());
  builder.setInsertionPoint(root);
  auto reshapeTo = [&](Value v) -> Value {
    if (!v || v.getType() == normType)
      return v;
    return g::ReshapeOp::create(builder, root->getLoc(), normType, v);
  };
  if (!scale)
    scale = g::ConstantOp::create(
        builder, root->getLoc(),
        DenseElementsAttr::get(
            normType, builder.getFloatAttr(xType.getElementType(), 1.0)));
  auto norm = g::LayerNormOp::create(
      builder, root->getLoc(), xType, x, reshapeTo(scale), reshapeTo(bias),
      builder.getI64IntegerAttr(axis), builder.getF64FloatAttr(eps),
      builder.getBoolAttr(rms));
  root->getResult(0).replaceAllUsesWith(norm.getResult());
}

/// mean = ReduceMean(x); d = x - mean; var = ReduceMean(d^2 or d*d);
/// y = d / sqrt(var + eps) [* scale] [+ bias].
static bool matchLayerNorm(g::ReduceMeanOp mean, OpBuilder &builder) {
  Value x = mean.getInput();
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t axis = getTrailingAxis(mean.getAxes(), xType.getRank());
  if (axis < 0 || !mean.getKeepDims())
    return false;
  auto sub = getSingleUser<g::SubOp>(mean.getResult());
  if (!sub || sub.getLhs() != x || sub.getRhs() != mean.getResult() ||
      sub.getType() != xType)
    return false;
  Value d = sub.getResult();
  // d feeds the square and the final division, nothing else.
  Operation *square = nullptr;
  g::DivOp div;
  for (Operation *user : d.getUsers()) {
    if (auto pow = dyn_cast<g::PowOp>(user);
        pow && pow.getLhs() == d && isConstantNear(pow.getRhs(), 2.0))
      square = user;
    else if (auto mul = dyn_cast<g::MulOp>(user);
             mul && mul.getLhs() == d && mul.getRhs() == d)
      square = user;
    else if (auto dv = dyn_cast<g::DivOp>(user); dv && dv.getLhs() == d)
      div = dv;
    else
      return false;
  }
  if (!square || !div)
    return false;
  auto var = getSingleUser<g::ReduceMeanOp>(square->getResult(0));
  if (!var || var.getAxes() != mean.getAxes() || !var.getKeepDims())
    return false;
  double eps;
  auto addEps = matchEpsilonAdd(var.getResult(), eps);
  if (!addEps)
    return false;
  auto sqrt = getSingleUser<g::SqrtOp>(addEps.getResult());
  if (!sqrt || div.getRhs() != sqrt.getResult() ||
      !sqrt.getResult().hasOneUse())
    return false;

  ArrayRef<int64_t> normShape = xType.getShape().drop_front(axis);
  Operation *root = div;
  Value scale, bias;
  auto scaleMul = getSingleUser<g::MulOp>(div.getResult());
  if ((scale = matchAffine(scaleMul, div.getResult(), normShape))) {
    root = scaleMul;
    auto biasAdd = getSingleUser<g::AddOp>(scaleMul.getResult());
    if ((bias = matchAffine(biasAdd, scaleMul.getResult(), normShape)))
      root = biasAdd;
  }
  replaceWithLayerNorm(builder, root, x, axis, scale, bias, eps,
                       /*rms=*/false);
  return true;
}

/// RMSNorm as Llama and T5 write it: ms = ReduceMean(x^2 or x*x);
/// y = x * (1 / sqrt(ms + eps)) (Div(1, Sqrt), Reciprocal(Sqrt) or Rsqrt)
/// or y = x / sqrt(ms + eps); then [* scale]. Becomes layer_norm {rms}.
static bool matchRmsNorm(g::ReduceMeanOp ms, OpBuilder &builder) {
  Operation *square = ms.getInput().getDefiningOp();
  Value x;
  if (auto pow = dyn_cast_or_null<g::PowOp>(square);
      pow && isConstantNear(pow.getRhs(), 2.0))
    x = pow.getLhs();
  else if (auto mul = dyn_cast_or_null<g::MulOp>(square);
           mul && mul.getLhs() == mul.getRhs())
    x = mul.getLhs();
  else
    return false;
  auto xType = cast<RankedTensorType>(x.getType());
  int64_t axis = getTrailingAxis(ms.getAxes(), xType.getRank());
  if (axis < 0 || !ms.getKeepDims() ||
      square->getResult(0).getType() != xType ||
      !square->getResult(0).hasOneUse())
    return false;
  double eps;
  auto addEps = matchEpsilonAdd(ms.getResult(), eps);
  if (!addEps)
    return false;
  // The inverse root, or the division by the root that ends the chain.
  Value inverse;
  Operation *root = nullptr;
  if (auto rsqrt = getSingleUser<g::RsqrtOp>(addEps.getResult())) {
    inverse = rsqrt.getResult();
  } else if (auto sqrt = getSingleUser<g::SqrtOp>(addEps.getResult())) {
    if (auto div = getSingleUser<g::DivOp>(sqrt.getResult());
        div && div.getRhs() == sqrt.getResult()) {
      if (div.getLhs() == x && div.getType() == xType)
        root = div;
      else if (isConstantNear(div.getLhs(), 1.0))
        inverse = div.getResult();
    } else if (auto reciprocal =
                   getSingleUser<g::ReciprocalOp>(sqrt.getResult())) {
      inverse = reciprocal.getResult();
    }
  }
  if (inverse) {
    auto mul = getSingleUser<g::MulOp>(inverse);
    if (!mul || mul.getType() != xType ||
        (mul.getLhs() == x ? mul.getRhs() : mul.getLhs()) != inverse ||
        (mul.getLhs() != x && mul.getRhs() != x))
      return false;
    root = mul;
  }
  if (!root)
    return false;

  ArrayRef<int64_t> normShape = xType.getShape().drop_front(axis);
  Value normalized = root->getResult(0), scale;
  auto scaleMul = getSingleUser<g::MulOp>(normalized);
  if ((scale = matchAffine(scaleMul, normalized, normShape)))
    root = scaleMul;
  replaceWithLayerNorm(builder, root, x, axis, scale, Value(), eps,
                       /*rms=*/true);
  return true;
}

/// x * sigmoid(x) (either order): SiLU, as torch 1.13 exports F.silu (the
/// gate of SwiGLU feed-forward blocks).
static bool matchSilu(g::MulOp mul, OpBuilder &builder) {
  for (auto [x, gate] : {std::pair(mul.getLhs(), mul.getRhs()),
                         std::pair(mul.getRhs(), mul.getLhs())}) {
    auto sigmoid = gate.getDefiningOp<g::SigmoidOp>();
    if (!sigmoid || sigmoid.getInput() != x || !gate.hasOneUse() ||
        mul.getType() != x.getType())
      continue;
    builder.setInsertionPoint(mul);
    auto silu = g::SiluOp::create(builder, mul.getLoc(), mul.getType(), x);
    mul.getResult().replaceAllUsesWith(silu.getResult());
    return true;
  }
  return false;
}

/// linear(x, w) + b with b of shape [N] (either operand order).
static bool matchLinearBias(g::LinearOp linear, OpBuilder &builder) {
  if (linear.getBias())
    return false;
  auto add = getSingleUser<g::AddOp>(linear.getResult());
  if (!add || add.getType() != linear.getType())
    return false;
  Value bias = add.getLhs() == linear.getResult() ? add.getRhs() : add.getLhs();
  auto biasType = cast<RankedTensorType>(bias.getType());
  auto type = linear.getType();
  if (biasType.getRank() != 1 ||
      biasType.getDimSize(0) != type.getDimSize(type.getRank() - 1))
    return false;
  builder.setInsertionPoint(add);
  auto fused = g::LinearOp::create(builder, linear.getLoc(), type,
                                   linear.getInput(), linear.getWeight(), bias,
                                   linear.getTransposeWeight());
  add.getResult().replaceAllUsesWith(fused.getResult());
  return true;
}

/// If `v` is `x * c` or `x / c` (single use, c a scalar constant), returns x
/// and multiplies `scale` by c (or 1 / c).
static Value stripScalarFactor(Value v, double &scale) {
  if (!v.hasOneUse())
    return {};
  if (auto div = v.getDefiningOp<g::DivOp>()) {
    std::optional<double> c = getScalarConstant(div.getRhs());
    if (!c || *c == 0 || div.getLhs().getType() != v.getType())
      return {};
    scale /= *c;
    return div.getLhs();
  }
  if (auto mul = v.getDefiningOp<g::MulOp>())
    for (auto [x, factor] : {std::pair(mul.getLhs(), mul.getRhs()),
                             std::pair(mul.getRhs(), mul.getLhs())})
      if (std::optional<double> c = getScalarConstant(factor);
          c && x.getType() == v.getType()) {
        scale *= *c;
        return x;
      }
  return {};
}

/// Strips every scalar factor off `v` (see stripScalarFactor).
static Value stripScalarFactors(Value v, double &scale) {
  while (Value x = stripScalarFactor(v, scale))
    v = x;
  return v;
}

/// True if `mask` is a constant causal mask over the trailing [S, T] dims:
/// 0 where key j <= query i, a large negative number (or -inf) where j > i,
/// with only 1s before the trailing two dims.
static bool isCausalMask(Value mask, int64_t s, int64_t t) {
  auto constant = mask.getDefiningOp<g::ConstantOp>();
  if (!constant)
    return false;
  auto attr = dyn_cast<DenseElementsAttr>(constant.getValue());
  if (!attr || !isa<FloatType>(attr.getElementType()))
    return false;
  ArrayRef<int64_t> shape = attr.getType().getShape();
  if (shape.size() < 2 || shape[shape.size() - 2] != s || shape.back() != t ||
      llvm::any_of(shape.drop_back(2), [](int64_t d) { return d != 1; }))
    return false;
  int64_t index = 0;
  for (APFloat value : attr.getValues<APFloat>()) {
    int64_t i = index / t, j = index % t;
    ++index;
    double x = value.convertToDouble();
    if (j <= i ? x != 0 : !(x <= -1e4))
      return false;
  }
  return true;
}

/// The attention core of a transformer, as exporters write it:
///   matmul(q [* c], transpose(k) [* c] or transpose_rhs) [* c or / c]
///   [+ causal mask] -> softmax(last axis) [-> dropout] -> matmul(., v)
/// becomes one ppc.attention (the fused kernel the cost model rates as
/// FlashAttention). Returns false, changing nothing, if any step differs.
static bool matchAttention(g::MatMulOp context, OpBuilder &builder) {
  if (context.getTransposeLhs() || context.getTransposeRhs())
    return false;
  Value probs = context.getLhs(), value = context.getRhs();
  g::DropoutOp dropout = probs.getDefiningOp<g::DropoutOp>();
  if (dropout) {
    if (!probs.hasOneUse())
      return false;
    probs = dropout.getInput();
  }
  auto softmax = probs.getDefiningOp<g::SoftmaxOp>();
  if (!softmax || !probs.hasOneUse())
    return false;
  auto probsType = cast<RankedTensorType>(probs.getType());
  int64_t rank = probsType.getRank();
  int64_t axis = softmax.getAxis();
  if ((axis < 0 ? axis + rank : axis) != rank - 1)
    return false;
  Value scores = softmax.getInput();
  int64_t s = probsType.getDimSize(rank - 2),
          t = probsType.getDimSize(rank - 1);
  bool causal = false;
  if (auto add = scores.getDefiningOp<g::AddOp>(); add && scores.hasOneUse())
    for (auto [x, mask] : {std::pair(add.getLhs(), add.getRhs()),
                           std::pair(add.getRhs(), add.getLhs())})
      if (x.getType() == scores.getType() && isCausalMask(mask, s, t)) {
        causal = true;
        scores = x;
        break;
      }
  double scale = 1;
  scores = stripScalarFactors(scores, scale);
  auto product = scores.getDefiningOp<g::MatMulOp>();
  if (!product || !scores.hasOneUse() || product.getTransposeLhs())
    return false;
  Value query = stripScalarFactors(product.getLhs(), scale);
  Value key = product.getRhs();
  // [.., D, T] keys: a transpose read by this product alone, whose last two
  // dims swapped back give the [.., T, D] key as one transpose of its input
  // (none when that is the identity). Exporters write the key's head
  // transpose and this one as one permutation ([0, 2, 3, 1]) or two.
  g::TransposeOp keyTranspose;
  SmallVector<int64_t> keyPerm;
  if (!product.getTransposeRhs()) {
    key = stripScalarFactors(key, scale);
    keyTranspose = key.getDefiningOp<g::TransposeOp>();
    if (!keyTranspose || !key.hasOneUse())
      return false;
    ArrayRef<int64_t> perm = keyTranspose.getPermutation();
    if (static_cast<int64_t>(perm.size()) != rank)
      return false;
    keyPerm.assign(perm.begin(), perm.end());
    std::swap(keyPerm[rank - 2], keyPerm[rank - 1]);
    key = keyTranspose.getInput();
    if (llvm::equal(keyPerm, llvm::seq<int64_t>(0, rank)))
      keyPerm.clear();
  }
  // A factor before a head transpose stays an op of its own.
  if (keyPerm.empty())
    key = stripScalarFactors(key, scale);
  // Same rank and leading dims on all three (no broadcasting), [.., T, D]
  // keys and [.., T, Dv] values, one element type.
  auto shapeOf = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getShape();
  };
  ArrayRef<int64_t> q = shapeOf(query), v = shapeOf(value);
  SmallVector<int64_t> k(shapeOf(key));
  if (!keyPerm.empty())
    for (int64_t i = 0; i < rank; ++i)
      k[i] = shapeOf(key)[keyPerm[i]];
  if (q.size() != static_cast<size_t>(rank) || k.size() != q.size() ||
      v.size() != q.size() ||
      q.drop_back(2) != ArrayRef<int64_t>(k).drop_back(2) ||
      q.drop_back(2) != v.drop_back(2) || k.back() != q.back() ||
      k[rank - 2] != t || v[rank - 2] != t || q[rank - 2] != s ||
      getElementTypeOrSelf(query.getType()) !=
          getElementTypeOrSelf(key.getType()) ||
      getElementTypeOrSelf(query.getType()) !=
          getElementTypeOrSelf(value.getType()))
    return false;
  builder.setInsertionPoint(context);
  if (!keyPerm.empty())
    key = g::TransposeOp::create(builder, keyTranspose.getLoc(),
                                 cast<RankedTensorType>(key.getType()).clone(k),
                                 key, keyPerm);
  auto fused = g::AttentionOp::create(
      builder, context.getLoc(), context.getType(), query, key, value,
      builder.getF64FloatAttr(scale), builder.getBoolAttr(causal),
      builder.getF64FloatAttr(dropout ? dropout.getRatio().convertToDouble()
                                      : 0.0),
      builder.getI64IntegerAttr(dropout ? dropout.getSeed() : 0));
  context.getResult().replaceAllUsesWith(fused.getResult());
  context.erase();
  // Dropout is not trivially dead (it draws random numbers); the rest of
  // the chain is, and goes with eraseDeadOps.
  if (dropout)
    dropout.erase();
  return true;
}

/// A [B, S, H, D] tensor's head transpose to [B, H, S, D], and back: the
/// permutation is its own inverse.
static constexpr int64_t kHeadPermutation[] = {0, 2, 1, 3};

/// `op` if it is a head transpose, else null.
static g::TransposeOp headTranspose(Operation *op) {
  auto transpose = dyn_cast_or_null<g::TransposeOp>(op);
  if (!transpose ||
      transpose.getPermutation() != ArrayRef<int64_t>(kHeadPermutation))
    return nullptr;
  return transpose;
}

/// An attention whose query, key and value are head transposes of [B, S,
/// H, D] tensors (a linear layer's output reshaped per head) reads them as
/// they are, in layout "bshd"; its result goes to the transpose back where
/// that is its one user, else through one transpose. The fused kernels read
/// rows H * D apart, so the copies the transposes made are gone.
static void absorbHeadTransposes(g::AttentionOp attention, OpBuilder &builder) {
  if (attention.headsAfterPositions() ||
      cast<RankedTensorType>(attention.getType()).getRank() != 4)
    return;
  g::TransposeOp q = headTranspose(attention.getQuery().getDefiningOp()),
                 k = headTranspose(attention.getKey().getDefiningOp()),
                 v = headTranspose(attention.getValue().getDefiningOp());
  if (!q || !k || !v)
    return;
  auto type = cast<RankedTensorType>(attention.getType());
  ArrayRef<int64_t> shape = type.getShape();
  builder.setInsertionPoint(attention);
  auto fused = g::AttentionOp::create(
      builder, attention.getLoc(),
      type.clone({shape[0], shape[2], shape[1], shape[3]}), q.getInput(),
      k.getInput(), v.getInput(), attention.getScaleAttr(),
      attention.getCausalAttr(), attention.getRatioAttr(),
      attention.getSeedAttr(), builder.getStringAttr("bshd"));
  Value result = attention.getResult();
  if (g::TransposeOp back = result.hasOneUse()
                                ? headTranspose(*result.getUsers().begin())
                                : g::TransposeOp()) {
    back.getResult().replaceAllUsesWith(fused.getResult());
    back.erase();
  } else {
    Value restored = g::TransposeOp::create(
        builder, attention.getLoc(), type, fused.getResult(),
        ArrayRef<int64_t>(kHeadPermutation));
    result.replaceAllUsesWith(restored);
  }
  // The old attention draws dropout: not trivially dead.
  attention.erase();
}

/// Erases ops left without users by the rewrites.
static void eraseDeadOps(Block &block) {
  bool changed = true;
  while (changed) {
    changed = false;
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block))) {
      if (op.use_empty() && isOpTriviallyDead(&op)) {
        op.erase();
        changed = true;
      }
    }
  }
}

void onnx_import::recognizePatterns(func::FuncOp func) {
  OpBuilder builder(func.getContext());
  Block &body = func.getBody().front();
  // Each match replaces the uses of its root; the dead chain is erased at
  // the end, so walking a snapshot of the ops is safe.
  SmallVector<Operation *> ops;
  for (Operation &op : body)
    ops.push_back(&op);
  llvm::SmallPtrSet<Operation *, 16> replaced;
  for (Operation *op : ops)
    if (auto mean = dyn_cast<g::ReduceMeanOp>(op))
      matchLayerNorm(mean, builder);
  eraseDeadOps(body);
  ops.clear();
  for (Operation &op : body)
    ops.push_back(&op);
  for (Operation *op : ops)
    if (auto meanSquare = dyn_cast<g::ReduceMeanOp>(op))
      matchRmsNorm(meanSquare, builder);
  eraseDeadOps(body);

  ops.clear();
  for (Operation &op : body)
    ops.push_back(&op);
  // Roots are visited last-first so the outermost multiplication of a GELU
  // is seen before the inner ones it contains.
  for (Operation *op : llvm::reverse(ops)) {
    if (replaced.contains(op))
      continue;
    if (auto mul = dyn_cast<g::MulOp>(op); mul && !mul->use_empty())
      if (matchGelu(mul, builder))
        replaced.insert(op);
  }
  eraseDeadOps(body);

  for (Operation &op : llvm::make_early_inc_range(body))
    if (auto mul = dyn_cast<g::MulOp>(&op))
      matchSilu(mul, builder);
  eraseDeadOps(body);

  for (Operation &op : llvm::make_early_inc_range(body))
    if (auto linear = dyn_cast<g::LinearOp>(&op))
      matchLinearBias(linear, builder);
  eraseDeadOps(body);

  for (Operation &op : llvm::make_early_inc_range(body))
    if (auto matmul = dyn_cast<g::MatMulOp>(&op))
      matchAttention(matmul, builder);
  eraseDeadOps(body);

  // Collected first: a rewrite erases the transpose after the attention.
  SmallVector<g::AttentionOp> attentions(body.getOps<g::AttentionOp>());
  for (g::AttentionOp attention : attentions)
    absorbHeadTransposes(attention, builder);
  eraseDeadOps(body);
}
