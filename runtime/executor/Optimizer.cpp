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
  ++state.steps;
  const double lr = optimizer.learning_rate();
  const double decay = optimizer.weight_decay();
  switch (optimizer.kind()) {
  case Optimizer::MOMENTUM: {
    const double mu = optimizer.momentum();
    float *v = state.slots[0].data();
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
    const double t = static_cast<double>(state.steps);
    const double c1 = 1.0 - std::pow(b1, t), c2 = 1.0 - std::pow(b2, t);
    float *m = state.slots[0].data(), *v = state.slots[1].data();
    for (int64_t i = 0; i < n; ++i) {
      double g = double(grad[i]) + decay * weight[i];
      double mi = b1 * m[i] + (1.0 - b1) * g;
      double vi = b2 * v[i] + (1.0 - b2) * g * g;
      m[i] = static_cast<float>(mi);
      v[i] = static_cast<float>(vi);
      weight[i] = static_cast<float>(
          weight[i] - lr * (mi / c1) / (std::sqrt(vi / c2) + eps));
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
