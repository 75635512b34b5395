//===- DataMovementMaps.h - where data movement ops copy from ---*- C++ -*-===//
//
// Private to the backends (runtime/cpu, runtime/cuda), shared by their
// reshape, transpose, slice, pad, concat, split and gather kernels: each
// op's element map as strided accesses of an iteration box in global
// coordinates (transpose permutes, concat and split shift along the axis,
// slice strides, pad shifts by the low padding, reshape goes through the
// global flat index, gather fixes the gathered dim at the partition's first
// held row), checked against what the views hold, with the same errors on
// every backend. The backends run the copies: forward copies along the map,
// backward adds the output gradient back along the same map.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_COMMON_DATAMOVEMENTMAPS_H
#define PPC_RUNTIME_COMMON_DATAMOVEMENTMAPS_H

#include "KernelChecks.h"

#include "ppc/Runtime/HostDevice.h"
#include "ppc/Runtime/Kernels.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ppc::runtime {

/// The maps of a view whose dims are the iteration dims, in order.
inline std::vector<DimMap> identityDims(size_t rank) {
  std::vector<DimMap> dims;
  for (size_t d = 0; d < rank; ++d)
    dims.push_back(DimMap::identity(static_cast<int64_t>(d)));
  return dims;
}

//===----------------------------------------------------------------------===//
// Copies between boxes
//===----------------------------------------------------------------------===//

/// A checked copy: every point of the iteration box [lo, hi) moves one
/// element, from the source view at `src` to the destination view at `dst`.
struct BoxCopy {
  std::vector<int64_t> lo, hi;
  StridedAccess src, dst;
};

/// The copy from `src` (read through `srcDims`) to `dst` (`dstDims`) over
/// [lo, hi); an error if either view does not hold what the box reaches.
inline absl::Status
planCopy(const OpDesc &op, const std::vector<int64_t> &lo,
         const std::vector<int64_t> &hi, const TensorView &src,
         const std::vector<DimMap> &srcDims, const TensorView &dst,
         const std::vector<DimMap> &dstDims, BoxCopy &copy) {
  std::optional<StridedAccess> srcAccess = stridedAccess(src, lo, hi, srcDims);
  std::optional<StridedAccess> dstAccess = stridedAccess(dst, lo, hi, dstDims);
  if (!srcAccess || !dstAccess)
    return absl::InvalidArgumentError(
        op.kind + ": the " + (srcAccess ? "destination" : "source") +
        " view does not hold what the partition's box reaches");
  copy = {lo, hi, std::move(*srcAccess), std::move(*dstAccess)};
  return {};
}

//===----------------------------------------------------------------------===//
// Transpose, slice, pad: one-operand copies
//===----------------------------------------------------------------------===//

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
using CopyMapFn = absl::Status (*)(const OpDesc &, const TensorView &input,
                                   const TensorView &result, CopyMap &);

/// Result dim i is input dim permutation[i].
inline absl::Status transposeMap(const OpDesc &op, const TensorView &input,
                                 const TensorView &result, CopyMap &map) {
  std::vector<int64_t> permutation = op.getInts("permutation", {});
  int64_t rank = result.rank();
  if (static_cast<int64_t>(permutation.size()) != rank || input.rank() != rank)
    return absl::InvalidArgumentError(op.kind +
                                      ": permutation needs one entry per dim");
  map.inputDims.assign(rank, DimMap());
  std::vector<bool> seen(rank, false);
  for (int64_t i = 0; i < rank; ++i) {
    int64_t p = permutation[i];
    if (p < 0 || p >= rank || seen[p])
      return absl::InvalidArgumentError(
          op.kind + ": permutation is not a permutation of the input dims");
    seen[p] = true;
    map.inputDims[p] = DimMap::identity(i);
  }
  map.lo = result.lo;
  map.hi = result.hi;
  map.resultDims = identityDims(rank);
  return {};
}

/// result[i] = input[starts + i * steps] along every dim.
inline absl::Status sliceMap(const OpDesc &op, const TensorView &input,
                             const TensorView &result, CopyMap &map) {
  int64_t rank = result.rank();
  std::vector<int64_t> starts =
      op.getInts("starts", std::vector<int64_t>(rank, 0));
  std::vector<int64_t> steps =
      op.getInts("steps", std::vector<int64_t>(rank, 1));
  if (static_cast<int64_t>(starts.size()) != rank ||
      static_cast<int64_t>(steps.size()) != rank || input.rank() != rank)
    return absl::InvalidArgumentError(
        op.kind + ": starts and steps need one entry per dim");
  for (int64_t d = 0; d < rank; ++d) {
    if (steps[d] < 1)
      return absl::InvalidArgumentError(op.kind + ": steps must be positive");
    map.inputDims.push_back({d, steps[d], starts[d]});
  }
  map.lo = result.lo;
  map.hi = result.hi;
  map.resultDims = identityDims(rank);
  return {};
}

/// result[i] = input[i - padLo] over the input, `value` elsewhere (negative
/// pads crop).
inline absl::Status padMap(const OpDesc &op, const TensorView &input,
                           const TensorView &result, CopyMap &map) {
  int64_t rank = result.rank();
  std::vector<int64_t> pads = op.getInts("pads", {});
  if (static_cast<int64_t>(pads.size()) != 2 * rank || input.rank() != rank)
    return absl::InvalidArgumentError(
        op.kind + ": pads needs 2 entries per dim ([lo..., hi...])");
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

/// A one-operand copy's forward: the copy input -> result, and the value of
/// the result elements outside it (`fill`, if any).
template <typename View>
absl::Status copyMapForward(const OpDesc &op, CopyMapFn mapOf,
                            const std::vector<View> &inputs,
                            const std::vector<View> &outputs, BoxCopy &copy,
                            std::optional<float> &fill) {
  if (absl::Status s = checkForwardArity(op, inputs, 1, outputs, 1); !s.ok())
    return s;
  const TensorView &input = inputs[0], &result = outputs[0];
  CopyMap map;
  if (absl::Status s = mapOf(op, input, result, map); !s.ok())
    return s;
  fill = map.fill;
  return planCopy(op, map.lo, map.hi, input, map.inputDims, result,
                  map.resultDims, copy);
}

/// A one-operand copy's backward: the copy that adds the result gradient
/// back into the input gradient along the same map (none when the input
/// gradient is not wanted).
template <typename View>
absl::Status copyMapBackward(const OpDesc &op, CopyMapFn mapOf,
                             const std::vector<View> &inputs,
                             const std::vector<View> &outputs,
                             const std::vector<View> &outputGrads,
                             const std::vector<View> &inputGrads,
                             std::optional<BoxCopy> &copy) {
  if (absl::Status s = checkBackwardArity(op, inputs, 1, outputs, 1,
                                          outputGrads, inputGrads);
      !s.ok())
    return s;
  const TensorView &dx = inputGrads[0], &dy = outputGrads[0];
  if (!dx.present())
    return {};
  CopyMap map;
  if (absl::Status s = mapOf(op, dx, dy, map); !s.ok())
    return s;
  copy.emplace();
  return planCopy(op, map.lo, map.hi, dy, map.resultDims, dx, map.inputDims,
                  *copy);
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
template <typename View>
absl::Status pieceMaps(const OpDesc &op, const TensorView &whole,
                       const std::vector<View> &pieces, bool wholeIsResult,
                       std::vector<PieceMap> &maps) {
  int64_t rank = whole.rank();
  int64_t axis = normalizeAxis(op.getInt("axis", 0), rank);
  if (axis < 0 || axis >= rank)
    return axisOutOfRange(op, op.getInt("axis", 0), rank);
  int64_t offset = 0;
  for (const TensorView &piece : pieces) {
    if (piece.rank() != rank)
      return absl::InvalidArgumentError(
          op.kind + ": every piece needs the rank of the whole");
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
    return absl::InvalidArgumentError(
        op.kind + ": the pieces' sizes along axis " + std::to_string(axis) +
        " add up to " + std::to_string(offset) + ", the whole has " +
        std::to_string(whole.shape[axis]));
  return {};
}

/// One copy per piece between it and the whole (`toWhole`: piece -> whole,
/// else whole -> piece); none for a piece without data (a gradient nobody
/// wants, or a result nobody reads).
template <typename View>
absl::Status pieceCopies(const OpDesc &op, const TensorView &whole,
                         const std::vector<View> &pieces, bool wholeIsResult,
                         bool toWhole,
                         std::vector<std::optional<BoxCopy>> &copies) {
  std::vector<PieceMap> maps;
  if (absl::Status s = pieceMaps(op, whole, pieces, wholeIsResult, maps);
      !s.ok())
    return s;
  copies.assign(pieces.size(), std::nullopt);
  std::vector<DimMap> wholeDims = identityDims(whole.rank());
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!pieces[i].present())
      continue;
    const PieceMap &map = maps[i];
    copies[i].emplace();
    absl::Status s = toWhole
                         ? planCopy(op, map.lo, map.hi, pieces[i],
                                    map.pieceDims, whole, wholeDims, *copies[i])
                         : planCopy(op, map.lo, map.hi, whole, wholeDims,
                                    pieces[i], map.pieceDims, *copies[i]);
    if (!s.ok())
      return s;
  }
  return {};
}

/// The forward's copies of concat (`concat`: copy i moves operand i into
/// the result) or split (copy j moves the operand's piece into result j).
template <typename View>
absl::Status pieceForwardCopies(const OpDesc &op, bool concat,
                                const std::vector<View> &inputs,
                                const std::vector<View> &outputs,
                                std::vector<std::optional<BoxCopy>> &copies) {
  if ((concat ? inputs : outputs).empty())
    return absl::InvalidArgumentError(
        op.kind + (concat ? ": expects at least one operand"
                          : ": expects at least one result"));
  if (absl::Status s = checkForwardArity(op, inputs, concat ? inputs.size() : 1,
                                         outputs, concat ? 1 : outputs.size());
      !s.ok())
    return s;
  return concat ? pieceCopies(op, outputs[0], inputs, /*wholeIsResult=*/true,
                              /*toWhole=*/true, copies)
                : pieceCopies(op, inputs[0], outputs, /*wholeIsResult=*/false,
                              /*toWhole=*/false, copies);
}

/// The backward's copies of concat (copy i adds the result gradient into
/// operand i's) or split (copy j adds result j's gradient into the
/// operand's; none when the operand's gradient is not wanted).
template <typename View>
absl::Status pieceBackwardCopies(const OpDesc &op, bool concat,
                                 const std::vector<View> &inputs,
                                 const std::vector<View> &outputs,
                                 const std::vector<View> &outputGrads,
                                 const std::vector<View> &inputGrads,
                                 std::vector<std::optional<BoxCopy>> &copies) {
  if (absl::Status s = checkBackwardArity(
          op, inputs, concat ? inputs.size() : 1, outputs,
          concat ? 1 : outputs.size(), outputGrads, inputGrads);
      !s.ok())
    return s;
  copies.clear();
  if (concat)
    return pieceCopies(op, outputGrads[0], inputGrads, /*wholeIsResult=*/true,
                       /*toWhole=*/false, copies);
  if (!inputGrads[0].present())
    return {};
  return pieceCopies(op, inputGrads[0], outputGrads, /*wholeIsResult=*/false,
                     /*toWhole=*/true, copies);
}

//===----------------------------------------------------------------------===//
// Reshape
//===----------------------------------------------------------------------===//

inline std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

/// The first global flat index of the box of `view` if the box is one run of
/// its tensor's row-major order (dims after the last partly held one are
/// whole, dims before it held at one index).
inline std::optional<int64_t> flatRunStart(const TensorView &view) {
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

/// The reshape from the `from` box (the input or its gradient) to the `to`
/// box (the result or its gradient): checks the element counts, and sets
/// `shift` when both boxes are runs of the flat order (a whole tensor, a
/// batch split) that match one to one (element r of `to` is element
/// r + shift of `from`; 0 for an empty `to`), -1 otherwise: then each
/// element goes through its global flat index, and the backend checks that
/// `from` holds them all (reshapeMissing).
inline absl::Status reshapeShift(const OpDesc &op, const TensorView &from,
                                 const TensorView &to, int64_t &shift) {
  auto count = [](const std::vector<int64_t> &shape) {
    int64_t n = 1;
    for (int64_t s : shape)
      n *= s;
    return n;
  };
  if (count(from.shape) != count(to.shape))
    return absl::InvalidArgumentError(
        op.kind + ": the input and result element counts differ");
  shift = 0;
  int64_t n = to.numElements();
  if (n == 0)
    return {};
  std::optional<int64_t> toStart = flatRunStart(to);
  std::optional<int64_t> fromStart = flatRunStart(from);
  if (toStart && fromStart && *fromStart <= *toStart &&
      *toStart + n <= *fromStart + from.numElements())
    shift = *toStart - *fromStart;
  else
    shift = -1;
  return {};
}

/// The error of a reshape whose input view lacks an element the result
/// box reads.
inline absl::Status reshapeMissing(const OpDesc &op) {
  return absl::InvalidArgumentError(
      op.kind + ": the input view does not hold every element the "
                "result box reads");
}

//===----------------------------------------------------------------------===//
// Gather
//===----------------------------------------------------------------------===//

/// The gather of one partition over the box of `result` (the result or its
/// gradient): `data` (the table or its gradient) holds rows [rowLo, rowHi)
/// of `rows` along `axis`. Where it holds any, the accesses of the result,
/// the indices and the data from the result box, the data's with the
/// gathered dim fixed at rowLo: the row an index picks adds
/// (row - rowLo) * rowStride.
struct GatherGeometry {
  int64_t axis = 0, rows = 0, rowLo = 0, rowHi = 0, rowStride = 0;
  bool holdsRows = false;
  StridedAccess result, index, data;
};

inline absl::Status gatherGeometry(const OpDesc &op, const TensorView &data,
                                   const TensorView &indices,
                                   const TensorView &result,
                                   GatherGeometry &g) {
  int64_t dataRank = data.rank(), indicesRank = indices.rank();
  g.axis = normalizeAxis(op.getInt("axis", 0), dataRank);
  if (g.axis < 0 || g.axis >= dataRank)
    return axisOutOfRange(op, op.getInt("axis", 0), dataRank);
  if (result.rank() != dataRank - 1 + indicesRank)
    return absl::InvalidArgumentError(
        op.kind + ": the result rank is not data rank - 1 + indices rank");
  std::vector<DimMap> dataDims, indexDims;
  for (int64_t d = 0; d < dataRank; ++d) {
    if (d < g.axis)
      dataDims.push_back(DimMap::identity(d));
    else if (d == g.axis) // the row comes from the index, added per element
      dataDims.push_back(DimMap::fixed(data.lo[g.axis]));
    else
      dataDims.push_back(DimMap::identity(d - 1 + indicesRank));
  }
  for (int64_t k = 0; k < indicesRank; ++k)
    indexDims.push_back(DimMap::identity(g.axis + k));

  g.rows = data.shape[g.axis];
  g.rowLo = data.lo[g.axis];
  g.rowHi = data.hi[g.axis];
  g.holdsRows = g.rowHi > g.rowLo;
  if (!g.holdsRows) // every element is someone else's
    return {};
  std::optional<StridedAccess> resultAccess =
      identityAccess(result, result.lo, result.hi);
  std::optional<StridedAccess> indexAccess =
      stridedAccess(indices, result.lo, result.hi, indexDims);
  std::optional<StridedAccess> dataAccess =
      stridedAccess(data, result.lo, result.hi, dataDims);
  if (!resultAccess || !indexAccess || !dataAccess)
    return absl::InvalidArgumentError(
        op.kind + ": the indices or data view does not hold what the "
                  "result box reads");
  g.result = std::move(*resultAccess);
  g.index = std::move(*indexAccess);
  g.data = std::move(*dataAccess);
  g.rowStride = data.strides()[g.axis];
  return {};
}

/// The row of an index value: rounded half away from zero (std::llround),
/// negative rows counted from the back; false for NaN, infinities and rows
/// outside [-rows, rows).
PPC_HD inline bool gatherRow(float value, int64_t rows, int64_t &row) {
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

/// The error of an index value out of range (the last one in the walk's
/// order of the result box).
inline absl::Status gatherIndexError(const OpDesc &op, float badIndex,
                                     int64_t rows) {
  return absl::InvalidArgumentError(
      op.kind + ": index " + std::to_string(badIndex) +
      " is out of range for " + std::to_string(rows) + " rows");
}

} // namespace ppc::runtime

#endif // PPC_RUNTIME_COMMON_DATAMOVEMENTMAPS_H
