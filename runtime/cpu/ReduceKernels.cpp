//===- ReduceKernels.cpp ----------------------------------------------------===//

#include "KernelRegistry.h"

namespace ppc::runtime::cpu {

void registerReduceKernels(KernelTable &) {}

} // namespace ppc::runtime::cpu
