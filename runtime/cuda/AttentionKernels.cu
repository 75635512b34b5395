//===- AttentionKernels.cu - (being written) -----------------------------------===//

#include "CudaKernels.h"

namespace ppc::runtime::cuda {

void registerAttentionKernels(CudaKernelTable &) {}

} // namespace ppc::runtime::cuda
