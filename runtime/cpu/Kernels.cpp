//===- Kernels.cpp - dispatch of cpu kernels by op kind -------------------===//

#include "KernelRegistry.h"

namespace ppc::runtime {

std::vector<std::string> supportedOps() { return {}; }

} // namespace ppc::runtime
