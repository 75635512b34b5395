//===- NormKernels.cpp ----------------------------------------------------===//

#include "KernelRegistry.h"

namespace ppc::runtime::cpu {

void registerNormKernels(KernelTable &) {}

} // namespace ppc::runtime::cpu
