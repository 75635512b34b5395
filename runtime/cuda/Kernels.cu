//===- Kernels.cu - the cuda backend's kernel table -----------------------===//

#include "CudaKernels.h"
#include "Library.h"

namespace ppc::runtime::cuda {

const CudaKernelTable &cudaKernels() {
  static const CudaKernelTable table = [] {
    CudaKernelTable t;
    registerContractionKernels(t);
    registerElementwiseKernels(t);
    registerDataMovementKernels(t);
    registerMoeKernels(t);
    registerReduceKernels(t);
    registerNormKernels(t);
    registerLossKernels(t);
    registerConvPoolKernels(t);
    registerAttentionKernels(t);
    return t;
  }();
  return table;
}

std::vector<std::string> cudaKernelOps() {
  std::vector<std::string> ops;
  for (const auto &entry : cudaKernels())
    ops.push_back(entry.first);
  return ops;
}

void zeroFloats(Stream stream, float *data, int64_t n) {
  launch(stream, n, [=] PPC_HD(int64_t i) { data[i] = 0.0f; });
}

bool writesGradient(ExecContext &ctx, const KernelView &grad, bool cover) {
  if (!grad.overwrite || !grad.present())
    return false;
  if (cover)
    return true;
  const Elements e = grad.elements;
  launch(ctx.stream, grad.count(), [=] PPC_HD(int64_t i) { e[i] = 0.0f; });
  return false;
}

GemmOperand gemmOperand(const KernelView &view, int64_t offset, int64_t ld,
                        bool transposed, int64_t batchStride) {
  GemmOperand g;
  g.data = view.at(offset);
  g.type = view.elements.type;
  g.ld = ld;
  g.transposed = transposed;
  g.batchStride = batchStride;
  return g;
}

GemmResult gemmResult(const KernelView &view, int64_t offset, int64_t ld,
                      int64_t batchStride) {
  return {view.at(offset), view.elements.type, ld, batchStride};
}

KernelView widenedToFloat(ExecContext &ctx, const KernelView &view) {
  if (!view.elements || view.elements.type == DType::F32)
    return view;
  KernelView wide = view;
  const int64_t n = view.count();
  float *data = ctx.workspace ? ctx.workspace->floats(n) : nullptr;
  wide.bf16 = nullptr;
  wide.storage = nullptr;
  wide.data = data;
  wide.elements = data ? floatElements(data) : Elements();
  if (data) {
    const Elements src = view.elements;
    launch(ctx.stream, n, [=] PPC_HD(int64_t i) { data[i] = src[i]; });
  }
  return wide;
}

absl::Status gemmInto(ExecContext &ctx, int64_t m, int64_t n, int64_t k,
                      float alpha, const GemmOperand &a, const GemmOperand &b,
                      float beta, const GemmResult &c, int64_t batch) {
  if (a.type != DType::F32 || c.type == DType::F32)
    return ctx.library->gemm(ctx.stream, m, n, k, alpha, a, b, beta, c, batch);
  const int64_t count = m * n * batch;
  float *block = ctx.workspace ? ctx.workspace->floats(count) : nullptr;
  if (!block)
    return absl::ResourceExhaustedError(
        "out of device memory for a float32 result");
  // Element (p, i, j) of the block is C_p's (i, j).
  const Elements to{c.data, c.type};
  const int64_t ld = c.ld, stride = c.batchStride;
  auto at = [=] PPC_HD(int64_t e) {
    return (e / (m * n)) * stride + ((e / n) % m) * ld + e % n;
  };
  if (beta != 0)
    launch(ctx.stream, count, [=] PPC_HD(int64_t e) { block[e] = to[at(e)]; });
  PPC_RETURN_IF_ERROR(ctx.library->gemm(ctx.stream, m, n, k, alpha, a, b, beta,
                                        floatResult(block, n, m * n), batch));
  launch(ctx.stream, count, [=] PPC_HD(int64_t e) { to[at(e)] = block[e]; });
  return absl::OkStatus();
}

} // namespace ppc::runtime::cuda
