//===- ElementwiseKernels.cpp - elementwise ops, select, cumsum -----------===//
//
// Every op here is elementwise over its result with numpy broadcasting: an
// operand is aligned at the trailing dim and a size-1 dim is read at index 0
// for every result index. A partition computes its output box; a broadcast
// operand's gradient is summed over the broadcast positions of that box (the
// plan sums the partials of the partitions). ppc.cumsum scans one axis that
// every partition holds whole. The per-element functions and the
// broadcasting checks are the cuda kernels' too (ElementwiseOps.h).
//
//===----------------------------------------------------------------------===//

#include "KernelHelpers.h"
#include "KernelRegistry.h"

#include "ElementwiseOps.h"
#include "KernelChecks.h"

#include <cstdint>
#include <functional>
#include <map>

namespace ppc::runtime::cpu {
namespace {

using Offsets2 = std::array<int64_t, 2>;
using Offsets3 = std::array<int64_t, 3>;
using Offsets4 = std::array<int64_t, 4>;
using Offsets5 = std::array<int64_t, 5>;

//===----------------------------------------------------------------------===//
// Unary ops: value(x) and derivative(x, y) with y = value(x)
//===----------------------------------------------------------------------===//

/// y = f(x) over n contiguous elements.
template <typename Fn>
PPC_VECTOR_CLONES void unaryValues(const Fn &fn, const float *x, float *y,
                                   int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = fn.value(x[i]);
}

/// dx += dy * f'(x, y) over n contiguous elements; without y (the plan
/// keeps none when the backward reads none) from y = f(x).
template <typename Fn>
PPC_VECTOR_CLONES void unaryGradients(const Fn &fn, const float *x,
                                      const float *y, const float *dy,
                                      float *dx, int64_t n) {
  if (y)
    for (int64_t i = 0; i < n; ++i)
      dx[i] += dy[i] * fn.derivative(x[i], y[i]);
  else
    for (int64_t i = 0; i < n; ++i)
      dx[i] += dy[i] * fn.derivative(x[i], fn.value(x[i]));
}

template <typename Fn>
absl::Status unaryForward(const OpDesc &op,
                          const std::vector<TensorView> &inputs,
                          std::vector<TensorView> &outputs) {
  absl::Status error;
  Fn fn(op, error);
  if (!error.ok())
    return error;
  if (absl::Status s = checkForwardArity(op, inputs, 1, outputs, 1); !s.ok())
    return s;
  const TensorView &x = inputs[0];
  TensorView &y = outputs[0];
  if (x.shape == y.shape && sameBox(x, y)) {
    int64_t n = y.numElements();
    unaryValues(fn, x.data, y.data, n);
    return {};
  }
  std::vector<StridedAccess> a;
  if (absl::Status s =
          broadcastAccesses(op, y, {{"input", &x}, {"output", &y}}, a);
      !s.ok())
    return s;
  walkStrided<2>(extentsOf(y.lo, y.hi), {a[0], a[1]}, [&](const Offsets2 &o) {
    y.data[o[1]] = fn.value(x.data[o[0]]);
  });
  return {};
}

/// dx += dy * f'(x).
template <typename Fn>
absl::Status unaryBackward(const OpDesc &op,
                           const std::vector<TensorView> &inputs,
                           const std::vector<TensorView> &outputs,
                           const std::vector<TensorView> &outputGrads,
                           std::vector<TensorView> &inputGrads) {
  absl::Status error;
  Fn fn(op, error);
  if (!error.ok())
    return error;
  if (absl::Status s = checkBackwardArity(op, inputs, 1, outputs, 1,
                                          outputGrads, inputGrads);
      !s.ok())
    return s;
  TensorView &dx = inputGrads[0];
  if (!dx.data)
    return {};
  const TensorView &x = inputs[0], &y = outputs[0], &dy = outputGrads[0];
  if (x.shape == dy.shape && sameBox(x, dy) && sameBox(dx, dy)) {
    // The plan keeps no result for a backward that reads none (relu,
    // clip): such derivatives ignore y, and the others get it recomputed.
    if (!y.data || sameBox(y, dy)) {
      unaryGradients(fn, x.data, y.data, dy.data, dx.data, dy.numElements());
      return {};
    }
  }
  std::vector<StridedAccess> a;
  if (absl::Status s = broadcastAccesses(op, dy,
                                         {{"input", &x},
                                          {"output", &y},
                                          {"output gradient", &dy},
                                          {"input gradient", &dx}},
                                         a);
      !s.ok())
    return s;
  walkStrided<4>(extentsOf(dy.lo, dy.hi), {a[0], a[1], a[2], a[3]},
                 [&](const Offsets4 &o) {
                   dx.data[o[3]] += dy.data[o[2]] *
                                    fn.derivative(x.data[o[0]], y.data[o[1]]);
                 });
  return {};
}

/// ppc.gelu: the functor of its approximation.
absl::Status geluForward(const OpDesc &op,
                         const std::vector<TensorView> &inputs,
                         std::vector<TensorView> &outputs) {
  absl::Status error;
  const std::string approximation = geluApproximation(op, error);
  if (!error.ok())
    return error;
  return approximation == "tanh" ? unaryForward<GeluTanh>(op, inputs, outputs)
                                 : unaryForward<GeluErf>(op, inputs, outputs);
}

absl::Status geluBackward(const OpDesc &op,
                          const std::vector<TensorView> &inputs,
                          const std::vector<TensorView> &outputs,
                          const std::vector<TensorView> &outputGrads,
                          std::vector<TensorView> &inputGrads) {
  absl::Status error;
  const std::string approximation = geluApproximation(op, error);
  if (!error.ok())
    return error;
  return approximation == "tanh"
             ? unaryBackward<GeluTanh>(op, inputs, outputs, outputGrads,
                                       inputGrads)
             : unaryBackward<GeluErf>(op, inputs, outputs, outputGrads,
                                      inputGrads);
}

using ForwardOf = absl::Status (*)(const OpDesc &,
                                   const std::vector<TensorView> &inputs,
                                   std::vector<TensorView> &outputs);
using BackwardOf = absl::Status (*)(const OpDesc &,
                                    const std::vector<TensorView> &inputs,
                                    const std::vector<TensorView> &outputs,
                                    const std::vector<TensorView> &outputGrads,
                                    std::vector<TensorView> &inputGrads);

/// The kernel of a forward and backward that need neither the context nor
/// scratch views.
KernelImpl kernelOf(ForwardOf forward, BackwardOf backward) {
  KernelImpl impl;
  impl.forward = [forward](const OpDesc &op, const KernelContext &,
                           const std::vector<TensorView> &inputs,
                           std::vector<TensorView> &outputs,
                           std::vector<TensorView> &) {
    return forward(op, inputs, outputs);
  };
  impl.backward = [backward](const OpDesc &op, const KernelContext &,
                             const std::vector<TensorView> &inputs,
                             const std::vector<TensorView> &outputs,
                             const std::vector<TensorView> &outputGrads,
                             std::vector<TensorView> &inputGrads,
                             std::vector<TensorView> &) {
    return backward(op, inputs, outputs, outputGrads, inputGrads);
  };
  return impl;
}

//===----------------------------------------------------------------------===//
// Binary ops: value(l, r) and the partial derivatives given y = value(l, r)
//===----------------------------------------------------------------------===//

template <typename Fn>
absl::Status binaryForward(const OpDesc &op,
                           const std::vector<TensorView> &inputs,
                           std::vector<TensorView> &outputs) {
  if (absl::Status s = checkForwardArity(op, inputs, 2, outputs, 1); !s.ok())
    return s;
  Fn fn;
  const TensorView &l = inputs[0], &r = inputs[1];
  TensorView &y = outputs[0];
  if (l.shape == y.shape && r.shape == y.shape && sameBox(l, y) &&
      sameBox(r, y)) {
    int64_t n = y.numElements();
    for (int64_t i = 0; i < n; ++i)
      y.data[i] = fn.value(l.data[i], r.data[i]);
    return {};
  }
  std::vector<StridedAccess> a;
  if (absl::Status s = broadcastAccesses(
          op, y, {{"lhs", &l}, {"rhs", &r}, {"output", &y}}, a);
      !s.ok())
    return s;
  walkStrided<3>(extentsOf(y.lo, y.hi), {a[0], a[1], a[2]},
                 [&](const Offsets3 &o) {
                   y.data[o[2]] = fn.value(l.data[o[0]], r.data[o[1]]);
                 });
  return {};
}

/// Adds dy * d(value)/d(operand) into `grad`, the gradient of operand
/// `which` (0: lhs, 1: rhs); a broadcast operand sums over the box.
template <typename Fn>
absl::Status binaryGrad(const OpDesc &op, int which, const TensorView &l,
                        const TensorView &r, const TensorView &y,
                        const TensorView &dy, TensorView &grad) {
  Fn fn;
  if (l.shape == dy.shape && r.shape == dy.shape && sameBox(l, dy) &&
      sameBox(r, dy) && sameBox(y, dy) && sameBox(grad, dy)) {
    int64_t n = dy.numElements();
    for (int64_t i = 0; i < n; ++i)
      grad.data[i] +=
          dy.data[i] * partial(fn, which, l.data[i], r.data[i], y.data[i]);
    return {};
  }
  std::vector<StridedAccess> a;
  if (absl::Status s = broadcastAccesses(
          op, dy,
          {{"lhs", &l},
           {"rhs", &r},
           {"output", &y},
           {"output gradient", &dy},
           {which == 0 ? "lhs gradient" : "rhs gradient", &grad}},
          a);
      !s.ok())
    return s;
  walkStrided<5>(extentsOf(dy.lo, dy.hi), {a[0], a[1], a[2], a[3], a[4]},
                 [&](const Offsets5 &o) {
                   grad.data[o[4]] +=
                       dy.data[o[3]] * partial(fn, which, l.data[o[0]],
                                               r.data[o[1]], y.data[o[2]]);
                 });
  return {};
}

template <typename Fn>
absl::Status binaryBackward(const OpDesc &op,
                            const std::vector<TensorView> &inputs,
                            const std::vector<TensorView> &outputs,
                            const std::vector<TensorView> &outputGrads,
                            std::vector<TensorView> &inputGrads) {
  if (absl::Status s = checkBackwardArity(op, inputs, 2, outputs, 1,
                                          outputGrads, inputGrads);
      !s.ok())
    return s;
  for (int which = 0; which < 2; ++which) {
    if (!inputGrads[which].data)
      continue;
    if (absl::Status s =
            binaryGrad<Fn>(op, which, inputs[0], inputs[1], outputs[0],
                           outputGrads[0], inputGrads[which]);
        !s.ok())
      return s;
  }
  return {};
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

/// dst = src * mask over the box of `dst` (or dst += ... when accumulating);
/// outside training the mask is all ones.
absl::Status applyDropout(const OpDesc &op, const KernelContext &ctx,
                          const TensorView &src, TensorView &dst,
                          bool accumulate) {
  double ratio = 0;
  if (absl::Status s = dropoutRatio(op, ratio); !s.ok())
    return s;
  std::vector<StridedAccess> a;
  if (absl::Status s = broadcastAccesses(
          op, dst, {{"source", &src}, {"destination", &dst}}, a);
      !s.ok())
    return s;
  std::vector<int64_t> extents = extentsOf(dst.lo, dst.hi);
  if (!ctx.training || ratio == 0) {
    walkStrided<2>(extents, {a[0], a[1]}, [&](const Offsets2 &o) {
      dst.data[o[1]] = (accumulate ? dst.data[o[1]] : 0.0f) + src.data[o[0]];
    });
    return {};
  }
  DropoutMask mask = dropoutMaskOf(op, ctx);
  walkStrided<3>(
      extents, {a[0], a[1], globalFlatAccess(dst)}, [&](const Offsets3 &o) {
        float value = src.data[o[0]] * mask.factor(o[2]);
        dst.data[o[1]] = (accumulate ? dst.data[o[1]] : 0.0f) + value;
      });
  return {};
}

KernelImpl dropoutKernel() {
  KernelImpl impl;
  impl.forward = [](const OpDesc &op, const KernelContext &ctx,
                    const std::vector<TensorView> &inputs,
                    std::vector<TensorView> &outputs,
                    std::vector<TensorView> &) -> absl::Status {
    if (absl::Status s = checkForwardArity(op, inputs, 1, outputs, 1); !s.ok())
      return s;
    return applyDropout(op, ctx, inputs[0], outputs[0], /*accumulate=*/false);
  };
  impl.backward = [](const OpDesc &op, const KernelContext &ctx,
                     const std::vector<TensorView> &,
                     const std::vector<TensorView> &,
                     const std::vector<TensorView> &outputGrads,
                     std::vector<TensorView> &inputGrads,
                     std::vector<TensorView> &) -> absl::Status {
    if (absl::Status s = expectArity(op, "gradient views", inputGrads.size(), 1,
                                     outputGrads.size(), 1);
        !s.ok())
      return s;
    if (!inputGrads[0].data)
      return {};
    // The gradient is masked like the input: same box, same mask.
    return applyDropout(op, ctx, outputGrads[0], inputGrads[0],
                        /*accumulate=*/true);
  };
  return impl;
}

//===----------------------------------------------------------------------===//
// Broadcast
//===----------------------------------------------------------------------===//

KernelImpl broadcastKernel() {
  KernelImpl impl;
  impl.forward = [](const OpDesc &op, const KernelContext &,
                    const std::vector<TensorView> &inputs,
                    std::vector<TensorView> &outputs,
                    std::vector<TensorView> &) -> absl::Status {
    if (absl::Status s = checkForwardArity(op, inputs, 1, outputs, 1); !s.ok())
      return s;
    const TensorView &x = inputs[0];
    TensorView &y = outputs[0];
    std::vector<StridedAccess> a;
    if (absl::Status s =
            broadcastAccesses(op, y, {{"input", &x}, {"output", &y}}, a);
        !s.ok())
      return s;
    walkStrided<2>(extentsOf(y.lo, y.hi), {a[0], a[1]},
                   [&](const Offsets2 &o) { y.data[o[1]] = x.data[o[0]]; });
    return {};
  };
  impl.backward = [](const OpDesc &op, const KernelContext &,
                     const std::vector<TensorView> &,
                     const std::vector<TensorView> &,
                     const std::vector<TensorView> &outputGrads,
                     std::vector<TensorView> &inputGrads,
                     std::vector<TensorView> &) -> absl::Status {
    if (absl::Status s = expectArity(op, "gradient views", inputGrads.size(), 1,
                                     outputGrads.size(), 1);
        !s.ok())
      return s;
    TensorView &dx = inputGrads[0];
    if (!dx.data)
      return {};
    const TensorView &dy = outputGrads[0];
    std::vector<StridedAccess> a;
    if (absl::Status s = broadcastAccesses(
            op, dy, {{"output gradient", &dy}, {"input gradient", &dx}}, a);
        !s.ok())
      return s;
    walkStrided<2>(extentsOf(dy.lo, dy.hi), {a[0], a[1]},
                   [&](const Offsets2 &o) { dx.data[o[1]] += dy.data[o[0]]; });
    return {};
  };
  return impl;
}

//===----------------------------------------------------------------------===//
// Select
//===----------------------------------------------------------------------===//

/// y = condition ? lhs : rhs, copied (never multiplied by the mask).
absl::Status selectForward(const OpDesc &op,
                           const std::vector<TensorView> &inputs,
                           std::vector<TensorView> &outputs) {
  if (absl::Status s = checkForwardArity(op, inputs, 3, outputs, 1); !s.ok())
    return s;
  const TensorView &c = inputs[0], &l = inputs[1], &r = inputs[2];
  TensorView &y = outputs[0];
  std::vector<StridedAccess> a;
  if (absl::Status s = broadcastAccesses(
          op, y, {{"condition", &c}, {"lhs", &l}, {"rhs", &r}, {"output", &y}},
          a);
      !s.ok())
    return s;
  walkStrided<4>(
      extentsOf(y.lo, y.hi), {a[0], a[1], a[2], a[3]}, [&](const Offsets4 &o) {
        y.data[o[3]] = c.data[o[0]] != 0 ? l.data[o[1]] : r.data[o[2]];
      });
  return {};
}

/// The gradient goes to lhs where the condition holds and to rhs elsewhere
/// (summed over broadcast positions); the condition gets none.
absl::Status selectBackward(const OpDesc &op,
                            const std::vector<TensorView> &inputs,
                            const std::vector<TensorView> &outputs,
                            const std::vector<TensorView> &outputGrads,
                            std::vector<TensorView> &inputGrads) {
  if (absl::Status s = checkBackwardArity(op, inputs, 3, outputs, 1,
                                          outputGrads, inputGrads);
      !s.ok())
    return s;
  const TensorView &c = inputs[0], &dy = outputGrads[0];
  for (int which = 1; which < 3; ++which) {
    TensorView &grad = inputGrads[which];
    if (!grad.data)
      continue;
    std::vector<StridedAccess> a;
    if (absl::Status s = broadcastAccesses(
            op, dy,
            {{"condition", &c},
             {"output gradient", &dy},
             {which == 1 ? "lhs gradient" : "rhs gradient", &grad}},
            a);
        !s.ok())
      return s;
    walkStrided<3>(extentsOf(dy.lo, dy.hi), {a[0], a[1], a[2]},
                   [&](const Offsets3 &o) {
                     if (selectTakes(which, c.data[o[0]]))
                       grad.data[o[2]] += dy.data[o[1]];
                   });
  }
  return {};
}

//===----------------------------------------------------------------------===//
// Cumulative sum
//===----------------------------------------------------------------------===//

absl::Status cumsumForward(const OpDesc &op,
                           const std::vector<TensorView> &inputs,
                           std::vector<TensorView> &outputs) {
  if (absl::Status s = checkForwardArity(op, inputs, 1, outputs, 1); !s.ok())
    return s;
  CumSumLines lines;
  if (absl::Status s =
          cumsumLines(op, outputs[0], {{"input", &inputs[0]}}, lines);
      !s.ok())
    return s;
  for (int64_t line = 0; line < lines.lines; ++line)
    lines.scan(line, inputs[0].data, outputs[0].data, /*backward=*/false,
               /*accumulate=*/false);
  return {};
}

/// dx += the cumulative sum of dy in the other direction.
absl::Status cumsumBackward(const OpDesc &op,
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
  const TensorView &dy = outputGrads[0];
  CumSumLines lines;
  if (absl::Status s = cumsumLines(op, dy, {{"input gradient", &dx}}, lines);
      !s.ok())
    return s;
  for (int64_t line = 0; line < lines.lines; ++line)
    lines.scan(line, dy.data, dx.data, /*backward=*/true,
               /*accumulate=*/true);
  return {};
}

/// How this backend makes the elementwise kernels (registerElementwiseOps).
struct CpuElementwiseKernels {
  template <typename Fn> static KernelImpl unary() {
    return kernelOf(unaryForward<Fn>, unaryBackward<Fn>);
  }
  template <typename Fn> static KernelImpl binary() {
    return kernelOf(binaryForward<Fn>, binaryBackward<Fn>);
  }
  static KernelImpl gelu() { return kernelOf(geluForward, geluBackward); }
  static KernelImpl dropout() { return dropoutKernel(); }
  static KernelImpl broadcast() { return broadcastKernel(); }
  static KernelImpl select() { return kernelOf(selectForward, selectBackward); }
  static KernelImpl cumsum() { return kernelOf(cumsumForward, cumsumBackward); }
};

} // namespace

void registerElementwiseKernels(KernelTable &table) {
  registerElementwiseOps<CpuElementwiseKernels>(table);
}

} // namespace ppc::runtime::cpu

namespace ppc::runtime {
namespace {
/// registerElementwiseOps's way of making kinkedDerivative's functions.
struct KinkedDerivatives {
  using Derivative = std::function<float(float)>;
  using Make = Derivative (*)(const OpDesc &);
  template <typename Fn> static Make unary() {
    if constexpr (!HasKinks<Fn>::value)
      return nullptr;
    else
      return [](const OpDesc &op) -> Derivative {
        absl::Status error;
        Fn fn(op, error);
        if (!error.ok())
          return nullptr;
        return [fn](float x) { return fn.derivative(x, fn.value(x)); };
      };
  }
  template <typename Fn> static Make binary() { return nullptr; }
  static Make gelu() { return nullptr; }
  static Make dropout() { return nullptr; }
  static Make broadcast() { return nullptr; }
  static Make select() { return nullptr; }
  static Make cumsum() { return nullptr; }
};
} // namespace

std::function<float(float)> kinkedDerivative(const OpDesc &op) {
  static const std::map<std::string, KinkedDerivatives::Make> table = [] {
    std::map<std::string, KinkedDerivatives::Make> t;
    registerElementwiseOps<KinkedDerivatives>(t);
    return t;
  }();
  auto it = table.find(op.kind);
  return it != table.end() && it->second ? it->second(op) : nullptr;
}

} // namespace ppc::runtime
