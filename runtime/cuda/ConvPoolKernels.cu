//===- ConvPoolKernels.cu - (being written) -----------------------------------===//

#include "CudaKernels.h"

namespace ppc::runtime::cuda {

void registerConvPoolKernels(CudaKernelTable &) {}

} // namespace ppc::runtime::cuda
