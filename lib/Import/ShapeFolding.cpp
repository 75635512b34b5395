//===- ShapeFolding.cpp - Evaluate shape-computing ONNX subgraphs ---------===//
//
// A small int64/float evaluator for the ops that exporters use to compute
// shapes (Shape -> Gather -> Unsqueeze -> Concat -> Reshape and friends). Once
// the symbolic dims are bound, these subgraphs are constants: folding them
// lets Reshape, Expand, Slice... get static shapes, and they produce no ppc
// ops. Constant masks and index tensors (Trilu, CumSum, Range, Where) fold
// the same way. Every failure is silent: the node is simply left unfolded.
//
//===----------------------------------------------------------------------===//

#include "ImporterInternal.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>
#include <functional>

using namespace mlir;
using namespace ppc;
using namespace ppc::onnx_import;
using onnx::TensorProto;

namespace {
using Shape = SmallVector<int64_t>;
} // namespace

/// Normalizes a possibly negative axis into [0, rank), or fails.
static std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

/// Numpy broadcast of two shapes.
static std::optional<Shape> broadcastShapes(ArrayRef<int64_t> a,
                                            ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

static Shape getStrides(ArrayRef<int64_t> shape) {
  Shape strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

std::vector<int64_t> onnx_import::broadcastIndices(ArrayRef<int64_t> inShape,
                                                   ArrayRef<int64_t> outShape) {
  int64_t n = getNumElements(outShape).value_or(0);
  Shape outStrides = getStrides(outShape), inStrides = getStrides(inShape);
  size_t offset = outShape.size() - inShape.size();
  std::vector<int64_t> result(n);
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t rem = flat, in = 0;
    for (size_t d = 0; d < outShape.size(); ++d) {
      int64_t coord = rem / outStrides[d];
      rem %= outStrides[d];
      if (d >= offset && inShape[d - offset] != 1)
        in += coord * inStrides[d - offset];
    }
    result[flat] = in;
  }
  return result;
}

static bool withinLimit(ArrayRef<int64_t> shape) {
  std::optional<int64_t> n = getNumElements(shape);
  return n && *n <= kMaxFoldElements;
}

/// Copies elements `indices` of `in` into a tensor of `shape`.
static ConstTensor gatherElements(const ConstTensor &in,
                                  ArrayRef<int64_t> indices,
                                  ArrayRef<int64_t> shape) {
  ConstTensor out;
  out.dtype = in.dtype;
  out.shape.assign(shape.begin(), shape.end());
  for (int64_t i : indices) {
    if (in.isFloat())
      out.floats.push_back(in.floats[i]);
    else
      out.ints.push_back(in.ints[i]);
  }
  return out;
}

/// Double to int64 without undefined behaviour on out-of-range values.
static int64_t saturatingToInt(double v) {
  if (std::isnan(v))
    return 0;
  if (v >= 9.2e18)
    return std::numeric_limits<int64_t>::max();
  if (v <= -9.2e18)
    return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

/// Reads a 1-D integer list from a constant input.
static std::optional<Shape> getIntList(const FoldInput &input) {
  if (!input.value || input.value->isFloat() || input.value->shape.size() > 1)
    return std::nullopt;
  return Shape(input.value->ints.begin(), input.value->ints.end());
}

//===----------------------------------------------------------------------===//
// Per-op evaluation
//===----------------------------------------------------------------------===//

namespace {
/// Evaluation context for one node.
struct Folder {
  const onnx::NodeProto &node;
  int64_t opset;
  ArrayRef<FoldInput> inputs;
  SmallVectorImpl<ConstTensor> &results;

  const ConstTensor *value(unsigned i) const {
    return i < inputs.size() ? inputs[i].value : nullptr;
  }
  bool hasInput(unsigned i) const {
    return i < inputs.size() && inputs[i].present;
  }
  LogicalResult emit(ConstTensor t) {
    if (!withinLimit(t.shape) ||
        t.numElements() != getNumElements(t.shape).value_or(-1))
      return failure();
    results.push_back(std::move(t));
    return success();
  }

  LogicalResult fold();
  LogicalResult foldShape();
  LogicalResult foldConstant();
  LogicalResult foldConstantOfShape();
  LogicalResult foldCast();
  LogicalResult foldReshapeLike(StringRef opType);
  LogicalResult foldConcat();
  LogicalResult foldGather();
  LogicalResult foldSlice();
  LogicalResult foldElementwise(StringRef opType);
  LogicalResult foldUnary(StringRef opType);
  LogicalResult foldWhere();
  LogicalResult foldRange();
  LogicalResult foldExpand();
  LogicalResult foldReduce(StringRef opType);
  LogicalResult foldTranspose();
  LogicalResult foldTrilu();
  LogicalResult foldCumSum();
};
} // namespace

LogicalResult Folder::foldShape() {
  if (inputs.empty() || !inputs[0].shape)
    return failure();
  const Shape &shape = *inputs[0].shape;
  if (llvm::any_of(shape, [](int64_t d) { return d < 0; }))
    return failure();
  ConstTensor t;
  t.dtype = TensorProto::INT64;
  if (node.op_type() == "Size") {
    t.ints.push_back(*getNumElements(shape));
    return emit(std::move(t));
  }
  // Opset 15 slices the shape with `start`/`end`, clamped like Slice.
  int64_t rank = shape.size();
  auto clampIndex = [&](int64_t i) {
    if (i < 0)
      i += rank;
    return std::clamp<int64_t>(i, 0, rank);
  };
  int64_t start = clampIndex(getAttrInt(node, "start", 0));
  int64_t end = clampIndex(getAttrInt(node, "end", rank));
  for (int64_t i = start; i < end; ++i)
    t.ints.push_back(shape[i]);
  t.shape = {static_cast<int64_t>(t.ints.size())};
  return emit(std::move(t));
}

LogicalResult Folder::foldConstant() {
  ConstTensor t;
  if (const auto *attr = findAttr(node, "value")) {
    if (!attr->has_t() || decodeTensor(attr->t(), t))
      return failure();
  } else if (const auto *attr = findAttr(node, "value_float")) {
    t.dtype = TensorProto::FLOAT;
    t.floats.push_back(attr->f());
  } else if (const auto *attr = findAttr(node, "value_floats")) {
    t.dtype = TensorProto::FLOAT;
    t.floats.assign(attr->floats().begin(), attr->floats().end());
    t.shape = {static_cast<int64_t>(t.floats.size())};
  } else if (const auto *attr = findAttr(node, "value_int")) {
    t.ints.push_back(attr->i());
  } else if (const auto *attr = findAttr(node, "value_ints")) {
    t.ints.assign(attr->ints().begin(), attr->ints().end());
    t.shape = {static_cast<int64_t>(t.ints.size())};
  } else {
    return failure(); // sparse_value, strings.
  }
  return emit(std::move(t));
}

LogicalResult Folder::foldConstantOfShape() {
  auto shape = getIntList(inputs.empty() ? FoldInput() : inputs[0]);
  if (!shape || !withinLimit(*shape))
    return failure();
  ConstTensor fill;
  fill.dtype = TensorProto::FLOAT;
  fill.floats = {0.0};
  if (const auto *attr = findAttr(node, "value"))
    if (!attr->has_t() || decodeTensor(attr->t(), fill) ||
        fill.numElements() != 1)
      return failure();
  ConstTensor t = ConstTensor::zeros(fill.dtype, *shape);
  if (t.isFloat())
    std::fill(t.floats.begin(), t.floats.end(), fill.floats[0]);
  else
    std::fill(t.ints.begin(), t.ints.end(), fill.ints[0]);
  return emit(std::move(t));
}

LogicalResult Folder::foldCast() {
  const ConstTensor *in = value(0);
  int64_t to = getAttrInt(node, "to", 0);
  if (!in || !getDTypeByteWidth(to))
    return failure();
  ConstTensor t = ConstTensor::zeros(to, in->shape);
  for (int64_t i = 0, e = in->numElements(); i < e; ++i) {
    if (t.isFloat())
      t.floats[i] = in->getDouble(i);
    else if (to == TensorProto::BOOL)
      t.ints[i] = in->getDouble(i) != 0;
    else
      t.ints[i] = in->isFloat() ? saturatingToInt(in->floats[i]) : in->ints[i];
  }
  return emit(std::move(t));
}

/// Reshape, Flatten, Squeeze, Unsqueeze and Identity: same data, new shape.
LogicalResult Folder::foldReshapeLike(StringRef opType) {
  const ConstTensor *in = value(0);
  if (!in)
    return failure();
  int64_t rank = in->shape.size();
  Shape shape;
  if (opType == "Identity") {
    shape = in->shape;
  } else if (opType == "Flatten") {
    auto axis = normalizeAxis(getAttrInt(node, "axis", 1), rank + 1);
    if (!axis)
      return failure();
    int64_t outer = *getNumElements(ArrayRef(in->shape).take_front(*axis));
    shape = {outer, outer ? in->numElements() / outer : 0};
  } else if (opType == "Reshape") {
    auto target = hasInput(1) ? getIntList(inputs[1]) : std::nullopt;
    if (!target)
      return failure();
    bool allowZero = getAttrInt(node, "allowzero", 0) != 0;
    int64_t known = 1, inferred = -1;
    for (auto [i, d] : llvm::enumerate(*target)) {
      if (d == 0 && !allowZero) {
        if (static_cast<int64_t>(i) >= rank)
          return failure();
        d = in->shape[i];
      }
      if (d == -1) {
        if (inferred >= 0)
          return failure();
        inferred = i;
      } else if (d < 0) {
        return failure();
      } else {
        known *= d;
      }
      shape.push_back(d);
    }
    if (inferred >= 0) {
      if (known == 0 || in->numElements() % known)
        return failure();
      shape[inferred] = in->numElements() / known;
    }
  } else { // Squeeze / Unsqueeze.
    std::optional<Shape> axes;
    if (opset >= 13)
      axes = hasInput(1) ? getIntList(inputs[1]) : std::nullopt;
    else
      axes = getAttrInts(node, "axes");
    if (opType == "Unsqueeze") {
      if (!axes)
        return failure();
      int64_t outRank = rank + axes->size();
      SmallVector<bool> isNew(outRank, false);
      for (int64_t a : *axes) {
        auto axis = normalizeAxis(a, outRank);
        if (!axis || isNew[*axis])
          return failure();
        isNew[*axis] = true;
      }
      auto it = in->shape.begin();
      for (int64_t i = 0; i < outRank; ++i)
        shape.push_back(isNew[i] ? 1 : *it++);
    } else {
      SmallVector<bool> drop(rank, false);
      if (axes && !axes->empty()) {
        for (int64_t a : *axes) {
          auto axis = normalizeAxis(a, rank);
          if (!axis || in->shape[*axis] != 1)
            return failure();
          drop[*axis] = true;
        }
      } else {
        for (int64_t i = 0; i < rank; ++i)
          drop[i] = in->shape[i] == 1;
      }
      for (int64_t i = 0; i < rank; ++i)
        if (!drop[i])
          shape.push_back(in->shape[i]);
    }
  }
  if (getNumElements(shape) != in->numElements())
    return failure();
  ConstTensor t = *in;
  t.shape = shape;
  return emit(std::move(t));
}

LogicalResult Folder::foldConcat() {
  if (inputs.empty() || !value(0))
    return failure();
  int64_t rank = value(0)->shape.size();
  auto axis = normalizeAxis(getAttrInt(node, "axis", 0), rank);
  if (!axis)
    return failure();
  Shape shape = value(0)->shape;
  shape[*axis] = 0;
  for (unsigned i = 0; i < inputs.size(); ++i) {
    const ConstTensor *in = value(i);
    if (!in || in->dtype != value(0)->dtype ||
        static_cast<int64_t>(in->shape.size()) != rank)
      return failure();
    for (int64_t d = 0; d < rank; ++d)
      if (d != *axis && in->shape[d] != shape[d])
        return failure();
    shape[*axis] += in->shape[*axis];
  }
  if (!withinLimit(shape))
    return failure();
  // Rows are the product of the dims before `axis`; each input contributes
  // a contiguous chunk per row.
  int64_t outer = *getNumElements(ArrayRef(shape).take_front(*axis));
  ConstTensor t;
  t.dtype = value(0)->dtype;
  t.shape = shape;
  for (int64_t row = 0; row < outer; ++row) {
    for (unsigned i = 0; i < inputs.size(); ++i) {
      const ConstTensor *in = value(i);
      int64_t chunk = outer ? in->numElements() / outer : 0;
      if (in->isFloat())
        t.floats.insert(t.floats.end(), in->floats.begin() + row * chunk,
                        in->floats.begin() + (row + 1) * chunk);
      else
        t.ints.insert(t.ints.end(), in->ints.begin() + row * chunk,
                      in->ints.begin() + (row + 1) * chunk);
    }
  }
  return emit(std::move(t));
}

LogicalResult Folder::foldGather() {
  const ConstTensor *data = value(0), *indices = value(1);
  if (!data || !indices || indices->isFloat())
    return failure();
  int64_t rank = data->shape.size();
  auto axis = normalizeAxis(getAttrInt(node, "axis", 0), rank);
  if (!axis)
    return failure();
  int64_t dim = data->shape[*axis];
  Shape shape(data->shape.begin(), data->shape.begin() + *axis);
  shape.append(indices->shape.begin(), indices->shape.end());
  shape.append(data->shape.begin() + *axis + 1, data->shape.end());
  if (!withinLimit(shape))
    return failure();
  int64_t outer = *getNumElements(ArrayRef(data->shape).take_front(*axis));
  int64_t inner = *getNumElements(ArrayRef(data->shape).drop_front(*axis + 1));
  std::vector<int64_t> flat;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t idx : indices->ints) {
      if (idx < -dim || idx >= dim)
        return failure();
      if (idx < 0)
        idx += dim;
      for (int64_t in = 0; in < inner; ++in)
        flat.push_back((o * dim + idx) * inner + in);
    }
  }
  return emit(gatherElements(*data, flat, shape));
}

LogicalResult Folder::foldSlice() {
  const ConstTensor *data = value(0);
  if (!data)
    return failure();
  int64_t rank = data->shape.size();
  std::optional<Shape> starts, ends, axes, steps;
  if (opset < 10) {
    starts = getAttrInts(node, "starts");
    ends = getAttrInts(node, "ends");
    axes = getAttrInts(node, "axes");
  } else {
    starts = hasInput(1) ? getIntList(inputs[1]) : std::nullopt;
    ends = hasInput(2) ? getIntList(inputs[2]) : std::nullopt;
    if (hasInput(3) && !(axes = getIntList(inputs[3])))
      return failure();
    if (hasInput(4) && !(steps = getIntList(inputs[4])))
      return failure();
  }
  if (!starts || !ends || starts->size() != ends->size())
    return failure();
  size_t n = starts->size();
  if (!axes) {
    axes.emplace();
    for (size_t i = 0; i < n; ++i)
      axes->push_back(i);
  }
  if (!steps)
    steps = Shape(n, 1);
  if (axes->size() != n || steps->size() != n)
    return failure();

  Shape begin(rank, 0), step(rank, 1), shape = data->shape;
  for (size_t i = 0; i < n; ++i) {
    auto axis = normalizeAxis((*axes)[i], rank);
    int64_t s = (*steps)[i];
    if (!axis || s == 0)
      return failure();
    int64_t dim = data->shape[*axis];
    auto clampIndex = [&](int64_t v) {
      if (v < 0)
        v = v < -dim ? -1 : v + dim;
      return s > 0 ? std::clamp<int64_t>(v, 0, dim)
                   : std::clamp<int64_t>(v, -1, dim - 1);
    };
    int64_t b = clampIndex((*starts)[i]), e = clampIndex((*ends)[i]);
    if (s < 0 && (*starts)[i] >= dim)
      b = dim - 1;
    int64_t count = s > 0 ? (e > b ? (e - b + s - 1) / s : 0)
                          : (b > e ? (b - e + (-s) - 1) / (-s) : 0);
    begin[*axis] = b;
    step[*axis] = s;
    shape[*axis] = count;
  }
  if (!withinLimit(shape))
    return failure();
  Shape inStrides = getStrides(data->shape), outStrides = getStrides(shape);
  int64_t total = *getNumElements(shape);
  std::vector<int64_t> flat(total);
  for (int64_t o = 0; o < total; ++o) {
    int64_t rem = o, in = 0;
    for (int64_t d = 0; d < rank; ++d) {
      int64_t coord = rem / outStrides[d];
      rem %= outStrides[d];
      in += (begin[d] + coord * step[d]) * inStrides[d];
    }
    flat[o] = in;
  }
  return emit(gatherElements(*data, flat, shape));
}

/// Applies a binary op on doubles or on int64 (wrapping, never UB).
static std::optional<double> applyFloat(StringRef op, double a, double b) {
  return llvm::StringSwitch<std::optional<double>>(op)
      .Case("Add", a + b)
      .Case("Sub", a - b)
      .Case("Mul", a * b)
      .Case("Div", a / b)
      .Case("Pow", std::pow(a, b))
      .Case("Max", std::max(a, b))
      .Case("Min", std::min(a, b))
      .Case("Mod", std::fmod(a, b))
      .Case("Equal", a == b)
      .Case("Less", a < b)
      .Case("Greater", a > b)
      .Case("LessOrEqual", a <= b)
      .Case("GreaterOrEqual", a >= b)
      .Default(std::nullopt);
}

static std::optional<int64_t> applyInt(StringRef op, int64_t a, int64_t b) {
  auto wrap = [](uint64_t v) { return static_cast<int64_t>(v); };
  uint64_t ua = a, ub = b;
  if (op == "Div" || op == "Mod") {
    if (b == 0 || (a == std::numeric_limits<int64_t>::min() && b == -1))
      return std::nullopt;
    if (op == "Div")
      return a / b;
    int64_t r = a % b; // ONNX Mod (fmod=0) takes the divisor's sign.
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  }
  return llvm::StringSwitch<std::optional<int64_t>>(op)
      .Case("Add", wrap(ua + ub))
      .Case("Sub", wrap(ua - ub))
      .Case("Mul", wrap(ua * ub))
      .Case("Pow", saturatingToInt(std::pow(double(a), double(b))))
      .Case("Max", std::max(a, b))
      .Case("Min", std::min(a, b))
      .Case("Equal", a == b)
      .Case("Less", a < b)
      .Case("Greater", a > b)
      .Case("LessOrEqual", a <= b)
      .Case("GreaterOrEqual", a >= b)
      .Case("And", a && b)
      .Case("Or", a || b)
      .Case("Xor", bool(a) != bool(b))
      .Default(std::nullopt);
}

static bool isComparison(StringRef op) {
  return llvm::is_contained({"Equal", "Less", "Greater", "LessOrEqual",
                             "GreaterOrEqual", "And", "Or", "Xor"},
                            op);
}

LogicalResult Folder::foldElementwise(StringRef opType) {
  if (inputs.empty())
    return failure();
  // Variadic Max/Min/Sum fold pairwise from the left.
  ConstTensor acc;
  if (!value(0))
    return failure();
  acc = *value(0);
  for (unsigned k = 1; k < inputs.size(); ++k) {
    const ConstTensor *rhs = value(k);
    if (!rhs)
      return failure();
    auto shape = broadcastShapes(acc.shape, rhs->shape);
    if (!shape || !withinLimit(*shape))
      return failure();
    std::vector<int64_t> li = broadcastIndices(acc.shape, *shape);
    std::vector<int64_t> ri = broadcastIndices(rhs->shape, *shape);
    // Pow keeps the base's type; comparisons give bools.
    bool floatMath = acc.isFloat() || rhs->isFloat();
    int32_t dtype =
        isComparison(opType) ? int32_t(TensorProto::BOOL) : acc.dtype;
    ConstTensor out = ConstTensor::zeros(dtype, *shape);
    for (size_t i = 0; i < li.size(); ++i) {
      if (floatMath) {
        auto v =
            applyFloat(opType, acc.getDouble(li[i]), rhs->getDouble(ri[i]));
        if (!v)
          return failure();
        if (out.isFloat())
          out.floats[i] = *v;
        else
          out.ints[i] = saturatingToInt(*v);
      } else {
        auto v = applyInt(opType, acc.ints[li[i]], rhs->ints[ri[i]]);
        if (!v)
          return failure();
        out.ints[i] = *v;
      }
    }
    acc = std::move(out);
  }
  if (inputs.size() == 1 && opType != "Max" && opType != "Min" &&
      opType != "Sum")
    return failure();
  return emit(std::move(acc));
}

LogicalResult Folder::foldUnary(StringRef opType) {
  const ConstTensor *in = value(0);
  if (!in)
    return failure();
  ConstTensor t = *in;
  if (opType == "Not") {
    for (int64_t &v : t.ints)
      v = !v;
    return emit(std::move(t));
  }
  if (!t.isFloat()) {
    if (opType == "Neg" || opType == "Abs") {
      for (int64_t &v : t.ints)
        v = opType == "Neg"
                ? static_cast<int64_t>(0 - uint64_t(v))
                : (v < 0 ? static_cast<int64_t>(0 - uint64_t(v)) : v);
      return emit(std::move(t));
    }
    return opType == "Floor" || opType == "Ceil" ? emit(std::move(t))
                                                 : failure();
  }
  std::function<double(double)> fn =
      llvm::StringSwitch<std::function<double(double)>>(opType)
          .Case("Floor", [](double v) { return std::floor(v); })
          .Case("Ceil", [](double v) { return std::ceil(v); })
          .Case("Neg", [](double v) { return -v; })
          .Case("Abs", [](double v) { return std::fabs(v); })
          .Case("Sqrt", [](double v) { return std::sqrt(v); })
          .Case("Reciprocal", [](double v) { return 1.0 / v; })
          .Case("Round", [](double v) { return std::nearbyint(v); })
          .Default(nullptr);
  if (!fn)
    return failure();
  for (double &v : t.floats)
    v = fn(v);
  return emit(std::move(t));
}

LogicalResult Folder::foldWhere() {
  const ConstTensor *cond = value(0), *x = value(1), *y = value(2);
  if (!cond || !x || !y || cond->isFloat() || x->dtype != y->dtype)
    return failure();
  auto shape = broadcastShapes(cond->shape, x->shape);
  if (shape)
    shape = broadcastShapes(*shape, y->shape);
  if (!shape || !withinLimit(*shape))
    return failure();
  auto ci = broadcastIndices(cond->shape, *shape);
  auto xi = broadcastIndices(x->shape, *shape);
  auto yi = broadcastIndices(y->shape, *shape);
  ConstTensor t = ConstTensor::zeros(x->dtype, *shape);
  for (size_t i = 0; i < ci.size(); ++i) {
    const ConstTensor &src = cond->ints[ci[i]] ? *x : *y;
    int64_t j = cond->ints[ci[i]] ? xi[i] : yi[i];
    if (t.isFloat())
      t.floats[i] = src.floats[j];
    else
      t.ints[i] = src.ints[j];
  }
  return emit(std::move(t));
}

LogicalResult Folder::foldRange() {
  const ConstTensor *start = value(0), *limit = value(1), *delta = value(2);
  if (!start || !limit || !delta || start->numElements() != 1 ||
      limit->numElements() != 1 || delta->numElements() != 1)
    return failure();
  double s = start->getDouble(0), l = limit->getDouble(0),
         d = delta->getDouble(0);
  if (d == 0 || !std::isfinite(s) || !std::isfinite(l) || !std::isfinite(d))
    return failure();
  double count = std::max(std::ceil((l - s) / d), 0.0);
  if (count > kMaxFoldElements)
    return failure();
  int64_t n = static_cast<int64_t>(count);
  ConstTensor t = ConstTensor::zeros(start->dtype, {n});
  for (int64_t i = 0; i < n; ++i) {
    if (t.isFloat())
      t.floats[i] = s + i * d;
    else
      t.ints[i] = static_cast<int64_t>(uint64_t(start->ints[0]) +
                                       uint64_t(i) * uint64_t(delta->ints[0]));
  }
  return emit(std::move(t));
}

LogicalResult Folder::foldExpand() {
  const ConstTensor *in = value(0);
  auto target = hasInput(1) ? getIntList(inputs[1]) : std::nullopt;
  if (!in || !target)
    return failure();
  auto shape = broadcastShapes(in->shape, *target);
  if (!shape || !withinLimit(*shape))
    return failure();
  return emit(gatherElements(*in, broadcastIndices(in->shape, *shape), *shape));
}

LogicalResult Folder::foldReduce(StringRef opType) {
  const ConstTensor *in = value(0);
  if (!in)
    return failure();
  int64_t rank = in->shape.size();
  std::optional<Shape> axes;
  if (opType == "ReduceSum" && opset >= 13) {
    if (hasInput(1) && !(axes = getIntList(inputs[1])))
      return failure();
  } else {
    axes = getAttrInts(node, "axes");
  }
  bool noop = getAttrInt(node, "noop_with_empty_axes", 0) != 0;
  SmallVector<bool> reduced(rank, !(axes && !axes->empty()) && !noop);
  if (axes)
    for (int64_t a : *axes) {
      auto axis = normalizeAxis(a, rank);
      if (!axis)
        return failure();
      reduced[*axis] = true;
    }
  bool keepDims = getAttrInt(node, "keepdims", 1) != 0;
  Shape keptShape, outShape;
  for (int64_t d = 0; d < rank; ++d) {
    keptShape.push_back(reduced[d] ? 1 : in->shape[d]);
    if (!reduced[d] || keepDims)
      outShape.push_back(keptShape.back());
  }
  int64_t outN = *getNumElements(keptShape);
  Shape inStrides = getStrides(in->shape), keptStrides = getStrides(keptShape);
  std::vector<double> acc(outN, opType == "ReduceProd" ? 1.0 : 0.0);
  std::vector<bool> seen(outN, false);
  int64_t count = outN ? in->numElements() / outN : 0;
  for (int64_t flat = 0, e = in->numElements(); flat < e; ++flat) {
    int64_t rem = flat, out = 0;
    for (int64_t d = 0; d < rank; ++d) {
      int64_t coord = rem / inStrides[d];
      rem %= inStrides[d];
      if (!reduced[d])
        out += coord * keptStrides[d];
    }
    double v = in->getDouble(flat);
    if (opType == "ReduceProd")
      acc[out] *= v;
    else if (opType == "ReduceMax")
      acc[out] = seen[out] ? std::max(acc[out], v) : v;
    else if (opType == "ReduceMin")
      acc[out] = seen[out] ? std::min(acc[out], v) : v;
    else
      acc[out] += v;
    seen[out] = true;
  }
  ConstTensor t = ConstTensor::zeros(in->dtype, outShape);
  for (int64_t i = 0; i < outN; ++i) {
    double v = opType == "ReduceMean" && count ? acc[i] / count : acc[i];
    if (t.isFloat())
      t.floats[i] = v;
    else
      t.ints[i] = saturatingToInt(v);
  }
  return emit(std::move(t));
}

LogicalResult Folder::foldTranspose() {
  const ConstTensor *in = value(0);
  if (!in)
    return failure();
  int64_t rank = in->shape.size();
  Shape perm;
  if (auto attr = getAttrInts(node, "perm"))
    perm = *attr;
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  if (static_cast<int64_t>(perm.size()) != rank)
    return failure();
  Shape shape;
  SmallVector<bool> used(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || used[p])
      return failure();
    used[p] = true;
    shape.push_back(in->shape[p]);
  }
  Shape inStrides = getStrides(in->shape), outStrides = getStrides(shape);
  std::vector<int64_t> flat(in->numElements());
  for (int64_t o = 0, e = flat.size(); o < e; ++o) {
    int64_t rem = o, src = 0;
    for (int64_t d = 0; d < rank; ++d) {
      src += (rem / outStrides[d]) * inStrides[perm[d]];
      rem %= outStrides[d];
    }
    flat[o] = src;
  }
  return emit(gatherElements(*in, flat, shape));
}

/// Zeroes the elements of the last two dims (row i, column j) outside
/// j - i >= k (upper) or j - i <= k (lower).
LogicalResult Folder::foldTrilu() {
  const ConstTensor *in = value(0);
  if (!in || in->shape.size() < 2 || (hasInput(1) && !value(1)))
    return failure();
  if (hasInput(1) && value(1)->numElements() != 1)
    return failure();
  int64_t k = hasInput(1) ? value(1)->getInt(0) : 0;
  bool upper = getAttrInt(node, "upper", 1) != 0;
  int64_t rows = in->shape[in->shape.size() - 2], cols = in->shape.back();
  ConstTensor t = *in;
  for (int64_t flat = 0, e = t.numElements(); flat < e; ++flat) {
    int64_t i = (flat / cols) % rows, j = flat % cols;
    if (upper ? j - i >= k : j - i <= k)
      continue;
    if (t.isFloat())
      t.floats[flat] = 0;
    else
      t.ints[flat] = 0;
  }
  return emit(std::move(t));
}

/// Running sums along `axis`, from the end with `reverse`, each without its
/// own element with `exclusive`.
LogicalResult Folder::foldCumSum() {
  const ConstTensor *in = value(0), *axisValue = value(1);
  if (!in || !axisValue || axisValue->numElements() != 1)
    return failure();
  int64_t rank = in->shape.size();
  auto axis = normalizeAxis(axisValue->getInt(0), rank);
  if (!axis)
    return failure();
  bool exclusive = getAttrInt(node, "exclusive", 0) != 0;
  bool reverse = getAttrInt(node, "reverse", 0) != 0;
  int64_t len = in->shape[*axis], stride = getStrides(in->shape)[*axis];
  ConstTensor t = *in;
  for (int64_t flat = 0, e = t.numElements(); flat < e; ++flat) {
    if ((flat / stride) % len != 0)
      continue; // not the start of a line along the axis
    double sumF = 0;
    int64_t sumI = 0;
    for (int64_t step = 0; step < len; ++step) {
      int64_t pos = reverse ? len - 1 - step : step;
      int64_t at = flat + pos * stride;
      if (t.isFloat()) {
        double v = in->floats[at];
        t.floats[at] = exclusive ? sumF : sumF + v;
        sumF += v;
      } else {
        int64_t v = in->ints[at];
        t.ints[at] = exclusive ? sumI : static_cast<int64_t>(
                                            uint64_t(sumI) + uint64_t(v));
        sumI = static_cast<int64_t>(uint64_t(sumI) + uint64_t(v));
      }
    }
  }
  return emit(std::move(t));
}

LogicalResult Folder::fold() {
  StringRef op = node.op_type();
  if (op == "Shape" || op == "Size")
    return foldShape();
  if (op == "Constant")
    return foldConstant();
  if (op == "ConstantOfShape")
    return foldConstantOfShape();
  if (op == "Cast")
    return foldCast();
  if (llvm::is_contained(
          {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}, op))
    return foldReshapeLike(op);
  if (op == "Concat")
    return foldConcat();
  if (op == "Gather")
    return foldGather();
  if (op == "Slice")
    return foldSlice();
  if (op == "Where")
    return foldWhere();
  if (op == "Range")
    return foldRange();
  if (op == "Expand")
    return foldExpand();
  if (op == "Transpose")
    return foldTranspose();
  if (op == "Trilu")
    return foldTrilu();
  if (op == "CumSum")
    return foldCumSum();
  if (op.starts_with("Reduce"))
    return foldReduce(op);
  if (llvm::is_contained(
          {"Floor", "Ceil", "Neg", "Abs", "Sqrt", "Reciprocal", "Round", "Not"},
          op))
    return foldUnary(op);
  return foldElementwise(op);
}

bool onnx_import::isFoldableOpType(StringRef opType) {
  return llvm::is_contained(
      {"Shape",     "Size",       "Constant",    "ConstantOfShape",
       "Cast",      "Reshape",    "Flatten",     "Squeeze",
       "Unsqueeze", "Identity",   "Concat",      "Gather",
       "Slice",     "Where",      "Range",       "Expand",
       "Transpose", "ReduceProd", "ReduceSum",   "ReduceMean",
       "ReduceMax", "ReduceMin",  "Floor",       "Ceil",
       "Neg",       "Abs",        "Sqrt",        "Reciprocal",
       "Round",     "Not",        "Add",         "Sub",
       "Mul",       "Div",        "Pow",         "Max",
       "Min",       "Sum",        "Mod",         "Equal",
       "Less",      "Greater",    "LessOrEqual", "GreaterOrEqual",
       "And",       "Or",         "Xor",         "Trilu",
       "CumSum"},
      opType);
}

LogicalResult onnx_import::foldNode(const onnx::NodeProto &node, int64_t opset,
                                    ArrayRef<FoldInput> inputs,
                                    SmallVectorImpl<ConstTensor> &results) {
  if (!isFoldableOpType(node.op_type()) || node.output_size() < 1)
    return failure();
  Folder folder{node, opset, inputs, results};
  if (failed(folder.fold()) ||
      results.size() != static_cast<size_t>(node.output_size()))
    return failure();
  return success();
}
