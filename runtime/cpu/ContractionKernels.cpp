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

#include "ContractionRanges.h"
#include "KernelHelpers.h"
#include "KernelRegistry.h"

namespace ppc::runtime::cpu {

namespace {

absl::Status matMulForward(const OpDesc &op, const KernelContext &,
                           const std::vector<TensorView> &inputs,
                           std::vector<TensorView> &outputs,
                           std::vector<TensorView> &) {
  if (inputs.size() != 2 || outputs.size() != 1)
    return absl::InvalidArgumentError(op.kind +
                                      ": expects 2 operands and 1 result");
  MatrixOperand lhs = lhsOperand(op, inputs[0]);
  MatrixOperand rhs = rhsOperand(op, inputs[1]);
  TensorView &result = outputs[0];
  MatMulRanges r;
  if (absl::Status status = matMulRanges(op, lhs, rhs, result, r); !status.ok())
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
  return absl::OkStatus();
}

absl::Status matMulBackward(const OpDesc &op, const KernelContext &,
                            const std::vector<TensorView> &inputs,
                            const std::vector<TensorView> &outputs,
                            const std::vector<TensorView> &outputGrads,
                            std::vector<TensorView> &inputGrads,
                            std::vector<TensorView> &) {
  if (inputs.size() != 2 || inputGrads.size() != 2 || outputGrads.size() != 1)
    return absl::InvalidArgumentError(op.kind +
                                      ": expects 2 operands and 1 result");
  MatrixOperand lhs = lhsOperand(op, inputs[0]);
  MatrixOperand rhs = rhsOperand(op, inputs[1]);
  if (absl::Status status =
          checkGradBoxes(op, inputs, outputs, outputGrads, inputGrads);
      !status.ok())
    return status;
  const TensorView &dResult = outputGrads[0];
  MatMulRanges r;
  if (absl::Status status = matMulRanges(op, lhs, rhs, dResult, r);
      !status.ok())
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
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// linear
//===----------------------------------------------------------------------===//

absl::Status linearForward(const OpDesc &op, const KernelContext &,
                           const std::vector<TensorView> &inputs,
                           std::vector<TensorView> &outputs,
                           std::vector<TensorView> &) {
  if (outputs.size() != 1)
    return absl::InvalidArgumentError(op.kind + ": expects 1 result");
  TensorView &result = outputs[0];
  LinearRanges r;
  if (absl::Status status = linearRanges(op, inputs, result, r); !status.ok())
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
  return absl::OkStatus();
}

absl::Status linearBackward(const OpDesc &op, const KernelContext &,
                            const std::vector<TensorView> &inputs,
                            const std::vector<TensorView> &outputs,
                            const std::vector<TensorView> &outputGrads,
                            std::vector<TensorView> &inputGrads,
                            std::vector<TensorView> &) {
  if (outputGrads.size() != 1)
    return absl::InvalidArgumentError(op.kind + ": expects 1 result grad");
  if (absl::Status status =
          checkGradBoxes(op, inputs, outputs, outputGrads, inputGrads);
      !status.ok())
    return status;
  const TensorView &dResult = outputGrads[0];
  LinearRanges r;
  if (absl::Status status = linearRanges(op, inputs, dResult, r); !status.ok())
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
  return absl::OkStatus();
}

} // namespace

void registerContractionKernels(KernelTable &table) {
  table["ppc.matmul"] = {matMulForward, matMulBackward, nullptr, 1, {}, true};
  table["ppc.linear"] = {linearForward, linearBackward, nullptr, 1, {}, true};
}

} // namespace ppc::runtime::cpu
