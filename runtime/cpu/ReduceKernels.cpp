//===- ReduceKernels.cpp - reduce_sum, reduce_mean, reduce_max ------------===//
//
// The iteration space is the input's dims. A partition computes its output
// box over the reduced range its input view holds along the reduced axes: a
// split reduced axis leaves partial sums, which the plan adds up, so a mean
// divides by the global reduced count. reduce_max is never split along a
// reduced axis (a max of partials is not their sum). The walk and its
// checks are the cuda kernels' too (ReduceWalk.h).
//
//===----------------------------------------------------------------------===//

#include "KernelHelpers.h"
#include "KernelRegistry.h"

#include "ReduceWalk.h"

#include <algorithm>
#include <limits>

namespace ppc::runtime::cpu {
namespace {

/// Sum of n elements `stride` apart; four partial sums keep the adds from
/// waiting on each other.
float sumOfRun(const float *data, int64_t n, int64_t stride) {
  float partial[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4; ++k)
      partial[k] += data[(i + k) * stride];
  for (; i < n; ++i)
    partial[0] += data[i * stride];
  return (partial[0] + partial[1]) + (partial[2] + partial[3]);
}

/// Max of n elements `stride` apart; NaN propagates.
float maxOfRun(const float *data, int64_t n, int64_t stride) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    float value = data[i * stride];
    if (value > max || value != value)
      max = value;
  }
  return max;
}

absl::Status reduceForward(const OpDesc &op, Reduction kind,
                           const std::vector<TensorView> &inputs,
                           std::vector<TensorView> &outputs) {
  if (absl::Status s = checkForwardArity(op, inputs, 1, outputs, 1); !s.ok())
    return s;
  const TensorView &x = inputs[0];
  TensorView &y = outputs[0];
  ReduceWalk walk;
  std::vector<StridedAccess> a;
  if (absl::Status s = reduceWalk(op, kind, x, y, walk); !s.ok())
    return s;
  if (absl::Status s = reduceAccesses(op, walk, {&x}, {&y}, a); !s.ok())
    return s;

  float initial =
      kind == Reduction::Max ? -std::numeric_limits<float>::infinity() : 0.0f;
  int64_t count = y.numElements();
  std::fill(y.data, y.data + count, initial);
  std::vector<int64_t> extents = extentsOf(walk.lo, walk.hi);
  auto combine = [kind](float &into, float value) {
    if (kind != Reduction::Max)
      into += value;
    else if (value > into || value != value) // NaN propagates
      into = value;
  };
  if (!extents.empty() && walk.reduced.back()) {
    // Reducing the innermost dim: each output element takes a whole run, in
    // registers rather than through its memory slot.
    int64_t run = extents.back(), stride = a[0].strides.back();
    extents.pop_back();
    a[0].strides.pop_back();
    a[1].strides.pop_back();
    walkStrided<2>(extents, {a[0], a[1]}, [&](const std::array<int64_t, 2> &o) {
      const float *in = x.data + o[0];
      combine(y.data[o[1]], kind == Reduction::Max ? maxOfRun(in, run, stride)
                                                   : sumOfRun(in, run, stride));
    });
  } else {
    walkStrided<2>(extents, {a[0], a[1]}, [&](const std::array<int64_t, 2> &o) {
      combine(y.data[o[1]], x.data[o[0]]);
    });
  }
  if (kind == Reduction::Mean) {
    float scale = walk.scale(kind);
    for (int64_t i = 0; i < count; ++i)
      y.data[i] *= scale;
  }
  return {};
}

/// Sum and mean: dx += dy (/ count). Max: the gradient goes to the maximal
/// elements, split evenly among ties (as torch.amax).
absl::Status reduceBackward(const OpDesc &op, Reduction kind,
                            const std::vector<TensorView> &inputs,
                            const std::vector<TensorView> &outputs,
                            const std::vector<TensorView> &outputGrads,
                            std::vector<TensorView> &inputGrads) {
  if (absl::Status s = checkBackwardArity(op, inputs, 1, outputs, 1,
                                          outputGrads, inputGrads);
      !s.ok())
    return s;
  TensorView &dx = inputGrads[0];
  if (!dx.data)
    return {};
  const TensorView &x = inputs[0], &y = outputs[0], &dy = outputGrads[0];
  ReduceWalk walk;
  std::vector<StridedAccess> a;
  if (absl::Status s = reduceWalk(op, kind, dx, dy, walk); !s.ok())
    return s;
  std::vector<int64_t> extents = extentsOf(walk.lo, walk.hi);

  if (kind != Reduction::Max) {
    if (absl::Status s = reduceAccesses(op, walk, {&dx}, {&dy}, a); !s.ok())
      return s;
    float scale = walk.scale(kind);
    walkStrided<2>(extents, {a[0], a[1]}, [&](const std::array<int64_t, 2> &o) {
      dx.data[o[0]] += dy.data[o[1]] * scale;
    });
    return {};
  }

  if (absl::Status s = reduceAccesses(op, walk, {&dx, &x}, {&dy, &y}, a);
      !s.ok())
    return s;
  // Ties per output element, laid out like dy.
  std::vector<float> ties(dy.numElements(), 0.0f);
  using Offsets = std::array<int64_t, 4>;
  walkStrided<4>(extents, {a[0], a[1], a[2], a[3]}, [&](const Offsets &o) {
    if (x.data[o[1]] == y.data[o[3]])
      ties[o[2]] += 1.0f;
  });
  walkStrided<4>(extents, {a[0], a[1], a[2], a[3]}, [&](const Offsets &o) {
    if (x.data[o[1]] == y.data[o[3]])
      dx.data[o[0]] += dy.data[o[2]] / ties[o[2]];
  });
  return {};
}

KernelImpl reduceKernel(Reduction kind) {
  KernelImpl impl;
  impl.forward = [kind](const OpDesc &op, const KernelContext &,
                        const std::vector<TensorView> &inputs,
                        std::vector<TensorView> &outputs,
                        std::vector<TensorView> &) {
    return reduceForward(op, kind, inputs, outputs);
  };
  impl.backward = [kind](const OpDesc &op, const KernelContext &,
                         const std::vector<TensorView> &inputs,
                         const std::vector<TensorView> &outputs,
                         const std::vector<TensorView> &outputGrads,
                         std::vector<TensorView> &inputGrads,
                         std::vector<TensorView> &) {
    return reduceBackward(op, kind, inputs, outputs, outputGrads, inputGrads);
  };
  return impl;
}

} // namespace

void registerReduceKernels(KernelTable &table) {
  table["ppc.reduce_sum"] = reduceKernel(Reduction::Sum);
  table["ppc.reduce_mean"] = reduceKernel(Reduction::Mean);
  table["ppc.reduce_max"] = reduceKernel(Reduction::Max);
}

} // namespace ppc::runtime::cpu
