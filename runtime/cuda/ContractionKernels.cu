//===- ContractionKernels.cu - matmul and linear through cuBLAS -----------===//
//
// The cpu kernels' partitions (ContractionRanges.h: the output box gives the
// batch, M and N ranges, the lhs's box the K range; a split K makes the
// output a partial sum, so linear's bias is added, and its gradient taken,
// only where K starts at 0) as Library GEMMs: float32 operands as they are,
// bf16 operands (readsBf16) as bf16 GEMMs on tensor cores, and a bf16
// operand meeting a float32 one widened first. The innermost batch dim runs
// as one strided-batched GEMM; the other batch dims loop on the host. A
// backward whose operand is broadcast along that dim loops instead, since
// its batches sum into one gradient matrix.
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"
#include "Library.h"

#include "ContractionRanges.h"
#include "ppc/Runtime/Boxes.h"
#include "ppc/Runtime/DType.h"

namespace ppc::runtime::cuda {

namespace {

/// A GEMM operand at element `offset` of a kernel view, float32 or bf16.
GemmOperand operandAt(const KernelView &view, int64_t offset, int64_t ld,
                      bool transposed, int64_t batchStride) {
  GemmOperand g;
  g.bf16 = view.bf16 != nullptr;
  g.data = g.bf16 ? static_cast<const void *>(view.bf16 + offset)
                  : static_cast<const void *>(view.data + offset);
  g.ld = ld;
  g.transposed = transposed;
  g.batchStride = batchStride;
  return g;
}

/// `view` with its bf16 data widened to float32 in the workspace (float
/// views as they are); null data when out of memory.
KernelView asFloat(ExecContext &ctx, const KernelView &view) {
  if (!view.bf16)
    return view;
  KernelView wide = view;
  const int64_t n = view.count();
  float *data = ctx.workspace->floats(n);
  wide.bf16 = nullptr;
  wide.data = data;
  if (data) {
    const uint16_t *src = view.bf16;
    launch(ctx.stream, n,
           [=] PPC_HD(int64_t i) { data[i] = bfloat16ToFloat(src[i]); });
  }
  return wide;
}

/// The views of one GEMM's two operands in one type: both bf16 stay so,
/// otherwise both float32.
bool sameType(ExecContext &ctx, KernelView &a, KernelView &b) {
  if (a.bf16 && b.bf16)
    return true;
  a = asFloat(ctx, a);
  b = asFloat(ctx, b);
  return a.data && b.data;
}

/// C = op(A) op(B) (+ bias) into `batch` contiguous m x n bf16 matrices:
/// one cuBLASLt GEMM whose epilogue adds the bias and rounds, or where
/// cuBLASLt declines the layout, the float32 GEMM into a workspace block,
/// the bias and one rounding (the same values).
std::string gemmIntoBf16(ExecContext &ctx, int64_t m, int64_t n, int64_t k,
                         const GemmOperand &a, const GemmOperand &b,
                         const uint16_t *bias, uint16_t *c, int64_t batch) {
  if (ctx.library
          ->gemmToBf16(ctx.stream, m, n, k, a, b, bias, c, n, m * n, batch)
          .empty())
    return "";
  const int64_t count = m * n * batch;
  float *block = ctx.workspace->floats(count);
  if (!block)
    return "out of device memory for a float32 result";
  if (std::string error = ctx.library->gemm(ctx.stream, m, n, k, 1.0f, a, b,
                                            0.0f, block, n, m * n, batch);
      !error.empty())
    return error;
  launch(ctx.stream, count, [=] PPC_HD(int64_t i) {
    c[i] = floatToBFloat16(block[i] + (bias ? bfloat16ToFloat(bias[i % n])
                                            : 0.0f));
  });
  return "";
}

std::string outOfMemory(const OpDesc &op) {
  return op.kind + ": out of device memory for a widened operand";
}

/// Calls fn(batch, count) for the result batches of [lo, hi): each call
/// covers `count` consecutive values of the innermost batch dim from
/// `batch` on (all of them when `whole`, else one at a time).
template <typename Fn>
void forEachBatchRun(const std::vector<int64_t> &lo,
                     const std::vector<int64_t> &hi, bool whole, Fn &&fn) {
  if (boxVolume(lo, hi) == 0 && !lo.empty())
    return;
  if (lo.empty()) {
    fn(lo, int64_t(1));
    return;
  }
  std::vector<int64_t> index = lo;
  const size_t outer = whole ? lo.size() - 1 : lo.size();
  const int64_t count = whole ? hi.back() - lo.back() : 1;
  do
    fn(index, count);
  while (nextIndex(index, lo, hi, outer));
}

/// Elements between the matrices of consecutive innermost batches of an
/// operand whose partition corner is (row, col) (0 where it is broadcast
/// along that dim, or has no such dim).
int64_t innerBatchStride(const MatrixOperand &operand, const TensorView &view,
                         const MatMulRanges &r, int64_t row, int64_t col) {
  if (r.batchLo.empty() || r.batchHi.back() - r.batchLo.back() < 2)
    return 0;
  std::vector<int64_t> next = r.batchLo;
  next.back() += 1;
  return matrixOffset(operand, view, next, row, col) -
         matrixOffset(operand, view, r.batchLo, row, col);
}

/// `stride` when the matrices of every batch of [lo, hi) lie that many
/// elements apart in row-major batch order, where `offsetAt` gives a
/// batch's matrix offset (0 for a single batch); -1 when they do not.
template <typename OffsetAt>
int64_t uniformBatchStride(const std::vector<int64_t> &lo,
                           const std::vector<int64_t> &hi,
                           OffsetAt &&offsetAt) {
  const int64_t base = offsetAt(lo);
  int64_t stride = -1, inner = 1;
  for (size_t d = lo.size(); d-- > 0;) {
    const int64_t extent = hi[d] - lo[d];
    if (extent >= 2) {
      std::vector<int64_t> next = lo;
      next[d] += 1;
      const int64_t step = offsetAt(next) - base;
      if (stride < 0)
        stride = step / inner; // the first dim that moves sets it
      if (step != stride * inner)
        return -1;
    }
    inner *= extent;
  }
  return stride < 0 ? 0 : stride;
}

KernelStatus matMulForward(const OpDesc &op, const KernelContext &,
                           ExecContext &ctx,
                           const std::vector<KernelView> &inputs,
                           const std::vector<KernelView> &outputs,
                           const std::vector<KernelView> &) {
  if (inputs.size() != 2 || outputs.size() != 1)
    return op.kind + ": expects 2 operands and 1 result";
  KernelView a = inputs[0], b = inputs[1];
  if (!sameType(ctx, a, b))
    return outOfMemory(op);
  MatrixOperand lhs = lhsOperand(op, a), rhs = rhsOperand(op, b);
  const KernelView &result = outputs[0];
  MatMulRanges r;
  if (KernelStatus status = matMulRanges(op, lhs, rhs, result, r);
      !status.empty())
    return status;
  const int64_t m = r.mHi - r.mLo, n = r.nHi - r.nLo, k = r.kHi - r.kLo;
  const int64_t lda = a.extent(lhs.colDim), ldb = b.extent(rhs.colDim);
  // Batch dims that lie evenly apart in every operand and the result (no
  // broadcast along an outer dim alone) run as one strided-batched GEMM,
  // else one per outer batch: [8, 12] attention heads, one call.
  int64_t strideA = uniformBatchStride(
      r.batchLo, r.batchHi, [&](const std::vector<int64_t> &at) {
        return matrixOffset(lhs, a, at, r.mLo, r.kLo);
      });
  int64_t strideB = uniformBatchStride(
      r.batchLo, r.batchHi, [&](const std::vector<int64_t> &at) {
        return matrixOffset(rhs, b, at, r.kLo, r.nLo);
      });
  const int64_t strideC =
      uniformBatchStride(r.batchLo, r.batchHi, [&](std::vector<int64_t> at) {
        at.push_back(r.mLo);
        at.push_back(r.nLo);
        return result.offsetOf(at);
      });
  const bool whole = boxVolume(r.batchLo, r.batchHi) > 1 && strideA >= 0 &&
                     strideB >= 0 && strideC == m * n;
  if (!whole) {
    strideA = innerBatchStride(lhs, a, r, r.mLo, r.kLo);
    strideB = innerBatchStride(rhs, b, r, r.kLo, r.nLo);
  }
  std::string error;
  auto run = [&](const std::vector<int64_t> &batch, int64_t count) {
    if (!error.empty())
      return;
    std::vector<int64_t> at = batch;
    at.push_back(r.mLo);
    at.push_back(r.nLo);
    const GemmOperand ga =
        operandAt(a, matrixOffset(lhs, a, batch, r.mLo, r.kLo), lda,
                  lhs.transposed, strideA);
    const GemmOperand gb =
        operandAt(b, matrixOffset(rhs, b, batch, r.kLo, r.nLo), ldb,
                  rhs.transposed, strideB);
    error = result.bf16Result
                ? gemmIntoBf16(ctx, m, n, k, ga, gb, nullptr,
                               result.bf16Result + result.offsetOf(at), count)
                : ctx.library->gemm(ctx.stream, m, n, k, 1.0f, ga, gb, 0.0f,
                                    result.data + result.offsetOf(at), n, m * n,
                                    count);
  };
  if (whole)
    run(r.batchLo, boxVolume(r.batchLo, r.batchHi));
  else
    forEachBatchRun(r.batchLo, r.batchHi, true, run);
  return error.empty() ? "" : op.kind + ": " + error;
}

KernelStatus matMulBackward(const OpDesc &op, const KernelContext &,
                            ExecContext &ctx,
                            const std::vector<KernelView> &inputs,
                            const std::vector<KernelView> &,
                            const std::vector<KernelView> &outputGrads,
                            const std::vector<KernelView> &inputGrads,
                            const std::vector<KernelView> &) {
  if (inputs.size() != 2 || inputGrads.size() != 2 || outputGrads.size() != 1)
    return op.kind + ": expects 2 operands and 1 result";
  for (size_t i = 0; i < 2; ++i)
    if (inputGrads[i].present() &&
        (inputGrads[i].lo != inputs[i].lo || inputGrads[i].hi != inputs[i].hi))
      return op.kind + ": operand grad box differs from the operand box";
  KernelView a = inputs[0], b = inputs[1], dy = outputGrads[0];
  // Every GEMM below pairs dY with one operand.
  if (!(a.bf16 && b.bf16 && dy.bf16)) {
    a = asFloat(ctx, a);
    b = asFloat(ctx, b);
    dy = asFloat(ctx, dy);
    if (!a.data || !b.data || !dy.data)
      return outOfMemory(op);
  }
  MatrixOperand lhs = lhsOperand(op, a), rhs = rhsOperand(op, b);
  MatMulRanges r;
  if (KernelStatus status = matMulRanges(op, lhs, rhs, dy, r); !status.empty())
    return status;
  const int64_t m = r.mHi - r.mLo, n = r.nHi - r.nLo, k = r.kHi - r.kLo;
  const int64_t lda = a.extent(lhs.colDim), ldb = b.extent(rhs.colDim);
  const bool transA = lhs.transposed, transB = rhs.transposed;
  std::string error;
  // Broadcast batch dims map several result batches onto one operand
  // matrix, so every GEMM accumulates (beta 1), one batch at a time.
  forEachBatchRun(
      r.batchLo, r.batchHi, false,
      [&](const std::vector<int64_t> &batch, int64_t) {
        if (!error.empty())
          return;
        std::vector<int64_t> at = batch;
        at.push_back(r.mLo);
        at.push_back(r.nLo);
        const GemmOperand gy = operandAt(dy, dy.offsetOf(at), n, false, 0);
        const int64_t offsetA = matrixOffset(lhs, a, batch, r.mLo, r.kLo);
        const int64_t offsetB = matrixOffset(rhs, b, batch, r.kLo, r.nLo);
        if (inputGrads[0].data) {
          float *da = inputGrads[0].data +
                      matrixOffset(lhs, inputGrads[0], batch, r.mLo, r.kLo);
          GemmOperand gb = operandAt(b, offsetB, ldb, !transB, 0);
          if (!transA) // dA = dY op(B)^T
            error = ctx.library->gemm(ctx.stream, m, k, n, 1.0f, gy, gb, 1.0f,
                                      da, lda, 0, 1);
          else { // dA^T = op(B) dY^T
            GemmOperand b2 = operandAt(b, offsetB, ldb, transB, 0);
            GemmOperand y2 = gy;
            y2.transposed = true;
            error = ctx.library->gemm(ctx.stream, k, m, n, 1.0f, b2, y2, 1.0f,
                                      da, lda, 0, 1);
          }
        }
        if (error.empty() && inputGrads[1].data) {
          float *db = inputGrads[1].data +
                      matrixOffset(rhs, inputGrads[1], batch, r.kLo, r.nLo);
          if (!transB) // dB = op(A)^T dY
            error = ctx.library->gemm(ctx.stream, k, n, m, 1.0f,
                                      operandAt(a, offsetA, lda, !transA, 0),
                                      gy, 1.0f, db, ldb, 0, 1);
          else { // dB^T = dY^T op(A)
            GemmOperand y2 = gy;
            y2.transposed = true;
            error = ctx.library->gemm(ctx.stream, n, k, m, 1.0f, y2,
                                      operandAt(a, offsetA, lda, transA, 0),
                                      1.0f, db, ldb, 0, 1);
          }
        }
      });
  return error.empty() ? "" : op.kind + ": " + error;
}

/// out[row * n + j] += bias[j] for every row.
void addBias(Stream stream, float *out, const float *bias, int64_t rows,
             int64_t n) {
  launch(stream, rows * n, [=] PPC_HD(int64_t i) { out[i] += bias[i % n]; });
}

/// dBias[j] += sum over rows of dY[row * n + j].
void sumColumns(Stream stream, float *dBias, const float *dy, int64_t rows,
                int64_t n) {
  launch(stream, n, [=] PPC_HD(int64_t j) {
    float sum = 0;
    for (int64_t row = 0; row < rows; ++row)
      sum += dy[row * n + j];
    dBias[j] += sum;
  });
}

KernelStatus linearForward(const OpDesc &op, const KernelContext &,
                           ExecContext &ctx,
                           const std::vector<KernelView> &inputs,
                           const std::vector<KernelView> &outputs,
                           const std::vector<KernelView> &) {
  if (outputs.size() != 1)
    return op.kind + ": expects 1 result";
  if (inputs.size() < 2 || inputs.size() > 3)
    return op.kind + ": expects input, weight and an optional bias";
  std::vector<TensorView> hostViews(inputs.begin(), inputs.end());
  const KernelView &result = outputs[0];
  LinearRanges r;
  if (KernelStatus status = linearRanges(op, hostViews, result, r);
      !status.empty())
    return status;
  KernelView x = inputs[0], w = inputs[1];
  if (!sameType(ctx, x, w))
    return outOfMemory(op);
  const int64_t n = r.nHi - r.nLo, k = r.kHi - r.kLo;
  const GemmOperand gx = operandAt(x, 0, k, false, 0);
  const GemmOperand gw =
      operandAt(w, weightOffset(w, r), w.extent(1), r.transposeWeight, 0);
  if (result.bf16Result) {
    const uint16_t *bias =
        r.addsBias ? inputs[2].bf16 + (r.nLo - inputs[2].lo[0]) : nullptr;
    std::string error =
        gemmIntoBf16(ctx, r.rows, n, k, gx, gw, bias, result.bf16Result, 1);
    return error.empty() ? "" : op.kind + ": " + error;
  }
  std::string error = ctx.library->gemm(ctx.stream, r.rows, n, k, 1.0f, gx, gw,
                                        0.0f, result.data, n, 0, 1);
  if (!error.empty())
    return op.kind + ": " + error;
  if (r.addsBias) {
    KernelView bias = asFloat(ctx, inputs[2]);
    if (!bias.data)
      return outOfMemory(op);
    addBias(ctx.stream, result.data, bias.data + (r.nLo - bias.lo[0]), r.rows,
            n);
  }
  return "";
}

KernelStatus linearBackward(const OpDesc &op, const KernelContext &,
                            ExecContext &ctx,
                            const std::vector<KernelView> &inputs,
                            const std::vector<KernelView> &,
                            const std::vector<KernelView> &outputGrads,
                            const std::vector<KernelView> &inputGrads,
                            const std::vector<KernelView> &) {
  if (outputGrads.size() != 1)
    return op.kind + ": expects 1 result grad";
  if (inputs.size() < 2 || inputs.size() > 3)
    return op.kind + ": expects input, weight and an optional bias";
  if (inputGrads.size() != inputs.size())
    return op.kind + ": expects one grad per result and per operand";
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputGrads[i].present() &&
        (inputGrads[i].lo != inputs[i].lo || inputGrads[i].hi != inputs[i].hi))
      return op.kind + ": operand grad box differs from the operand box";
  std::vector<TensorView> hostViews(inputs.begin(), inputs.end());
  LinearRanges r;
  if (KernelStatus status = linearRanges(op, hostViews, outputGrads[0], r);
      !status.empty())
    return status;
  KernelView x = inputs[0], w = inputs[1], dy = outputGrads[0];
  if (!(x.bf16 && w.bf16 && dy.bf16)) {
    x = asFloat(ctx, x);
    w = asFloat(ctx, w);
    dy = asFloat(ctx, dy);
    if (!x.data || !w.data || !dy.data)
      return outOfMemory(op);
  }
  const int64_t n = r.nHi - r.nLo, k = r.kHi - r.kLo;
  const int64_t ldw = w.extent(1);
  const GemmOperand gy = operandAt(dy, 0, n, false, 0);
  std::string error;
  if (inputGrads[0].data) // dX = dY op(W)^T
    error = ctx.library->gemm(
        ctx.stream, r.rows, k, n, 1.0f, gy,
        operandAt(w, weightOffset(w, r), ldw, !r.transposeWeight, 0), 1.0f,
        inputGrads[0].data, k, 0, 1);
  if (error.empty() && inputGrads[1].data) {
    float *dw = inputGrads[1].data + weightOffset(inputGrads[1], r);
    const GemmOperand xt = operandAt(x, 0, k, true, 0);
    GemmOperand yt = gy;
    yt.transposed = true;
    if (!r.transposeWeight) // dW = X^T dY
      error = ctx.library->gemm(ctx.stream, k, n, r.rows, 1.0f, xt, gy, 1.0f,
                                dw, ldw, 0, 1);
    else // dW^T = dY^T X
      error =
          ctx.library->gemm(ctx.stream, n, k, r.rows, 1.0f, yt,
                            operandAt(x, 0, k, false, 0), 1.0f, dw, ldw, 0, 1);
  }
  if (!error.empty())
    return op.kind + ": " + error;
  if (r.addsBias && inputGrads.size() == 3 && inputGrads[2].data) {
    KernelView dyf = asFloat(ctx, dy);
    if (!dyf.data)
      return outOfMemory(op);
    sumColumns(ctx.stream, inputGrads[2].data + (r.nLo - inputGrads[2].lo[0]),
               dyf.data, r.rows, n);
  }
  return "";
}

} // namespace

void registerContractionKernels(CudaKernelTable &table) {
  table["ppc.matmul"] = {matMulForward, matMulBackward};
  table["ppc.linear"] = {linearForward, linearBackward};
}

} // namespace ppc::runtime::cuda
