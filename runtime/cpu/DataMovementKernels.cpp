//===- DataMovementKernels.cpp - reshape, transpose, concat, split, ... ---===//
//
// Copies between boxes in global coordinates. Each op's element map is the
// access of its iteration space (ParallelizableOps.cpp), shared with the
// cuda kernels (DataMovementMaps.h): transpose permutes, concat and split
// shift along the axis, slice strides, pad shifts by the low padding,
// reshape goes through the global flat index. Backward adds the output
// gradient back along the same map. gather's gathered rows are a reduction
// dim: a partition holding rows [a, b) of `data` writes only the elements
// whose index falls there, zero elsewhere, and the plan sums.
//
//===----------------------------------------------------------------------===//

#include "KernelHelpers.h"
#include "KernelRegistry.h"

#include "DataMovementMaps.h"

#include <algorithm>

namespace ppc::runtime::cpu {
namespace {

using Offsets2 = std::array<int64_t, 2>;
using Offsets3 = std::array<int64_t, 3>;
using Copies = std::vector<std::optional<BoxCopy>>;

/// Runs a checked copy from `src` to `dst`: `accumulate` adds (backward)
/// instead of storing (forward).
void runCopy(const BoxCopy &copy, const float *src, float *dst,
             bool accumulate) {
  std::vector<int64_t> extents = extentsOf(copy.lo, copy.hi);
  if (accumulate)
    walkStrided<2>(extents, {copy.src, copy.dst},
                   [&](const Offsets2 &o) { dst[o[1]] += src[o[0]]; });
  else
    walkStrided<2>(extents, {copy.src, copy.dst},
                   [&](const Offsets2 &o) { dst[o[1]] = src[o[0]]; });
}

/// Forward copies input -> result along the map; backward adds the result
/// gradient back into the input gradient along the same map.
KernelImpl copyKernel(CopyMapFn mapOf) {
  KernelImpl impl;
  impl.forward = [mapOf](const OpDesc &op, const KernelContext &,
                         const std::vector<TensorView> &inputs,
                         std::vector<TensorView> &outputs,
                         std::vector<TensorView> &) -> absl::Status {
    BoxCopy copy;
    std::optional<float> fill;
    if (absl::Status s = copyMapForward(op, mapOf, inputs, outputs, copy, fill);
        !s.ok())
      return s;
    TensorView &result = outputs[0];
    if (fill)
      std::fill(result.data, result.data + result.numElements(), *fill);
    runCopy(copy, inputs[0].data, result.data, /*accumulate=*/false);
    return {};
  };
  impl.backward = [mapOf](const OpDesc &op, const KernelContext &,
                          const std::vector<TensorView> &inputs,
                          const std::vector<TensorView> &outputs,
                          const std::vector<TensorView> &outputGrads,
                          std::vector<TensorView> &inputGrads,
                          std::vector<TensorView> &) -> absl::Status {
    std::optional<BoxCopy> copy;
    if (absl::Status s = copyMapBackward(op, mapOf, inputs, outputs,
                                         outputGrads, inputGrads, copy);
        !s.ok())
      return s;
    if (copy)
      runCopy(*copy, outputGrads[0].data, inputGrads[0].data,
              /*accumulate=*/true);
    return {};
  };
  return impl;
}

//===----------------------------------------------------------------------===//
// Reshape
//===----------------------------------------------------------------------===//

/// Calls fn(resultOffset, inputOffset) for every element of the box of
/// `result`, matched to the element of `input` with the same global flat
/// index.
template <typename Fn>
absl::Status walkReshape(const OpDesc &op, const TensorView &input,
                         const TensorView &result, Fn &&fn) {
  int64_t shift = -1;
  if (absl::Status s = reshapeShift(op, input, result, shift); !s.ok())
    return s;
  if (shift >= 0) {
    int64_t n = result.numElements();
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
    return reshapeMissing(op);
  return {};
}

KernelImpl reshapeKernel() {
  KernelImpl impl;
  impl.forward = [](const OpDesc &op, const KernelContext &,
                    const std::vector<TensorView> &inputs,
                    std::vector<TensorView> &outputs,
                    std::vector<TensorView> &) -> absl::Status {
    if (absl::Status s = checkForwardArity(op, inputs, 1, outputs, 1); !s.ok())
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
                     std::vector<TensorView> &) -> absl::Status {
    if (absl::Status s = checkBackwardArity(op, inputs, 1, outputs, 1,
                                            outputGrads, inputGrads);
        !s.ok())
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
// Concat and split
//===----------------------------------------------------------------------===//

/// Copy i moves piece i's (`pieces`) data into the whole, or the whole into
/// piece i (`toPieces`); pieces without a copy are skipped.
void runPieceCopies(const Copies &copies, const std::vector<TensorView> &pieces,
                    const TensorView &whole, bool toPieces, bool accumulate) {
  for (size_t i = 0; i < copies.size(); ++i)
    if (copies[i])
      runCopy(*copies[i], toPieces ? whole.data : pieces[i].data,
              toPieces ? pieces[i].data : whole.data, accumulate);
}

/// Concat (`concat`: the pieces are the operands, the whole is the result)
/// or split (the pieces are the results, the whole is the operand).
KernelImpl pieceKernel(bool concat) {
  KernelImpl impl;
  impl.forward = [concat](const OpDesc &op, const KernelContext &,
                          const std::vector<TensorView> &inputs,
                          std::vector<TensorView> &outputs,
                          std::vector<TensorView> &) -> absl::Status {
    Copies copies;
    if (absl::Status s =
            pieceForwardCopies(op, concat, inputs, outputs, copies);
        !s.ok())
      return s;
    runPieceCopies(copies, concat ? inputs : outputs,
                   concat ? outputs[0] : inputs[0], /*toPieces=*/!concat,
                   /*accumulate=*/false);
    return {};
  };
  impl.backward = [concat](const OpDesc &op, const KernelContext &,
                           const std::vector<TensorView> &inputs,
                           const std::vector<TensorView> &outputs,
                           const std::vector<TensorView> &outputGrads,
                           std::vector<TensorView> &inputGrads,
                           std::vector<TensorView> &) -> absl::Status {
    Copies copies;
    if (absl::Status s = pieceBackwardCopies(op, concat, inputs, outputs,
                                             outputGrads, inputGrads, copies);
        !s.ok())
      return s;
    runPieceCopies(copies, concat ? inputGrads : outputGrads,
                   concat ? outputGrads[0] : inputGrads[0],
                   /*toPieces=*/concat, /*accumulate=*/true);
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
absl::Status walkGather(const OpDesc &op, const TensorView &data,
                        const TensorView &indices, const TensorView &result,
                        Fn &&fn) {
  GatherGeometry g;
  if (absl::Status s = gatherGeometry(op, data, indices, result, g); !s.ok())
    return s;
  if (!g.holdsRows) { // every element is someone else's
    fn(int64_t{0}, int64_t{-1}, result.numElements());
    return {};
  }

  // The dims after the gathered one, held whole by both views (an embedding
  // not split along its hidden dim), are one contiguous run per index.
  int64_t indicesRank = indices.rank();
  std::vector<int64_t> extents = extentsOf(result.lo, result.hi);
  int64_t lead = g.axis + indicesRank, run = 1;
  bool trailingWhole = true;
  for (int64_t d = lead; d < result.rank(); ++d) {
    int64_t dataDim = d - indicesRank + 1;
    trailingWhole &= result.extent(d) == result.shape[d] &&
                     data.extent(dataDim) == data.shape[dataDim];
    run *= result.extent(d);
  }
  std::array<StridedAccess, 3> accesses = {g.result, g.index, g.data};
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
    int64_t row = -1;
    if (!gatherRow(value, g.rows, row)) {
      bad = true;
      badIndex = value;
      row = -1;
    }
    bool held = row >= g.rowLo && row < g.rowHi;
    fn(o[0], held ? o[2] + (row - g.rowLo) * g.rowStride : -1, run);
  });
  if (bad)
    return gatherIndexError(op, badIndex, g.rows);
  return {};
}

KernelImpl gatherKernel() {
  KernelImpl impl;
  impl.forward = [](const OpDesc &op, const KernelContext &,
                    const std::vector<TensorView> &inputs,
                    std::vector<TensorView> &outputs,
                    std::vector<TensorView> &) -> absl::Status {
    if (absl::Status s = checkForwardArity(op, inputs, 2, outputs, 1); !s.ok())
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
                     std::vector<TensorView> &) -> absl::Status {
    if (absl::Status s = checkBackwardArity(op, inputs, 2, outputs, 1,
                                            outputGrads, inputGrads);
        !s.ok())
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
  table["ppc.concat"] = pieceKernel(/*concat=*/true);
  table["ppc.split"] = pieceKernel(/*concat=*/false);
  table["ppc.gather"] = gatherKernel();
}

} // namespace ppc::runtime::cpu
