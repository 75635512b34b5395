//===- ElementwiseKernels.cu - unary, binary, dropout, cast, broadcast ----===//
//
// The cuda kernels of the cpu backend's ElementwiseKernels.cpp, with its
// semantics: every op is elementwise over its result with numpy
// broadcasting (an operand is aligned at the trailing dim and a size-1 dim
// is read at index 0 for every result index). A partition computes its
// output box, one thread per output element; a broadcast operand's gradient
// is summed over the broadcast positions of the box of the output gradient
// (the plan sums the partials of the partitions) by one thread per gradient
// element, which loops over those positions in the cpu kernel's order: no
// atomics, and the same sums. Views whose boxes all agree take a
// contiguous path; the others are checked on the host as the cpu kernel
// checks them, with its messages. Dropout draws DropoutMask's mask from the
// global flat index of the element it writes.
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"

#include "ppc/Runtime/DType.h"
#include "ppc/Runtime/DropoutMask.h"

#include <cctype>
#include <cmath>
#include <cstdint>
#include <string>

namespace ppc::runtime::cuda {
namespace {

//===----------------------------------------------------------------------===//
// Host checks (the cpu kernels' messages)
//===----------------------------------------------------------------------===//

KernelStatus expectArity(const OpDesc &op, const char *what, size_t operands,
                         size_t expectedOperands, size_t results,
                         size_t expectedResults) {
  if (operands == expectedOperands && results == expectedResults)
    return {};
  return op.kind + ": expects " + std::to_string(expectedOperands) +
         " operand and " + std::to_string(expectedResults) + " result " + what +
         ", got " + std::to_string(operands) + " and " +
         std::to_string(results);
}

bool sameBox(const TensorView &a, const TensorView &b) {
  return a.lo == b.lo && a.hi == b.hi;
}

/// A view with the name errors give it ("lhs", "output gradient").
struct NamedView {
  const char *name;
  const TensorView *view;
};

/// Checks that each of `views` holds what the iteration box of `box` (the
/// output view, or the output gradient in backward) reads from it with
/// numpy broadcasting.
KernelStatus checkBroadcast(const OpDesc &op, const TensorView &box,
                            std::initializer_list<NamedView> views) {
  const size_t rank = box.lo.size();
  bool empty = false;
  for (size_t d = 0; d < rank; ++d)
    empty |= box.hi[d] <= box.lo[d];
  for (const NamedView &named : views) {
    const TensorView &view = *named.view;
    bool holds = view.shape.size() <= box.shape.size() &&
                 view.shape.size() <= rank &&
                 view.lo.size() == view.shape.size() &&
                 view.hi.size() == view.shape.size();
    const size_t lead = holds ? rank - view.shape.size() : 0;
    for (size_t i = 0; holds && !empty && i < view.shape.size(); ++i) {
      const int64_t first = view.shape[i] == 1 ? 0 : box.lo[lead + i];
      const int64_t last = view.shape[i] == 1 ? 0 : box.hi[lead + i] - 1;
      holds = first >= view.lo[i] && last < view.hi[i];
    }
    if (!holds)
      return op.kind + ": the " + named.name +
             " view does not hold what the output box reads";
  }
  return {};
}

//===----------------------------------------------------------------------===//
// Device helpers
//===----------------------------------------------------------------------===//

/// Offset in `view`'s buffer of the element that iteration point `p` (of
/// rank `iterRank`) reads with numpy broadcasting.
PPC_HD inline int64_t broadcastOffset(const DeviceBox &view, const int64_t *p,
                                      int iterRank) {
  const int lead = iterRank - view.rank;
  int64_t offset = 0;
  for (int i = 0; i < view.rank; ++i) {
    const int64_t index = view.shape[i] == 1 ? 0 : p[lead + i];
    offset = offset * (view.hi[i] - view.lo[i]) + (index - view.lo[i]);
  }
  return offset;
}

/// grad[e] += sum of term(p) over the points p of the iteration box `iter`
/// that read gradient element e with numpy broadcasting, one thread per
/// element of the gradient's box, summing in the row-major order of the
/// points (the cpu kernel's walk).
template <typename Term>
void gatherAdd(Stream stream, DeviceBox iter, DeviceBox gradBox, float *grad,
               Term term) {
  launch(stream, gradBox.count(), [=] PPC_HD(int64_t e) {
    int64_t g[kMaxRank], p[kMaxRank];
    gradBox.indexOf(e, g);
    const int rank = iter.rank, lead = iter.rank - gradBox.rank;
    unsigned freeDims = 0; // dims the gradient element is broadcast over
    for (int j = 0; j < rank; ++j) {
      if (j < lead || gradBox.shape[j - lead] == 1) {
        freeDims |= 1u << j;
        p[j] = iter.lo[j];
        if (iter.hi[j] <= iter.lo[j])
          return;
      } else {
        p[j] = g[j - lead];
        if (p[j] < iter.lo[j] || p[j] >= iter.hi[j])
          return;
      }
    }
    float sum = grad[e];
    while (true) {
      sum += term(p);
      int j = rank - 1;
      for (; j >= 0; --j) {
        if (!(freeDims & (1u << j)))
          continue;
        if (++p[j] < iter.hi[j])
          break;
        p[j] = iter.lo[j];
      }
      if (j < 0)
        break;
    }
    grad[e] = sum;
  });
}

/// e^x as the cpu kernels' softmaxExp (Cephes' expf), for gelu's exact
/// form to round as the cpu kernel does.
PPC_HD inline float cephesExp(float x) {
  const float kHi = 88.3762626647949f, kLo = -86.64f;
  const bool nan = !(x == x);
  float c = x > kHi ? kHi : (x < kLo ? kLo : x);
  c = nan ? 0.0f : c;
  const float n = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = c - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float q = 1.9875691500e-4f;
  q = q * r + 1.3981999507e-3f;
  q = q * r + 8.3334519073e-3f;
  q = q * r + 4.1665795894e-2f;
  q = q * r + 1.6666665459e-1f;
  q = q * r + 5.0000001201e-1f;
  q = q * r * r + r + 1.0f;
  const float scale =
      bitsFloat(static_cast<uint32_t>((static_cast<int32_t>(n) + 127) << 23));
  float y = q * scale;
  y = x < kLo ? 0.0f : y;
  y = x > kHi ? INFINITY : y;
  return nan ? x : y;
}

/// erfc(z) for z >= 0 as the cpu kernels' erfcNonNegative.
PPC_HD inline float erfcNonNegative(float z) {
  const float t = 1.0f / (1.0f + 0.5f * z);
  float q = 0.17087277f;
  q = q * t - 0.82215223f;
  q = q * t + 1.48851587f;
  q = q * t - 1.13520398f;
  q = q * t + 0.27886807f;
  q = q * t - 0.18628806f;
  q = q * t + 0.09678418f;
  q = q * t + 0.37409196f;
  q = q * t + 1.00002368f;
  q = q * t - 1.26551223f;
  return t * cephesExp(q - z * z);
}

PPC_HD inline float sigmoidOf(float x) {
  if (x >= 0)
    return 1.0f / (1.0f + std::exp(-x));
  const float e = std::exp(x);
  return e / (1.0f + e);
}

//===----------------------------------------------------------------------===//
// Unary ops: value(x) and derivative(x, y) with y = value(x); a host
// constructor from the op sets `error` for attributes it rejects
//===----------------------------------------------------------------------===//

struct Relu {
  Relu(const OpDesc &, KernelStatus &) {}
  PPC_HD float value(float x) const { return x > 0 ? x : 0.0f; }
  PPC_HD float derivative(float x, float) const { return x > 0 ? 1.0f : 0.0f; }
};

struct LeakyRelu {
  float alpha;
  LeakyRelu(const OpDesc &op, KernelStatus &)
      : alpha(static_cast<float>(op.getFloat("alpha", 0.01))) {}
  PPC_HD float value(float x) const { return x < 0 ? alpha * x : x; }
  PPC_HD float derivative(float x, float) const { return x < 0 ? alpha : 1.0f; }
};

/// ppc.gelu's approximation, as its keyword or as the I32EnumAttr's value
/// (none = 0, tanh = 1); `error` says what is wrong with another one.
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

/// The exact gelu, x/2 (1 + erf(x / sqrt 2)), in the cpu kernel's
/// arithmetic.
struct GeluErf {
  GeluErf(const OpDesc &, KernelStatus &) {}
  /// 1 + erf(x / sqrt 2), as erfc where erf is near -1.
  PPC_HD static float onePlusErf(float x) {
    const float e = erfcNonNegative(std::fabs(x) * 0.70710678118654752f);
    return x < 0 ? e : 2.0f - e;
  }
  PPC_HD float value(float x) const { return 0.5f * x * onePlusErf(x); }
  PPC_HD float derivative(float x, float) const {
    return 0.5f * onePlusErf(x) +
           x * 0.39894228040143268f * cephesExp(-0.5f * x * x);
  }
};

/// gelu's tanh approximation.
struct GeluTanh {
  GeluTanh(const OpDesc &, KernelStatus &) {}
  PPC_HD float value(float x) const {
    const float kSqrt2OverPi = 0.79788456080286536f, kCubic = 0.044715f;
    return 0.5f * x *
           (1.0f + std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x)));
  }
  PPC_HD float derivative(float x, float) const {
    const float kSqrt2OverPi = 0.79788456080286536f, kCubic = 0.044715f;
    const float t = std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrt2OverPi *
                                   (1.0f + 3.0f * kCubic * x * x);
  }
};

struct Sigmoid {
  Sigmoid(const OpDesc &, KernelStatus &) {}
  PPC_HD float value(float x) const { return sigmoidOf(x); }
  PPC_HD float derivative(float, float y) const { return y * (1.0f - y); }
};

struct Tanh {
  Tanh(const OpDesc &, KernelStatus &) {}
  PPC_HD float value(float x) const { return std::tanh(x); }
  PPC_HD float derivative(float, float y) const { return 1.0f - y * y; }
};

/// Missing bounds are infinite. The gradient passes where min <= x <= max;
/// a NaN stays NaN.
struct Clip {
  float lo, hi;
  Clip(const OpDesc &op, KernelStatus &)
      : lo(static_cast<float>(op.getFloat("min", -INFINITY))),
        hi(static_cast<float>(op.getFloat("max", INFINITY))) {}
  PPC_HD float value(float x) const { return x < lo ? lo : (x > hi ? hi : x); }
  PPC_HD float derivative(float x, float) const {
    return x >= lo && x <= hi ? 1.0f : 0.0f;
  }
};

struct Sqrt {
  Sqrt(const OpDesc &, KernelStatus &) {}
  PPC_HD float value(float x) const { return std::sqrt(x); }
  PPC_HD float derivative(float, float y) const { return 0.5f / y; }
};

struct Rsqrt {
  Rsqrt(const OpDesc &, KernelStatus &) {}
  PPC_HD float value(float x) const { return 1.0f / std::sqrt(x); }
  PPC_HD float derivative(float, float y) const { return -0.5f * y * y * y; }
};

struct Exp {
  Exp(const OpDesc &, KernelStatus &) {}
  PPC_HD float value(float x) const { return std::exp(x); }
  PPC_HD float derivative(float, float y) const { return y; }
};

struct Log {
  Log(const OpDesc &, KernelStatus &) {}
  PPC_HD float value(float x) const { return std::log(x); }
  PPC_HD float derivative(float x, float) const { return 1.0f / x; }
};

struct Erf {
  Erf(const OpDesc &, KernelStatus &) {}
  PPC_HD float value(float x) const { return std::erf(x); }
  PPC_HD float derivative(float x, float) const {
    return 1.12837916709551257f * std::exp(-x * x);
  }
};

struct Neg {
  Neg(const OpDesc &, KernelStatus &) {}
  PPC_HD float value(float x) const { return -x; }
  PPC_HD float derivative(float, float) const { return -1.0f; }
};

struct Abs {
  Abs(const OpDesc &, KernelStatus &) {}
  PPC_HD float value(float x) const { return std::fabs(x); }
  PPC_HD float derivative(float x, float) const {
    return x > 0 ? 1.0f : x < 0 ? -1.0f : 0.0f;
  }
};

struct Reciprocal {
  Reciprocal(const OpDesc &, KernelStatus &) {}
  PPC_HD float value(float x) const { return 1.0f / x; }
  PPC_HD float derivative(float, float y) const { return -y * y; }
};

struct Silu {
  Silu(const OpDesc &, KernelStatus &) {}
  PPC_HD float value(float x) const { return x * sigmoidOf(x); }
  PPC_HD float derivative(float x, float) const {
    const float s = sigmoidOf(x);
    return s * (1.0f + x * (1.0f - s));
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

/// f16, bf16, f32, f64, tf32, f8E4M3FN...
bool isFloatType(const std::string &type) {
  size_t letter = type.rfind("bf", 0) == 0 || type.rfind("tf", 0) == 0 ? 1 : 0;
  return type.size() > letter + 1 && type[letter] == 'f' &&
         std::isdigit(static_cast<unsigned char>(type[letter + 1]));
}

/// i8, si32, ui64, index...
bool isIntegerType(const std::string &type) {
  if (type == "index")
    return true;
  size_t digits = type.rfind("si", 0) == 0 || type.rfind("ui", 0) == 0 ? 2
                  : type.rfind('i', 0) == 0                            ? 1
                                                                       : 0;
  return digits != 0 && type.size() > digits &&
         type.find_first_not_of("0123456789", digits) == std::string::npos;
}

/// The result element type comes as the string attribute `to` ("f32",
/// "i64", "i1"...). Values stay floats: f16 and bf16 round to their
/// precision, other float types keep them, an integer type truncates toward
/// zero, i1 is x != 0. Only a float result passes a gradient.
struct Cast {
  enum Target : int { Float, Half, BFloat16, Bool, Integer };
  int target = Float;

  Cast(const OpDesc &op, KernelStatus &error) {
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
      error = op.kind + ": unknown target type '" + to + "'";
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
};

/// dx's term of iteration point p: dy * f'(x, y), y recomputed when the
/// plan keeps none.
template <typename Fn> struct UnaryTerm {
  Fn fn;
  int rank;
  DeviceBox xBox, yBox, dyBox;
  const float *x, *y, *dy;
  PPC_HD float operator()(const int64_t *p) const {
    const float xv = x[broadcastOffset(xBox, p, rank)];
    const float yv = y ? y[broadcastOffset(yBox, p, rank)] : fn.value(xv);
    return dy[broadcastOffset(dyBox, p, rank)] * fn.derivative(xv, yv);
  }
};

template <typename Fn>
void unaryValues(Stream stream, Fn fn, bool contiguous, DeviceBox xBox,
                 const float *x, DeviceBox yBox, float *y) {
  if (contiguous) {
    launch(stream, yBox.count(),
           [=] PPC_HD(int64_t i) { y[i] = fn.value(x[i]); });
    return;
  }
  launch(stream, yBox.count(), [=] PPC_HD(int64_t i) {
    int64_t p[kMaxRank];
    yBox.indexOf(i, p);
    y[i] = fn.value(x[broadcastOffset(xBox, p, yBox.rank)]);
  });
}

template <typename Fn>
void unaryGradients(Stream stream, Fn fn, int64_t n, const float *x,
                    const float *y, const float *dy, float *dx) {
  launch(stream, n, [=] PPC_HD(int64_t i) {
    const float yv = y ? y[i] : fn.value(x[i]);
    dx[i] += dy[i] * fn.derivative(x[i], yv);
  });
}

template <typename Fn>
KernelStatus unaryForward(const OpDesc &op, Stream stream,
                          const std::vector<KernelView> &inputs,
                          const std::vector<KernelView> &outputs) {
  KernelStatus error;
  Fn fn(op, error);
  if (!error.empty())
    return error;
  if (KernelStatus s =
          expectArity(op, "views", inputs.size(), 1, outputs.size(), 1);
      !s.empty())
    return s;
  const KernelView &x = inputs[0], &y = outputs[0];
  const bool contiguous = x.shape == y.shape && sameBox(x, y);
  if (!contiguous)
    if (KernelStatus s = checkBroadcast(op, y, {{"input", &x}, {"output", &y}});
        !s.empty())
      return s;
  unaryValues(stream, fn, contiguous, x.box, x.data, y.box, y.data);
  return {};
}

/// dx += dy * f'(x).
template <typename Fn>
KernelStatus unaryBackward(const OpDesc &op, Stream stream,
                           const std::vector<KernelView> &inputs,
                           const std::vector<KernelView> &outputs,
                           const std::vector<KernelView> &outputGrads,
                           const std::vector<KernelView> &inputGrads) {
  KernelStatus error;
  Fn fn(op, error);
  if (!error.empty())
    return error;
  if (KernelStatus s =
          expectArity(op, "views", inputs.size(), 1, outputs.size(), 1);
      !s.empty())
    return s;
  if (KernelStatus s = expectArity(op, "gradient views", inputGrads.size(), 1,
                                   outputGrads.size(), 1);
      !s.empty())
    return s;
  const KernelView &dx = inputGrads[0];
  if (!dx.data)
    return {};
  const KernelView &x = inputs[0], &y = outputs[0], &dy = outputGrads[0];
  // The plan keeps no result for a backward that reads none (relu, clip):
  // such derivatives ignore y, and the others get it recomputed.
  if (x.shape == dy.shape && sameBox(x, dy) && sameBox(dx, dy) &&
      (!y.data || sameBox(y, dy))) {
    unaryGradients(stream, fn, dy.box.count(), x.data, y.data, dy.data,
                   dx.data);
    return {};
  }
  if (KernelStatus s = checkBroadcast(op, dy,
                                      {{"input", &x},
                                       {"output", &y},
                                       {"output gradient", &dy},
                                       {"input gradient", &dx}});
      !s.empty())
    return s;
  UnaryTerm<Fn> term{fn,     dy.box.rank, x.box,  y.box,
                     dy.box, x.data,      y.data, dy.data};
  gatherAdd(stream, dy.box, dx.box, dx.data, term);
  return {};
}

template <typename Fn> CudaKernel unaryKernel() {
  CudaKernel kernel;
  kernel.forward = [](const OpDesc &op, const KernelContext &,
                      ExecContext &exec, const std::vector<KernelView> &inputs,
                      const std::vector<KernelView> &outputs,
                      const std::vector<KernelView> &) {
    return unaryForward<Fn>(op, exec.stream, inputs, outputs);
  };
  kernel.backward = [](const OpDesc &op, const KernelContext &,
                       ExecContext &exec, const std::vector<KernelView> &inputs,
                       const std::vector<KernelView> &outputs,
                       const std::vector<KernelView> &outputGrads,
                       const std::vector<KernelView> &inputGrads,
                       const std::vector<KernelView> &) {
    return unaryBackward<Fn>(op, exec.stream, inputs, outputs, outputGrads,
                             inputGrads);
  };
  return kernel;
}

/// ppc.gelu: the functor of its approximation.
CudaKernel geluKernel() {
  CudaKernel kernel;
  kernel.forward = [](const OpDesc &op, const KernelContext &,
                      ExecContext &exec, const std::vector<KernelView> &inputs,
                      const std::vector<KernelView> &outputs,
                      const std::vector<KernelView> &) -> KernelStatus {
    KernelStatus error;
    const std::string approximation = geluApproximation(op, error);
    if (!error.empty())
      return error;
    return approximation == "tanh"
               ? unaryForward<GeluTanh>(op, exec.stream, inputs, outputs)
               : unaryForward<GeluErf>(op, exec.stream, inputs, outputs);
  };
  kernel.backward = [](const OpDesc &op, const KernelContext &,
                       ExecContext &exec, const std::vector<KernelView> &inputs,
                       const std::vector<KernelView> &outputs,
                       const std::vector<KernelView> &outputGrads,
                       const std::vector<KernelView> &inputGrads,
                       const std::vector<KernelView> &) -> KernelStatus {
    KernelStatus error;
    const std::string approximation = geluApproximation(op, error);
    if (!error.empty())
      return error;
    return approximation == "tanh"
               ? unaryBackward<GeluTanh>(op, exec.stream, inputs, outputs,
                                         outputGrads, inputGrads)
               : unaryBackward<GeluErf>(op, exec.stream, inputs, outputs,
                                        outputGrads, inputGrads);
  };
  return kernel;
}

//===----------------------------------------------------------------------===//
// Binary ops: value(l, r) and the partial derivatives given y = value(l, r)
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

/// The partial derivative of operand `which` (0: lhs, 1: rhs).
template <typename Fn>
PPC_HD inline float partial(const Fn &fn, int which, float l, float r,
                            float y) {
  return which == 0 ? fn.dLhs(l, r, y) : fn.dRhs(l, r, y);
}

/// The operand gradient's term of iteration point p: dy * d(value)/d(operand),
/// y recomputed when the plan keeps none.
template <typename Fn> struct BinaryTerm {
  int which, rank;
  DeviceBox lBox, rBox, yBox, dyBox;
  const float *l, *r, *y, *dy;
  PPC_HD float operator()(const int64_t *p) const {
    const Fn fn{};
    const float lv = l[broadcastOffset(lBox, p, rank)];
    const float rv = r[broadcastOffset(rBox, p, rank)];
    const float yv = y ? y[broadcastOffset(yBox, p, rank)] : fn.value(lv, rv);
    return dy[broadcastOffset(dyBox, p, rank)] * partial(fn, which, lv, rv, yv);
  }
};

template <typename Fn>
void binaryValues(Stream stream, bool contiguous, DeviceBox lBox,
                  const float *l, DeviceBox rBox, const float *r,
                  DeviceBox yBox, float *y) {
  if (contiguous) {
    launch(stream, yBox.count(),
           [=] PPC_HD(int64_t i) { y[i] = Fn().value(l[i], r[i]); });
    return;
  }
  launch(stream, yBox.count(), [=] PPC_HD(int64_t i) {
    int64_t p[kMaxRank];
    yBox.indexOf(i, p);
    y[i] = Fn().value(l[broadcastOffset(lBox, p, yBox.rank)],
                      r[broadcastOffset(rBox, p, yBox.rank)]);
  });
}

template <typename Fn>
void binaryGradients(Stream stream, int which, int64_t n, const float *l,
                     const float *r, const float *y, const float *dy,
                     float *grad) {
  launch(stream, n, [=] PPC_HD(int64_t i) {
    const Fn fn{};
    const float yv = y ? y[i] : fn.value(l[i], r[i]);
    grad[i] += dy[i] * partial(fn, which, l[i], r[i], yv);
  });
}

template <typename Fn>
KernelStatus binaryForward(const OpDesc &op, Stream stream,
                           const std::vector<KernelView> &inputs,
                           const std::vector<KernelView> &outputs) {
  if (KernelStatus s =
          expectArity(op, "views", inputs.size(), 2, outputs.size(), 1);
      !s.empty())
    return s;
  const KernelView &l = inputs[0], &r = inputs[1], &y = outputs[0];
  const bool contiguous = l.shape == y.shape && r.shape == y.shape &&
                          sameBox(l, y) && sameBox(r, y);
  if (!contiguous)
    if (KernelStatus s =
            checkBroadcast(op, y, {{"lhs", &l}, {"rhs", &r}, {"output", &y}});
        !s.empty())
      return s;
  binaryValues<Fn>(stream, contiguous, l.box, l.data, r.box, r.data, y.box,
                   y.data);
  return {};
}

/// Adds dy * d(value)/d(operand) into `grad`, the gradient of operand
/// `which`; a broadcast operand sums over the box.
template <typename Fn>
KernelStatus binaryGrad(const OpDesc &op, Stream stream, int which,
                        const KernelView &l, const KernelView &r,
                        const KernelView &y, const KernelView &dy,
                        const KernelView &grad) {
  if (l.shape == dy.shape && r.shape == dy.shape && sameBox(l, dy) &&
      sameBox(r, dy) && sameBox(y, dy) && sameBox(grad, dy)) {
    binaryGradients<Fn>(stream, which, dy.box.count(), l.data, r.data, y.data,
                        dy.data, grad.data);
    return {};
  }
  if (KernelStatus s = checkBroadcast(
          op, dy,
          {{"lhs", &l},
           {"rhs", &r},
           {"output", &y},
           {"output gradient", &dy},
           {which == 0 ? "lhs gradient" : "rhs gradient", &grad}});
      !s.empty())
    return s;
  BinaryTerm<Fn> term{which,  dy.box.rank, l.box,  r.box,  y.box,
                      dy.box, l.data,      r.data, y.data, dy.data};
  gatherAdd(stream, dy.box, grad.box, grad.data, term);
  return {};
}

template <typename Fn>
KernelStatus binaryBackward(const OpDesc &op, Stream stream,
                            const std::vector<KernelView> &inputs,
                            const std::vector<KernelView> &outputs,
                            const std::vector<KernelView> &outputGrads,
                            const std::vector<KernelView> &inputGrads) {
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
            binaryGrad<Fn>(op, stream, which, inputs[0], inputs[1], outputs[0],
                           outputGrads[0], inputGrads[which]);
        !s.empty())
      return s;
  }
  return {};
}

template <typename Fn> CudaKernel binaryKernel() {
  CudaKernel kernel;
  kernel.forward = [](const OpDesc &op, const KernelContext &,
                      ExecContext &exec, const std::vector<KernelView> &inputs,
                      const std::vector<KernelView> &outputs,
                      const std::vector<KernelView> &) {
    return binaryForward<Fn>(op, exec.stream, inputs, outputs);
  };
  kernel.backward = [](const OpDesc &op, const KernelContext &,
                       ExecContext &exec, const std::vector<KernelView> &inputs,
                       const std::vector<KernelView> &outputs,
                       const std::vector<KernelView> &outputGrads,
                       const std::vector<KernelView> &inputGrads,
                       const std::vector<KernelView> &) {
    return binaryBackward<Fn>(op, exec.stream, inputs, outputs, outputGrads,
                              inputGrads);
  };
  return kernel;
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

/// dst (+)= src * mask over the box of dst, the mask drawn at dst's global
/// flat indices; `masked` false: the mask is all ones.
void dropoutValues(Stream stream, bool masked, DropoutMask mask,
                   DeviceBox srcBox, const float *src, DeviceBox dstBox,
                   float *dst, bool accumulate) {
  launch(stream, dstBox.count(), [=] PPC_HD(int64_t i) {
    int64_t p[kMaxRank];
    dstBox.indexOf(i, p);
    float value = src[broadcastOffset(srcBox, p, dstBox.rank)];
    if (masked)
      value = value * mask.factor(dstBox.globalFlat(p));
    dst[i] = (accumulate ? dst[i] : 0.0f) + value;
  });
}

/// dst = src * mask over the box of `dst` (or dst += ... when accumulating);
/// outside training the mask is all ones.
KernelStatus applyDropout(const OpDesc &op, const KernelContext &ctx,
                          Stream stream, const KernelView &src,
                          const KernelView &dst, bool accumulate) {
  const double ratio = op.getFloat("ratio", 0.5);
  if (!(ratio >= 0 && ratio < 1))
    return op.kind + ": ratio " + std::to_string(ratio) + " must be in [0, 1)";
  if (KernelStatus s =
          checkBroadcast(op, dst, {{"source", &src}, {"destination", &dst}});
      !s.empty())
    return s;
  const DropoutMask mask(op.getInt("seed", 0), ctx.step, ratio);
  dropoutValues(stream, ctx.training && ratio != 0, mask, src.box, src.data,
                dst.box, dst.data, accumulate);
  return {};
}

CudaKernel dropoutKernel() {
  CudaKernel kernel;
  kernel.forward = [](const OpDesc &op, const KernelContext &ctx,
                      ExecContext &exec, const std::vector<KernelView> &inputs,
                      const std::vector<KernelView> &outputs,
                      const std::vector<KernelView> &) -> KernelStatus {
    if (KernelStatus s =
            expectArity(op, "views", inputs.size(), 1, outputs.size(), 1);
        !s.empty())
      return s;
    return applyDropout(op, ctx, exec.stream, inputs[0], outputs[0],
                        /*accumulate=*/false);
  };
  kernel.backward = [](const OpDesc &op, const KernelContext &ctx,
                       ExecContext &exec, const std::vector<KernelView> &,
                       const std::vector<KernelView> &,
                       const std::vector<KernelView> &outputGrads,
                       const std::vector<KernelView> &inputGrads,
                       const std::vector<KernelView> &) -> KernelStatus {
    if (KernelStatus s = expectArity(op, "gradient views", inputGrads.size(), 1,
                                     outputGrads.size(), 1);
        !s.empty())
      return s;
    if (!inputGrads[0].data)
      return {};
    // The gradient is masked like the input: same box, same mask.
    return applyDropout(op, ctx, exec.stream, outputGrads[0], inputGrads[0],
                        /*accumulate=*/true);
  };
  return kernel;
}

//===----------------------------------------------------------------------===//
// Broadcast
//===----------------------------------------------------------------------===//

void broadcastValues(Stream stream, DeviceBox xBox, const float *x,
                     DeviceBox yBox, float *y) {
  launch(stream, yBox.count(), [=] PPC_HD(int64_t i) {
    int64_t p[kMaxRank];
    yBox.indexOf(i, p);
    y[i] = x[broadcastOffset(xBox, p, yBox.rank)];
  });
}

/// dx's term of iteration point p: dy.
struct BroadcastTerm {
  DeviceBox dyBox;
  const float *dy;
  PPC_HD float operator()(const int64_t *p) const {
    return dy[broadcastOffset(dyBox, p, dyBox.rank)];
  }
};

CudaKernel broadcastKernel() {
  CudaKernel kernel;
  kernel.forward = [](const OpDesc &op, const KernelContext &,
                      ExecContext &exec, const std::vector<KernelView> &inputs,
                      const std::vector<KernelView> &outputs,
                      const std::vector<KernelView> &) -> KernelStatus {
    if (KernelStatus s =
            expectArity(op, "views", inputs.size(), 1, outputs.size(), 1);
        !s.empty())
      return s;
    const KernelView &x = inputs[0], &y = outputs[0];
    if (KernelStatus s = checkBroadcast(op, y, {{"input", &x}, {"output", &y}});
        !s.empty())
      return s;
    broadcastValues(exec.stream, x.box, x.data, y.box, y.data);
    return {};
  };
  kernel.backward = [](const OpDesc &op, const KernelContext &,
                       ExecContext &exec, const std::vector<KernelView> &,
                       const std::vector<KernelView> &,
                       const std::vector<KernelView> &outputGrads,
                       const std::vector<KernelView> &inputGrads,
                       const std::vector<KernelView> &) -> KernelStatus {
    if (KernelStatus s = expectArity(op, "gradient views", inputGrads.size(), 1,
                                     outputGrads.size(), 1);
        !s.empty())
      return s;
    const KernelView &dx = inputGrads[0];
    if (!dx.data)
      return {};
    const KernelView &dy = outputGrads[0];
    if (KernelStatus s = checkBroadcast(
            op, dy, {{"output gradient", &dy}, {"input gradient", &dx}});
        !s.empty())
      return s;
    gatherAdd(exec.stream, dy.box, dx.box, dx.data,
              BroadcastTerm{dy.box, dy.data});
    return {};
  };
  return kernel;
}

} // namespace

void registerElementwiseKernels(CudaKernelTable &table) {
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

} // namespace ppc::runtime::cuda
