//===- AttachMachine.cpp - attach a machine description to a module -------===//

#include "ppc/Dialect/Topology/MachineConversion.h"
#include "ppc/Dialect/Topology/TopologyDialect.h"
#include "ppc/Simulator/Machine.h"
#include "ppc/Transforms/Passes.h"

#include "llvm/Support/raw_ostream.h"

namespace ppc {
#define GEN_PASS_DEF_ATTACHMACHINE
#include "ppc/Transforms/Passes.h.inc"
} // namespace ppc

using namespace mlir;

namespace {

struct AttachMachinePass
    : public ppc::impl::AttachMachineBase<AttachMachinePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (machine == "list") {
      llvm::outs() << ppc::formatPresetList();
      return markAllAnalysesPreserved();
    }
    if (machine.empty()) {
      module.emitError() << "ppc-attach-machine needs machine=<preset or "
                            "path to a .json file>; presets: "
                         << ppc::listPresetNames();
      return signalPassFailure();
    }
    absl::StatusOr<ppc::Machine> loaded = ppc::loadMachine(machine);
    if (!loaded.ok()) {
      module.emitError() << "ppc-attach-machine: "
                         << ppc::messageOf(loaded.status());
      return signalPassFailure();
    }
    ppc::topo::attachMachine(module, *loaded, explicitGraph);
  }
};

} // namespace
