//===- DataMovementKernels.cpp ----------------------------------------------------===//

#include "KernelRegistry.h"

namespace ppc::runtime::cpu {

void registerDataMovementKernels(KernelTable &) {}

} // namespace ppc::runtime::cpu
