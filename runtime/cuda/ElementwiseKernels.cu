//===- ElementwiseKernels.cu - (being written) -----------------------------------===//

#include "CudaKernels.h"

namespace ppc::runtime::cuda {

void registerElementwiseKernels(CudaKernelTable &) {}

} // namespace ppc::runtime::cuda
