//===- AttachMachine.cpp - attach a machine description to a module -------===//

#include "ppc/Dialect/Topology/MachineConversion.h"
#include "ppc/Dialect/Topology/TopologyDialect.h"
#include "ppc/Simulator/Machine.h"
#include "ppc/Transforms/Passes.h"

#include "llvm/Support/FormatVariadic.h"
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
      llvm::outs() << "machine presets (or give a path to a machine JSON "
                      "file, see docs/machine-format.md):\n";
      for (const ppc::PresetInfo &preset : ppc::listPresets())
        llvm::outs() << llvm::formatv("  {0,-12} {1}\n", preset.name,
                                      preset.description);
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
