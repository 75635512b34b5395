//===- Library.h - the vendor libraries behind one seam ---------*- C++ -*-===//
//
// Private to runtime/cuda. What the cuda backend takes from NVIDIA's
// libraries rather than its own kernels: GEMMs (cuBLAS; cuBLASLt for bf16
// results with a fused bias) and the cuDNN
// handle (convolutions, ConvPoolKernels.cu). In the host emulation
// (Device.h) the GEMM is a plain loop and there is no cuDNN handle, so
// every kernel built on them runs, slowly, without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_CUDA_LIBRARY_H
#define PPC_RUNTIME_CUDA_LIBRARY_H

#include "Device.h"

#include "ppc/Runtime/DType.h"
#include "ppc/Support/Status.h"

#include <cstdint>
#include <memory>
#include <string>

namespace ppc::runtime::cuda {

/// One operand of a row-major GEMM: `data` holds the stored matrix in
/// `type` (float32, bf16 or f16) with leading dimension `ld`; `transposed`:
/// the operand is the stored matrix transposed; consecutive batch matrices
/// lie `batchStride` elements apart (0: the same matrix for every batch).
struct GemmOperand {
  const void *data = nullptr;
  DType type = DType::F32;
  int64_t ld = 0;
  bool transposed = false;
  int64_t batchStride = 0;
};

/// A float32 operand at `data`.
inline GemmOperand floatOperand(const float *data, int64_t ld, bool transposed,
                                int64_t batchStride) {
  GemmOperand g;
  g.data = data;
  g.ld = ld;
  g.transposed = transposed;
  g.batchStride = batchStride;
  return g;
}

/// A GEMM's result: row-major m x n matrices in `type` at `data`, leading
/// dimension `ld`, consecutive batches `batchStride` elements apart.
struct GemmResult {
  void *data = nullptr;
  DType type = DType::F32;
  int64_t ld = 0;
  int64_t batchStride = 0;
};

/// A float32 result at `data`.
inline GemmResult floatResult(float *data, int64_t ld, int64_t batchStride) {
  return {data, DType::F32, ld, batchStride};
}

class Library {
public:
  virtual ~Library() = default;
  /// Float32 GEMMs and convolutions may run on TF32 tensor cores
  /// (BackendOptions::allowTf32); else exact float32.
  bool allowTf32 = false;
  /// For b in [0, batch): C_b = alpha * op(A_b) op(B_b) + beta * C_b,
  /// accumulated in float32 (16-bit operands on tensor cores, float32 ones
  /// too as TF32 where allowTf32) and rounded
  /// once to C's type (C_b read in its type where beta is not 0, so a
  /// 16-bit gradient summed into is rounded after the sum). A and B must
  /// have the same type.
  virtual absl::Status gemm(Stream stream, int64_t m, int64_t n, int64_t k,
                            float alpha, const GemmOperand &a,
                            const GemmOperand &b, float beta,
                            const GemmResult &c, int64_t batch) = 0;
  /// For b in [0, batch): C_b = op(A_b) op(B_b) + bias, A and B bf16, C_b
  /// an m x n row-major bf16 matrix at c + b * strideC (leading dimension
  /// ldc), rounded once from the float32 accumulation plus `bias` (n bf16
  /// values added to every row; null: none), as the float32 gemm followed
  /// by a rounding would (bf16 results written as a bf16 training step
  /// writes them, with no float32 result in between).
  virtual absl::Status gemmToBf16(Stream stream, int64_t m, int64_t n,
                                  int64_t k, const GemmOperand &a,
                                  const GemmOperand &b, const uint16_t *bias,
                                  uint16_t *c, int64_t ldc, int64_t strideC,
                                  int64_t batch) = 0;
  /// The cudnnHandle_t (null in emulation), made on first use.
  virtual void *cudnn(Stream stream) = 0;
};

/// cuBLAS (and cuDNN's handle) on the current device, or the emulation's
/// loops, or why it cannot start.
absl::StatusOr<std::unique_ptr<Library>> createLibrary();

} // namespace ppc::runtime::cuda

#endif // PPC_RUNTIME_CUDA_LIBRARY_H
