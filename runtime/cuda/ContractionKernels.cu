//===- ContractionKernels.cu - (being written) -----------------------------------===//

#include "CudaKernels.h"

namespace ppc::runtime::cuda {

void registerContractionKernels(CudaKernelTable &) {}

} // namespace ppc::runtime::cuda
