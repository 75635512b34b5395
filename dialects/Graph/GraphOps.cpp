//===- GraphOps.cpp - ppc graph dialect ops: verifiers and folders --------===//
//
// Shape verification of the graph ops. Every check names the offending
// operand and the numbers involved, since the importer and hand-written tests
// are the usual sources of bad IR and a bare "invalid shape" helps neither.
// A dynamic dim (`?`) matches any size; the search itself needs static shapes,
// which the importer provides by fixing the batch size.
//
//===----------------------------------------------------------------------===//

#include "ppc/Dialect/Graph/GraphOps.h"
#include "ppc/Support/Exchange.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace mlir;
using namespace ppc::graph;

#define GET_OP_CLASSES
#include "ppc/Dialect/Graph/GraphOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Shared helpers
//===----------------------------------------------------------------------===//

static bool isDynamic(int64_t size) { return ShapedType::isDynamic(size); }

/// True if two dim sizes may be equal: a dynamic size matches anything.
static bool sizesMatch(int64_t a, int64_t b) {
  return a == b || isDynamic(a) || isDynamic(b);
}

static std::string formatShape(ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "[";
  llvm::interleaveComma(shape, os, [&](int64_t d) {
    if (isDynamic(d))
      os << "?";
    else
      os << d;
  });
  os << "]";
  return text;
}

/// A float attribute as written by people: 0.1, not 1.000000e-01.
static std::string formatNumber(const APFloat &value) {
  return llvm::formatv("{0}", llvm::format("%g", value.convertToDouble()))
      .str();
}

static ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

/// Checks that `actual` (the shape of `what`) is `expected`, naming the first
/// differing dim.
static LogicalResult verifyShapeIs(Operation *op, StringRef what,
                                   ArrayRef<int64_t> actual,
                                   ArrayRef<int64_t> expected) {
  if (actual.size() != expected.size())
    return op->emitOpError()
           << what << " has rank " << actual.size() << " (shape "
           << formatShape(actual) << ") but expected rank " << expected.size()
           << " (shape " << formatShape(expected) << ")";
  for (auto [i, pair] : llvm::enumerate(llvm::zip(actual, expected))) {
    auto [a, e] = pair;
    if (!sizesMatch(a, e))
      return op->emitOpError()
             << what << " has shape " << formatShape(actual) << " but expected "
             << formatShape(expected) << ": dim " << i << " is " << a
             << ", expected " << e;
  }
  return success();
}

static LogicalResult verifyRank(Operation *op, StringRef what, Value value,
                                int64_t rank) {
  int64_t actual = shapeOf(value).size();
  if (actual != rank)
    return op->emitOpError()
           << what << " must have rank " << rank << ", got rank " << actual;
  return success();
}

static LogicalResult verifyMinRank(Operation *op, StringRef what, Value value,
                                   int64_t minRank) {
  int64_t actual = shapeOf(value).size();
  if (actual < minRank)
    return op->emitOpError() << what << " must have rank >= " << minRank
                             << ", got rank " << actual;
  return success();
}

/// Names `value` as an operand or result of `op` for diagnostics.
static std::string describeValue(Operation *op, Value value) {
  if (auto result = dyn_cast<OpResult>(value);
      result && result.getOwner() == op)
    return "result #" + std::to_string(result.getResultNumber());
  for (OpOperand &operand : op->getOpOperands())
    if (operand.get() == value)
      return "operand #" + std::to_string(operand.getOperandNumber());
  return "value";
}

/// Checks that all `values` share one element type.
static LogicalResult verifySameElementType(Operation *op,
                                           ArrayRef<Value> values) {
  if (values.empty())
    return success();
  Type expected = getElementTypeOrSelf(values.front().getType());
  for (Value value : values.drop_front()) {
    Type actual = getElementTypeOrSelf(value.getType());
    if (actual != expected)
      return op->emitOpError()
             << "element types differ: " << describeValue(op, values.front())
             << " has " << expected << " but " << describeValue(op, value)
             << " has " << actual;
  }
  return success();
}

/// Checks that `value` is one of `allowed`, naming the attribute.
static LogicalResult verifyKeyword(Operation *op, StringRef name,
                                   StringRef value,
                                   ArrayRef<StringRef> allowed) {
  if (llvm::is_contained(allowed, value))
    return success();
  std::string list;
  for (StringRef a : allowed)
    list += (list.empty() ? "'" : ", '") + a.str() + "'";
  return op->emitOpError() << "'" << name << "' is '" << value
                           << "'; expected one of " << list;
}

static SmallVector<Value> allValues(Operation *op) {
  SmallVector<Value> values(op->getOperands());
  llvm::append_range(values, op->getResults());
  return values;
}

/// Maps `axis` in [-rank, rank) to [0, rank), or reports it out of range.
static FailureOr<int64_t> normalizeAxis(Operation *op, int64_t axis,
                                        int64_t rank, StringRef what = "axis") {
  if (axis < -rank || axis >= rank) {
    op->emitOpError() << what << " " << axis << " is out of range for rank "
                      << rank << " (expected -" << rank << " <= axis < " << rank
                      << ")";
    return failure();
  }
  return axis < 0 ? axis + rank : axis;
}

/// The numpy broadcast of two shapes (aligned at the trailing dim), or an
/// error naming the first incompatible pair.
static FailureOr<SmallVector<int64_t>>
broadcastShapes(Operation *op, StringRef lhsName, ArrayRef<int64_t> lhs,
                StringRef rhsName, ArrayRef<int64_t> rhs) {
  size_t rank = std::max(lhs.size(), rhs.size());
  SmallVector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Position counted from the trailing dim.
    bool hasLhs = i < lhs.size(), hasRhs = i < rhs.size();
    int64_t a = hasLhs ? lhs[lhs.size() - 1 - i] : 1;
    int64_t b = hasRhs ? rhs[rhs.size() - 1 - i] : 1;
    int64_t &out = result[rank - 1 - i];
    if (a == 1)
      out = b;
    else if (b == 1)
      out = a;
    else if (isDynamic(a))
      out = b;
    else if (isDynamic(b) || a == b)
      out = a;
    else {
      op->emitOpError() << "shapes are not broadcast-compatible: " << lhsName
                        << " dim " << lhs.size() - 1 - i << " is " << a << ", "
                        << rhsName << " dim " << rhs.size() - 1 - i << " is "
                        << b;
      return failure();
    }
  }
  return result;
}

/// Checks that an attribute array has `size` entries.
static LogicalResult verifyArraySize(Operation *op, StringRef name,
                                     ArrayRef<int64_t> values, size_t size) {
  if (values.size() != size)
    return op->emitOpError() << "'" << name << "' must have " << size
                             << " entries, got " << values.size();
  return success();
}

/// Checks that every entry of an attribute array is >= `minimum`.
static LogicalResult verifyAllAtLeast(Operation *op, StringRef name,
                                      ArrayRef<int64_t> values,
                                      int64_t minimum) {
  for (auto [i, v] : llvm::enumerate(values))
    if (v < minimum)
      return op->emitOpError() << "'" << name << "' entry " << i << " is " << v
                               << "; expected >= " << minimum;
  return success();
}

/// Output size of a sliding window: floor((size + pads - window) / stride) + 1,
/// where window is the dilated kernel extent.
static int64_t windowOutputSize(int64_t size, int64_t padLo, int64_t padHi,
                                int64_t window, int64_t stride, bool ceilMode) {
  if (isDynamic(size))
    return ShapedType::kDynamic;
  int64_t span = size + padLo + padHi - window;
  if (span < 0)
    return 0;
  int64_t out = (ceilMode ? (span + stride - 1) / stride : span / stride) + 1;
  // As in PyTorch (and ONNX since opset 19): in ceil mode the last window must
  // start inside the input or the left padding, not in the right padding.
  if (ceilMode && (out - 1) * stride >= size + padLo)
    --out;
  return out;
}

//===----------------------------------------------------------------------===//
// StrategyAttr syntax
//===----------------------------------------------------------------------===//

// `<degrees = [d...] (, key = value | , recompute)*>` with keys start,
// strides, replicas, zero, scatter and stage, each at most once and in any
// order; only values other than the defaults are printed.
Attribute StrategyAttr::parse(AsmParser &parser, Type) {
  SMLoc loc = parser.getCurrentLocation();
  SmallVector<int64_t> degrees, strides;
  int64_t start = 0, replicas = 1, zero = 0, scatter = -1, stage = 0;
  bool recompute = false, ring = false;
  auto parseList = [&](SmallVector<int64_t> &values) {
    return parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&] {
      return parser.parseInteger(values.emplace_back());
    });
  };
  if (parser.parseLess() || parser.parseKeyword("degrees") ||
      parser.parseEqual() || parseList(degrees))
    return {};
  llvm::StringSet<> seen;
  while (succeeded(parser.parseOptionalComma())) {
    SMLoc keyLoc = parser.getCurrentLocation();
    StringRef key;
    if (parser.parseKeyword(&key))
      return {};
    if (!seen.insert(key).second ||
        !llvm::is_contained({"start", "strides", "replicas", "zero", "scatter",
                             "stage", "recompute", "ring"},
                            key)) {
      parser.emitError(keyLoc)
          << "expected 'start', 'strides', 'replicas', 'zero', 'scatter', "
             "'stage', 'recompute' or 'ring' (each at most once), got '"
          << key << "'";
      return {};
    }
    if (key == "recompute" || key == "ring") {
      (key == "ring" ? ring : recompute) = true;
      continue;
    }
    if (parser.parseEqual())
      return {};
    if (key == "strides"    ? failed(parseList(strides))
        : key == "start"    ? failed(parser.parseInteger(start))
        : key == "replicas" ? failed(parser.parseInteger(replicas))
        : key == "scatter"  ? failed(parser.parseInteger(scatter))
        : key == "stage"    ? failed(parser.parseInteger(stage))
                            : failed(parser.parseInteger(zero)))
      return {};
  }
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); }, parser.getContext(),
                    ArrayRef<int64_t>(degrees), start,
                    ArrayRef<int64_t>(strides), replicas, recompute, zero,
                    scatter, stage, ring);
}

void StrategyAttr::print(AsmPrinter &printer) const {
  printer << "<degrees = [";
  llvm::interleaveComma(getDegrees(), printer);
  printer << "]";
  if (getStart() != 0)
    printer << ", start = " << getStart();
  if (!getStrides().empty()) {
    printer << ", strides = [";
    llvm::interleaveComma(getStrides(), printer);
    printer << "]";
  }
  if (getReplicas() != 1)
    printer << ", replicas = " << getReplicas();
  if (getRecompute())
    printer << ", recompute";
  if (getZero() != 0)
    printer << ", zero = " << getZero();
  if (getScatter() != -1)
    printer << ", scatter = " << getScatter();
  if (getStage() != 0)
    printer << ", stage = " << getStage();
  if (getRing())
    printer << ", ring";
  printer << ">";
}

//===----------------------------------------------------------------------===//
// Parallel ops
//===----------------------------------------------------------------------===//

/// An `exchange` names a kind of the communication plan's one list.
static LogicalResult verifyExchange(Operation *op,
                                    std::optional<StringRef> exchange) {
  using ppc::geometry::ExchangeKind;
  std::optional<ExchangeKind> parsed =
      exchange ? ppc::geometry::parseExchangeKind(*exchange) : std::nullopt;
  if (!exchange || (parsed && *parsed != ExchangeKind::Ring))
    return success();
  if (parsed)
    return op->emitOpError()
           << "exchange 'ring' is the blocks a ring op passes round (its "
              "strategy's `ring`), not a resharding between ops";
  std::string kinds;
  for (ExchangeKind kind : ppc::geometry::kExchangeKinds)
    if (kind != ExchangeKind::Ring)
      kinds += (kinds.empty() ? "" : ", ") +
               std::string(ppc::geometry::exchangeKindName(kind));
  return op->emitOpError() << "unknown exchange '" << *exchange
                           << "'; expected one of " << kinds;
}

LogicalResult RepartitionOp::verify() {
  return verifyExchange(*this, getExchange());
}
LogicalResult CombineOp::verify() {
  return verifyExchange(*this, getExchange());
}
LogicalResult ReplicateOp::verify() {
  return verifyExchange(*this, getExchange());
}
LogicalResult PartialReduceOp::verify() {
  return verifyExchange(*this, getExchange());
}

//===----------------------------------------------------------------------===//
// WeightOp, ConstantOp
//===----------------------------------------------------------------------===//

LogicalResult WeightOp::verify() {
  if (getName().empty())
    return emitOpError() << "weight name must not be empty";
  if (std::optional<ElementsAttr> value = getValue())
    if (value->getType() != getType())
      return emitOpError() << "initial value has type " << value->getType()
                           << " but the weight has type " << getType();
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

LogicalResult MatMulOp::verify() {
  Operation *op = getOperation();
  if (failed(verifyMinRank(op, "lhs", getLhs(), 2)) ||
      failed(verifyMinRank(op, "rhs", getRhs(), 2)) ||
      failed(verifySameElementType(op, allValues(op))))
    return failure();
  ArrayRef<int64_t> lhs = shapeOf(getLhs()), rhs = shapeOf(getRhs());
  size_t lr = lhs.size(), rr = rhs.size();
  int64_t m = getTransposeLhs() ? lhs[lr - 1] : lhs[lr - 2];
  int64_t lhsK = getTransposeLhs() ? lhs[lr - 2] : lhs[lr - 1];
  int64_t rhsK = getTransposeRhs() ? rhs[rr - 1] : rhs[rr - 2];
  int64_t n = getTransposeRhs() ? rhs[rr - 2] : rhs[rr - 1];
  if (!sizesMatch(lhsK, rhsK))
    return emitOpError() << "contraction dims differ: lhs has " << lhsK
                         << ", rhs has " << rhsK;
  FailureOr<SmallVector<int64_t>> batch =
      broadcastShapes(op, "lhs", lhs.drop_back(2), "rhs", rhs.drop_back(2));
  if (failed(batch))
    return failure();
  SmallVector<int64_t> expected = *batch;
  expected.append({m, n});
  return verifyShapeIs(op, "result", shapeOf(getResult()), expected);
}

SmallVector<int64_t> AttentionOp::logicalDims() {
  int64_t rank = shapeOf(getQuery()).size();
  if (headsAfterPositions())
    return {0, 2, 1, 3};
  return llvm::to_vector(llvm::seq<int64_t>(0, rank));
}

LogicalResult AttentionOp::verify() {
  Operation *op = getOperation();
  if (failed(verifyKeyword(op, "layout", getLayout(), {"bhsd", "bshd"})) ||
      failed(verifyMinRank(op, "query", getQuery(), 2)) ||
      (headsAfterPositions() &&
       failed(verifyRank(op, "query", getQuery(), 4))) ||
      failed(verifyRank(op, "key", getKey(), shapeOf(getQuery()).size())) ||
      failed(verifyRank(op, "value", getValue(), shapeOf(getQuery()).size())) ||
      failed(verifySameElementType(op, allValues(op))))
    return failure();
  // The checks read the default layout's dims; shapes print as written.
  SmallVector<int64_t> dims = logicalDims();
  auto logical = [&](Value v) {
    ArrayRef<int64_t> shape = shapeOf(v);
    SmallVector<int64_t> out;
    for (int64_t d : dims)
      out.push_back(shape[d]);
    return out;
  };
  auto written = [&](ArrayRef<int64_t> shape) {
    SmallVector<int64_t> out(shape.size());
    for (size_t i = 0; i < dims.size(); ++i)
      out[dims[i]] = shape[i];
    return out;
  };
  SmallVector<int64_t> query = logical(getQuery()), key = logical(getKey()),
                       value = logical(getValue());
  size_t lead = query.size() - 2;
  // Key: the query's leading dims, any length T, the query's head size.
  SmallVector<int64_t> expected(query.begin(), query.begin() + lead);
  expected.append({key[lead], query.back()});
  if (failed(verifyShapeIs(op, "key", shapeOf(getKey()), written(expected))))
    return failure();
  // Value: one row per key position, any head size Dv.
  expected.assign(query.begin(), query.begin() + lead);
  expected.append({key[lead], value.back()});
  if (failed(
          verifyShapeIs(op, "value", shapeOf(getValue()), written(expected))))
    return failure();
  expected.assign(query.begin(), query.end() - 1);
  expected.push_back(value.back());
  if (failed(
          verifyShapeIs(op, "result", shapeOf(getResult()), written(expected))))
    return failure();
  double scale = getScale().convertToDouble();
  if (!std::isfinite(scale))
    return emitOpError() << "scale " << formatNumber(getScale())
                         << " must be finite";
  double ratio = getRatio().convertToDouble();
  if (!(ratio >= 0 && ratio < 1))
    return emitOpError() << "ratio " << formatNumber(getRatio())
                         << " must be in [0, 1)";
  int64_t zigzag = getZigzag(), length = query[lead];
  if (zigzag < 0)
    return emitOpError() << "zigzag " << zigzag << " must not be negative";
  if (zigzag > 0 && !getCausal())
    return emitOpError() << "zigzag " << zigzag
                         << " orders a causal mask; the op is not causal";
  if (zigzag > 0 && (key[lead] != length || length % (2 * zigzag) != 0))
    return emitOpError() << "zigzag " << zigzag << " needs as many keys ("
                         << key[lead] << ") as queries (" << length
                         << "), a multiple of " << 2 * zigzag;
  return success();
}

LogicalResult LinearOp::verify() {
  Operation *op = getOperation();
  if (failed(verifyMinRank(op, "input", getInput(), 1)) ||
      failed(verifyRank(op, "weight", getWeight(), 2)) ||
      failed(verifySameElementType(op, allValues(op))))
    return failure();
  ArrayRef<int64_t> input = shapeOf(getInput()), weight = shapeOf(getWeight());
  int64_t inputK = input.back();
  int64_t weightK = getTransposeWeight() ? weight[1] : weight[0];
  int64_t n = getTransposeWeight() ? weight[0] : weight[1];
  if (!sizesMatch(inputK, weightK))
    return emitOpError() << "contraction dims differ: input has " << inputK
                         << ", weight has " << weightK
                         << (getTransposeWeight() ? " (weight is [N, K])"
                                                  : " (weight is [K, N])");
  if (Value bias = getBias())
    if (failed(verifyShapeIs(op, "bias", shapeOf(bias), {n})))
      return failure();
  SmallVector<int64_t> expected(input.drop_back());
  expected.push_back(n);
  return verifyShapeIs(op, "result", shapeOf(getResult()), expected);
}

/// What conv2d and conv_transpose2d check alike: ranks, the window
/// attributes, element types, and groups that divide the input channels.
template <typename ConvOp> static LogicalResult verifyConvCommon(ConvOp conv) {
  Operation *op = conv.getOperation();
  if (failed(verifyRank(op, "input", conv.getInput(), 4)) ||
      failed(verifyRank(op, "weight", conv.getWeight(), 4)) ||
      failed(verifyArraySize(op, "strides", conv.getStrides(), 2)) ||
      failed(verifyArraySize(op, "pads", conv.getPads(), 4)) ||
      failed(verifyArraySize(op, "dilations", conv.getDilations(), 2)) ||
      failed(verifyAllAtLeast(op, "strides", conv.getStrides(), 1)) ||
      failed(verifyAllAtLeast(op, "pads", conv.getPads(), 0)) ||
      failed(verifyAllAtLeast(op, "dilations", conv.getDilations(), 1)) ||
      failed(verifySameElementType(op, allValues(op))))
    return failure();
  int64_t groups = static_cast<int64_t>(conv.getGroups());
  if (groups < 1)
    return conv.emitOpError() << "groups is " << groups << "; expected >= 1";
  int64_t channels = shapeOf(conv.getInput())[1];
  if (!isDynamic(channels) && channels % groups != 0)
    return conv.emitOpError() << "input channels " << channels
                              << " are not divisible by groups " << groups;
  return success();
}

LogicalResult Conv2DOp::verify() {
  Operation *op = getOperation();
  if (failed(verifyConvCommon(*this)))
    return failure();
  int64_t groups = static_cast<int64_t>(getGroups());
  ArrayRef<int64_t> input = shapeOf(getInput()), weight = shapeOf(getWeight());
  int64_t channels = input[1], filters = weight[0];
  if (!isDynamic(filters) && filters % groups != 0)
    return emitOpError() << "output channels " << filters
                         << " are not divisible by groups " << groups;
  if (!isDynamic(channels) && !sizesMatch(weight[1], channels / groups))
    return emitOpError() << "weight dim 1 is " << weight[1] << " but input has "
                         << channels << " channels in " << groups
                         << " groups (expected " << channels / groups << ")";
  if (Value bias = getBias())
    if (failed(verifyShapeIs(op, "bias", shapeOf(bias), {filters})))
      return failure();

  ArrayRef<int64_t> strides = getStrides(), pads = getPads(),
                    dilations = getDilations();
  SmallVector<int64_t> expected = {input[0], filters};
  for (int i = 0; i < 2; ++i) {
    int64_t kernel = weight[2 + i];
    if (isDynamic(kernel)) {
      expected.push_back(ShapedType::kDynamic);
      continue;
    }
    int64_t window = dilations[i] * (kernel - 1) + 1;
    int64_t padded = input[2 + i] + pads[i] + pads[i + 2];
    if (!isDynamic(input[2 + i]) && padded < window)
      return emitOpError() << "padded input dim " << 2 + i << " is " << padded
                           << " but the dilated kernel spans " << window;
    expected.push_back(windowOutputSize(input[2 + i], pads[i], pads[i + 2],
                                        window, strides[i],
                                        /*ceilMode=*/false));
  }
  return verifyShapeIs(op, "result", shapeOf(getResult()), expected);
}

LogicalResult ConvTranspose2DOp::verify() {
  Operation *op = getOperation();
  if (failed(verifyConvCommon(*this)) ||
      failed(verifyArraySize(op, "output_padding", getOutputPadding(), 2)) ||
      failed(verifyAllAtLeast(op, "output_padding", getOutputPadding(), 0)))
    return failure();
  int64_t groups = static_cast<int64_t>(getGroups());
  ArrayRef<int64_t> input = shapeOf(getInput()), weight = shapeOf(getWeight());
  int64_t channels = input[1];
  if (!sizesMatch(weight[0], channels))
    return emitOpError() << "weight dim 0 is " << weight[0] << " but input has "
                         << channels
                         << " channels (weight is [C, F / groups, KH, KW])";
  int64_t filters =
      isDynamic(weight[1]) ? ShapedType::kDynamic : weight[1] * groups;
  if (Value bias = getBias())
    if (failed(verifyShapeIs(op, "bias", shapeOf(bias), {filters})))
      return failure();

  ArrayRef<int64_t> strides = getStrides(), pads = getPads(),
                    dilations = getDilations(), extra = getOutputPadding();
  SmallVector<int64_t> expected = {input[0], filters};
  for (int i = 0; i < 2; ++i) {
    int64_t in = input[2 + i], kernel = weight[2 + i];
    if (isDynamic(in) || isDynamic(kernel)) {
      expected.push_back(ShapedType::kDynamic);
      continue;
    }
    int64_t size = (in - 1) * strides[i] + dilations[i] * (kernel - 1) + 1 -
                   pads[i] - pads[i + 2] + extra[i];
    if (size < 1)
      return emitOpError() << "result dim " << 2 + i << " is " << size
                           << ": the pads crop the whole scatter";
    expected.push_back(size);
  }
  return verifyShapeIs(op, "result", shapeOf(getResult()), expected);
}

//===----------------------------------------------------------------------===//
// Pooling and normalization
//===----------------------------------------------------------------------===//

/// Shared by max and average pooling.
template <typename PoolOp> static LogicalResult verifyPool2D(PoolOp pool) {
  Operation *op = pool.getOperation();
  if (failed(verifyRank(op, "input", pool.getInput(), 4)) ||
      failed(verifyArraySize(op, "kernel", pool.getKernel(), 2)) ||
      failed(verifyArraySize(op, "strides", pool.getStrides(), 2)) ||
      failed(verifyArraySize(op, "pads", pool.getPads(), 4)) ||
      failed(verifyAllAtLeast(op, "kernel", pool.getKernel(), 1)) ||
      failed(verifyAllAtLeast(op, "strides", pool.getStrides(), 1)) ||
      failed(verifyAllAtLeast(op, "pads", pool.getPads(), 0)) ||
      failed(verifySameElementType(op, allValues(op))))
    return failure();
  ArrayRef<int64_t> input = shapeOf(pool.getInput());
  ArrayRef<int64_t> kernel = pool.getKernel(), strides = pool.getStrides(),
                    pads = pool.getPads();
  SmallVector<int64_t> expected = {input[0], input[1]};
  for (int i = 0; i < 2; ++i) {
    int64_t padded = input[2 + i] + pads[i] + pads[i + 2];
    if (!isDynamic(input[2 + i]) && padded < kernel[i])
      return op->emitOpError()
             << "padded input dim " << 2 + i << " is " << padded
             << " but the kernel spans " << kernel[i];
    expected.push_back(windowOutputSize(input[2 + i], pads[i], pads[i + 2],
                                        kernel[i], strides[i],
                                        pool.getCeilMode()));
  }
  return verifyShapeIs(op, "result", shapeOf(pool.getResult()), expected);
}

LogicalResult MaxPool2DOp::verify() { return verifyPool2D(*this); }
LogicalResult AvgPool2DOp::verify() { return verifyPool2D(*this); }

//===----------------------------------------------------------------------===//
// Resize
//===----------------------------------------------------------------------===//

ArrayRef<StringRef> ResizeOp::getModeKeywords() {
  static const StringRef keywords[] = {"nearest", "linear", "cubic"};
  return keywords;
}

ArrayRef<StringRef> ResizeOp::getCoordinateKeywords() {
  static const StringRef keywords[] = {
      "half_pixel", "pytorch_half_pixel",   "align_corners",
      "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  return keywords;
}

ArrayRef<StringRef> ResizeOp::getNearestKeywords() {
  static const StringRef keywords[] = {"round_prefer_floor",
                                       "round_prefer_ceil", "floor", "ceil"};
  return keywords;
}

LogicalResult ResizeOp::verify() {
  Operation *op = getOperation();
  if (failed(verifyRank(op, "input", getInput(), 4)) ||
      failed(verifySameElementType(op, allValues(op))) ||
      failed(verifyKeyword(op, "mode", getMode(), getModeKeywords())) ||
      failed(verifyKeyword(op, "coordinate_transformation_mode",
                           getCoordinateTransformationMode(),
                           getCoordinateKeywords())) ||
      failed(verifyKeyword(op, "nearest_mode", getNearestMode(),
                           getNearestKeywords())))
    return failure();
  ArrayRef<double> scales = getScales();
  if (scales.size() != 2)
    return emitOpError() << "'scales' must have 2 entries (H, W), got "
                         << scales.size();
  for (auto [i, s] : llvm::enumerate(scales))
    if (!(s > 0) || !std::isfinite(s))
      return emitOpError() << "'scales' entry " << i << " is " << s
                           << "; expected a finite scale > 0";
  bool crop = getCoordinateTransformationMode() == "tf_crop_and_resize";
  std::optional<ArrayRef<double>> roi = getRoi();
  if (crop != roi.has_value())
    return emitOpError() << (crop ? "'tf_crop_and_resize' needs a 'roi'"
                                  : "'roi' is only used by "
                                    "'tf_crop_and_resize'");
  if (roi && roi->size() != 4)
    return emitOpError() << "'roi' must have 4 entries (loH, loW, hiH, hiW), "
                            "got "
                         << roi->size();
  ArrayRef<int64_t> input = shapeOf(getInput()), result = shapeOf(getResult());
  SmallVector<int64_t> expected = {input[0], input[1]};
  for (int i = 0; i < 2; ++i) {
    int64_t in = input[2 + i], out = result.size() == 4 ? result[2 + i] : 0;
    if (isDynamic(in) || result.size() != 4 || isDynamic(out)) {
      expected.push_back(out);
      continue;
    }
    // ONNX: floor(in * roi length * scale); sizes-derived scales may land
    // an ulp below the integer they came from.
    double length = roi ? (*roi)[2 + i] - (*roi)[i] : 1.0;
    double exact = static_cast<double>(in) * length * scales[i];
    if (out == static_cast<int64_t>(std::floor(exact)) ||
        std::fabs(static_cast<double>(out) - exact) <
            1e-6 * std::max(1.0, exact))
      expected.push_back(out);
    else
      expected.push_back(static_cast<int64_t>(std::floor(exact)));
  }
  return verifyShapeIs(op, "result", result, expected);
}

LogicalResult GlobalAvgPoolOp::verify() {
  Operation *op = getOperation();
  if (failed(verifyMinRank(op, "input", getInput(), 3)) ||
      failed(verifySameElementType(op, allValues(op))))
    return failure();
  ArrayRef<int64_t> input = shapeOf(getInput());
  SmallVector<int64_t> expected(input.size(), 1);
  expected[0] = input[0];
  expected[1] = input[1];
  return verifyShapeIs(op, "result", shapeOf(getResult()), expected);
}

LogicalResult BatchNormOp::verify() {
  Operation *op = getOperation();
  if (failed(verifyMinRank(op, "input", getInput(), 2)) ||
      failed(verifySameElementType(op, allValues(op))))
    return failure();
  ArrayRef<int64_t> input = shapeOf(getInput());
  int64_t channels = input[1];
  for (auto [name, value] : {std::pair<StringRef, Value>{"scale", getScale()},
                             {"bias", getBias()},
                             {"mean", getMean()},
                             {"variance", getVariance()}})
    if (failed(verifyShapeIs(op, name, shapeOf(value), {channels})))
      return failure();
  if (!(getEpsilon().convertToDouble() >= 0))
    return emitOpError() << "epsilon " << formatNumber(getEpsilon())
                         << " must be >= 0";
  double momentum = getMomentum().convertToDouble();
  if (!(momentum >= 0 && momentum <= 1))
    return emitOpError() << "momentum " << formatNumber(getMomentum())
                         << " must be in [0, 1]";
  return verifyShapeIs(op, "result", shapeOf(getResult()), input);
}

LogicalResult LayerNormOp::verify() {
  Operation *op = getOperation();
  if (failed(verifyMinRank(op, "input", getInput(), 1)) ||
      failed(verifySameElementType(op, allValues(op))))
    return failure();
  ArrayRef<int64_t> input = shapeOf(getInput());
  FailureOr<int64_t> axis =
      normalizeAxis(op, getAxisAttr().getInt(), input.size());
  if (failed(axis))
    return failure();
  ArrayRef<int64_t> normalized = input.drop_front(*axis);
  if (failed(verifyShapeIs(op, "scale", shapeOf(getScale()), normalized)))
    return failure();
  if (Value bias = getBias())
    if (failed(verifyShapeIs(op, "bias", shapeOf(bias), normalized)))
      return failure();
  if (!(getEpsilon().convertToDouble() >= 0))
    return emitOpError() << "epsilon " << formatNumber(getEpsilon())
                         << " must be >= 0";
  return verifyShapeIs(op, "result", shapeOf(getResult()), input);
}

/// Shared by softmax and log_softmax (types already match by trait).
template <typename SoftmaxLikeOp>
static LogicalResult verifySoftmaxLike(SoftmaxLikeOp softmax) {
  Operation *op = softmax.getOperation();
  if (failed(verifyMinRank(op, "input", softmax.getInput(), 1)))
    return failure();
  return success(succeeded(normalizeAxis(op, softmax.getAxisAttr().getInt(),
                                         shapeOf(softmax.getInput()).size())));
}

LogicalResult SoftmaxOp::verify() { return verifySoftmaxLike(*this); }
LogicalResult LogSoftmaxOp::verify() { return verifySoftmaxLike(*this); }

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// Shared by every binary op: the result is the numpy broadcast of the
/// operands, and `sameType` (all values, or the operands of a comparison
/// whose result is i1) share one element type.
static LogicalResult verifyBinary(Operation *op, ArrayRef<Value> sameType) {
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  if (failed(verifySameElementType(op, sameType)))
    return failure();
  FailureOr<SmallVector<int64_t>> expected =
      broadcastShapes(op, "lhs", shapeOf(lhs), "rhs", shapeOf(rhs));
  if (failed(expected))
    return failure();
  return verifyShapeIs(op, "result", shapeOf(op->getResult(0)), *expected);
}

static LogicalResult verifyBinary(Operation *op) {
  return verifyBinary(op, allValues(op));
}

LogicalResult AddOp::verify() { return verifyBinary(getOperation()); }
LogicalResult SubOp::verify() { return verifyBinary(getOperation()); }
LogicalResult MulOp::verify() { return verifyBinary(getOperation()); }
LogicalResult DivOp::verify() { return verifyBinary(getOperation()); }
LogicalResult PowOp::verify() { return verifyBinary(getOperation()); }
LogicalResult MaxOp::verify() { return verifyBinary(getOperation()); }
LogicalResult MinOp::verify() { return verifyBinary(getOperation()); }

/// The slope broadcasts to the input, never the other way (ONNX's
/// unidirectional broadcasting): the result has the input's shape.
LogicalResult PReluOp::verify() {
  if (failed(verifyBinary(getOperation())))
    return failure();
  if (shapeOf(getResult()) != shapeOf(getLhs()))
    return emitOpError() << "slope of shape " << formatShape(shapeOf(getRhs()))
                         << " does not broadcast to the input shape "
                         << formatShape(shapeOf(getLhs()));
  return success();
}

/// Comparisons and logic: operands of one element type that broadcast to
/// the (i1) result.
static LogicalResult verifyCompare(Operation *op) {
  return verifyBinary(op, {op->getOperand(0), op->getOperand(1)});
}

LogicalResult EqualOp::verify() { return verifyCompare(getOperation()); }
LogicalResult LessOp::verify() { return verifyCompare(getOperation()); }
LogicalResult LessEqualOp::verify() { return verifyCompare(getOperation()); }
LogicalResult GreaterOp::verify() { return verifyCompare(getOperation()); }
LogicalResult GreaterEqualOp::verify() { return verifyCompare(getOperation()); }
LogicalResult AndOp::verify() { return verifyCompare(getOperation()); }
LogicalResult OrOp::verify() { return verifyCompare(getOperation()); }

/// The condition and both sides broadcast to the result; the sides and the
/// result share their element type.
LogicalResult SelectOp::verify() {
  Operation *op = getOperation();
  if (failed(verifySameElementType(op, {getLhs(), getRhs(), getResult()})))
    return failure();
  FailureOr<SmallVector<int64_t>> sides =
      broadcastShapes(op, "lhs", shapeOf(getLhs()), "rhs", shapeOf(getRhs()));
  if (failed(sides))
    return failure();
  FailureOr<SmallVector<int64_t>> expected = broadcastShapes(
      op, "condition", shapeOf(getCondition()), "sides", *sides);
  if (failed(expected))
    return failure();
  return verifyShapeIs(op, "result", shapeOf(getResult()), *expected);
}

LogicalResult CumSumOp::verify() {
  Operation *op = getOperation();
  return success(
      succeeded(normalizeAxis(op, getAxis(), shapeOf(getInput()).size())));
}

LogicalResult DropoutOp::verify() {
  double ratio = getRatio().convertToDouble();
  if (!(ratio >= 0 && ratio < 1))
    return emitOpError() << "ratio " << formatNumber(getRatio())
                         << " must be in [0, 1)";
  return success();
}

LogicalResult BroadcastOp::verify() {
  Operation *op = getOperation();
  if (failed(verifySameElementType(op, allValues(op))))
    return failure();
  ArrayRef<int64_t> input = shapeOf(getInput()), result = shapeOf(getResult());
  if (input.size() > result.size())
    return emitOpError() << "input rank " << input.size()
                         << " exceeds result rank " << result.size();
  size_t lead = result.size() - input.size();
  for (auto [i, size] : llvm::enumerate(input))
    if (size != 1 && !sizesMatch(size, result[lead + i]))
      return emitOpError() << "input dim " << i << " is " << size
                           << " but result dim " << lead + i << " is "
                           << result[lead + i]
                           << "; a broadcast dim must be 1 or equal";
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// Normalizes `axes` and checks they are distinct; returns a mask of the
/// reduced dims.
static FailureOr<llvm::SmallBitVector>
verifyAxes(Operation *op, ArrayRef<int64_t> axes, int64_t rank) {
  llvm::SmallBitVector reduced(rank);
  for (int64_t axis : axes) {
    FailureOr<int64_t> normalized = normalizeAxis(op, axis, rank);
    if (failed(normalized))
      return failure();
    if (reduced.test(*normalized)) {
      op->emitOpError() << "axis " << axis << " (dim " << *normalized
                        << ") is repeated";
      return failure();
    }
    reduced.set(*normalized);
  }
  return reduced;
}

/// Shared by every reduction: result dims are the input's with the reduced
/// ones set to 1 (keep_dims) or dropped.
template <typename ReduceOp>
static LogicalResult verifyReduce(ReduceOp reduce) {
  Operation *op = reduce.getOperation();
  if (failed(verifySameElementType(op, allValues(op))))
    return failure();
  ArrayRef<int64_t> input = shapeOf(reduce.getInput());
  if (reduce.getAxes().empty())
    return op->emitOpError() << "expects at least one axis";
  FailureOr<llvm::SmallBitVector> reduced =
      verifyAxes(op, reduce.getAxes(), input.size());
  if (failed(reduced))
    return failure();
  SmallVector<int64_t> expected;
  for (auto [i, size] : llvm::enumerate(input)) {
    if (!reduced->test(i))
      expected.push_back(size);
    else if (reduce.getKeepDims())
      expected.push_back(1);
  }
  return verifyShapeIs(op, "result", shapeOf(reduce.getResult()), expected);
}

LogicalResult ReduceSumOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceMeanOp::verify() { return verifyReduce(*this); }
LogicalResult ReduceMaxOp::verify() { return verifyReduce(*this); }

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  Operation *op = getOperation();
  if (failed(verifySameElementType(op, allValues(op))))
    return failure();
  auto inputType = cast<RankedTensorType>(getInput().getType());
  auto resultType = cast<RankedTensorType>(getResult().getType());
  if (!inputType.hasStaticShape() || !resultType.hasStaticShape())
    return success();
  if (inputType.getNumElements() != resultType.getNumElements())
    return emitOpError() << "element count differs: input "
                         << formatShape(inputType.getShape()) << " has "
                         << inputType.getNumElements() << ", result "
                         << formatShape(resultType.getShape()) << " has "
                         << resultType.getNumElements();
  return success();
}

LogicalResult TransposeOp::verify() {
  Operation *op = getOperation();
  if (failed(verifySameElementType(op, allValues(op))))
    return failure();
  ArrayRef<int64_t> input = shapeOf(getInput());
  ArrayRef<int64_t> permutation = getPermutation();
  if (permutation.size() != input.size())
    return emitOpError() << "permutation has " << permutation.size()
                         << " entries but the input has rank " << input.size();
  llvm::SmallBitVector seen(input.size());
  SmallVector<int64_t> expected;
  for (auto [i, p] : llvm::enumerate(permutation)) {
    if (p < 0 || p >= static_cast<int64_t>(input.size()))
      return emitOpError() << "permutation entry " << i << " is " << p
                           << "; expected 0 <= entry < " << input.size();
    if (seen.test(p))
      return emitOpError() << "permutation entry " << i << " repeats dim " << p;
    seen.set(p);
    expected.push_back(input[p]);
  }
  return verifyShapeIs(op, "result", shapeOf(getResult()), expected);
}

/// Checks that `pieces` equal `whole` on every dim but `axis` and that their
/// sizes along `axis` add up to it. Shared by concat and split.
static LogicalResult verifyPiecesAlongAxis(Operation *op, StringRef pieceName,
                                           ValueRange pieces,
                                           StringRef wholeName, Value whole,
                                           int64_t axisAttr) {
  if (pieces.empty())
    return op->emitOpError() << "expects at least one " << pieceName;
  ArrayRef<int64_t> wholeShape = shapeOf(whole);
  FailureOr<int64_t> axis = normalizeAxis(op, axisAttr, wholeShape.size());
  if (failed(axis))
    return failure();
  int64_t sum = 0;
  bool dynamic = isDynamic(wholeShape[*axis]);
  for (auto [i, piece] : llvm::enumerate(pieces)) {
    ArrayRef<int64_t> shape = shapeOf(piece);
    if (shape.size() != wholeShape.size())
      return op->emitOpError()
             << pieceName << " #" << i << " has rank " << shape.size()
             << " but the " << wholeName << " has rank " << wholeShape.size();
    for (auto [d, pair] : llvm::enumerate(llvm::zip(shape, wholeShape))) {
      auto [p, w] = pair;
      if (static_cast<int64_t>(d) != *axis && !sizesMatch(p, w))
        return op->emitOpError()
               << pieceName << " #" << i << " dim " << d << " is " << p
               << " but the " << wholeName << " dim " << d << " is " << w;
    }
    dynamic |= isDynamic(shape[*axis]);
    sum += shape[*axis];
  }
  if (!dynamic && sum != wholeShape[*axis])
    return op->emitOpError()
           << "sizes along axis " << *axis << " add up to " << sum
           << " but the " << wholeName << " has " << wholeShape[*axis];
  return success();
}

LogicalResult ConcatOp::verify() {
  Operation *op = getOperation();
  if (failed(verifySameElementType(op, allValues(op))))
    return failure();
  return verifyPiecesAlongAxis(op, "input", getInputs(), "result", getResult(),
                               getAxisAttr().getInt());
}

LogicalResult SplitOp::verify() {
  Operation *op = getOperation();
  if (failed(verifySameElementType(op, allValues(op))))
    return failure();
  return verifyPiecesAlongAxis(op, "result", getResults(), "input", getInput(),
                               getAxisAttr().getInt());
}

LogicalResult SliceOp::verify() {
  Operation *op = getOperation();
  if (failed(verifySameElementType(op, allValues(op))))
    return failure();
  ArrayRef<int64_t> input = shapeOf(getInput()), result = shapeOf(getResult());
  if (failed(verifyArraySize(op, "starts", getStarts(), input.size())) ||
      failed(verifyArraySize(op, "steps", getSteps(), input.size())) ||
      failed(verifyAllAtLeast(op, "starts", getStarts(), 0)) ||
      failed(verifyAllAtLeast(op, "steps", getSteps(), 1)))
    return failure();
  if (result.size() != input.size())
    return emitOpError() << "result rank " << result.size()
                         << " differs from input rank " << input.size();
  for (size_t d = 0; d < input.size(); ++d) {
    int64_t start = getStarts()[d], step = getSteps()[d], count = result[d];
    if (isDynamic(input[d]) || isDynamic(count) || count == 0)
      continue;
    int64_t last = start + (count - 1) * step;
    if (last >= input[d])
      return emitOpError() << "dim " << d << " reads index " << last
                           << " (start " << start << " + (" << count
                           << " - 1) * step " << step << ") but the input has "
                           << input[d];
  }
  return success();
}

LogicalResult PadOp::verify() {
  Operation *op = getOperation();
  if (failed(verifySameElementType(op, allValues(op))))
    return failure();
  ArrayRef<int64_t> input = shapeOf(getInput());
  ArrayRef<int64_t> pads = getPads();
  if (failed(verifyArraySize(op, "pads", pads, 2 * input.size())))
    return failure();
  SmallVector<int64_t> expected;
  for (size_t d = 0; d < input.size(); ++d) {
    int64_t lo = pads[d], hi = pads[d + input.size()];
    if (isDynamic(input[d])) {
      expected.push_back(ShapedType::kDynamic);
      continue;
    }
    int64_t size = input[d] + lo + hi;
    if (size < 0)
      return emitOpError() << "dim " << d << " has size " << input[d]
                           << " and pads " << lo << ", " << hi
                           << ", which leave " << size << " elements";
    expected.push_back(size);
  }
  return verifyShapeIs(op, "result", shapeOf(getResult()), expected);
}

LogicalResult GatherOp::verify() {
  Operation *op = getOperation();
  if (failed(verifyMinRank(op, "data", getData(), 1)) ||
      failed(verifySameElementType(op, {getData(), getResult()})))
    return failure();
  ArrayRef<int64_t> data = shapeOf(getData());
  FailureOr<int64_t> axis =
      normalizeAxis(op, getAxisAttr().getInt(), data.size());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> expected(data.take_front(*axis));
  llvm::append_range(expected, shapeOf(getIndices()));
  llvm::append_range(expected, data.drop_front(*axis + 1));
  return verifyShapeIs(op, "result", shapeOf(getResult()), expected);
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

/// Checks what ppc.moe_dispatch and ppc.moe_combine share: tokens
/// `[B, S, H]`, probabilities `[B, S, E]`, slots `[E, B, C, H]` and
/// 1 <= top_k <= E.
static LogicalResult verifyMoe(Operation *op, Value tokens,
                               StringRef tokensName, Value probs, Value slots,
                               StringRef slotsName, int64_t topK) {
  if (failed(verifyRank(op, "probs", probs, 3)) ||
      failed(verifyRank(op, tokensName, tokens, 3)) ||
      failed(verifyRank(op, slotsName, slots, 4)) ||
      failed(verifySameElementType(op, allValues(op))))
    return failure();
  ArrayRef<int64_t> p = shapeOf(probs), t = shapeOf(tokens), e = shapeOf(slots);
  // The capacity C is the slots' own; every other dim is the router's or
  // the tokens'.
  if (failed(verifyShapeIs(op, tokensName, t, {p[0], p[1], t[2]})) ||
      failed(verifyShapeIs(op, slotsName, e, {p[2], p[0], e[2], t[2]})))
    return failure();
  if (topK < 1 || topK > p[2])
    return op->emitOpError() << "top_k " << topK << " must be in [1, " << p[2]
                             << "] (the experts)";
  return success();
}

LogicalResult MoeDispatchOp::verify() {
  double coef = getAuxLossCoef().convertToDouble();
  if (!(coef >= 0) || std::isinf(coef))
    return emitOpError() << "aux_loss_coef " << coef
                         << " must be a finite number >= 0";
  return verifyMoe(getOperation(), getInput(), "input", getProbs(), getResult(),
                   "result", getTopK());
}

LogicalResult MoeCombineOp::verify() {
  return verifyMoe(getOperation(), getResult(), "result", getProbs(),
                   getInput(), "input", getTopK());
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxCrossEntropyOp::verify() {
  Operation *op = getOperation();
  if (failed(verifyRank(op, "logits", getLogits(), 2)) ||
      failed(verifySameElementType(op, {getLogits(), getLoss()})))
    return failure();
  return verifyShapeIs(op, "labels", shapeOf(getLabels()),
                       {shapeOf(getLogits())[0]});
}

LogicalResult MseLossOp::verify() {
  Operation *op = getOperation();
  if (failed(verifySameElementType(op, allValues(op))))
    return failure();
  return verifyShapeIs(op, "target", shapeOf(getTarget()),
                       shapeOf(getPrediction()));
}

bool ppc::graph::isParallelOp(Operation *op) {
  return isa<RepartitionOp, CombineOp, ReplicateOp, PartialReduceOp>(op);
}

Value ppc::graph::stripParallelOps(Value value) {
  while (Operation *def = value.getDefiningOp()) {
    if (!isParallelOp(def))
      break;
    value = def->getOperand(0);
  }
  return value;
}
