//===- DialectPlugin.cpp - ppc's dialects for upstream mlir-opt -----------===//
//
// `mlir-opt --load-dialect-plugin=PPCDialectPlugin.so` registers ppc's graph,
// topology and plan dialects, so upstream tools parse and print ppc IR. The
// library also holds the code of ppc's passes, which PPCPassPlugin.so
// registers: one copy of each dialect per process.
//
//===----------------------------------------------------------------------===//

#include "ppc/Dialect/Graph/GraphDialect.h"
#include "ppc/Dialect/Plan/PlanDialect.h"
#include "ppc/Dialect/Topology/TopologyDialect.h"

#include "mlir/Tools/Plugins/DialectPlugin.h"

extern "C" LLVM_ATTRIBUTE_WEAK mlir::DialectPluginLibraryInfo
mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "PPCDialectPlugin", LLVM_VERSION_STRING,
          [](mlir::DialectRegistry *registry) {
            registry->insert<ppc::graph::PPCDialect, ppc::topo::TopologyDialect,
                             ppc::plan::PlanDialect>();
          }};
}
