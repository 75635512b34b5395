//===- ModelLoader.cpp - a model file as the simulator's graph ------------===//

#include "ppc/ModelLoader/ModelLoader.h"

#include "ppc/Analysis/SimGraph.h"
#include "ppc/InitAll.h"
#include "ppc/Interop/Passes.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

OwningOpRef<ModuleOp> ppc::loadModule(const std::string &path,
                                      const OnnxImportOptions &options,
                                      MLIRContext *context,
                                      llvm::SourceMgr &sourceMgr,
                                      std::string &error, bool *isOnnx) {
  std::unique_ptr<llvm::MemoryBuffer> file = openInputFile(path, &error);
  if (!file)
    return nullptr;
  bool onnx = isOnnxModel(file->getBuffer());
  if (isOnnx)
    *isOnnx = onnx;
  if (onnx)
    return importOnnxModel(file->getBuffer(), path, context, options);
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, context);
  // A TOSA or linalg function from an MLIR front end: as a ppc graph.
  PassManager pm(context);
  pm.addPass(createImportUpstream());
  if (module && failed(pm.run(*module)))
    return nullptr;
  return module;
}

std::optional<ppc::sim::Graph>
ppc::loadSimGraph(const std::string &path, const OnnxImportOptions &options,
                  std::string &error) {
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  llvm::raw_string_ostream diagnostics(error);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context, diagnostics);

  OwningOpRef<ModuleOp> module =
      loadModule(path, options, &context, sourceMgr, error);
  if (!module)
    return std::nullopt;
  auto funcs = module->getOps<func::FuncOp>();
  if (funcs.empty()) {
    error = path + ": no function to simulate";
    return std::nullopt;
  }
  FailureOr<sim::Graph> graph = buildSimGraph(*funcs.begin());
  if (failed(graph))
    return std::nullopt;
  return std::move(*graph);
}
