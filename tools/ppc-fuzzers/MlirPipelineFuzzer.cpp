//===- MlirPipelineFuzzer.cpp - libFuzzer target for MLIR input -----------===//
//
// Feeds arbitrary bytes to ppc-opt's path for MLIR text, in process: parse
// with every ppc dialect, verify, attach a machine if the module has none
// (cpux2), for one input in three the pipeline search (stage and
// micro-batch counts from the input's size), then ppc-simulate and
// ppc-lower-to-plan (no file written).
// Diagnostics are swallowed: only crashes, sanitizer reports, timeouts and
// memory blow-ups count. See docs/fuzzing.md.
//
//===----------------------------------------------------------------------===//

#include "ppc/Dialect/Topology/MachineConversion.h"
#include "ppc/Dialect/Topology/TopologyDialect.h"
#include "ppc/InitAll.h"
#include "ppc/Pipelines/Pipelines.h"
#include "ppc/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <cstddef>
#include <cstdint>
#include <string>

using namespace mlir;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const DialectRegistry registry = [] {
    DialectRegistry r;
    ppc::registerAllDialects(r);
    return r;
  }();
  static const ppc::Machine machine = *ppc::lookupPreset("cpux2");

  // A fresh context per input: no state leaks from one input to the next.
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  context.loadAllAvailableDialects();
  ScopedDiagnosticHandler swallow(&context,
                                  [](Diagnostic &) { return success(); });
  // MLIR's lexer reads the byte after the buffer (files are loaded with a
  // terminating NUL); libFuzzer's data has none, so parse a copy.
  std::string text(reinterpret_cast<const char *>(data), size);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
  if (!module || failed(verify(*module)))
    return 0;
  if (!(*module)->hasAttr(ppc::topo::kMachineAttrName))
    ppc::topo::attachMachine(*module, machine, /*explicitGraph=*/false);

  PassManager pm(&context);
  // One input in three also goes through the pipeline search, with stage
  // and micro-batch counts from the input's size (0: searched), so its
  // refusals and its candidates are fuzzed too; the others keep their own
  // strategies for the lowering.
  if (size % 3 == 0) {
    ppc::SearchStrategyOptions search;
    search.algorithm = "pipeline";
    search.budget = "20";
    search.threads = 1;
    search.progress = "off";
    search.stages = static_cast<int64_t>(size / 3 % 5);
    search.microbatches = static_cast<int64_t>(size / 15 % 5);
    search.stageDp = size % 2 == 0;
    pm.addPass(ppc::createSearchStrategy(search));
  }
  ppc::SimulateOptions simulate;
  simulate.outputPath = "/dev/null";
  pm.addPass(ppc::createSimulate(simulate));
  ppc::LowerToPlanOptions lower;
  ppc::buildLowerToPlanPipeline(pm, lower);
  (void)pm.run(*module);
  return 0;
}
