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

/// Writes the values of every weight of `message` that has none in the plan
/// (WEIGHT and FROZEN tensors other than DATA) from the ONNX model at
/// `modelPath`, found by initializer name (a tensor `stacked_from` several:
/// those, stacked), to the weights file `weightsPath` (raw float32, written
/// atomically), and rebinds those tensors to it (WEIGHTS_FILE, offset,
/// count, checksum; their rule becomes `seed_init`). Does nothing when no
/// tensor needs values.
mlir::LogicalResult writeWeightsFile(ppc::planfile::Plan &message,
                                     llvm::StringRef modelPath,
                                     llvm::StringRef weightsPath,
                                     mlir::Location loc);

#define GEN_PASS_DECL
#include "ppc/Target/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "ppc/Target/Passes.h.inc"

} // namespace ppc

#endif // PPC_TARGET_PLANEXPORT_H
