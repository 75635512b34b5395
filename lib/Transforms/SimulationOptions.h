//===- SimulationOptions.h - options ppc-simulate and ppc-search share -*- C++
//-*-===//
//
// Private to lib/Transforms: the SimulationOptions of Passes.td read into
// one sim::SimOptions, checked the same way for both passes, and the
// quantities ("16GiB", "30s") their options are written in.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_LIB_TRANSFORMS_SIMULATIONOPTIONS_H
#define PPC_LIB_TRANSFORMS_SIMULATIONOPTIONS_H

#include "ppc/Simulator/Simulator.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace ppc::transforms_detail {

/// A positive number followed by an optional unit: "1.5m" -> (1.5, "m").
struct Quantity {
  llvm::StringRef number;
  double value;
  llvm::StringRef unit;
};
std::optional<Quantity> splitQuantity(llvm::StringRef text);

/// "16GiB", "16G" (binary), "16GB" (decimal), "500MiB", "123456" (bytes).
std::optional<int64_t> parseBytes(llvm::StringRef text);

/// The sim::SimOptions a pass's SimulationOptions ask for. On a bad value
/// emits an error at `loc` naming `passName` and the option, and fails.
/// The pass declares this a friend: its options are protected members.
template <typename Pass>
mlir::FailureOr<sim::SimOptions>
readSimulationOptions(const Pass &pass, mlir::Location loc,
                      llvm::StringRef passName) {
  if (pass.gradBucketBytes < 0)
    return mlir::emitError(loc)
           << passName << ": grad-bucket-bytes must be >= 0, got "
           << static_cast<int64_t>(pass.gradBucketBytes);
  sim::SimOptions options;
  options.optimizer = pass.optimizer;
  options.gradSync = pass.gradSync;
  options.overlapGradSync = pass.overlap;
  options.overlapParamGather = pass.overlapParamGather;
  options.overlapTensorParallel = pass.overlapTensorParallel;
  options.regatherInputs = pass.regatherInputs;
  options.fp32Gradients = pass.fp32Gradients;
  options.gradBucketBytes = pass.gradBucketBytes;
  if (!pass.memoryLimit.empty()) {
    std::optional<int64_t> bytes = parseBytes(pass.memoryLimit);
    if (!bytes || *bytes <= 0)
      return mlir::emitError(loc)
             << passName << ": bad memory-limit '" << pass.memoryLimit
             << "'; expected e.g. '16GiB', '500MB' or bytes";
    options.memoryLimit = *bytes;
  }
  return options;
}

} // namespace ppc::transforms_detail

#endif // PPC_LIB_TRANSFORMS_SIMULATIONOPTIONS_H
