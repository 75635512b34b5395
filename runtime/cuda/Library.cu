//===- Library.cu - cuBLAS GEMMs and the cuDNN handle, or their emulation -===//

#include "Library.h"

#include "ppc/Runtime/DType.h"

#include <map>
#include <tuple>

#if !defined(PPC_CUDA_EMULATION)
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>
#endif

namespace ppc::runtime::cuda {

namespace {

#if defined(PPC_CUDA_EMULATION)

float element(const GemmOperand &x, int64_t batch, int64_t row, int64_t col) {
  if (x.transposed)
    std::swap(row, col);
  return loadAsFloat(x.type, x.data, batch * x.batchStride + row * x.ld + col);
}

/// Row i of op(A_p) times column j of op(B_p), summed in order.
float dot(const GemmOperand &a, const GemmOperand &b, int64_t p, int64_t i,
          int64_t j, int64_t k) {
  float sum = 0;
  for (int64_t l = 0; l < k; ++l)
    sum += element(a, p, i, l) * element(b, p, l, j);
  return sum;
}

class EmulatedLibrary final : public Library {
public:
  absl::Status gemm(Stream, int64_t m, int64_t n, int64_t k, float alpha,
                    const GemmOperand &a, const GemmOperand &b, float beta,
                    const GemmResult &c, int64_t batch) override {
    if (a.type != b.type)
      return absl::InvalidArgumentError("gemm: operands of different types");
    launchCount().fetch_add(1, std::memory_order_relaxed);
    for (int64_t p = 0; p < batch; ++p)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          const float sum = dot(a, b, p, i, j, k);
          const int64_t at = p * c.batchStride + i * c.ld + j;
          const float old = beta == 0 ? 0.0f : loadAsFloat(c.type, c.data, at);
          storeFromFloat(c.type, c.data, at,
                         alpha * sum + (beta == 0 ? 0.0f : beta * old));
        }
    return absl::OkStatus();
  }
  absl::Status gemmToBf16(Stream, int64_t m, int64_t n, int64_t k,
                          const GemmOperand &a, const GemmOperand &b,
                          const uint16_t *bias, uint16_t *c, int64_t ldc,
                          int64_t strideC, int64_t batch) override {
    if (a.type != DType::BF16 || b.type != DType::BF16)
      return absl::InvalidArgumentError("gemmToBf16: operands must be bf16");
    launchCount().fetch_add(1, std::memory_order_relaxed);
    for (int64_t p = 0; p < batch; ++p)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          const float sum =
              dot(a, b, p, i, j, k) + (bias ? bfloat16ToFloat(bias[j]) : 0.0f);
          c[p * strideC + i * ldc + j] = floatToBFloat16(sum);
        }
    return absl::OkStatus();
  }
  void *cudnn(Stream) override { return nullptr; }
};

#else

const char *cublasError(cublasStatus_t status) {
  return cublasGetStatusString(status);
}

/// cuBLAS's name of a floating storage type.
cudaDataType cudaType(DType type) {
  return type == DType::BF16  ? CUDA_R_16BF
         : type == DType::F16 ? CUDA_R_16F
                              : CUDA_R_32F;
}

class CublasLibrary final : public Library {
public:
  explicit CublasLibrary(cublasHandle_t handle) : handle(handle) {}
  ~CublasLibrary() override {
    if (cudnnHandle)
      cudnnDestroy(cudnnHandle);
    for (auto &[key, plan] : ltPlans)
      destroy(plan);
    if (ltWorkspace)
      cudaFree(ltWorkspace);
    if (ltHandle)
      cublasLtDestroy(ltHandle);
    cublasDestroy(handle);
  }

  absl::Status gemm(Stream stream, int64_t m, int64_t n, int64_t k, float alpha,
                    const GemmOperand &a, const GemmOperand &b, float beta,
                    const GemmResult &c, int64_t batch) override {
    if (a.type != b.type)
      return absl::InternalError("gemm: operands of different types");
    if (a.type == DType::I64 || c.type == DType::I64)
      return absl::InternalError("gemm: integer operands or result");
    if (m <= 0 || n <= 0 || batch <= 0)
      return absl::OkStatus();
    launchCount().fetch_add(1, std::memory_order_relaxed);
    cublasSetStream(handle, stream);
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the
    // stored row-major B is column-major B^T, so B goes first, untransposed
    // unless the operand is the stored matrix transposed.
    const cudaDataType type = cudaType(a.type);
    const cublasOperation_t opB = b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t opA = a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t status = cublasGemmStridedBatchedEx(
        handle, opB, opA, static_cast<int>(n), static_cast<int>(m),
        static_cast<int>(k), &alpha, b.data, type, static_cast<int>(b.ld),
        b.batchStride, a.data, type, static_cast<int>(a.ld), a.batchStride,
        &beta, c.data, cudaType(c.type), static_cast<int>(c.ld), c.batchStride,
        static_cast<int>(batch),
        a.type == DType::F32 && allowTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT);
    if (status != CUBLAS_STATUS_SUCCESS)
      return absl::InternalError(std::string("cublasGemmStridedBatchedEx: ") +
                                 cublasError(status));
    return absl::OkStatus();
  }

  absl::Status gemmToBf16(Stream stream, int64_t m, int64_t n, int64_t k,
                          const GemmOperand &a, const GemmOperand &b,
                          const uint16_t *bias, uint16_t *c, int64_t ldc,
                          int64_t strideC, int64_t batch) override {
    if (a.type != DType::BF16 || b.type != DType::BF16)
      return absl::InternalError("gemmToBf16: operands must be bf16");
    if (m <= 0 || n <= 0 || batch <= 0)
      return absl::OkStatus();
    // As in gemm: the column-major C^T = op(B)^T op(A)^T, so cuBLASLt's
    // first operand is our B; its bias runs along C^T's rows, our columns.
    const LtKey key{m,
                    n,
                    k,
                    a.ld,
                    a.transposed,
                    a.batchStride,
                    b.ld,
                    b.transposed,
                    b.batchStride,
                    ldc,
                    strideC,
                    batch,
                    bias != nullptr};
    auto it = ltPlans.find(key);
    if (it == ltPlans.end()) {
      LtPlan plan;
      if (absl::Status err = makePlan(key, plan); !err.ok()) {
        destroy(plan);
        return err;
      }
      it = ltPlans.emplace(key, plan).first;
    }
    LtPlan &plan = it->second;
    launchCount().fetch_add(1, std::memory_order_relaxed);
    if (bias)
      cublasLtMatmulDescSetAttribute(
          plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t status =
        cublasLtMatmul(ltHandle, plan.desc, &one, b.data, plan.first, a.data,
                       plan.second, &zero, c, plan.result, c, plan.result,
                       &plan.algo, ltWorkspace, kLtWorkspaceBytes, stream);
    if (status != CUBLAS_STATUS_SUCCESS)
      return absl::InternalError(std::string("cublasLtMatmul: ") +
                                 cublasError(status));
    return absl::OkStatus();
  }

  void *cudnn(Stream stream) override {
    if (!cudnnHandle && cudnnCreate(&cudnnHandle) != CUDNN_STATUS_SUCCESS)
      cudnnHandle = nullptr;
    if (cudnnHandle)
      cudnnSetStream(cudnnHandle, stream);
    return cudnnHandle;
  }

private:
  /// A bf16 GEMM's shape, layout and bias: what its cuBLASLt plan depends
  /// on (a step repeats the same GEMMs, so each is planned once).
  using LtKey =
      std::tuple<int64_t, int64_t, int64_t, int64_t, bool, int64_t, int64_t,
                 bool, int64_t, int64_t, int64_t, int64_t, bool>;
  struct LtPlan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t first = nullptr, second = nullptr, result = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  static constexpr size_t kLtWorkspaceBytes = size_t(32) << 20;

  static void destroy(LtPlan &plan) {
    if (plan.desc)
      cublasLtMatmulDescDestroy(plan.desc);
    for (cublasLtMatrixLayout_t layout : {plan.first, plan.second, plan.result})
      if (layout)
        cublasLtMatrixLayoutDestroy(layout);
    plan = LtPlan{};
  }

  /// A column-major layout of `rows` x `cols` bf16 with `batch` matrices
  /// `stride` elements apart.
  static cublasStatus_t layout(cublasLtMatrixLayout_t &out, int64_t rows,
                               int64_t cols, int64_t ld, int64_t batch,
                               int64_t stride) {
    cublasStatus_t status =
        cublasLtMatrixLayoutCreate(&out, CUDA_R_16BF, rows, cols, ld);
    if (status == CUBLAS_STATUS_SUCCESS && batch > 1) {
      const int32_t count = static_cast<int32_t>(batch);
      cublasLtMatrixLayoutSetAttribute(out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                       &count, sizeof(count));
      cublasLtMatrixLayoutSetAttribute(
          out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
          sizeof(stride));
    }
    return status;
  }

  absl::Status makePlan(const LtKey &key, LtPlan &plan) {
    const auto [m, n, k, lda, transA, strideA, ldb, transB, strideB, ldc,
                strideC, batch, hasBias] = key;
    auto fail = [](const char *call, cublasStatus_t status) {
      return absl::InternalError(std::string(call) + ": " +
                                 cublasError(status));
    };
    cublasStatus_t status;
    if (!ltHandle &&
        (status = cublasLtCreate(&ltHandle)) != CUBLAS_STATUS_SUCCESS)
      return fail("cublasLtCreate", status);
    if (!ltWorkspace &&
        cudaMalloc(&ltWorkspace, kLtWorkspaceBytes) != cudaSuccess) {
      cudaGetLastError();
      ltWorkspace = nullptr;
      return absl::InternalError(
          "cuBLASLt: out of device memory for its workspace");
    }
    if ((status = cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F,
                                           CUDA_R_32F)) !=
        CUBLAS_STATUS_SUCCESS)
      return fail("cublasLtMatmulDescCreate", status);
    const cublasOperation_t opFirst = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t opSecond = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                   &opFirst, sizeof(opFirst));
    cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                   &opSecond, sizeof(opSecond));
    if (hasBias) {
      const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
      const cudaDataType biasType = CUDA_R_16BF;
      cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                     &epilogue, sizeof(epilogue));
      cublasLtMatmulDescSetAttribute(plan.desc,
                                     CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                     &biasType, sizeof(biasType));
    }
    // Stored shapes, column-major: our B is n x k (k x n transposed), our
    // A k x m (m x k transposed), C^T n x m.
    if ((status = layout(plan.first, transB ? k : n, transB ? n : k, ldb, batch,
                         strideB)) != CUBLAS_STATUS_SUCCESS ||
        (status = layout(plan.second, transA ? m : k, transA ? k : m, lda,
                         batch, strideA)) != CUBLAS_STATUS_SUCCESS ||
        (status = layout(plan.result, n, m, ldc, batch, strideC)) !=
            CUBLAS_STATUS_SUCCESS)
      return fail("cublasLtMatrixLayoutCreate", status);
    cublasLtMatmulPreference_t preference = nullptr;
    if ((status = cublasLtMatmulPreferenceCreate(&preference)) !=
        CUBLAS_STATUS_SUCCESS)
      return fail("cublasLtMatmulPreferenceCreate", status);
    const uint64_t workspace = kLtWorkspaceBytes;
    cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
        sizeof(workspace));
    cublasLtMatmulHeuristicResult_t heuristic{};
    int found = 0;
    status = cublasLtMatmulAlgoGetHeuristic(
        ltHandle, plan.desc, plan.first, plan.second, plan.result, plan.result,
        preference, 1, &heuristic, &found);
    cublasLtMatmulPreferenceDestroy(preference);
    if (status != CUBLAS_STATUS_SUCCESS || found == 0)
      return fail("cublasLtMatmulAlgoGetHeuristic",
                  status != CUBLAS_STATUS_SUCCESS
                      ? status
                      : CUBLAS_STATUS_NOT_SUPPORTED);
    plan.algo = heuristic.algo;
    return absl::OkStatus();
  }

  cublasHandle_t handle;
  cudnnHandle_t cudnnHandle = nullptr;
  cublasLtHandle_t ltHandle = nullptr;
  void *ltWorkspace = nullptr;
  std::map<LtKey, LtPlan> ltPlans;
};

#endif

} // namespace

absl::StatusOr<std::unique_ptr<Library>> createLibrary() {
#if defined(PPC_CUDA_EMULATION)
  return std::make_unique<EmulatedLibrary>();
#else
  cublasHandle_t handle = nullptr;
  cublasStatus_t status = cublasCreate(&handle);
  if (status != CUBLAS_STATUS_SUCCESS)
    return absl::InternalError(std::string("cublasCreate: ") +
                               cublasError(status));
  return std::make_unique<CublasLibrary>(handle);
#endif
}

} // namespace ppc::runtime::cuda
