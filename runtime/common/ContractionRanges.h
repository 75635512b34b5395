//===- ContractionRanges.h - a matmul or linear partition -------*- C++ -*-===//
//
// Private to the backends (runtime/cpu, runtime/cuda), shared by their
// matmul and linear kernels: which batch, M, N and K ranges a partition's
// views give, checked against what the views hold (the same errors on
// every backend), and where the partition's corner of each stored matrix
// lies in its view. The output box gives the batch, M and N ranges; the K
// range is the lhs's (input's) box along K, and the rhs's (weight's) box
// along K must equal it.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_COMMON_CONTRACTIONRANGES_H
#define PPC_RUNTIME_COMMON_CONTRACTIONRANGES_H

#include "ppc/Runtime/Kernels.h"

#include <tuple>
#include <utility>
#include <vector>

namespace ppc::runtime {

/// True if `view` holds the box [lo, hi).
inline bool covers(const TensorView &view, const std::vector<int64_t> &lo,
                   const std::vector<int64_t> &hi) {
  for (size_t d = 0; d < lo.size(); ++d)
    if (lo[d] < view.lo[d] || hi[d] > view.hi[d])
      return false;
  return true;
}

/// One operand of a matmul: which of its dims are rows/cols of the stored
/// matrix and how its batch dims follow the result's.
struct MatrixOperand {
  const TensorView *view;
  bool transposed;
  int64_t rowDim, colDim;

  /// Global index of element (row, col) of the matrix of result batch
  /// `batch` (broadcast batch dims of size 1 read index 0).
  std::vector<int64_t> indexOf(const std::vector<int64_t> &batch, int64_t row,
                               int64_t col) const {
    int64_t lead = static_cast<int64_t>(batch.size()) - rowDim;
    std::vector<int64_t> index(view->rank());
    for (int64_t d = 0; d < rowDim; ++d)
      index[d] = view->shape[d] == 1 ? 0 : batch[lead + d];
    index[rowDim] = row;
    index[colDim] = col;
    return index;
  }
};

/// The ranges of one matmul partition, checked against the views.
struct MatMulRanges {
  std::vector<int64_t> batchLo, batchHi;
  int64_t mLo, mHi, nLo, nHi, kLo, kHi;
};

/// Checks that the lhs, rhs (and, if given, their grad views) hold what the
/// output box needs; fills `ranges`.
inline absl::Status matMulRanges(const OpDesc &op, const MatrixOperand &lhs,
                                 const MatrixOperand &rhs,
                                 const TensorView &result,
                                 MatMulRanges &ranges) {
  int64_t rank = result.rank();
  if (rank < 2 || lhs.view->rank() < 2 || rhs.view->rank() < 2)
    return absl::InvalidArgumentError(
        op.kind + ": operands and result must have rank >= 2");
  ranges.batchLo.assign(result.lo.begin(), result.lo.end() - 2);
  ranges.batchHi.assign(result.hi.begin(), result.hi.end() - 2);
  ranges.mLo = result.lo[rank - 2];
  ranges.mHi = result.hi[rank - 2];
  ranges.nLo = result.lo[rank - 1];
  ranges.nHi = result.hi[rank - 1];
  int64_t lhsK = lhs.transposed ? lhs.rowDim : lhs.colDim;
  int64_t rhsK = rhs.transposed ? rhs.colDim : rhs.rowDim;
  ranges.kLo = lhs.view->lo[lhsK];
  ranges.kHi = lhs.view->hi[lhsK];
  if (rhs.view->lo[rhsK] != ranges.kLo || rhs.view->hi[rhsK] != ranges.kHi)
    return absl::InvalidArgumentError(
        op.kind + ": rhs box along K does not match the lhs box along K");
  if (ranges.batchLo.size() < static_cast<size_t>(lhs.rowDim) ||
      ranges.batchLo.size() < static_cast<size_t>(rhs.rowDim))
    return absl::InvalidArgumentError(
        op.kind + ": an operand has more batch dims than the result");
  if (ranges.mHi <= ranges.mLo || ranges.nHi <= ranges.nLo)
    return absl::OkStatus();
  for (auto [operand, rowLo, rowHi, colLo, colHi, what] :
       {std::tuple{&lhs, ranges.mLo, ranges.mHi, ranges.kLo, ranges.kHi, "lhs"},
        std::tuple{&rhs, ranges.kLo, ranges.kHi, ranges.nLo, ranges.nHi,
                   "rhs"}}) {
    if (operand->transposed) {
      std::swap(rowLo, colLo);
      std::swap(rowHi, colHi);
    }
    std::vector<int64_t> lo = operand->indexOf(ranges.batchLo, rowLo, colLo);
    std::vector<int64_t> hi = operand->indexOf(ranges.batchHi, rowHi, colHi);
    for (int64_t d = 0; d < operand->rowDim; ++d)
      if (operand->view->shape[d] == 1)
        hi[d] = 1;
    if (!covers(*operand->view, lo, hi))
      return absl::InvalidArgumentError(op.kind + ": " + what +
                                        " box does not hold the rows the " +
                                        "result box needs");
  }
  return absl::OkStatus();
}

inline MatrixOperand lhsOperand(const OpDesc &op, const TensorView &view) {
  return {&view, op.getInt("transpose_lhs", 0) != 0, view.rank() - 2,
          view.rank() - 1};
}

inline MatrixOperand rhsOperand(const OpDesc &op, const TensorView &view) {
  return {&view, op.getInt("transpose_rhs", 0) != 0, view.rank() - 2,
          view.rank() - 1};
}

/// Offset in `data` (a view of `operand`'s box) of the stored matrix of
/// `operand` for result batch `batch`, at the partition's (row, col).
inline int64_t matrixOffset(const MatrixOperand &operand,
                            const TensorView &data,
                            const std::vector<int64_t> &batch, int64_t row,
                            int64_t col) {
  if (operand.transposed)
    std::swap(row, col);
  return data.offsetOf(operand.indexOf(batch, row, col));
}

/// The ranges of one linear partition: `rows` is the product of the leading
/// (non-feature) extents, which input and result hold alike.
struct LinearRanges {
  int64_t rows, nLo, nHi, kLo, kHi;
  bool transposeWeight, addsBias;
  const TensorView *bias;
};

inline absl::Status linearRanges(const OpDesc &op,
                                 const std::vector<TensorView> &inputs,
                                 const TensorView &result,
                                 LinearRanges &ranges) {
  if (inputs.size() < 2 || inputs.size() > 3)
    return absl::InvalidArgumentError(
        op.kind + ": expects input, weight and an optional bias");
  const TensorView &input = inputs[0], &weight = inputs[1];
  int64_t rank = result.rank();
  if (input.rank() != rank || weight.rank() != 2 || rank < 1)
    return absl::InvalidArgumentError(
        op.kind + ": input must have the result's rank and weight rank 2");
  ranges.rows = 1;
  for (int64_t d = 0; d + 1 < rank; ++d) {
    if (input.lo[d] != result.lo[d] || input.hi[d] != result.hi[d])
      return absl::InvalidArgumentError(
          op.kind + ": input box does not match the result rows");
    ranges.rows *= result.extent(d);
  }
  ranges.nLo = result.lo[rank - 1];
  ranges.nHi = result.hi[rank - 1];
  ranges.kLo = input.lo[rank - 1];
  ranges.kHi = input.hi[rank - 1];
  ranges.transposeWeight = op.getInt("transpose_weight", 0) != 0;
  int64_t weightK = ranges.transposeWeight ? 1 : 0, weightN = 1 - weightK;
  if (weight.lo[weightK] != ranges.kLo || weight.hi[weightK] != ranges.kHi)
    return absl::InvalidArgumentError(
        op.kind + ": weight box along K does not match the input box");
  if (weight.lo[weightN] > ranges.nLo || weight.hi[weightN] < ranges.nHi)
    return absl::InvalidArgumentError(
        op.kind + ": weight box does not hold the result columns");
  ranges.bias =
      inputs.size() == 3 && inputs[2].present() ? &inputs[2] : nullptr;
  if (ranges.bias &&
      (ranges.bias->lo[0] > ranges.nLo || ranges.bias->hi[0] < ranges.nHi))
    return absl::InvalidArgumentError(
        op.kind + ": bias box does not hold the result columns");
  ranges.addsBias = ranges.bias && ranges.kLo == 0;
  return absl::OkStatus();
}

/// Offset of weight element (k, n) in a view holding the weight's box.
inline int64_t weightOffset(const TensorView &weight, const LinearRanges &r) {
  std::vector<int64_t> index = r.transposeWeight
                                   ? std::vector<int64_t>{r.nLo, r.kLo}
                                   : std::vector<int64_t>{r.kLo, r.nLo};
  return weight.offsetOf(index);
}

} // namespace ppc::runtime

#endif // PPC_RUNTIME_COMMON_CONTRACTIONRANGES_H
