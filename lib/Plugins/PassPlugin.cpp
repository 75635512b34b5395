//===- PassPlugin.cpp - ppc's passes for upstream mlir-opt ----------------===//
//
// `mlir-opt --load-pass-plugin=PPCPassPlugin.so` registers ppc's graph
// passes (--ppc-op-summary, --ppc-attach-machine, --ppc-simulate,
// --ppc-search, ...) and the interop passes (--ppc-import-upstream,
// --ppc-export-shard). Their code and ppc's dialects live in
// PPCDialectPlugin.so, which this library links.
//
//===----------------------------------------------------------------------===//

#include "ppc/Interop/Passes.h"
#include "ppc/Transforms/Passes.h"

#include "mlir/Tools/Plugins/PassPlugin.h"

extern "C" LLVM_ATTRIBUTE_WEAK mlir::PassPluginLibraryInfo
mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "PPCPassPlugin", LLVM_VERSION_STRING, []() {
            ppc::registerPPCPasses();
            ppc::registerPPCInteropPasses();
          }};
}
