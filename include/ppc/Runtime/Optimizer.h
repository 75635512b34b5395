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

#include "ppc/Runtime/plan.pb.h"

#include <cstdint>
#include <vector>

namespace ppc::runtime {

/// What the optimizer keeps per weight buffer between steps.
struct OptimizerState {
  int64_t steps = 0;                     ///< updates done (ADAM's t)
  std::vector<std::vector<float>> slots; ///< MOMENTUM: {v}; ADAM: {m, v}
};

/// Number of per-element state vectors of the optimizer (0, 1 or 2).
int numOptimizerSlots(const ppc::planfile::Optimizer &optimizer);

/// One step on `n` elements of `weight` with `grad`; `state` is sized on
/// first use.
void applyOptimizer(const ppc::planfile::Optimizer &optimizer, float *weight,
                    const float *grad, int64_t n, OptimizerState &state);

} // namespace ppc::runtime

#endif // PPC_RUNTIME_OPTIMIZER_H
