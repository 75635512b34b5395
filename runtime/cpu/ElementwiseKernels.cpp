//===- ElementwiseKernels.cpp ----------------------------------------------------===//

#include "KernelRegistry.h"

namespace ppc::runtime::cpu {

void registerElementwiseKernels(KernelTable &) {}

} // namespace ppc::runtime::cpu
