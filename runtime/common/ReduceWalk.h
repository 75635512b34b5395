//===- ReduceWalk.h - the walk of a reduce_sum/mean/max partition -*- C++
//-*-===//
//
// Private to the backends (runtime/cpu, runtime/cuda), shared by their
// reduce_sum, reduce_mean and reduce_max kernels. The iteration space is
// the input's dims. A partition computes its output box over the reduced
// range its input view holds along the reduced axes: a split reduced axis
// leaves partial sums, which the plan adds up, so a mean divides by the
// global reduced count. reduce_max is never split along a reduced axis (a
// max of partials is not their sum). The walk is checked against the
// views, with the same errors on every backend.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_COMMON_REDUCEWALK_H
#define PPC_RUNTIME_COMMON_REDUCEWALK_H

#include "KernelChecks.h"

#include "ppc/Runtime/Kernels.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ppc::runtime {

enum class Reduction { Sum, Mean, Max };

/// The walk of one partition: its iteration box (over the input dims) and
/// how the input-like and output-like views are read from it.
struct ReduceWalk {
  std::vector<int64_t> lo, hi;
  /// Per input dim: whether `axes` reduces it.
  std::vector<bool> reduced;
  /// Per output dim: the input dim that indexes it (kept reduced dims:
  /// fixed at 0).
  std::vector<DimMap> outputDims;
  /// Product of the global sizes of the reduced dims.
  int64_t globalCount = 1;

  /// What the sums are scaled by: a mean's 1 / global count, else 1.
  float scale(Reduction kind) const {
    return kind == Reduction::Mean ? 1.0f / static_cast<float>(globalCount)
                                   : 1.0f;
  }
};

/// Builds the walk of the partition whose input-like view is `input` and
/// output-like view is `output` (the operand and result, or their
/// gradients): the output box along the kept dims, the input box along the
/// reduced ones.
inline absl::Status reduceWalk(const OpDesc &op, Reduction kind,
                               const TensorView &input,
                               const TensorView &output, ReduceWalk &walk) {
  int64_t rank = input.rank();
  std::vector<int64_t> axes = op.getInts("axes", {});
  if (axes.empty())
    return absl::InvalidArgumentError(op.kind + ": expects at least one axis");
  walk.reduced.assign(rank, false);
  for (int64_t axis : axes) {
    int64_t d = normalizeAxis(axis, rank);
    if (d < 0 || d >= rank)
      return axisOutOfRange(op, axis, rank);
    walk.reduced[d] = true;
  }
  bool keepDims = op.getInt("keep_dims", 1) != 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (!walk.reduced[d])
      walk.outputDims.push_back(DimMap::identity(d));
    else if (keepDims)
      walk.outputDims.push_back(DimMap::fixed(0));
  }
  if (output.rank() != static_cast<int64_t>(walk.outputDims.size()))
    return absl::InvalidArgumentError(
        op.kind + ": the result has rank " + std::to_string(output.rank()) +
        ", expected " + std::to_string(walk.outputDims.size()));

  walk.lo.resize(rank);
  walk.hi.resize(rank);
  size_t outDim = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (walk.reduced[d]) {
      walk.globalCount *= input.shape[d];
      walk.lo[d] = input.lo[d];
      walk.hi[d] = input.hi[d];
      if (kind == Reduction::Max &&
          (input.lo[d] != 0 || input.hi[d] != input.shape[d]))
        return absl::InvalidArgumentError(op.kind + ": reduced dim " +
                                          std::to_string(d) +
                                          " must not be split");
      if (keepDims)
        ++outDim;
      continue;
    }
    walk.lo[d] = output.lo[outDim];
    walk.hi[d] = output.hi[outDim];
    ++outDim;
  }
  return {};
}

/// Accesses of the views from the walk, input-like ones (read at the walk's
/// points) first, then output-like ones (read through outputDims); an
/// error names the first view that does not hold what the walk reads.
inline absl::Status
reduceAccesses(const OpDesc &op, const ReduceWalk &walk,
               const std::vector<const TensorView *> &inputLike,
               const std::vector<const TensorView *> &outputLike,
               std::vector<StridedAccess> &accesses) {
  for (const TensorView *view : inputLike) {
    std::optional<StridedAccess> access =
        identityAccess(*view, walk.lo, walk.hi);
    if (!access)
      return absl::InvalidArgumentError(
          op.kind + ": the input view does not hold the output box's rows");
    accesses.push_back(*access);
  }
  for (const TensorView *view : outputLike) {
    std::optional<StridedAccess> access =
        stridedAccess(*view, walk.lo, walk.hi, walk.outputDims);
    if (!access)
      return absl::InvalidArgumentError(
          op.kind + ": the output view does not match the input view");
    accesses.push_back(*access);
  }
  return {};
}

} // namespace ppc::runtime

#endif // PPC_RUNTIME_COMMON_REDUCEWALK_H
