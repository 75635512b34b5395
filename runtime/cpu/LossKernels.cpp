//===- LossKernels.cpp ----------------------------------------------------===//

#include "KernelRegistry.h"

namespace ppc::runtime::cpu {

void registerLossKernels(KernelTable &) {}

} // namespace ppc::runtime::cpu
