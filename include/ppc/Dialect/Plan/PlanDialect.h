//===- PlanDialect.h - ppc plan dialect -------------------------*- C++ -*-===//

#ifndef PPC_DIALECT_PLAN_PLANDIALECT_H
#define PPC_DIALECT_PLAN_PLANDIALECT_H

#include "mlir/IR/Dialect.h"

#include "ppc/Dialect/Plan/PlanDialect.h.inc"

#endif // PPC_DIALECT_PLAN_PLANDIALECT_H
