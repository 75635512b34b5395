//===- InitAll.cpp - register every ppc dialect, pass and pipeline --------===//

#include "ppc/InitAll.h"

#include "ppc/Conversion/Passes.h"
#include "ppc/Dialect/Graph/GraphDialect.h"
#include "ppc/Dialect/Plan/PlanDialect.h"
#include "ppc/Dialect/Topology/TopologyDialect.h"
#include "ppc/Interop/Passes.h"
#include "ppc/Pipelines/Pipelines.h"
#include "ppc/Target/PlanExport.h"
#include "ppc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/Passes.h"

void ppc::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<ppc::graph::PPCDialect, ppc::topo::TopologyDialect,
                  ppc::plan::PlanDialect,
                  mlir::func::FuncDialect>();
  ppc::registerUpstreamDialects(registry);
}

void ppc::registerAllPasses() {
  ppc::registerPPCPasses();
  ppc::registerPPCConversionPasses();
  ppc::registerPPCTargetPasses();
  ppc::registerPPCInteropPasses();
  ppc::registerPPCPipelines();
  // The generic cleanups people compose with ppc's own passes.
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
}
