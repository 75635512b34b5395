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
// Where an op's derivative jumps (relu at 0: kinkedDerivative), an input
// within round-off of the jump may land on one side in the partitioned run
// and on the other here: the forwards agree to round-off, the gradients do
// not. Given the partitioned run's inputs of those ops, the reference's
// backward takes the partitioned side for every element whose two inputs
// agree to `closeness` times the tensor's largest |input| (the same
// function, the same branches); elements further apart are counted, not
// followed, and fail the comparison as they would without this.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_REFERENCE_H
#define PPC_RUNTIME_REFERENCE_H

#include "ppc/Runtime/Backend.h"
#include "ppc/Runtime/DataSource.h"
#include "ppc/Runtime/plan.pb.h"
#include "ppc/Support/Status.h"

#include <cstdint>
#include <map>
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
  /// Elements of ops with kinks where the reference took the partitioned
  /// run's side; and those on another side but not within round-off.
  int64_t kinksFollowed = 0, kinksApart = 0;
};

/// The partitioned run's first-operand values of the ops with kinks, whole
/// tensors by tensor id, NaN where no rank's kernel read an element.
using KinkInputs = std::map<int32_t, std::vector<float>>;

/// The largest |value| (0 for none; NaNs are skipped).
double maxMagnitude(const std::vector<float> &values);

/// Runs step `step` of `plan` on whole tensors, following `partitioned`'s
/// sides of kinks (null: its own). An error is a kernel's status with
/// the op's name.
absl::Status runReferenceStep(const ppc::planfile::Plan &plan,
                              const DataSource &data, int64_t step,
                              Backend &backend, double lossScale,
                              const KinkInputs *partitioned, double closeness,
                              ReferenceStep &result);

} // namespace ppc::runtime

#endif // PPC_RUNTIME_REFERENCE_H
