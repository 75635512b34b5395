//===- Optimizer.h - optimizer steps on weight buffers ----------*- C++ -*-===//
//
// MLIR-free. The Update instruction's math, elementwise and so independent of
// how a weight is partitioned (PyTorch's formulas, weight decay as L2 added
// to the gradient):
//   g' = g + weight_decay * w
//   SGD:      w -= lr * g'
//   MOMENTUM: v = momentum * v + g';  w -= lr * v
//   ADAM:     t += 1;  m = b1 m + (1 - b1) g';  v = b2 v + (1 - b2) g'^2
//             w -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
// ADAM's beta1, beta2 and epsilon left 0 in the plan take PyTorch's defaults
// 0.9, 0.999 and 1e-8. Arithmetic is in double, stored as float.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_OPTIMIZER_H
#define PPC_RUNTIME_OPTIMIZER_H

#include "ppc/Runtime/OptimizerStep.h"
#include "ppc/Runtime/plan.pb.h"

#include <cstdint>
#include <vector>

namespace ppc::runtime {

/// What the optimizer keeps per weight buffer between steps, in host memory
/// (as checkpoints hold it; a backend keeps DeviceOptimizerState).
struct OptimizerState {
  int64_t steps = 0;                     ///< updates done (ADAM's t)
  std::vector<std::vector<float>> slots; ///< MOMENTUM: {v}; ADAM: {m, v}
};

/// Loss scaling, for float16 training, whose gradients underflow without
/// it: the loss gradient is seeded with `scale` instead of 1 and every
/// gradient divided by it in the update. A step whose gradients hold a NaN
/// or an infinity on any rank updates nothing. Dynamic (PyTorch's
/// GradScaler's rule): such a step also halves the scale, and
/// kGrowthInterval steps in a row without one double it. It starts at 2^15,
/// not GradScaler's 2^16: the seed is the loss's own (f16) gradient, and f16
/// ends at 65504.
struct LossScale {
  static constexpr double kInitialScale = 32768;
  static constexpr int64_t kGrowthInterval = 2000;

  double scale = 1;
  bool dynamic = false;
  int64_t goodSteps = 0; ///< steps without overflow since the last change

  /// Whether the scale is used at all (the default of float32 and bf16).
  bool active() const { return dynamic || scale != 1; }
  void afterStep(bool overflowed) {
    if (!dynamic)
      return;
    if (overflowed) {
      scale /= 2;
      goodSteps = 0;
    } else if (++goodSteps == kGrowthInterval) {
      scale *= 2;
      goodSteps = 0;
    }
  }
};

/// The scalars of update number `step` (from 1), for OptimizerStep.h's
/// per-element functions.
OptimizerCoefficients
optimizerCoefficients(const ppc::planfile::Optimizer &optimizer, int64_t step);

/// Number of per-element state vectors of the optimizer (0, 1 or 2).
int numOptimizerSlots(const ppc::planfile::Optimizer &optimizer);

/// One step on `n` elements of `weight` with `grad`; `state` is sized on
/// first use.
void applyOptimizer(const ppc::planfile::Optimizer &optimizer, float *weight,
                    const float *grad, int64_t n, OptimizerState &state);
/// The same on raw state: update number `step` (from 1) with the
/// numOptimizerSlots slots of n floats each (zero before the first).
void applyOptimizerStep(const ppc::planfile::Optimizer &optimizer,
                        float *weight, const float *grad, int64_t n,
                        int64_t step, float *const *slots);

} // namespace ppc::runtime

#endif // PPC_RUNTIME_OPTIMIZER_H
