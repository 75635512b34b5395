//===- DataMovementKernels.cpp - reshape, transpose, concat, split, ... ---===//
//
// Copies between boxes in global coordinates. Each op's element map is the
// access of its iteration space (ParallelizableOps.cpp): transpose permutes,
// concat and split shift along the axis, slice strides, pad shifts by the
// low padding, reshape goes through the global flat index. Backward adds the
// output gradient back along the same map. gather's gathered rows are a
// reduction dim: a partition holding rows [a, b) of `data` writes only the
// elements whose index falls there, zero elsewhere, and the plan sums.
//
//===----------------------------------------------------------------------===//

#include "KernelHelpers.h"
#include "KernelRegistry.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ppc::runtime::cpu {
namespace {

using Offsets2 = std::array<int64_t, 2>;
using Offsets3 = std::array<int64_t, 3>;

KernelStatus checkForwardArity(const OpDesc &op,
                               const std::vector<TensorView> &inputs,
                               size_t numInputs,
                               const std::vector<TensorView> &outputs,
                               size_t numOutputs) {
  return expectArity(op, "views", inputs.size(), numInputs, outputs.size(),
                     numOutputs);
}

/// The forward views' counts, and one gradient view per operand and result.
KernelStatus checkBackwardArity(const OpDesc &op,
                                const std::vector<TensorView> &inputs,
                                size_t numInputs,
                                const std::vector<TensorView> &outputs,
                                size_t numOutputs,
                                const std::vector<TensorView> &outputGrads,
                                const std::vector<TensorView> &inputGrads) {
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

/// A copy from a source view to a destination view: every point of the
/// iteration box [lo, hi) moves one element. `accumulate` adds (backward)
/// instead of storing (forward).
KernelStatus copyAlong(const OpDesc &op, const std::vector<int64_t> &lo,
                       const std::vector<int64_t> &hi, const TensorView &src,
                       const std::vector<DimMap> &srcDims, TensorView &dst,
                       const std::vector<DimMap> &dstDims, bool accumulate) {
  std::optional<StridedAccess> srcAccess = stridedAccess(src, lo, hi, srcDims);
  std::optional<StridedAccess> dstAccess = stridedAccess(dst, lo, hi, dstDims);
  if (!srcAccess || !dstAccess)
    return op.kind + ": the " + (srcAccess ? "destination" : "source") +
           " view does not hold what the partition's box reaches";
  std::vector<int64_t> extents = extentsOf(lo, hi);
  if (accumulate)
    walkStrided<2>(extents, {*srcAccess, *dstAccess}, [&](const Offsets2 &o) {
      dst.data[o[1]] += src.data[o[0]];
    });
  else
    walkStrided<2>(extents, {*srcAccess, *dstAccess},
                   [&](const Offsets2 &o) { dst.data[o[1]] = src.data[o[0]]; });
  return {};
}

std::vector<DimMap> identityDims(size_t rank) {
  std::vector<DimMap> dims;
  for (size_t d = 0; d < rank; ++d)
    dims.push_back(DimMap::identity(static_cast<int64_t>(d)));
  return dims;
}

/// The element map of a one-operand copy: every point of the iteration box
/// [lo, hi) moves the input element at `inputDims` to the result element at
/// `resultDims`; result elements outside the box are `fill`.
struct CopyMap {
  std::vector<int64_t> lo, hi;
  std::vector<DimMap> inputDims, resultDims;
  std::optional<float> fill;
};

/// Builds the map of the partition whose input-like view (the operand or its
/// gradient) is `input` and result-like view is `result`.
using CopyMapFn = KernelStatus (*)(const OpDesc &, const TensorView &input,
                                   const TensorView &result, CopyMap &);

/// Forward copies input -> result along the map; backward adds the result
/// gradient back into the input gradient along the same map.
KernelImpl copyKernel(CopyMapFn mapOf) {
  KernelImpl impl;
  impl.forward = [mapOf](const OpDesc &op, const KernelContext &,
                         const std::vector<TensorView> &inputs,
                         std::vector<TensorView> &outputs,
                         std::vector<TensorView> &) -> KernelStatus {
    if (KernelStatus s = checkForwardArity(op, inputs, 1, outputs, 1);
        !s.empty())
      return s;
    const TensorView &input = inputs[0];
    TensorView &result = outputs[0];
    CopyMap map;
    if (KernelStatus s = mapOf(op, input, result, map); !s.empty())
      return s;
    if (map.fill)
      std::fill(result.data, result.data + result.numElements(), *map.fill);
    return copyAlong(op, map.lo, map.hi, input, map.inputDims, result,
                     map.resultDims, /*accumulate=*/false);
  };
  impl.backward = [mapOf](const OpDesc &op, const KernelContext &,
                          const std::vector<TensorView> &inputs,
                          const std::vector<TensorView> &outputs,
                          const std::vector<TensorView> &outputGrads,
                          std::vector<TensorView> &inputGrads,
                          std::vector<TensorView> &) -> KernelStatus {
    if (KernelStatus s = checkBackwardArity(op, inputs, 1, outputs, 1,
                                            outputGrads, inputGrads);
        !s.empty())
      return s;
    TensorView &dx = inputGrads[0];
    if (!dx.data)
      return {};
    const TensorView &dy = outputGrads[0];
    CopyMap map;
    if (KernelStatus s = mapOf(op, dx, dy, map); !s.empty())
      return s;
    return copyAlong(op, map.lo, map.hi, dy, map.resultDims, dx, map.inputDims,
                     /*accumulate=*/true);
  };
  return impl;
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

/// The first global flat index of the box of `view` if the box is one run of
/// its tensor's row-major order (dims after the last partly held one are
/// whole, dims before it held at one index).
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

/// Calls fn(resultOffset, inputOffset) for every element of the box of
/// `result`, matched to the element of `input` with the same global flat
/// index.
template <typename Fn>
KernelStatus walkReshape(const OpDesc &op, const TensorView &input,
                         const TensorView &result, Fn &&fn) {
  auto count = [](const std::vector<int64_t> &shape) {
    return std::accumulate(shape.begin(), shape.end(), int64_t{1},
                           std::multiplies<int64_t>());
  };
  if (count(input.shape) != count(result.shape))
    return op.kind + ": the input and result element counts differ";
  int64_t n = result.numElements();
  if (n == 0)
    return {};
  // Both boxes are runs of the flat order (a whole tensor, a batch split):
  // the elements match one to one from an offset.
  std::optional<int64_t> resultStart = flatRunStart(result);
  std::optional<int64_t> inputStart = flatRunStart(input);
  if (resultStart && inputStart && *inputStart <= *resultStart &&
      *resultStart + n <= *inputStart + input.numElements()) {
    int64_t shift = *resultStart - *inputStart;
    for (int64_t i = 0; i < n; ++i)
      fn(i, i + shift);
    return {};
  }

  std::vector<int64_t> resultStrides = rowMajorStrides(result.shape);
  std::vector<int64_t> inputIndex(input.shape.size());
  int64_t resultOffset = 0;
  bool missing = false;
  forEachIndex(result.lo, result.hi, [&](const std::vector<int64_t> &index) {
    int64_t flat = 0;
    for (size_t d = 0; d < index.size(); ++d)
      flat += index[d] * resultStrides[d];
    for (size_t d = inputIndex.size(); d-- > 0;) {
      inputIndex[d] = flat % input.shape[d];
      flat /= input.shape[d];
    }
    if (input.contains(inputIndex))
      fn(resultOffset, input.offsetOf(inputIndex));
    else
      missing = true;
    ++resultOffset;
  });
  if (missing)
    return op.kind + ": the input view does not hold every element the "
                     "result box reads";
  return {};
}

KernelImpl reshapeKernel() {
  KernelImpl impl;
  impl.forward = [](const OpDesc &op, const KernelContext &,
                    const std::vector<TensorView> &inputs,
                    std::vector<TensorView> &outputs,
                    std::vector<TensorView> &) -> KernelStatus {
    if (KernelStatus s = checkForwardArity(op, inputs, 1, outputs, 1);
        !s.empty())
      return s;
    const TensorView &input = inputs[0];
    TensorView &result = outputs[0];
    return walkReshape(op, input, result, [&](int64_t r, int64_t i) {
      result.data[r] = input.data[i];
    });
  };
  impl.backward = [](const OpDesc &op, const KernelContext &,
                     const std::vector<TensorView> &inputs,
                     const std::vector<TensorView> &outputs,
                     const std::vector<TensorView> &outputGrads,
                     std::vector<TensorView> &inputGrads,
                     std::vector<TensorView> &) -> KernelStatus {
    if (KernelStatus s = checkBackwardArity(op, inputs, 1, outputs, 1,
                                            outputGrads, inputGrads);
        !s.empty())
      return s;
    TensorView &dx = inputGrads[0];
    if (!dx.data)
      return {};
    const TensorView &dy = outputGrads[0];
    return walkReshape(op, dx, dy,
                       [&](int64_t r, int64_t i) { dx.data[i] += dy.data[r]; });
  };
  return impl;
}

//===----------------------------------------------------------------------===//
// Transpose, slice, pad
//===----------------------------------------------------------------------===//

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
  // The part of the result box that lies over the input.
  for (int64_t d = 0; d < rank; ++d) {
    map.lo.push_back(std::max(result.lo[d], pads[d]));
    map.hi.push_back(std::min(result.hi[d], pads[d] + input.shape[d]));
    map.inputDims.push_back(DimMap::identity(d, -pads[d]));
  }
  map.resultDims = identityDims(rank);
  return {};
}

//===----------------------------------------------------------------------===//
// Concat and split
//===----------------------------------------------------------------------===//

/// Where one piece of a concat (an operand) or split (a result) lies in the
/// whole (concat's result, split's operand): the iteration box, in the
/// whole's coordinates, and the piece's dims, shifted along the axis.
struct PieceMap {
  std::vector<int64_t> lo, hi;
  std::vector<DimMap> pieceDims;
};

/// Piece i covers [offset_i, offset_i + size_i) of the whole along `axis`.
/// The iteration box of a piece is the box of the op's result view (or its
/// gradient) restricted to the piece: `whole`'s for concat, the piece's own
/// for split (`wholeIsResult`).
KernelStatus pieceMaps(const OpDesc &op, const TensorView &whole,
                       const std::vector<TensorView> &pieces,
                       bool wholeIsResult, std::vector<PieceMap> &maps) {
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

KernelImpl concatKernel() {
  KernelImpl impl;
  impl.forward = [](const OpDesc &op, const KernelContext &,
                    const std::vector<TensorView> &inputs,
                    std::vector<TensorView> &outputs,
                    std::vector<TensorView> &) -> KernelStatus {
    if (inputs.empty())
      return op.kind + ": expects at least one operand";
    if (KernelStatus s =
            checkForwardArity(op, inputs, inputs.size(), outputs, 1);
        !s.empty())
      return s;
    TensorView &result = outputs[0];
    std::vector<PieceMap> maps;
    if (KernelStatus s = pieceMaps(op, result, inputs, true, maps); !s.empty())
      return s;
    int64_t rank = result.rank();
    for (size_t i = 0; i < inputs.size(); ++i)
      if (KernelStatus s = copyAlong(op, maps[i].lo, maps[i].hi, inputs[i],
                                     maps[i].pieceDims, result,
                                     identityDims(rank), /*accumulate=*/false);
          !s.empty())
        return s;
    return {};
  };
  impl.backward = [](const OpDesc &op, const KernelContext &,
                     const std::vector<TensorView> &inputs,
                     const std::vector<TensorView> &outputs,
                     const std::vector<TensorView> &outputGrads,
                     std::vector<TensorView> &inputGrads,
                     std::vector<TensorView> &) -> KernelStatus {
    if (KernelStatus s = checkBackwardArity(op, inputs, inputs.size(), outputs,
                                            1, outputGrads, inputGrads);
        !s.empty())
      return s;
    const TensorView &dy = outputGrads[0];
    std::vector<PieceMap> maps;
    if (KernelStatus s = pieceMaps(op, dy, inputGrads, true, maps); !s.empty())
      return s;
    int64_t rank = dy.rank();
    for (size_t i = 0; i < inputGrads.size(); ++i) {
      if (!inputGrads[i].data)
        continue;
      if (KernelStatus s =
              copyAlong(op, maps[i].lo, maps[i].hi, dy, identityDims(rank),
                        inputGrads[i], maps[i].pieceDims, /*accumulate=*/true);
          !s.empty())
        return s;
    }
    return {};
  };
  return impl;
}

KernelImpl splitKernel() {
  KernelImpl impl;
  impl.forward = [](const OpDesc &op, const KernelContext &,
                    const std::vector<TensorView> &inputs,
                    std::vector<TensorView> &outputs,
                    std::vector<TensorView> &) -> KernelStatus {
    if (outputs.empty())
      return op.kind + ": expects at least one result";
    if (KernelStatus s =
            checkForwardArity(op, inputs, 1, outputs, outputs.size());
        !s.empty())
      return s;
    const TensorView &input = inputs[0];
    std::vector<PieceMap> maps;
    if (KernelStatus s = pieceMaps(op, input, outputs, false, maps); !s.empty())
      return s;
    int64_t rank = input.rank();
    for (size_t j = 0; j < outputs.size(); ++j)
      if (KernelStatus s =
              copyAlong(op, maps[j].lo, maps[j].hi, input, identityDims(rank),
                        outputs[j], maps[j].pieceDims, /*accumulate=*/false);
          !s.empty())
        return s;
    return {};
  };
  impl.backward = [](const OpDesc &op, const KernelContext &,
                     const std::vector<TensorView> &inputs,
                     const std::vector<TensorView> &outputs,
                     const std::vector<TensorView> &outputGrads,
                     std::vector<TensorView> &inputGrads,
                     std::vector<TensorView> &) -> KernelStatus {
    if (KernelStatus s = checkBackwardArity(
            op, inputs, 1, outputs, outputs.size(), outputGrads, inputGrads);
        !s.empty())
      return s;
    TensorView &dx = inputGrads[0];
    if (!dx.data)
      return {};
    std::vector<PieceMap> maps;
    if (KernelStatus s = pieceMaps(op, dx, outputGrads, false, maps);
        !s.empty())
      return s;
    int64_t rank = dx.rank();
    for (size_t j = 0; j < outputGrads.size(); ++j) {
      // A result nobody reads may come without a gradient.
      if (!outputGrads[j].data)
        continue;
      if (KernelStatus s = copyAlong(op, maps[j].lo, maps[j].hi, outputGrads[j],
                                     maps[j].pieceDims, dx, identityDims(rank),
                                     /*accumulate=*/true);
          !s.empty())
        return s;
    }
    return {};
  };
  return impl;
}

//===----------------------------------------------------------------------===//
// Gather
//===----------------------------------------------------------------------===//

/// Calls fn(resultOffset, dataOffset, count) for runs of `count` elements of
/// the result box, contiguous in both views, that share one index: dataOffset
/// is where the run starts in `data` if the index falls in the rows the
/// partition holds, else negative.
template <typename Fn>
KernelStatus walkGather(const OpDesc &op, const TensorView &data,
                        const TensorView &indices, const TensorView &result,
                        Fn &&fn) {
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

  int64_t rows = data.shape[axis], rowLo = data.lo[axis], rowHi = data.hi[axis];
  if (rowHi <= rowLo) { // holds no row: every element is someone else's
    fn(int64_t{0}, int64_t{-1}, result.numElements());
    return {};
  }
  std::optional<StridedAccess> resultAccess =
      identityAccess(result, result.lo, result.hi);
  std::optional<StridedAccess> indexAccess =
      stridedAccess(indices, result.lo, result.hi, indexDims);
  std::optional<StridedAccess> dataAccess =
      stridedAccess(data, result.lo, result.hi, dataDims);
  if (!resultAccess || !indexAccess || !dataAccess)
    return op.kind + ": the indices or data view does not hold what the "
                     "result box reads";
  int64_t rowStride = data.strides()[axis];

  // The dims after the gathered one, held whole by both views (an embedding
  // not split along its hidden dim), are one contiguous run per index.
  std::vector<int64_t> extents = extentsOf(result.lo, result.hi);
  int64_t lead = axis + indicesRank, run = 1;
  bool trailingWhole = true;
  for (int64_t d = lead; d < result.rank(); ++d) {
    int64_t dataDim = d - indicesRank + 1;
    trailingWhole &= result.extent(d) == result.shape[d] &&
                     data.extent(dataDim) == data.shape[dataDim];
    run *= result.extent(d);
  }
  std::array<StridedAccess, 3> accesses = {*resultAccess, *indexAccess,
                                           *dataAccess};
  if (trailingWhole) {
    extents.resize(lead);
    for (StridedAccess &access : accesses)
      access.strides.resize(lead);
  } else {
    run = 1;
  }

  float badIndex = 0;
  bool bad = false;
  walkStrided<3>(extents, accesses, [&](const Offsets3 &o) {
    float value = indices.data[o[1]];
    int64_t row = static_cast<int64_t>(std::llround(value));
    if (row < 0)
      row += rows;
    if (!(row >= 0 && row < rows) || value != value) {
      bad = true;
      badIndex = value;
      row = -1;
    }
    bool held = row >= rowLo && row < rowHi;
    fn(o[0], held ? o[2] + (row - rowLo) * rowStride : -1, run);
  });
  if (bad)
    return op.kind + ": index " + std::to_string(badIndex) +
           " is out of range for " + std::to_string(rows) + " rows";
  return {};
}

KernelImpl gatherKernel() {
  KernelImpl impl;
  impl.forward = [](const OpDesc &op, const KernelContext &,
                    const std::vector<TensorView> &inputs,
                    std::vector<TensorView> &outputs,
                    std::vector<TensorView> &) -> KernelStatus {
    if (KernelStatus s = checkForwardArity(op, inputs, 2, outputs, 1);
        !s.empty())
      return s;
    const TensorView &data = inputs[0];
    TensorView &result = outputs[0];
    return walkGather(
        op, data, inputs[1], result,
        [&](int64_t resultOffset, int64_t dataOffset, int64_t count) {
          float *out = result.data + resultOffset;
          if (dataOffset < 0)
            std::fill(out, out + count, 0.0f);
          else
            std::copy(data.data + dataOffset, data.data + dataOffset + count,
                      out);
        });
  };
  impl.backward = [](const OpDesc &op, const KernelContext &,
                     const std::vector<TensorView> &inputs,
                     const std::vector<TensorView> &outputs,
                     const std::vector<TensorView> &outputGrads,
                     std::vector<TensorView> &inputGrads,
                     std::vector<TensorView> &) -> KernelStatus {
    if (KernelStatus s = checkBackwardArity(op, inputs, 2, outputs, 1,
                                            outputGrads, inputGrads);
        !s.empty())
      return s;
    // Indices get no gradient; data's is a scatter-add over the held rows.
    TensorView &dData = inputGrads[0];
    if (!dData.data)
      return {};
    const TensorView &dy = outputGrads[0];
    return walkGather(
        op, dData, inputs[1], dy,
        [&](int64_t resultOffset, int64_t dataOffset, int64_t count) {
          if (dataOffset < 0)
            return;
          for (int64_t i = 0; i < count; ++i)
            dData.data[dataOffset + i] += dy.data[resultOffset + i];
        });
  };
  return impl;
}

} // namespace

void registerDataMovementKernels(KernelTable &table) {
  table["ppc.reshape"] = reshapeKernel();
  table["ppc.transpose"] = copyKernel(transposeMap);
  table["ppc.slice"] = copyKernel(sliceMap);
  table["ppc.pad"] = copyKernel(padMap);
  table["ppc.concat"] = concatKernel();
  table["ppc.split"] = splitKernel();
  table["ppc.gather"] = gatherKernel();
}

} // namespace ppc::runtime::cpu
