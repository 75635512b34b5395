//===- PlanExport.h - plan dialect <-> plan file ----------------*- C++ -*-===//

#ifndef PPC_TARGET_PLANEXPORT_H
#define PPC_TARGET_PLANEXPORT_H

#include "ppc/Dialect/Plan/PlanOps.h"
#include "ppc/Runtime/plan.pb.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace ppc {

/// The protobuf form of `plan` (buffers numbered per program in order of
/// allocation). Emits an error at the offending op and fails on IR the file
/// format cannot hold.
mlir::FailureOr<ppc::planfile::Plan> exportPlan(plan::PlanOp plan);

/// The plan dialect form of a plan file's message, inside a new module.
mlir::OwningOpRef<mlir::ModuleOp> importPlan(const ppc::planfile::Plan &message,
                                             mlir::MLIRContext *context);

#define GEN_PASS_DECL
#include "ppc/Target/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "ppc/Target/Passes.h.inc"

} // namespace ppc

#endif // PPC_TARGET_PLANEXPORT_H
