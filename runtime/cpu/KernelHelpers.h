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

#include "KernelChecks.h"
#include "KernelMath.h"
#include "ppc/Runtime/DType.h"
#include "ppc/Runtime/DropoutMask.h"
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
