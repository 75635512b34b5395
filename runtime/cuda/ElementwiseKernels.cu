//===- ElementwiseKernels.cu - elementwise ops, select, cumsum ------------===//
//
// The cuda kernels of the cpu backend's ElementwiseKernels.cpp, with its
// semantics: every op is elementwise over its result with numpy
// broadcasting (an operand is aligned at the trailing dim and a size-1 dim
// is read at index 0 for every result index). A partition computes its
// output box, one thread per output element; a broadcast operand's gradient
// is summed over the broadcast positions of the box of the output gradient
// (the plan sums the partials of the partitions): per gradient element, in
// the row-major order of the positions (the cpu kernel's walk), by one
// thread, or, where few gradient elements sum over many positions (a
// bias's gradient), by one thread per chunk of positions and a second pass
// adding the chunks in order. No atomics. Views whose boxes all agree take
// a contiguous path; the others are checked on the host as the cpu kernel
// checks them, with its messages. The per-element functions and the checks
// are the cpu kernels' (ElementwiseOps.h). Dropout draws DropoutMask's mask
// from the global flat index of the element it writes. Select routes the
// gradient as gatherAdd's term; cumsum runs a thread per line of its axis.
// Every view is read and written as stored (native).
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

/// Which dims of the iteration box `iter` a gradient of box `gradBox` is
/// broadcast over (its "free" dims), and how many points they span.
struct FreeDims {
  unsigned mask = 0;
  int64_t points = 1;
};

FreeDims freeDimsOf(const DeviceBox &iter, const DeviceBox &gradBox) {
  FreeDims f;
  const int lead = iter.rank - gradBox.rank;
  for (int j = 0; j < iter.rank; ++j)
    if (j < lead || gradBox.shape[j - lead] == 1) {
      f.mask |= 1u << j;
      f.points *= std::max<int64_t>(iter.hi[j] - iter.lo[j], 0);
    }
  return f;
}

/// `start` plus term(p) over the free points [first, last) (row-major
/// order of the free dims) of the iteration box that read gradient element
/// `e`, added in that order; `start` when the element is outside the box.
template <typename Term>
PPC_HD float sumTerms(const DeviceBox &iter, const DeviceBox &gradBox,
                      unsigned freeDims, int64_t e, int64_t first, int64_t last,
                      const Term &term, float start) {
  int64_t g[kMaxRank], p[kMaxRank];
  gradBox.indexOf(e, g);
  const int rank = iter.rank, lead = iter.rank - gradBox.rank;
  int64_t f = first;
  for (int j = rank - 1; j >= 0; --j) {
    if (freeDims & (1u << j)) {
      const int64_t extent = iter.hi[j] - iter.lo[j];
      if (extent <= 0)
        return start;
      p[j] = iter.lo[j] + f % extent;
      f /= extent;
    } else {
      p[j] = g[j - lead];
      if (p[j] < iter.lo[j] || p[j] >= iter.hi[j])
        return start;
    }
  }
  float sum = start;
  for (int64_t n = first; n < last; ++n) {
    sum += term(p);
    for (int j = rank - 1; j >= 0; --j) {
      if (!(freeDims & (1u << j)))
        continue;
      if (++p[j] < iter.hi[j])
        break;
      p[j] = iter.lo[j];
    }
  }
  return sum;
}

/// Gradient elements below which gatherAdd splits each element's positions
/// into chunks (a device holds about this many threads at once).
constexpr int64_t kGatherThreads = int64_t(1) << 16;

/// grad[e] += sum of term(p) over the points p of the iteration box `iter`
/// that read gradient element e with numpy broadcasting (see the header);
/// grad[e] = that sum where the gradient is overwritten.
template <typename Term>
absl::Status gatherAdd(ExecContext &ctx, DeviceBox iter,
                       const KernelView &gradView, Term term) {
  const DeviceBox gradBox = gradView.box;
  const Elements grad = gradView.elements;
  const bool set = writesGradient(ctx, gradView, true);
  const int64_t elements = gradBox.count();
  const FreeDims free = freeDimsOf(iter, gradBox);
  const unsigned mask = free.mask;
  const int64_t points = free.points;
  const int64_t chunks =
      elements >= kGatherThreads || points < 64
          ? 1
          : std::min(points / 32, (kGatherThreads + elements - 1) / elements);
  if (chunks <= 1) {
    launch(ctx.stream, elements, [=] PPC_HD(int64_t e) {
      grad[e] = sumTerms(iter, gradBox, mask, e, 0, points, term,
                         set ? 0.0f : static_cast<float>(grad[e]));
    });
    return {};
  }
  float *partials =
      ctx.workspace ? ctx.workspace->floats(chunks * elements) : nullptr;
  if (!partials)
    return absl::ResourceExhaustedError(
        "out of device memory for a gradient's partial sums");
  const int64_t perChunk = (points + chunks - 1) / chunks;
  launch(ctx.stream, chunks * elements, [=] PPC_HD(int64_t i) {
    const int64_t chunk = i / elements, e = i % elements;
    const int64_t first = chunk * perChunk;
    const int64_t last = first + perChunk < points ? first + perChunk : points;
    partials[i] = sumTerms(iter, gradBox, mask, e, first, last, term, 0.0f);
  });
  launch(ctx.stream, elements, [=] PPC_HD(int64_t e) {
    float sum = set ? 0.0f : static_cast<float>(grad[e]);
    for (int64_t chunk = 0; chunk < chunks; ++chunk)
      sum += partials[chunk * elements + e];
    grad[e] = sum;
  });
  return {};
}

/// A gatherAdd error as the op's (OK stays OK).
absl::Status withKind(const OpDesc &op, absl::Status status) {
  return annotate(status, op.kind);
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
  Elements x, y, dy;
  PPC_HD float operator()(const int64_t *p) const {
    const float xv = x[broadcastOffset(xBox, p, rank)];
    const float yv = y ? static_cast<float>(y[broadcastOffset(yBox, p, rank)])
                       : fn.value(xv);
    return dy[broadcastOffset(dyBox, p, rank)] * fn.derivative(xv, yv);
  }
};

template <typename Fn>
void unaryValues(Stream stream, Fn fn, bool contiguous, DeviceBox xBox,
                 Elements x, DeviceBox yBox, Elements y) {
  if (contiguous && runsFit({x, y})) {
    launchRuns<1>(stream, x.type, yBox.count(), {{x.data}}, y.data, false,
                  [=] PPC_HD(const float *a) { return fn.value(a[0]); });
    return;
  }
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
void unaryGradients(Stream stream, Fn fn, int64_t n, Elements x, Elements y,
                    Elements dy, Elements dx, bool set) {
  if (y && runsFit({x, y, dy, dx})) {
    launchRuns<3>(stream, x.type, n, {{x.data, y.data, dy.data}}, dx.data, !set,
                  [=] PPC_HD(const float *a) {
                    return a[2] * fn.derivative(a[0], a[1]);
                  });
    return;
  }
  if (!y && runsFit({x, dy, dx})) {
    launchRuns<2>(stream, x.type, n, {{x.data, dy.data}}, dx.data, !set,
                  [=] PPC_HD(const float *a) {
                    return a[1] * fn.derivative(a[0], fn.value(a[0]));
                  });
    return;
  }
  launch(stream, n, [=] PPC_HD(int64_t i) {
    const float yv = y ? static_cast<float>(y[i]) : fn.value(x[i]);
    addInto(dx, i, dy[i] * fn.derivative(x[i], yv), set);
  });
}

template <typename Fn>
absl::Status unaryForward(const OpDesc &op, ExecContext &ctx,
                          const std::vector<KernelView> &inputs,
                          const std::vector<KernelView> &outputs) {
  absl::Status error;
  Fn fn(op, error);
  if (!error.ok())
    return error;
  if (absl::Status s = checkForwardArity(op, inputs, 1, outputs, 1); !s.ok())
    return s;
  const KernelView &x = inputs[0], &y = outputs[0];
  const bool contiguous = x.shape == y.shape && sameBox(x, y);
  if (!contiguous)
    if (absl::Status s = checkBroadcast(op, y, {{"input", &x}, {"output", &y}});
        !s.ok())
      return s;
  unaryValues(ctx.stream, fn, contiguous, x.box, x.elements, y.box, y.elements);
  return {};
}

/// dx += dy * f'(x).
template <typename Fn>
absl::Status unaryBackward(const OpDesc &op, ExecContext &ctx,
                           const std::vector<KernelView> &inputs,
                           const std::vector<KernelView> &outputs,
                           const std::vector<KernelView> &outputGrads,
                           const std::vector<KernelView> &inputGrads) {
  absl::Status error;
  Fn fn(op, error);
  if (!error.ok())
    return error;
  if (absl::Status s = checkBackwardArity(op, inputs, 1, outputs, 1,
                                          outputGrads, inputGrads);
      !s.ok())
    return s;
  const KernelView &dx = inputGrads[0];
  if (!dx.present())
    return {};
  const KernelView &x = inputs[0], &y = outputs[0], &dy = outputGrads[0];
  // The plan keeps no result for a backward that reads none (relu, clip):
  // such derivatives ignore y, and the others get it recomputed.
  if (x.shape == dy.shape && sameBox(x, dy) && sameBox(dx, dy) &&
      (!y.present() || sameBox(y, dy))) {
    unaryGradients(ctx.stream, fn, dy.box.count(), x.elements, y.elements,
                   dy.elements, dx.elements, writesGradient(ctx, dx, true));
    return {};
  }
  if (absl::Status s = checkBroadcast(op, dy,
                                      {{"input", &x},
                                       {"output", &y},
                                       {"output gradient", &dy},
                                       {"input gradient", &dx}});
      !s.ok())
    return s;
  UnaryTerm<Fn> term{fn,     dy.box.rank, x.box,      y.box,
                     dy.box, x.elements,  y.elements, dy.elements};
  return withKind(op, gatherAdd(ctx, dy.box, dx, term));
}

/// ppc.gelu: the functor of its approximation.
absl::Status geluForward(const OpDesc &op, ExecContext &ctx,
                         const std::vector<KernelView> &inputs,
                         const std::vector<KernelView> &outputs) {
  absl::Status error;
  const std::string approximation = geluApproximation(op, error);
  if (!error.ok())
    return error;
  return approximation == "tanh"
             ? unaryForward<GeluTanh>(op, ctx, inputs, outputs)
             : unaryForward<GeluErf>(op, ctx, inputs, outputs);
}

absl::Status geluBackward(const OpDesc &op, ExecContext &ctx,
                          const std::vector<KernelView> &inputs,
                          const std::vector<KernelView> &outputs,
                          const std::vector<KernelView> &outputGrads,
                          const std::vector<KernelView> &inputGrads) {
  absl::Status error;
  const std::string approximation = geluApproximation(op, error);
  if (!error.ok())
    return error;
  return approximation == "tanh"
             ? unaryBackward<GeluTanh>(op, ctx, inputs, outputs, outputGrads,
                                       inputGrads)
             : unaryBackward<GeluErf>(op, ctx, inputs, outputs, outputGrads,
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
  Elements l, r, y, dy;
  PPC_HD float operator()(const int64_t *p) const {
    const Fn fn{};
    const float lv = l[broadcastOffset(lBox, p, rank)];
    const float rv = r[broadcastOffset(rBox, p, rank)];
    const float yv = y ? static_cast<float>(y[broadcastOffset(yBox, p, rank)])
                       : fn.value(lv, rv);
    return dy[broadcastOffset(dyBox, p, rank)] * partial(fn, which, lv, rv, yv);
  }
};

template <typename Fn>
void binaryValues(Stream stream, bool contiguous, DeviceBox lBox, Elements l,
                  DeviceBox rBox, Elements r, DeviceBox yBox, Elements y) {
  if (contiguous && runsFit({l, r, y})) {
    launchRuns<2>(
        stream, l.type, yBox.count(), {{l.data, r.data}}, y.data, false,
        [=] PPC_HD(const float *a) { return Fn().value(a[0], a[1]); });
    return;
  }
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
void binaryGradients(Stream stream, int which, int64_t n, Elements l,
                     Elements r, Elements y, Elements dy, Elements grad,
                     bool set) {
  if (y && runsFit({l, r, y, dy, grad})) {
    launchRuns<4>(stream, l.type, n, {{l.data, r.data, y.data, dy.data}},
                  grad.data, !set, [=] PPC_HD(const float *a) {
                    return a[3] * partial(Fn(), which, a[0], a[1], a[2]);
                  });
    return;
  }
  if (!y && runsFit({l, r, dy, grad})) {
    launchRuns<3>(stream, l.type, n, {{l.data, r.data, dy.data}}, grad.data,
                  !set, [=] PPC_HD(const float *a) {
                    const Fn fn{};
                    return a[2] *
                           partial(fn, which, a[0], a[1], fn.value(a[0], a[1]));
                  });
    return;
  }
  launch(stream, n, [=] PPC_HD(int64_t i) {
    const Fn fn{};
    const float yv = y ? static_cast<float>(y[i]) : fn.value(l[i], r[i]);
    addInto(grad, i, dy[i] * partial(fn, which, l[i], r[i], yv), set);
  });
}

template <typename Fn>
absl::Status binaryForward(const OpDesc &op, ExecContext &ctx,
                           const std::vector<KernelView> &inputs,
                           const std::vector<KernelView> &outputs) {
  if (absl::Status s = checkForwardArity(op, inputs, 2, outputs, 1); !s.ok())
    return s;
  const KernelView &l = inputs[0], &r = inputs[1], &y = outputs[0];
  const bool contiguous = l.shape == y.shape && r.shape == y.shape &&
                          sameBox(l, y) && sameBox(r, y);
  if (!contiguous)
    if (absl::Status s =
            checkBroadcast(op, y, {{"lhs", &l}, {"rhs", &r}, {"output", &y}});
        !s.ok())
      return s;
  binaryValues<Fn>(ctx.stream, contiguous, l.box, l.elements, r.box, r.elements,
                   y.box, y.elements);
  return {};
}

/// Adds dy * d(value)/d(operand) into `grad`, the gradient of operand
/// `which`; a broadcast operand sums over the box.
template <typename Fn>
absl::Status binaryGrad(const OpDesc &op, ExecContext &ctx, int which,
                        const KernelView &l, const KernelView &r,
                        const KernelView &y, const KernelView &dy,
                        const KernelView &grad) {
  if (l.shape == dy.shape && r.shape == dy.shape && sameBox(l, dy) &&
      sameBox(r, dy) && sameBox(y, dy) && sameBox(grad, dy)) {
    binaryGradients<Fn>(ctx.stream, which, dy.box.count(), l.elements,
                        r.elements, y.elements, dy.elements, grad.elements,
                        writesGradient(ctx, grad, true));
    return {};
  }
  if (absl::Status s = checkBroadcast(
          op, dy,
          {{"lhs", &l},
           {"rhs", &r},
           {"output", &y},
           {"output gradient", &dy},
           {which == 0 ? "lhs gradient" : "rhs gradient", &grad}});
      !s.ok())
    return s;
  BinaryTerm<Fn> term{which,  dy.box.rank, l.box,      r.box,      y.box,
                      dy.box, l.elements,  r.elements, y.elements, dy.elements};
  return withKind(op, gatherAdd(ctx, dy.box, grad, term));
}

template <typename Fn>
absl::Status binaryBackward(const OpDesc &op, ExecContext &ctx,
                            const std::vector<KernelView> &inputs,
                            const std::vector<KernelView> &outputs,
                            const std::vector<KernelView> &outputGrads,
                            const std::vector<KernelView> &inputGrads) {
  if (absl::Status s = checkBackwardArity(op, inputs, 2, outputs, 1,
                                          outputGrads, inputGrads);
      !s.ok())
    return s;
  for (int which = 0; which < 2; ++which) {
    if (!inputGrads[which].present())
      continue;
    if (absl::Status s =
            binaryGrad<Fn>(op, ctx, which, inputs[0], inputs[1], outputs[0],
                           outputGrads[0], inputGrads[which]);
        !s.ok())
      return s;
  }
  return {};
}

using ForwardOf = absl::Status (*)(const OpDesc &, ExecContext &,
                                   const std::vector<KernelView> &inputs,
                                   const std::vector<KernelView> &outputs);
using BackwardOf = absl::Status (*)(const OpDesc &, ExecContext &,
                                    const std::vector<KernelView> &inputs,
                                    const std::vector<KernelView> &outputs,
                                    const std::vector<KernelView> &outputGrads,
                                    const std::vector<KernelView> &inputGrads);

/// The kernel of a forward and backward that need no KernelContext.
CudaKernel kernelOf(ForwardOf forward, BackwardOf backward) {
  CudaKernel kernel;
  kernel.native = true;
  kernel.overwrites = true;
  kernel.forward = [forward](const OpDesc &op, const KernelContext &,
                             ExecContext &exec,
                             const std::vector<KernelView> &inputs,
                             const std::vector<KernelView> &outputs,
                             const std::vector<KernelView> &) {
    return forward(op, exec, inputs, outputs);
  };
  kernel.backward = [backward](const OpDesc &op, const KernelContext &,
                               ExecContext &exec,
                               const std::vector<KernelView> &inputs,
                               const std::vector<KernelView> &outputs,
                               const std::vector<KernelView> &outputGrads,
                               const std::vector<KernelView> &inputGrads,
                               const std::vector<KernelView> &) {
    return backward(op, exec, inputs, outputs, outputGrads, inputGrads);
  };
  return kernel;
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

/// dst (+)= src * mask over the box of dst, the mask drawn at dst's global
/// flat indices; `masked` false: the mask is all ones.
void dropoutValues(Stream stream, bool masked, DropoutMask mask,
                   DeviceBox srcBox, Elements src, DeviceBox dstBox,
                   Elements dst, bool accumulate) {
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
absl::Status applyDropout(const OpDesc &op, const KernelContext &ctx,
                          Stream stream, const KernelView &src,
                          const KernelView &dst, bool accumulate) {
  double ratio = 0;
  if (absl::Status s = dropoutRatio(op, ratio); !s.ok())
    return s;
  if (absl::Status s =
          checkBroadcast(op, dst, {{"source", &src}, {"destination", &dst}});
      !s.ok())
    return s;
  const DropoutMask mask(op.getInt("seed", 0), ctx.step, ratio);
  dropoutValues(stream, ctx.training && ratio != 0, mask, src.box, src.elements,
                dst.box, dst.elements, accumulate);
  return {};
}

CudaKernel dropoutKernel() {
  CudaKernel kernel;
  kernel.native = true;
  kernel.overwrites = true;
  kernel.forward = [](const OpDesc &op, const KernelContext &ctx,
                      ExecContext &exec, const std::vector<KernelView> &inputs,
                      const std::vector<KernelView> &outputs,
                      const std::vector<KernelView> &) -> absl::Status {
    if (absl::Status s = checkForwardArity(op, inputs, 1, outputs, 1); !s.ok())
      return s;
    return applyDropout(op, ctx, exec.stream, inputs[0], outputs[0],
                        /*accumulate=*/false);
  };
  kernel.backward = [](const OpDesc &op, const KernelContext &ctx,
                       ExecContext &exec, const std::vector<KernelView> &,
                       const std::vector<KernelView> &,
                       const std::vector<KernelView> &outputGrads,
                       const std::vector<KernelView> &inputGrads,
                       const std::vector<KernelView> &) -> absl::Status {
    if (absl::Status s = expectArity(op, "gradient views", inputGrads.size(), 1,
                                     outputGrads.size(), 1);
        !s.ok())
      return s;
    if (!inputGrads[0].present())
      return {};
    // The gradient is masked like the input: same box, same mask.
    return applyDropout(
        op, ctx, exec.stream, outputGrads[0], inputGrads[0],
        /*accumulate=*/!writesGradient(exec, inputGrads[0], true));
  };
  return kernel;
}

//===----------------------------------------------------------------------===//
// Broadcast
//===----------------------------------------------------------------------===//

void broadcastValues(Stream stream, DeviceBox xBox, Elements x, DeviceBox yBox,
                     Elements y) {
  launch(stream, yBox.count(), [=] PPC_HD(int64_t i) {
    int64_t p[kMaxRank];
    yBox.indexOf(i, p);
    y[i] = x[broadcastOffset(xBox, p, yBox.rank)];
  });
}

/// dx's term of iteration point p: dy.
struct BroadcastTerm {
  DeviceBox dyBox;
  Elements dy;
  PPC_HD float operator()(const int64_t *p) const {
    return dy[broadcastOffset(dyBox, p, dyBox.rank)];
  }
};

CudaKernel broadcastKernel() {
  CudaKernel kernel;
  kernel.native = true;
  kernel.overwrites = true;
  kernel.forward = [](const OpDesc &op, const KernelContext &,
                      ExecContext &exec, const std::vector<KernelView> &inputs,
                      const std::vector<KernelView> &outputs,
                      const std::vector<KernelView> &) -> absl::Status {
    if (absl::Status s = checkForwardArity(op, inputs, 1, outputs, 1); !s.ok())
      return s;
    const KernelView &x = inputs[0], &y = outputs[0];
    if (absl::Status s = checkBroadcast(op, y, {{"input", &x}, {"output", &y}});
        !s.ok())
      return s;
    broadcastValues(exec.stream, x.box, x.elements, y.box, y.elements);
    return {};
  };
  kernel.backward = [](const OpDesc &op, const KernelContext &,
                       ExecContext &exec, const std::vector<KernelView> &,
                       const std::vector<KernelView> &,
                       const std::vector<KernelView> &outputGrads,
                       const std::vector<KernelView> &inputGrads,
                       const std::vector<KernelView> &) -> absl::Status {
    if (absl::Status s = expectArity(op, "gradient views", inputGrads.size(), 1,
                                     outputGrads.size(), 1);
        !s.ok())
      return s;
    const KernelView &dx = inputGrads[0];
    if (!dx.present())
      return {};
    const KernelView &dy = outputGrads[0];
    if (absl::Status s = checkBroadcast(
            op, dy, {{"output gradient", &dy}, {"input gradient", &dx}});
        !s.ok())
      return s;
    return withKind(
        op, gatherAdd(exec, dy.box, dx, BroadcastTerm{dy.box, dy.elements}));
  };
  return kernel;
}

//===----------------------------------------------------------------------===//
// Select
//===----------------------------------------------------------------------===//

void selectValues(Stream stream, DeviceBox cBox, Elements c, DeviceBox lBox,
                  Elements l, DeviceBox rBox, Elements r, DeviceBox yBox,
                  Elements y) {
  launch(stream, yBox.count(), [=] PPC_HD(int64_t i) {
    int64_t p[kMaxRank];
    yBox.indexOf(i, p);
    const int rank = yBox.rank;
    y[i] = static_cast<float>(c[broadcastOffset(cBox, p, rank)]) != 0
               ? static_cast<float>(l[broadcastOffset(lBox, p, rank)])
               : static_cast<float>(r[broadcastOffset(rBox, p, rank)]);
  });
}

/// The gradient of side `which` (1: lhs, 2: rhs) at iteration point p: dy
/// where that side is taken.
struct SelectTerm {
  int which, rank;
  DeviceBox cBox, dyBox;
  Elements c, dy;
  PPC_HD float operator()(const int64_t *p) const {
    return selectTakes(which, c[broadcastOffset(cBox, p, rank)])
               ? static_cast<float>(dy[broadcastOffset(dyBox, p, rank)])
               : 0.0f;
  }
};

absl::Status selectForward(const OpDesc &op, ExecContext &ctx,
                           const std::vector<KernelView> &inputs,
                           const std::vector<KernelView> &outputs) {
  if (absl::Status s = checkForwardArity(op, inputs, 3, outputs, 1); !s.ok())
    return s;
  const KernelView &c = inputs[0], &l = inputs[1], &r = inputs[2],
                   &y = outputs[0];
  if (absl::Status s = checkBroadcast(
          op, y, {{"condition", &c}, {"lhs", &l}, {"rhs", &r}, {"output", &y}});
      !s.ok())
    return s;
  selectValues(ctx.stream, c.box, c.elements, l.box, l.elements, r.box,
               r.elements, y.box, y.elements);
  return {};
}

absl::Status selectBackward(const OpDesc &op, ExecContext &ctx,
                            const std::vector<KernelView> &inputs,
                            const std::vector<KernelView> &outputs,
                            const std::vector<KernelView> &outputGrads,
                            const std::vector<KernelView> &inputGrads) {
  if (absl::Status s = checkBackwardArity(op, inputs, 3, outputs, 1,
                                          outputGrads, inputGrads);
      !s.ok())
    return s;
  const KernelView &c = inputs[0], &dy = outputGrads[0];
  for (int which = 1; which < 3; ++which) {
    const KernelView &grad = inputGrads[which];
    if (!grad.present())
      continue;
    if (absl::Status s = checkBroadcast(
            op, dy,
            {{"condition", &c},
             {"output gradient", &dy},
             {which == 1 ? "lhs gradient" : "rhs gradient", &grad}});
        !s.ok())
      return s;
    if (absl::Status s =
            withKind(op, gatherAdd(ctx, dy.box, grad,
                                   SelectTerm{which, dy.box.rank, c.box, dy.box,
                                              c.elements, dy.elements}));
        !s.ok())
      return s;
  }
  return {};
}

//===----------------------------------------------------------------------===//
// Cumulative sum: one thread per line
//===----------------------------------------------------------------------===//

absl::Status cumsumForward(const OpDesc &op, ExecContext &ctx,
                           const std::vector<KernelView> &inputs,
                           const std::vector<KernelView> &outputs) {
  if (absl::Status s = checkForwardArity(op, inputs, 1, outputs, 1); !s.ok())
    return s;
  CumSumLines lines;
  if (absl::Status s =
          cumsumLines(op, outputs[0], {{"input", &inputs[0]}}, lines);
      !s.ok())
    return s;
  const Elements x = inputs[0].elements, y = outputs[0].elements;
  launch(ctx.stream, lines.lines, [=] PPC_HD(int64_t line) {
    lines.scan(line, x, y, /*backward=*/false, /*accumulate=*/false);
  });
  return {};
}

absl::Status cumsumBackward(const OpDesc &op, ExecContext &ctx,
                            const std::vector<KernelView> &inputs,
                            const std::vector<KernelView> &outputs,
                            const std::vector<KernelView> &outputGrads,
                            const std::vector<KernelView> &inputGrads) {
  if (absl::Status s = checkBackwardArity(op, inputs, 1, outputs, 1,
                                          outputGrads, inputGrads);
      !s.ok())
    return s;
  const KernelView &dx = inputGrads[0], &dy = outputGrads[0];
  if (!dx.present())
    return {};
  CumSumLines lines;
  if (absl::Status s = cumsumLines(op, dy, {{"input gradient", &dx}}, lines);
      !s.ok())
    return s;
  const Elements g = dy.elements, d = dx.elements;
  const bool accumulate = !writesGradient(ctx, dx, true);
  launch(ctx.stream, lines.lines, [=] PPC_HD(int64_t line) {
    lines.scan(line, g, d, /*backward=*/true, accumulate);
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
