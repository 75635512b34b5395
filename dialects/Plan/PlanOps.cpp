//===- PlanOps.cpp - ppc plan dialect ops ---------------------------------===//

#include "ppc/Dialect/Plan/PlanOps.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace ppc::plan;

// Verifiers: placeholders until the dialect's verifiers land.
LogicalResult PlanOp::verify() { return success(); }
LogicalResult TensorOp::verify() { return success(); }
LogicalResult GraphOp::verify() { return success(); }
LogicalResult ProgramOp::verify() { return success(); }
LogicalResult AllocOp::verify() { return success(); }
LogicalResult CopyOp::verify() { return success(); }
LogicalResult SendOp::verify() { return success(); }
LogicalResult RecvOp::verify() { return success(); }
LogicalResult KernelOp::verify() { return success(); }
LogicalResult KernelBackwardOp::verify() { return success(); }
LogicalResult CollectiveOp::verify() { return success(); }
LogicalResult UpdateOp::verify() { return success(); }
LogicalResult OutputOp::verify() { return success(); }

#define GET_OP_CLASSES
#include "ppc/Dialect/Plan/PlanOps.cpp.inc"
