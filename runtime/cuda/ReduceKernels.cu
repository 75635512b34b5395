//===- ReduceKernels.cu - reduce_sum, reduce_mean, reduce_max -------------===//
//
// The cuda kernels of the cpu backend's ReduceKernels.cpp, with its
// semantics, walk and errors (ReduceWalk.h). The iteration space is the input's
// dims. A partition computes its output box over the reduced range its input
// view holds along the reduced axes: a split reduced axis leaves partial sums,
// which the plan adds up, so a mean divides by the global reduced count.
// reduce_max is never split along a reduced axis (a max of partials is not
// their sum). A block of threads per output element reduces its range where
// there are few outputs over long ranges (Reductions.h), else one thread per
// output element loops over its range (deterministic, no atomics); sum and
// mean's backward is one thread per input-grad element, max's one per
// output element (ties split the gradient evenly, as torch.amax). Views are
// read and written as stored (native).
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"

#include "ReduceWalk.h"
#include "Reductions.h"

#include <cmath>
#include <limits>

namespace ppc::runtime::cuda {
namespace {

using Views = std::vector<KernelView>;

/// The walk of one partition (ReduceWalk.h) as its kernels capture it: per
/// input dim whether it is reduced, per output dim the input dim indexing
/// it (-1: a kept reduced dim, index 0).
struct ReducePlan {
  int32_t rank = 0; ///< input rank
  int64_t lo[kMaxRank] = {}, hi[kMaxRank] = {};
  bool reduced[kMaxRank] = {};
  int32_t outRank = 0;
  int32_t outDim[kMaxRank] = {};
  float scale = 1.0f; ///< the mean's 1 / global count, else 1
  bool empty = false; ///< the walk box has no point
};

/// The walk of the partition whose input-like view is `input` and
/// output-like view is `output`, checked against the views that the
/// kernels read from it (input-like ones at its points, output-like ones
/// through the output dims).
absl::Status planWalk(const OpDesc &op, Reduction kind, const TensorView &input,
                      const TensorView &output,
                      const std::vector<const TensorView *> &inputLike,
                      const std::vector<const TensorView *> &outputLike,
                      ReducePlan &plan) {
  ReduceWalk walk;
  std::vector<StridedAccess> accesses;
  if (absl::Status s = reduceWalk(op, kind, input, output, walk); !s.ok())
    return s;
  if (absl::Status s =
          reduceAccesses(op, walk, inputLike, outputLike, accesses);
      !s.ok())
    return s;
  plan.rank = static_cast<int32_t>(walk.lo.size());
  for (int d = 0; d < plan.rank; ++d) {
    plan.lo[d] = walk.lo[d];
    plan.hi[d] = walk.hi[d];
    plan.reduced[d] = walk.reduced[d];
    plan.empty |= walk.hi[d] <= walk.lo[d];
  }
  plan.outRank = static_cast<int32_t>(walk.outputDims.size());
  for (int o = 0; o < plan.outRank; ++o)
    plan.outDim[o] = static_cast<int32_t>(walk.outputDims[o].iterDim);
  plan.scale = walk.scale(kind);
  return {};
}

/// The reduced dims of a view's box: their extents (the walk's) and the
/// view's strides along them.
struct ReducedRange {
  int32_t n = 0;
  int64_t extent[kMaxRank] = {};
  int64_t stride[kMaxRank] = {};
  int64_t count = 1;
};

ReducedRange reducedRange(const ReducePlan &walk, const TensorView &view) {
  ReducedRange r;
  std::vector<int64_t> strides(view.lo.size(), 1);
  for (size_t d = strides.size(); d-- > 1;)
    strides[d - 1] = strides[d] * (view.hi[d] - view.lo[d]);
  for (int d = 0; d < walk.rank; ++d)
    if (walk.reduced[d]) {
      r.extent[r.n] = walk.hi[d] - walk.lo[d];
      r.stride[r.n] = strides[d];
      r.count *= r.extent[r.n] > 0 ? r.extent[r.n] : 0;
      ++r.n;
    }
  return r;
}

/// The global input index of output element `i` of `out` with the reduced
/// dims at the walk's low end; false if it is no point of the walk (a kept
/// reduced dim not at 0).
PPC_HD inline bool walkIndexOf(const ReducePlan &walk, const DeviceBox &out,
                               int64_t i, int64_t *index) {
  int64_t outIndex[kMaxRank];
  out.indexOf(i, outIndex);
  for (int d = 0; d < walk.rank; ++d)
    index[d] = walk.lo[d];
  for (int o = 0; o < walk.outRank; ++o) {
    const int d = walk.outDim[o];
    if (d < 0) {
      if (outIndex[o] != 0)
        return false;
    } else {
      index[d] = outIndex[o];
    }
  }
  return true;
}

/// Steps `offset` to the next point of the reduced range (odometer).
PPC_HD inline void nextReduced(const ReducedRange &r, int64_t *counter,
                               int64_t &offset) {
  for (int k = r.n - 1; k >= 0; --k) {
    offset += r.stride[k];
    if (++counter[k] < r.extent[k])
      return;
    offset -= r.stride[k] * r.extent[k];
    counter[k] = 0;
  }
}

//===----------------------------------------------------------------------===//
// Device kernels
//===----------------------------------------------------------------------===//

/// The offset of point `j` (row-major) of the reduced range from its first.
PPC_HD inline int64_t reducedOffset(const ReducedRange &r, int64_t j) {
  int64_t offset = 0;
  for (int k = r.n - 1; k >= 0; --k) {
    offset += (j % r.extent[k]) * r.stride[k];
    j /= r.extent[k];
  }
  return offset;
}

/// Output elements below which a reduction of long ranges takes a block of
/// threads per element (Reductions.h) rather than one thread.
constexpr int64_t kThreadPerOutput = int64_t(1) << 16;

/// y = sum / max of x over each output element's reduced range (times
/// `scale`: the mean's 1 / global count): a block of threads per output
/// element where there are few elements and long ranges, else one thread
/// per element summing its range in order.
void reduceKernel(Stream stream, ReducePlan walk, ReducedRange r, bool max,
                  float scale, DeviceBox xBox, Elements x, DeviceBox yBox,
                  Elements y) {
  if (yBox.count() < kThreadPerOutput && r.count >= kBlockRowWidth) {
    launchRows(
        stream, yBox.count(), r.count,
        [=] PPC_HD(const RowThreads &t, int64_t i) {
          int64_t index[kMaxRank];
          const bool any = !walk.empty && walkIndexOf(walk, yBox, i, index);
          const int64_t base = any ? xBox.offsetOf(index) : 0;
          float acc = max ? -INFINITY : 0.0f;
          for (int64_t j = t.thread; any && j < r.count; j += t.threads) {
            const float value = x[base + reducedOffset(r, j)];
            if (!max)
              acc += value;
            else if (value > acc || value != value)
              acc = value;
          }
          acc = max ? t.max(acc) : t.sum(acc);
          if (t.thread == 0)
            y[i] = max ? acc : acc * scale;
        });
    return;
  }
  launch(stream, yBox.count(), [=] PPC_HD(int64_t i) {
    const float initial = max ? -INFINITY : 0.0f;
    int64_t index[kMaxRank];
    if (walk.empty || !walkIndexOf(walk, yBox, i, index)) {
      y[i] = max ? initial : initial * scale;
      return;
    }
    int64_t offset = xBox.offsetOf(index);
    int64_t counter[kMaxRank] = {};
    float acc = initial;
    for (int64_t j = 0; j < r.count; ++j) {
      const float value = x[offset];
      if (!max)
        acc += value;
      else if (value > acc || value != value) // NaN propagates
        acc = value;
      nextReduced(r, counter, offset);
    }
    y[i] = max ? acc : acc * scale;
  });
}

/// Sum and mean's backward: dx += dy * scale over the walk box.
void sumBackwardKernel(ExecContext &ctx, ReducePlan walk, float scale,
                       const KernelView &dxView, DeviceBox dyBox, Elements dy) {
  const DeviceBox dxBox = dxView.box;
  const Elements dx = dxView.elements;
  DeviceBox it;
  it.rank = walk.rank;
  for (int d = 0; d < walk.rank; ++d) {
    it.lo[d] = walk.lo[d];
    it.hi[d] = walk.hi[d];
  }
  const int64_t n = walk.empty ? 0 : it.count();
  // The walk's points are the elements of dx: they cover it.
  const bool set = writesGradient(ctx, dxView, n == dxView.count());
  launch(ctx.stream, n, [=] PPC_HD(int64_t i) {
    int64_t index[kMaxRank], outIndex[kMaxRank];
    it.indexOf(i, index);
    for (int o = 0; o < walk.outRank; ++o)
      outIndex[o] = walk.outDim[o] < 0 ? 0 : index[walk.outDim[o]];
    addInto(dx, dxBox.offsetOf(index), dy[dyBox.offsetOf(outIndex)] * scale,
            set);
  });
}

/// Max's backward: per output element, dy split evenly among the inputs of
/// its range equal to y.
void maxBackwardKernel(Stream stream, ReducePlan walk, ReducedRange rx,
                       ReducedRange rdx, DeviceBox xBox, Elements x,
                       DeviceBox yBox, Elements y, DeviceBox dxBox, Elements dx,
                       DeviceBox dyBox, Elements dy) {
  launch(stream, walk.empty ? 0 : dyBox.count(), [=] PPC_HD(int64_t i) {
    int64_t index[kMaxRank];
    if (!walkIndexOf(walk, dyBox, i, index))
      return;
    int64_t outIndex[kMaxRank];
    dyBox.indexOf(i, outIndex);
    const float target = y[yBox.offsetOf(outIndex)];
    const int64_t xStart = xBox.offsetOf(index);
    int64_t offset = xStart, counter[kMaxRank] = {};
    float ties = 0.0f;
    for (int64_t j = 0; j < rx.count; ++j) {
      if (static_cast<float>(x[offset]) == target)
        ties += 1.0f;
      nextReduced(rx, counter, offset);
    }
    if (ties == 0.0f)
      return;
    const float share = dy[i] / ties;
    int64_t xo = xStart, dxo = dxBox.offsetOf(index);
    int64_t cx[kMaxRank] = {}, cdx[kMaxRank] = {};
    for (int64_t j = 0; j < rx.count; ++j) {
      if (static_cast<float>(x[xo]) == target)
        dx[dxo] += share;
      nextReduced(rx, cx, xo);
      nextReduced(rdx, cdx, dxo);
    }
  });
}

//===----------------------------------------------------------------------===//
// Forward and backward
//===----------------------------------------------------------------------===//

absl::Status reduceForward(const OpDesc &op, Reduction kind, ExecContext &ctx,
                           const Views &inputs, const Views &outputs) {
  if (absl::Status s = checkForwardArity(op, inputs, 1, outputs, 1); !s.ok())
    return s;
  const KernelView &x = inputs[0], &y = outputs[0];
  ReducePlan walk;
  if (absl::Status s = planWalk(op, kind, x, y, {&x}, {&y}, walk); !s.ok())
    return s;
  reduceKernel(ctx.stream, walk, reducedRange(walk, x), kind == Reduction::Max,
               walk.scale, x.box, x.elements, y.box, y.elements);
  return {};
}

absl::Status reduceBackward(const OpDesc &op, Reduction kind, ExecContext &ctx,
                            const Views &inputs, const Views &outputs,
                            const Views &outputGrads, const Views &inputGrads) {
  if (absl::Status s = checkBackwardArity(op, inputs, 1, outputs, 1,
                                          outputGrads, inputGrads);
      !s.ok())
    return s;
  const KernelView &dx = inputGrads[0];
  if (!dx.present())
    return {};
  const KernelView &x = inputs[0], &y = outputs[0], &dy = outputGrads[0];
  ReducePlan walk;
  if (kind != Reduction::Max) {
    if (absl::Status s = planWalk(op, kind, dx, dy, {&dx}, {&dy}, walk);
        !s.ok())
      return s;
    sumBackwardKernel(ctx, walk, walk.scale, dx, dy.box, dy.elements);
    return {};
  }
  if (absl::Status s = planWalk(op, kind, dx, dy, {&dx, &x}, {&dy, &y}, walk);
      !s.ok())
    return s;
  writesGradient(ctx, dx, false); // only the maxima get a share
  maxBackwardKernel(ctx.stream, walk, reducedRange(walk, x),
                    reducedRange(walk, dx), x.box, x.elements, y.box,
                    y.elements, dx.box, dx.elements, dy.box, dy.elements);
  return {};
}

CudaKernel reduceKernelOf(Reduction kind) {
  CudaKernel kernel;
  kernel.native = true;
  kernel.overwrites = true;
  kernel.forward = [kind](const OpDesc &op, const KernelContext &,
                          ExecContext &ctx, const Views &inputs,
                          const Views &outputs, const Views &) {
    return reduceForward(op, kind, ctx, inputs, outputs);
  };
  kernel.backward = [kind](const OpDesc &op, const KernelContext &,
                           ExecContext &ctx, const Views &inputs,
                           const Views &outputs, const Views &outputGrads,
                           const Views &inputGrads, const Views &) {
    return reduceBackward(op, kind, ctx, inputs, outputs, outputGrads,
                          inputGrads);
  };
  return kernel;
}

} // namespace

void registerReduceKernels(CudaKernelTable &table) {
  table["ppc.reduce_sum"] = reduceKernelOf(Reduction::Sum);
  table["ppc.reduce_mean"] = reduceKernelOf(Reduction::Mean);
  table["ppc.reduce_max"] = reduceKernelOf(Reduction::Max);
}

} // namespace ppc::runtime::cuda
