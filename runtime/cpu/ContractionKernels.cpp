//===- ContractionKernels.cpp ----------------------------------------------------===//

#include "KernelRegistry.h"

namespace ppc::runtime::cpu {

void registerContractionKernels(KernelTable &) {}

} // namespace ppc::runtime::cpu
