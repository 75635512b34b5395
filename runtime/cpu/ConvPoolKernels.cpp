//===- ConvPoolKernels.cpp ----------------------------------------------------===//

#include "KernelRegistry.h"

namespace ppc::runtime::cpu {

void registerConvPoolKernels(KernelTable &) {}

} // namespace ppc::runtime::cpu
