//===- ReduceKernels.cu - (being written) -----------------------------------===//

#include "CudaKernels.h"

namespace ppc::runtime::cuda {

void registerReduceKernels(CudaKernelTable &) {}

} // namespace ppc::runtime::cuda
