//===- TopologyOps.h - topo dialect attributes and ops ----------*- C++ -*-===//

#ifndef PPC_DIALECT_TOPOLOGY_TOPOLOGYOPS_H
#define PPC_DIALECT_TOPOLOGY_TOPOLOGYOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "ppc/Dialect/Topology/TopologyDialect.h"
#include "ppc/Simulator/Machine.h"

#define GET_ATTRDEF_CLASSES
#include "ppc/Dialect/Topology/TopologyAttrs.h.inc"

#define GET_OP_CLASSES
#include "ppc/Dialect/Topology/TopologyOps.h.inc"

#endif // PPC_DIALECT_TOPOLOGY_TOPOLOGYOPS_H
