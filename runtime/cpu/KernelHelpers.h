//===- KernelHelpers.h - strided box walks, arity checks --------*- C++ -*-===//
//
// Private to runtime/cpu. Most kernels visit the points of an iteration box
// and read or write, per point, one element of each of a few views, at an
// index that is an affine function of the point (identity, broadcast, shift,
// stride, permutation). Such an index is a linear function of the point in
// the view's buffer, so the walk only adds strides: no per-element
// offsetOf, and the innermost dim is a tight loop. Also the dropout mask
// that ppc.dropout and ppc.attention share, and the exponentials of the
// softmax family in a form the compiler vectorizes.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_CPU_KERNELHELPERS_H
#define PPC_RUNTIME_CPU_KERNELHELPERS_H

#include "ppc/Runtime/DropoutMask.h"
#include "ppc/Runtime/DType.h"
#include "ppc/Runtime/Kernels.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace ppc::runtime::cpu {

/// e^x for the softmax family's x <= 0 (any x works): Cephes' expf (x = n
/// ln 2 + r, a degree-7 polynomial in r, 2^n from the exponent bits), plain
/// arithmetic that the compiler vectorizes, where libm's expf is a call per
/// element. Within 2 ulp of e^x on [-86.64, 88.37]; 0 below, +inf above,
/// NaN for NaN. The low bound keeps 2^n >= 2^-125, so that no lane, not
/// even one whose result is then replaced by 0, computes with denormals,
/// which cost x86 cores a hundred cycles each (a causal mask's -1e9
/// scores all land there).
inline float softmaxExp(float x) {
  constexpr float kHi = 88.3762626647949f, kLo = -86.64f;
  const bool nan = !(x == x);
  float c = x > kHi ? kHi : (x < kLo ? kLo : x);
  c = nan ? 0.0f : c;
  // Round to nearest: adding and taking away 1.5 * 2^23.
  const float n = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = c - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  float y = p * scale;
  y = x < kLo ? 0.0f : y;
  y = x > kHi ? INFINITY : y;
  return nan ? x : y;
}

/// erfc(z) for z >= 0 in float, vectorizable: Numerical Recipes' Chebyshev
/// fit, t e^(-z^2 + P(t)) with t = 1 / (1 + z / 2), fractional error below
/// 1.2e-7 in exact arithmetic (a few float ulp here) at every z, so
/// 1 + erf(-z) = erfc(z) keeps its precision far into the tail.
inline float erfcNonNegative(float z) {
  const float t = 1.0f / (1.0f + 0.5f * z);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  return t * softmaxExp(p - z * z);
}

/// Hot elementwise loops get an AVX2 clone beside the baseline x86-64 one,
/// chosen when the program loads (GCC's function multiversioning): one
/// binary for every x86-64, 8 lanes where the CPU has them. AVX2 without
/// FMA, so that both clones round alike.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PPC_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define PPC_VECTOR_CLONES
#endif

/// C = alpha op(A) op(B) + beta C, row-major, C of size m x n: oneDNN's
/// sgemm with library kernels on (twice OpenBLAS's single-thread rate on
/// AVX-512 hosts), OpenBLAS's otherwise. k == 0 scales C.
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
          float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
          float beta, float *c, int64_t ldc);

/// C (+)= op(A) op(B): gemm with alpha 1 and beta 1 (accumulate) or 0.
inline void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                 const float *a, int64_t lda, const float *b, int64_t ldb,
                 bool accumulate, float *c, int64_t ldc) {
  gemm(transA, transB, m, n, k, 1.0f, a, lda, b, ldb, accumulate ? 1.0f : 0.0f,
       c, ldc);
}

/// A GEMM operand as a kernel's view holds it: float32, or bfloat16 when a
/// backend passed a bf16 operand unwidened (TensorView::bf16).
struct GemmOperand {
  const float *f32 = nullptr;
  const uint16_t *bf16 = nullptr;
  /// The operand `offset` elements further on.
  GemmOperand operator+(int64_t offset) const {
    return {f32 ? f32 + offset : nullptr, bf16 ? bf16 + offset : nullptr};
  }
};
inline GemmOperand gemmOperand(const TensorView &view, int64_t offset = 0) {
  return GemmOperand{view.data, view.bf16} + offset;
}

/// C (+)= op(A) op(B) on operands of either type: both bf16, oneDNN's bf16
/// matmul (with library kernels on); otherwise the float32 GEMM, a bf16
/// operand widened first.
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
          GemmOperand a, int64_t lda, GemmOperand b, int64_t ldb,
          bool accumulate, float *c, int64_t ldc);

/// The float values of n elements of `x` (widened into `scratch` when it
/// is bf16).
inline const float *floatsOf(GemmOperand x, int64_t n,
                             std::vector<float> &scratch) {
  if (!x.bf16)
    return x.f32;
  scratch.resize(std::max<int64_t>(n, 1));
  toFloat(DType::BF16, x.bf16, n, scratch.data());
  return scratch.data();
}

/// out[k] = e^(x[k] - shift) for k < n (out may be x).
void expShifted(const float *x, int64_t n, float shift, float *out);

/// The sum of n floats in double, four chains at a time.
inline double sumOf(const float *x, int64_t n) {
  double a = 0, b = 0, c = 0, d = 0;
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    a += x[k];
    b += x[k + 1];
    c += x[k + 2];
    d += x[k + 3];
  }
  for (; k < n; ++k)
    a += x[k];
  return (a + b) + (c + d);
}

/// How one view dim is indexed by an iteration point p:
/// index = p[iterDim] * scale + offset, or just `offset` when iterDim < 0.
struct DimMap {
  int64_t iterDim = -1;
  int64_t scale = 1;
  int64_t offset = 0;

  static DimMap identity(int64_t d, int64_t offset = 0) {
    return {d, 1, offset};
  }
  static DimMap fixed(int64_t index) { return {-1, 1, index}; }
};

/// A view's buffer offset as a linear function of the iteration point:
/// offset = base + sum_d (p[d] - lo[d]) * strides[d].
struct StridedAccess {
  int64_t base = 0;
  std::vector<int64_t> strides;
};

/// The access of `view` from the iteration box [lo, hi) through `dims` (one
/// per view dim); nullopt if the box reaches an element the view does not
/// hold (or its rank is not that of `dims`). `scale` must be positive.
inline std::optional<StridedAccess>
stridedAccess(const TensorView &view, const std::vector<int64_t> &lo,
              const std::vector<int64_t> &hi, const std::vector<DimMap> &dims) {
  if (dims.size() != view.lo.size() || view.hi.size() != view.lo.size())
    return std::nullopt;
  StridedAccess access{0, std::vector<int64_t>(lo.size(), 0)};
  bool empty = false;
  for (size_t d = 0; d < lo.size(); ++d)
    empty |= hi[d] <= lo[d];
  std::vector<int64_t> viewStrides = view.strides();
  for (size_t i = 0; i < dims.size(); ++i) {
    const DimMap &map = dims[i];
    int64_t first = map.offset, last = map.offset;
    if (map.iterDim >= 0) {
      first += lo[map.iterDim] * map.scale;
      last += (hi[map.iterDim] - 1) * map.scale;
      access.strides[map.iterDim] += viewStrides[i] * map.scale;
    }
    if (!empty && (first < view.lo[i] || last >= view.hi[i]))
      return std::nullopt;
    access.base += (first - view.lo[i]) * viewStrides[i];
  }
  return access;
}

/// The access of a view whose dims are the iteration dims, in order.
inline std::optional<StridedAccess>
identityAccess(const TensorView &view, const std::vector<int64_t> &lo,
               const std::vector<int64_t> &hi) {
  std::vector<DimMap> dims;
  for (size_t d = 0; d < lo.size(); ++d)
    dims.push_back(DimMap::identity(static_cast<int64_t>(d)));
  return stridedAccess(view, lo, hi, dims);
}

/// Calls fn(offsets) for every point of the box with `extents`, row-major,
/// where offsets[k] is the offset of the point under accesses[k].
template <size_t N, typename Fn>
void walkStrided(const std::vector<int64_t> &extents,
                 const std::array<StridedAccess, N> &accesses, Fn &&fn) {
  for (int64_t extent : extents)
    if (extent <= 0)
      return;
  std::array<int64_t, N> offsets;
  for (size_t k = 0; k < N; ++k)
    offsets[k] = accesses[k].base;
  size_t rank = extents.size();
  if (rank == 0) {
    fn(static_cast<const std::array<int64_t, N> &>(offsets));
    return;
  }
  std::array<int64_t, N> innerStrides;
  for (size_t k = 0; k < N; ++k)
    innerStrides[k] = accesses[k].strides[rank - 1];
  std::vector<int64_t> counter(rank - 1, 0);
  while (true) {
    std::array<int64_t, N> point = offsets;
    for (int64_t i = 0; i < extents[rank - 1]; ++i) {
      fn(static_cast<const std::array<int64_t, N> &>(point));
      for (size_t k = 0; k < N; ++k)
        point[k] += innerStrides[k];
    }
    // Odometer over the outer dims.
    size_t d = rank - 1;
    while (true) {
      if (d == 0)
        return;
      --d;
      for (size_t k = 0; k < N; ++k)
        offsets[k] += accesses[k].strides[d];
      if (++counter[d] < extents[d])
        break;
      for (size_t k = 0; k < N; ++k)
        offsets[k] -= accesses[k].strides[d] * extents[d];
      counter[d] = 0;
    }
  }
}

/// Extents of the box [lo, hi).
inline std::vector<int64_t> extentsOf(const std::vector<int64_t> &lo,
                                      const std::vector<int64_t> &hi) {
  std::vector<int64_t> extents(lo.size());
  for (size_t d = 0; d < lo.size(); ++d)
    extents[d] = hi[d] - lo[d];
  return extents;
}

/// Checks the numbers of views a kernel got (`what`: "views" of operands and
/// results, or "gradient views").
inline KernelStatus expectArity(const OpDesc &op, const char *what,
                                size_t operands, size_t expectedOperands,
                                size_t results, size_t expectedResults) {
  if (operands == expectedOperands && results == expectedResults)
    return {};
  return op.kind + ": expects " + std::to_string(expectedOperands) +
         " operand and " + std::to_string(expectedResults) + " result " + what +
         ", got " + std::to_string(operands) + " and " +
         std::to_string(results);
}

inline bool sameBox(const TensorView &a, const TensorView &b) {
  return a.lo == b.lo && a.hi == b.hi;
}

/// The result grad must match the result box and each wanted operand grad
/// its operand's box: the kernels index them alike. Results may be absent
/// (a backward that does not read them): then only the operands are checked.
inline KernelStatus checkGradBoxes(const OpDesc &op,
                                   const std::vector<TensorView> &inputs,
                                   const std::vector<TensorView> &outputs,
                                   const std::vector<TensorView> &outputGrads,
                                   const std::vector<TensorView> &inputGrads) {
  if ((!outputs.empty() && outputGrads.size() != outputs.size()) ||
      inputGrads.size() != inputs.size())
    return op.kind + ": expects one grad per result and per operand";
  for (size_t i = 0; i < outputs.size(); ++i)
    if (!sameBox(outputGrads[i], outputs[i]))
      return op.kind + ": result grad box differs from the result box";
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputGrads[i].data && !sameBox(inputGrads[i], inputs[i]))
      return op.kind + ": operand grad box differs from the operand box";
  return "";
}

/// An axis attribute counted from the back when negative.
inline int64_t normalizeAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

/// The mask of `op`'s "seed" and "ratio" (`defaultRatio` when absent) at
/// the step of `ctx` (DropoutMask.h).
inline DropoutMask dropoutMaskOf(const OpDesc &op, const KernelContext &ctx,
                                 double defaultRatio = 0.5) {
  return DropoutMask(op.getInt("seed", 0), ctx.step,
                     op.getFloat("ratio", defaultRatio));
}

/// Offsets of the global flat index of the points of `view`'s box.
inline StridedAccess globalFlatAccess(const TensorView &view) {
  StridedAccess access{0, std::vector<int64_t>(view.shape.size(), 1)};
  for (size_t d = view.shape.size(); d-- > 1;)
    access.strides[d - 1] = access.strides[d] * view.shape[d];
  for (size_t d = 0; d < view.shape.size(); ++d)
    access.base += view.lo[d] * access.strides[d];
  return access;
}

} // namespace ppc::runtime::cpu

#endif // PPC_RUNTIME_CPU_KERNELHELPERS_H
