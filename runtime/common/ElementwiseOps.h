//===- ElementwiseOps.h - the elementwise ops' functions and checks -*- C++
//-*-===//
//
// Private to the backends (runtime/cpu, runtime/cuda), shared by their
// elementwise kernels (unary, binary, comparisons, dropout, cast, broadcast,
// select) and cumsum. Every op but cumsum is elementwise over its result
// with numpy broadcasting: an operand is aligned at the trailing dim and a
// size-1 dim is read at index 0 for every result index. Here:
//  - the check that a view holds what the output box reads through that
//    broadcasting (and, for the cpu's walks, its strided access), with the
//    same errors on every backend;
//  - each op's per-element function, PPC_HD: a unary functor has value(x)
//    and derivative(x, y) with y = value(x), and a host constructor from
//    the op that sets `error` for attributes it rejects (and `hasKinks`
//    where the derivative jumps at points of the input: relu's 0, clip's
//    bounds; --verify's reference follows the partitioned run's side of
//    such a point, see Reference.h); a binary functor
//    has value(l, r) and the partial derivatives dLhs / dRhs given
//    y = value(l, r). Functors are small values (the cuda kernels capture
//    them) and inline into the cpu's vectorized loops;
//  - select's routing of the gradient and cumsum's lines (a scan along one
//    axis, read whole by every partition), PPC_HD;
//  - which functor each op name runs (registerElementwiseOps).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_COMMON_ELEMENTWISEOPS_H
#define PPC_RUNTIME_COMMON_ELEMENTWISEOPS_H

#include "KernelChecks.h"
#include "KernelMath.h"

#include "ppc/Runtime/DType.h"
#include "ppc/Runtime/HostDevice.h"
#include "ppc/Runtime/Kernels.h"

#include <cctype>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace ppc::runtime {

/// Whether unary functor Fn declares `hasKinks`.
template <typename Fn, typename = void> struct HasKinks : std::false_type {};
template <typename Fn>
struct HasKinks<Fn, std::void_t<decltype(Fn::hasKinks)>>
    : std::bool_constant<Fn::hasKinks> {};

//===----------------------------------------------------------------------===//
// Broadcasting checks
//===----------------------------------------------------------------------===//

/// Numpy broadcasting of a view of global `shape` against the iteration
/// dims: aligned at the trailing dim, a size-1 dim is read at index 0.
inline std::vector<DimMap> broadcastMaps(const std::vector<int64_t> &shape,
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
/// the output gradient in backward), each with numpy broadcasting; an error
/// names the first view that does not hold what the box reads.
inline absl::Status broadcastAccesses(const OpDesc &op, const TensorView &box,
                                      const std::vector<NamedView> &views,
                                      std::vector<StridedAccess> &accesses) {
  for (const NamedView &named : views) {
    const TensorView &view = *named.view;
    std::optional<StridedAccess> access;
    if (view.rank() <= box.rank() && view.shape.size() <= box.lo.size())
      access = stridedAccess(view, box.lo, box.hi,
                             broadcastMaps(view.shape, box.lo.size()));
    if (!access)
      return absl::InvalidArgumentError(
          op.kind + ": the " + named.name +
          " view does not hold what the output box reads");
    accesses.push_back(*access);
  }
  return {};
}

/// broadcastAccesses' check alone (a backend that indexes by itself).
inline absl::Status checkBroadcast(const OpDesc &op, const TensorView &box,
                                   const std::vector<NamedView> &views) {
  std::vector<StridedAccess> accesses;
  return broadcastAccesses(op, box, views, accesses);
}

/// Dropout's ratio attribute, checked: in [0, 1).
inline absl::Status dropoutRatio(const OpDesc &op, double &ratio) {
  ratio = op.getFloat("ratio", 0.5);
  if (!(ratio >= 0 && ratio < 1))
    return absl::InvalidArgumentError(
        op.kind + ": ratio " + std::to_string(ratio) + " must be in [0, 1)");
  return {};
}

//===----------------------------------------------------------------------===//
// Unary ops
//===----------------------------------------------------------------------===//

PPC_HD inline float sigmoidOf(float x) {
  if (x >= 0)
    return 1.0f / (1.0f + std::exp(-x));
  const float e = std::exp(x);
  return e / (1.0f + e);
}

struct Relu {
  static constexpr bool hasKinks = true;
  Relu(const OpDesc &, absl::Status &) {}
  PPC_HD float value(float x) const { return x > 0 ? x : 0.0f; }
  PPC_HD float derivative(float x, float) const { return x > 0 ? 1.0f : 0.0f; }
};

struct LeakyRelu {
  static constexpr bool hasKinks = true;
  float alpha;
  LeakyRelu(const OpDesc &op, absl::Status &)
      : alpha(static_cast<float>(op.getFloat("alpha", 0.01))) {}
  PPC_HD float value(float x) const { return x < 0 ? alpha * x : x; }
  PPC_HD float derivative(float x, float) const { return x < 0 ? alpha : 1.0f; }
};

/// ppc.gelu's approximation, as its keyword or, as the plan file exports
/// an I32EnumAttr, as its value (none = 0, tanh = 1); `error` says what is
/// wrong with another one.
inline std::string geluApproximation(const OpDesc &op, absl::Status &error) {
  std::string approximation = op.getString("approximation", "none");
  auto it = op.attributes.find("approximation");
  if (it != op.attributes.end())
    if (const int64_t *value = std::get_if<int64_t>(&it->second))
      approximation = *value == 0   ? "none"
                      : *value == 1 ? "tanh"
                                    : std::to_string(*value);
  if (approximation != "none" && approximation != "tanh")
    error = absl::InvalidArgumentError(op.kind + ": unknown approximation '" +
                                       approximation +
                                       "'; expected 'none' or 'tanh' (0 or 1)");
  return approximation;
}

/// The exact gelu, x/2 (1 + erf(x / sqrt 2)), in branch-free arithmetic
/// that vectorizes (one functor per approximation: a loop that tests which
/// one per element does not).
struct GeluErf {
  static constexpr float kSqrtHalf = 0.70710678118654752f;
  static constexpr float kInvSqrt2Pi = 0.39894228040143268f;
  GeluErf(const OpDesc &, absl::Status &) {}
  /// 1 + erf(x / sqrt 2), as erfc where erf is near -1.
  PPC_HD static float onePlusErf(float x) {
    const float e = erfcNonNegative(std::fabs(x) * kSqrtHalf);
    return x < 0 ? e : 2.0f - e;
  }
  PPC_HD float value(float x) const { return 0.5f * x * onePlusErf(x); }
  PPC_HD float derivative(float x, float) const {
    return 0.5f * onePlusErf(x) + x * kInvSqrt2Pi * softmaxExp(-0.5f * x * x);
  }
};

/// gelu's tanh approximation.
struct GeluTanh {
  static constexpr float kSqrt2OverPi = 0.79788456080286536f;
  static constexpr float kCubic = 0.044715f;
  GeluTanh(const OpDesc &, absl::Status &) {}
  PPC_HD float value(float x) const {
    return 0.5f * x *
           (1.0f + std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x)));
  }
  PPC_HD float derivative(float x, float) const {
    const float t = std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrt2OverPi *
                                   (1.0f + 3.0f * kCubic * x * x);
  }
};

struct Sigmoid {
  Sigmoid(const OpDesc &, absl::Status &) {}
  PPC_HD float value(float x) const { return sigmoidOf(x); }
  PPC_HD float derivative(float, float y) const { return y * (1.0f - y); }
};

struct Tanh {
  Tanh(const OpDesc &, absl::Status &) {}
  PPC_HD float value(float x) const { return std::tanh(x); }
  PPC_HD float derivative(float, float y) const { return 1.0f - y * y; }
};

/// Missing bounds are infinite. The gradient passes where min <= x <= max.
struct Clip {
  static constexpr bool hasKinks = true;
  float lo, hi;
  Clip(const OpDesc &op, absl::Status &)
      : lo(static_cast<float>(op.getFloat("min", -INFINITY))),
        hi(static_cast<float>(op.getFloat("max", INFINITY))) {}
  // Comparisons, not fmin/fmax: a NaN stays NaN (as numpy's clip), and the
  // loop vectorizes.
  PPC_HD float value(float x) const { return x < lo ? lo : (x > hi ? hi : x); }
  PPC_HD float derivative(float x, float) const {
    return x >= lo && x <= hi ? 1.0f : 0.0f;
  }
};

struct Sqrt {
  Sqrt(const OpDesc &, absl::Status &) {}
  PPC_HD float value(float x) const { return std::sqrt(x); }
  PPC_HD float derivative(float, float y) const { return 0.5f / y; }
};

struct Rsqrt {
  Rsqrt(const OpDesc &, absl::Status &) {}
  PPC_HD float value(float x) const { return 1.0f / std::sqrt(x); }
  PPC_HD float derivative(float, float y) const { return -0.5f * y * y * y; }
};

struct Exp {
  Exp(const OpDesc &, absl::Status &) {}
  PPC_HD float value(float x) const { return std::exp(x); }
  PPC_HD float derivative(float, float y) const { return y; }
};

struct Log {
  Log(const OpDesc &, absl::Status &) {}
  PPC_HD float value(float x) const { return std::log(x); }
  PPC_HD float derivative(float x, float) const { return 1.0f / x; }
};

struct Erf {
  static constexpr float kTwoOverSqrtPi = 1.12837916709551257f;
  Erf(const OpDesc &, absl::Status &) {}
  PPC_HD float value(float x) const { return std::erf(x); }
  PPC_HD float derivative(float x, float) const {
    return kTwoOverSqrtPi * std::exp(-x * x);
  }
};

struct Neg {
  Neg(const OpDesc &, absl::Status &) {}
  PPC_HD float value(float x) const { return -x; }
  PPC_HD float derivative(float, float) const { return -1.0f; }
};

struct Abs {
  static constexpr bool hasKinks = true;
  Abs(const OpDesc &, absl::Status &) {}
  PPC_HD float value(float x) const { return std::fabs(x); }
  PPC_HD float derivative(float x, float) const {
    return x > 0 ? 1.0f : x < 0 ? -1.0f : 0.0f;
  }
};

struct Reciprocal {
  Reciprocal(const OpDesc &, absl::Status &) {}
  PPC_HD float value(float x) const { return 1.0f / x; }
  PPC_HD float derivative(float, float y) const { return -y * y; }
};

struct Silu {
  Silu(const OpDesc &, absl::Status &) {}
  PPC_HD float value(float x) const { return x * sigmoidOf(x); }
  PPC_HD float derivative(float x, float) const {
    const float s = sigmoidOf(x);
    return s * (1.0f + x * (1.0f - s));
  }
};

/// max(0, min(1, alpha x + beta)); the gradient passes (times alpha) where
/// the line is strictly inside (0, 1).
struct HardSigmoid {
  static constexpr bool hasKinks = true;
  float alpha, beta;
  HardSigmoid(const OpDesc &op, absl::Status &)
      : alpha(static_cast<float>(op.getFloat("alpha", 0.2))),
        beta(static_cast<float>(op.getFloat("beta", 0.5))) {}
  PPC_HD float value(float x) const {
    const float t = alpha * x + beta;
    return t < 0 ? 0.0f : (t > 1 ? 1.0f : t);
  }
  PPC_HD float derivative(float x, float) const {
    const float t = alpha * x + beta;
    return t > 0 && t < 1 ? alpha : 0.0f;
  }
};

/// x * hard_sigmoid(x) with alpha = 1/6, beta = 1/2 (ONNX HardSwish).
struct HardSwish {
  static constexpr bool hasKinks = true;
  HardSwish(const OpDesc &, absl::Status &) {}
  PPC_HD float value(float x) const {
    return x <= -3.0f ? 0.0f : (x >= 3.0f ? x : x * (x + 3.0f) / 6.0f);
  }
  PPC_HD float derivative(float x, float) const {
    return x < -3.0f ? 0.0f : (x > 3.0f ? 1.0f : x / 3.0f + 0.5f);
  }
};

/// alpha (e^x - 1) below 0 (expm1: exact near 0).
struct Elu {
  float alpha;
  Elu(const OpDesc &op, absl::Status &)
      : alpha(static_cast<float>(op.getFloat("alpha", 1.0))) {}
  PPC_HD float value(float x) const {
    return x > 0 ? x : alpha * std::expm1(x);
  }
  PPC_HD float derivative(float x, float) const {
    return x > 0 ? 1.0f : alpha * std::exp(x);
  }
};

/// gamma * elu_alpha(x), with ONNX's defaults.
struct Selu {
  float alpha, gamma;
  Selu(const OpDesc &op, absl::Status &)
      : alpha(static_cast<float>(
            op.getFloat("alpha", 1.67326319217681884765625))),
        gamma(static_cast<float>(
            op.getFloat("gamma", 1.05070102214813232421875))) {}
  PPC_HD float value(float x) const {
    return gamma * (x > 0 ? x : alpha * std::expm1(x));
  }
  PPC_HD float derivative(float x, float) const {
    return gamma * (x > 0 ? 1.0f : alpha * std::exp(x));
  }
};

/// log(1 + e^x) as max(x, 0) + log1p(e^-|x|): no overflow for large x.
PPC_HD inline float softplusOf(float x) {
  return (x > 0 ? x : 0.0f) + std::log1p(std::exp(-std::fabs(x)));
}

struct Softplus {
  Softplus(const OpDesc &, absl::Status &) {}
  PPC_HD float value(float x) const { return softplusOf(x); }
  PPC_HD float derivative(float x, float) const { return sigmoidOf(x); }
};

/// x tanh(softplus(x)); d/dx = t + x sigmoid(x) (1 - t^2).
struct Mish {
  Mish(const OpDesc &, absl::Status &) {}
  PPC_HD float value(float x) const { return x * std::tanh(softplusOf(x)); }
  PPC_HD float derivative(float x, float) const {
    const float t = std::tanh(softplusOf(x));
    return t + x * sigmoidOf(x) * (1.0f - t * t);
  }
};

/// Rounds to the nearest float16 (ties to even), as a float.
PPC_HD inline float roundToHalf(float x) {
  if (!(x - x == 0.0f)) // inf or NaN
    return x;
  const float magnitude = fabsf(x);
  if (magnitude >= 65520.0f) // rounds past the largest half, 65504
    return copysignf(INFINITY, x);
  // Below 2^-14 halves are subnormal with a fixed step of 2^-24.
  const int exponent = magnitude < 0x1.0p-14f ? -14 : ilogbf(magnitude);
  const float step = ldexpf(1.0f, exponent - 10);
  return copysignf(nearbyintf(magnitude / step) * step, x);
}

/// Rounds to the nearest bfloat16 (ties to even): the top 16 bits.
PPC_HD inline float roundToBFloat16(float x) {
  if (x != x)
    return x;
  uint32_t bits = floatBits(x);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return bitsFloat(bits & 0xffff0000u);
}

/// The result element type comes as the string attribute `to` ("f32",
/// "i64", "i1"...). Values stay floats: f16 and bf16 round to their
/// precision, other float types keep them, an integer type truncates toward
/// zero, i1 is x != 0. Only a float result passes a gradient.
struct Cast {
  enum Target : int { Float, Half, BFloat16, Bool, Integer };
  int target = Float;

  Cast(const OpDesc &op, absl::Status &error) {
    std::string to = op.getString("to", "f32");
    if (to == "i1")
      target = Bool;
    else if (to == "f16")
      target = Half;
    else if (to == "bf16")
      target = BFloat16;
    else if (isIntegerType(to))
      target = Integer;
    else if (!isFloatType(to))
      error = absl::InvalidArgumentError(op.kind + ": unknown target type '" +
                                         to + "'");
  }
  PPC_HD float value(float x) const {
    switch (target) {
    case Half:
      return roundToHalf(x);
    case BFloat16:
      return roundToBFloat16(x);
    case Bool:
      return x != 0 ? 1.0f : 0.0f;
    case Integer:
      return truncf(x);
    default:
      return x;
    }
  }
  PPC_HD float derivative(float, float) const {
    return target == Bool || target == Integer ? 0.0f : 1.0f;
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

struct Not {
  Not(const OpDesc &, absl::Status &) {}
  PPC_HD float value(float x) const { return x == 0 ? 1.0f : 0.0f; }
  PPC_HD float derivative(float, float) const { return 0.0f; }
};

//===----------------------------------------------------------------------===//
// Binary ops
//===----------------------------------------------------------------------===//

struct Add {
  PPC_HD float value(float l, float r) const { return l + r; }
  PPC_HD float dLhs(float, float, float) const { return 1.0f; }
  PPC_HD float dRhs(float, float, float) const { return 1.0f; }
};

struct Sub {
  PPC_HD float value(float l, float r) const { return l - r; }
  PPC_HD float dLhs(float, float, float) const { return 1.0f; }
  PPC_HD float dRhs(float, float, float) const { return -1.0f; }
};

struct Mul {
  PPC_HD float value(float l, float r) const { return l * r; }
  PPC_HD float dLhs(float, float r, float) const { return r; }
  PPC_HD float dRhs(float l, float, float) const { return l; }
};

struct Div {
  PPC_HD float value(float l, float r) const { return l / r; }
  PPC_HD float dLhs(float, float r, float) const { return 1.0f / r; }
  PPC_HD float dRhs(float, float r, float y) const { return -y / r; }
};

/// As in PyTorch, the lhs gradient is 0 where r == 0 (0^0 would give NaN);
/// the rhs gradient is 0 where l <= 0, where log(l) is not real.
struct Pow {
  PPC_HD float value(float l, float r) const { return std::pow(l, r); }
  PPC_HD float dLhs(float l, float r, float) const {
    return r == 0 ? 0.0f : r * std::pow(l, r - 1.0f);
  }
  PPC_HD float dRhs(float l, float, float y) const {
    return l > 0 ? y * std::log(l) : 0.0f;
  }
};

/// Ties split the gradient evenly, as in PyTorch.
struct Max {
  PPC_HD float value(float l, float r) const { return l >= r ? l : r; }
  PPC_HD float dLhs(float l, float r, float) const {
    return l > r ? 1.0f : l == r ? 0.5f : 0.0f;
  }
  PPC_HD float dRhs(float l, float r, float) const {
    return r > l ? 1.0f : l == r ? 0.5f : 0.0f;
  }
};

struct Min {
  PPC_HD float value(float l, float r) const { return l <= r ? l : r; }
  PPC_HD float dLhs(float l, float r, float) const {
    return l < r ? 1.0f : l == r ? 0.5f : 0.0f;
  }
  PPC_HD float dRhs(float l, float r, float) const {
    return r < l ? 1.0f : l == r ? 0.5f : 0.0f;
  }
};

/// ONNX PRelu: lhs is the input, rhs the slope.
struct PRelu {
  PPC_HD float value(float l, float r) const { return l < 0 ? r * l : l; }
  PPC_HD float dLhs(float l, float r, float) const { return l < 0 ? r : 1.0f; }
  PPC_HD float dRhs(float l, float, float) const { return l < 0 ? l : 0.0f; }
};

/// Comparisons and logic: a float 0 or 1 (booleans are floats at run
/// time), no gradient.
struct Equal {
  PPC_HD float value(float l, float r) const { return l == r ? 1.0f : 0.0f; }
  PPC_HD float dLhs(float, float, float) const { return 0.0f; }
  PPC_HD float dRhs(float, float, float) const { return 0.0f; }
};

struct Less : Equal {
  PPC_HD float value(float l, float r) const { return l < r ? 1.0f : 0.0f; }
};

struct LessEqual : Equal {
  PPC_HD float value(float l, float r) const { return l <= r ? 1.0f : 0.0f; }
};

struct Greater : Equal {
  PPC_HD float value(float l, float r) const { return l > r ? 1.0f : 0.0f; }
};

struct GreaterEqual : Equal {
  PPC_HD float value(float l, float r) const { return l >= r ? 1.0f : 0.0f; }
};

struct And : Equal {
  PPC_HD float value(float l, float r) const {
    return l != 0 && r != 0 ? 1.0f : 0.0f;
  }
};

struct Or : Equal {
  PPC_HD float value(float l, float r) const {
    return l != 0 || r != 0 ? 1.0f : 0.0f;
  }
};

/// The partial derivative of operand `which` (0: lhs, 1: rhs).
template <typename Fn>
PPC_HD inline float partial(const Fn &fn, int which, float l, float r,
                            float y) {
  return which == 0 ? fn.dLhs(l, r, y) : fn.dRhs(l, r, y);
}

//===----------------------------------------------------------------------===//
// Select
//===----------------------------------------------------------------------===//

/// ppc.select's operand `which` (1: lhs, 2: rhs) is taken where the
/// condition element is `c`.
PPC_HD inline bool selectTakes(int which, float c) {
  return (c != 0) == (which == 1);
}

//===----------------------------------------------------------------------===//
// Cumulative sum
//===----------------------------------------------------------------------===//

/// ppc.cumsum on one partition: `lines` runs of `length` elements, `stride`
/// apart, the run of line k starting at (k / stride) * length * stride +
/// k % stride in every view (all views hold the same box, whole along the
/// axis).
struct CumSumLines {
  int64_t lines = 0, length = 0, stride = 1;
  bool exclusive = false, reverse = false;

  PPC_HD int64_t start(int64_t line) const {
    return (line / stride) * length * stride + line % stride;
  }
  /// dst (+)= the cumulative sum of src along line `line`; `backward` scans
  /// the other way (the gradient of the forward scan).
  template <typename In, typename Out>
  PPC_HD void scan(int64_t line, In src, Out dst, bool backward,
                   bool accumulate) const {
    const bool down = reverse != backward;
    const int64_t first = start(line);
    float sum = 0.0f;
    for (int64_t k = 0; k < length; ++k) {
      const int64_t i = first + (down ? length - 1 - k : k) * stride;
      const float x = src[i];
      if (!exclusive)
        sum += x;
      dst[i] = accumulate ? dst[i] + sum : sum;
      if (exclusive)
        sum += x;
    }
  }
};

/// The lines of ppc.cumsum over `box` (the output, or the output gradient),
/// checking that every view holds exactly that box and that the box holds
/// the whole axis.
inline absl::Status cumsumLines(const OpDesc &op, const TensorView &box,
                                const std::vector<NamedView> &views,
                                CumSumLines &lines) {
  const int64_t rank = static_cast<int64_t>(box.shape.size());
  int64_t axis = op.getInt("axis", 0);
  if (axis < -rank || axis >= rank)
    return axisOutOfRange(op, axis, rank);
  if (axis < 0)
    axis += rank;
  for (const NamedView &named : views)
    if (!(named.view->shape == box.shape && sameBox(*named.view, box)))
      return absl::InvalidArgumentError(op.kind + ": the " + named.name +
                                        " view does not hold the output box");
  if (box.lo[axis] != 0 || box.hi[axis] != box.shape[axis])
    return absl::InvalidArgumentError(
        op.kind + ": the output box does not hold the whole axis " +
        std::to_string(axis));
  lines.exclusive = op.getInt("exclusive", 0) != 0;
  lines.reverse = op.getInt("reverse", 0) != 0;
  lines.length = box.shape[axis];
  lines.stride = 1;
  int64_t outer = 1;
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t extent = box.hi[d] - box.lo[d];
    if (d < axis)
      outer *= extent;
    else if (d > axis)
      lines.stride *= extent;
  }
  lines.lines = outer * lines.stride;
  return {};
}

//===----------------------------------------------------------------------===//
// Which functor each op runs
//===----------------------------------------------------------------------===//

/// Puts the kernel of every elementwise op in `table`, as the backend's
/// `Kernels` makes them: Kernels::unary<Fn>() and Kernels::binary<Fn>() for
/// an op of one functor, Kernels::gelu() (two functors, chosen by
/// geluApproximation), Kernels::dropout(), Kernels::broadcast(),
/// Kernels::select() and Kernels::cumsum().
template <typename Kernels, typename Table>
void registerElementwiseOps(Table &table) {
  table["ppc.relu"] = Kernels::template unary<Relu>();
  table["ppc.leaky_relu"] = Kernels::template unary<LeakyRelu>();
  table["ppc.gelu"] = Kernels::gelu();
  table["ppc.sigmoid"] = Kernels::template unary<Sigmoid>();
  table["ppc.tanh"] = Kernels::template unary<Tanh>();
  table["ppc.clip"] = Kernels::template unary<Clip>();
  table["ppc.sqrt"] = Kernels::template unary<Sqrt>();
  table["ppc.rsqrt"] = Kernels::template unary<Rsqrt>();
  table["ppc.exp"] = Kernels::template unary<Exp>();
  table["ppc.log"] = Kernels::template unary<Log>();
  table["ppc.erf"] = Kernels::template unary<Erf>();
  table["ppc.neg"] = Kernels::template unary<Neg>();
  table["ppc.abs"] = Kernels::template unary<Abs>();
  table["ppc.reciprocal"] = Kernels::template unary<Reciprocal>();
  table["ppc.silu"] = Kernels::template unary<Silu>();
  table["ppc.hard_sigmoid"] = Kernels::template unary<HardSigmoid>();
  table["ppc.hard_swish"] = Kernels::template unary<HardSwish>();
  table["ppc.elu"] = Kernels::template unary<Elu>();
  table["ppc.selu"] = Kernels::template unary<Selu>();
  table["ppc.softplus"] = Kernels::template unary<Softplus>();
  table["ppc.mish"] = Kernels::template unary<Mish>();
  table["ppc.cast"] = Kernels::template unary<Cast>();
  table["ppc.add"] = Kernels::template binary<Add>();
  table["ppc.sub"] = Kernels::template binary<Sub>();
  table["ppc.mul"] = Kernels::template binary<Mul>();
  table["ppc.div"] = Kernels::template binary<Div>();
  table["ppc.pow"] = Kernels::template binary<Pow>();
  table["ppc.max"] = Kernels::template binary<Max>();
  table["ppc.min"] = Kernels::template binary<Min>();
  table["ppc.prelu"] = Kernels::template binary<PRelu>();
  table["ppc.equal"] = Kernels::template binary<Equal>();
  table["ppc.less"] = Kernels::template binary<Less>();
  table["ppc.less_equal"] = Kernels::template binary<LessEqual>();
  table["ppc.greater"] = Kernels::template binary<Greater>();
  table["ppc.greater_equal"] = Kernels::template binary<GreaterEqual>();
  table["ppc.and"] = Kernels::template binary<And>();
  table["ppc.or"] = Kernels::template binary<Or>();
  table["ppc.not"] = Kernels::template unary<Not>();
  table["ppc.select"] = Kernels::select();
  table["ppc.cumsum"] = Kernels::cumsum();
  table["ppc.dropout"] = Kernels::dropout();
  table["ppc.broadcast"] = Kernels::broadcast();
}

} // namespace ppc::runtime

#endif // PPC_RUNTIME_COMMON_ELEMENTWISEOPS_H
