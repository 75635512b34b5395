//===- Kernels.cpp - dispatch of cpu kernels by op kind -------------------===//

#include "DnnlMatmul.h"
#include "KernelHelpers.h"
#include "KernelRegistry.h"
#include "ppc/Runtime/DType.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

#include <cblas.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

extern "C" void openblas_set_num_threads(int numThreads);

namespace ppc::runtime {

namespace cpu {
PPC_VECTOR_CLONES void expShifted(const float *x, int64_t n, float shift,
                                  float *out) {
  for (int64_t k = 0; k < n; ++k)
    out[k] = softmaxExp(x[k] - shift);
}
} // namespace cpu

/// PPC_REFERENCE_KERNELS=1 starts a process with the reference kernels
/// only: how the kernel tests run once more against their oracles.
static bool libraryKernelsByDefault() {
  const char *reference = std::getenv("PPC_REFERENCE_KERNELS");
  return !(reference && std::string(reference) == "1");
}

static std::atomic<bool> useLibraryKernels{libraryKernelsByDefault()};

namespace cpu {
void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
          float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
          float beta, float *c, int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) { // C = beta * C; BLAS may skip the scaling for k = 0.
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  if (useLibraryKernels &&
      dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', m, n, k, alpha, a, lda,
                 b, ldb, beta, c, ldc) == dnnl_success)
    return;
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(ldc));
}

void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
          GemmOperand a, int64_t lda, GemmOperand b, int64_t ldb,
          bool accumulate, float *c, int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  if (a.bf16 && b.bf16 && k > 0 && useLibraryKernels &&
      dnnlGemmBf16(transA, transB, m, n, k, a.bf16, lda, b.bf16, ldb,
                   accumulate, c, ldc))
    return;
  // The float32 GEMM, a bf16 operand widened first (the stored matrix:
  // rows of `ld` elements, the last one only as long as the GEMM reads).
  static thread_local std::vector<float> wideA, wideB;
  auto widen = [](GemmOperand x, bool trans, int64_t rows, int64_t cols,
                  int64_t ld, std::vector<float> &wide) {
    if (!x.bf16)
      return x.f32;
    if (trans)
      std::swap(rows, cols);
    const int64_t count = rows > 0 ? (rows - 1) * ld + cols : 0;
    wide.resize(std::max<int64_t>(count, 1));
    toFloat(DType::BF16, x.bf16, count, wide.data());
    return static_cast<const float *>(wide.data());
  };
  const float *af = widen(a, transA, m, k, lda, wideA);
  const float *bf = widen(b, transB, k, n, ldb, wideB);
  gemm(transA, transB, m, n, k, af, lda, bf, ldb, accumulate, c, ldc);
}
} // namespace cpu

void setLibraryKernels(bool on) { useLibraryKernels = on; }
bool libraryKernels() { return useLibraryKernels; }

void kernelGemm(int64_t m, int64_t n, int64_t k, const float *a, const float *b,
                float *c) {
  cpu::gemm(false, false, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
}

void setKernelThreads(int threads) {
  openblas_set_num_threads(threads);
  omp_set_num_threads(threads);
}

int64_t TensorView::numElements() const {
  int64_t n = 1;
  for (size_t d = 0; d < lo.size(); ++d)
    n *= std::max<int64_t>(0, hi[d] - lo[d]);
  return n;
}

std::vector<int64_t> TensorView::strides() const {
  std::vector<int64_t> s(lo.size(), 1);
  for (size_t d = lo.size(); d-- > 1;)
    s[d - 1] = s[d] * (hi[d] - lo[d]);
  return s;
}

int64_t TensorView::offsetOf(const std::vector<int64_t> &index) const {
  int64_t offset = 0;
  for (size_t d = 0; d < lo.size(); ++d)
    offset = offset * (hi[d] - lo[d]) + (index[d] - lo[d]);
  return offset;
}

bool TensorView::contains(const std::vector<int64_t> &index) const {
  for (size_t d = 0; d < lo.size(); ++d)
    if (index[d] < lo[d] || index[d] >= hi[d])
      return false;
  return true;
}

bool TensorView::isWhole() const {
  for (size_t d = 0; d < lo.size(); ++d)
    if (lo[d] != 0 || hi[d] != shape[d])
      return false;
  return true;
}

bool OpDesc::has(const std::string &name) const {
  return attributes.count(name) != 0;
}

int64_t OpDesc::getInt(const std::string &name, int64_t fallback) const {
  auto it = attributes.find(name);
  if (it == attributes.end())
    return fallback;
  if (auto *i = std::get_if<int64_t>(&it->second))
    return *i;
  if (auto *f = std::get_if<double>(&it->second))
    return static_cast<int64_t>(*f);
  return fallback;
}

double OpDesc::getFloat(const std::string &name, double fallback) const {
  auto it = attributes.find(name);
  if (it == attributes.end())
    return fallback;
  if (auto *f = std::get_if<double>(&it->second))
    return *f;
  if (auto *i = std::get_if<int64_t>(&it->second))
    return static_cast<double>(*i);
  return fallback;
}

std::string OpDesc::getString(const std::string &name,
                              const std::string &fallback) const {
  auto it = attributes.find(name);
  if (it == attributes.end())
    return fallback;
  if (auto *s = std::get_if<std::string>(&it->second))
    return *s;
  return fallback;
}

std::vector<int64_t> OpDesc::getInts(const std::string &name,
                                     std::vector<int64_t> fallback) const {
  auto it = attributes.find(name);
  if (it == attributes.end())
    return fallback;
  if (auto *v = std::get_if<std::vector<int64_t>>(&it->second))
    return *v;
  return fallback;
}

static const cpu::KernelTable &kernelTable() {
  static const cpu::KernelTable table = [] {
    cpu::KernelTable t;
    cpu::registerContractionKernels(t);
    cpu::registerAttentionKernels(t);
    cpu::registerConvPoolKernels(t);
    cpu::registerNormKernels(t);
    cpu::registerLossKernels(t);
    cpu::registerElementwiseKernels(t);
    cpu::registerReduceKernels(t);
    cpu::registerDataMovementKernels(t);
    cpu::registerMoeKernels(t);
    return t;
  }();
  return table;
}

static const cpu::KernelImpl *lookup(const std::string &kind) {
  auto it = kernelTable().find(kind);
  return it == kernelTable().end() ? nullptr : &it->second;
}

static absl::Status unsupported(const std::string &kind, const char *what) {
  return absl::InvalidArgumentError(kind + ": the cpu backend has no " + what +
                                    " kernel for this op");
}

std::vector<std::vector<int64_t>>
scratchShapes(const OpDesc &op, const std::vector<TensorView> &inputs,
              bool backward) {
  const cpu::KernelImpl *impl = lookup(op.kind);
  if (!impl || !impl->scratch)
    return {};
  return impl->scratch(op, inputs, backward);
}

int32_t numStages(const OpDesc &op, const std::vector<TensorView> &inputs,
                  bool training, bool backward) {
  const cpu::KernelImpl *impl = lookup(op.kind);
  if (impl && impl->stages)
    return impl->stages(op, inputs, backward);
  if (!impl || (!training && !impl->stagedInInference))
    return 1;
  if (backward && impl->backwardStages >= 0)
    return impl->backwardStages;
  return impl->trainingStages;
}

bool readsBf16(const OpDesc &op) {
  const cpu::KernelImpl *impl = lookup(op.kind);
  return impl && impl->readsBf16;
}

std::vector<int> updatedOperands(const OpDesc &op, bool training) {
  const cpu::KernelImpl *impl = lookup(op.kind);
  if (!impl || !training)
    return {};
  return impl->updatedOperands;
}

absl::Status forward(const OpDesc &op, const KernelContext &ctx,
                     const std::vector<TensorView> &inputs,
                     std::vector<TensorView> &outputs,
                     std::vector<TensorView> &scratch) {
  const cpu::KernelImpl *impl = lookup(op.kind);
  if (!impl || !impl->forward)
    return unsupported(op.kind, "forward");
  return impl->forward(op, ctx, inputs, outputs, scratch);
}

absl::Status backward(const OpDesc &op, const KernelContext &ctx,
                      const std::vector<TensorView> &inputs,
                      const std::vector<TensorView> &outputs,
                      const std::vector<TensorView> &outputGrads,
                      std::vector<TensorView> &inputGrads,
                      std::vector<TensorView> &scratch) {
  const cpu::KernelImpl *impl = lookup(op.kind);
  if (!impl || !impl->backward)
    return unsupported(op.kind, "backward");
  return impl->backward(op, ctx, inputs, outputs, outputGrads, inputGrads,
                        scratch);
}

std::vector<std::string> supportedOps() {
  std::vector<std::string> ops;
  for (const auto &entry : kernelTable())
    ops.push_back(entry.first);
  return ops;
}

} // namespace ppc::runtime
