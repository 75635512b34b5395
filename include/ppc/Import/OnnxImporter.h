//===- OnnxImporter.h - ONNX model to ppc graph dialect ---------*- C++ -*-===//

#ifndef PPC_IMPORT_ONNXIMPORTER_H
#define PPC_IMPORT_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>

namespace ppc {

struct OnnxImportOptions {
  /// Binds the batch dim (dim 0 of every graph input whose dim 0 is
  /// symbolic).
  std::optional<int64_t> batchSize;
  /// Full static shapes for named graph inputs (`--input-shape=NAME:DxDxD`).
  llvm::StringMap<llvm::SmallVector<int64_t>> inputShapes;
  /// Embed initializer values up to this many bytes per weight as the
  /// `value` of `ppc.weight` (larger ones are found by name in the model).
  int64_t maxEmbeddedWeightBytes = 0;
  /// Fused mixture-of-experts blocks: 0 routes without dropping (PyTorch's
  /// loop: each token its own group, one slot per expert); F > 0 routes
  /// each sample of the block's [B, S, H] tokens as a group of
  /// ceil(top_k * S * F / E) slots per expert, dropping choices over them
  /// (GShard, Switch).
  double moeCapacityFactor = 0;
};

/// True if `contents` looks like an ONNX model: a ModelProto in binary
/// protobuf, or ONNX's textual syntax (`<ir_version: ...> name (...) => ...`).
bool isOnnxModel(llvm::StringRef contents);

/// Imports an ONNX model into a module of `func.func @main` over ppc ops.
/// `contents` is the file's bytes, `path` its name (for external data and
/// diagnostics). Errors are reported to the context's diagnostic engine and
/// yield a null module.
mlir::OwningOpRef<mlir::ModuleOp>
importOnnxModel(llvm::StringRef contents, llvm::StringRef path,
                mlir::MLIRContext *context, const OnnxImportOptions &options);

/// Registers `--batch-size`, `--input-shape`, `--embed-weights-max-bytes`
/// and `--moe-capacity-factor` as command-line options, and reads them
/// back.
void registerOnnxImportCLOptions();
OnnxImportOptions getOnnxImportOptionsFromCL();

} // namespace ppc

#endif // PPC_IMPORT_ONNXIMPORTER_H
