//===- ppc-opt.cpp - ppc's optimizer driver -------------------------------===//
//
// An mlir-opt style driver with every ppc dialect, pass and pipeline
// registered. The input may be MLIR (text or bytecode) or an ONNX model
// (binary protobuf or ONNX's textual syntax), recognized by its content: an
// ONNX model is imported first, then the pass pipeline runs on the result.
// `--list-machines` (or `machine=list` in a pass option) prints the machine
// presets without reading an input; `--version` names ppc's version. A
// module of more than kTerminalLines lines is not printed to a terminal
// unless `-o -` asks for it: the passes' reports are what a person at a
// terminal reads, and 30 KB of plan IR would scroll them away.
//
//===----------------------------------------------------------------------===//

#include "ppc/Import/OnnxImporter.h"
#include "ppc/InitAll.h"
#include "ppc/PassOptionCheck.h"
#include "ppc/Simulator/Machine.h"
#include "ppc/Version.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Regex.h"
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

/// True if a pass or pipeline option on the command line asks for the
/// machine presets (`--ppc-attach-machine=machine=list`, also inside
/// `--ppc-auto-parallel="..."` or `--pass-pipeline`): printing them needs no
/// input, so ppc-opt must not wait for one on stdin.
static bool asksForMachineList(int argc, char **argv) {
  static const llvm::Regex machineList(
      "ppc-(attach-machine|auto-parallel).*(^|[ ={])machine=list($|[ }])");
  for (int i = 1; i < argc; ++i)
    if (machineList.match(argv[i]))
      return true;
  return false;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  DialectRegistry registry;
  ppc::registerAllDialects(registry);
  ppc::registerAllPasses();
  ppc::registerOnnxImportCLOptions();

  llvm::cl::opt<bool> listMachines(
      "list-machines",
      llvm::cl::desc("Print the machine presets and exit (no input is read)"),
      llvm::cl::init(false));
  llvm::cl::AddExtraVersionPrinter([](llvm::raw_ostream &os) {
    os << "ppc version " << PPC_VERSION_STRING << "\n";
  });
  // A pass's error is one line naming the problem; MLIR's default of
  // appending the whole failing op (for a module pass, the whole module)
  // buries it. --mlir-print-op-on-diagnostic brings the dump back. (The
  // option exists once MLIRContext's options are registered; registering
  // them again in registerAndParseCLIOptions is a no-op.)
  registerMLIRContextCLOptions();
  if (auto *printOp = static_cast<llvm::cl::opt<bool> *>(
          llvm::cl::getRegisteredOptions().lookup(
              "mlir-print-op-on-diagnostic")))
    printOp->setInitialValue(false);

  // Pass options first, with errors that name the pass and what it takes.
  std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<std::string> optionErrors =
      ppc::checkCommandLinePassOptions(args);
  for (const std::string &error : optionErrors)
    llvm::errs() << "ppc-opt: " << error << "\n";
  if (!optionErrors.empty())
    return 1;
  std::vector<char *> checkedArgv = {argv[0]};
  for (std::string &arg : args)
    checkedArgv.push_back(arg.data());
  checkedArgv.push_back(nullptr);
  auto [inputPath, outputPath] = registerAndParseCLIOptions(
      argc, checkedArgv.data(),
      "ppc optimizer driver: ONNX or MLIR in, ppc graphs out\n", registry);
  if (listMachines || asksForMachineList(argc, argv)) {
    llvm::outs() << ppc::formatPresetList();
    return 0;
  }
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();

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
  auto *outputOption = llvm::cl::getRegisteredOptions().lookup("o");
  bool toTerminal = outputPath == "-" &&
                    (!outputOption || outputOption->getNumOccurrences() == 0) &&
                    llvm::sys::Process::StandardOutIsDisplayed();
  if (!toTerminal) {
    if (failed(MlirOptMain(output->os(), std::move(input), registry, config)))
      return 1;
    output->keep();
    return 0;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  LogicalResult result = MlirOptMain(os, std::move(input), registry, config);
  constexpr size_t kTerminalLines = 200;
  size_t lines = llvm::count(text, '\n');
  if (lines <= kTerminalLines)
    output->os() << text;
  else
    llvm::errs() << "ppc-opt: the resulting module (" << lines
                 << " lines) is not printed to a terminal; write it with -o "
                    "FILE, or print it with -o -\n";
  output->keep();
  return failed(result) ? 1 : 0;
}
