//===- OpConversions.cpp - ONNX nodes to ppc graph ops --------------------===//
//
// One converter per ONNX op type (opsets 9 to 17). Converters read the
// static result types that shape inference computed (validate() has checked
// them) and the constant values of attribute-like inputs (axes, pads, split
// sizes), which moved from attributes to inputs at various opsets.
//
//===----------------------------------------------------------------------===//

#include "ImporterInternal.h"

#include "ppc/Dialect/Graph/GraphOps.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>
#include <iterator>

using namespace mlir;
using namespace ppc;
using namespace ppc::onnx_import;
using onnx::NodeProto;

namespace g = ppc::graph;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

bool onnx_import::hasInput(const NodeProto &node, int i) {
  return i < node.input_size() && !node.input(i).empty();
}

bool onnx_import::isOutputUsed(GraphImporter &imp, const NodeProto &node,
                               int i) {
  return i < node.output_size() && !node.output(i).empty() &&
         imp.numUses.lookup(node.output(i)) > 0;
}

static RankedTensorType getResultType(GraphImporter &imp, const NodeProto &node,
                                      int i = 0) {
  return imp.getType(node.output(i));
}

/// Converts `value` to `elementType` with ppc.cast when they differ.
static Value coerce(GraphImporter &imp, Value value, Type elementType) {
  auto type = cast<RankedTensorType>(value.getType());
  if (!elementType || type.getElementType() == elementType)
    return value;
  return g::CastOp::create(imp.builder, imp.currentLoc, type.clone(elementType),
                           value);
}

/// Input `i` as a value; constants are created with `elementType`, other
/// values cast to it.
static FailureOr<Value> getInput(GraphImporter &imp, const NodeProto &node,
                                 int i, Type elementType = {}) {
  if (!hasInput(node, i))
    return emitError(imp.currentLoc)
           << "'" << node.op_type() << "' needs input " << i;
  FailureOr<Value> v = imp.getValue(node.input(i), elementType);
  if (failed(v))
    return failure();
  return coerce(imp, *v, elementType);
}

/// The integer list held by constant input `i`, if it is one.
static std::optional<SmallVector<int64_t>>
getConstInts(GraphImporter &imp, const NodeProto &node, int i) {
  if (!hasInput(node, i))
    return std::nullopt;
  const ConstTensor *c = imp.getConst(node.input(i));
  if (!c || c->isFloat() || c->shape.size() > 1)
    return std::nullopt;
  return SmallVector<int64_t>(c->ints.begin(), c->ints.end());
}

static std::optional<double> getConstScalar(GraphImporter &imp,
                                            const NodeProto &node, int i) {
  if (!hasInput(node, i))
    return std::nullopt;
  const ConstTensor *c = imp.getConst(node.input(i));
  if (!c || c->numElements() != 1)
    return std::nullopt;
  if (c->dtype == onnx::TensorProto::FLOAT)
    return widenFloat(static_cast<float>(c->floats[0]));
  return c->getDouble(0);
}

static int64_t normalizeAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

/// The axes of a reduction (attribute, or input 1 for ReduceSum >= 13),
/// normalized and sorted; nullopt when the node reduces nothing.
static std::optional<SmallVector<int64_t>>
getReduceAxes(GraphImporter &imp, const NodeProto &node, int64_t rank) {
  std::optional<SmallVector<int64_t>> axes;
  if (node.op_type() == "ReduceSum" && imp.opset >= 13)
    axes = getConstInts(imp, node, 1);
  else
    axes = getAttrInts(node, "axes");
  if (!axes || axes->empty()) {
    if (getAttrInt(node, "noop_with_empty_axes", 0))
      return std::nullopt;
    axes.emplace();
    for (int64_t i = 0; i < rank; ++i)
      axes->push_back(i);
  }
  for (int64_t &a : *axes)
    a = normalizeAxis(a, rank);
  llvm::sort(*axes);
  return axes;
}

SmallVector<int64_t> onnx_import::broadcastShape(ArrayRef<int64_t> a,
                                                 ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Value onnx_import::reshape(GraphImporter &imp, Value value,
                           ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getShape() == shape)
    return value;
  return g::ReshapeOp::create(imp.builder, imp.currentLoc, type.clone(shape),
                              value);
}

static FloatAttr f64(GraphImporter &imp, double v) {
  return imp.builder.getF64FloatAttr(v);
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

template <typename OpTy>
static LogicalResult convertUnary(GraphImporter &imp, const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  FailureOr<Value> x = getInput(imp, node, 0, type.getElementType());
  if (failed(x))
    return failure();
  imp.setValue(node.output(0),
               OpTy::create(imp.builder, imp.currentLoc, type, ValueRange{*x}));
  return success();
}

/// Binary ops; variadic Max/Min chain from the left.
template <typename OpTy>
static LogicalResult convertBinary(GraphImporter &imp, const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  Type et = type.getElementType();
  FailureOr<Value> acc = getInput(imp, node, 0, et);
  if (failed(acc))
    return failure();
  for (int i = 1; i < node.input_size(); ++i) {
    FailureOr<Value> rhs = getInput(imp, node, i, et);
    if (failed(rhs))
      return failure();
    auto shape =
        broadcastShape(cast<RankedTensorType>(acc->getType()).getShape(),
                       cast<RankedTensorType>(rhs->getType()).getShape());
    Type resultType =
        i + 1 == node.input_size() ? Type(type) : type.clone(shape);
    acc = OpTy::create(imp.builder, imp.currentLoc, resultType, *acc, *rhs)
              .getResult();
  }
  imp.setValue(node.output(0), reshape(imp, *acc, type.getShape()));
  return success();
}

/// A float ONNX attribute and its default.
struct FloatAttrDefault {
  StringRef name;
  double value;
};

/// Unary activations whose float ONNX attributes keep their names on the ppc
/// op (LeakyRelu's alpha, HardSigmoid's alpha and beta...).
template <typename OpTy, const FloatAttrDefault *Attrs, size_t NumAttrs>
static LogicalResult convertActivation(GraphImporter &imp,
                                       const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  FailureOr<Value> x = getInput(imp, node, 0);
  if (failed(x))
    return failure();
  auto op = OpTy::create(imp.builder, imp.currentLoc, type, ValueRange{*x});
  for (const FloatAttrDefault &attr : ArrayRef(Attrs, NumAttrs))
    op->setAttr(attr.name,
                f64(imp, getAttrFloat(node, attr.name, attr.value)));
  imp.setValue(node.output(0), op.getResult());
  return success();
}

static constexpr FloatAttrDefault kLeakyReluAttrs[] = {{"alpha", 0.01}};
static constexpr FloatAttrDefault kHardSigmoidAttrs[] = {{"alpha", 0.2},
                                                         {"beta", 0.5}};
static constexpr FloatAttrDefault kEluAttrs[] = {{"alpha", 1.0}};
static constexpr FloatAttrDefault kSeluAttrs[] = {
    {"alpha", 1.67326319217681884765625}, {"gamma", 1.05070102214813232421875}};

template <typename OpTy, const auto &Attrs>
static constexpr ConvertFn activation =
    convertActivation<OpTy, Attrs, std::size(Attrs)>;

static LogicalResult convertClip(GraphImporter &imp, const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  FailureOr<Value> x = getInput(imp, node, 0);
  if (failed(x))
    return failure();
  FloatAttr minAttr, maxAttr;
  if (imp.opset < 11) {
    if (findAttr(node, "min"))
      minAttr = f64(imp, getAttrFloat(node, "min", 0));
    if (findAttr(node, "max"))
      maxAttr = f64(imp, getAttrFloat(node, "max", 0));
  } else {
    if (auto v = getConstScalar(imp, node, 1))
      minAttr = f64(imp, *v);
    if (auto v = getConstScalar(imp, node, 2))
      maxAttr = f64(imp, *v);
  }
  imp.setValue(node.output(0), g::ClipOp::create(imp.builder, imp.currentLoc,
                                                 type, *x, minAttr, maxAttr));
  return success();
}

/// Softmax and LogSoftmax. Before opset 13 they coerce the input to 2-D
/// [prod(d[:axis]), prod(d[axis:])] and normalize each row: the same as a
/// softmax on the last dim unless axis < rank - 1, where a reshape is needed.
template <typename OpTy>
static LogicalResult convertSoftmax(GraphImporter &imp, const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  FailureOr<Value> x = getInput(imp, node, 0);
  if (failed(x))
    return failure();
  int64_t rank = type.getRank();
  int64_t axis = getAttrInt(node, "axis", imp.opset < 13 ? 1 : -1);
  axis = normalizeAxis(axis, rank);
  auto softmax = [&](Value v, int64_t ax) -> Value {
    return OpTy::create(imp.builder, imp.currentLoc, v.getType(), v,
                        imp.builder.getI64IntegerAttr(ax));
  };
  if (imp.opset >= 13 || axis >= rank - 1) {
    imp.setValue(node.output(0), softmax(*x, std::max<int64_t>(axis, 0)));
    return success();
  }
  ArrayRef<int64_t> shape = type.getShape();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i)
    (i < axis ? outer : inner) *= shape[i];
  Value flat = reshape(imp, *x, {outer, inner});
  imp.setValue(node.output(0), reshape(imp, softmax(flat, 1), shape));
  return success();
}

//===----------------------------------------------------------------------===//
// Convolution, pooling and normalization
//===----------------------------------------------------------------------===//

/// Pads [top, left, bottom, right] for a 2-D window, from `pads` or auto_pad.
static SmallVector<int64_t> getWindowPads(const NodeProto &node,
                                          ArrayRef<int64_t> inputHW,
                                          ArrayRef<int64_t> kernel,
                                          ArrayRef<int64_t> strides,
                                          ArrayRef<int64_t> dilations) {
  std::string autoPad = getAttrString(node, "auto_pad", "NOTSET");
  if (autoPad == "NOTSET" || autoPad.empty())
    return getAttrInts(node, "pads").value_or(SmallVector<int64_t>{0, 0, 0, 0});
  SmallVector<int64_t> pads(4, 0);
  if (autoPad == "VALID")
    return pads;
  for (int i = 0; i < 2; ++i) {
    int64_t out = (inputHW[i] + strides[i] - 1) / strides[i];
    int64_t window = (kernel[i] - 1) * dilations[i] + 1;
    int64_t total =
        std::max<int64_t>(0, (out - 1) * strides[i] + window - inputHW[i]);
    int64_t small = total / 2, large = total - small;
    pads[i] = autoPad == "SAME_LOWER" ? large : small;
    pads[i + 2] = autoPad == "SAME_LOWER" ? small : large;
  }
  return pads;
}

/// Conv's and ConvTranspose's operands: input, weight and the optional bias
/// (null when absent).
static LogicalResult getConvOperands(GraphImporter &imp, const NodeProto &node,
                                     Value &x, Value &w, Value &bias) {
  FailureOr<Value> input = getInput(imp, node, 0),
                   weight = getInput(imp, node, 1);
  if (failed(input) || failed(weight))
    return failure();
  x = *input;
  w = *weight;
  if (!hasInput(node, 2))
    return success();
  FailureOr<Value> b = getInput(imp, node, 2);
  if (failed(b))
    return failure();
  bias = *b;
  return success();
}

static LogicalResult convertConv(GraphImporter &imp, const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  Value x, w, bias;
  if (failed(getConvOperands(imp, node, x, w, bias)))
    return failure();
  auto xShape = cast<RankedTensorType>(x.getType()).getShape();
  auto wShape = cast<RankedTensorType>(w.getType()).getShape();
  SmallVector<int64_t> kernel(wShape.drop_front(2));
  auto strides =
      getAttrInts(node, "strides").value_or(SmallVector<int64_t>{1, 1});
  auto dilations =
      getAttrInts(node, "dilations").value_or(SmallVector<int64_t>{1, 1});
  auto pads =
      getWindowPads(node, xShape.drop_front(2), kernel, strides, dilations);
  imp.setValue(node.output(0),
               g::Conv2DOp::create(imp.builder, imp.currentLoc, type, x, w,
                                   bias, strides, pads, dilations,
                                   getAttrInt(node, "group", 1)));
  return success();
}

namespace {
/// A ConvTranspose resolved to ppc.conv_transpose2d's attributes; a 1-D one
/// as a 2-D one over a height of 1.
struct ConvTransposeParams {
  SmallVector<int64_t> strides, pads, dilations, outputPadding;
};
} // namespace

/// ConvTranspose's attributes (opsets 1 to 17) for an input of spatial
/// sizes `inSpatial` and a kernel of `kernel`: `output_shape` and `auto_pad`
/// become pads and output_padding. A total padding that is negative (an
/// output_shape beyond the full scatter) extends the bottom/right, as
/// output_padding does; an odd total puts the extra row at the end except
/// for SAME_LOWER, as ONNX's reference and onnxruntime do.
static FailureOr<ConvTransposeParams>
getConvTransposeParams(const NodeProto &node, ArrayRef<int64_t> inSpatial,
                       ArrayRef<int64_t> kernel, std::string &error) {
  size_t rank = inSpatial.size();
  if (rank != 1 && rank != 2) {
    error = "on a rank-" + std::to_string(rank + 2) +
            " input (only 1-D and 2-D ConvTranspose are supported)";
    return failure();
  }
  auto ints = [&](StringRef name, int64_t fill,
                  size_t size) -> std::optional<SmallVector<int64_t>> {
    auto v = getAttrInts(node, name).value_or(SmallVector<int64_t>(size, fill));
    if (v.size() != size) {
      error = "with " + std::to_string(v.size()) + " '" + name.str() +
              "' entries for " + std::to_string(rank) + " spatial dims";
      return std::nullopt;
    }
    return v;
  };
  auto strides = ints("strides", 1, rank);
  auto dilations = ints("dilations", 1, rank);
  auto outputPadding = ints("output_padding", 0, rank);
  auto pads = ints("pads", 0, 2 * rank);
  if (!strides || !dilations || !outputPadding || !pads)
    return failure();
  if (llvm::any_of(*pads, [](int64_t v) { return v < 0; })) {
    error = "with negative pads";
    return failure();
  }
  if (auto shape = getAttrInts(node, "kernel_shape");
      shape && ArrayRef<int64_t>(*shape) != kernel) {
    error = "with a kernel_shape that is not the weight's";
    return failure();
  }
  std::string autoPad = getAttrString(node, "auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && !autoPad.empty() && autoPad != "VALID" &&
      autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER") {
    error = "with auto_pad '" + autoPad + "'";
    return failure();
  }
  auto outputShape = getAttrInts(node, "output_shape");
  // output_shape may also name N and C.
  if (outputShape && outputShape->size() == rank + 2)
    outputShape->erase(outputShape->begin(), outputShape->begin() + 2);
  if (outputShape && outputShape->size() != rank) {
    error = "with an output_shape of " + std::to_string(outputShape->size()) +
            " entries for " + std::to_string(rank) + " spatial dims";
    return failure();
  }
  bool same = autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
  if (autoPad == "VALID")
    pads->assign(2 * rank, 0);
  if (outputShape || same) {
    for (size_t i = 0; i < rank; ++i) {
      int64_t full = (inSpatial[i] - 1) * (*strides)[i] +
                     (kernel[i] - 1) * (*dilations)[i] + 1 +
                     (*outputPadding)[i];
      int64_t target =
          outputShape ? (*outputShape)[i] : inSpatial[i] * (*strides)[i];
      int64_t total = full - target;
      if (total < 0) {
        (*outputPadding)[i] -= total;
        total = 0;
      }
      int64_t small = total / 2, large = total - small;
      (*pads)[i] = autoPad == "SAME_LOWER" ? large : small;
      (*pads)[i + rank] = autoPad == "SAME_LOWER" ? small : large;
    }
  }
  ConvTransposeParams p;
  if (rank == 1) {
    p.strides = {1, (*strides)[0]};
    p.pads = {0, (*pads)[0], 0, (*pads)[1]};
    p.dilations = {1, (*dilations)[0]};
    p.outputPadding = {0, (*outputPadding)[0]};
  } else {
    p = {*strides, *pads, *dilations, *outputPadding};
  }
  return p;
}

/// ConvTranspose as ppc.conv_transpose2d; a 1-D one reshaped to a height
/// of 1 around it.
static LogicalResult convertConvTranspose(GraphImporter &imp,
                                          const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  Value input, weight, bias;
  if (failed(getConvOperands(imp, node, input, weight, bias)))
    return failure();
  auto xShape = cast<RankedTensorType>(input.getType()).getShape();
  auto wShape = cast<RankedTensorType>(weight.getType()).getShape();
  std::string error;
  FailureOr<ConvTransposeParams> p = getConvTransposeParams(
      node, xShape.drop_front(2), wShape.drop_front(2), error);
  if (failed(p))
    return emitError(imp.currentLoc) << "unsupported ConvTranspose " << error;
  RankedTensorType type2D = type;
  if (xShape.size() == 3) {
    auto unsqueezed = [](ArrayRef<int64_t> shape) {
      return SmallVector<int64_t>{shape[0], shape[1], 1, shape[2]};
    };
    input = reshape(imp, input, unsqueezed(xShape));
    weight = reshape(imp, weight, unsqueezed(wShape));
    type2D = type.clone(unsqueezed(type.getShape()));
  }
  Value result = g::ConvTranspose2DOp::create(
      imp.builder, imp.currentLoc, type2D, input, weight, bias, p->strides,
      p->pads, p->dilations, p->outputPadding, getAttrInt(node, "group", 1));
  imp.setValue(node.output(0), reshape(imp, result, type.getShape()));
  return success();
}

template <typename OpTy>
static LogicalResult convertPool(GraphImporter &imp, const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  FailureOr<Value> x = getInput(imp, node, 0);
  if (failed(x))
    return failure();
  auto xShape = cast<RankedTensorType>(x->getType()).getShape();
  SmallVector<int64_t> kernel = *getAttrInts(node, "kernel_shape");
  auto strides =
      getAttrInts(node, "strides").value_or(SmallVector<int64_t>{1, 1});
  auto pads =
      getWindowPads(node, xShape.drop_front(2), kernel, strides, {1, 1});
  bool ceilMode = getAttrInt(node, "ceil_mode", 0) != 0;
  bool includePad = getAttrInt(node, "count_include_pad", 0) != 0;
  imp.setValue(node.output(0),
               OpTy::create(imp.builder, imp.currentLoc, type, *x, kernel,
                            strides, pads, ceilMode, includePad));
  return success();
}

static LogicalResult convertBatchNorm(GraphImporter &imp,
                                      const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  SmallVector<Value> operands;
  for (int i = 0; i < 5; ++i) {
    FailureOr<Value> v = getInput(imp, node, i, type.getElementType());
    if (failed(v))
      return failure();
    operands.push_back(*v);
  }
  imp.setValue(
      node.output(0),
      g::BatchNormOp::create(imp.builder, imp.currentLoc, type, operands[0],
                             operands[1], operands[2], operands[3], operands[4],
                             f64(imp, getAttrFloat(node, "epsilon", 1e-5)),
                             f64(imp, getAttrFloat(node, "momentum", 0.9))));
  return success();
}

static LogicalResult convertLayerNorm(GraphImporter &imp,
                                      const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  FailureOr<Value> x = getInput(imp, node, 0), scale = getInput(imp, node, 1);
  if (failed(x) || failed(scale))
    return failure();
  Value bias;
  if (hasInput(node, 2)) {
    FailureOr<Value> b = getInput(imp, node, 2);
    if (failed(b))
      return failure();
    bias = *b;
  }
  int64_t axis = normalizeAxis(getAttrInt(node, "axis", -1), type.getRank());
  imp.setValue(
      node.output(0),
      g::LayerNormOp::create(imp.builder, imp.currentLoc, type, *x, *scale,
                             bias, imp.builder.getI64IntegerAttr(axis),
                             f64(imp, getAttrFloat(node, "epsilon", 1e-5)),
                             imp.builder.getBoolAttr(false)));
  return success();
}

/// InstanceNormalization: x [N, C, D...] normalized over D... for each (n, c),
/// then scaled and shifted per channel. A layer_norm from axis 2 with a
/// constant unit scale (the ppc op fuses the statistics and their
/// gradient), then a mul and an add by the [C, 1...] reshaped scale and bias:
/// existing ops, so backward, search and both backends need nothing new.
static LogicalResult convertInstanceNorm(GraphImporter &imp,
                                         const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  Type et = type.getElementType();
  FailureOr<Value> x = getInput(imp, node, 0, et),
                   scale = getInput(imp, node, 1, et),
                   bias = getInput(imp, node, 2, et);
  if (failed(x) || failed(scale) || failed(bias))
    return failure();
  ArrayRef<int64_t> shape = type.getShape();
  auto spatialType = RankedTensorType::get(shape.drop_front(2), et);
  Value ones = g::ConstantOp::create(
      imp.builder, imp.currentLoc,
      DenseElementsAttr::get(spatialType, imp.builder.getFloatAttr(et, 1.0)));
  Value normalized = g::LayerNormOp::create(
      imp.builder, imp.currentLoc, type, *x, ones, Value(),
      imp.builder.getI64IntegerAttr(2),
      f64(imp, getAttrFloat(node, "epsilon", 1e-5)),
      imp.builder.getBoolAttr(false));
  // [C] -> [C, 1...]: numpy broadcasting aligns it with dim 1 of x.
  SmallVector<int64_t> channelShape(shape.size() - 1, 1);
  channelShape[0] = shape[1];
  Value scaled =
      g::MulOp::create(imp.builder, imp.currentLoc, type, normalized,
                       reshape(imp, *scale, channelShape));
  imp.setValue(node.output(0),
               g::AddOp::create(imp.builder, imp.currentLoc, type, scaled,
                                reshape(imp, *bias, channelShape)));
  return success();
}

static LogicalResult convertGlobalAvgPool(GraphImporter &imp,
                                          const NodeProto &node) {
  return convertUnary<g::GlobalAvgPoolOp>(imp, node);
}

namespace {
/// A Resize or Upsample resolved to ppc.resize's attributes.
struct ResizeParams {
  std::string mode, coordinates, rounding;
  double cubicA = -0.75, extrapolation = 0.0;
  bool excludeOutside = false;
  SmallVector<double> scales;             // [sH, sW]
  std::optional<SmallVector<double>> roi; // [loH, loW, hiH, hiW]
};
} // namespace

/// The values of constant input `i` as doubles (float32 ones widened to
/// their shortest decimal); nullopt when it is absent or empty, and `error`
/// set when it is present but not a constant.
static std::optional<SmallVector<double>> getConstDoubles(GraphImporter &imp,
                                                          const NodeProto &node,
                                                          int i, StringRef what,
                                                          std::string &error) {
  if (i < 0 || !hasInput(node, i))
    return std::nullopt;
  const ConstTensor *c = imp.getConst(node.input(i), /*attributeLike=*/true);
  if (!c) {
    error = "with non-constant " + what.str() + " (input '" + node.input(i) +
            "'; ppc needs the resized shape and coordinates at import)";
    return std::nullopt;
  }
  if (c->numElements() == 0)
    return std::nullopt;
  SmallVector<double> values;
  for (int64_t k = 0; k < c->numElements(); ++k)
    values.push_back(c->dtype == onnx::TensorProto::FLOAT
                         ? widenFloat(static_cast<float>(c->floats[k]))
                         : c->getDouble(k));
  return values;
}

/// Resolves Resize (opset 10: X, scales; 11 and later: X, roi, scales,
/// sizes) and Upsample (opset 9: X, scales) on an input of `inShape`.
/// Before opset 11 both map output x to input x / scale, rounded down in
/// nearest mode. Returns what is not supported in `error`.
static FailureOr<ResizeParams> getResizeParams(GraphImporter &imp,
                                               const NodeProto &node,
                                               ArrayRef<int64_t> inShape,
                                               std::string &error) {
  ResizeParams p;
  bool legacy = node.op_type() == "Upsample" || imp.opset < 11;
  p.mode = getAttrString(node, "mode", "nearest");
  if (p.mode != "nearest" && p.mode != "linear" &&
      (legacy || p.mode != "cubic")) {
    error = "in mode '" + p.mode + "' (expected 'nearest', 'linear'" +
            (legacy ? "" : " or 'cubic'") + ")";
    return failure();
  }
  if (legacy) {
    p.coordinates = "asymmetric";
    p.rounding = "floor";
  } else {
    p.coordinates =
        getAttrString(node, "coordinate_transformation_mode", "half_pixel");
    p.rounding = getAttrString(node, "nearest_mode", "round_prefer_floor");
    p.cubicA = getAttrFloat(node, "cubic_coeff_a", -0.75);
    p.excludeOutside = getAttrInt(node, "exclude_outside", 0) != 0;
    p.extrapolation = getAttrFloat(node, "extrapolation_value", 0.0);
  }
  if (!llvm::is_contained(g::ResizeOp::getCoordinateKeywords(),
                          p.coordinates)) {
    error = "with coordinate_transformation_mode '" + p.coordinates + "'";
    return failure();
  }
  if (!llvm::is_contained(g::ResizeOp::getNearestKeywords(), p.rounding)) {
    error = "with nearest_mode '" + p.rounding + "'";
    return failure();
  }
  // Opset 18's attributes, refused by name should a model carry them.
  if (getAttrInt(node, "antialias", 0) != 0) {
    error = "with antialias (not supported)";
    return failure();
  }
  if (findAttr(node, "axes")) {
    error = "with 'axes' (not supported: give scales or sizes for every dim)";
    return failure();
  }
  std::string policy =
      getAttrString(node, "keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch") {
    error = "with keep_aspect_ratio_policy '" + policy +
            "' (only 'stretch' is supported)";
    return failure();
  }

  int scalesInput = legacy ? 1 : 2, sizesInput = legacy ? -1 : 3;
  if (node.op_type() == "Upsample" && imp.opset < 9) {
    error = "with opset " + std::to_string(imp.opset) + " scales";
    return failure();
  }
  auto scales = getConstDoubles(imp, node, scalesInput, "scales", error);
  auto sizes = getConstDoubles(imp, node, sizesInput, "sizes", error);
  bool crop = p.coordinates == "tf_crop_and_resize";
  auto roi = crop ? getConstDoubles(imp, node, 1, "roi", error) : std::nullopt;
  if (!error.empty())
    return failure();
  if (!scales && !sizes) {
    error = "without scales or sizes";
    return failure();
  }
  int64_t rank = inShape.size();
  if (rank != 4) {
    error = "on a rank-" + std::to_string(rank) +
            " input (only 4-D NCHW is supported)";
    return failure();
  }
  const SmallVector<double> &given = scales ? *scales : *sizes;
  StringRef what = scales ? "scales" : "sizes";
  if (static_cast<int64_t>(given.size()) != rank) {
    error = "with " + std::to_string(given.size()) + " " + what.str() +
            " for a rank-" + std::to_string(rank) + " input";
    return failure();
  }
  if (crop && (!roi || static_cast<int64_t>(roi->size()) != 2 * rank)) {
    error = "in tf_crop_and_resize without a constant roi of " +
            std::to_string(2 * rank) + " numbers";
    return failure();
  }
  for (int64_t d = 0; d < rank; ++d) {
    double lo = crop ? (*roi)[d] : 0.0, hi = crop ? (*roi)[rank + d] : 1.0;
    bool keeps = scales ? given[d] == 1.0 : given[d] == inShape[d];
    if (d < 2 && (!keeps || lo != 0.0 || hi != 1.0)) {
      error = "resizing dim " + std::to_string(d) +
              " (only H and W of NCHW are resized)";
      return failure();
    }
    if (d < 2)
      continue;
    if (!(given[d] > 0) || !(hi > lo)) {
      error = "with " + what.str() + " or roi of dim " + std::to_string(d) +
              " that make it empty";
      return failure();
    }
    // From sizes, the scale the coordinates divide by: out / (in * roi).
    p.scales.push_back(scales ? given[d] : given[d] / (inShape[d] * (hi - lo)));
  }
  if (crop)
    p.roi = SmallVector<double>{(*roi)[2], (*roi)[3], (*roi)[6], (*roi)[7]};
  return p;
}

static LogicalResult convertResize(GraphImporter &imp, const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  FailureOr<Value> x = getInput(imp, node, 0);
  if (failed(x))
    return failure();
  auto xType = cast<RankedTensorType>(x->getType());
  std::string error;
  FailureOr<ResizeParams> p =
      getResizeParams(imp, node, xType.getShape(), error);
  if (failed(p))
    return emitError(imp.currentLoc)
           << "unsupported " << node.op_type() << " " << error;
  OpBuilder &b = imp.builder;
  imp.setValue(
      node.output(0),
      g::ResizeOp::create(
          b, imp.currentLoc, type, *x, b.getDenseF64ArrayAttr(p->scales),
          b.getStringAttr(p->mode), b.getStringAttr(p->coordinates),
          b.getStringAttr(p->rounding), f64(imp, p->cubicA),
          b.getBoolAttr(p->excludeOutside),
          p->roi ? b.getDenseF64ArrayAttr(*p->roi) : DenseF64ArrayAttr(),
          f64(imp, p->extrapolation)));
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

/// Gemm: alpha * A' B' + beta * C. A transposed A becomes a ppc.transpose,
/// B' is the linear's weight layout; alpha/beta other than 1 become a
/// multiplication by a constant, and a 1-D C with unit factors the bias.
static LogicalResult convertGemm(GraphImporter &imp, const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  Type et = type.getElementType();
  FailureOr<Value> a = getInput(imp, node, 0, et),
                   b = getInput(imp, node, 1, et);
  if (failed(a) || failed(b))
    return failure();
  double alpha = getAttrFloat(node, "alpha", 1.0);
  double beta = getAttrFloat(node, "beta", 1.0);
  if (getAttrInt(node, "transA", 0)) {
    auto aType = cast<RankedTensorType>(a->getType());
    auto transposed = aType.clone({aType.getDimSize(1), aType.getDimSize(0)});
    a = g::TransposeOp::create(imp.builder, imp.currentLoc, transposed, *a,
                               ArrayRef<int64_t>{1, 0})
            .getResult();
  }
  Value c;
  if (hasInput(node, 2) && beta != 0.0) {
    FailureOr<Value> cv = getInput(imp, node, 2, et);
    if (failed(cv))
      return failure();
    c = *cv;
  }
  auto cType = c ? cast<RankedTensorType>(c.getType()) : RankedTensorType();
  bool cIsBias = c && alpha == 1.0 && beta == 1.0 && cType.getRank() == 1 &&
                 cType.getDimSize(0) == type.getDimSize(1);
  Value y = g::LinearOp::create(imp.builder, imp.currentLoc, type, *a, *b,
                                cIsBias ? c : Value(),
                                getAttrInt(node, "transB", 0) != 0);
  if (alpha != 1.0)
    y = g::MulOp::create(imp.builder, imp.currentLoc, type, y,
                         imp.createScalar(alpha, et));
  if (c && !cIsBias) {
    if (beta != 1.0)
      c = g::MulOp::create(imp.builder, imp.currentLoc, cType, c,
                           imp.createScalar(beta, et));
    y = g::AddOp::create(imp.builder, imp.currentLoc, type, y, c);
  }
  imp.setValue(node.output(0), y);
  return success();
}

/// MatMul. A 2-D weight on the right makes a ppc.linear (a parameter the
/// search can split like a fully connected layer), and so does the transpose
/// of one, as PyTorch exports nn.Linear on a 3-D input without constant
/// folding (its weight stays [out, in], read transposed); rank-1 operands
/// are reshaped to matrices and the result reshaped back, as numpy
/// specifies.
static LogicalResult convertMatMul(GraphImporter &imp, const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  FailureOr<Value> a = getInput(imp, node, 0), b = getInput(imp, node, 1);
  if (failed(a) || failed(b))
    return failure();
  auto aType = cast<RankedTensorType>(a->getType());
  auto bType = cast<RankedTensorType>(b->getType());
  if (aType.getRank() >= 2 && bType.getRank() == 2 &&
      imp.isWeightInitializer(node.input(1))) {
    imp.setValue(node.output(0),
                 g::LinearOp::create(imp.builder, imp.currentLoc, type, *a, *b,
                                     Value(), false));
    return success();
  }
  if (auto transpose = b->getDefiningOp<g::TransposeOp>();
      transpose && aType.getRank() >= 2 && bType.getRank() == 2 &&
      transpose.getPermutation() == ArrayRef<int64_t>{1, 0} &&
      transpose.getInput().getDefiningOp<g::WeightOp>()) {
    Value weight = transpose.getInput();
    imp.setValue(node.output(0),
                 g::LinearOp::create(imp.builder, imp.currentLoc, type, *a,
                                     weight, Value(),
                                     /*transpose_weight=*/true));
    // The transpose, now unused, goes with the importer's dead ops.
    return success();
  }
  SmallVector<int64_t> aShape(aType.getShape()), bShape(bType.getShape());
  if (aShape.size() == 1)
    aShape.insert(aShape.begin(), 1);
  if (bShape.size() == 1)
    bShape.push_back(1);
  Value lhs = reshape(imp, *a, aShape), rhs = reshape(imp, *b, bShape);
  SmallVector<int64_t> shape = broadcastShape(ArrayRef(aShape).drop_back(2),
                                              ArrayRef(bShape).drop_back(2));
  shape.push_back(aShape[aShape.size() - 2]);
  shape.push_back(bShape.back());
  Value y = g::MatMulOp::create(imp.builder, imp.currentLoc, type.clone(shape),
                                lhs, rhs, false, false);
  imp.setValue(node.output(0), reshape(imp, y, type.getShape()));
  return success();
}

/// An Einsum equation, one letter per dim: the operands' subscripts and the
/// result's (implicit mode: the letters used once, in alphabetical order).
struct EinsumSpec {
  SmallVector<std::string, 2> inputs;
  std::string output;
};

/// Parses `equation` for operands of `ranks`; the forms ppc imports are one
/// or two operands of distinct letters (no ellipsis, no diagonal), each
/// result letter taken from an operand once. Sets `error` otherwise.
static std::optional<EinsumSpec> parseEinsum(StringRef equation,
                                             ArrayRef<int64_t> ranks,
                                             std::string &error) {
  std::string text;
  for (char c : equation)
    if (c != ' ')
      text.push_back(c);
  if (StringRef(text).contains("...")) {
    error = "with an ellipsis ('...') in equation '" + equation.str() + "'";
    return std::nullopt;
  }
  EinsumSpec spec;
  StringRef lhs = text, rhs;
  bool explicitOutput = StringRef(text).contains("->");
  if (explicitOutput)
    std::tie(lhs, rhs) = StringRef(text).split("->");
  SmallVector<StringRef> terms;
  lhs.split(terms, ',');
  if (terms.size() != ranks.size() || terms.size() > 2) {
    error = "with equation '" + equation.str() + "' on " +
            std::to_string(ranks.size()) +
            " operand(s) (one or two operands are supported)";
    return std::nullopt;
  }
  auto distinctLetters = [&](StringRef term) {
    for (size_t i = 0; i < term.size(); ++i)
      if (!llvm::isAlpha(term[i]) || term.find(term[i], i + 1) != StringRef::npos)
        return false;
    return true;
  };
  for (auto [term, rank] : llvm::zip(terms, ranks)) {
    if (!distinctLetters(term)) {
      error = "with subscripts '" + term.str() + "' in equation '" +
              equation.str() +
              "' (a repeated letter, a diagonal, is not supported)";
      return std::nullopt;
    }
    if (rank >= 0 && static_cast<int64_t>(term.size()) != rank) {
      error = "with subscripts '" + term.str() + "' for a rank-" +
              std::to_string(rank) + " operand";
      return std::nullopt;
    }
    spec.inputs.push_back(term.str());
  }
  std::string all = llvm::join(terms, "");
  if (explicitOutput) {
    if (!distinctLetters(rhs) || llvm::any_of(rhs, [&](char c) {
          return all.find(c) == std::string::npos;
        })) {
      error = "with result subscripts '" + rhs.str() + "' in equation '" +
              equation.str() + "' (distinct letters of the operands)";
      return std::nullopt;
    }
    spec.output = rhs.str();
  } else {
    for (char c : all)
      if (llvm::count(all, c) == 1)
        spec.output.push_back(c);
    llvm::sort(spec.output);
  }
  return spec;
}

/// Sums `value` (subscripts `letters`) over the letters not in `keep`.
static Value sumOutLetters(GraphImporter &imp, Value value,
                          std::string &letters, StringRef keep) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> axes, shape;
  std::string kept;
  for (auto [i, c] : llvm::enumerate(letters)) {
    if (keep.contains(c)) {
      kept.push_back(c);
      shape.push_back(type.getDimSize(i));
    } else {
      axes.push_back(i);
    }
  }
  if (axes.empty())
    return value;
  letters = kept;
  return g::ReduceSumOp::create(imp.builder, imp.currentLoc, type.clone(shape),
                                value, axes, false);
}

/// Transposes `value` (subscripts `letters`) to the subscripts `order`.
static Value transposeLetters(GraphImporter &imp, Value value,
                              StringRef letters, StringRef order) {
  if (letters == order)
    return value;
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> perm, shape;
  for (char c : order) {
    perm.push_back(letters.find(c));
    shape.push_back(type.getDimSize(perm.back()));
  }
  return g::TransposeOp::create(imp.builder, imp.currentLoc, type.clone(shape),
                                value, perm);
}

/// Einsum as existing ops: letters of one operand that appear nowhere else
/// are summed out first; two operands then become one batched matmul over
/// [batch, free, contracted] x [batch, contracted, free] (transposes and
/// reshapes around it); the result is transposed to the equation's order.
static LogicalResult convertEinsum(GraphImporter &imp, const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  Type et = type.getElementType();
  SmallVector<Value, 2> operands;
  SmallVector<int64_t, 2> ranks;
  for (int i = 0; i < node.input_size(); ++i) {
    FailureOr<Value> v = getInput(imp, node, i, et);
    if (failed(v))
      return failure();
    operands.push_back(*v);
    ranks.push_back(cast<RankedTensorType>(v->getType()).getRank());
  }
  std::string error;
  std::optional<EinsumSpec> spec =
      parseEinsum(getAttrString(node, "equation", ""), ranks, error);
  if (!spec)
    return emitError(imp.currentLoc) << "Einsum " << error;
  std::string &out = spec->output;
  SmallVector<std::string, 2> &letters = spec->inputs;
  if (operands.size() == 1) {
    Value y = sumOutLetters(imp, operands[0], letters[0], out);
    imp.setValue(node.output(0), transposeLetters(imp, y, letters[0], out));
    return success();
  }
  // Letters each operand shares with the other or the result stay.
  for (int i = 0; i < 2; ++i)
    operands[i] = sumOutLetters(imp, operands[i], letters[i],
                                letters[1 - i] + out);
  std::string batch, contracted, freeA, freeB;
  for (char c : letters[0]) {
    bool inB = StringRef(letters[1]).contains(c);
    bool inOut = StringRef(out).contains(c);
    (inB ? (inOut ? batch : contracted) : freeA).push_back(c);
  }
  for (char c : letters[1])
    if (!StringRef(letters[0]).contains(c))
      freeB.push_back(c);
  auto sizeOf = [&](char c) {
    for (int i = 0; i < 2; ++i)
      if (size_t pos = letters[i].find(c); pos != std::string::npos)
        return cast<RankedTensorType>(operands[i].getType()).getDimSize(pos);
    return int64_t{1};
  };
  for (char c : batch + contracted) {
    int64_t a = cast<RankedTensorType>(operands[0].getType())
                    .getDimSize(letters[0].find(c));
    int64_t b = cast<RankedTensorType>(operands[1].getType())
                    .getDimSize(letters[1].find(c));
    if (a != b)
      return emitError(imp.currentLoc)
             << "Einsum subscript '" << c << "' has size " << a
             << " in operand 0 but " << b << " in operand 1";
  }
  auto product = [&](StringRef group) {
    int64_t n = 1;
    for (char c : group)
      n *= sizeOf(c);
    return n;
  };
  SmallVector<int64_t> batchShape;
  for (char c : batch)
    batchShape.push_back(sizeOf(c));
  auto matrixShape = [&](int64_t rows, int64_t cols) {
    SmallVector<int64_t> shape(batchShape);
    shape.append({rows, cols});
    return shape;
  };
  int64_t m = product(freeA), k = product(contracted), n = product(freeB);
  Value lhs = reshape(imp,
                      transposeLetters(imp, operands[0], letters[0],
                                       batch + freeA + contracted),
                      matrixShape(m, k));
  Value rhs = reshape(imp,
                      transposeLetters(imp, operands[1], letters[1],
                                       batch + contracted + freeB),
                      matrixShape(k, n));
  Value matrixProduct = g::MatMulOp::create(imp.builder, imp.currentLoc,
                                       type.clone(matrixShape(m, n)), lhs, rhs,
                                       false, false);
  std::string produced = batch + freeA + freeB;
  SmallVector<int64_t> producedShape;
  for (char c : produced)
    producedShape.push_back(sizeOf(c));
  imp.setValue(node.output(0),
               transposeLetters(imp, reshape(imp, matrixProduct, producedShape),
                                produced, out));
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// Flatten, Reshape, Squeeze, Unsqueeze: the result type says it all.
static LogicalResult convertReshape(GraphImporter &imp, const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  FailureOr<Value> x = getInput(imp, node, 0);
  if (failed(x))
    return failure();
  imp.setValue(node.output(0), reshape(imp, *x, type.getShape()));
  return success();
}

static LogicalResult convertIdentity(GraphImporter &imp,
                                     const NodeProto &node) {
  FailureOr<Value> x = getInput(imp, node, 0);
  if (failed(x))
    return failure();
  imp.setValue(node.output(0), *x);
  return success();
}

static LogicalResult convertCast(GraphImporter &imp, const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  FailureOr<Value> x = getInput(imp, node, 0);
  if (failed(x))
    return failure();
  imp.setValue(node.output(0), coerce(imp, *x, type.getElementType()));
  return success();
}

static LogicalResult convertExpand(GraphImporter &imp, const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  FailureOr<Value> x = getInput(imp, node, 0);
  if (failed(x))
    return failure();
  Value v = *x;
  if (v.getType() != type)
    v = g::BroadcastOp::create(imp.builder, imp.currentLoc, type, v);
  imp.setValue(node.output(0), v);
  return success();
}

static LogicalResult convertTranspose(GraphImporter &imp,
                                      const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  FailureOr<Value> x = getInput(imp, node, 0);
  if (failed(x))
    return failure();
  int64_t rank = type.getRank();
  SmallVector<int64_t> perm;
  if (auto attr = getAttrInts(node, "perm"))
    perm = *attr;
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  imp.setValue(
      node.output(0),
      g::TransposeOp::create(imp.builder, imp.currentLoc, type, *x, perm));
  return success();
}

static LogicalResult convertConcat(GraphImporter &imp, const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  SmallVector<Value> inputs;
  for (int i = 0; i < node.input_size(); ++i) {
    FailureOr<Value> v = getInput(imp, node, i, type.getElementType());
    if (failed(v))
      return failure();
    inputs.push_back(*v);
  }
  int64_t axis = normalizeAxis(getAttrInt(node, "axis", 0), type.getRank());
  imp.setValue(node.output(0),
               g::ConcatOp::create(imp.builder, imp.currentLoc, type, inputs,
                                   imp.builder.getI64IntegerAttr(axis)));
  return success();
}

static LogicalResult convertSplit(GraphImporter &imp, const NodeProto &node) {
  FailureOr<Value> x = getInput(imp, node, 0);
  if (failed(x))
    return failure();
  int64_t rank = cast<RankedTensorType>(x->getType()).getRank();
  SmallVector<Type> types;
  for (int i = 0; i < node.output_size(); ++i) {
    RankedTensorType t = getResultType(imp, node, i);
    if (!t)
      return emitError(imp.currentLoc)
             << "Split output '" << node.output(i) << "' has no static shape";
    types.push_back(t);
  }
  int64_t axis = normalizeAxis(getAttrInt(node, "axis", 0), rank);
  auto split = g::SplitOp::create(imp.builder, imp.currentLoc, types, *x,
                                  imp.builder.getI64IntegerAttr(axis));
  for (auto [name, result] : llvm::zip(node.output(), split.getResults()))
    if (!name.empty())
      imp.setValue(name, result);
  return success();
}

namespace {
/// A Slice resolved to a start and a positive step per dim.
struct SliceParams {
  SmallVector<int64_t> starts, steps, shape;
};
} // namespace

/// Resolves Slice's starts/ends/axes/steps (attributes before opset 10,
/// constant inputs after), clamping negative and out-of-range (INT_MAX)
/// bounds. Returns an error message when the slice is not supported.
static FailureOr<SliceParams> getSliceParams(GraphImporter &imp,
                                             const NodeProto &node,
                                             ArrayRef<int64_t> inShape,
                                             std::string &error) {
  std::optional<SmallVector<int64_t>> starts, ends, axes, steps;
  if (imp.opset < 10) {
    starts = getAttrInts(node, "starts");
    ends = getAttrInts(node, "ends");
    axes = getAttrInts(node, "axes");
  } else {
    starts = getConstInts(imp, node, 1);
    ends = getConstInts(imp, node, 2);
    if (hasInput(node, 3) && !(axes = getConstInts(imp, node, 3)))
      starts.reset();
    if (hasInput(node, 4) && !(steps = getConstInts(imp, node, 4)))
      starts.reset();
  }
  if (!starts || !ends || starts->size() != ends->size()) {
    error = "Slice with non-constant starts/ends/axes/steps";
    return failure();
  }
  size_t n = starts->size();
  int64_t rank = inShape.size();
  if (!axes) {
    axes.emplace();
    for (size_t i = 0; i < n; ++i)
      axes->push_back(i);
  }
  if (!steps)
    steps = SmallVector<int64_t>(n, 1);
  if (axes->size() != n || steps->size() != n) {
    error = "Slice with mismatched starts/ends/axes/steps";
    return failure();
  }
  SliceParams p{SmallVector<int64_t>(rank, 0), SmallVector<int64_t>(rank, 1),
                SmallVector<int64_t>(inShape)};
  for (size_t i = 0; i < n; ++i) {
    int64_t axis = normalizeAxis((*axes)[i], rank), step = (*steps)[i];
    if (axis < 0 || axis >= rank) {
      error = "Slice axis out of range";
      return failure();
    }
    if (step <= 0) {
      error = "Slice with step " + std::to_string(step) +
              " (only positive steps are supported)";
      return failure();
    }
    int64_t dim = inShape[axis];
    auto clampIndex = [&](int64_t v) {
      if (v < 0)
        v = v < -dim ? 0 : v + dim;
      return std::clamp<int64_t>(v, 0, dim);
    };
    int64_t b = clampIndex((*starts)[i]), e = clampIndex((*ends)[i]);
    p.starts[axis] = b;
    p.steps[axis] = step;
    p.shape[axis] = e > b ? (e - b + step - 1) / step : 0;
  }
  return p;
}

std::optional<SmallVector<int64_t>>
onnx_import::inferSliceShape(GraphImporter &imp, const NodeProto &node,
                             ArrayRef<int64_t> inShape) {
  std::string error;
  FailureOr<SliceParams> p = getSliceParams(imp, node, inShape, error);
  if (failed(p))
    return std::nullopt;
  return p->shape;
}

static LogicalResult convertSlice(GraphImporter &imp, const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  FailureOr<Value> x = getInput(imp, node, 0);
  if (failed(x))
    return failure();
  auto xType = cast<RankedTensorType>(x->getType());
  std::string error;
  FailureOr<SliceParams> p = getSliceParams(imp, node, xType.getShape(), error);
  if (failed(p))
    return emitError(imp.currentLoc) << "unsupported " << error;
  x = imp.getWholeWeightView(*x);
  imp.setValue(node.output(0), g::SliceOp::create(imp.builder, imp.currentLoc,
                                                  type.clone(p->shape), *x,
                                                  p->starts, p->steps));
  return success();
}

/// Pad: `pads`/`value` attributes before opset 11, constant inputs after.
static LogicalResult convertPad(GraphImporter &imp, const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  FailureOr<Value> x = getInput(imp, node, 0);
  if (failed(x))
    return failure();
  std::optional<SmallVector<int64_t>> pads;
  double value = 0.0;
  if (imp.opset < 11) {
    pads = getAttrInts(node, "pads");
    value = getAttrFloat(node, "value", 0.0);
  } else {
    pads = getConstInts(imp, node, 1);
    if (auto v = getConstScalar(imp, node, 2))
      value = *v;
  }
  if (!pads)
    return emitError(imp.currentLoc) << "Pad with non-constant pads";
  imp.setValue(node.output(0),
               g::PadOp::create(imp.builder, imp.currentLoc, type, *x,
                                imp.builder.getDenseI64ArrayAttr(*pads),
                                f64(imp, value)));
  return success();
}

/// Gather; constant negative indices are made positive.
static LogicalResult convertGather(GraphImporter &imp, const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  FailureOr<Value> data = getInput(imp, node, 0);
  if (failed(data))
    return failure();
  auto dataType = cast<RankedTensorType>(data->getType());
  int64_t axis = normalizeAxis(getAttrInt(node, "axis", 0), dataType.getRank());
  Value indices;
  if (const ConstTensor *c = imp.getConst(node.input(1))) {
    ConstTensor normalized = *c;
    int64_t dim = dataType.getDimSize(axis);
    for (int64_t &i : normalized.ints)
      if (i < 0)
        i += dim;
    indices =
        imp.createConstant(normalized, getElementType(c->dtype, imp.context));
  } else {
    FailureOr<Value> v = getInput(imp, node, 1);
    if (failed(v))
      return failure();
    indices = *v;
  }
  imp.setValue(node.output(0),
               g::GatherOp::create(imp.builder, imp.currentLoc, type, *data,
                                   indices,
                                   imp.builder.getI64IntegerAttr(axis)));
  return success();
}

/// Where with a constant condition (masks): x and y are broadcast to the
/// result, flattened and concatenated, and a ppc.gather with constant indices
/// (i where the condition holds, n + i where not) picks each element. The
/// values are copied, never combined arithmetically, so -inf fills come out
/// exact, and each side gets its gradient through the gather's.
/// Where: ppc.select, the condition as i1, both sides of the result's
/// element type.
static LogicalResult convertWhere(GraphImporter &imp, const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  FailureOr<Value> cond =
      getInput(imp, node, 0, IntegerType::get(imp.context, 1));
  FailureOr<Value> lhs = getInput(imp, node, 1, type.getElementType());
  FailureOr<Value> rhs = getInput(imp, node, 2, type.getElementType());
  if (failed(cond) || failed(lhs) || failed(rhs))
    return failure();
  imp.setValue(node.output(0), g::SelectOp::create(imp.builder, imp.currentLoc,
                                                   type, *cond, *lhs, *rhs));
  return success();
}

/// Comparisons and logic: both operands of the first one's element type,
/// an i1 result.
template <typename OpTy>
static LogicalResult convertCompare(GraphImporter &imp, const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  FailureOr<Value> lhs = getInput(imp, node, 0);
  if (failed(lhs))
    return failure();
  FailureOr<Value> rhs = getInput(imp, node, 1, getElementTypeOrSelf(*lhs));
  if (failed(rhs))
    return failure();
  imp.setValue(node.output(0),
               OpTy::create(imp.builder, imp.currentLoc, type, *lhs, *rhs));
  return success();
}

/// Trilu: ppc.select of the input where a constant mask of the last two
/// dims keeps it (j - i >= k for the upper part, j - i <= k for the lower),
/// of 0 elsewhere: a copy, exact for every value.
static LogicalResult convertTrilu(GraphImporter &imp, const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  FailureOr<Value> x = getInput(imp, node, 0, type.getElementType());
  if (failed(x))
    return failure();
  int64_t k = getConstScalar(imp, node, 1).value_or(0);
  bool upper = getAttrInt(node, "upper", 1) != 0;
  ArrayRef<int64_t> shape = type.getShape();
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  ConstTensor mask = ConstTensor::zeros(onnx::TensorProto::BOOL, {rows, cols});
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      mask.ints[i * cols + j] = upper ? j - i >= k : j - i <= k;
  Type i1 = IntegerType::get(imp.context, 1);
  Value keep = imp.createConstant(mask, i1);
  Value zero = imp.createScalar(0, type.getElementType());
  if (!keep || !zero)
    return emitError(imp.currentLoc) << "Trilu: cannot create its mask";
  imp.setValue(node.output(0), g::SelectOp::create(imp.builder, imp.currentLoc,
                                                   type, keep, *x, zero));
  return success();
}

/// CumSum: the axis a constant input.
static LogicalResult convertCumSum(GraphImporter &imp, const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  FailureOr<Value> x = getInput(imp, node, 0, type.getElementType());
  std::optional<double> axis = getConstScalar(imp, node, 1);
  if (failed(x))
    return failure();
  if (!axis)
    return emitError(imp.currentLoc) << "CumSum needs a constant axis";
  imp.setValue(node.output(0),
               g::CumSumOp::create(
                   imp.builder, imp.currentLoc, type, *x,
                   imp.builder.getI64IntegerAttr(normalizeAxis(
                       static_cast<int64_t>(*axis), type.getRank())),
                   imp.builder.getBoolAttr(getAttrInt(node, "exclusive", 0)),
                   imp.builder.getBoolAttr(getAttrInt(node, "reverse", 0))));
  return success();
}

/// Dropout: `ratio` attribute before opset 12, optional input after.
static LogicalResult convertDropout(GraphImporter &imp, const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  FailureOr<Value> x = getInput(imp, node, 0);
  if (failed(x))
    return failure();
  double ratio = imp.opset < 12 ? getAttrFloat(node, "ratio", 0.5)
                                : getConstScalar(imp, node, 1).value_or(0.5);
  imp.setValue(node.output(0),
               g::DropoutOp::create(
                   imp.builder, imp.currentLoc, type, *x, f64(imp, ratio),
                   imp.builder.getI64IntegerAttr(getAttrInt(node, "seed", 0))));
  return success();
}

template <typename OpTy>
static LogicalResult convertReduce(GraphImporter &imp, const NodeProto &node) {
  RankedTensorType type = getResultType(imp, node);
  FailureOr<Value> x = getInput(imp, node, 0);
  if (failed(x))
    return failure();
  int64_t rank = cast<RankedTensorType>(x->getType()).getRank();
  auto axes = getReduceAxes(imp, node, rank);
  if (!axes) { // noop_with_empty_axes
    imp.setValue(node.output(0), *x);
    return success();
  }
  bool keepDims = getAttrInt(node, "keepdims", 1) != 0;
  imp.setValue(node.output(0), OpTy::create(imp.builder, imp.currentLoc, type,
                                            *x, *axes, keepDims));
  return success();
}

//===----------------------------------------------------------------------===//
// Registry
//===----------------------------------------------------------------------===//

const ConverterInfo *onnx_import::lookupConverter(const onnx::NodeProto &node) {
  if (node.domain().empty() || node.domain() == "ai.onnx")
    return lookupConverter(node.op_type());
  static const ConverterInfo fusedMoe = {convertFusedMoe, 2, true};
  if (node.domain() == kFusedDomain && node.op_type() == kFusedMoeOpType)
    return &fusedMoe;
  return nullptr;
}

const ConverterInfo *onnx_import::lookupConverter(StringRef opType) {
  static const llvm::StringMap<ConverterInfo> converters = [] {
    constexpr unsigned all = ~0u;
    llvm::StringMap<ConverterInfo> m;
    m["Add"] = {convertBinary<g::AddOp>, all, true};
    m["Sub"] = {convertBinary<g::SubOp>, all, true};
    m["Mul"] = {convertBinary<g::MulOp>, all, true};
    m["Div"] = {convertBinary<g::DivOp>, all, true};
    m["Pow"] = {convertBinary<g::PowOp>, all, true};
    m["Max"] = {convertBinary<g::MaxOp>, all, true};
    m["Min"] = {convertBinary<g::MinOp>, all, true};
    m["Relu"] = {convertUnary<g::ReluOp>, 1, true};
    m["LeakyRelu"] = {activation<g::LeakyReluOp, kLeakyReluAttrs>, 1, true};
    m["HardSigmoid"] = {activation<g::HardSigmoidOp, kHardSigmoidAttrs>, 1,
                        true};
    m["HardSwish"] = {convertUnary<g::HardSwishOp>, 1, true};
    m["Elu"] = {activation<g::EluOp, kEluAttrs>, 1, true};
    m["Selu"] = {activation<g::SeluOp, kSeluAttrs>, 1, true};
    m["Softplus"] = {convertUnary<g::SoftplusOp>, 1, true};
    m["Mish"] = {convertUnary<g::MishOp>, 1, true};
    m["PRelu"] = {convertBinary<g::PReluOp>, 2, true};
    m["Sigmoid"] = {convertUnary<g::SigmoidOp>, 1, true};
    m["Tanh"] = {convertUnary<g::TanhOp>, 1, true};
    m["Clip"] = {convertClip, 1, true};
    m["Sqrt"] = {convertUnary<g::SqrtOp>, 1, true};
    m["Exp"] = {convertUnary<g::ExpOp>, 1, true};
    m["Log"] = {convertUnary<g::LogOp>, 1, true};
    m["Erf"] = {convertUnary<g::ErfOp>, 1, true};
    m["Neg"] = {convertUnary<g::NegOp>, 1, true};
    m["Abs"] = {convertUnary<g::AbsOp>, 1, true};
    m["Reciprocal"] = {convertUnary<g::ReciprocalOp>, 1, true};
    m["Softmax"] = {convertSoftmax<g::SoftmaxOp>, 1, true};
    m["LogSoftmax"] = {convertSoftmax<g::LogSoftmaxOp>, 1, true};
    m["Conv"] = {convertConv, 3, true};
    m["ConvTranspose"] = {convertConvTranspose, 3, true};
    m["Gemm"] = {convertGemm, 3, true};
    m["MatMul"] = {convertMatMul, 2, true};
    m["Einsum"] = {convertEinsum, all, true};
    m["BatchNormalization"] = {convertBatchNorm, 5, true};
    m["LayerNormalization"] = {convertLayerNorm, 3, true};
    m["InstanceNormalization"] = {convertInstanceNorm, 3, true};
    m["MaxPool"] = {convertPool<g::MaxPool2DOp>, 1, true};
    m["AveragePool"] = {convertPool<g::AvgPool2DOp>, 1, true};
    m["GlobalAveragePool"] = {convertGlobalAvgPool, 1, true};
    m["Resize"] = {convertResize, 1, true};
    m["Upsample"] = {convertResize, 1, true};
    m["Flatten"] = {convertReshape, 1, false};
    m["Reshape"] = {convertReshape, 1, false};
    m["Squeeze"] = {convertReshape, 1, false};
    m["Unsqueeze"] = {convertReshape, 1, false};
    m["Transpose"] = {convertTranspose, 1, false};
    m["Concat"] = {convertConcat, all, false};
    m["Split"] = {convertSplit, 1, false};
    m["Slice"] = {convertSlice, 1, false};
    m["Pad"] = {convertPad, 1, false};
    m["Gather"] = {convertGather, 2, false};
    m["Dropout"] = {convertDropout, 1, true};
    m["Identity"] = {convertIdentity, 1, false};
    m["Cast"] = {convertCast, 1, false};
    m["ReduceSum"] = {convertReduce<g::ReduceSumOp>, 1, true};
    m["ReduceMean"] = {convertReduce<g::ReduceMeanOp>, 1, true};
    m["ReduceMax"] = {convertReduce<g::ReduceMaxOp>, 1, true};
    m["Expand"] = {convertExpand, 1, false};
    m["Where"] = {convertWhere, 3, false};
    m["Equal"] = {convertCompare<g::EqualOp>, 2, false};
    m["Less"] = {convertCompare<g::LessOp>, 2, false};
    m["LessOrEqual"] = {convertCompare<g::LessEqualOp>, 2, false};
    m["Greater"] = {convertCompare<g::GreaterOp>, 2, false};
    m["GreaterOrEqual"] = {convertCompare<g::GreaterEqualOp>, 2, false};
    m["And"] = {convertCompare<g::AndOp>, 2, false};
    m["Or"] = {convertCompare<g::OrOp>, 2, false};
    m["Not"] = {convertUnary<g::NotOp>, 1, false};
    m["Trilu"] = {convertTrilu, 1, false};
    m["CumSum"] = {convertCumSum, 1, false};
    // X, W, R, B, sequence_lens (a constant), initial_h, initial_c, P.
    m["LSTM"] = {convertRecurrent, all, true};
    m["GRU"] = {convertRecurrent, all, true};
    m["RNN"] = {convertRecurrent, all, true};
    return m;
  }();
  auto it = converters.find(opType);
  return it == converters.end() ? nullptr : &it->second;
}

/// Why a node of a supported op type still cannot be imported (attribute
/// values, optional outputs in use, ranks), or nullopt.
std::optional<std::string>
onnx_import::getUnsupportedReason(GraphImporter &imp, const NodeProto &node) {
  StringRef op = node.op_type();
  // Ranks are known even where dims are still dynamic (reported apart).
  auto inputRank = [&](int i) -> int64_t {
    auto it =
        hasInput(node, i) ? imp.types.find(node.input(i)) : imp.types.end();
    if (it == imp.types.end() || !it->second.shape)
      return -1;
    return it->second.shape->size();
  };
  if (isRecurrentOpType(op))
    return getRecurrentUnsupportedReason(imp, node);
  for (int i = 1; i < node.output_size(); ++i)
    if (op != "Split" && isOutputUsed(imp, node, i))
      return "with its output " + std::to_string(i) + " in use";
  if (op == "Conv" || op == "MaxPool" || op == "AveragePool" ||
      op == "GlobalAveragePool") {
    if (inputRank(0) != 4 && inputRank(0) != -1)
      return "on a rank-" + std::to_string(inputRank(0)) +
             " input (only 2-D NCHW is supported)";
    if (op == "Conv" && getAttrInts(node, "kernel_shape") &&
        getAttrInts(node, "kernel_shape")->size() != 2)
      return std::string("with a non 2-D kernel");
  }
  if (op == "ConvTranspose") {
    RankedTensorType x = imp.getType(node.input(0));
    RankedTensorType w =
        hasInput(node, 1) ? imp.getType(node.input(1)) : RankedTensorType();
    std::string error;
    if (x && w && x.getRank() >= 2 && w.getRank() == x.getRank() &&
        failed(getConvTransposeParams(node, x.getShape().drop_front(2),
                                      w.getShape().drop_front(2), error)))
      return error;
  }
  if (op == "MaxPool" || op == "AveragePool") {
    auto kernel = getAttrInts(node, "kernel_shape");
    if (!kernel || kernel->size() != 2)
      return std::string("without a 2-D kernel_shape");
    auto dilations = getAttrInts(node, "dilations");
    if (dilations && llvm::any_of(*dilations, [](int64_t d) { return d != 1; }))
      return std::string("with dilations");
  }
  if (op == "Pad") {
    std::string mode = getAttrString(node, "mode", "constant");
    if (mode != "constant")
      return "in mode '" + mode + "' (only 'constant' is supported)";
    auto pads =
        imp.opset < 11 ? getAttrInts(node, "pads") : getConstInts(imp, node, 1);
    if (!pads)
      return std::string("with non-constant pads");
    if (llvm::any_of(*pads, [](int64_t p) { return p < 0; }))
      return std::string("with negative pads");
    if (imp.opset >= 11 && hasInput(node, 2) && !getConstScalar(imp, node, 2))
      return std::string("with a non-constant pad value");
  }
  if (op == "Resize" || op == "Upsample") {
    RankedTensorType t = imp.getType(node.input(0));
    std::string error;
    if (t && failed(getResizeParams(imp, node, t.getShape(), error)))
      return error;
  }
  if (op == "Slice") {
    RankedTensorType t = imp.getType(node.input(0));
    std::string error;
    if (t && failed(getSliceParams(imp, node, t.getShape(), error)))
      return "(" + error + ")";
  }
  if (op == "Clip" && imp.opset >= 11)
    for (int i = 1; i < 3; ++i)
      if (hasInput(node, i) && !getConstScalar(imp, node, i))
        return std::string("with non-constant min/max");
  if (op == "Dropout" && imp.opset >= 12 && hasInput(node, 1) &&
      !getConstScalar(imp, node, 1))
    return std::string("with a non-constant ratio");
  if (op == "Split" && imp.opset >= 13 && hasInput(node, 1) &&
      !getConstInts(imp, node, 1))
    return std::string("with non-constant split sizes");
  if (op == "ReduceSum" && imp.opset >= 13 && hasInput(node, 1) &&
      !getConstInts(imp, node, 1))
    return std::string("with non-constant axes");
  if (op == "Trilu") {
    if (inputRank(0) != -1 && inputRank(0) < 2)
      return "on a rank-" + std::to_string(inputRank(0)) +
             " input (it needs a matrix or a batch of them)";
    if (hasInput(node, 1) && !getConstScalar(imp, node, 1))
      return std::string("with a non-constant k");
  }
  if (op == "CumSum" && !getConstScalar(imp, node, 1))
    return std::string("with a non-constant axis");
  if (op == "Einsum") {
    SmallVector<int64_t, 2> ranks;
    for (int i = 0; i < node.input_size(); ++i)
      ranks.push_back(inputRank(i));
    std::string error;
    if (!parseEinsum(getAttrString(node, "equation", ""), ranks, error))
      return error;
  }
  if (op == "InstanceNormalization" && inputRank(0) != -1 && inputRank(0) < 3)
    return "on a rank-" + std::to_string(inputRank(0)) +
           " input (it needs [N, C, D...] with at least one spatial dim)";
  if (op == "Gemm" && ((inputRank(0) != 2 && inputRank(0) != -1) ||
                       (inputRank(1) != 2 && inputRank(1) != -1)))
    return std::string("on operands that are not matrices");
  if (op == "Gather" && hasInput(node, 1)) {
    auto it = imp.types.find(node.input(1));
    if (it != imp.types.end() && isFloatDType(it->second.dtype))
      return std::string("with floating-point indices");
  }
  return std::nullopt;
}
