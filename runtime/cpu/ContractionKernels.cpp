//===- ContractionKernels.cpp - matmul and linear on boxes ----------------===//
//
// Local GEMMs on the boxes a partition holds (row-major; cpu::gemm). Their
// operands, results and result gradients may come as bf16 (readsBf16):
// bf16 products then run as bf16 GEMMs, into float32 results.
// The output box gives the batch, M and N ranges; the K range is the lhs's
// (input's) box along K and the rhs's (weight's) box along K must equal it.
// A split K makes the output a partial sum, so the bias of linear is added
// (and its gradient taken) only where K starts at 0.
//
//===----------------------------------------------------------------------===//

#include "KernelHelpers.h"
#include "KernelRegistry.h"

namespace ppc::runtime::cpu {

namespace {

/// True if `view` holds the box [lo, hi).
bool covers(const TensorView &view, const std::vector<int64_t> &lo,
            const std::vector<int64_t> &hi) {
  for (size_t d = 0; d < lo.size(); ++d)
    if (lo[d] < view.lo[d] || hi[d] > view.hi[d])
      return false;
  return true;
}

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

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
KernelStatus matMulRanges(const OpDesc &op, const MatrixOperand &lhs,
                          const MatrixOperand &rhs, const TensorView &result,
                          MatMulRanges &ranges) {
  int64_t rank = result.rank();
  if (rank < 2 || lhs.view->rank() < 2 || rhs.view->rank() < 2)
    return op.kind + ": operands and result must have rank >= 2";
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
    return op.kind + ": rhs box along K does not match the lhs box along K";
  if (ranges.batchLo.size() < static_cast<size_t>(lhs.rowDim) ||
      ranges.batchLo.size() < static_cast<size_t>(rhs.rowDim))
    return op.kind + ": an operand has more batch dims than the result";
  if (ranges.mHi <= ranges.mLo || ranges.nHi <= ranges.nLo)
    return "";
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
      return op.kind + ": " + what + " box does not hold the rows the " +
             "result box needs";
  }
  return "";
}

MatrixOperand lhsOperand(const OpDesc &op, const TensorView &view) {
  return {&view, op.getInt("transpose_lhs", 0) != 0, view.rank() - 2,
          view.rank() - 1};
}

MatrixOperand rhsOperand(const OpDesc &op, const TensorView &view) {
  return {&view, op.getInt("transpose_rhs", 0) != 0, view.rank() - 2,
          view.rank() - 1};
}

/// Offset in `data` (a view of `operand`'s box) of the stored matrix of
/// `operand` for result batch `batch`, at the partition's (row, col).
int64_t matrixOffset(const MatrixOperand &operand, const TensorView &data,
                     const std::vector<int64_t> &batch, int64_t row,
                     int64_t col) {
  if (operand.transposed)
    std::swap(row, col);
  return data.offsetOf(operand.indexOf(batch, row, col));
}

KernelStatus matMulForward(const OpDesc &op, const KernelContext &,
                           const std::vector<TensorView> &inputs,
                           std::vector<TensorView> &outputs,
                           std::vector<TensorView> &) {
  if (inputs.size() != 2 || outputs.size() != 1)
    return op.kind + ": expects 2 operands and 1 result";
  MatrixOperand lhs = lhsOperand(op, inputs[0]);
  MatrixOperand rhs = rhsOperand(op, inputs[1]);
  TensorView &result = outputs[0];
  MatMulRanges r;
  if (KernelStatus status = matMulRanges(op, lhs, rhs, result, r);
      !status.empty())
    return status;
  int64_t m = r.mHi - r.mLo, n = r.nHi - r.nLo, k = r.kHi - r.kLo;
  int64_t lda = lhs.view->extent(lhs.colDim);
  int64_t ldb = rhs.view->extent(rhs.colDim);
  forEachIndex(r.batchLo, r.batchHi, [&](const std::vector<int64_t> &batch) {
    std::vector<int64_t> at = batch;
    at.push_back(r.mLo);
    at.push_back(r.nLo);
    gemm(lhs.transposed, rhs.transposed, m, n, k,
         gemmOperand(inputs[0],
                     matrixOffset(lhs, inputs[0], batch, r.mLo, r.kLo)),
         lda,
         gemmOperand(inputs[1],
                     matrixOffset(rhs, inputs[1], batch, r.kLo, r.nLo)),
         ldb, /*accumulate=*/false, result.data + result.offsetOf(at), n);
  });
  return "";
}

KernelStatus matMulBackward(const OpDesc &op, const KernelContext &,
                            const std::vector<TensorView> &inputs,
                            const std::vector<TensorView> &outputs,
                            const std::vector<TensorView> &outputGrads,
                            std::vector<TensorView> &inputGrads,
                            std::vector<TensorView> &) {
  if (inputs.size() != 2 || inputGrads.size() != 2 || outputGrads.size() != 1)
    return op.kind + ": expects 2 operands and 1 result";
  MatrixOperand lhs = lhsOperand(op, inputs[0]);
  MatrixOperand rhs = rhsOperand(op, inputs[1]);
  if (KernelStatus status =
          checkGradBoxes(op, inputs, outputs, outputGrads, inputGrads);
      !status.empty())
    return status;
  const TensorView &dResult = outputGrads[0];
  MatMulRanges r;
  if (KernelStatus status = matMulRanges(op, lhs, rhs, dResult, r);
      !status.empty())
    return status;
  int64_t m = r.mHi - r.mLo, n = r.nHi - r.nLo, k = r.kHi - r.kLo;
  int64_t lda = lhs.view->extent(lhs.colDim);
  int64_t ldb = rhs.view->extent(rhs.colDim);
  bool transA = lhs.transposed, transB = rhs.transposed;
  // Broadcast batch dims map several result batches onto one operand
  // matrix, so every GEMM accumulates into the grad views.
  forEachIndex(r.batchLo, r.batchHi, [&](const std::vector<int64_t> &batch) {
    std::vector<int64_t> at = batch;
    at.push_back(r.mLo);
    at.push_back(r.nLo);
    GemmOperand dy = gemmOperand(dResult, dResult.offsetOf(at));
    GemmOperand a = gemmOperand(
        inputs[0], matrixOffset(lhs, inputs[0], batch, r.mLo, r.kLo));
    GemmOperand b = gemmOperand(
        inputs[1], matrixOffset(rhs, inputs[1], batch, r.kLo, r.nLo));
    if (inputGrads[0].data) {
      float *da = inputGrads[0].data +
                  matrixOffset(lhs, inputGrads[0], batch, r.mLo, r.kLo);
      if (!transA) // dA = dY op(B)^T
        gemm(false, !transB, m, k, n, dy, n, b, ldb, true, da, lda);
      else // dA^T = op(B) dY^T
        gemm(transB, true, k, m, n, b, ldb, dy, n, true, da, lda);
    }
    if (inputGrads[1].data) {
      float *db = inputGrads[1].data +
                  matrixOffset(rhs, inputGrads[1], batch, r.kLo, r.nLo);
      if (!transB) // dB = op(A)^T dY
        gemm(!transA, false, k, n, m, a, lda, dy, n, true, db, ldb);
      else // dB^T = dY^T op(A)
        gemm(true, transA, n, k, m, dy, n, a, lda, true, db, ldb);
    }
  });
  return "";
}

//===----------------------------------------------------------------------===//
// linear
//===----------------------------------------------------------------------===//

/// The ranges of one linear partition: `rows` is the product of the leading
/// (non-feature) extents, which input and result hold alike.
struct LinearRanges {
  int64_t rows, nLo, nHi, kLo, kHi;
  bool transposeWeight, addsBias;
  const TensorView *bias;
};

KernelStatus linearRanges(const OpDesc &op,
                          const std::vector<TensorView> &inputs,
                          const TensorView &result, LinearRanges &ranges) {
  if (inputs.size() < 2 || inputs.size() > 3)
    return op.kind + ": expects input, weight and an optional bias";
  const TensorView &input = inputs[0], &weight = inputs[1];
  int64_t rank = result.rank();
  if (input.rank() != rank || weight.rank() != 2 || rank < 1)
    return op.kind + ": input must have the result's rank and weight rank 2";
  ranges.rows = 1;
  for (int64_t d = 0; d + 1 < rank; ++d) {
    if (input.lo[d] != result.lo[d] || input.hi[d] != result.hi[d])
      return op.kind + ": input box does not match the result rows";
    ranges.rows *= result.extent(d);
  }
  ranges.nLo = result.lo[rank - 1];
  ranges.nHi = result.hi[rank - 1];
  ranges.kLo = input.lo[rank - 1];
  ranges.kHi = input.hi[rank - 1];
  ranges.transposeWeight = op.getInt("transpose_weight", 0) != 0;
  int64_t weightK = ranges.transposeWeight ? 1 : 0, weightN = 1 - weightK;
  if (weight.lo[weightK] != ranges.kLo || weight.hi[weightK] != ranges.kHi)
    return op.kind + ": weight box along K does not match the input box";
  if (weight.lo[weightN] > ranges.nLo || weight.hi[weightN] < ranges.nHi)
    return op.kind + ": weight box does not hold the result columns";
  ranges.bias = inputs.size() == 3 && (inputs[2].data || inputs[2].bf16)
                    ? &inputs[2]
                    : nullptr;
  if (ranges.bias &&
      (ranges.bias->lo[0] > ranges.nLo || ranges.bias->hi[0] < ranges.nHi))
    return op.kind + ": bias box does not hold the result columns";
  ranges.addsBias = ranges.bias && ranges.kLo == 0;
  return "";
}

/// Offset of weight element (k, n) in a view holding the weight's box.
int64_t weightOffset(const TensorView &weight, const LinearRanges &r) {
  std::vector<int64_t> index = r.transposeWeight
                                   ? std::vector<int64_t>{r.nLo, r.kLo}
                                   : std::vector<int64_t>{r.kLo, r.nLo};
  return weight.offsetOf(index);
}

KernelStatus linearForward(const OpDesc &op, const KernelContext &,
                           const std::vector<TensorView> &inputs,
                           std::vector<TensorView> &outputs,
                           std::vector<TensorView> &) {
  if (outputs.size() != 1)
    return op.kind + ": expects 1 result";
  TensorView &result = outputs[0];
  LinearRanges r;
  if (KernelStatus status = linearRanges(op, inputs, result, r);
      !status.empty())
    return status;
  int64_t n = r.nHi - r.nLo, k = r.kHi - r.kLo;
  gemm(false, r.transposeWeight, r.rows, n, k, gemmOperand(inputs[0]), k,
       gemmOperand(inputs[1], weightOffset(inputs[1], r)), inputs[1].extent(1),
       false, result.data, n);
  if (r.addsBias) {
    std::vector<float> scratch;
    const float *bias =
        floatsOf(gemmOperand(*r.bias, r.nLo - r.bias->lo[0]), n, scratch);
    for (int64_t row = 0; row < r.rows; ++row)
      for (int64_t j = 0; j < n; ++j)
        result.data[row * n + j] += bias[j];
  }
  return "";
}

KernelStatus linearBackward(const OpDesc &op, const KernelContext &,
                            const std::vector<TensorView> &inputs,
                            const std::vector<TensorView> &outputs,
                            const std::vector<TensorView> &outputGrads,
                            std::vector<TensorView> &inputGrads,
                            std::vector<TensorView> &) {
  if (outputGrads.size() != 1)
    return op.kind + ": expects 1 result grad";
  if (KernelStatus status =
          checkGradBoxes(op, inputs, outputs, outputGrads, inputGrads);
      !status.empty())
    return status;
  const TensorView &dResult = outputGrads[0];
  LinearRanges r;
  if (KernelStatus status = linearRanges(op, inputs, dResult, r);
      !status.empty())
    return status;
  int64_t n = r.nHi - r.nLo, k = r.kHi - r.kLo;
  int64_t ldw = inputs[1].extent(1);
  GemmOperand dy = gemmOperand(dResult), x = gemmOperand(inputs[0]);
  if (inputGrads[0].data) // dX = dY op(W)^T
    gemm(false, !r.transposeWeight, r.rows, k, n, dy, n,
         gemmOperand(inputs[1], weightOffset(inputs[1], r)), ldw, true,
         inputGrads[0].data, k);
  if (inputGrads[1].data) {
    float *dw = inputGrads[1].data + weightOffset(inputGrads[1], r);
    if (!r.transposeWeight) // dW = X^T dY
      gemm(true, false, k, n, r.rows, x, k, dy, n, true, dw, ldw);
    else // dW^T = dY^T X
      gemm(true, false, n, k, r.rows, dy, n, x, k, true, dw, ldw);
  }
  if (r.addsBias && inputGrads.size() == 3 && inputGrads[2].data) {
    float *dBias = inputGrads[2].data + (r.nLo - inputGrads[2].lo[0]);
    std::vector<float> scratch;
    const float *dyf = floatsOf(dy, r.rows * n, scratch);
    for (int64_t row = 0; row < r.rows; ++row)
      for (int64_t j = 0; j < n; ++j)
        dBias[j] += dyf[row * n + j];
  }
  return "";
}

} // namespace

void registerContractionKernels(KernelTable &table) {
  table["ppc.matmul"] = {matMulForward, matMulBackward, nullptr, 1, {}, true};
  table["ppc.linear"] = {linearForward, linearBackward, nullptr, 1, {}, true};
}

} // namespace ppc::runtime::cpu
