//===- ppc-opt.cpp - ppc's optimizer driver -------------------------------===//
//
// An mlir-opt style driver with every ppc dialect, pass and pipeline
// registered. The input may be MLIR (text or bytecode) or an ONNX model
// (binary protobuf or ONNX's textual syntax), recognized by its content: an
// ONNX model is imported first, then the pass pipeline runs on the result.
//
//===----------------------------------------------------------------------===//

#include "ppc/Import/OnnxImporter.h"
#include "ppc/InitAll.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

/// Imports an ONNX model and returns it as MLIR bytecode for MlirOptMain,
/// or null after printing the importer's diagnostics.
static std::unique_ptr<llvm::MemoryBuffer>
importToBuffer(const llvm::MemoryBuffer &input, StringRef path,
               DialectRegistry &registry) {
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context, llvm::errs());
  OwningOpRef<ModuleOp> module = ppc::importOnnxModel(
      input.getBuffer(), path, &context, ppc::getOnnxImportOptionsFromCL());
  if (!module)
    return nullptr;
  std::string bytes;
  llvm::raw_string_ostream os(bytes);
  if (failed(writeBytecodeToFile(*module, os)))
    return nullptr;
  return llvm::MemoryBuffer::getMemBufferCopy(bytes, path);
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  DialectRegistry registry;
  ppc::registerAllDialects(registry);
  ppc::registerAllPasses();
  ppc::registerOnnxImportCLOptions();

  auto [inputPath, outputPath] = registerAndParseCLIOptions(
      argc, argv, "ppc optimizer driver: ONNX or MLIR in, ppc graphs out\n",
      registry);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  // A user error names what is wrong; dumping the whole module after it
  // (MLIR's default) buries the message. Still available on request.
  auto &options = llvm::cl::getRegisteredOptions();
  if (auto *printOp = static_cast<llvm::cl::opt<bool> *>(
          options.lookup("mlir-print-op-on-diagnostic"));
      printOp && printOp->getNumOccurrences() == 0)
    *printOp = false;

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input = openInputFile(inputPath, &error);
  if (!input) {
    llvm::errs() << "ppc-opt: " << error << "\n";
    return 1;
  }
  if (ppc::isOnnxModel(input->getBuffer())) {
    input = importToBuffer(*input, inputPath, registry);
    if (!input)
      return 1;
  }

  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputPath, &error);
  if (!output) {
    llvm::errs() << "ppc-opt: " << error << "\n";
    return 1;
  }
  if (failed(MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
