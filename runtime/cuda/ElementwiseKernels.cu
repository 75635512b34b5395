//===- ElementwiseKernels.cu - elementwise ops, select, cumsum ------------===//
//
// The cuda kernels of the cpu backend's ElementwiseKernels.cpp, with its
// semantics: every op is elementwise over its result with numpy
// broadcasting (an operand is aligned at the trailing dim and a size-1 dim
// is read at index 0 for every result index). A partition computes its
// output box, one thread per output element; a broadcast operand's gradient
// is summed over the broadcast positions of the box of the output gradient
// (the plan sums the partials of the partitions) by one thread per gradient
// element, which loops over those positions in the cpu kernel's order: no
// atomics, and the same sums. Views whose boxes all agree take a
// contiguous path; the others are checked on the host as the cpu kernel
// checks them, with its messages. The per-element functions and the checks
// are the cpu kernels' (ElementwiseOps.h). Dropout draws DropoutMask's mask
// from the global flat index of the element it writes. Select routes the
// gradient as gatherAdd's term; cumsum runs a thread per line of its axis.
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"

#include "ElementwiseOps.h"
#include "KernelChecks.h"

#include "ppc/Runtime/DropoutMask.h"

#include <cstdint>
#include <string>

namespace ppc::runtime::cuda {
namespace {

//===----------------------------------------------------------------------===//
// Device helpers
//===----------------------------------------------------------------------===//

/// Offset in `view`'s buffer of the element that iteration point `p` (of
/// rank `iterRank`) reads with numpy broadcasting.
PPC_HD inline int64_t broadcastOffset(const DeviceBox &view, const int64_t *p,
                                      int iterRank) {
  const int lead = iterRank - view.rank;
  int64_t offset = 0;
  for (int i = 0; i < view.rank; ++i) {
    const int64_t index = view.shape[i] == 1 ? 0 : p[lead + i];
    offset = offset * (view.hi[i] - view.lo[i]) + (index - view.lo[i]);
  }
  return offset;
}

/// grad[e] += sum of term(p) over the points p of the iteration box `iter`
/// that read gradient element e with numpy broadcasting, one thread per
/// element of the gradient's box, summing in the row-major order of the
/// points (the cpu kernel's walk).
template <typename Term>
void gatherAdd(Stream stream, DeviceBox iter, DeviceBox gradBox, float *grad,
               Term term) {
  launch(stream, gradBox.count(), [=] PPC_HD(int64_t e) {
    int64_t g[kMaxRank], p[kMaxRank];
    gradBox.indexOf(e, g);
    const int rank = iter.rank, lead = iter.rank - gradBox.rank;
    unsigned freeDims = 0; // dims the gradient element is broadcast over
    for (int j = 0; j < rank; ++j) {
      if (j < lead || gradBox.shape[j - lead] == 1) {
        freeDims |= 1u << j;
        p[j] = iter.lo[j];
        if (iter.hi[j] <= iter.lo[j])
          return;
      } else {
        p[j] = g[j - lead];
        if (p[j] < iter.lo[j] || p[j] >= iter.hi[j])
          return;
      }
    }
    float sum = grad[e];
    while (true) {
      sum += term(p);
      int j = rank - 1;
      for (; j >= 0; --j) {
        if (!(freeDims & (1u << j)))
          continue;
        if (++p[j] < iter.hi[j])
          break;
        p[j] = iter.lo[j];
      }
      if (j < 0)
        break;
    }
    grad[e] = sum;
  });
}

//===----------------------------------------------------------------------===//
// Unary ops
//===----------------------------------------------------------------------===//

/// dx's term of iteration point p: dy * f'(x, y), y recomputed when the
/// plan keeps none.
template <typename Fn> struct UnaryTerm {
  Fn fn;
  int rank;
  DeviceBox xBox, yBox, dyBox;
  const float *x, *y, *dy;
  PPC_HD float operator()(const int64_t *p) const {
    const float xv = x[broadcastOffset(xBox, p, rank)];
    const float yv = y ? y[broadcastOffset(yBox, p, rank)] : fn.value(xv);
    return dy[broadcastOffset(dyBox, p, rank)] * fn.derivative(xv, yv);
  }
};

template <typename Fn>
void unaryValues(Stream stream, Fn fn, bool contiguous, DeviceBox xBox,
                 const float *x, DeviceBox yBox, float *y) {
  if (contiguous) {
    launch(stream, yBox.count(),
           [=] PPC_HD(int64_t i) { y[i] = fn.value(x[i]); });
    return;
  }
  launch(stream, yBox.count(), [=] PPC_HD(int64_t i) {
    int64_t p[kMaxRank];
    yBox.indexOf(i, p);
    y[i] = fn.value(x[broadcastOffset(xBox, p, yBox.rank)]);
  });
}

template <typename Fn>
void unaryGradients(Stream stream, Fn fn, int64_t n, const float *x,
                    const float *y, const float *dy, float *dx) {
  launch(stream, n, [=] PPC_HD(int64_t i) {
    const float yv = y ? y[i] : fn.value(x[i]);
    dx[i] += dy[i] * fn.derivative(x[i], yv);
  });
}

template <typename Fn>
KernelStatus unaryForward(const OpDesc &op, Stream stream,
                          const std::vector<KernelView> &inputs,
                          const std::vector<KernelView> &outputs) {
  KernelStatus error;
  Fn fn(op, error);
  if (!error.empty())
    return error;
  if (KernelStatus s = checkForwardArity(op, inputs, 1, outputs, 1); !s.empty())
    return s;
  const KernelView &x = inputs[0], &y = outputs[0];
  const bool contiguous = x.shape == y.shape && sameBox(x, y);
  if (!contiguous)
    if (KernelStatus s = checkBroadcast(op, y, {{"input", &x}, {"output", &y}});
        !s.empty())
      return s;
  unaryValues(stream, fn, contiguous, x.box, x.data, y.box, y.data);
  return {};
}

/// dx += dy * f'(x).
template <typename Fn>
KernelStatus unaryBackward(const OpDesc &op, Stream stream,
                           const std::vector<KernelView> &inputs,
                           const std::vector<KernelView> &outputs,
                           const std::vector<KernelView> &outputGrads,
                           const std::vector<KernelView> &inputGrads) {
  KernelStatus error;
  Fn fn(op, error);
  if (!error.empty())
    return error;
  if (KernelStatus s = checkBackwardArity(op, inputs, 1, outputs, 1,
                                          outputGrads, inputGrads);
      !s.empty())
    return s;
  const KernelView &dx = inputGrads[0];
  if (!dx.data)
    return {};
  const KernelView &x = inputs[0], &y = outputs[0], &dy = outputGrads[0];
  // The plan keeps no result for a backward that reads none (relu, clip):
  // such derivatives ignore y, and the others get it recomputed.
  if (x.shape == dy.shape && sameBox(x, dy) && sameBox(dx, dy) &&
      (!y.data || sameBox(y, dy))) {
    unaryGradients(stream, fn, dy.box.count(), x.data, y.data, dy.data,
                   dx.data);
    return {};
  }
  if (KernelStatus s = checkBroadcast(op, dy,
                                      {{"input", &x},
                                       {"output", &y},
                                       {"output gradient", &dy},
                                       {"input gradient", &dx}});
      !s.empty())
    return s;
  UnaryTerm<Fn> term{fn,     dy.box.rank, x.box,  y.box,
                     dy.box, x.data,      y.data, dy.data};
  gatherAdd(stream, dy.box, dx.box, dx.data, term);
  return {};
}

/// ppc.gelu: the functor of its approximation.
KernelStatus geluForward(const OpDesc &op, Stream stream,
                         const std::vector<KernelView> &inputs,
                         const std::vector<KernelView> &outputs) {
  KernelStatus error;
  const std::string approximation = geluApproximation(op, error);
  if (!error.empty())
    return error;
  return approximation == "tanh"
             ? unaryForward<GeluTanh>(op, stream, inputs, outputs)
             : unaryForward<GeluErf>(op, stream, inputs, outputs);
}

KernelStatus geluBackward(const OpDesc &op, Stream stream,
                          const std::vector<KernelView> &inputs,
                          const std::vector<KernelView> &outputs,
                          const std::vector<KernelView> &outputGrads,
                          const std::vector<KernelView> &inputGrads) {
  KernelStatus error;
  const std::string approximation = geluApproximation(op, error);
  if (!error.empty())
    return error;
  return approximation == "tanh"
             ? unaryBackward<GeluTanh>(op, stream, inputs, outputs, outputGrads,
                                       inputGrads)
             : unaryBackward<GeluErf>(op, stream, inputs, outputs, outputGrads,
                                      inputGrads);
}

//===----------------------------------------------------------------------===//
// Binary ops
//===----------------------------------------------------------------------===//

/// The operand gradient's term of iteration point p: dy * d(value)/d(operand),
/// y recomputed when the plan keeps none.
template <typename Fn> struct BinaryTerm {
  int which, rank;
  DeviceBox lBox, rBox, yBox, dyBox;
  const float *l, *r, *y, *dy;
  PPC_HD float operator()(const int64_t *p) const {
    const Fn fn{};
    const float lv = l[broadcastOffset(lBox, p, rank)];
    const float rv = r[broadcastOffset(rBox, p, rank)];
    const float yv = y ? y[broadcastOffset(yBox, p, rank)] : fn.value(lv, rv);
    return dy[broadcastOffset(dyBox, p, rank)] * partial(fn, which, lv, rv, yv);
  }
};

template <typename Fn>
void binaryValues(Stream stream, bool contiguous, DeviceBox lBox,
                  const float *l, DeviceBox rBox, const float *r,
                  DeviceBox yBox, float *y) {
  if (contiguous) {
    launch(stream, yBox.count(),
           [=] PPC_HD(int64_t i) { y[i] = Fn().value(l[i], r[i]); });
    return;
  }
  launch(stream, yBox.count(), [=] PPC_HD(int64_t i) {
    int64_t p[kMaxRank];
    yBox.indexOf(i, p);
    y[i] = Fn().value(l[broadcastOffset(lBox, p, yBox.rank)],
                      r[broadcastOffset(rBox, p, yBox.rank)]);
  });
}

template <typename Fn>
void binaryGradients(Stream stream, int which, int64_t n, const float *l,
                     const float *r, const float *y, const float *dy,
                     float *grad) {
  launch(stream, n, [=] PPC_HD(int64_t i) {
    const Fn fn{};
    const float yv = y ? y[i] : fn.value(l[i], r[i]);
    grad[i] += dy[i] * partial(fn, which, l[i], r[i], yv);
  });
}

template <typename Fn>
KernelStatus binaryForward(const OpDesc &op, Stream stream,
                           const std::vector<KernelView> &inputs,
                           const std::vector<KernelView> &outputs) {
  if (KernelStatus s = checkForwardArity(op, inputs, 2, outputs, 1); !s.empty())
    return s;
  const KernelView &l = inputs[0], &r = inputs[1], &y = outputs[0];
  const bool contiguous = l.shape == y.shape && r.shape == y.shape &&
                          sameBox(l, y) && sameBox(r, y);
  if (!contiguous)
    if (KernelStatus s =
            checkBroadcast(op, y, {{"lhs", &l}, {"rhs", &r}, {"output", &y}});
        !s.empty())
      return s;
  binaryValues<Fn>(stream, contiguous, l.box, l.data, r.box, r.data, y.box,
                   y.data);
  return {};
}

/// Adds dy * d(value)/d(operand) into `grad`, the gradient of operand
/// `which`; a broadcast operand sums over the box.
template <typename Fn>
KernelStatus binaryGrad(const OpDesc &op, Stream stream, int which,
                        const KernelView &l, const KernelView &r,
                        const KernelView &y, const KernelView &dy,
                        const KernelView &grad) {
  if (l.shape == dy.shape && r.shape == dy.shape && sameBox(l, dy) &&
      sameBox(r, dy) && sameBox(y, dy) && sameBox(grad, dy)) {
    binaryGradients<Fn>(stream, which, dy.box.count(), l.data, r.data, y.data,
                        dy.data, grad.data);
    return {};
  }
  if (KernelStatus s = checkBroadcast(
          op, dy,
          {{"lhs", &l},
           {"rhs", &r},
           {"output", &y},
           {"output gradient", &dy},
           {which == 0 ? "lhs gradient" : "rhs gradient", &grad}});
      !s.empty())
    return s;
  BinaryTerm<Fn> term{which,  dy.box.rank, l.box,  r.box,  y.box,
                      dy.box, l.data,      r.data, y.data, dy.data};
  gatherAdd(stream, dy.box, grad.box, grad.data, term);
  return {};
}

template <typename Fn>
KernelStatus binaryBackward(const OpDesc &op, Stream stream,
                            const std::vector<KernelView> &inputs,
                            const std::vector<KernelView> &outputs,
                            const std::vector<KernelView> &outputGrads,
                            const std::vector<KernelView> &inputGrads) {
  if (KernelStatus s = checkBackwardArity(op, inputs, 2, outputs, 1,
                                          outputGrads, inputGrads);
      !s.empty())
    return s;
  for (int which = 0; which < 2; ++which) {
    if (!inputGrads[which].data)
      continue;
    if (KernelStatus s =
            binaryGrad<Fn>(op, stream, which, inputs[0], inputs[1], outputs[0],
                           outputGrads[0], inputGrads[which]);
        !s.empty())
      return s;
  }
  return {};
}

using ForwardOf = KernelStatus (*)(const OpDesc &, Stream,
                                   const std::vector<KernelView> &inputs,
                                   const std::vector<KernelView> &outputs);
using BackwardOf = KernelStatus (*)(const OpDesc &, Stream,
                                    const std::vector<KernelView> &inputs,
                                    const std::vector<KernelView> &outputs,
                                    const std::vector<KernelView> &outputGrads,
                                    const std::vector<KernelView> &inputGrads);

/// The kernel of a forward and backward that need only the stream.
CudaKernel kernelOf(ForwardOf forward, BackwardOf backward) {
  CudaKernel kernel;
  kernel.forward = [forward](const OpDesc &op, const KernelContext &,
                             ExecContext &exec,
                             const std::vector<KernelView> &inputs,
                             const std::vector<KernelView> &outputs,
                             const std::vector<KernelView> &) {
    return forward(op, exec.stream, inputs, outputs);
  };
  kernel.backward = [backward](const OpDesc &op, const KernelContext &,
                               ExecContext &exec,
                               const std::vector<KernelView> &inputs,
                               const std::vector<KernelView> &outputs,
                               const std::vector<KernelView> &outputGrads,
                               const std::vector<KernelView> &inputGrads,
                               const std::vector<KernelView> &) {
    return backward(op, exec.stream, inputs, outputs, outputGrads, inputGrads);
  };
  return kernel;
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

/// dst (+)= src * mask over the box of dst, the mask drawn at dst's global
/// flat indices; `masked` false: the mask is all ones.
void dropoutValues(Stream stream, bool masked, DropoutMask mask,
                   DeviceBox srcBox, const float *src, DeviceBox dstBox,
                   float *dst, bool accumulate) {
  launch(stream, dstBox.count(), [=] PPC_HD(int64_t i) {
    int64_t p[kMaxRank];
    dstBox.indexOf(i, p);
    float value = src[broadcastOffset(srcBox, p, dstBox.rank)];
    if (masked)
      value = value * mask.factor(dstBox.globalFlat(p));
    dst[i] = (accumulate ? dst[i] : 0.0f) + value;
  });
}

/// dst = src * mask over the box of `dst` (or dst += ... when accumulating);
/// outside training the mask is all ones.
KernelStatus applyDropout(const OpDesc &op, const KernelContext &ctx,
                          Stream stream, const KernelView &src,
                          const KernelView &dst, bool accumulate) {
  double ratio = 0;
  if (KernelStatus s = dropoutRatio(op, ratio); !s.empty())
    return s;
  if (KernelStatus s =
          checkBroadcast(op, dst, {{"source", &src}, {"destination", &dst}});
      !s.empty())
    return s;
  const DropoutMask mask(op.getInt("seed", 0), ctx.step, ratio);
  dropoutValues(stream, ctx.training && ratio != 0, mask, src.box, src.data,
                dst.box, dst.data, accumulate);
  return {};
}

CudaKernel dropoutKernel() {
  CudaKernel kernel;
  kernel.forward = [](const OpDesc &op, const KernelContext &ctx,
                      ExecContext &exec, const std::vector<KernelView> &inputs,
                      const std::vector<KernelView> &outputs,
                      const std::vector<KernelView> &) -> KernelStatus {
    if (KernelStatus s = checkForwardArity(op, inputs, 1, outputs, 1);
        !s.empty())
      return s;
    return applyDropout(op, ctx, exec.stream, inputs[0], outputs[0],
                        /*accumulate=*/false);
  };
  kernel.backward = [](const OpDesc &op, const KernelContext &ctx,
                       ExecContext &exec, const std::vector<KernelView> &,
                       const std::vector<KernelView> &,
                       const std::vector<KernelView> &outputGrads,
                       const std::vector<KernelView> &inputGrads,
                       const std::vector<KernelView> &) -> KernelStatus {
    if (KernelStatus s = expectArity(op, "gradient views", inputGrads.size(), 1,
                                     outputGrads.size(), 1);
        !s.empty())
      return s;
    if (!inputGrads[0].data)
      return {};
    // The gradient is masked like the input: same box, same mask.
    return applyDropout(op, ctx, exec.stream, outputGrads[0], inputGrads[0],
                        /*accumulate=*/true);
  };
  return kernel;
}

//===----------------------------------------------------------------------===//
// Broadcast
//===----------------------------------------------------------------------===//

void broadcastValues(Stream stream, DeviceBox xBox, const float *x,
                     DeviceBox yBox, float *y) {
  launch(stream, yBox.count(), [=] PPC_HD(int64_t i) {
    int64_t p[kMaxRank];
    yBox.indexOf(i, p);
    y[i] = x[broadcastOffset(xBox, p, yBox.rank)];
  });
}

/// dx's term of iteration point p: dy.
struct BroadcastTerm {
  DeviceBox dyBox;
  const float *dy;
  PPC_HD float operator()(const int64_t *p) const {
    return dy[broadcastOffset(dyBox, p, dyBox.rank)];
  }
};

CudaKernel broadcastKernel() {
  CudaKernel kernel;
  kernel.forward = [](const OpDesc &op, const KernelContext &,
                      ExecContext &exec, const std::vector<KernelView> &inputs,
                      const std::vector<KernelView> &outputs,
                      const std::vector<KernelView> &) -> KernelStatus {
    if (KernelStatus s = checkForwardArity(op, inputs, 1, outputs, 1);
        !s.empty())
      return s;
    const KernelView &x = inputs[0], &y = outputs[0];
    if (KernelStatus s = checkBroadcast(op, y, {{"input", &x}, {"output", &y}});
        !s.empty())
      return s;
    broadcastValues(exec.stream, x.box, x.data, y.box, y.data);
    return {};
  };
  kernel.backward = [](const OpDesc &op, const KernelContext &,
                       ExecContext &exec, const std::vector<KernelView> &,
                       const std::vector<KernelView> &,
                       const std::vector<KernelView> &outputGrads,
                       const std::vector<KernelView> &inputGrads,
                       const std::vector<KernelView> &) -> KernelStatus {
    if (KernelStatus s = expectArity(op, "gradient views", inputGrads.size(), 1,
                                     outputGrads.size(), 1);
        !s.empty())
      return s;
    const KernelView &dx = inputGrads[0];
    if (!dx.data)
      return {};
    const KernelView &dy = outputGrads[0];
    if (KernelStatus s = checkBroadcast(
            op, dy, {{"output gradient", &dy}, {"input gradient", &dx}});
        !s.empty())
      return s;
    gatherAdd(exec.stream, dy.box, dx.box, dx.data,
              BroadcastTerm{dy.box, dy.data});
    return {};
  };
  return kernel;
}

//===----------------------------------------------------------------------===//
// Select
//===----------------------------------------------------------------------===//

void selectValues(Stream stream, DeviceBox cBox, const float *c, DeviceBox lBox,
                  const float *l, DeviceBox rBox, const float *r,
                  DeviceBox yBox, float *y) {
  launch(stream, yBox.count(), [=] PPC_HD(int64_t i) {
    int64_t p[kMaxRank];
    yBox.indexOf(i, p);
    const int rank = yBox.rank;
    y[i] = c[broadcastOffset(cBox, p, rank)] != 0
               ? l[broadcastOffset(lBox, p, rank)]
               : r[broadcastOffset(rBox, p, rank)];
  });
}

/// The gradient of side `which` (1: lhs, 2: rhs) at iteration point p: dy
/// where that side is taken.
struct SelectTerm {
  int which, rank;
  DeviceBox cBox, dyBox;
  const float *c, *dy;
  PPC_HD float operator()(const int64_t *p) const {
    return selectTakes(which, c[broadcastOffset(cBox, p, rank)])
               ? dy[broadcastOffset(dyBox, p, rank)]
               : 0.0f;
  }
};

KernelStatus selectForward(const OpDesc &op, Stream stream,
                           const std::vector<KernelView> &inputs,
                           const std::vector<KernelView> &outputs) {
  if (KernelStatus s = checkForwardArity(op, inputs, 3, outputs, 1); !s.empty())
    return s;
  const KernelView &c = inputs[0], &l = inputs[1], &r = inputs[2],
                   &y = outputs[0];
  if (KernelStatus s = checkBroadcast(
          op, y, {{"condition", &c}, {"lhs", &l}, {"rhs", &r}, {"output", &y}});
      !s.empty())
    return s;
  selectValues(stream, c.box, c.data, l.box, l.data, r.box, r.data, y.box,
               y.data);
  return {};
}

KernelStatus selectBackward(const OpDesc &op, Stream stream,
                            const std::vector<KernelView> &inputs,
                            const std::vector<KernelView> &outputs,
                            const std::vector<KernelView> &outputGrads,
                            const std::vector<KernelView> &inputGrads) {
  if (KernelStatus s = checkBackwardArity(op, inputs, 3, outputs, 1,
                                          outputGrads, inputGrads);
      !s.empty())
    return s;
  const KernelView &c = inputs[0], &dy = outputGrads[0];
  for (int which = 1; which < 3; ++which) {
    const KernelView &grad = inputGrads[which];
    if (!grad.data)
      continue;
    if (KernelStatus s = checkBroadcast(
            op, dy,
            {{"condition", &c},
             {"output gradient", &dy},
             {which == 1 ? "lhs gradient" : "rhs gradient", &grad}});
        !s.empty())
      return s;
    gatherAdd(stream, dy.box, grad.box, grad.data,
              SelectTerm{which, dy.box.rank, c.box, dy.box, c.data, dy.data});
  }
  return {};
}

//===----------------------------------------------------------------------===//
// Cumulative sum: one thread per line
//===----------------------------------------------------------------------===//

KernelStatus cumsumForward(const OpDesc &op, Stream stream,
                           const std::vector<KernelView> &inputs,
                           const std::vector<KernelView> &outputs) {
  if (KernelStatus s = checkForwardArity(op, inputs, 1, outputs, 1); !s.empty())
    return s;
  CumSumLines lines;
  if (KernelStatus s =
          cumsumLines(op, outputs[0], {{"input", &inputs[0]}}, lines);
      !s.empty())
    return s;
  const float *x = inputs[0].data;
  float *y = outputs[0].data;
  launch(stream, lines.lines, [=] PPC_HD(int64_t line) {
    lines.scan(line, x, y, /*backward=*/false, /*accumulate=*/false);
  });
  return {};
}

KernelStatus cumsumBackward(const OpDesc &op, Stream stream,
                            const std::vector<KernelView> &inputs,
                            const std::vector<KernelView> &outputs,
                            const std::vector<KernelView> &outputGrads,
                            const std::vector<KernelView> &inputGrads) {
  if (KernelStatus s = checkBackwardArity(op, inputs, 1, outputs, 1,
                                          outputGrads, inputGrads);
      !s.empty())
    return s;
  const KernelView &dx = inputGrads[0], &dy = outputGrads[0];
  if (!dx.data)
    return {};
  CumSumLines lines;
  if (KernelStatus s = cumsumLines(op, dy, {{"input gradient", &dx}}, lines);
      !s.empty())
    return s;
  const float *g = dy.data;
  float *d = dx.data;
  launch(stream, lines.lines, [=] PPC_HD(int64_t line) {
    lines.scan(line, g, d, /*backward=*/true, /*accumulate=*/true);
  });
  return {};
}

/// How this backend makes the elementwise kernels (registerElementwiseOps).
struct CudaElementwiseKernels {
  template <typename Fn> static CudaKernel unary() {
    return kernelOf(unaryForward<Fn>, unaryBackward<Fn>);
  }
  template <typename Fn> static CudaKernel binary() {
    return kernelOf(binaryForward<Fn>, binaryBackward<Fn>);
  }
  static CudaKernel gelu() { return kernelOf(geluForward, geluBackward); }
  static CudaKernel dropout() { return dropoutKernel(); }
  static CudaKernel broadcast() { return broadcastKernel(); }
  static CudaKernel select() { return kernelOf(selectForward, selectBackward); }
  static CudaKernel cumsum() { return kernelOf(cumsumForward, cumsumBackward); }
};

} // namespace

void registerElementwiseKernels(CudaKernelTable &table) {
  registerElementwiseOps<CudaElementwiseKernels>(table);
}

} // namespace ppc::runtime::cuda
