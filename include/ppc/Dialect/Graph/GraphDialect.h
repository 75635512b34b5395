//===- GraphDialect.h - ppc graph dialect -----------------------*- C++ -*-===//

#ifndef PPC_DIALECT_GRAPH_GRAPHDIALECT_H
#define PPC_DIALECT_GRAPH_GRAPHDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dialect.h"

#include "ppc/Dialect/Graph/GraphDialect.h.inc"

#endif // PPC_DIALECT_GRAPH_GRAPHDIALECT_H
