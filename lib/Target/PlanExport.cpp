//===- PlanExport.cpp - plan dialect <-> plan file ------------------------===//

#include "ppc/Target/PlanExport.h"

#include "ppc/Runtime/PlanIO.h"

#include "mlir/Pass/Pass.h"

using namespace mlir;

namespace ppc {

#define GEN_PASS_DEF_EXPORTPLAN
#include "ppc/Target/Passes.h.inc"

FailureOr<ppc::planfile::Plan> exportPlan(plan::PlanOp plan) {
  return plan.emitError("exportPlan: not implemented yet");
}

OwningOpRef<ModuleOp> importPlan(const ppc::planfile::Plan &,
                                 MLIRContext *context) {
  return ModuleOp::create(UnknownLoc::get(context));
}

namespace {
struct ExportPlanPass : impl::ExportPlanBase<ExportPlanPass> {
  using ExportPlanBase::ExportPlanBase;
  void runOnOperation() override {}
};
} // namespace

} // namespace ppc
