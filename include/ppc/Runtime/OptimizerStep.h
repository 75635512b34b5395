//===- OptimizerStep.h - one element of an optimizer step -------*- C++ -*-===//
//
// MLIR-free and protobuf-free: the Update instruction's per-element math
// (Optimizer.h states the formulas), shared by the cpu backend's loops and
// the cuda backend's kernels. A step's scalars are computed once on the host
// (optimizerCoefficients, Optimizer.h); each element then calls the kind's
// function. SGD and momentum compute in double, Adam in float with its
// bias corrections from double.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_OPTIMIZERSTEP_H
#define PPC_RUNTIME_OPTIMIZERSTEP_H

#include "ppc/Runtime/HostDevice.h"

#include <cmath>

namespace ppc::runtime {

enum class OptimizerKind { Sgd, Momentum, Adam };

/// The scalars of update number t (from 1) of one optimizer.
struct OptimizerCoefficients {
  OptimizerKind kind = OptimizerKind::Sgd;
  double lr = 0, decay = 0, momentum = 0;
  // Adam: betas, 1 - beta (from double: in float, 1 - 0.999f is off by
  // 5e-5 relative), lr / (1 - b1^t), 1 - b2^t, epsilon, decay.
  float b1 = 0, b2 = 0, oneMinusB1 = 0, oneMinusB2 = 0, stepSize = 0,
        correction2 = 0, epsilon = 0, decayF = 0;
};

PPC_HD inline void sgdElement(const OptimizerCoefficients &c, float &w,
                              float grad) {
  const double g = double(grad) + c.decay * w;
  w = static_cast<float>(w - c.lr * g);
}

PPC_HD inline void momentumElement(const OptimizerCoefficients &c, float &w,
                                   float grad, float &v) {
  const double g = double(grad) + c.decay * w;
  const double vi = c.momentum * v + g;
  v = static_cast<float>(vi);
  w = static_cast<float>(w - c.lr * vi);
}

PPC_HD inline void adamElement(const OptimizerCoefficients &c, float &w,
                               float grad, float &m, float &v) {
  const float g = grad + c.decayF * w;
  const float mi = c.b1 * m + c.oneMinusB1 * g;
  const float vi = c.b2 * v + c.oneMinusB2 * g * g;
  m = mi;
  v = vi;
  w -= c.stepSize * mi / (std::sqrt(vi / c.correction2) + c.epsilon);
}

} // namespace ppc::runtime

#endif // PPC_RUNTIME_OPTIMIZERSTEP_H
