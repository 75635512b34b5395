//===- Optimizer.cpp - optimizer steps on weight buffers ------------------===//

#include "ppc/Runtime/Optimizer.h"

#include <cmath>

namespace ppc::runtime {

using ppc::planfile::Optimizer;

int numOptimizerSlots(const Optimizer &optimizer) {
  switch (optimizer.kind()) {
  case Optimizer::MOMENTUM:
    return 1;
  case Optimizer::ADAM:
    return 2;
  default:
    return 0;
  }
}

void applyOptimizer(const Optimizer &optimizer, float *weight,
                    const float *grad, int64_t n, OptimizerState &state) {
  const int slots = numOptimizerSlots(optimizer);
  if (static_cast<int>(state.slots.size()) != slots)
    state.slots.assign(slots, std::vector<float>(n, 0.0f));
  float *pointers[2] = {};
  for (int s = 0; s < slots; ++s)
    pointers[s] = state.slots[s].data();
  applyOptimizerStep(optimizer, weight, grad, n, ++state.steps, pointers);
}

OptimizerCoefficients optimizerCoefficients(const Optimizer &optimizer,
                                            int64_t step) {
  OptimizerCoefficients c;
  c.lr = optimizer.learning_rate();
  c.decay = optimizer.weight_decay();
  switch (optimizer.kind()) {
  case Optimizer::MOMENTUM:
    c.kind = OptimizerKind::Momentum;
    c.momentum = optimizer.momentum();
    break;
  case Optimizer::ADAM: {
    c.kind = OptimizerKind::Adam;
    const double b1 = optimizer.beta1() != 0 ? optimizer.beta1() : 0.9;
    const double b2 = optimizer.beta2() != 0 ? optimizer.beta2() : 0.999;
    const double eps = optimizer.epsilon() != 0 ? optimizer.epsilon() : 1e-8;
    const double t = static_cast<double>(step);
    c.b1 = static_cast<float>(b1);
    c.b2 = static_cast<float>(b2);
    c.oneMinusB1 = static_cast<float>(1.0 - b1);
    c.oneMinusB2 = static_cast<float>(1.0 - b2);
    c.stepSize = static_cast<float>(c.lr / (1.0 - std::pow(b1, t)));
    c.correction2 = static_cast<float>(1.0 - std::pow(b2, t));
    c.epsilon = static_cast<float>(eps);
    c.decayF = static_cast<float>(c.decay);
    break;
  }
  default:
    c.kind = OptimizerKind::Sgd;
    break;
  }
  return c;
}

void applyOptimizerStep(const Optimizer &optimizer, float *weight,
                        const float *grad, int64_t n, int64_t steps,
                        float *const *slots) {
  const OptimizerCoefficients c = optimizerCoefficients(optimizer, steps);
  // One loop per kind, so that each vectorizes (Adam's float arithmetic was
  // the largest phase of a small model's step in double).
  switch (c.kind) {
  case OptimizerKind::Momentum:
    for (int64_t i = 0; i < n; ++i)
      momentumElement(c, weight[i], grad[i], slots[0][i]);
    break;
  case OptimizerKind::Adam:
    for (int64_t i = 0; i < n; ++i)
      adamElement(c, weight[i], grad[i], slots[0][i], slots[1][i]);
    break;
  case OptimizerKind::Sgd:
    for (int64_t i = 0; i < n; ++i)
      sgdElement(c, weight[i], grad[i]);
    break;
  }
}

} // namespace ppc::runtime
