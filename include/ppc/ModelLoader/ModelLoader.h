//===- ModelLoader.h - a model file as the simulator's graph ----*- C++ -*-===//
//
// For tools, benchmarks, tests and the Python module: reads an ONNX model
// (imported with the given options) or a ppc MLIR module, recognized by
// content, as a module or as the sim::Graph of its first function.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_MODELLOADER_MODELLOADER_H
#define PPC_MODELLOADER_MODELLOADER_H

#include "ppc/Import/OnnxImporter.h"
#include "ppc/Simulator/Graph.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/SourceMgr.h"

#include <optional>
#include <string>

namespace ppc {

/// The module of the model at `path`: an ONNX model imported with `options`,
/// else MLIR parsed (with `sourceMgr` holding its buffer, for locations).
/// Null on failure: `error` is set when the file cannot be read, else the
/// diagnostics went to `context`'s handler. `isOnnx`, when given, says which
/// the file was.
mlir::OwningOpRef<mlir::ModuleOp>
loadModule(const std::string &path, const OnnxImportOptions &options,
           mlir::MLIRContext *context, llvm::SourceMgr &sourceMgr,
           std::string &error, bool *isOnnx = nullptr);

/// The sim::Graph of the first function of the model at `path` (ONNX or
/// MLIR, recognized by content). On failure returns nullopt and sets `error`
/// to the diagnostics.
std::optional<sim::Graph> loadSimGraph(const std::string &path,
                                       const OnnxImportOptions &options,
                                       std::string &error);

} // namespace ppc

#endif // PPC_MODELLOADER_MODELLOADER_H
