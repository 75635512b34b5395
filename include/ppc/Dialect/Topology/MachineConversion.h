//===- MachineConversion.h - topo dialect <-> ppc::Machine ------*- C++ -*-===//
//
// The bridge between the topo dialect (what a module carries) and the
// MLIR-free ppc::Machine (what the simulator and search read).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_DIALECT_TOPOLOGY_MACHINECONVERSION_H
#define PPC_DIALECT_TOPOLOGY_MACHINECONVERSION_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "ppc/Dialect/Topology/TopologyOps.h"
#include "ppc/Simulator/Machine.h"

namespace ppc::topo {

DeviceAttr getDeviceAttr(mlir::MLIRContext *context,
                         const ppc::DeviceSpec &spec);
LinkAttr getLinkAttr(mlir::MLIRContext *context, const ppc::LinkSpec &spec);
ClusterAttr getClusterAttr(mlir::MLIRContext *context,
                           const ppc::ClusterSpec &spec);

ppc::DeviceSpec toDeviceSpec(DeviceAttr attr);
ppc::LinkSpec toLinkSpec(LinkAttr attr);
ppc::ClusterSpec toClusterSpec(ClusterAttr attr);

/// The explicit graph of `machine` as a topo.machine op named `name`.
MachineOp buildMachineOp(mlir::OpBuilder &builder, mlir::Location loc,
                         const ppc::Machine &machine, llvm::StringRef name);
/// The machine a (verified) topo.machine op describes.
ppc::Machine toMachine(MachineOp op);

/// The machine attached to the module enclosing `op` (attribute
/// `ppc.machine`), or nullopt when there is none or it does not resolve.
std::optional<ppc::Machine> lookupMachine(mlir::Operation *op);

/// Attaches `machine` to `module`, replacing any machine already attached:
/// a #topo.cluster attribute when the machine has the compact form and
/// `explicitGraph` is false, else a topo.machine op (named after the
/// machine) that the attribute refers to.
void attachMachine(mlir::ModuleOp module, const ppc::Machine &machine,
                   bool explicitGraph = false);

} // namespace ppc::topo

#endif // PPC_DIALECT_TOPOLOGY_MACHINECONVERSION_H
