//===- ModelLoader.h - a model file as the simulator's graph ----*- C++ -*-===//
//
// For tools, benchmarks and tests that want a model's sim::Graph without an
// MLIR pipeline of their own: reads an ONNX model (imported with the given
// options) or a ppc MLIR module, and builds the graph of its first function.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_MODELLOADER_MODELLOADER_H
#define PPC_MODELLOADER_MODELLOADER_H

#include "ppc/Import/OnnxImporter.h"
#include "ppc/Simulator/Graph.h"

#include <optional>
#include <string>

namespace ppc {

/// The sim::Graph of the first function of the model at `path` (ONNX or
/// MLIR, recognized by content). On failure returns nullopt and sets `error`
/// to the diagnostics.
std::optional<sim::Graph> loadSimGraph(const std::string &path,
                                       const OnnxImportOptions &options,
                                       std::string &error);

} // namespace ppc

#endif // PPC_MODELLOADER_MODELLOADER_H
