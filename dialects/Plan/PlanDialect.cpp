//===- PlanDialect.cpp - ppc plan dialect ---------------------------------===//

#include "ppc/Dialect/Plan/PlanDialect.h"
#include "ppc/Dialect/Plan/PlanOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace ppc::plan;

#include "ppc/Dialect/Plan/PlanDialect.cpp.inc"
#include "ppc/Dialect/Plan/PlanEnums.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "ppc/Dialect/Plan/PlanTypes.cpp.inc"

void PlanDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "ppc/Dialect/Plan/PlanTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "ppc/Dialect/Plan/PlanOps.cpp.inc"
      >();
}
