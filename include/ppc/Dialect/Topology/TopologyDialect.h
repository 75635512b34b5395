//===- TopologyDialect.h - ppc machine description dialect ------*- C++ -*-===//

#ifndef PPC_DIALECT_TOPOLOGY_TOPOLOGYDIALECT_H
#define PPC_DIALECT_TOPOLOGY_TOPOLOGYDIALECT_H

#include "mlir/IR/Dialect.h"
#include "mlir/IR/Operation.h"

#include <optional>

#include "ppc/Dialect/Topology/TopologyDialect.h.inc"

namespace ppc::topo {
/// Name of the module attribute that holds the target machine: a
/// #topo.cluster attribute, or a symbol reference to a topo.machine op of
/// the module.
inline constexpr llvm::StringLiteral kMachineAttrName = "ppc.machine";

/// Number of devices of the machine attached to the module enclosing `op`
/// (attribute `ppc.machine`, on the nearest enclosing op that has it), or
/// nullopt when none is attached.
std::optional<int64_t> lookupMachineDeviceCount(mlir::Operation *op);

/// Verifies the value of a `ppc.machine` attribute on `op`. The graph
/// dialect owns the `ppc.` attribute namespace and delegates to this.
llvm::LogicalResult verifyMachineAttribute(mlir::Operation *op,
                                           mlir::Attribute value);
} // namespace ppc::topo

#endif // PPC_DIALECT_TOPOLOGY_TOPOLOGYDIALECT_H
