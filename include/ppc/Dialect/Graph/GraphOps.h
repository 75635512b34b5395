//===- GraphOps.h - ppc graph dialect ops -----------------------*- C++ -*-===//

#ifndef PPC_DIALECT_GRAPH_GRAPHOPS_H
#define PPC_DIALECT_GRAPH_GRAPHOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "ppc/Dialect/Graph/GraphDialect.h"
#include "ppc/Dialect/Graph/ParallelizableOpInterface.h"
#include "ppc/Support/MachineView.h"

#include "ppc/Dialect/Graph/GraphEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "ppc/Dialect/Graph/GraphAttrs.h.inc"

#define GET_OP_CLASSES
#include "ppc/Dialect/Graph/GraphOps.h.inc"

namespace ppc::graph {
/// True for the parallel ops that --ppc-materialize-resharding inserts
/// (repartition, combine, replicate, reduce): data movement, not compute.
bool isParallelOp(mlir::Operation *op);
/// `value` with the parallel ops that define it looked through.
mlir::Value stripParallelOps(mlir::Value value);
} // namespace ppc::graph

#endif // PPC_DIALECT_GRAPH_GRAPHOPS_H
