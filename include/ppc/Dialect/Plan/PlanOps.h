//===- PlanOps.h - ppc plan dialect ops -------------------------*- C++ -*-===//

#ifndef PPC_DIALECT_PLAN_PLANOPS_H
#define PPC_DIALECT_PLAN_PLANOPS_H

#include "ppc/Dialect/Plan/PlanDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/RegionKindInterface.h"
#include "mlir/IR/SymbolTable.h"

#include "ppc/Dialect/Plan/PlanEnums.h.inc"

#define GET_TYPEDEF_CLASSES
#include "ppc/Dialect/Plan/PlanTypes.h.inc"

#define GET_OP_CLASSES
#include "ppc/Dialect/Plan/PlanOps.h.inc"

#endif // PPC_DIALECT_PLAN_PLANOPS_H
