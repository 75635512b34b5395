//===- NormKernels.cu - (being written) -----------------------------------===//

#include "CudaKernels.h"

namespace ppc::runtime::cuda {

void registerNormKernels(CudaKernelTable &) {}

} // namespace ppc::runtime::cuda
