//===- ppc-import-fuzzer.cpp - libFuzzer target for the ONNX importer -----===//
//
// Feeds arbitrary bytes to isOnnxModel + importOnnxModel, as ppc-opt does.
// Diagnostics are swallowed: only crashes, sanitizer reports and leaks count.
// See docs/fuzzing.md.
//
//===----------------------------------------------------------------------===//

#include "ppc/Dialect/Graph/GraphDialect.h"
#include "ppc/Import/OnnxImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef contents(reinterpret_cast<const char *>(data), size);
  if (!ppc::isOnnxModel(contents))
    return 0;
  // A fresh context per input: no state leaks from one input to the next.
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  context.loadDialect<ppc::graph::PPCDialect, mlir::func::FuncDialect>();
  mlir::ScopedDiagnosticHandler swallow(
      &context, [](mlir::Diagnostic &) { return mlir::success(); });
  ppc::OnnxImportOptions options;
  options.batchSize = 2;
  options.maxEmbeddedWeightBytes = 1 << 16;
  (void)ppc::importOnnxModel(contents, "fuzz.onnx", &context, options);
  return 0;
}
