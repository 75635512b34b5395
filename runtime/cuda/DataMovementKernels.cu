//===- DataMovementKernels.cu - (being written) -----------------------------------===//

#include "CudaKernels.h"

namespace ppc::runtime::cuda {

void registerDataMovementKernels(CudaKernelTable &) {}

} // namespace ppc::runtime::cuda
