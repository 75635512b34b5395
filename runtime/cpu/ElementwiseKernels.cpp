//===- ElementwiseKernels.cpp - unary, binary, dropout, cast, broadcast ---===//
//
// Every op here is elementwise over its result with numpy broadcasting: an
// operand is aligned at the trailing dim and a size-1 dim is read at index 0
// for every result index. A partition computes its output box; a broadcast
// operand's gradient is summed over the broadcast positions of that box (the
// plan sums the partials of the partitions).
//
//===----------------------------------------------------------------------===//

#include "KernelHelpers.h"
#include "KernelRegistry.h"

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace ppc::runtime::cpu {
namespace {

using Offsets2 = std::array<int64_t, 2>;
using Offsets3 = std::array<int64_t, 3>;
using Offsets4 = std::array<int64_t, 4>;
using Offsets5 = std::array<int64_t, 5>;

/// Numpy broadcasting of a view of global `shape` against the iteration
/// dims: aligned at the trailing dim, a size-1 dim is read at index 0.
std::vector<DimMap> broadcastMaps(const std::vector<int64_t> &shape,
                                  size_t iterRank) {
  size_t lead = iterRank - shape.size();
  std::vector<DimMap> maps;
  for (size_t i = 0; i < shape.size(); ++i)
    maps.push_back(shape[i] == 1
                       ? DimMap::fixed(0)
                       : DimMap::identity(static_cast<int64_t>(lead + i)));
  return maps;
}

/// A view with the name errors give it ("lhs", "output gradient").
struct NamedView {
  const char *name;
  const TensorView *view;
};

/// Accesses of `views` from the iteration box of `box` (the output view, or
/// the output gradient in backward), each with numpy broadcasting.
KernelStatus broadcastAccesses(const OpDesc &op, const TensorView &box,
                               const std::vector<NamedView> &views,
                               std::vector<StridedAccess> &accesses) {
  for (const NamedView &named : views) {
    const TensorView &view = *named.view;
    std::optional<StridedAccess> access;
    if (view.rank() <= box.rank())
      access = stridedAccess(view, box.lo, box.hi,
                             broadcastMaps(view.shape, box.lo.size()));
    if (!access)
      return op.kind + ": the " + named.name +
             " view does not hold what the output box reads";
    accesses.push_back(*access);
  }
  return {};
}

//===----------------------------------------------------------------------===//
// Unary ops: value(x) and derivative(x, y) with y = value(x)
//===----------------------------------------------------------------------===//

/// Base of the unary functors: a non-empty `error` rejects the attributes.
struct UnaryFn {
  KernelStatus error;
};

float sigmoidOf(float x) {
  if (x >= 0)
    return 1.0f / (1.0f + std::exp(-x));
  float e = std::exp(x);
  return e / (1.0f + e);
}

struct Relu : UnaryFn {
  explicit Relu(const OpDesc &) {}
  float value(float x) const { return x > 0 ? x : 0.0f; }
  float derivative(float x, float) const { return x > 0 ? 1.0f : 0.0f; }
};

struct LeakyRelu : UnaryFn {
  float alpha;
  explicit LeakyRelu(const OpDesc &op)
      : alpha(static_cast<float>(op.getFloat("alpha", 0.01))) {}
  float value(float x) const { return x < 0 ? alpha * x : x; }
  float derivative(float x, float) const { return x < 0 ? alpha : 1.0f; }
};

/// ppc.gelu's approximation, as its keyword or, as the plan file exports
/// an I32EnumAttr, as its value (none = 0, tanh = 1); `error` says what is
/// wrong with another one.
std::string geluApproximation(const OpDesc &op, KernelStatus &error) {
  std::string approximation = op.getString("approximation", "none");
  auto it = op.attributes.find("approximation");
  if (it != op.attributes.end())
    if (const int64_t *value = std::get_if<int64_t>(&it->second))
      approximation = *value == 0   ? "none"
                      : *value == 1 ? "tanh"
                                    : std::to_string(*value);
  if (approximation != "none" && approximation != "tanh")
    error = op.kind + ": unknown approximation '" + approximation +
            "'; expected 'none' or 'tanh' (0 or 1)";
  return approximation;
}

/// The exact gelu, x/2 (1 + erf(x / sqrt 2)), in branch-free arithmetic
/// that vectorizes (one functor per approximation: a loop that tests which
/// one per element does not).
struct GeluErf : UnaryFn {
  static constexpr float kSqrtHalf = 0.70710678118654752f;
  static constexpr float kInvSqrt2Pi = 0.39894228040143268f;
  explicit GeluErf(const OpDesc &) {}
  /// 1 + erf(x / sqrt 2), as erfc where erf is near -1.
  static float onePlusErf(float x) {
    const float e = erfcNonNegative(std::fabs(x) * kSqrtHalf);
    return x < 0 ? e : 2.0f - e;
  }
  float value(float x) const { return 0.5f * x * onePlusErf(x); }
  float derivative(float x, float) const {
    return 0.5f * onePlusErf(x) + x * kInvSqrt2Pi * softmaxExp(-0.5f * x * x);
  }
};

/// gelu's tanh approximation.
struct GeluTanh : UnaryFn {
  static constexpr float kSqrt2OverPi = 0.79788456080286536f;
  static constexpr float kCubic = 0.044715f;
  explicit GeluTanh(const OpDesc &) {}
  float value(float x) const {
    return 0.5f * x *
           (1.0f + std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x)));
  }
  float derivative(float x, float) const {
    float t = std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrt2OverPi *
                                   (1.0f + 3.0f * kCubic * x * x);
  }
};

struct Sigmoid : UnaryFn {
  explicit Sigmoid(const OpDesc &) {}
  float value(float x) const { return sigmoidOf(x); }
  float derivative(float, float y) const { return y * (1.0f - y); }
};

struct Tanh : UnaryFn {
  explicit Tanh(const OpDesc &) {}
  float value(float x) const { return std::tanh(x); }
  float derivative(float, float y) const { return 1.0f - y * y; }
};

/// Missing bounds are infinite. The gradient passes where min <= x <= max.
struct Clip : UnaryFn {
  float lo, hi;
  explicit Clip(const OpDesc &op)
      : lo(static_cast<float>(op.getFloat("min", -INFINITY))),
        hi(static_cast<float>(op.getFloat("max", INFINITY))) {}
  // Comparisons, not fmin/fmax: a NaN stays NaN (as numpy's clip), and the
  // loop vectorizes.
  float value(float x) const { return x < lo ? lo : (x > hi ? hi : x); }
  float derivative(float x, float) const {
    return x >= lo && x <= hi ? 1.0f : 0.0f;
  }
};

struct Sqrt : UnaryFn {
  explicit Sqrt(const OpDesc &) {}
  float value(float x) const { return std::sqrt(x); }
  float derivative(float, float y) const { return 0.5f / y; }
};

struct Rsqrt : UnaryFn {
  explicit Rsqrt(const OpDesc &) {}
  float value(float x) const { return 1.0f / std::sqrt(x); }
  float derivative(float, float y) const { return -0.5f * y * y * y; }
};

struct Exp : UnaryFn {
  explicit Exp(const OpDesc &) {}
  float value(float x) const { return std::exp(x); }
  float derivative(float, float y) const { return y; }
};

struct Log : UnaryFn {
  explicit Log(const OpDesc &) {}
  float value(float x) const { return std::log(x); }
  float derivative(float x, float) const { return 1.0f / x; }
};

struct Erf : UnaryFn {
  static constexpr float kTwoOverSqrtPi = 1.12837916709551257f;
  explicit Erf(const OpDesc &) {}
  float value(float x) const { return std::erf(x); }
  float derivative(float x, float) const {
    return kTwoOverSqrtPi * std::exp(-x * x);
  }
};

struct Neg : UnaryFn {
  explicit Neg(const OpDesc &) {}
  float value(float x) const { return -x; }
  float derivative(float, float) const { return -1.0f; }
};

struct Abs : UnaryFn {
  explicit Abs(const OpDesc &) {}
  float value(float x) const { return std::fabs(x); }
  float derivative(float x, float) const {
    return x > 0 ? 1.0f : x < 0 ? -1.0f : 0.0f;
  }
};

struct Reciprocal : UnaryFn {
  explicit Reciprocal(const OpDesc &) {}
  float value(float x) const { return 1.0f / x; }
  float derivative(float, float y) const { return -y * y; }
};

struct Silu : UnaryFn {
  explicit Silu(const OpDesc &) {}
  float value(float x) const { return x * sigmoidOf(x); }
  float derivative(float x, float) const {
    float s = sigmoidOf(x);
    return s * (1.0f + x * (1.0f - s));
  }
};

/// Rounds to the nearest float16 (ties to even), as a float.
float roundToHalf(float x) {
  if (!std::isfinite(x))
    return x;
  float magnitude = std::fabs(x);
  if (magnitude >= 65520.0f) // rounds past the largest half, 65504
    return std::copysign(INFINITY, x);
  // Below 2^-14 halves are subnormal with a fixed step of 2^-24.
  int exponent = magnitude < 0x1.0p-14f ? -14 : std::ilogb(magnitude);
  float step = std::ldexp(1.0f, exponent - 10);
  return std::copysign(std::nearbyint(magnitude / step) * step, x);
}

/// Rounds to the nearest bfloat16 (ties to even): the top 16 bits.
float roundToBFloat16(float x) {
  if (std::isnan(x))
    return x;
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  bits += 0x7fffu + ((bits >> 16) & 1u);
  bits &= 0xffff0000u;
  std::memcpy(&x, &bits, sizeof(bits));
  return x;
}

/// The result element type comes as the string attribute `to` ("f32",
/// "i64", "i1"...). Values stay floats: f16 and bf16 round to their
/// precision, other float types keep them, an integer type truncates toward
/// zero, i1 is x != 0. Only a float result passes a gradient.
struct Cast : UnaryFn {
  enum class Target { Float, Half, BFloat16, Bool, Integer };
  Target target = Target::Float;

  explicit Cast(const OpDesc &op) {
    std::string to = op.getString("to", "f32");
    if (to == "i1")
      target = Target::Bool;
    else if (to == "f16")
      target = Target::Half;
    else if (to == "bf16")
      target = Target::BFloat16;
    else if (isIntegerType(to))
      target = Target::Integer;
    else if (!isFloatType(to))
      error = op.kind + ": unknown target type '" + to + "'";
  }
  float value(float x) const {
    switch (target) {
    case Target::Float:
      return x;
    case Target::Half:
      return roundToHalf(x);
    case Target::BFloat16:
      return roundToBFloat16(x);
    case Target::Bool:
      return x != 0 ? 1.0f : 0.0f;
    case Target::Integer:
      return std::trunc(x);
    }
    return x;
  }
  float derivative(float, float) const {
    return target == Target::Bool || target == Target::Integer ? 0.0f : 1.0f;
  }

private:
  /// f16, bf16, f32, f64, tf32, f8E4M3FN...
  static bool isFloatType(const std::string &type) {
    size_t letter =
        type.rfind("bf", 0) == 0 || type.rfind("tf", 0) == 0 ? 1 : 0;
    return type.size() > letter + 1 && type[letter] == 'f' &&
           std::isdigit(static_cast<unsigned char>(type[letter + 1]));
  }
  /// i8, si32, ui64, index...
  static bool isIntegerType(const std::string &type) {
    if (type == "index")
      return true;
    size_t digits = type.rfind("si", 0) == 0 || type.rfind("ui", 0) == 0 ? 2
                    : type.rfind('i', 0) == 0                            ? 1
                                                                         : 0;
    return digits != 0 && type.size() > digits &&
           type.find_first_not_of("0123456789", digits) == std::string::npos;
  }
};

template <typename Fn>
KernelStatus unaryForward(const OpDesc &op,
                          const std::vector<TensorView> &inputs,
                          std::vector<TensorView> &outputs) {
  Fn fn(op);
  if (!fn.error.empty())
    return fn.error;
  if (KernelStatus s =
          expectArity(op, "views", inputs.size(), 1, outputs.size(), 1);
      !s.empty())
    return s;
  const TensorView &x = inputs[0];
  TensorView &y = outputs[0];
  if (x.shape == y.shape && sameBox(x, y)) {
    int64_t n = y.numElements();
    unaryValues(fn, x.data, y.data, n);
    return {};
  }
  std::vector<StridedAccess> a;
  if (KernelStatus s =
          broadcastAccesses(op, y, {{"input", &x}, {"output", &y}}, a);
      !s.empty())
    return s;
  walkStrided<2>(extentsOf(y.lo, y.hi), {a[0], a[1]}, [&](const Offsets2 &o) {
    y.data[o[1]] = fn.value(x.data[o[0]]);
  });
  return {};
}

/// y = f(x) over n contiguous elements.
template <typename Fn>
PPC_VECTOR_CLONES void unaryValues(const Fn &fn, const float *x, float *y,
                                   int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = fn.value(x[i]);
}

/// dx += dy * f'(x, y) over n contiguous elements; without y (the plan
/// keeps none when the backward reads none) from y = f(x).
template <typename Fn>
PPC_VECTOR_CLONES void unaryGradients(const Fn &fn, const float *x,
                                      const float *y, const float *dy,
                                      float *dx, int64_t n) {
  if (y)
    for (int64_t i = 0; i < n; ++i)
      dx[i] += dy[i] * fn.derivative(x[i], y[i]);
  else
    for (int64_t i = 0; i < n; ++i)
      dx[i] += dy[i] * fn.derivative(x[i], fn.value(x[i]));
}

/// dx += dy * f'(x).
template <typename Fn>
KernelStatus unaryBackward(const OpDesc &op,
                           const std::vector<TensorView> &inputs,
                           const std::vector<TensorView> &outputs,
                           const std::vector<TensorView> &outputGrads,
                           std::vector<TensorView> &inputGrads) {
  Fn fn(op);
  if (!fn.error.empty())
    return fn.error;
  if (KernelStatus s =
          expectArity(op, "views", inputs.size(), 1, outputs.size(), 1);
      !s.empty())
    return s;
  if (KernelStatus s = expectArity(op, "gradient views", inputGrads.size(), 1,
                                   outputGrads.size(), 1);
      !s.empty())
    return s;
  TensorView &dx = inputGrads[0];
  if (!dx.data)
    return {};
  const TensorView &x = inputs[0], &y = outputs[0], &dy = outputGrads[0];
  if (x.shape == dy.shape && sameBox(x, dy) && sameBox(dx, dy)) {
    // The plan keeps no result for a backward that reads none (relu,
    // clip): such derivatives ignore y, and the others get it recomputed.
    if (!y.data || sameBox(y, dy)) {
      unaryGradients(fn, x.data, y.data, dy.data, dx.data, dy.numElements());
      return {};
    }
  }
  std::vector<StridedAccess> a;
  if (KernelStatus s = broadcastAccesses(op, dy,
                                         {{"input", &x},
                                          {"output", &y},
                                          {"output gradient", &dy},
                                          {"input gradient", &dx}},
                                         a);
      !s.empty())
    return s;
  walkStrided<4>(extentsOf(dy.lo, dy.hi), {a[0], a[1], a[2], a[3]},
                 [&](const Offsets4 &o) {
                   dx.data[o[3]] += dy.data[o[2]] *
                                    fn.derivative(x.data[o[0]], y.data[o[1]]);
                 });
  return {};
}

/// ppc.gelu: the functor of its approximation.
KernelImpl geluKernel() {
  KernelImpl impl;
  impl.forward = [](const OpDesc &op, const KernelContext &,
                    const std::vector<TensorView> &inputs,
                    std::vector<TensorView> &outputs,
                    std::vector<TensorView> &) -> KernelStatus {
    KernelStatus error;
    const std::string approximation = geluApproximation(op, error);
    if (!error.empty())
      return error;
    return approximation == "tanh" ? unaryForward<GeluTanh>(op, inputs, outputs)
                                   : unaryForward<GeluErf>(op, inputs, outputs);
  };
  impl.backward = [](const OpDesc &op, const KernelContext &,
                     const std::vector<TensorView> &inputs,
                     const std::vector<TensorView> &outputs,
                     const std::vector<TensorView> &outputGrads,
                     std::vector<TensorView> &inputGrads,
                     std::vector<TensorView> &) -> KernelStatus {
    KernelStatus error;
    const std::string approximation = geluApproximation(op, error);
    if (!error.empty())
      return error;
    return approximation == "tanh"
               ? unaryBackward<GeluTanh>(op, inputs, outputs, outputGrads,
                                         inputGrads)
               : unaryBackward<GeluErf>(op, inputs, outputs, outputGrads,
                                        inputGrads);
  };
  return impl;
}

template <typename Fn> KernelImpl unaryKernel() {
  KernelImpl impl;
  impl.forward = [](const OpDesc &op, const KernelContext &,
                    const std::vector<TensorView> &inputs,
                    std::vector<TensorView> &outputs,
                    std::vector<TensorView> &) {
    return unaryForward<Fn>(op, inputs, outputs);
  };
  impl.backward = [](const OpDesc &op, const KernelContext &,
                     const std::vector<TensorView> &inputs,
                     const std::vector<TensorView> &outputs,
                     const std::vector<TensorView> &outputGrads,
                     std::vector<TensorView> &inputGrads,
                     std::vector<TensorView> &) {
    return unaryBackward<Fn>(op, inputs, outputs, outputGrads, inputGrads);
  };
  return impl;
}

//===----------------------------------------------------------------------===//
// Binary ops: value(l, r) and the partial derivatives given y = value(l, r)
//===----------------------------------------------------------------------===//

struct Add {
  float value(float l, float r) const { return l + r; }
  float dLhs(float, float, float) const { return 1.0f; }
  float dRhs(float, float, float) const { return 1.0f; }
};

struct Sub {
  float value(float l, float r) const { return l - r; }
  float dLhs(float, float, float) const { return 1.0f; }
  float dRhs(float, float, float) const { return -1.0f; }
};

struct Mul {
  float value(float l, float r) const { return l * r; }
  float dLhs(float, float r, float) const { return r; }
  float dRhs(float l, float, float) const { return l; }
};

struct Div {
  float value(float l, float r) const { return l / r; }
  float dLhs(float, float r, float) const { return 1.0f / r; }
  float dRhs(float, float r, float y) const { return -y / r; }
};

/// As in PyTorch, the lhs gradient is 0 where r == 0 (0^0 would give NaN);
/// the rhs gradient is 0 where l <= 0, where log(l) is not real.
struct Pow {
  float value(float l, float r) const { return std::pow(l, r); }
  float dLhs(float l, float r, float) const {
    return r == 0 ? 0.0f : r * std::pow(l, r - 1.0f);
  }
  float dRhs(float l, float, float y) const {
    return l > 0 ? y * std::log(l) : 0.0f;
  }
};

/// Ties split the gradient evenly, as in PyTorch.
struct Max {
  float value(float l, float r) const { return l >= r ? l : r; }
  float dLhs(float l, float r, float) const {
    return l > r ? 1.0f : l == r ? 0.5f : 0.0f;
  }
  float dRhs(float l, float r, float) const {
    return r > l ? 1.0f : l == r ? 0.5f : 0.0f;
  }
};

struct Min {
  float value(float l, float r) const { return l <= r ? l : r; }
  float dLhs(float l, float r, float) const {
    return l < r ? 1.0f : l == r ? 0.5f : 0.0f;
  }
  float dRhs(float l, float r, float) const {
    return r < l ? 1.0f : l == r ? 0.5f : 0.0f;
  }
};

template <typename Fn>
KernelStatus binaryForward(const OpDesc &op,
                           const std::vector<TensorView> &inputs,
                           std::vector<TensorView> &outputs) {
  if (KernelStatus s =
          expectArity(op, "views", inputs.size(), 2, outputs.size(), 1);
      !s.empty())
    return s;
  Fn fn;
  const TensorView &l = inputs[0], &r = inputs[1];
  TensorView &y = outputs[0];
  if (l.shape == y.shape && r.shape == y.shape && sameBox(l, y) &&
      sameBox(r, y)) {
    int64_t n = y.numElements();
    for (int64_t i = 0; i < n; ++i)
      y.data[i] = fn.value(l.data[i], r.data[i]);
    return {};
  }
  std::vector<StridedAccess> a;
  if (KernelStatus s = broadcastAccesses(
          op, y, {{"lhs", &l}, {"rhs", &r}, {"output", &y}}, a);
      !s.empty())
    return s;
  walkStrided<3>(extentsOf(y.lo, y.hi), {a[0], a[1], a[2]},
                 [&](const Offsets3 &o) {
                   y.data[o[2]] = fn.value(l.data[o[0]], r.data[o[1]]);
                 });
  return {};
}

/// Adds dy * d(value)/d(operand) into `grad`, the gradient of operand
/// `which` (0: lhs, 1: rhs); a broadcast operand sums over the box.
template <typename Fn>
KernelStatus binaryGrad(const OpDesc &op, int which, const TensorView &l,
                        const TensorView &r, const TensorView &y,
                        const TensorView &dy, TensorView &grad) {
  Fn fn;
  auto derivative = [&](float lv, float rv, float yv) {
    return which == 0 ? fn.dLhs(lv, rv, yv) : fn.dRhs(lv, rv, yv);
  };
  if (l.shape == dy.shape && r.shape == dy.shape && sameBox(l, dy) &&
      sameBox(r, dy) && sameBox(y, dy) && sameBox(grad, dy)) {
    int64_t n = dy.numElements();
    for (int64_t i = 0; i < n; ++i)
      grad.data[i] += dy.data[i] * derivative(l.data[i], r.data[i], y.data[i]);
    return {};
  }
  std::vector<StridedAccess> a;
  if (KernelStatus s = broadcastAccesses(
          op, dy,
          {{"lhs", &l},
           {"rhs", &r},
           {"output", &y},
           {"output gradient", &dy},
           {which == 0 ? "lhs gradient" : "rhs gradient", &grad}},
          a);
      !s.empty())
    return s;
  walkStrided<5>(extentsOf(dy.lo, dy.hi), {a[0], a[1], a[2], a[3], a[4]},
                 [&](const Offsets5 &o) {
                   grad.data[o[4]] +=
                       dy.data[o[3]] *
                       derivative(l.data[o[0]], r.data[o[1]], y.data[o[2]]);
                 });
  return {};
}

template <typename Fn>
KernelStatus binaryBackward(const OpDesc &op,
                            const std::vector<TensorView> &inputs,
                            const std::vector<TensorView> &outputs,
                            const std::vector<TensorView> &outputGrads,
                            std::vector<TensorView> &inputGrads) {
  if (KernelStatus s =
          expectArity(op, "views", inputs.size(), 2, outputs.size(), 1);
      !s.empty())
    return s;
  if (KernelStatus s = expectArity(op, "gradient views", inputGrads.size(), 2,
                                   outputGrads.size(), 1);
      !s.empty())
    return s;
  for (int which = 0; which < 2; ++which) {
    if (!inputGrads[which].data)
      continue;
    if (KernelStatus s =
            binaryGrad<Fn>(op, which, inputs[0], inputs[1], outputs[0],
                           outputGrads[0], inputGrads[which]);
        !s.empty())
      return s;
  }
  return {};
}

template <typename Fn> KernelImpl binaryKernel() {
  KernelImpl impl;
  impl.forward = [](const OpDesc &op, const KernelContext &,
                    const std::vector<TensorView> &inputs,
                    std::vector<TensorView> &outputs,
                    std::vector<TensorView> &) {
    return binaryForward<Fn>(op, inputs, outputs);
  };
  impl.backward = [](const OpDesc &op, const KernelContext &,
                     const std::vector<TensorView> &inputs,
                     const std::vector<TensorView> &outputs,
                     const std::vector<TensorView> &outputGrads,
                     std::vector<TensorView> &inputGrads,
                     std::vector<TensorView> &) {
    return binaryBackward<Fn>(op, inputs, outputs, outputGrads, inputGrads);
  };
  return impl;
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

/// dst = src * mask over the box of `dst` (or dst += ... when accumulating);
/// outside training the mask is all ones.
KernelStatus applyDropout(const OpDesc &op, const KernelContext &ctx,
                          const TensorView &src, TensorView &dst,
                          bool accumulate) {
  double ratio = op.getFloat("ratio", 0.5);
  if (!(ratio >= 0 && ratio < 1))
    return op.kind + ": ratio " + std::to_string(ratio) + " must be in [0, 1)";
  std::vector<StridedAccess> a;
  if (KernelStatus s = broadcastAccesses(
          op, dst, {{"source", &src}, {"destination", &dst}}, a);
      !s.empty())
    return s;
  std::vector<int64_t> extents = extentsOf(dst.lo, dst.hi);
  if (!ctx.training || ratio == 0) {
    walkStrided<2>(extents, {a[0], a[1]}, [&](const Offsets2 &o) {
      dst.data[o[1]] = (accumulate ? dst.data[o[1]] : 0.0f) + src.data[o[0]];
    });
    return {};
  }
  DropoutMask mask = dropoutMaskOf(op, ctx);
  walkStrided<3>(
      extents, {a[0], a[1], globalFlatAccess(dst)}, [&](const Offsets3 &o) {
        float value = src.data[o[0]] * mask.factor(o[2]);
        dst.data[o[1]] = (accumulate ? dst.data[o[1]] : 0.0f) + value;
      });
  return {};
}

KernelImpl dropoutKernel() {
  KernelImpl impl;
  impl.forward = [](const OpDesc &op, const KernelContext &ctx,
                    const std::vector<TensorView> &inputs,
                    std::vector<TensorView> &outputs,
                    std::vector<TensorView> &) -> KernelStatus {
    if (KernelStatus s =
            expectArity(op, "views", inputs.size(), 1, outputs.size(), 1);
        !s.empty())
      return s;
    return applyDropout(op, ctx, inputs[0], outputs[0], /*accumulate=*/false);
  };
  impl.backward = [](const OpDesc &op, const KernelContext &ctx,
                     const std::vector<TensorView> &,
                     const std::vector<TensorView> &,
                     const std::vector<TensorView> &outputGrads,
                     std::vector<TensorView> &inputGrads,
                     std::vector<TensorView> &) -> KernelStatus {
    if (KernelStatus s = expectArity(op, "gradient views", inputGrads.size(), 1,
                                     outputGrads.size(), 1);
        !s.empty())
      return s;
    if (!inputGrads[0].data)
      return {};
    // The gradient is masked like the input: same box, same mask.
    return applyDropout(op, ctx, outputGrads[0], inputGrads[0],
                        /*accumulate=*/true);
  };
  return impl;
}

//===----------------------------------------------------------------------===//
// Broadcast
//===----------------------------------------------------------------------===//

KernelImpl broadcastKernel() {
  KernelImpl impl;
  impl.forward = [](const OpDesc &op, const KernelContext &,
                    const std::vector<TensorView> &inputs,
                    std::vector<TensorView> &outputs,
                    std::vector<TensorView> &) -> KernelStatus {
    if (KernelStatus s =
            expectArity(op, "views", inputs.size(), 1, outputs.size(), 1);
        !s.empty())
      return s;
    const TensorView &x = inputs[0];
    TensorView &y = outputs[0];
    std::vector<StridedAccess> a;
    if (KernelStatus s =
            broadcastAccesses(op, y, {{"input", &x}, {"output", &y}}, a);
        !s.empty())
      return s;
    walkStrided<2>(extentsOf(y.lo, y.hi), {a[0], a[1]},
                   [&](const Offsets2 &o) { y.data[o[1]] = x.data[o[0]]; });
    return {};
  };
  impl.backward = [](const OpDesc &op, const KernelContext &,
                     const std::vector<TensorView> &,
                     const std::vector<TensorView> &,
                     const std::vector<TensorView> &outputGrads,
                     std::vector<TensorView> &inputGrads,
                     std::vector<TensorView> &) -> KernelStatus {
    if (KernelStatus s = expectArity(op, "gradient views", inputGrads.size(), 1,
                                     outputGrads.size(), 1);
        !s.empty())
      return s;
    TensorView &dx = inputGrads[0];
    if (!dx.data)
      return {};
    const TensorView &dy = outputGrads[0];
    std::vector<StridedAccess> a;
    if (KernelStatus s = broadcastAccesses(
            op, dy, {{"output gradient", &dy}, {"input gradient", &dx}}, a);
        !s.empty())
      return s;
    walkStrided<2>(extentsOf(dy.lo, dy.hi), {a[0], a[1]},
                   [&](const Offsets2 &o) { dx.data[o[1]] += dy.data[o[0]]; });
    return {};
  };
  return impl;
}

} // namespace

void registerElementwiseKernels(KernelTable &table) {
  table["ppc.relu"] = unaryKernel<Relu>();
  table["ppc.leaky_relu"] = unaryKernel<LeakyRelu>();
  table["ppc.gelu"] = geluKernel();
  table["ppc.sigmoid"] = unaryKernel<Sigmoid>();
  table["ppc.tanh"] = unaryKernel<Tanh>();
  table["ppc.clip"] = unaryKernel<Clip>();
  table["ppc.sqrt"] = unaryKernel<Sqrt>();
  table["ppc.rsqrt"] = unaryKernel<Rsqrt>();
  table["ppc.exp"] = unaryKernel<Exp>();
  table["ppc.log"] = unaryKernel<Log>();
  table["ppc.erf"] = unaryKernel<Erf>();
  table["ppc.neg"] = unaryKernel<Neg>();
  table["ppc.abs"] = unaryKernel<Abs>();
  table["ppc.reciprocal"] = unaryKernel<Reciprocal>();
  table["ppc.silu"] = unaryKernel<Silu>();
  table["ppc.cast"] = unaryKernel<Cast>();
  table["ppc.add"] = binaryKernel<Add>();
  table["ppc.sub"] = binaryKernel<Sub>();
  table["ppc.mul"] = binaryKernel<Mul>();
  table["ppc.div"] = binaryKernel<Div>();
  table["ppc.pow"] = binaryKernel<Pow>();
  table["ppc.max"] = binaryKernel<Max>();
  table["ppc.min"] = binaryKernel<Min>();
  table["ppc.dropout"] = dropoutKernel();
  table["ppc.broadcast"] = broadcastKernel();
}

} // namespace ppc::runtime::cpu
