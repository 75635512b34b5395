//===- LossKernels.cu - (being written) -----------------------------------===//

#include "CudaKernels.h"

namespace ppc::runtime::cuda {

void registerLossKernels(CudaKernelTable &) {}

} // namespace ppc::runtime::cuda
