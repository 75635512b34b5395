// Placeholder replaced by the importer implementation.
#include "ppc/Import/OnnxImporter.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/CommandLine.h"
using namespace mlir;
namespace ppc {
bool isOnnxModel(llvm::StringRef) { return false; }
OwningOpRef<ModuleOp> importOnnxModel(llvm::StringRef, llvm::StringRef,
                                      MLIRContext *ctx,
                                      const OnnxImportOptions &) {
  emitError(UnknownLoc::get(ctx)) << "ONNX import not built yet";
  return nullptr;
}
void registerOnnxImportCLOptions() {}
OnnxImportOptions getOnnxImportOptionsFromCL() { return {}; }
} // namespace ppc
