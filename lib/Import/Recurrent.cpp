//===- Recurrent.cpp - ONNX LSTM, GRU and RNN unrolled over time ----------===//
//
// ONNX's recurrent layers become graph ops ppc already has, one cell per
// time step and direction: the sequence length is static after import, so
// the loop unrolls, and gradients, partitioning, simulation and both
// backends need nothing new. For each direction d (gates in ONNX's order:
// LSTM i o f c, GRU z r h, RNN one):
//
//   XW = X W_d^T + Wb_d             one ppc.linear over every time step
//   for t = 0 .. S-1 (S-1 .. 0 for the reverse direction):
//     gates = XW[t] + H R_d^T + Rb_d    (ppc.slice of XW, ppc.linear)
//     the cell's elementwise update of H (and C) on ppc.slice's of gates
//   Y = concat of the H of every step, Y_h (Y_c) the last H (C)
//
// W, R, B and P stay whole tensors: a direction's (or one of GRU's gates')
// part is a ppc.slice of the one whole-weight view
// (GraphImporter::getWholeWeightView), so an initializer trains as one
// weight. A missing (or all-zero constant) initial state is zero, which the
// first step uses by leaving the terms it would zero out away.
//
// Limits (errors name the node and the attribute): sequence_lens must be a
// constant equal to the sequence length for every batch entry (ragged
// batches are not supported); activations are those with a ppc op or a
// short composition (ThresholdedRelu is not supported); clip bounds the
// input of every activation, h(C) of the LSTM included (the spec's words;
// onnxruntime clips C before h too), not the state C itself.
//
//===----------------------------------------------------------------------===//

#include "ImporterInternal.h"

#include "ppc/Dialect/Graph/GraphOps.h"

#include "llvm/ADT/STLExtras.h"

#include <map>

using namespace mlir;
using namespace ppc;
using namespace ppc::onnx_import;
using onnx::NodeProto;

namespace g = ppc::graph;

namespace {

enum class CellKind { RNN, GRU, LSTM };

/// An activation function of the recurrent ops, with its alpha and beta.
struct Activation {
  enum Kind {
    Sigmoid,
    Tanh,
    Relu,
    LeakyRelu,
    HardSigmoid,
    Elu,
    Softplus,
    Softsign,
    Affine,
    ScaledTanh,
  };
  Kind kind;
  double alpha = 0, beta = 0;
};

/// An activation name ONNX allows, how many of activation_alpha and
/// activation_beta it takes, and its operator's defaults.
struct ActivationInfo {
  StringRef name;
  Activation::Kind kind;
  int numParams;
  double alpha, beta;
};

constexpr ActivationInfo kActivations[] = {
    {"Sigmoid", Activation::Sigmoid, 0, 0, 0},
    {"Tanh", Activation::Tanh, 0, 0, 0},
    {"Relu", Activation::Relu, 0, 0, 0},
    {"LeakyRelu", Activation::LeakyRelu, 1, 0.01, 0},
    {"HardSigmoid", Activation::HardSigmoid, 2, 0.2, 0.5},
    {"Elu", Activation::Elu, 1, 1.0, 0},
    {"Softplus", Activation::Softplus, 0, 0, 0},
    {"Softsign", Activation::Softsign, 0, 0, 0},
    {"Affine", Activation::Affine, 2, 1.0, 0.0},
    {"ScaledTanh", Activation::ScaledTanh, 2, 1.0, 1.0},
};

/// A recurrent node's attributes, checked.
struct RecurrentAttrs {
  CellKind kind = CellKind::RNN;
  int64_t numGates = 1;
  int64_t numDirections = 1;
  bool reverse = false;    // direction = "reverse"
  bool batchFirst = false; // layout = 1
  /// The cell's activations for each direction, forward's first.
  SmallVector<Activation> activations;
  std::optional<double> clip;
  bool inputForget = false;
  bool linearBeforeReset = false;
};

} // namespace

static CellKind getCellKind(StringRef opType) {
  if (opType == "LSTM")
    return CellKind::LSTM;
  if (opType == "GRU")
    return CellKind::GRU;
  return CellKind::RNN;
}

bool onnx_import::isRecurrentOpType(StringRef opType) {
  return opType == "LSTM" || opType == "GRU" || opType == "RNN";
}

/// Reads and checks `node`'s attributes; the reason it is unsupported on
/// failure.
static std::optional<std::string> parseAttrs(const NodeProto &node,
                                             RecurrentAttrs &attrs) {
  attrs.kind = getCellKind(node.op_type());
  SmallVector<StringRef, 3> defaults;
  switch (attrs.kind) {
  case CellKind::RNN:
    attrs.numGates = 1;
    defaults = {"Tanh"};
    break;
  case CellKind::GRU:
    attrs.numGates = 3;
    defaults = {"Sigmoid", "Tanh"};
    break;
  case CellKind::LSTM:
    attrs.numGates = 4;
    defaults = {"Sigmoid", "Tanh", "Tanh"};
    break;
  }
  std::string direction = getAttrString(node, "direction", "forward");
  if (direction != "forward" && direction != "reverse" &&
      direction != "bidirectional")
    return "with direction '" + direction +
           "' (supported: forward, reverse, bidirectional)";
  attrs.reverse = direction == "reverse";
  attrs.numDirections = direction == "bidirectional" ? 2 : 1;
  int64_t layout = getAttrInt(node, "layout", 0);
  if (layout != 0 && layout != 1)
    return "with layout " + std::to_string(layout) + " (supported: 0, 1)";
  attrs.batchFirst = layout == 1;

  // Names: the defaults, one list for all directions, or one per direction.
  SmallVector<std::string> names;
  if (const onnx::AttributeProto *a = findAttr(node, "activations"))
    names.assign(a->strings().begin(), a->strings().end());
  size_t perDirection = defaults.size();
  if (names.empty())
    names.assign(defaults.begin(), defaults.end());
  if (names.size() != perDirection &&
      names.size() != perDirection * attrs.numDirections)
    return "with " + std::to_string(names.size()) + " activations (it takes " +
           std::to_string(perDirection) + " per direction)";
  if (names.size() == perDirection && attrs.numDirections == 2)
    names.append(SmallVector<std::string>(names));
  // activation_alpha and activation_beta are consumed in order by the
  // activations that take them (onnxruntime's reading); the operator's
  // default when they run out.
  SmallVector<double> alphas, betas;
  if (const onnx::AttributeProto *a = findAttr(node, "activation_alpha"))
    for (float v : a->floats())
      alphas.push_back(widenFloat(v));
  if (const onnx::AttributeProto *a = findAttr(node, "activation_beta"))
    for (float v : a->floats())
      betas.push_back(widenFloat(v));
  size_t nextAlpha = 0, nextBeta = 0;
  for (const std::string &name : names) {
    const ActivationInfo *info =
        llvm::find_if(kActivations, [&](const ActivationInfo &i) {
          return i.name.equals_insensitive(name);
        });
    if (info == std::end(kActivations)) {
      std::string supported;
      for (const ActivationInfo &i : kActivations)
        supported += (supported.empty() ? "" : ", ") + i.name.str();
      return "with activation '" + name + "' (supported: " + supported + ")";
    }
    Activation act{info->kind, info->alpha, info->beta};
    if (info->numParams >= 1 && nextAlpha < alphas.size())
      act.alpha = alphas[nextAlpha++];
    if (info->numParams >= 2 && nextBeta < betas.size())
      act.beta = betas[nextBeta++];
    attrs.activations.push_back(act);
  }

  if (findAttr(node, "clip")) {
    double clip = getAttrFloat(node, "clip", 0);
    if (!(clip > 0))
      return "with clip " + std::to_string(clip) +
             " (the threshold must be positive)";
    attrs.clip = clip;
  }
  attrs.inputForget = getAttrInt(node, "input_forget", 0) != 0;
  attrs.linearBeforeReset = getAttrInt(node, "linear_before_reset", 0) != 0;
  return std::nullopt;
}

/// The sequence axis of X and Y.
static int64_t getSeqAxis(const RecurrentAttrs &attrs) {
  return attrs.batchFirst ? 1 : 0;
}

std::optional<std::string>
onnx_import::getRecurrentUnsupportedReason(GraphImporter &imp,
                                           const NodeProto &node) {
  RecurrentAttrs attrs;
  if (auto reason = parseAttrs(node, attrs))
    return reason;
  if (!hasInput(node, 1) || !hasInput(node, 2))
    return std::string("without its W and R inputs");
  RankedTensorType x = imp.getType(node.input(0));
  if (x && x.getRank() != 3)
    return "on a rank-" + std::to_string(x.getRank()) +
           " input X (it takes [seq, batch, input] or, with layout 1, "
           "[batch, seq, input])";
  RankedTensorType w = imp.getType(node.input(1));
  RankedTensorType r = imp.getType(node.input(2));
  if (w && (w.getRank() != 3 || w.getDimSize(0) != attrs.numDirections))
    return std::string("with a W whose shape is not [num_directions, "
                       "gates * hidden_size, input_size]");
  if (r && (r.getRank() != 3 || r.getDimSize(0) != attrs.numDirections ||
            r.getDimSize(1) != attrs.numGates * r.getDimSize(2)))
    return std::string("with an R whose shape is not [num_directions, "
                       "gates * hidden_size, hidden_size]");
  int64_t hiddenSize = getAttrInt(node, "hidden_size", -1);
  if (r && hiddenSize >= 0 && hiddenSize != r.getDimSize(2))
    return "with hidden_size " + std::to_string(hiddenSize) +
           " but an R of hidden size " + std::to_string(r.getDimSize(2));
  if (hasInput(node, 4)) {
    // "non-constant" lets a caller that knows the value bake it in (the
    // node-test runner does).
    const ConstTensor *lens = imp.getConst(node.input(4), true);
    if (!lens)
      return std::string("with non-constant sequence_lens (only a constant "
                         "sequence_lens equal to the sequence length is "
                         "supported: the unrolled steps are fixed at import)");
    int64_t seqLen = x ? x.getDimSize(getSeqAxis(attrs)) : -1;
    for (int64_t i = 0, e = lens->numElements(); i < e && seqLen >= 0; ++i)
      if (lens->getInt(i) != seqLen) {
        std::string list;
        for (int64_t j = 0; j < e; ++j)
          list += (j ? ", " : "") + std::to_string(lens->getInt(j));
        return "with ragged sequence_lens [" + list +
               "] (only every length equal to the sequence length " +
               std::to_string(seqLen) +
               " is supported; pad the batch to one length)";
      }
  }
  return std::nullopt;
}

namespace {

/// Builds the unrolled ops of one recurrent node. A null Value stands for
/// a tensor of zeros (the state before the first step when there is no
/// initial state, a missing bias): the helpers leave out what it zeroes.
class RecurrentBuilder {
public:
  RecurrentBuilder(GraphImporter &imp, const NodeProto &node,
                   const RecurrentAttrs &attrs)
      : imp(imp), node(node), attrs(attrs), nodeLoc(imp.currentLoc) {}

  LogicalResult build();

private:
  GraphImporter &imp;
  const NodeProto &node;
  const RecurrentAttrs &attrs;
  Location nodeLoc;
  Type elementType;
  int64_t seqLen = 0, batch = 0, hiddenSize = 0;

  OpBuilder &b() { return imp.builder; }
  Location loc() { return imp.currentLoc; }
  /// Names the ops built next `<node>.<suffix>`.
  void setName(const Twine &suffix);

  RankedTensorType typeOf(Value v) {
    return cast<RankedTensorType>(v.getType());
  }
  Value slice(Value v, ArrayRef<int64_t> starts, ArrayRef<int64_t> sizes);
  /// Columns [begin, begin + size) of the last dim.
  Value sliceLast(Value v, int64_t begin, int64_t size);
  /// Rows [begin, begin + size) of direction `d` of a [D, N, ...] tensor,
  /// as [size, ...]: the whole tensor reshaped when that is all of it, else
  /// a slice of its whole-weight view.
  Value directionPart(Value v, int64_t d, int64_t begin, int64_t size);
  Value add(Value lhs, Value rhs);
  Value sub(Value lhs, Value rhs);
  Value mul(Value lhs, Value rhs);
  /// A scalar constant, one per value for the whole node.
  Value scalar(double value);
  std::map<double, Value> scalars;
  /// act(v), v first clipped to [-clip, clip] when the node has clip.
  Value activate(Value v, const Activation &act);
  /// h R^T + rb, where h or rb may be zero (null).
  Value recurrent(Value h, Value r, Value rb);
  /// The [B, H] state of direction `d` in an initial_h/initial_c input, or
  /// null when it is absent or a constant of zeros.
  FailureOr<Value> initialState(int i, int64_t d);

  /// Runs direction `d`: the H of every step in time order, the last C.
  LogicalResult runDirection(int64_t d, Value x, Value w, Value r, Value bias,
                             Value peepholes, SmallVectorImpl<Value> &hs,
                             Value &lastC);
};

} // namespace

void RecurrentBuilder::setName(const Twine &suffix) {
  auto name = cast<NameLoc>(nodeLoc).getName().str();
  imp.currentLoc =
      NameLoc::get(StringAttr::get(imp.context, name + "." + suffix.str()),
                   imp.getFileLoc());
}

Value RecurrentBuilder::slice(Value v, ArrayRef<int64_t> starts,
                              ArrayRef<int64_t> sizes) {
  RankedTensorType type = typeOf(v);
  if (type.getShape() == sizes)
    return v;
  SmallVector<int64_t> steps(sizes.size(), 1);
  return g::SliceOp::create(b(), loc(), type.clone(sizes), v, starts, steps);
}

Value RecurrentBuilder::sliceLast(Value v, int64_t begin, int64_t size) {
  RankedTensorType type = typeOf(v);
  SmallVector<int64_t> starts(type.getRank(), 0), sizes(type.getShape());
  starts.back() = begin;
  sizes.back() = size;
  return slice(v, starts, sizes);
}

Value RecurrentBuilder::directionPart(Value v, int64_t d, int64_t begin,
                                      int64_t size) {
  RankedTensorType type = typeOf(v);
  SmallVector<int64_t> starts(type.getRank(), 0), sizes(type.getShape());
  starts[0] = d;
  sizes[0] = 1;
  starts[1] = begin;
  sizes[1] = size;
  SmallVector<int64_t> partShape(ArrayRef<int64_t>(sizes).drop_front());
  if (sizes == type.getShape())
    return reshape(imp, v, partShape);
  return reshape(imp, slice(imp.getWholeWeightView(v), starts, sizes),
                 partShape);
}

Value RecurrentBuilder::scalar(double value) {
  Value &result = scalars[value];
  if (!result)
    result = imp.createScalar(value, elementType);
  return result;
}

Value RecurrentBuilder::add(Value lhs, Value rhs) {
  if (!lhs || !rhs)
    return lhs ? lhs : rhs;
  auto shape = broadcastShape(typeOf(lhs).getShape(), typeOf(rhs).getShape());
  return g::AddOp::create(b(), loc(), typeOf(lhs).clone(shape), lhs, rhs);
}

Value RecurrentBuilder::sub(Value lhs, Value rhs) {
  auto shape = broadcastShape(typeOf(lhs).getShape(), typeOf(rhs).getShape());
  return g::SubOp::create(b(), loc(), typeOf(rhs).clone(shape), lhs, rhs);
}

Value RecurrentBuilder::mul(Value lhs, Value rhs) {
  if (!lhs || !rhs)
    return Value();
  auto shape = broadcastShape(typeOf(lhs).getShape(), typeOf(rhs).getShape());
  return g::MulOp::create(b(), loc(), typeOf(lhs).clone(shape), lhs, rhs);
}

Value RecurrentBuilder::activate(Value v, const Activation &act) {
  RankedTensorType type = typeOf(v);
  if (attrs.clip)
    v = g::ClipOp::create(b(), loc(), type, v,
                          b().getF64FloatAttr(-*attrs.clip),
                          b().getF64FloatAttr(*attrs.clip));
  auto alpha = b().getF64FloatAttr(act.alpha);
  switch (act.kind) {
  case Activation::Sigmoid:
    return g::SigmoidOp::create(b(), loc(), type, ValueRange{v});
  case Activation::Tanh:
    return g::TanhOp::create(b(), loc(), type, ValueRange{v});
  case Activation::Relu:
    return g::ReluOp::create(b(), loc(), type, ValueRange{v});
  case Activation::Softplus:
    return g::SoftplusOp::create(b(), loc(), type, ValueRange{v});
  case Activation::LeakyRelu: {
    auto op = g::LeakyReluOp::create(b(), loc(), type, ValueRange{v});
    op->setAttr("alpha", alpha);
    return op;
  }
  case Activation::Elu: {
    auto op = g::EluOp::create(b(), loc(), type, ValueRange{v});
    op->setAttr("alpha", alpha);
    return op;
  }
  case Activation::HardSigmoid: {
    auto op = g::HardSigmoidOp::create(b(), loc(), type, ValueRange{v});
    op->setAttr("alpha", alpha);
    op->setAttr("beta", b().getF64FloatAttr(act.beta));
    return op;
  }
  case Activation::Softsign: { // x / (1 + |x|)
    Value abs = g::AbsOp::create(b(), loc(), type, ValueRange{v});
    return g::DivOp::create(b(), loc(), type, v, add(abs, scalar(1.0)));
  }
  case Activation::Affine: // alpha * x + beta
    return add(mul(v, scalar(act.alpha)), scalar(act.beta));
  case Activation::ScaledTanh: { // alpha * tanh(beta * x)
    Value t = g::TanhOp::create(b(), loc(), type,
                                ValueRange{mul(v, scalar(act.beta))});
    return mul(t, scalar(act.alpha));
  }
  }
  llvm_unreachable("unknown activation");
}

Value RecurrentBuilder::recurrent(Value h, Value r, Value rb) {
  if (!h)
    return rb;
  auto type = typeOf(h).clone({batch, typeOf(r).getDimSize(0)});
  return g::LinearOp::create(b(), loc(), type, h, r, rb,
                             /*transpose_weight=*/true);
}

FailureOr<Value> RecurrentBuilder::initialState(int i, int64_t d) {
  if (!hasInput(node, i))
    return Value();
  StringRef name = node.input(i);
  if (imp.initializers.count(name)) {
    const ConstTensor *c = imp.getConst(name, /*attributeLike=*/true);
    if (c && llvm::all_of(c->floats, [](double v) { return v == 0.0; }))
      return Value();
  }
  FailureOr<Value> state = imp.getValue(name);
  if (failed(state))
    return failure();
  // [D, B, H], or [B, D, H] with layout 1.
  int64_t dirAxis = attrs.batchFirst ? 1 : 0;
  RankedTensorType type = typeOf(*state);
  SmallVector<int64_t> starts(3, 0), sizes(type.getShape());
  starts[dirAxis] = d;
  sizes[dirAxis] = 1;
  Value part = *state;
  if (sizes != type.getShape())
    part = slice(imp.getWholeWeightView(part), starts, sizes);
  return reshape(imp, part, {batch, hiddenSize});
}

LogicalResult RecurrentBuilder::runDirection(int64_t d, Value x, Value w,
                                             Value r, Value bias,
                                             Value peepholes,
                                             SmallVectorImpl<Value> &hs,
                                             Value &lastC) {
  bool reverse = attrs.reverse || d == 1;
  std::string dir = reverse ? "reverse" : "forward";
  int64_t hs1 = hiddenSize, gatesSize = attrs.numGates * hiddenSize;
  size_t numActs = attrs.activations.size() / attrs.numDirections;
  ArrayRef<Activation> acts =
      ArrayRef(attrs.activations).slice(d * numActs, numActs);

  setName(dir + ".weights");
  Value wd = directionPart(w, d, 0, gatesSize);
  Value wb, rb;
  if (bias) {
    wb = directionPart(bias, d, 0, gatesSize);
    rb = directionPart(bias, d, gatesSize, gatesSize);
  }
  // GRU without linear_before_reset multiplies H by r before its matmul with
  // R's h part: R splits into [z r] and h.
  bool splitR = attrs.kind == CellKind::GRU && !attrs.linearBeforeReset;
  Value rd, rdH, rbH;
  if (splitR) {
    rd = directionPart(r, d, 0, 2 * hs1);
    rdH = directionPart(r, d, 2 * hs1, hs1);
    if (rb) {
      rbH = sliceLast(rb, 2 * hs1, hs1);
      rb = sliceLast(rb, 0, 2 * hs1);
    }
  } else {
    rd = directionPart(r, d, 0, gatesSize);
  }
  Value pi, po, pf;
  if (peepholes) {
    pi = directionPart(peepholes, d, 0, hs1);
    po = directionPart(peepholes, d, hs1, hs1);
    pf = directionPart(peepholes, d, 2 * hs1, hs1);
  }
  setName(dir + ".initial_state");
  FailureOr<Value> h = initialState(5, d);
  FailureOr<Value> c = initialState(6, d);
  if (failed(h) || failed(c))
    return failure();

  setName(dir + ".input_proj");
  RankedTensorType xType = typeOf(x);
  SmallVector<int64_t> xwShape(xType.getShape());
  xwShape.back() = gatesSize;
  Value xw = g::LinearOp::create(b(), loc(), xType.clone(xwShape), x, wd, wb,
                                 /*transpose_weight=*/true);

  int64_t seqAxis = getSeqAxis(attrs);
  hs.assign(seqLen, Value());
  for (int64_t step = 0; step < seqLen; ++step) {
    int64_t t = reverse ? seqLen - 1 - step : step;
    setName(dir + ".t" + Twine(t));
    SmallVector<int64_t> starts(3, 0), sizes(xwShape);
    starts[seqAxis] = t;
    sizes[seqAxis] = 1;
    Value xt = reshape(imp, slice(xw, starts, sizes), {batch, gatesSize});
    Value hPrev = *h, cPrev = *c;
    Value hNext;
    switch (attrs.kind) {
    case CellKind::RNN: {
      hNext = activate(add(xt, recurrent(hPrev, rd, rb)), acts[0]);
      break;
    }
    case CellKind::GRU: {
      Value z, reset, rh;
      if (splitR) {
        // h = g(x W_h^T + (r * H) R_h^T + Rb_h + Wb_h)
        Value zr = add(sliceLast(xt, 0, 2 * hs1), recurrent(hPrev, rd, rb));
        z = activate(sliceLast(zr, 0, hs1), acts[0]);
        reset = activate(sliceLast(zr, hs1, hs1), acts[0]);
        rh = recurrent(mul(reset, hPrev), rdH, rbH);
      } else {
        // h = g(x W_h^T + r * (H R_h^T + Rb_h) + Wb_h): one matmul for all
        // gates; rec is [B, 3H], or Rb's [3H], or zero before the first
        // step.
        Value rec = recurrent(hPrev, rd, rb);
        Value zr = add(sliceLast(xt, 0, 2 * hs1),
                       rec ? sliceLast(rec, 0, 2 * hs1) : Value());
        z = activate(sliceLast(zr, 0, hs1), acts[0]);
        reset = activate(sliceLast(zr, hs1, hs1), acts[0]);
        rh = rec ? mul(reset, sliceLast(rec, 2 * hs1, hs1)) : Value();
      }
      Value hIn = sliceLast(xt, 2 * hs1, hs1);
      Value candidate = activate(add(hIn, rh), acts[1]);
      // H = (1 - z) * candidate + z * H_prev
      hNext = add(mul(sub(scalar(1.0), z), candidate), mul(z, hPrev));
      break;
    }
    case CellKind::LSTM: {
      Value gates = add(xt, recurrent(hPrev, rd, rb));
      Value i = add(sliceLast(gates, 0, hs1), mul(pi, cPrev));
      i = activate(i, acts[0]);
      Value f;
      if (attrs.inputForget) {
        f = sub(scalar(1.0), i);
      } else {
        f = add(sliceLast(gates, 2 * hs1, hs1), mul(pf, cPrev));
        f = activate(f, acts[0]);
      }
      Value cell = activate(sliceLast(gates, 3 * hs1, hs1), acts[1]);
      Value cNext = add(mul(f, cPrev), mul(i, cell));
      Value o = add(sliceLast(gates, hs1, hs1), mul(po, cNext));
      o = activate(o, acts[0]);
      hNext = mul(o, activate(cNext, acts[2]));
      *c = cNext;
      break;
    }
    }
    *h = hNext;
    hs[t] = hNext;
  }
  lastC = *c;
  return success();
}

LogicalResult RecurrentBuilder::build() {
  RankedTensorType xType = imp.getType(node.input(0));
  elementType = xType.getElementType();
  int64_t seqAxis = getSeqAxis(attrs);
  seqLen = xType.getDimSize(seqAxis);
  batch = xType.getDimSize(1 - seqAxis);
  RankedTensorType rType = imp.getType(node.input(2));
  hiddenSize = rType.getDimSize(2);

  auto input = [&](int i) -> FailureOr<Value> {
    if (!hasInput(node, i))
      return Value();
    FailureOr<Value> v = imp.getValue(node.input(i));
    if (failed(v))
      return failure();
    auto type = cast<RankedTensorType>(v->getType());
    if (type.getElementType() == elementType)
      return *v;
    return g::CastOp::create(b(), loc(), type.clone(elementType), *v)
        .getResult();
  };
  FailureOr<Value> x = input(0), w = input(1), r = input(2), bias = input(3),
                   peepholes = input(7);
  if (failed(x) || failed(w) || failed(r) || failed(bias) || failed(peepholes))
    return failure();
  if (attrs.kind != CellKind::LSTM)
    *peepholes = Value();

  SmallVector<SmallVector<Value>> hs(attrs.numDirections);
  SmallVector<Value> lastC(attrs.numDirections);
  for (int64_t d = 0; d < attrs.numDirections; ++d)
    if (failed(runDirection(d, *x, *w, *r, *bias, *peepholes, hs[d], lastC[d])))
      return failure();

  // Y: [S, D, B, H], or [B, S, D, H] with layout 1.
  auto concat = [&](ArrayRef<Value> parts, int64_t axis) -> Value {
    if (parts.size() == 1)
      return parts[0];
    RankedTensorType type = typeOf(parts[0]);
    SmallVector<int64_t> shape(type.getShape());
    shape[axis] = 0;
    for (Value p : parts)
      shape[axis] += typeOf(p).getDimSize(axis);
    return g::ConcatOp::create(b(), loc(), type.clone(shape), parts,
                               b().getI64IntegerAttr(axis));
  };
  setName("outputs");
  if (isOutputUsed(imp, node, 0)) {
    SmallVector<Value> directions;
    for (int64_t d = 0; d < attrs.numDirections; ++d) {
      SmallVector<int64_t> stepShape =
          attrs.batchFirst ? SmallVector<int64_t>{batch, 1, 1, hiddenSize}
                           : SmallVector<int64_t>{1, 1, batch, hiddenSize};
      SmallVector<Value> steps;
      for (Value h : hs[d])
        steps.push_back(reshape(imp, h, stepShape));
      directions.push_back(concat(steps, seqAxis));
    }
    imp.setValue(node.output(0), concat(directions, attrs.batchFirst ? 2 : 1));
  }
  // Y_h and Y_c: [D, B, H], or [B, D, H] with layout 1.
  auto lastStates = [&](auto stateOf) {
    SmallVector<int64_t> stateShape =
        attrs.batchFirst ? SmallVector<int64_t>{batch, 1, hiddenSize}
                         : SmallVector<int64_t>{1, batch, hiddenSize};
    SmallVector<Value> parts;
    for (int64_t d = 0; d < attrs.numDirections; ++d)
      parts.push_back(reshape(imp, stateOf(d), stateShape));
    return concat(parts, attrs.batchFirst ? 1 : 0);
  };
  if (isOutputUsed(imp, node, 1))
    imp.setValue(node.output(1), lastStates([&](int64_t d) {
                   // The state after the last step: t = S-1 forward, t = 0
                   // reverse.
                   bool reverse = attrs.reverse || d == 1;
                   return hs[d][reverse ? 0 : seqLen - 1];
                 }));
  if (attrs.kind == CellKind::LSTM && isOutputUsed(imp, node, 2))
    imp.setValue(node.output(2),
                 lastStates([&](int64_t d) { return lastC[d]; }));
  imp.currentLoc = nodeLoc;
  return success();
}

LogicalResult onnx_import::convertRecurrent(GraphImporter &imp,
                                            const NodeProto &node) {
  RecurrentAttrs attrs;
  if (auto reason = parseAttrs(node, attrs))
    return emitError(imp.currentLoc)
           << "unsupported '" << node.op_type() << "' " << *reason;
  return RecurrentBuilder(imp, node, attrs).build();
}
