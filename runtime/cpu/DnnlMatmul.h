//===- DnnlMatmul.h - bf16 GEMM through oneDNN ------------------*- C++ -*-===//
//
// Private to runtime/cpu. C (+)= op(A) op(B) with A and B bfloat16 and C
// float32, row-major with leading dimensions, through oneDNN's matmul
// primitive (products and sums in float32, as PyTorch's bf16 matmuls on CPU
// run): on CPUs with AVX512-BF16 about twice the float32 GEMM's rate, and
// half its operand bytes. Primitives are cached per shape. False when
// oneDNN offers only its reference implementation for the shape (the caller
// widens the operands and runs the float32 GEMM instead).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_CPU_DNNLMATMUL_H
#define PPC_RUNTIME_CPU_DNNLMATMUL_H

#include <cstdint>

namespace ppc::runtime::cpu {

bool dnnlGemmBf16(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                  const uint16_t *a, int64_t lda, const uint16_t *b,
                  int64_t ldb, bool accumulate, float *c, int64_t ldc);

/// bf16 GEMMs run through oneDNN so far in this process (tests check that
/// the path was taken).
int64_t dnnlGemmBf16Calls();

} // namespace ppc::runtime::cpu

#endif // PPC_RUNTIME_CPU_DNNLMATMUL_H
