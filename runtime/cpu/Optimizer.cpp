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

void applyOptimizerStep(const Optimizer &optimizer, float *weight,
                        const float *grad, int64_t n, int64_t steps,
                        float *const *slots) {
  const double lr = optimizer.learning_rate();
  const double decay = optimizer.weight_decay();
  switch (optimizer.kind()) {
  case Optimizer::MOMENTUM: {
    const double mu = optimizer.momentum();
    float *v = slots[0];
    for (int64_t i = 0; i < n; ++i) {
      double g = double(grad[i]) + decay * weight[i];
      double vi = mu * v[i] + g;
      v[i] = static_cast<float>(vi);
      weight[i] = static_cast<float>(weight[i] - lr * vi);
    }
    break;
  }
  case Optimizer::ADAM: {
    const double b1 = optimizer.beta1() != 0 ? optimizer.beta1() : 0.9;
    const double b2 = optimizer.beta2() != 0 ? optimizer.beta2() : 0.999;
    const double eps = optimizer.epsilon() != 0 ? optimizer.epsilon() : 1e-8;
    const double t = static_cast<double>(steps);
    // Float arithmetic in the loop, so that it vectorizes: the update was
    // the largest phase of a small model's step in double.
    const float fb1 = static_cast<float>(b1), fb2 = static_cast<float>(b2);
    // 1 - beta in double: in float, 1 - 0.999f is off by 5e-5 relative.
    const float ob1 = static_cast<float>(1.0 - b1);
    const float ob2 = static_cast<float>(1.0 - b2);
    const float step = static_cast<float>(lr / (1.0 - std::pow(b1, t)));
    const float c2 = static_cast<float>(1.0 - std::pow(b2, t));
    const float feps = static_cast<float>(eps);
    const float fdecay = static_cast<float>(decay);
    float *m = slots[0], *v = slots[1];
    for (int64_t i = 0; i < n; ++i) {
      float g = grad[i] + fdecay * weight[i];
      float mi = fb1 * m[i] + ob1 * g;
      float vi = fb2 * v[i] + ob2 * g * g;
      m[i] = mi;
      v[i] = vi;
      weight[i] -= step * mi / (std::sqrt(vi / c2) + feps);
    }
    break;
  }
  default:
    for (int64_t i = 0; i < n; ++i) {
      double g = double(grad[i]) + decay * weight[i];
      weight[i] = static_cast<float>(weight[i] - lr * g);
    }
    break;
  }
}

} // namespace ppc::runtime
