//===- DataMovementKernels.cu - reshape, transpose, concat, split, ... ----===//
//
// The cuda kernels of the cpu backend's DataMovementKernels.cpp, with its
// semantics and errors. Copies between boxes in global coordinates: each
// op's element map is the access of its iteration space (transpose
// permutes, concat and split shift along the axis, slice strides, pad
// shifts by the low padding, reshape goes through the global flat index).
// The host checks that the views hold what the partition's box reaches and
// turns every map into strided accesses, as the cpu kernels do
// (DataMovementMaps.h); one thread per point of the iteration box then
// moves one element. Backward adds the output gradient back along the same
// map (injective: no two threads write one element). gather's gathered
// rows are a reduction dim: a partition holding rows [a, b) of `data`
// writes only the elements whose index falls there, zero elsewhere, and
// its backward sums into those rows with atomicAddFloat. An index out of
// range is found on the device and read back (gather is the one op of this
// file that waits for its stream).
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"

#include "DataMovementMaps.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>

namespace ppc::runtime::cuda {
namespace {

using Views = std::vector<KernelView>;
using Copies = std::vector<std::optional<BoxCopy>>;

//===----------------------------------------------------------------------===//
// Strided accesses as kernels capture them
//===----------------------------------------------------------------------===//

/// A view's buffer offset as a linear function of the iteration point:
/// base + sum_d (p[d] - lo[d]) * strides[d] (a StridedAccess as POD:
/// kernels capture it).
struct Access {
  int64_t base = 0;
  int64_t strides[kMaxRank] = {};
};

/// `access` for a kernel (its rank is a view's, <= kMaxRank: checked by the
/// dispatch).
Access accessOf(const StridedAccess &access) {
  Access a;
  a.base = access.base;
  for (size_t d = 0; d < access.strides.size() && d < size_t(kMaxRank); ++d)
    a.strides[d] = access.strides[d];
  return a;
}

/// The iteration box a kernel walks, by its extents.
struct IterBox {
  int32_t rank = 0;
  int64_t extent[kMaxRank] = {};

  int64_t count() const {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d)
      n *= extent[d] > 0 ? extent[d] : 0;
    return n;
  }
};

IterBox iterBox(const std::vector<int64_t> &lo,
                const std::vector<int64_t> &hi) {
  IterBox box;
  box.rank = static_cast<int32_t>(lo.size());
  for (size_t d = 0; d < lo.size() && d < size_t(kMaxRank); ++d)
    box.extent[d] = hi[d] - lo[d];
  return box;
}

/// Offsets of the iteration box's point number `i` under two accesses.
PPC_HD inline void offsetsOf(const IterBox &it, int64_t i, const Access &a,
                             const Access &b, int64_t &oa, int64_t &ob) {
  oa = a.base;
  ob = b.base;
  for (int d = it.rank - 1; d >= 0; --d) {
    const int64_t c = i % it.extent[d];
    i /= it.extent[d];
    oa += c * a.strides[d];
    ob += c * b.strides[d];
  }
}

//===----------------------------------------------------------------------===//
// Device kernels
//===----------------------------------------------------------------------===//

/// dst (+)= src along the accesses, one thread per point of `it`.
void copyKernel(Stream stream, IterBox it, const float *src, Access a,
                float *dst, Access b, bool accumulate) {
  launch(stream, it.count(), [=] PPC_HD(int64_t i) {
    int64_t oa, ob;
    offsetsOf(it, i, a, b, oa, ob);
    if (accumulate)
      dst[ob] += src[oa];
    else
      dst[ob] = src[oa];
  });
}

void fillKernel(Stream stream, float *data, int64_t n, float value) {
  launch(stream, n, [=] PPC_HD(int64_t i) { data[i] = value; });
}

/// Reshape: element r of the `to` box (+)= the element of the `from` box
/// with the same global flat index; `shift` >= 0 when both boxes are runs
/// of the flat order (element r is from's r + shift).
void reshapeKernel(Stream stream, DeviceBox from, const float *src,
                   DeviceBox to, float *dst, int64_t shift, bool toIsResult) {
  // to: the result (forward: dst = result) or the result grad (backward:
  // src = dy over `to`, dst = dx over `from`).
  launch(stream, to.count(), [=] PPC_HD(int64_t r) {
    int64_t i;
    if (shift >= 0) {
      i = r + shift;
    } else {
      int64_t index[kMaxRank];
      to.indexOf(r, index);
      int64_t flat = to.globalFlat(index);
      for (int d = from.rank - 1; d >= 0; --d) {
        index[d] = flat % from.shape[d];
        flat /= from.shape[d];
      }
      if (!from.contains(index))
        return; // reported by the host check
      i = from.offsetOf(index);
    }
    if (toIsResult)
      dst[r] = src[i];
    else
      dst[i] += src[r];
  });
}

/// The gather of one partition: the result box, the indices and data
/// (with the gathered dim fixed at the first held row) accesses.
struct GatherPlan {
  IterBox it;
  Access indexAccess, dataAccess;
  int64_t rows = 0, rowLo = 0, rowHi = 0, rowStride = 0;
};

/// Keeps in *slot the largest of the values given (0 at first).
PPC_HD inline void atomicMaxIndex(unsigned long long *slot,
                                  unsigned long long value) {
#ifdef __CUDA_ARCH__
  atomicMax(slot, value);
#else
  if (value > *slot)
    *slot = value;
#endif
}

/// Forward (dy null): result = data's row or 0. Backward: dData's held
/// rows += dy. Bad indices leave 1 + their offset in the indices view, the
/// largest, in *bad.
void gatherKernel(Stream stream, GatherPlan g, const float *indices,
                  const float *data, float *result, const float *dy,
                  float *dData, unsigned long long *bad) {
  launch(stream, g.it.count(), [=] PPC_HD(int64_t i) {
    int64_t oi, od;
    offsetsOf(g.it, i, g.indexAccess, g.dataAccess, oi, od);
    int64_t row = -1;
    if (!gatherRow(indices[oi], g.rows, row)) {
      atomicMaxIndex(bad, static_cast<unsigned long long>(oi) + 1);
      row = -1;
    }
    const bool held = row >= g.rowLo && row < g.rowHi;
    if (!dy) {
      result[i] = held ? data[od + (row - g.rowLo) * g.rowStride] : 0.0f;
      return;
    }
    if (held)
      atomicAddFloat(dData + od + (row - g.rowLo) * g.rowStride, dy[i]);
  });
}

//===----------------------------------------------------------------------===//
// Copies along maps (transpose, slice, pad, concat, split)
//===----------------------------------------------------------------------===//

/// Enqueues a checked copy from `src` to `dst`.
void runCopy(Stream stream, const BoxCopy &copy, const float *src, float *dst,
             bool accumulate) {
  copyKernel(stream, iterBox(copy.lo, copy.hi), src, accessOf(copy.src), dst,
             accessOf(copy.dst), accumulate);
}

CudaKernel copyMapKernel(CopyMapFn mapOf) {
  CudaKernel kernel;
  kernel.forward = [mapOf](const OpDesc &op, const KernelContext &,
                           ExecContext &ctx, const Views &inputs,
                           const Views &outputs,
                           const Views &) -> KernelStatus {
    BoxCopy copy;
    std::optional<float> fill;
    if (KernelStatus s = copyMapForward(op, mapOf, inputs, outputs, copy, fill);
        !s.empty())
      return s;
    const KernelView &result = outputs[0];
    if (fill)
      fillKernel(ctx.stream, result.data, result.box.count(), *fill);
    runCopy(ctx.stream, copy, inputs[0].data, result.data,
            /*accumulate=*/false);
    return {};
  };
  kernel.backward = [mapOf](const OpDesc &op, const KernelContext &,
                            ExecContext &ctx, const Views &inputs,
                            const Views &outputs, const Views &outputGrads,
                            const Views &inputGrads,
                            const Views &) -> KernelStatus {
    std::optional<BoxCopy> copy;
    if (KernelStatus s = copyMapBackward(op, mapOf, inputs, outputs,
                                         outputGrads, inputGrads, copy);
        !s.empty())
      return s;
    if (copy)
      runCopy(ctx.stream, *copy, outputGrads[0].data, inputGrads[0].data,
              /*accumulate=*/true);
    return {};
  };
  return kernel;
}

/// Copy i moves piece i's data into the whole, or the whole into piece i
/// (`toPieces`); pieces without a copy are skipped.
void runPieceCopies(Stream stream, const Copies &copies, const Views &pieces,
                    const KernelView &whole, bool toPieces, bool accumulate) {
  for (size_t i = 0; i < copies.size(); ++i)
    if (copies[i])
      runCopy(stream, *copies[i], toPieces ? whole.data : pieces[i].data,
              toPieces ? pieces[i].data : whole.data, accumulate);
}

/// Concat (`concat`: the pieces are the operands, the whole is the result)
/// or split (the pieces are the results, the whole is the operand).
CudaKernel pieceKernel(bool concat) {
  CudaKernel kernel;
  kernel.forward = [concat](const OpDesc &op, const KernelContext &,
                            ExecContext &ctx, const Views &inputs,
                            const Views &outputs,
                            const Views &) -> KernelStatus {
    Copies copies;
    if (KernelStatus s =
            pieceForwardCopies(op, concat, inputs, outputs, copies);
        !s.empty())
      return s;
    runPieceCopies(ctx.stream, copies, concat ? inputs : outputs,
                   concat ? outputs[0] : inputs[0], /*toPieces=*/!concat,
                   /*accumulate=*/false);
    return {};
  };
  kernel.backward = [concat](const OpDesc &op, const KernelContext &,
                             ExecContext &ctx, const Views &inputs,
                             const Views &outputs, const Views &outputGrads,
                             const Views &inputGrads,
                             const Views &) -> KernelStatus {
    Copies copies;
    if (KernelStatus s = pieceBackwardCopies(op, concat, inputs, outputs,
                                             outputGrads, inputGrads, copies);
        !s.empty())
      return s;
    runPieceCopies(ctx.stream, copies, concat ? inputGrads : outputGrads,
                   concat ? outputGrads[0] : inputGrads[0],
                   /*toPieces=*/concat, /*accumulate=*/true);
    return {};
  };
  return kernel;
}

//===----------------------------------------------------------------------===//
// Reshape
//===----------------------------------------------------------------------===//

/// Whether the box of `input` holds every global flat index of the box of
/// `result`: row by row of the result, each row a flat range cut where the
/// input's innermost dim wraps. Results are remembered per geometry (a plan
/// runs the same boxes every step).
bool inputHoldsResult(const TensorView &input, const TensorView &result) {
  using Key = std::vector<int64_t>;
  static std::mutex mutex;
  static std::map<Key, bool> known;
  Key key;
  for (const TensorView *v : {&input, &result}) {
    key.push_back(v->rank());
    key.insert(key.end(), v->shape.begin(), v->shape.end());
    key.insert(key.end(), v->lo.begin(), v->lo.end());
    key.insert(key.end(), v->hi.begin(), v->hi.end());
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = known.find(key);
    if (it != known.end())
      return it->second;
  }
  const int64_t inRank = input.rank(), outRank = result.rank();
  bool holds = true;
  if (inRank > 0) {
    const int64_t last = input.shape[inRank - 1];
    const int64_t lastLo = input.lo[inRank - 1], lastHi = input.hi[inRank - 1];
    std::vector<int64_t> outer(inRank - 1);
    auto rangeHeld = [&](int64_t f, int64_t end) {
      while (f < end) {
        int64_t inner = f % last, q = f / last;
        int64_t chunkEnd = std::min(end, f - inner + last);
        if (inner < lastLo || inner + (chunkEnd - f) > lastHi)
          return false;
        for (int64_t d = inRank - 2; d >= 0; --d) {
          outer[d] = q % input.shape[d];
          q /= input.shape[d];
          if (outer[d] < input.lo[d] || outer[d] >= input.hi[d])
            return false;
        }
        f = chunkEnd;
      }
      return true;
    };
    if (outRank == 0) {
      holds = rangeHeld(0, 1);
    } else {
      std::vector<int64_t> strides = rowMajorStrides(result.shape);
      const int64_t rowLength = result.extent(outRank - 1);
      std::vector<int64_t> index(result.lo.begin(), result.lo.end());
      // Odometer over the result's rows (all dims but the last).
      while (holds) {
        int64_t f = 0;
        for (int64_t d = 0; d < outRank; ++d)
          f += index[d] * strides[d];
        holds = rangeHeld(f, f + rowLength);
        int64_t d = outRank - 2;
        for (; d >= 0; --d) {
          if (++index[d] < result.hi[d])
            break;
          index[d] = result.lo[d];
        }
        if (d < 0)
          break;
      }
    }
  }
  std::lock_guard<std::mutex> lock(mutex);
  known.emplace(std::move(key), holds);
  return holds;
}

/// The reshape from the `from` box (input or its grad) to the `to` box
/// (result or its grad): the shift of the flat-run case (-1 otherwise).
KernelStatus planReshape(const OpDesc &op, const TensorView &from,
                         const TensorView &to, int64_t &shift) {
  if (KernelStatus s = reshapeShift(op, from, to, shift); !s.empty())
    return s;
  if (shift < 0 && !inputHoldsResult(from, to))
    return reshapeMissing(op);
  return {};
}

KernelStatus reshapeForward(const OpDesc &op, const KernelContext &,
                            ExecContext &ctx, const Views &inputs,
                            const Views &outputs, const Views &) {
  if (KernelStatus s = checkForwardArity(op, inputs, 1, outputs, 1); !s.empty())
    return s;
  const KernelView &input = inputs[0], &result = outputs[0];
  int64_t shift = -1;
  if (KernelStatus s = planReshape(op, input, result, shift); !s.empty())
    return s;
  reshapeKernel(ctx.stream, input.box, input.data, result.box, result.data,
                shift, /*toIsResult=*/true);
  return {};
}

KernelStatus reshapeBackward(const OpDesc &op, const KernelContext &,
                             ExecContext &ctx, const Views &inputs,
                             const Views &outputs, const Views &outputGrads,
                             const Views &inputGrads, const Views &) {
  if (KernelStatus s = checkBackwardArity(op, inputs, 1, outputs, 1,
                                          outputGrads, inputGrads);
      !s.empty())
    return s;
  const KernelView &dx = inputGrads[0], &dy = outputGrads[0];
  if (!dx.data)
    return {};
  int64_t shift = -1;
  if (KernelStatus s = planReshape(op, dx, dy, shift); !s.empty())
    return s;
  reshapeKernel(ctx.stream, dx.box, dy.data, dy.box, dx.data, shift,
                /*toIsResult=*/false);
  return {};
}

//===----------------------------------------------------------------------===//
// Gather
//===----------------------------------------------------------------------===//

/// As the cpu's walkGather: checks (gatherGeometry), then runs the forward
/// (dy null) or the backward over the result (or result grad) box, and
/// reports the last bad index in the walk's order (the largest offset in
/// the indices view).
KernelStatus runGather(const OpDesc &op, ExecContext &ctx,
                       const KernelView &data, const KernelView &indices,
                       const KernelView &result, const float *dy,
                       float *dData) {
  GatherGeometry geometry;
  if (KernelStatus s = gatherGeometry(op, data, indices, result, geometry);
      !s.empty())
    return s;
  if (!geometry.holdsRows) { // every element is someone else's
    if (!dy)
      fillKernel(ctx.stream, result.data, result.box.count(), 0.0f);
    return {};
  }
  GatherPlan g;
  g.rows = geometry.rows;
  g.rowLo = geometry.rowLo;
  g.rowHi = geometry.rowHi;
  g.rowStride = geometry.rowStride;
  g.it = iterBox(result.lo, result.hi);
  g.indexAccess = accessOf(geometry.index);
  g.dataAccess = accessOf(geometry.data);
  if (g.it.count() == 0)
    return {};

  float *flag =
      ctx.workspace ? ctx.workspace->floats(2, /*zero=*/true) : nullptr;
  if (!flag)
    return op.kind + ": out of device memory for its index check";
  auto *bad = reinterpret_cast<unsigned long long *>(flag);
  gatherKernel(ctx.stream, g, indices.data, data.data, result.data, dy, dData,
               bad);
  unsigned long long badAt = 0;
  copyToHost(ctx.stream, &badAt, bad, sizeof badAt);
  if (badAt == 0)
    return {};
  float badIndex = 0;
  copyToHost(ctx.stream, &badIndex, indices.data + (badAt - 1),
             sizeof badIndex);
  return gatherIndexError(op, badIndex, g.rows);
}

KernelStatus gatherForward(const OpDesc &op, const KernelContext &,
                           ExecContext &ctx, const Views &inputs,
                           const Views &outputs, const Views &) {
  if (KernelStatus s = checkForwardArity(op, inputs, 2, outputs, 1); !s.empty())
    return s;
  return runGather(op, ctx, inputs[0], inputs[1], outputs[0], nullptr, nullptr);
}

KernelStatus gatherBackward(const OpDesc &op, const KernelContext &,
                            ExecContext &ctx, const Views &inputs,
                            const Views &outputs, const Views &outputGrads,
                            const Views &inputGrads, const Views &) {
  if (KernelStatus s = checkBackwardArity(op, inputs, 2, outputs, 1,
                                          outputGrads, inputGrads);
      !s.empty())
    return s;
  // Indices get no gradient; data's is a scatter-add over the held rows.
  const KernelView &dData = inputGrads[0];
  if (!dData.data)
    return {};
  const KernelView &dy = outputGrads[0];
  return runGather(op, ctx, dData, inputs[1], dy, dy.data, dData.data);
}

} // namespace

void registerDataMovementKernels(CudaKernelTable &table) {
  table["ppc.reshape"] = {reshapeForward, reshapeBackward};
  table["ppc.transpose"] = copyMapKernel(transposeMap);
  table["ppc.slice"] = copyMapKernel(sliceMap);
  table["ppc.pad"] = copyMapKernel(padMap);
  table["ppc.concat"] = pieceKernel(/*concat=*/true);
  table["ppc.split"] = pieceKernel(/*concat=*/false);
  table["ppc.gather"] = {gatherForward, gatherBackward};
}

} // namespace ppc::runtime::cuda
