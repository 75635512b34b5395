//===- ParallelizableOps.cpp - iteration spaces and costs of graph ops ----===//
//
// ParallelizableOpInterface for every compute op: its SOAP iteration space
// (dims with kinds, and how each operand/result dim is indexed) and its
// forward/backward work. Ops are described by a few shared shapes of space
// (elementwise with numpy broadcasting, contraction, sliding window, reduction,
// data movement) so each op below is a few lines.
//
// Conventions: iteration dims follow the result dims (kinds from
// ppc::activationKinds) and contracted or windowed dims come last. A dim that
// an operand broadcasts (size 1 against a larger iteration dim) is read whole.
//
// Cost model, shared by all ops unless stated:
//   fwdBytes = bytes of all operands + results (read once, written once);
//   bwdBytes = 2 * fwdBytes (reads the forward tensors and the incoming
//              gradient, writes the operand gradients).
// FLOPs are hand-derived per op; ops with a second differentiable operand (a
// weight, the rhs of a matmul) do about twice the forward work in backward.
//
//===----------------------------------------------------------------------===//

#include "ppc/Dialect/Graph/GraphOps.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace ppc::graph;
using ppc::DimAccess;
using ppc::IterationSpace;
using ppc::IterDim;
using ppc::IterKind;
using ppc::OpCost;
using ppc::TensorAccess;

//===----------------------------------------------------------------------===//
// Shared helpers: shapes, accesses, spaces, costs
//===----------------------------------------------------------------------===//

static ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

static int64_t normalizeAxis(int64_t axis, size_t rank) {
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

static TensorAccess accessOf(Value value, std::vector<DimAccess> dims) {
  ArrayRef<int64_t> shape = shapeOf(value);
  return {std::vector<int64_t>(shape.begin(), shape.end()), std::move(dims)};
}

/// Tensor dim i read by iteration dim `first + i`.
static std::vector<DimAccess> identityDims(size_t count, int32_t first = 0) {
  std::vector<DimAccess> dims;
  for (size_t i = 0; i < count; ++i)
    dims.push_back(DimAccess::identity(first + static_cast<int32_t>(i)));
  return dims;
}

/// Numpy broadcasting of `shape` against iteration dims
/// [first, first + iterShape.size()), aligned at the trailing dim: a size-1
/// dim facing a larger iteration dim is broadcast, hence read whole.
static std::vector<DimAccess> broadcastDims(ArrayRef<int64_t> shape,
                                            ArrayRef<int64_t> iterShape,
                                            int32_t first = 0) {
  size_t lead = iterShape.size() - shape.size();
  std::vector<DimAccess> dims;
  for (auto [i, size] : llvm::enumerate(shape)) {
    size_t iterDim = lead + i;
    if (size == 1 && iterShape[iterDim] != 1)
      dims.push_back(DimAccess::whole());
    else
      dims.push_back(
          DimAccess::identity(first + static_cast<int32_t>(iterDim)));
  }
  return dims;
}

/// One iteration dim per entry of `shape`, with the activation kinds of its
/// rank (sample, parameter, attribute...).
static std::vector<IterDim> activationDims(ArrayRef<int64_t> shape) {
  std::vector<IterKind> kinds = ppc::activationKinds(shape.size());
  std::vector<IterDim> dims;
  for (auto [size, kind] : llvm::zip(shape, kinds))
    dims.push_back({size, kind, /*splittable=*/true});
  return dims;
}

/// Iteration dims = dims of result 0; every operand and result is mapped with
/// numpy broadcasting. Unary, binary, cast, dropout, broadcast, and (with
/// some dims made unsplittable) softmax and layer norm.
static IterationSpace elementwiseSpace(Operation *op) {
  ArrayRef<int64_t> shape = shapeOf(op->getResult(0));
  IterationSpace space;
  space.dims = activationDims(shape);
  for (Value operand : op->getOperands())
    space.operands.push_back(
        accessOf(operand, broadcastDims(shapeOf(operand), shape)));
  for (Value result : op->getResults())
    space.results.push_back(
        accessOf(result, broadcastDims(shapeOf(result), shape)));
  return space;
}

/// Number of elements; a dynamic dim counts as 1 so that costs of
/// not-yet-specialized IR stay finite (the search needs static shapes).
static double elementCount(Value value) {
  double count = 1;
  for (int64_t size : shapeOf(value))
    count *= ShapedType::isDynamic(size) ? 1 : size;
  return count;
}

static double bytesOf(Value value) {
  Type elementType = getElementTypeOrSelf(value.getType());
  double elementBytes = (elementType.getIntOrFloatBitWidth() + 7) / 8;
  return elementCount(value) * elementBytes;
}

static double inputOutputBytes(Operation *op) {
  double bytes = 0;
  for (Value operand : op->getOperands())
    bytes += bytesOf(operand);
  for (Value result : op->getResults())
    bytes += bytesOf(result);
  return bytes;
}

/// The cost with the default bytes model (see the file comment).
static OpCost costOf(Operation *op, double fwdFlops, double bwdFlops) {
  double bytes = inputOutputBytes(op);
  return {fwdFlops, bwdFlops, bytes, 2 * bytes};
}

/// Elementwise: `flopsPerElement` per result element forward; backward does
/// the same per differentiable operand (dx = dy * f'(x), one per operand).
static OpCost elementwiseCost(Operation *op, double flopsPerElement = 1) {
  double fwd = flopsPerElement * elementCount(op->getResult(0));
  return costOf(op, fwd, fwd * op->getNumOperands());
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

#define PPC_ELEMENTWISE_OP(OpClass)                                            \
  IterationSpace OpClass::getIterationSpace() {                                \
    return elementwiseSpace(getOperation());                                   \
  }                                                                            \
  OpCost OpClass::getCost() { return elementwiseCost(getOperation()); }

PPC_ELEMENTWISE_OP(ReluOp)
PPC_ELEMENTWISE_OP(LeakyReluOp)
PPC_ELEMENTWISE_OP(GeluOp)
PPC_ELEMENTWISE_OP(SigmoidOp)
PPC_ELEMENTWISE_OP(TanhOp)
PPC_ELEMENTWISE_OP(ClipOp)
PPC_ELEMENTWISE_OP(SqrtOp)
PPC_ELEMENTWISE_OP(RsqrtOp)
PPC_ELEMENTWISE_OP(ExpOp)
PPC_ELEMENTWISE_OP(LogOp)
PPC_ELEMENTWISE_OP(ErfOp)
PPC_ELEMENTWISE_OP(NegOp)
PPC_ELEMENTWISE_OP(AbsOp)
PPC_ELEMENTWISE_OP(ReciprocalOp)
PPC_ELEMENTWISE_OP(SiluOp)
PPC_ELEMENTWISE_OP(HardSigmoidOp)
PPC_ELEMENTWISE_OP(HardSwishOp)
PPC_ELEMENTWISE_OP(EluOp)
PPC_ELEMENTWISE_OP(SeluOp)
PPC_ELEMENTWISE_OP(SoftplusOp)
PPC_ELEMENTWISE_OP(MishOp)
PPC_ELEMENTWISE_OP(AddOp)
PPC_ELEMENTWISE_OP(SubOp)
PPC_ELEMENTWISE_OP(MulOp)
PPC_ELEMENTWISE_OP(DivOp)
PPC_ELEMENTWISE_OP(PowOp)
PPC_ELEMENTWISE_OP(MaxOp)
PPC_ELEMENTWISE_OP(MinOp)
PPC_ELEMENTWISE_OP(PReluOp)
PPC_ELEMENTWISE_OP(DropoutOp)
PPC_ELEMENTWISE_OP(CastOp)

#undef PPC_ELEMENTWISE_OP

/// Comparisons and logic: elementwise, one flop per result element forward
/// and no backward (an i1 result passes no gradient).
#define PPC_COMPARE_OP(OpClass)                                                \
  IterationSpace OpClass::getIterationSpace() {                                \
    return elementwiseSpace(getOperation());                                   \
  }                                                                            \
  OpCost OpClass::getCost() {                                                  \
    return costOf(getOperation(), elementCount(getResult()), 0);               \
  }

PPC_COMPARE_OP(EqualOp)
PPC_COMPARE_OP(LessOp)
PPC_COMPARE_OP(LessEqualOp)
PPC_COMPARE_OP(GreaterOp)
PPC_COMPARE_OP(GreaterEqualOp)
PPC_COMPARE_OP(AndOp)
PPC_COMPARE_OP(OrOp)
PPC_COMPARE_OP(NotOp)

#undef PPC_COMPARE_OP

IterationSpace SelectOp::getIterationSpace() {
  return elementwiseSpace(getOperation());
}

/// A copy per result element each way: 1 flop forward; backward routes the
/// gradient to one of the two sides (1 per side).
OpCost SelectOp::getCost() {
  double elements = elementCount(getResult());
  return costOf(getOperation(), elements, 2 * elements);
}

/// Elementwise, except that the scanned axis is read whole.
IterationSpace CumSumOp::getIterationSpace() {
  IterationSpace space = elementwiseSpace(getOperation());
  space.dims[normalizeAxis(getAxis(), space.dims.size())].splittable = false;
  return space;
}

/// One add per element each way (the backward scans the gradient back).
OpCost CumSumOp::getCost() {
  double elements = elementCount(getResult());
  return costOf(getOperation(), elements, elements);
}

IterationSpace BroadcastOp::getIterationSpace() {
  return elementwiseSpace(getOperation());
}

/// Forward only copies; backward sums the gradient over the broadcast dims
/// (1 flop per result element).
OpCost BroadcastOp::getCost() {
  return costOf(getOperation(), 0, elementCount(getResult()));
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

/// FLOPs of a contraction over `points` multiply-adds: 2 * points forward;
/// backward computes two gradients (input and weight/rhs) of the same size,
/// 4 * points. A bias adds one flop per result element in each direction.
static OpCost contractionCost(Operation *op, double points, bool hasBias) {
  double bias = hasBias ? elementCount(op->getResult(0)) : 0;
  return costOf(op, 2 * points + bias, 4 * points + bias);
}

/// Dims: batch dims of the result (dim 0 sample; for rank 4, dim 1 is the
/// heads, a parameter; others attribute), M, N (parameter), K (reduction).
/// M is the sample dim of a rank-2 matmul and an attribute otherwise.
IterationSpace MatMulOp::getIterationSpace() {
  ArrayRef<int64_t> result = shapeOf(getResult());
  ArrayRef<int64_t> lhs = shapeOf(getLhs());
  size_t rank = result.size(), batchRank = rank - 2;
  IterationSpace space;
  space.matrixProduct = true;
  for (size_t i = 0; i < batchRank; ++i) {
    IterKind kind = i == 0                ? IterKind::Sample
                    : i == 1 && rank == 4 ? IterKind::Parameter
                                          : IterKind::Attribute;
    space.dims.push_back({result[i], kind});
  }
  int32_t m = batchRank, n = m + 1, k = m + 2;
  int64_t kSize = getTransposeLhs() ? lhs[lhs.size() - 2] : lhs.back();
  space.dims.push_back(
      {result[m], rank == 2 ? IterKind::Sample : IterKind::Attribute});
  space.dims.push_back({result[n], IterKind::Parameter});
  space.dims.push_back({kSize, IterKind::Reduction});

  auto matrixAccess = [&](Value operand, int32_t rows, int32_t cols,
                          bool transposed) {
    ArrayRef<int64_t> shape = shapeOf(operand);
    std::vector<DimAccess> dims =
        broadcastDims(shape.drop_back(2), result.take_front(batchRank));
    dims.push_back(DimAccess::identity(transposed ? cols : rows));
    dims.push_back(DimAccess::identity(transposed ? rows : cols));
    return accessOf(operand, std::move(dims));
  };
  space.operands.push_back(matrixAccess(getLhs(), m, k, getTransposeLhs()));
  space.operands.push_back(matrixAccess(getRhs(), k, n, getTransposeRhs()));
  space.results.push_back(accessOf(getResult(), identityDims(rank)));
  return space;
}

/// points = prod(batch) * M * N * K.
OpCost MatMulOp::getCost() {
  ArrayRef<int64_t> lhs = shapeOf(getLhs());
  double kSize = getTransposeLhs() ? lhs[lhs.size() - 2] : lhs.back();
  return contractionCost(getOperation(), elementCount(getResult()) * kSize,
                         /*hasBias=*/false);
}

/// The default layout's shape [B..., S or T, D or Dv] of an attention
/// operand or result (AttentionOp::logicalDims).
static SmallVector<int64_t> logicalShape(AttentionOp op, Value value) {
  SmallVector<int64_t> shape;
  for (int64_t d : op.logicalDims())
    shape.push_back(shapeOf(value)[d]);
  return shape;
}

/// Dims: the leading dims (dim 0 the sample, the rest heads: parameters),
/// S (attribute: query positions), T (the keys), then D and Dv, which no
/// split may cut: D is summed before the softmax and Dv would recompute the
/// whole score matrix on every partition. The same dims in either layout;
/// only the operands' dims read them in another order.
///
/// A split along T is the log-sum-exp merge of attention over blocks of
/// keys (as ring attention and FlashAttention's split-KV merge them): the
/// partitions holding the same query rows run three forward stages. Stage 0
/// writes each row's block maximum (into a max-reduced and a kept copy),
/// its sum of exp(score - block max) and the unnormalized output; stage 1
/// rescales sum and output to the rows' maximum (the sums then reduced);
/// stage 2 divides by the rows' sum, leaving a partial sum of the result.
/// The backward's stage 0 sums each row's dO . O over the blocks (reduced),
/// stage 1 the gradients. Unsplit, the kernel runs once (onlyWhenSplit).
IterationSpace AttentionOp::getIterationSpace() {
  SmallVector<int64_t> query = logicalShape(*this, getQuery());
  SmallVector<int64_t> value = logicalShape(*this, getValue());
  int32_t lead = static_cast<int32_t>(query.size()) - 2;
  IterationSpace space;
  for (int32_t i = 0; i < lead; ++i)
    space.dims.push_back(
        {query[i], i == 0 ? IterKind::Sample : IterKind::Parameter});
  int32_t s = lead, t = lead + 1, d = lead + 2, dv = lead + 3;
  space.dims.push_back({query[lead], IterKind::Attribute});
  space.dims.push_back(
      {logicalShape(*this, getKey())[lead], IterKind::Reduction});
  space.dims.push_back({query.back(), IterKind::Reduction, false});
  space.dims.push_back({value.back(), IterKind::Parameter, false});
  SmallVector<int64_t> order = logicalDims();
  auto access = [&](Value operand, int32_t rows, int32_t cols) {
    std::vector<DimAccess> logical = identityDims(lead);
    logical.push_back(DimAccess::identity(rows));
    logical.push_back(DimAccess::identity(cols));
    std::vector<DimAccess> dims(logical.size());
    for (size_t i = 0; i < order.size(); ++i)
      dims[order[i]] = logical[i];
    return accessOf(operand, std::move(dims));
  };
  space.operands.push_back(access(getQuery(), s, d));
  space.operands.push_back(access(getKey(), t, d));
  space.operands.push_back(access(getValue(), t, dv));
  space.results.push_back(access(getResult(), s, dv));
  if (getCausal())
    space.causal = CausalDomain{s, t, getZigzag()};
  std::vector<ScratchDim> rows;
  for (int32_t i = 0; i <= s; ++i)
    rows.push_back({1, /*iterDim=*/i});
  StagedKernel staged;
  staged.forwardStages = 3;
  staged.backwardStages = 2;
  staged.forward = {{rows, /*syncAfter=*/0, /*max=*/true},
                    {rows, /*syncAfter=*/1},
                    {rows, /*syncAfter=*/-1}};
  staged.backward = {{rows, /*syncAfter=*/0}};
  staged.acrossDims = {t};
  staged.onlyWhenSplit = true;
  // Backward stage 0 recomputes QK^T and dO V^T (one forward's FLOPs) on
  // top of the 2.5 forwards getCost counts.
  staged.backwardWork = 3.5 / 2.5;
  space.staged = std::move(staged);
  // Ring attention: the keys and values stream around the groups that
  // split the query positions, a block per member, merged by the same
  // log-sum-exp as key blocks.
  // Forward stage 3 merges a block's maximum, sum and output into the
  // rows' so far; backward stage 2 takes sum_l P dP as dO . O.
  RingSpec ring;
  ring.streamed = t;
  ring.along = s;
  ring.operands = {1, 2};
  ring.firstStage = 0;
  ring.mergeStage = 3;
  ring.finishStage = 2;
  ring.prepareStage = 2;
  ring.blockStage = 1;
  space.ring = std::move(ring);
  return space;
}

/// FlashAttention's FLOP count: the two products QK^T and PV forward
/// (2 S T (D + Dv) per leading index, half of the pairs when causal), and
/// 2.5 times that backward (it recomputes QK^T, then dV, dP, dQ and dK).
/// The softmax's few FLOPs per score are not counted, as FlashAttention's
/// published rates do not count them. Bytes: q, k, v and the result
/// forward; backward also dO, dQ, dK and dV (twice the forward).
OpCost AttentionOp::getCost() {
  SmallVector<int64_t> query = logicalShape(*this, getQuery());
  double s = query[query.size() - 2], d = query.back();
  double t = logicalShape(*this, getKey())[query.size() - 2];
  double dv = shapeOf(getValue()).back();
  double batch = elementCount(getQuery()) / (s * d);
  // Causal: query i sees min(i + 1, T) keys.
  double pairs = s * t;
  if (getCausal())
    pairs = s <= t ? s * (s + 1) / 2 : t * (t + 1) / 2 + (s - t) * t;
  double forward = 2 * batch * pairs * (d + dv);
  OpCost cost = costOf(getOperation(), forward, 2.5 * forward);
  cost.kernel = KernelKind::FusedAttention;
  return cost;
}

/// Dims: the leading result dims (activation kinds of the result, minus its
/// last dim), N (parameter), K (reduction).
IterationSpace LinearOp::getIterationSpace() {
  ArrayRef<int64_t> result = shapeOf(getResult());
  size_t lead = result.size() - 1;
  IterationSpace space;
  space.matrixProduct = true;
  space.dims = activationDims(result);
  space.dims.pop_back();
  int32_t n = lead, k = lead + 1;
  space.dims.push_back({result.back(), IterKind::Parameter});
  space.dims.push_back({shapeOf(getInput()).back(), IterKind::Reduction});

  std::vector<DimAccess> inputDims = identityDims(lead);
  inputDims.push_back(DimAccess::identity(k));
  space.operands.push_back(accessOf(getInput(), std::move(inputDims)));
  space.operands.push_back(
      getTransposeWeight() ? accessOf(getWeight(), {DimAccess::identity(n),
                                                    DimAccess::identity(k)})
                           : accessOf(getWeight(), {DimAccess::identity(k),
                                                    DimAccess::identity(n)}));
  if (Value bias = getBias())
    space.operands.push_back(accessOf(bias, {DimAccess::identity(n)}));
  space.results.push_back(accessOf(getResult(), identityDims(result.size())));
  return space;
}

/// points = prod(leading dims) * N * K.
OpCost LinearOp::getCost() {
  return contractionCost(getOperation(),
                         elementCount(getResult()) * shapeOf(getInput()).back(),
                         /*hasBias=*/getBias() != nullptr);
}

/// Dims: n (sample), f (parameter), oh, ow (attribute), c (reduction, the
/// input channels of one group), kh, kw (reduction, unsplittable: the window).
/// Input rows/cols are windows over oh/ow, so a split along them reads a halo.
IterationSpace Conv2DOp::getIterationSpace() {
  ArrayRef<int64_t> result = shapeOf(getResult());
  ArrayRef<int64_t> weight = shapeOf(getWeight());
  int64_t groups = static_cast<int64_t>(getGroups());
  enum : int32_t { N, F, OH, OW, C, KH, KW };
  IterationSpace space;
  space.dims = {{result[0], IterKind::Sample},
                {result[1], IterKind::Parameter},
                {result[2], IterKind::Attribute},
                {result[3], IterKind::Attribute},
                // Per-group channels: with groups, which input channels a
                // partition reads depends on f, so c is not split separately.
                {weight[1], IterKind::Reduction, /*splittable=*/groups == 1},
                {weight[2], IterKind::Reduction, /*splittable=*/false},
                {weight[3], IterKind::Reduction, /*splittable=*/false}};

  ArrayRef<int64_t> strides = getStrides(), pads = getPads(),
                    dilations = getDilations();
  DimAccess channels = DimAccess::identity(C);
  if (groups > 1) {
    // Output channel f reads the whole input-channel group f / outPerGroup.
    int64_t outPerGroup = result[1] / groups, inPerGroup = weight[1];
    channels = {F, outPerGroup, inPerGroup, 0, inPerGroup};
  }
  auto window = [&](int32_t outDim, int i) {
    return DimAccess::window(outDim, strides[i], -pads[i],
                             (weight[2 + i] - 1) * dilations[i] + 1);
  };
  space.operands.push_back(
      accessOf(getInput(), {DimAccess::identity(N), channels, window(OH, 0),
                            window(OW, 1)}));
  space.operands.push_back(accessOf(
      getWeight(), {DimAccess::identity(F), DimAccess::identity(C),
                    DimAccess::identity(KH), DimAccess::identity(KW)}));
  if (Value bias = getBias())
    space.operands.push_back(accessOf(bias, {DimAccess::identity(F)}));
  space.results.push_back(accessOf(getResult(), identityDims(4)));
  return space;
}

/// points = N * F * OH * OW * (C / groups) * KH * KW.
OpCost Conv2DOp::getCost() {
  ArrayRef<int64_t> weight = shapeOf(getWeight());
  double perOutput = static_cast<double>(weight[1]) * weight[2] * weight[3];
  return contractionCost(getOperation(), elementCount(getResult()) * perOutput,
                         /*hasBias=*/getBias() != nullptr);
}

/// Dims: n (sample), f (parameter), oh, ow (attribute, unsplittable), c
/// (reduction: the input channels), kh, kw (reduction, unsplittable). A
/// result row gathers from input rows through the stride (no window of
/// consecutive rows to describe as a halo), so the input's H and W are read
/// whole and the spatial dims are not offered. With groups, the input
/// channels and weight rows a result channel reads depend on its group and
/// the weight's dim 1 is per group, so f and c are not split (samples are).
IterationSpace ConvTranspose2DOp::getIterationSpace() {
  ArrayRef<int64_t> result = shapeOf(getResult());
  ArrayRef<int64_t> weight = shapeOf(getWeight());
  bool grouped = getGroups() != 1;
  enum : int32_t { N, F, OH, OW, C, KH, KW };
  IterationSpace space;
  space.dims = {{result[0], IterKind::Sample},
                {result[1], IterKind::Parameter, /*splittable=*/!grouped},
                {result[2], IterKind::Attribute, /*splittable=*/false},
                {result[3], IterKind::Attribute, /*splittable=*/false},
                // Per-group input channels, as conv2d's c.
                {weight[0] / static_cast<int64_t>(getGroups()),
                 IterKind::Reduction,
                 /*splittable=*/!grouped},
                {weight[2], IterKind::Reduction, /*splittable=*/false},
                {weight[3], IterKind::Reduction, /*splittable=*/false}};
  auto byGroup = [&](int32_t d) {
    return grouped ? DimAccess::whole() : DimAccess::identity(d);
  };
  space.operands.push_back(
      accessOf(getInput(), {DimAccess::identity(N), byGroup(C),
                            DimAccess::whole(), DimAccess::whole()}));
  space.operands.push_back(
      accessOf(getWeight(), {byGroup(C), byGroup(F), DimAccess::identity(KH),
                             DimAccess::identity(KW)}));
  if (Value bias = getBias())
    space.operands.push_back(accessOf(bias, {DimAccess::identity(F)}));
  space.results.push_back(accessOf(getResult(), identityDims(4)));
  return space;
}

/// points = N * C * H * W * (F / groups) * KH * KW: every input element
/// times every tap of its group's weights, as the conv2d it is the input
/// gradient of.
OpCost ConvTranspose2DOp::getCost() {
  ArrayRef<int64_t> weight = shapeOf(getWeight());
  double perInput = static_cast<double>(weight[1]) * weight[2] * weight[3];
  return contractionCost(getOperation(), elementCount(getInput()) * perInput,
                         /*hasBias=*/getBias() != nullptr);
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

/// Dims: n (sample), c (parameter), oh, ow (attribute), kh, kw (reduction,
/// unsplittable). Like conv2d without the channel contraction.
template <typename PoolOp> static IterationSpace pool2DSpace(PoolOp pool) {
  ArrayRef<int64_t> result = shapeOf(pool.getResult());
  ArrayRef<int64_t> kernel = pool.getKernel(), strides = pool.getStrides(),
                    pads = pool.getPads();
  enum : int32_t { N, C, OH, OW, KH, KW };
  IterationSpace space;
  space.dims = {{result[0], IterKind::Sample},
                {result[1], IterKind::Parameter},
                {result[2], IterKind::Attribute},
                {result[3], IterKind::Attribute},
                {kernel[0], IterKind::Reduction, /*splittable=*/false},
                {kernel[1], IterKind::Reduction, /*splittable=*/false}};
  auto window = [&](int32_t outDim, int i) {
    return DimAccess::window(outDim, strides[i], -pads[i], kernel[i]);
  };
  space.operands.push_back(
      accessOf(pool.getInput(), {DimAccess::identity(N), DimAccess::identity(C),
                                 window(OH, 0), window(OW, 1)}));
  space.results.push_back(accessOf(pool.getResult(), identityDims(4)));
  return space;
}

/// One compare (max) or add (avg) per window element forward; backward routes
/// or spreads each output gradient over its window, the same count.
template <typename PoolOp> static OpCost pool2DCost(PoolOp pool) {
  ArrayRef<int64_t> kernel = pool.getKernel();
  double points = elementCount(pool.getResult()) * kernel[0] * kernel[1];
  return costOf(pool.getOperation(), points, points);
}

IterationSpace MaxPool2DOp::getIterationSpace() { return pool2DSpace(*this); }
OpCost MaxPool2DOp::getCost() { return pool2DCost(*this); }
IterationSpace AvgPool2DOp::getIterationSpace() { return pool2DSpace(*this); }
OpCost AvgPool2DOp::getCost() { return pool2DCost(*this); }

/// Dims: n (sample), c (parameter), oh, ow (attribute, unsplittable). An
/// output row reads input rows through a scale that is no integer stride in
/// general, so the input's H and W are read whole and the spatial dims are
/// not offered for splitting (no halo to describe).
IterationSpace ResizeOp::getIterationSpace() {
  ArrayRef<int64_t> result = shapeOf(getResult());
  IterationSpace space;
  space.dims = {{result[0], IterKind::Sample},
                {result[1], IterKind::Parameter},
                {result[2], IterKind::Attribute, /*splittable=*/false},
                {result[3], IterKind::Attribute, /*splittable=*/false}};
  space.operands.push_back(
      accessOf(getInput(), {DimAccess::identity(0), DimAccess::identity(1),
                            DimAccess::whole(), DimAccess::whole()}));
  space.results.push_back(accessOf(getResult(), identityDims(4)));
  return space;
}

/// Per result element, a multiply-add per tap pair: 1 (nearest), 2 x 2
/// (linear) or 4 x 4 (cubic), plus the tap weights; backward scatters each
/// result gradient over the same taps.
OpCost ResizeOp::getCost() {
  int64_t taps = getMode() == "nearest" ? 1 : getMode() == "linear" ? 2 : 4;
  double points = elementCount(getResult()) * (2.0 * taps * taps + 4);
  return costOf(getOperation(), points, points);
}

/// Dims: n (sample), c (parameter), then the spatial dims as reductions (a
/// split along them makes partial sums of the mean).
IterationSpace GlobalAvgPoolOp::getIterationSpace() {
  ArrayRef<int64_t> input = shapeOf(getInput());
  IterationSpace space;
  space.dims = {{input[0], IterKind::Sample}, {input[1], IterKind::Parameter}};
  std::vector<DimAccess> resultDims = identityDims(2);
  for (int64_t size : input.drop_front(2)) {
    space.dims.push_back({size, IterKind::Reduction});
    resultDims.push_back(DimAccess::whole()); // size 1
  }
  space.operands.push_back(accessOf(getInput(), identityDims(input.size())));
  space.results.push_back(accessOf(getResult(), std::move(resultDims)));
  return space;
}

/// One add per input element forward; backward spreads the gradient, one
/// flop per input element.
OpCost GlobalAvgPoolOp::getCost() {
  double elements = elementCount(getInput());
  return costOf(getOperation(), elements, elements);
}

//===----------------------------------------------------------------------===//
// Normalization and softmax
//===----------------------------------------------------------------------===//

/// Normalizations, per element: forward mean (1), variance (3), normalize
/// (2), scale and shift (2); backward about twice that.
static constexpr double kNormFwdFlopsPerElement = 8;
static constexpr double kNormBwdFlopsPerElement = 16;

/// Dims: n (sample), c (parameter), spatial dims (attribute); the per-channel
/// operands follow c. Splitting n or a spatial dim leaves each partition
/// with partial batch statistics: training then needs an all-reduce of the
/// statistics (sync batch norm), which the lowering inserts; the iteration
/// space only says which slices each partition touches.
IterationSpace BatchNormOp::getIterationSpace() {
  ArrayRef<int64_t> input = shapeOf(getInput());
  IterationSpace space;
  space.dims = {{input[0], IterKind::Sample}, {input[1], IterKind::Parameter}};
  for (int64_t size : input.drop_front(2))
    space.dims.push_back({size, IterKind::Attribute});
  space.operands.push_back(accessOf(getInput(), identityDims(input.size())));
  for (Value perChannel : {getScale(), getBias(), getMean(), getVariance()})
    space.operands.push_back(accessOf(perChannel, {DimAccess::identity(1)}));
  space.results.push_back(accessOf(getResult(), identityDims(input.size())));
  // Training normalizes by the statistics of the whole batch: the partitions
  // holding the same channels sum their per-channel [sum; sum of squares;
  // count] between the forward's two stages, and [dscale; dbias] between
  // the backward's. Inference reads the running statistics.
  StagedKernel staged;
  staged.forwardStages = staged.backwardStages = 2;
  staged.forward = {{{{3}, {input[1]}}, /*syncAfter=*/0}};
  staged.backward = {{{{2}, {input[1]}}, /*syncAfter=*/0}};
  for (int32_t d = 0; d < static_cast<int32_t>(input.size()); ++d)
    if (d != 1)
      staged.acrossDims.push_back(d);
  staged.trainingOnly = true;
  space.staged = std::move(staged);
  return space;
}

OpCost BatchNormOp::getCost() {
  double elements = elementCount(getInput());
  return costOf(getOperation(), kNormFwdFlopsPerElement * elements,
                kNormBwdFlopsPerElement * elements);
}

/// Elementwise over the input (scale and bias broadcast along the trailing
/// dims); the normalized dims (from `axis` on) cannot be split, since every
/// element needs the statistics over all of them.
IterationSpace LayerNormOp::getIterationSpace() {
  IterationSpace space = elementwiseSpace(getOperation());
  for (size_t d = normalizeAxis(getAxisAttr().getInt(), space.dims.size());
       d < space.dims.size(); ++d)
    space.dims[d].splittable = false;
  return space;
}

OpCost LayerNormOp::getCost() {
  double elements = elementCount(getInput());
  return costOf(getOperation(), kNormFwdFlopsPerElement * elements,
                kNormBwdFlopsPerElement * elements);
}

/// Elementwise except along `axis`, which cannot be split.
template <typename SoftmaxLikeOp>
static IterationSpace softmaxLikeSpace(SoftmaxLikeOp op) {
  IterationSpace space = elementwiseSpace(op.getOperation());
  space.dims[normalizeAxis(op.getAxisAttr().getInt(), space.dims.size())]
      .splittable = false;
  return space;
}

/// Per element, forward: max, subtract, exp, sum, divide (or subtract the
/// log) = 5; backward: y * (dy - sum(dy * y)) = 4.
template <typename SoftmaxLikeOp>
static OpCost softmaxLikeCost(SoftmaxLikeOp op) {
  double elements = elementCount(op.getResult());
  return costOf(op.getOperation(), 5 * elements, 4 * elements);
}

IterationSpace SoftmaxOp::getIterationSpace() {
  return softmaxLikeSpace(*this);
}
OpCost SoftmaxOp::getCost() { return softmaxLikeCost(*this); }
IterationSpace LogSoftmaxOp::getIterationSpace() {
  return softmaxLikeSpace(*this);
}
OpCost LogSoftmaxOp::getCost() { return softmaxLikeCost(*this); }

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// Dims: the input dims, the reduced ones of reduction kind. The result reads
/// a kept reduced dim (size 1) whole and has no dim for a dropped one.
template <typename ReduceOp>
static IterationSpace reduceSpace(ReduceOp reduce) {
  ArrayRef<int64_t> input = shapeOf(reduce.getInput());
  IterationSpace space;
  space.dims = activationDims(input);
  // Partial maxima do not sum: reduce_max keeps its reduced dims whole.
  bool sums = !isa<ReduceMaxOp>(reduce.getOperation());
  for (int64_t axis : reduce.getAxes()) {
    IterDim &dim = space.dims[normalizeAxis(axis, input.size())];
    dim.kind = IterKind::Reduction;
    dim.splittable = sums;
  }
  std::vector<DimAccess> resultDims;
  for (auto [d, dim] : llvm::enumerate(space.dims)) {
    if (dim.kind != IterKind::Reduction)
      resultDims.push_back(DimAccess::identity(d));
    else if (reduce.getKeepDims())
      resultDims.push_back(DimAccess::whole());
  }
  space.operands.push_back(
      accessOf(reduce.getInput(), identityDims(input.size())));
  space.results.push_back(accessOf(reduce.getResult(), std::move(resultDims)));
  return space;
}

/// One op per input element forward; backward broadcasts the gradient (one
/// flop per input element, the scaling of a mean included).
template <typename ReduceOp> static OpCost reduceCost(ReduceOp reduce) {
  double elements = elementCount(reduce.getInput());
  return costOf(reduce.getOperation(), elements, elements);
}

IterationSpace ReduceSumOp::getIterationSpace() { return reduceSpace(*this); }
OpCost ReduceSumOp::getCost() { return reduceCost(*this); }
IterationSpace ReduceMeanOp::getIterationSpace() { return reduceSpace(*this); }
OpCost ReduceMeanOp::getCost() { return reduceCost(*this); }
IterationSpace ReduceMaxOp::getIterationSpace() { return reduceSpace(*this); }
OpCost ReduceMaxOp::getCost() { return reduceCost(*this); }

//===----------------------------------------------------------------------===//
// Data movement: no FLOPs, only bytes (a reshape not even those)
//===----------------------------------------------------------------------===//

/// Dims: the result dims. Result and input dims are grouped into runs of equal
/// product (size-1 dims aside, which are read whole), e.g. [6, 4] -> [2, 3, 4]
/// gives groups {6 | 2, 3} and {4 | 4}. In a group, the outermost result dim
/// indexes the outermost input dim with a stride (split: [a*b] -> [a, b]
/// reads b input rows per index) or a divisor (merge: [a, b] -> [a*b] reads
/// input row i / b); the other dims of the group are read whole and their
/// result dims are unsplittable, since their slices are strided in memory.
IterationSpace ReshapeOp::getIterationSpace() {
  ArrayRef<int64_t> input = shapeOf(getInput()), result = shapeOf(getResult());
  IterationSpace space;
  space.dims = activationDims(result);
  space.flatView = true;
  std::vector<DimAccess> inputDims(input.size(), DimAccess::whole());
  auto finish = [&] {
    space.operands.push_back(accessOf(getInput(), std::move(inputDims)));
    space.results.push_back(accessOf(getResult(), identityDims(result.size())));
    return space;
  };
  auto markAllUnsplittable = [&] {
    for (IterDim &dim : space.dims)
      dim.splittable = false;
    return finish();
  };

  SmallVector<int32_t> inDims, outDims; // positions of the non-1 dims
  for (auto [i, size] : llvm::enumerate(input))
    if (size != 1)
      inDims.push_back(i);
  for (auto [i, size] : llvm::enumerate(result))
    if (size != 1)
      outDims.push_back(i);
  if (llvm::any_of(input, ShapedType::isDynamic) ||
      llvm::any_of(result, ShapedType::isDynamic))
    return markAllUnsplittable();

  size_t i = 0, j = 0;
  while (i < inDims.size() && j < outDims.size()) {
    size_t inFirst = i, outFirst = j;
    int64_t inProduct = input[inDims[i++]], outProduct = result[outDims[j++]];
    while (inProduct != outProduct) {
      if (inProduct < outProduct && i < inDims.size())
        inProduct *= input[inDims[i++]];
      else if (outProduct < inProduct && j < outDims.size())
        outProduct *= result[outDims[j++]];
      else // element counts differ: invalid IR, describe nothing splittable
        return markAllUnsplittable();
    }
    int32_t outer = outDims[outFirst];
    for (size_t k = outFirst + 1; k < j; ++k)
      space.dims[outDims[k]].splittable = false;
    // Elements under one index of the outermost dim, on either side.
    int64_t inInner = inProduct / input[inDims[inFirst]];
    int64_t outInner = outProduct / result[outer];
    if (outInner % inInner == 0) {
      int64_t rows = outInner / inInner;
      inputDims[inDims[inFirst]] = {outer, 1, rows, 0, rows};
    } else if (inInner % outInner == 0) {
      inputDims[inDims[inFirst]] = {outer, inInner / outInner, 1, 0, 1};
    } else {
      // e.g. [6, 4] -> [4, 6]: result rows straddle input rows.
      space.dims[outer].splittable = false;
    }
  }
  return finish();
}

/// A row-major reshape is a view: no FLOPs, no bytes moved.
OpCost ReshapeOp::getCost() { return {}; }

/// Dims: the result dims; input dim permutation[i] is read by dim i.
IterationSpace TransposeOp::getIterationSpace() {
  ArrayRef<int64_t> result = shapeOf(getResult());
  IterationSpace space;
  space.dims = activationDims(result);
  std::vector<DimAccess> inputDims(result.size());
  for (auto [i, p] : llvm::enumerate(getPermutation()))
    inputDims[p] = DimAccess::identity(i);
  space.operands.push_back(accessOf(getInput(), std::move(inputDims)));
  space.results.push_back(accessOf(getResult(), identityDims(result.size())));
  return space;
}

OpCost TransposeOp::getCost() { return costOf(getOperation(), 0, 0); }

/// Identity access except along `axis`, shifted by `-offset`.
static TensorAccess shiftedAccess(Value value, int64_t axis, int64_t offset) {
  std::vector<DimAccess> dims = identityDims(shapeOf(value).size());
  dims[axis].offset = -offset;
  return accessOf(value, std::move(dims));
}

/// Dims: the result dims; input i is read along `axis` at offset -off_i,
/// where off_i is the size of the inputs before it.
IterationSpace ConcatOp::getIterationSpace() {
  ArrayRef<int64_t> result = shapeOf(getResult());
  int64_t axis = normalizeAxis(getAxisAttr().getInt(), result.size());
  IterationSpace space;
  space.dims = activationDims(result);
  int64_t offset = 0;
  for (Value input : getInputs()) {
    space.operands.push_back(shiftedAccess(input, axis, offset));
    offset += shapeOf(input)[axis];
  }
  space.results.push_back(accessOf(getResult(), identityDims(result.size())));
  return space;
}

OpCost ConcatOp::getCost() { return costOf(getOperation(), 0, 0); }

/// Dims: the input dims; result j is written along `axis` at offset -off_j.
IterationSpace SplitOp::getIterationSpace() {
  ArrayRef<int64_t> input = shapeOf(getInput());
  int64_t axis = normalizeAxis(getAxisAttr().getInt(), input.size());
  IterationSpace space;
  space.dims = activationDims(input);
  space.operands.push_back(accessOf(getInput(), identityDims(input.size())));
  int64_t offset = 0;
  for (Value result : getResults()) {
    space.results.push_back(shiftedAccess(result, axis, offset));
    offset += shapeOf(result)[axis];
  }
  return space;
}

OpCost SplitOp::getCost() { return costOf(getOperation(), 0, 0); }

/// Dims: the result dims; input dim d is read at start_d + i * step_d.
IterationSpace SliceOp::getIterationSpace() {
  ArrayRef<int64_t> result = shapeOf(getResult());
  IterationSpace space;
  space.dims = activationDims(result);
  std::vector<DimAccess> inputDims;
  for (auto [d, start, step] : llvm::enumerate(getStarts(), getSteps()))
    inputDims.push_back(DimAccess::window(d, step, start, 1));
  space.operands.push_back(accessOf(getInput(), std::move(inputDims)));
  space.results.push_back(accessOf(getResult(), identityDims(result.size())));
  return space;
}

OpCost SliceOp::getCost() { return costOf(getOperation(), 0, 0); }

/// Dims: the result dims; input dim d is read at i - padLo_d (out of range
/// indices are the padding value).
IterationSpace PadOp::getIterationSpace() {
  ArrayRef<int64_t> result = shapeOf(getResult());
  IterationSpace space;
  space.dims = activationDims(result);
  std::vector<DimAccess> inputDims;
  for (size_t d = 0; d < result.size(); ++d)
    inputDims.push_back(DimAccess::window(d, 1, -getPads()[d], 1));
  space.operands.push_back(accessOf(getInput(), std::move(inputDims)));
  space.results.push_back(accessOf(getResult(), identityDims(result.size())));
  return space;
}

/// One write per result element (the padding included).
OpCost PadOp::getCost() { return costOf(getOperation(), 0, 0); }

/// Dims: the result dims (data[:axis], indices, data[axis+1:]), then the
/// gathered data dim (e.g. the vocabulary of an embedding) as a reduction:
/// splitting it is Megatron's vocabulary-parallel embedding, where each
/// partition looks up only the indices in its range, writes zeros elsewhere,
/// and the partial results are summed.
IterationSpace GatherOp::getIterationSpace() {
  ArrayRef<int64_t> data = shapeOf(getData()), result = shapeOf(getResult());
  int64_t axis = normalizeAxis(getAxisAttr().getInt(), data.size());
  size_t indicesRank = shapeOf(getIndices()).size();
  IterationSpace space;
  space.dims = activationDims(result);
  int32_t gathered = result.size();
  space.dims.push_back({data[axis], IterKind::Reduction});

  std::vector<DimAccess> dataDims;
  for (int64_t d = 0; d < static_cast<int64_t>(data.size()); ++d) {
    if (d < axis)
      dataDims.push_back(DimAccess::identity(d));
    else if (d == axis)
      dataDims.push_back(DimAccess::identity(gathered));
    else
      dataDims.push_back(DimAccess::identity(d - 1 + indicesRank));
  }
  space.operands.push_back(accessOf(getData(), std::move(dataDims)));
  space.operands.push_back(
      accessOf(getIndices(), identityDims(indicesRank, axis)));
  space.results.push_back(accessOf(getResult(), identityDims(result.size())));
  return space;
}

/// Forward copies rows; backward scatter-adds the gradient (one flop per
/// result element). Bytes: only the gathered rows of `data` are read, not the
/// whole table, so fwdBytes = indices + 2 * result.
OpCost GatherOp::getCost() {
  double bytes = bytesOf(getIndices()) + 2 * bytesOf(getResult());
  return {0, elementCount(getResult()), bytes, 2 * bytes};
}

//===----------------------------------------------------------------------===//
// Mixture of experts: a token's slots depend on its whole sample's routing
//===----------------------------------------------------------------------===//

/// The probabilities `[B, S, E]` as both MoE ops read them: a sample's
/// routing needs every position's (slots fill in position order) and every
/// expert's (the top k).
static TensorAccess routerAccess(Value probs, int32_t sampleDim) {
  return accessOf(probs, {DimAccess::identity(sampleDim), DimAccess::whole(),
                          DimAccess::whole()});
}

/// Dims: e (the experts: split, expert parallelism), b (sample), c (the
/// capacity slots, unsplittable: which token fills a slot depends on the
/// others), h (hidden). A partition routes its samples' tokens and fills
/// its experts' slots; the tokens' gradient is summed over the partitions
/// of different experts.
IterationSpace MoeDispatchOp::getIterationSpace() {
  ArrayRef<int64_t> result = shapeOf(getResult());
  IterationSpace space;
  space.dims = {{result[0], IterKind::Parameter},
                {result[1], IterKind::Sample},
                {result[2], IterKind::Attribute, /*splittable=*/false},
                {result[3], IterKind::Parameter}};
  space.operands.push_back(
      accessOf(getInput(), {DimAccess::identity(1), DimAccess::whole(),
                            DimAccess::identity(3)}));
  space.operands.push_back(routerAccess(getProbs(), 1));
  space.results.push_back(accessOf(getResult(), identityDims(4)));
  space.expertDim = 0;
  return space;
}

/// Forward: a top-k scan of each token's probabilities and a copy per
/// slot; backward: one add per slot element, and with the load-balancing
/// loss one per probability (and its gradient written).
OpCost MoeDispatchOp::getCost() {
  double routing = elementCount(getProbs()) * getTopK();
  double fwdBytes =
      bytesOf(getInput()) + bytesOf(getProbs()) + bytesOf(getResult());
  bool aux = getAuxLossCoef().convertToDouble() > 0;
  return {routing,
          elementCount(getResult()) + (aux ? elementCount(getProbs()) : 0),
          fwdBytes,
          fwdBytes + bytesOf(getInput()) + (aux ? bytesOf(getProbs()) : 0)};
}

/// Dims: b (sample), s (positions), h (hidden). A partition needs its
/// samples' slots of every expert (the all-to-all back from expert
/// parallelism) and routes its samples again to find its tokens' slots.
IterationSpace MoeCombineOp::getIterationSpace() {
  ArrayRef<int64_t> result = shapeOf(getResult());
  IterationSpace space;
  space.dims = activationDims(result);
  space.operands.push_back(
      accessOf(getInput(), {DimAccess::whole(), DimAccess::identity(0),
                            DimAccess::whole(), DimAccess::identity(2)}));
  space.operands.push_back(routerAccess(getProbs(), 0));
  space.results.push_back(accessOf(getResult(), identityDims(3)));
  return space;
}

/// Forward: k weighted adds per result element after the routing;
/// backward: the slots' gradients (k per element) and the weights' dot
/// products (k per element). Bytes: the k slots read per token, not all.
OpCost MoeCombineOp::getCost() {
  double k = getTopK();
  double points = elementCount(getResult()) * k;
  double slots = bytesOf(getResult()) * k;
  double fwdBytes = slots + bytesOf(getProbs()) + bytesOf(getResult());
  return {2 * points + elementCount(getProbs()) * k, 4 * points, fwdBytes,
          2 * fwdBytes};
}

//===----------------------------------------------------------------------===//
// Losses: the result is a scalar, so every split makes partial sums
//===----------------------------------------------------------------------===//

/// Dims: n (sample), c (reduction over the classes). Splitting c is
/// Megatron's vocabulary-parallel cross-entropy: the partitions of a row
/// agree on its maximum (stage 0, max-reduced: the one pass over the
/// logits, which also keeps the held log-sum-exp and the label's logit),
/// then on its sum of exponentials and its label's logit (stage 1, summed),
/// and the one holding the first classes writes the rows' loss (stage 2);
/// the scalar results are partial sums. The backward needs no
/// communication.
IterationSpace SoftmaxCrossEntropyOp::getIterationSpace() {
  ArrayRef<int64_t> logits = shapeOf(getLogits());
  IterationSpace space;
  space.dims = {{logits[0], IterKind::Sample},
                {logits[1], IterKind::Reduction}};
  space.operands.push_back(accessOf(getLogits(), identityDims(2)));
  space.operands.push_back(accessOf(getLabels(), identityDims(1)));
  space.results.push_back(accessOf(getLoss(), {}));
  StagedKernel staged;
  staged.forwardStages = 3;
  staged.forward = {{{{1, /*iterDim=*/0}}, /*syncAfter=*/0, /*max=*/true},
                    {{{2}, {1, /*iterDim=*/0}}, /*syncAfter=*/1}};
  staged.acrossDims = {1};
  space.staged = std::move(staged);
  return space;
}

/// Forward: one pass over the logits for the row maxima and the
/// exponentials' sums (6 per logit with the subtraction; the row is read a
/// second time where the first left it, in cache) and picking and averaging
/// the label's term (2 per sample); backward: softmax - onehot, scaled by
/// 1/N (3 per logit, the exponential again), reading the logits and writing
/// their gradient.
OpCost SoftmaxCrossEntropyOp::getCost() {
  double logits = elementCount(getLogits());
  double samples = elementCount(getLabels());
  double bytes = bytesOf(getLogits()) + bytesOf(getLabels());
  return {6 * logits + 2 * samples, 3 * logits, bytes,
          bytes + bytesOf(getLogits())};
}

/// Dims: the dims of the prediction (activation kinds).
IterationSpace MseLossOp::getIterationSpace() {
  ArrayRef<int64_t> shape = shapeOf(getPrediction());
  IterationSpace space;
  space.dims = activationDims(shape);
  space.operands.push_back(
      accessOf(getPrediction(), identityDims(shape.size())));
  space.operands.push_back(accessOf(getTarget(), identityDims(shape.size())));
  space.results.push_back(accessOf(getLoss(), {}));
  return space;
}

/// Forward: subtract, square, accumulate (3 per element); backward:
/// 2 * (p - t) / n (2 per element).
OpCost MseLossOp::getCost() {
  double elements = elementCount(getPrediction());
  return costOf(getOperation(), 3 * elements, 2 * elements);
}

//===----------------------------------------------------------------------===//
// Facts the lowering reads (the interface's optional methods)
//===----------------------------------------------------------------------===//

using ppc::graph::OperandInit;

/// A weight laid out [in, out] has its fan-in in dim 0.
std::optional<OperandInit> LinearOp::getOperandInit(unsigned operand) {
  if (operand != 1 || getTransposeWeight())
    return std::nullopt;
  return OperandInit{OperandInit::Kind::Uniform, {0}};
}

/// Scale and running variance start at one; shift and running mean at zero.
std::optional<OperandInit> BatchNormOp::getOperandInit(unsigned operand) {
  if (operand == 0)
    return std::nullopt;
  return OperandInit{operand == 1 || operand == 4 ? OperandInit::Kind::Ones
                                                  : OperandInit::Kind::Zeros,
                     {}};
}

/// Scale starts at one, shift at zero.
std::optional<OperandInit> LayerNormOp::getOperandInit(unsigned operand) {
  if (operand == 0)
    return std::nullopt;
  return OperandInit{
      operand == 1 ? OperandInit::Kind::Ones : OperandInit::Kind::Zeros, {}};
}

/// Labels are class indices below the logits' dim 1.
std::optional<int64_t> SoftmaxCrossEntropyOp::getIndexBound(unsigned operand) {
  if (operand != 1)
    return std::nullopt;
  return shapeOf(getLogits())[1];
}

bool SoftmaxCrossEntropyOp::isLoss() { return true; }
bool MseLossOp::isLoss() { return true; }

/// Indices address the gathered dim of the data.
std::optional<int64_t> GatherOp::getIndexBound(unsigned operand) {
  if (operand != 1)
    return std::nullopt;
  ArrayRef<int64_t> data = shapeOf(getData());
  return data[normalizeAxis(getAxisAttr().getInt(), data.size())];
}

bool ReshapeOp::forwardsValues() { return true; }
bool TransposeOp::forwardsValues() { return true; }
bool CastOp::forwardsValues() { return true; }
bool SliceOp::forwardsValues() { return true; }
bool ConcatOp::forwardsValues() { return true; }
bool SplitOp::forwardsValues() { return true; }
/// Rows of `data`, moved: integer tokens gathered into another order
/// (ppc-zigzag-sequence) are still bounded by what reads them.
bool GatherOp::forwardsValues() { return true; }

/// The cast kernel reads its target type as text ("bf16", "f32", ...).
void CastOp::addKernelAttributes(NamedAttrList &attrs) {
  std::string to;
  llvm::raw_string_ostream os(to);
  getElementTypeOrSelf(getResult().getType()).print(os);
  attrs.set("to", StringAttr::get(getContext(), to));
}
