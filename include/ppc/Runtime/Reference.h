//===- Reference.h - one step of the whole model on one device --*- C++ -*-===//
//
// MLIR-free. What `ppc-run --verify` compares a partitioned step against:
// the plan's global ops interpreted in order on whole tensors, in the plan's
// element types, on the same backend with the same Load values (16-bit
// weights trained as float32 master copies, as ProgramRunner does), the loss's
// gradient set to the loss scale (1 without loss scaling), the backward in
// reverse order accumulating whole-tensor gradients of operands that need
// one, staged ops (batch_norm) run stage by stage with nothing to sum in
// between, and the optimizer applied to every weight with a gradient (from
// a fresh optimizer state), unless a gradient overflowed.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_REFERENCE_H
#define PPC_RUNTIME_REFERENCE_H

#include "ppc/Runtime/Backend.h"
#include "ppc/Runtime/DataSource.h"
#include "ppc/Runtime/plan.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ppc::runtime {

struct ReferenceStep {
  /// Per tensor id, the whole tensor after the step as floats (activations
  /// as computed, weights updated (a 16-bit weight's master copy), frozen
  /// statistics as the ops left them); empty for tensors never computed.
  std::vector<std::vector<float>> values;
  /// Per tensor id, the whole gradient before the update (unscaled);
  /// empty where none.
  std::vector<std::vector<float>> grads;
  /// Whether a gradient overflowed at the loss scale, so that no weight
  /// was updated.
  bool skipped = false;
};

/// Runs step `step` of `plan` on whole tensors. "" or the error (a kernel's
/// status with the op's name).
std::string runReferenceStep(const ppc::planfile::Plan &plan,
                             const DataSource &data, int64_t step,
                             Backend &backend, double lossScale,
                             ReferenceStep &result);

} // namespace ppc::runtime

#endif // PPC_RUNTIME_REFERENCE_H
