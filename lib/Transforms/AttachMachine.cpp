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
    std::string error;
    std::optional<ppc::Machine> loaded = ppc::loadMachine(machine, error);
    if (!loaded) {
      module.emitError() << "ppc-attach-machine: " << error;
      return signalPassFailure();
    }
    ppc::topo::attachMachine(module, *loaded, explicitGraph);
  }
};

} // namespace
