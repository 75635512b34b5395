//===- Kernels.cu - the cuda backend's kernel table -----------------------===//

#include "CudaKernels.h"

namespace ppc::runtime::cuda {

const CudaKernelTable &cudaKernels() {
  static const CudaKernelTable table = [] {
    CudaKernelTable t;
    registerContractionKernels(t);
    registerElementwiseKernels(t);
    registerDataMovementKernels(t);
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

} // namespace ppc::runtime::cuda
