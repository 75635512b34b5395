//===- Library.cu - cuBLAS GEMMs and the cuDNN handle, or their emulation -===//

#include "Library.h"

#include "ppc/Runtime/DType.h"

#if !defined(PPC_CUDA_EMULATION)
#include <cublas_v2.h>
#include <cudnn.h>
#endif

namespace ppc::runtime::cuda {

namespace {

#if defined(PPC_CUDA_EMULATION)

float element(const GemmOperand &x, int64_t batch, int64_t row, int64_t col) {
  if (x.transposed)
    std::swap(row, col);
  const int64_t at = batch * x.batchStride + row * x.ld + col;
  return x.bf16 ? bfloat16ToFloat(static_cast<const uint16_t *>(x.data)[at])
                : static_cast<const float *>(x.data)[at];
}

class EmulatedLibrary final : public Library {
public:
  std::string gemm(Stream, int64_t m, int64_t n, int64_t k, float alpha,
                   const GemmOperand &a, const GemmOperand &b, float beta,
                   float *c, int64_t ldc, int64_t strideC,
                   int64_t batch) override {
    if (a.bf16 != b.bf16)
      return "gemm: operands of different types";
    for (int64_t p = 0; p < batch; ++p)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          float sum = 0;
          for (int64_t l = 0; l < k; ++l)
            sum += element(a, p, i, l) * element(b, p, l, j);
          float &out = c[p * strideC + i * ldc + j];
          out = alpha * sum + (beta == 0 ? 0.0f : beta * out);
        }
    return "";
  }
  void *cudnn(Stream) override { return nullptr; }
};

#else

const char *cublasError(cublasStatus_t status) {
  return cublasGetStatusString(status);
}

class CublasLibrary final : public Library {
public:
  explicit CublasLibrary(cublasHandle_t handle) : handle(handle) {}
  ~CublasLibrary() override {
    if (cudnnHandle)
      cudnnDestroy(cudnnHandle);
    cublasDestroy(handle);
  }

  std::string gemm(Stream stream, int64_t m, int64_t n, int64_t k, float alpha,
                   const GemmOperand &a, const GemmOperand &b, float beta,
                   float *c, int64_t ldc, int64_t strideC,
                   int64_t batch) override {
    if (a.bf16 != b.bf16)
      return "gemm: operands of different types";
    if (m <= 0 || n <= 0 || batch <= 0)
      return "";
    cublasSetStream(handle, stream);
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the
    // stored row-major B is column-major B^T, so B goes first, untransposed
    // unless the operand is the stored matrix transposed.
    const cudaDataType type = a.bf16 ? CUDA_R_16BF : CUDA_R_32F;
    const cublasOperation_t opB = b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t opA = a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t status = cublasGemmStridedBatchedEx(
        handle, opB, opA, static_cast<int>(n), static_cast<int>(m),
        static_cast<int>(k), &alpha, b.data, type, static_cast<int>(b.ld),
        b.batchStride, a.data, type, static_cast<int>(a.ld), a.batchStride,
        &beta, c, CUDA_R_32F, static_cast<int>(ldc), strideC,
        static_cast<int>(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (status != CUBLAS_STATUS_SUCCESS)
      return std::string("cublasGemmStridedBatchedEx: ") + cublasError(status);
    return "";
  }

  void *cudnn(Stream stream) override {
    if (!cudnnHandle && cudnnCreate(&cudnnHandle) != CUDNN_STATUS_SUCCESS)
      cudnnHandle = nullptr;
    if (cudnnHandle)
      cudnnSetStream(cudnnHandle, stream);
    return cudnnHandle;
  }

private:
  cublasHandle_t handle;
  cudnnHandle_t cudnnHandle = nullptr;
};

#endif

} // namespace

std::unique_ptr<Library> createLibrary(std::string &error) {
  error.clear();
#if defined(PPC_CUDA_EMULATION)
  return std::make_unique<EmulatedLibrary>();
#else
  cublasHandle_t handle = nullptr;
  cublasStatus_t status = cublasCreate(&handle);
  if (status != CUBLAS_STATUS_SUCCESS) {
    error = std::string("cublasCreate: ") + cublasError(status);
    return nullptr;
  }
  return std::make_unique<CublasLibrary>(handle);
#endif
}

} // namespace ppc::runtime::cuda
