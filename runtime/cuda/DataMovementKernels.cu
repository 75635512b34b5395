//===- DataMovementKernels.cu - reshape, transpose, concat, split, ... ----===//
//
// The cuda kernels of the cpu backend's DataMovementKernels.cpp, with its
// semantics and errors. Copies between boxes in global coordinates: each
// op's element map is the access of its iteration space (transpose
// permutes, concat and split shift along the axis, slice strides, pad
// shifts by the low padding, reshape goes through the global flat index).
// The host checks that the views hold what the partition's box reaches and
// turns every map into strided accesses; one thread per point of the
// iteration box then moves one element. Backward adds the output gradient
// back along the same map (injective: no two threads write one element).
// gather's gathered rows are a reduction dim: a partition holding rows
// [a, b) of `data` writes only the elements whose index falls there, zero
// elsewhere, and its backward sums into those rows with atomicAddFloat. An
// index out of range is found on the device and read back (gather is the
// one op of this file that waits for its stream).
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

namespace ppc::runtime::cuda {
namespace {

using Views = std::vector<KernelView>;

//===----------------------------------------------------------------------===//
// Host helpers: arity, strided accesses (as the cpu's KernelHelpers.h)
//===----------------------------------------------------------------------===//

KernelStatus expectArity(const OpDesc &op, const char *what, size_t operands,
                         size_t expectedOperands, size_t results,
                         size_t expectedResults) {
  if (operands == expectedOperands && results == expectedResults)
    return {};
  return op.kind + ": expects " + std::to_string(expectedOperands) +
         " operand and " + std::to_string(expectedResults) + " result " + what +
         ", got " + std::to_string(operands) + " and " +
         std::to_string(results);
}

KernelStatus checkForwardArity(const OpDesc &op, const Views &inputs,
                               size_t numInputs, const Views &outputs,
                               size_t numOutputs) {
  return expectArity(op, "views", inputs.size(), numInputs, outputs.size(),
                     numOutputs);
}

KernelStatus checkBackwardArity(const OpDesc &op, const Views &inputs,
                                size_t numInputs, const Views &outputs,
                                size_t numOutputs, const Views &outputGrads,
                                const Views &inputGrads) {
  if (KernelStatus s =
          checkForwardArity(op, inputs, numInputs, outputs, numOutputs);
      !s.empty())
    return s;
  if (inputGrads.size() != inputs.size() ||
      outputGrads.size() != outputs.size())
    return expectArity(op, "gradient views", inputGrads.size(), inputs.size(),
                       outputGrads.size(), outputs.size());
  return {};
}

KernelStatus axisOutOfRange(const OpDesc &op, int64_t axis, int64_t rank) {
  return op.kind + ": axis " + std::to_string(axis) +
         " is out of range for rank " + std::to_string(rank);
}

/// How one view dim is indexed by an iteration point p:
/// index = p[iterDim] * scale + offset, or just `offset` when iterDim < 0.
struct DimMap {
  int64_t iterDim = -1;
  int64_t scale = 1;
  int64_t offset = 0;
  static DimMap identity(int64_t d, int64_t offset = 0) {
    return {d, 1, offset};
  }
  static DimMap fixed(int64_t index) { return {-1, 1, index}; }
};

std::vector<DimMap> identityDims(size_t rank) {
  std::vector<DimMap> dims;
  for (size_t d = 0; d < rank; ++d)
    dims.push_back(DimMap::identity(static_cast<int64_t>(d)));
  return dims;
}

/// A view's buffer offset as a linear function of the iteration point:
/// base + sum_d (p[d] - lo[d]) * strides[d] (POD: kernels capture it).
struct Access {
  int64_t base = 0;
  int64_t strides[kMaxRank] = {};
};

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

std::vector<int64_t> boxStrides(const TensorView &view) {
  std::vector<int64_t> strides(view.lo.size(), 1);
  for (size_t d = strides.size(); d-- > 1;)
    strides[d - 1] = strides[d] * (view.hi[d] - view.lo[d]);
  return strides;
}

/// The access of `view` from the iteration box [lo, hi) through `dims`;
/// nullopt if the box reaches an element the view does not hold (as the
/// cpu's stridedAccess).
std::optional<Access> stridedAccess(const TensorView &view,
                                    const std::vector<int64_t> &lo,
                                    const std::vector<int64_t> &hi,
                                    const std::vector<DimMap> &dims) {
  if (dims.size() != view.lo.size() || view.hi.size() != view.lo.size() ||
      lo.size() > size_t(kMaxRank))
    return std::nullopt;
  Access access;
  bool empty = false;
  for (size_t d = 0; d < lo.size(); ++d)
    empty |= hi[d] <= lo[d];
  std::vector<int64_t> viewStrides = boxStrides(view);
  for (size_t i = 0; i < dims.size(); ++i) {
    const DimMap &map = dims[i];
    int64_t first = map.offset, last = map.offset;
    if (map.iterDim >= 0) {
      first += lo[map.iterDim] * map.scale;
      last += (hi[map.iterDim] - 1) * map.scale;
      access.strides[map.iterDim] += viewStrides[i] * map.scale;
    }
    if (!empty && (first < view.lo[i] || last >= view.hi[i]))
      return std::nullopt;
    access.base += (first - view.lo[i]) * viewStrides[i];
  }
  return access;
}

std::optional<Access> identityAccess(const TensorView &view,
                                     const std::vector<int64_t> &lo,
                                     const std::vector<int64_t> &hi) {
  return stridedAccess(view, lo, hi, identityDims(lo.size()));
}

/// Reads `bytes` of device memory at `device` into `host` (waits for the
/// stream).
void readBack(Stream stream, void *host, const void *device, size_t bytes) {
#if defined(PPC_CUDA_EMULATION)
  (void)stream;
  std::memcpy(host, device, bytes);
#else
  cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream);
  cudaStreamSynchronize(stream);
#endif
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

/// The row of an index value as the cpu kernel takes it: std::llround
/// (halves away from zero), negative rows counted from the back; false for
/// NaN and rows outside [-rows, rows).
PPC_HD inline bool rowOf(float value, int64_t rows, int64_t &row) {
  if (!(value > -9.0e18f && value < 9.0e18f)) // NaN, infinite, huge
    return false;
  // Exact: floats with a fraction are below 2^23.
  const float whole = static_cast<float>(static_cast<long long>(value));
  float rounded = whole;
  if (value - whole >= 0.5f)
    rounded += 1.0f;
  else if (whole - value >= 0.5f)
    rounded -= 1.0f;
  const long long r = static_cast<long long>(rounded);
  if (r < -rows || r >= rows)
    return false;
  row = r < 0 ? r + rows : r;
  return true;
}

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
    if (!rowOf(indices[oi], g.rows, row)) {
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

/// A checked copy: the iteration box and both accesses.
struct Copy {
  IterBox it;
  Access src, dst;
};

KernelStatus planCopy(const OpDesc &op, const std::vector<int64_t> &lo,
                      const std::vector<int64_t> &hi, const TensorView &src,
                      const std::vector<DimMap> &srcDims, const TensorView &dst,
                      const std::vector<DimMap> &dstDims, Copy &copy) {
  std::optional<Access> srcAccess = stridedAccess(src, lo, hi, srcDims);
  std::optional<Access> dstAccess = stridedAccess(dst, lo, hi, dstDims);
  if (!srcAccess || !dstAccess)
    return op.kind + ": the " + (srcAccess ? "destination" : "source") +
           " view does not hold what the partition's box reaches";
  copy.it = iterBox(lo, hi);
  copy.src = *srcAccess;
  copy.dst = *dstAccess;
  return {};
}

/// The element map of a one-operand copy (as the cpu's CopyMap).
struct CopyMap {
  std::vector<int64_t> lo, hi;
  std::vector<DimMap> inputDims, resultDims;
  std::optional<float> fill;
};

using CopyMapFn = KernelStatus (*)(const OpDesc &, const TensorView &input,
                                   const TensorView &result, CopyMap &);

/// Result dim i is input dim permutation[i].
KernelStatus transposeMap(const OpDesc &op, const TensorView &input,
                          const TensorView &result, CopyMap &map) {
  std::vector<int64_t> permutation = op.getInts("permutation", {});
  int64_t rank = result.rank();
  if (static_cast<int64_t>(permutation.size()) != rank || input.rank() != rank)
    return op.kind + ": permutation needs one entry per dim";
  map.inputDims.assign(rank, DimMap());
  std::vector<bool> seen(rank, false);
  for (int64_t i = 0; i < rank; ++i) {
    int64_t p = permutation[i];
    if (p < 0 || p >= rank || seen[p])
      return op.kind + ": permutation is not a permutation of the input dims";
    seen[p] = true;
    map.inputDims[p] = DimMap::identity(i);
  }
  map.lo = result.lo;
  map.hi = result.hi;
  map.resultDims = identityDims(rank);
  return {};
}

/// result[i] = input[starts + i * steps] along every dim.
KernelStatus sliceMap(const OpDesc &op, const TensorView &input,
                      const TensorView &result, CopyMap &map) {
  int64_t rank = result.rank();
  std::vector<int64_t> starts =
      op.getInts("starts", std::vector<int64_t>(rank, 0));
  std::vector<int64_t> steps =
      op.getInts("steps", std::vector<int64_t>(rank, 1));
  if (static_cast<int64_t>(starts.size()) != rank ||
      static_cast<int64_t>(steps.size()) != rank || input.rank() != rank)
    return op.kind + ": starts and steps need one entry per dim";
  for (int64_t d = 0; d < rank; ++d) {
    if (steps[d] < 1)
      return op.kind + ": steps must be positive";
    map.inputDims.push_back({d, steps[d], starts[d]});
  }
  map.lo = result.lo;
  map.hi = result.hi;
  map.resultDims = identityDims(rank);
  return {};
}

/// result[i] = input[i - padLo] over the input, `value` elsewhere (negative
/// pads crop).
KernelStatus padMap(const OpDesc &op, const TensorView &input,
                    const TensorView &result, CopyMap &map) {
  int64_t rank = result.rank();
  std::vector<int64_t> pads = op.getInts("pads", {});
  if (static_cast<int64_t>(pads.size()) != 2 * rank || input.rank() != rank)
    return op.kind + ": pads needs 2 entries per dim ([lo..., hi...])";
  map.fill = static_cast<float>(op.getFloat("value", 0.0));
  for (int64_t d = 0; d < rank; ++d) {
    map.lo.push_back(std::max(result.lo[d], pads[d]));
    map.hi.push_back(std::min(result.hi[d], pads[d] + input.shape[d]));
    map.inputDims.push_back(DimMap::identity(d, -pads[d]));
  }
  map.resultDims = identityDims(rank);
  return {};
}

CudaKernel copyMapKernel(CopyMapFn mapOf) {
  CudaKernel kernel;
  kernel.forward = [mapOf](const OpDesc &op, const KernelContext &,
                           ExecContext &ctx, const Views &inputs,
                           const Views &outputs,
                           const Views &) -> KernelStatus {
    if (KernelStatus s = checkForwardArity(op, inputs, 1, outputs, 1);
        !s.empty())
      return s;
    const KernelView &input = inputs[0], &result = outputs[0];
    CopyMap map;
    if (KernelStatus s = mapOf(op, input, result, map); !s.empty())
      return s;
    Copy copy;
    if (KernelStatus s = planCopy(op, map.lo, map.hi, input, map.inputDims,
                                  result, map.resultDims, copy);
        !s.empty())
      return s;
    if (map.fill)
      fillKernel(ctx.stream, result.data, result.box.count(), *map.fill);
    copyKernel(ctx.stream, copy.it, input.data, copy.src, result.data, copy.dst,
               /*accumulate=*/false);
    return {};
  };
  kernel.backward = [mapOf](const OpDesc &op, const KernelContext &,
                            ExecContext &ctx, const Views &inputs,
                            const Views &outputs, const Views &outputGrads,
                            const Views &inputGrads,
                            const Views &) -> KernelStatus {
    if (KernelStatus s = checkBackwardArity(op, inputs, 1, outputs, 1,
                                            outputGrads, inputGrads);
        !s.empty())
      return s;
    const KernelView &dx = inputGrads[0], &dy = outputGrads[0];
    if (!dx.data)
      return {};
    CopyMap map;
    if (KernelStatus s = mapOf(op, dx, dy, map); !s.empty())
      return s;
    Copy copy;
    if (KernelStatus s = planCopy(op, map.lo, map.hi, dy, map.resultDims, dx,
                                  map.inputDims, copy);
        !s.empty())
      return s;
    copyKernel(ctx.stream, copy.it, dy.data, copy.src, dx.data, copy.dst,
               /*accumulate=*/true);
    return {};
  };
  return kernel;
}

//===----------------------------------------------------------------------===//
// Concat and split
//===----------------------------------------------------------------------===//

struct PieceMap {
  std::vector<int64_t> lo, hi;
  std::vector<DimMap> pieceDims;
};

/// As the cpu's pieceMaps: piece i covers [offset_i, offset_i + size_i) of
/// the whole along `axis`.
KernelStatus pieceMaps(const OpDesc &op, const TensorView &whole,
                       const Views &pieces, bool wholeIsResult,
                       std::vector<PieceMap> &maps) {
  int64_t rank = whole.rank();
  int64_t axis = normalizeAxis(op.getInt("axis", 0), rank);
  if (axis < 0 || axis >= rank)
    return axisOutOfRange(op, op.getInt("axis", 0), rank);
  int64_t offset = 0;
  for (const TensorView &piece : pieces) {
    if (piece.rank() != rank)
      return op.kind + ": every piece needs the rank of the whole";
    int64_t size = piece.shape[axis];
    PieceMap map;
    map.lo = wholeIsResult ? whole.lo : piece.lo;
    map.hi = wholeIsResult ? whole.hi : piece.hi;
    if (!wholeIsResult) {
      map.lo[axis] += offset;
      map.hi[axis] += offset;
    }
    map.lo[axis] = std::max(map.lo[axis], offset);
    map.hi[axis] = std::min(map.hi[axis], offset + size);
    map.pieceDims = identityDims(rank);
    map.pieceDims[axis] = DimMap::identity(axis, -offset);
    maps.push_back(std::move(map));
    offset += size;
  }
  if (offset != whole.shape[axis])
    return op.kind + ": the pieces' sizes along axis " + std::to_string(axis) +
           " add up to " + std::to_string(offset) + ", the whole has " +
           std::to_string(whole.shape[axis]);
  return {};
}

KernelStatus concatForward(const OpDesc &op, const KernelContext &,
                           ExecContext &ctx, const Views &inputs,
                           const Views &outputs, const Views &) {
  if (inputs.empty())
    return op.kind + ": expects at least one operand";
  if (KernelStatus s = checkForwardArity(op, inputs, inputs.size(), outputs, 1);
      !s.empty())
    return s;
  const KernelView &result = outputs[0];
  std::vector<PieceMap> maps;
  if (KernelStatus s = pieceMaps(op, result, inputs, true, maps); !s.empty())
    return s;
  std::vector<Copy> copies(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    if (KernelStatus s =
            planCopy(op, maps[i].lo, maps[i].hi, inputs[i], maps[i].pieceDims,
                     result, identityDims(result.rank()), copies[i]);
        !s.empty())
      return s;
  for (size_t i = 0; i < inputs.size(); ++i)
    copyKernel(ctx.stream, copies[i].it, inputs[i].data, copies[i].src,
               result.data, copies[i].dst, /*accumulate=*/false);
  return {};
}

KernelStatus concatBackward(const OpDesc &op, const KernelContext &,
                            ExecContext &ctx, const Views &inputs,
                            const Views &outputs, const Views &outputGrads,
                            const Views &inputGrads, const Views &) {
  if (KernelStatus s = checkBackwardArity(op, inputs, inputs.size(), outputs, 1,
                                          outputGrads, inputGrads);
      !s.empty())
    return s;
  const KernelView &dy = outputGrads[0];
  std::vector<PieceMap> maps;
  if (KernelStatus s = pieceMaps(op, dy, inputGrads, true, maps); !s.empty())
    return s;
  std::vector<Copy> copies(inputGrads.size());
  for (size_t i = 0; i < inputGrads.size(); ++i) {
    if (!inputGrads[i].data)
      continue;
    if (KernelStatus s =
            planCopy(op, maps[i].lo, maps[i].hi, dy, identityDims(dy.rank()),
                     inputGrads[i], maps[i].pieceDims, copies[i]);
        !s.empty())
      return s;
  }
  for (size_t i = 0; i < inputGrads.size(); ++i)
    if (inputGrads[i].data)
      copyKernel(ctx.stream, copies[i].it, dy.data, copies[i].src,
                 inputGrads[i].data, copies[i].dst, /*accumulate=*/true);
  return {};
}

KernelStatus splitForward(const OpDesc &op, const KernelContext &,
                          ExecContext &ctx, const Views &inputs,
                          const Views &outputs, const Views &) {
  if (outputs.empty())
    return op.kind + ": expects at least one result";
  if (KernelStatus s =
          checkForwardArity(op, inputs, 1, outputs, outputs.size());
      !s.empty())
    return s;
  const KernelView &input = inputs[0];
  std::vector<PieceMap> maps;
  if (KernelStatus s = pieceMaps(op, input, outputs, false, maps); !s.empty())
    return s;
  std::vector<Copy> copies(outputs.size());
  for (size_t j = 0; j < outputs.size(); ++j)
    if (KernelStatus s = planCopy(op, maps[j].lo, maps[j].hi, input,
                                  identityDims(input.rank()), outputs[j],
                                  maps[j].pieceDims, copies[j]);
        !s.empty())
      return s;
  for (size_t j = 0; j < outputs.size(); ++j)
    copyKernel(ctx.stream, copies[j].it, input.data, copies[j].src,
               outputs[j].data, copies[j].dst, /*accumulate=*/false);
  return {};
}

KernelStatus splitBackward(const OpDesc &op, const KernelContext &,
                           ExecContext &ctx, const Views &inputs,
                           const Views &outputs, const Views &outputGrads,
                           const Views &inputGrads, const Views &) {
  if (KernelStatus s = checkBackwardArity(
          op, inputs, 1, outputs, outputs.size(), outputGrads, inputGrads);
      !s.empty())
    return s;
  const KernelView &dx = inputGrads[0];
  if (!dx.data)
    return {};
  std::vector<PieceMap> maps;
  if (KernelStatus s = pieceMaps(op, dx, outputGrads, false, maps); !s.empty())
    return s;
  std::vector<Copy> copies(outputGrads.size());
  for (size_t j = 0; j < outputGrads.size(); ++j) {
    // A result nobody reads may come without a gradient.
    if (!outputGrads[j].data)
      continue;
    if (KernelStatus s =
            planCopy(op, maps[j].lo, maps[j].hi, outputGrads[j],
                     maps[j].pieceDims, dx, identityDims(dx.rank()), copies[j]);
        !s.empty())
      return s;
  }
  for (size_t j = 0; j < outputGrads.size(); ++j)
    if (outputGrads[j].data)
      copyKernel(ctx.stream, copies[j].it, outputGrads[j].data, copies[j].src,
                 dx.data, copies[j].dst, /*accumulate=*/true);
  return {};
}

//===----------------------------------------------------------------------===//
// Reshape
//===----------------------------------------------------------------------===//

std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

/// The first global flat index of the view's box if it is one run of the
/// tensor's row-major order.
std::optional<int64_t> flatRunStart(const TensorView &view) {
  int64_t rank = view.rank(), partial = -1;
  for (int64_t d = 0; d < rank; ++d)
    if (view.extent(d) != view.shape[d])
      partial = d;
  for (int64_t d = 0; d < partial; ++d)
    if (view.extent(d) != 1)
      return std::nullopt;
  std::vector<int64_t> strides = rowMajorStrides(view.shape);
  int64_t start = 0;
  for (int64_t d = 0; d < rank; ++d)
    start += view.lo[d] * strides[d];
  return start;
}

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
  auto count = [](const std::vector<int64_t> &shape) {
    int64_t n = 1;
    for (int64_t s : shape)
      n *= s;
    return n;
  };
  if (count(from.shape) != count(to.shape))
    return op.kind + ": the input and result element counts differ";
  shift = -1;
  int64_t n = to.numElements();
  if (n == 0)
    return {};
  std::optional<int64_t> toStart = flatRunStart(to);
  std::optional<int64_t> fromStart = flatRunStart(from);
  if (toStart && fromStart && *fromStart <= *toStart &&
      *toStart + n <= *fromStart + from.numElements()) {
    shift = *toStart - *fromStart;
    return {};
  }
  if (!inputHoldsResult(from, to))
    return op.kind + ": the input view does not hold every element the "
                     "result box reads";
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

/// As the cpu's walkGather: checks, then runs the forward (dy null) or the
/// backward over the result (or result grad) box, and reports the last bad
/// index in the walk's order (the largest offset in the indices view).
KernelStatus runGather(const OpDesc &op, ExecContext &ctx,
                       const KernelView &data, const KernelView &indices,
                       const KernelView &result, const float *dy,
                       float *dData) {
  int64_t dataRank = data.rank(), indicesRank = indices.rank();
  int64_t axis = normalizeAxis(op.getInt("axis", 0), dataRank);
  if (axis < 0 || axis >= dataRank)
    return axisOutOfRange(op, op.getInt("axis", 0), dataRank);
  if (result.rank() != dataRank - 1 + indicesRank)
    return op.kind + ": the result rank is not data rank - 1 + indices rank";
  std::vector<DimMap> dataDims, indexDims;
  for (int64_t d = 0; d < dataRank; ++d) {
    if (d < axis)
      dataDims.push_back(DimMap::identity(d));
    else if (d == axis) // the row comes from the index, added per element
      dataDims.push_back(DimMap::fixed(data.lo[axis]));
    else
      dataDims.push_back(DimMap::identity(d - 1 + indicesRank));
  }
  for (int64_t k = 0; k < indicesRank; ++k)
    indexDims.push_back(DimMap::identity(axis + k));

  GatherPlan g;
  g.rows = data.shape[axis];
  g.rowLo = data.lo[axis];
  g.rowHi = data.hi[axis];
  if (g.rowHi <= g.rowLo) { // holds no row: every element is someone else's
    if (!dy)
      fillKernel(ctx.stream, result.data, result.box.count(), 0.0f);
    return {};
  }
  std::optional<Access> resultAccess =
      identityAccess(result, result.lo, result.hi);
  std::optional<Access> indexAccess =
      stridedAccess(indices, result.lo, result.hi, indexDims);
  std::optional<Access> dataAccess =
      stridedAccess(data, result.lo, result.hi, dataDims);
  if (!resultAccess || !indexAccess || !dataAccess)
    return op.kind + ": the indices or data view does not hold what the "
                     "result box reads";
  g.it = iterBox(result.lo, result.hi);
  g.indexAccess = *indexAccess;
  g.dataAccess = *dataAccess;
  g.rowStride = boxStrides(data)[axis];
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
  readBack(ctx.stream, &badAt, bad, sizeof badAt);
  if (badAt == 0)
    return {};
  float badIndex = 0;
  readBack(ctx.stream, &badIndex, indices.data + (badAt - 1), sizeof badIndex);
  return op.kind + ": index " + std::to_string(badIndex) +
         " is out of range for " + std::to_string(g.rows) + " rows";
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
  table["ppc.concat"] = {concatForward, concatBackward};
  table["ppc.split"] = {splitForward, splitBackward};
  table["ppc.gather"] = {gatherForward, gatherBackward};
}

} // namespace ppc::runtime::cuda
