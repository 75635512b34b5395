//===- TopologyDialect.h - ppc machine description dialect ------*- C++ -*-===//

#ifndef PPC_DIALECT_TOPOLOGY_TOPOLOGYDIALECT_H
#define PPC_DIALECT_TOPOLOGY_TOPOLOGYDIALECT_H

#include "mlir/IR/Dialect.h"
#include "mlir/IR/Operation.h"

#include <optional>

#include "ppc/Dialect/Topology/TopologyDialect.h.inc"

namespace ppc::topo {
/// Name of the module attribute that holds the target machine.
inline constexpr llvm::StringLiteral kMachineAttrName = "ppc.machine";

/// Number of devices of the machine attached to the module enclosing `op`
/// (attribute `ppc.machine`), or nullopt when none is attached.
std::optional<int64_t> lookupMachineDeviceCount(mlir::Operation *op);
} // namespace ppc::topo

#endif // PPC_DIALECT_TOPOLOGY_TOPOLOGYDIALECT_H
