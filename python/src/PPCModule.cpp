//===- PPCModule.cpp - the ppc._ppc Python extension ----------------------===//
//
// What the `ppc` Python package (python/ppc/__init__.py) calls. A model is
// loaded as the tools load it (ppc::loadModule: ONNX by content, imported
// with the batch size, else MLIR) and a textual pipeline of ppc's registered
// passes runs on it: the same passes and pipelines (ppc-auto-parallel,
// ppc-simulate, ...) that ppc-opt runs from its command line. The lists
// Python shows (machine presets, search algorithms, ppc-auto-parallel's
// options) are read from where they are defined.
//
// Errors are absl::Status inside and Python exceptions outside: bad input
// (an unreadable model, a pipeline that does not parse, an unknown machine)
// is ValueError, a pass that fails is RuntimeError; both carry ppc's
// diagnostics. The GIL is released while a pipeline runs.
//
//===----------------------------------------------------------------------===//

#include "ppc/Import/OnnxWeights.h"
#include "ppc/InitAll.h"
#include "ppc/ModelLoader/ModelLoader.h"
#include "ppc/PassOptionCheck.h"
#include "ppc/Pipelines/Pipelines.h"
#include "ppc/Simulator/Machine.h"
#include "ppc/Support/CaptureOutput.h"
#include "ppc/Transforms/Passes.h"
#include "ppc/Version.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

#include "absl/status/status.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace py = pybind11;
using namespace mlir;

namespace {

using NamedList = std::vector<std::pair<std::string, std::string>>;

/// The dialects and passes ppc-opt registers, once per process.
const DialectRegistry &getRegistry() {
  static DialectRegistry registry;
  static std::once_flag once;
  std::call_once(once, [] {
    ppc::registerAllDialects(registry);
    ppc::registerAllPasses();
  });
  return registry;
}

/// Parses `pipeline` into `pm`. A bad option value is reported by llvm::cl
/// on llvm::errs() alone (the parser's error stream only gets "failed to add
/// ..."), so stderr goes to a temporary file while parsing, and what it
/// received becomes part of the error. One parse at a time: the descriptor
/// is the process's.
absl::Status parsePipeline(StringRef pipeline, OpPassManager &pm) {
  static std::mutex stderrMutex;
  std::lock_guard<std::mutex> lock(stderrMutex);
  std::string errors;
  llvm::raw_string_ostream errorStream(errors);
  LogicalResult parsed = failure();
  auto parse = [&] {
    parsed = parsePassPipeline(pipeline, pm, errorStream);
    llvm::errs().flush();
  };
  llvm::errs().flush();
  std::string printed;
  if (!ppc::captureFileDescriptor(STDERR_FILENO, parse, printed))
    parse();
  if (succeeded(parsed)) {
    llvm::errs() << printed;
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(printed + errors);
}

/// Loads the model at `path` and runs `pipeline` (passes of a module pass
/// manager, as in `--pass-pipeline="builtin.module(...)"`) on it. On success
/// `warnings` holds the diagnostics that did not stop it.
absl::Status runPipeline(const std::string &path,
                         std::optional<int64_t> batchSize,
                         const std::string &pipeline, std::string &warnings) {
  MLIRContext context(getRegistry());
  context.loadAllAvailableDialects();
  // As in ppc-opt: an error is the message, not a dump of the whole module.
  context.printOpOnDiagnostic(false);
  std::string diagnostics;
  llvm::raw_string_ostream diagnosticStream(diagnostics);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context, diagnosticStream);

  ppc::OnnxImportOptions importOptions;
  importOptions.batchSize = batchSize;
  std::string error;
  bool isOnnx = false;
  OwningOpRef<ModuleOp> module =
      ppc::loadModule(path, importOptions, &context, sourceMgr, error, &isOnnx);
  if (!module)
    return absl::InvalidArgumentError(error.empty() ? diagnostics : error);
  if (batchSize && !isOnnx)
    return absl::InvalidArgumentError(
        path + ": batch_size applies to ONNX models; an MLIR module's "
               "shapes are fixed");

  PassManager pm(&context, ModuleOp::getOperationName());
  if (absl::Status parsed = parsePipeline(pipeline, pm); !parsed.ok())
    return parsed;
  if (failed(pm.run(*module)))
    return absl::AbortedError(diagnostics);
  warnings = std::move(diagnostics);
  return absl::OkStatus();
}

/// While alive, what the library writes to the process's stderr (the
/// search's progress and summary lines, llvm::errs()) goes to Python's
/// sys.stderr as it comes, through a pipe and a thread that takes the GIL
/// to write: a notebook or a redirected sys.stderr sees it. Made and
/// destroyed with the GIL released.
class StderrToPython {
public:
  StderrToPython() {
    llvm::errs().flush();
    int fds[2];
    if (::pipe(fds) != 0)
      return;
    saved = ::dup(STDERR_FILENO);
    if (saved < 0 || ::dup2(fds[1], STDERR_FILENO) < 0) {
      ::close(fds[0]);
      ::close(fds[1]);
      if (saved >= 0)
        ::close(saved);
      saved = -1;
      return;
    }
    ::close(fds[1]);
    readEnd = fds[0];
    reader = std::thread([this] {
      char buffer[4096];
      for (ssize_t n; (n = ::read(readEnd, buffer, sizeof buffer)) > 0;) {
        py::gil_scoped_acquire gil;
        try {
          py::object stderrObject = py::module_::import("sys").attr("stderr");
          stderrObject.attr("write")(
              py::str(std::string(buffer, static_cast<size_t>(n))));
          stderrObject.attr("flush")();
        } catch (const py::error_already_set &) {
          // A closed or odd sys.stderr: the text is dropped, not the run.
        }
      }
    });
  }
  ~StderrToPython() {
    if (saved < 0)
      return;
    llvm::errs().flush();
    // Restoring fd 2 closes the pipe's last write end: the reader sees EOF.
    ::dup2(saved, STDERR_FILENO);
    ::close(saved);
    reader.join();
    ::close(readEnd);
  }
  StderrToPython(const StderrToPython &) = delete;
  StderrToPython &operator=(const StderrToPython &) = delete;

private:
  int saved = -1, readEnd = -1;
  std::thread reader;
};

/// Raises `status` as ValueError (bad input) or RuntimeError.
void throwIfError(const absl::Status &status) {
  if (status.ok())
    return;
  std::string message(status.message());
  while (!message.empty() && message.back() == '\n')
    message.pop_back();
  if (status.code() == absl::StatusCode::kInvalidArgument)
    throw py::value_error(message);
  throw std::runtime_error(message);
}

/// The machine a preset name or machine file describes; raises ValueError
/// with what is wrong.
ppc::Machine loadMachineOrRaise(const std::string &presetOrPath) {
  absl::StatusOr<ppc::Machine> machine = ppc::loadMachine(presetOrPath);
  if (!machine.ok())
    throwIfError(absl::InvalidArgumentError(ppc::messageOf(machine.status())));
  return std::move(*machine);
}

/// ppc-auto-parallel's options with their descriptions, sorted by name:
/// PassOptions keeps them in the llvm::cl::SubCommand it derives from, which
/// a derived class may read.
struct AutoParallelOptionList : ppc::AutoParallelOptions {
  NamedList list() const {
    NamedList options;
    for (const auto &entry : OptionsMap)
      options.emplace_back(entry.first.str(), entry.second->HelpStr.str());
    std::sort(options.begin(), options.end());
    return options;
  }
};

} // namespace

PYBIND11_MODULE(_ppc, m) {
  m.doc() = "ppc's library: run its pass pipelines on a model (see the ppc "
            "package for the API)";
  m.attr("version") = PPC_VERSION_STRING;

  m.def(
      "machines",
      [] {
        NamedList presets;
        for (const ppc::PresetInfo &preset : ppc::listPresets())
          presets.emplace_back(preset.name, preset.description);
        return presets;
      },
      "The machine presets: (name or pattern, description) pairs.");

  m.def("search_algorithms", &ppc::searchAlgorithms,
        "What search= takes: (name, description) pairs.");

  m.def(
      "auto_parallel_options", [] { return AutoParallelOptionList().list(); },
      "ppc-auto-parallel's options: (name, description) pairs.");

  m.def(
      "check_machine",
      [](const std::string &presetOrPath) { loadMachineOrRaise(presetOrPath); },
      py::arg("machine"),
      "Raises ValueError unless `machine` is a preset or a machine file.");

  m.def(
      "read_onnx_weights",
      [](const std::string &path) {
        std::string error;
        std::unique_ptr<ppc::OnnxWeightReader> reader =
            ppc::OnnxWeightReader::open(path, error);
        if (!reader)
          throwIfError(absl::InvalidArgumentError(error));
        // name -> (shape, float32 values as bytes): numpy.frombuffer on the
        // Python side, with no numpy dependency here.
        std::vector<std::tuple<std::string, std::vector<int64_t>, py::bytes>>
            weights;
        for (auto &[name, shape] : reader->floatInitializers()) {
          std::vector<float> values;
          if (std::optional<std::string> problem =
                  reader->read(name, shape, values))
            throwIfError(absl::InvalidArgumentError(*problem));
          weights.emplace_back(
              name, shape,
              py::bytes(reinterpret_cast<const char *>(values.data()),
                        values.size() * sizeof(float)));
        }
        return weights;
      },
      py::arg("path"),
      "The floating-point initializers of the ONNX model at `path`: (name, "
      "shape, float32 values as bytes) triples.");

  m.def(
      "machine_devices",
      [](const std::string &presetOrPath) {
        return loadMachineOrRaise(presetOrPath).numDevices();
      },
      py::arg("machine"),
      "The number of devices of a preset or machine file: the ranks a plan "
      "for it runs on.");

  m.def(
      "check_pass_options",
      [](const std::string &name, std::string options) {
        getRegistry();
        std::vector<std::string> errors = ppc::checkPassOptions(name, options);
        std::string message;
        for (const std::string &error : errors)
          message += (message.empty() ? "" : "\n") + error;
        if (!message.empty())
          throwIfError(absl::InvalidArgumentError(message));
        return options;
      },
      py::arg("name"), py::arg("options"),
      "The options (`key=value ...`) of the pass or pipeline `name` with `_` "
      "read as `-` in their names; raises ValueError, naming the pass and "
      "what it takes, for an option it does not have or a value outside an "
      "option's list.");

  m.def(
      "run_pipeline",
      [](const std::string &path, std::optional<int64_t> batchSize,
         const std::string &pipeline) {
        std::string warnings;
        absl::Status status;
        {
          py::gil_scoped_release release;
          StderrToPython forward;
          status = runPipeline(path, batchSize, pipeline, warnings);
        }
        throwIfError(status);
        return warnings;
      },
      py::arg("path"), py::arg("batch_size"), py::arg("pipeline"),
      "Loads the model at `path` (ONNX or MLIR) and runs the pass pipeline "
      "on it; returns the warnings it reported.");
}
