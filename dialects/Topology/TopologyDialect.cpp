//===- TopologyDialect.cpp - ppc machine description dialect -------------===//

#include "ppc/Dialect/Topology/TopologyDialect.h"

#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace ppc::topo;

#include "ppc/Dialect/Topology/TopologyDialect.cpp.inc"

void TopologyDialect::initialize() {}

std::optional<int64_t> ppc::topo::lookupMachineDeviceCount(Operation *op) {
  (void)op;
  return std::nullopt;
}
