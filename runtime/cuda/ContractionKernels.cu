//===- ContractionKernels.cu - matmul and linear through cuBLAS -----------===//
//
// The cpu kernels' partitions (ContractionRanges.h: the output box gives the
// batch, M and N ranges, the lhs's box the K range; a split K makes the
// output a partial sum, so linear's bias is added, and its gradient taken,
// only where K starts at 0) as Library GEMMs on the views as stored: two
// operands of one type multiply as they are (16-bit ones on tensor cores),
// and the GEMM writes its result, or adds into a gradient (beta 1), in the
// result's own type, rounding once from the float32 accumulation; operands
// of two types are widened to float32 first. Batch dims whose matrices lie
// evenly apart in every operand run as one strided-batched GEMM, forward
// and backward; a backward whose operand is broadcast along a batch dim
// (several batches summing into one gradient matrix) runs one batch at a
// time. A bf16 linear with a bias writes its result through cuBLASLt's bias
// epilogue; the bias gradient is a column sum of dY in two levels
// (Reductions.h).
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"
#include "Library.h"
#include "Reductions.h"

#include "ContractionRanges.h"
#include "ppc/Runtime/Boxes.h"
#include "ppc/Runtime/DType.h"

#include <set>

namespace ppc::runtime::cuda {

namespace {

/// The views of GEMMs in one operand type: all of one 16-bit or float32
/// type stay so, otherwise all float32. False when out of memory.
bool sameType(ExecContext &ctx, std::initializer_list<KernelView *> views) {
  const DType type = (*views.begin())->elements.type;
  bool same = type != DType::I64;
  for (KernelView *v : views)
    same &= v->elements.type == type;
  if (same)
    return true;
  for (KernelView *v : views) {
    *v = widenedToFloat(ctx, *v);
    if (!v->elements)
      return false;
  }
  return true;
}

absl::Status outOfMemory(const OpDesc &op) {
  return absl::ResourceExhaustedError(
      op.kind + ": out of device memory for a widened operand");
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

/// The result's offset at batch `batch`, row mLo, column nLo.
int64_t resultOffset(const TensorView &result, const MatMulRanges &r,
                     std::vector<int64_t> at) {
  at.push_back(r.mLo);
  at.push_back(r.nLo);
  return result.offsetOf(at);
}

absl::Status matMulForward(const OpDesc &op, const KernelContext &,
                           ExecContext &ctx,
                           const std::vector<KernelView> &inputs,
                           const std::vector<KernelView> &outputs,
                           const std::vector<KernelView> &) {
  if (inputs.size() != 2 || outputs.size() != 1)
    return absl::InvalidArgumentError(op.kind +
                                      ": expects 2 operands and 1 result");
  KernelView a = inputs[0], b = inputs[1];
  if (!sameType(ctx, {&a, &b}))
    return outOfMemory(op);
  MatrixOperand lhs = lhsOperand(op, a), rhs = rhsOperand(op, b);
  const KernelView &result = outputs[0];
  MatMulRanges r;
  if (absl::Status status = matMulRanges(op, lhs, rhs, result, r); !status.ok())
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
  const int64_t strideC = uniformBatchStride(
      r.batchLo, r.batchHi, [&](const std::vector<int64_t> &at) {
        return resultOffset(result, r, at);
      });
  const bool whole = boxVolume(r.batchLo, r.batchHi) > 1 && strideA >= 0 &&
                     strideB >= 0 && strideC == m * n;
  if (!whole) {
    strideA = innerBatchStride(lhs, a, r, r.mLo, r.kLo);
    strideB = innerBatchStride(rhs, b, r, r.kLo, r.nLo);
  }
  absl::Status error;
  auto run = [&](const std::vector<int64_t> &batch, int64_t count) {
    if (!error.ok())
      return;
    error = gemmInto(
        ctx, m, n, k, 1.0f,
        gemmOperand(a, matrixOffset(lhs, a, batch, r.mLo, r.kLo), lda,
                    lhs.transposed, strideA),
        gemmOperand(b, matrixOffset(rhs, b, batch, r.kLo, r.nLo), ldb,
                    rhs.transposed, strideB),
        0.0f, gemmResult(result, resultOffset(result, r, batch), n, m * n),
        count);
  };
  if (whole)
    run(r.batchLo, boxVolume(r.batchLo, r.batchHi));
  else
    forEachBatchRun(r.batchLo, r.batchHi, true, run);
  return annotate(error, op.kind);
}

absl::Status matMulBackward(const OpDesc &op, const KernelContext &,
                            ExecContext &ctx,
                            const std::vector<KernelView> &inputs,
                            const std::vector<KernelView> &,
                            const std::vector<KernelView> &outputGrads,
                            const std::vector<KernelView> &inputGrads,
                            const std::vector<KernelView> &) {
  if (inputs.size() != 2 || inputGrads.size() != 2 || outputGrads.size() != 1)
    return absl::InvalidArgumentError(op.kind +
                                      ": expects 2 operands and 1 result");
  for (size_t i = 0; i < 2; ++i)
    if (inputGrads[i].present() &&
        (inputGrads[i].lo != inputs[i].lo || inputGrads[i].hi != inputs[i].hi))
      return absl::InvalidArgumentError(
          op.kind + ": operand grad box differs from the operand box");
  // Every GEMM below pairs dY with one operand.
  KernelView a = inputs[0], b = inputs[1], dy = outputGrads[0];
  if (!sameType(ctx, {&a, &b, &dy}))
    return outOfMemory(op);
  const KernelView &dA = inputGrads[0], &dB = inputGrads[1];
  MatrixOperand lhs = lhsOperand(op, a), rhs = rhsOperand(op, b);
  MatrixOperand lhsGrad = lhsOperand(op, dA), rhsGrad = rhsOperand(op, dB);
  MatMulRanges r;
  if (absl::Status status = matMulRanges(op, lhs, rhs, dy, r); !status.ok())
    return status;
  const int64_t m = r.mHi - r.mLo, n = r.nHi - r.nLo, k = r.kHi - r.kLo;
  const int64_t lda = a.extent(lhs.colDim), ldb = b.extent(rhs.colDim);
  const bool transA = lhs.transposed, transB = rhs.transposed;
  auto strideOf = [&](auto offsetAt) {
    return uniformBatchStride(r.batchLo, r.batchHi, offsetAt);
  };
  // One strided batch where every matrix lies evenly apart and no
  // gradient matrix is shared by two batches (a broadcast operand's is:
  // those batches sum into it one at a time, with beta 1).
  const int64_t batches = boxVolume(r.batchLo, r.batchHi);
  const int64_t strideY = strideOf(
      [&](const std::vector<int64_t> &at) { return resultOffset(dy, r, at); });
  const int64_t strideA = strideOf([&](const std::vector<int64_t> &at) {
    return matrixOffset(lhs, a, at, r.mLo, r.kLo);
  });
  const int64_t strideB = strideOf([&](const std::vector<int64_t> &at) {
    return matrixOffset(rhs, b, at, r.kLo, r.nLo);
  });
  const int64_t strideDA =
      dA.present() ? strideOf([&](const std::vector<int64_t> &at) {
        return matrixOffset(lhsGrad, dA, at, r.mLo, r.kLo);
      })
                   : 1;
  const int64_t strideDB =
      dB.present() ? strideOf([&](const std::vector<int64_t> &at) {
        return matrixOffset(rhsGrad, dB, at, r.kLo, r.nLo);
      })
                   : 1;
  const bool batched = batches > 1 && strideY >= 0 && strideA >= 0 &&
                       strideB >= 0 && strideDA > 0 && strideDB > 0;
  // A gradient the kernel overwrites: the first GEMM into each of its
  // matrices writes (beta 0), where those matrices fill its view.
  std::set<int64_t> matricesA, matricesB;
  forEachBatchRun(
      r.batchLo, r.batchHi, false,
      [&](const std::vector<int64_t> &batch, int64_t) {
        if (dA.present())
          matricesA.insert(matrixOffset(lhsGrad, dA, batch, r.mLo, r.kLo));
        if (dB.present())
          matricesB.insert(matrixOffset(rhsGrad, dB, batch, r.kLo, r.nLo));
      });
  const bool setA = writesGradient(
      ctx, dA, static_cast<int64_t>(matricesA.size()) * m * k == dA.count());
  const bool setB = writesGradient(
      ctx, dB, static_cast<int64_t>(matricesB.size()) * k * n == dB.count());
  std::set<int64_t> writtenA, writtenB;
  absl::Status error;
  // The GEMMs of `count` batches from `batch` on, `strided`: one call.
  auto gemms = [&](const std::vector<int64_t> &batch, int64_t count,
                   bool strided) {
    if (!error.ok())
      return;
    const int64_t sY = strided ? strideY : 0, sA = strided ? strideA : 0,
                  sB = strided ? strideB : 0, sDA = strided ? strideDA : 0,
                  sDB = strided ? strideDB : 0;
    const GemmOperand gy =
        gemmOperand(dy, resultOffset(dy, r, batch), n, false, sY);
    GemmOperand yt = gy;
    yt.transposed = true;
    const int64_t offsetA = matrixOffset(lhs, a, batch, r.mLo, r.kLo);
    const int64_t offsetB = matrixOffset(rhs, b, batch, r.kLo, r.nLo);
    if (dA.present()) {
      const int64_t at = matrixOffset(lhsGrad, dA, batch, r.mLo, r.kLo);
      const GemmResult da = gemmResult(dA, at, lda, sDA);
      const float beta = setA && writtenA.insert(at).second ? 0.0f : 1.0f;
      if (!transA) // dA = dY op(B)^T
        error = gemmInto(ctx, m, k, n, 1.0f, gy,
                         gemmOperand(b, offsetB, ldb, !transB, sB), beta, da,
                         count);
      else // dA^T = op(B) dY^T
        error = gemmInto(ctx, k, m, n, 1.0f,
                         gemmOperand(b, offsetB, ldb, transB, sB), yt, beta, da,
                         count);
    }
    if (error.ok() && dB.present()) {
      const int64_t at = matrixOffset(rhsGrad, dB, batch, r.kLo, r.nLo);
      const GemmResult db = gemmResult(dB, at, ldb, sDB);
      const float beta = setB && writtenB.insert(at).second ? 0.0f : 1.0f;
      if (!transB) // dB = op(A)^T dY
        error = gemmInto(ctx, k, n, m, 1.0f,
                         gemmOperand(a, offsetA, lda, !transA, sA), gy, beta,
                         db, count);
      else // dB^T = dY^T op(A)
        error =
            gemmInto(ctx, n, k, m, 1.0f, yt,
                     gemmOperand(a, offsetA, lda, transA, sA), beta, db, count);
    }
  };
  if (batched)
    gemms(r.batchLo, batches, true);
  else
    forEachBatchRun(r.batchLo, r.batchHi, false,
                    [&](const std::vector<int64_t> &batch, int64_t) {
                      gemms(batch, 1, false);
                    });
  return annotate(error, op.kind);
}

/// out[row * n + j] += bias[j] for every row.
void addBias(Stream stream, Elements out, Elements bias, int64_t rows,
             int64_t n) {
  launch(stream, rows * n, [=] PPC_HD(int64_t i) { out[i] += bias[i % n]; });
}

absl::Status linearForward(const OpDesc &op, const KernelContext &,
                           ExecContext &ctx,
                           const std::vector<KernelView> &inputs,
                           const std::vector<KernelView> &outputs,
                           const std::vector<KernelView> &) {
  if (outputs.size() != 1)
    return absl::InvalidArgumentError(op.kind + ": expects 1 result");
  if (inputs.size() < 2 || inputs.size() > 3)
    return absl::InvalidArgumentError(
        op.kind + ": expects input, weight and an optional bias");
  std::vector<TensorView> hostViews(inputs.begin(), inputs.end());
  const KernelView &result = outputs[0];
  LinearRanges r;
  if (absl::Status status = linearRanges(op, hostViews, result, r);
      !status.ok())
    return status;
  KernelView x = inputs[0], w = inputs[1];
  if (!sameType(ctx, {&x, &w}))
    return outOfMemory(op);
  const int64_t n = r.nHi - r.nLo, k = r.kHi - r.kLo;
  const GemmOperand gx = gemmOperand(x, 0, k, false, 0);
  const GemmOperand gw =
      gemmOperand(w, weightOffset(w, r), w.extent(1), r.transposeWeight, 0);
  const Elements bias =
      r.addsBias ? inputs[2].elements + (r.nLo - inputs[2].lo[0]) : Elements();
  const DType out = result.elements.type;
  absl::Status error;
  if (out == DType::BF16 && gx.type == DType::BF16 &&
      (!bias || bias.type == DType::BF16) &&
      (error = ctx.library->gemmToBf16(
           ctx.stream, r.rows, n, k, gx, gw,
           static_cast<const uint16_t *>(bias.data),
           static_cast<uint16_t *>(result.elements.data), n, 0, 1))
          .ok())
    return absl::OkStatus(); // cuBLASLt rounded the sum and the bias once
  if (!bias || out == DType::F32) {
    error = gemmInto(ctx, r.rows, n, k, 1.0f, gx, gw, 0.0f,
                     gemmResult(result, 0, n, 0), 1);
    if (error.ok() && bias)
      addBias(ctx.stream, result.elements, bias, r.rows, n);
    return annotate(error, op.kind);
  }
  // A 16-bit result with a bias: the float32 sum and the bias rounded once.
  float *block = ctx.workspace->floats(r.rows * n);
  if (!block)
    return absl::ResourceExhaustedError(
        op.kind + ": out of device memory for a float32 result");
  error = gemmInto(ctx, r.rows, n, k, 1.0f, gx, gw, 0.0f,
                   floatResult(block, n, 0), 1);
  if (!error.ok())
    return annotate(error, op.kind);
  const Elements y = result.elements;
  launch(ctx.stream, r.rows * n,
         [=] PPC_HD(int64_t i) { y[i] = block[i] + bias[i % n]; });
  return absl::OkStatus();
}

absl::Status linearBackward(const OpDesc &op, const KernelContext &,
                            ExecContext &ctx,
                            const std::vector<KernelView> &inputs,
                            const std::vector<KernelView> &,
                            const std::vector<KernelView> &outputGrads,
                            const std::vector<KernelView> &inputGrads,
                            const std::vector<KernelView> &) {
  if (outputGrads.size() != 1)
    return absl::InvalidArgumentError(op.kind + ": expects 1 result grad");
  if (inputs.size() < 2 || inputs.size() > 3)
    return absl::InvalidArgumentError(
        op.kind + ": expects input, weight and an optional bias");
  if (inputGrads.size() != inputs.size())
    return absl::InvalidArgumentError(
        op.kind + ": expects one grad per result and per operand");
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputGrads[i].present() &&
        (inputGrads[i].lo != inputs[i].lo || inputGrads[i].hi != inputs[i].hi))
      return absl::InvalidArgumentError(
          op.kind + ": operand grad box differs from the operand box");
  std::vector<TensorView> hostViews(inputs.begin(), inputs.end());
  LinearRanges r;
  if (absl::Status status = linearRanges(op, hostViews, outputGrads[0], r);
      !status.ok())
    return status;
  KernelView x = inputs[0], w = inputs[1], dy = outputGrads[0];
  if (!sameType(ctx, {&x, &w, &dy}))
    return outOfMemory(op);
  const int64_t n = r.nHi - r.nLo, k = r.kHi - r.kLo;
  const int64_t ldw = w.extent(1);
  const GemmOperand gy = gemmOperand(dy, 0, n, false, 0);
  const KernelView &dX = inputGrads[0], &dW = inputGrads[1];
  // Gradients the kernel overwrites: beta 0 where the GEMM fills the view.
  const float betaX =
      writesGradient(ctx, dX, dX.count() == r.rows * k) ? 0.0f : 1.0f;
  const float betaW =
      writesGradient(ctx, dW, dW.count() == k * n) ? 0.0f : 1.0f;
  absl::Status error;
  if (dX.present()) // dX += dY op(W)^T
    error =
        gemmInto(ctx, r.rows, k, n, 1.0f, gy,
                 gemmOperand(w, weightOffset(w, r), ldw, !r.transposeWeight, 0),
                 betaX, gemmResult(dX, 0, k, 0), 1);
  if (error.ok() && dW.present()) {
    const GemmResult dw = gemmResult(dW, weightOffset(dW, r), ldw, 0);
    GemmOperand yt = gy;
    yt.transposed = true;
    if (!r.transposeWeight) // dW += X^T dY
      error = gemmInto(ctx, k, n, r.rows, 1.0f, gemmOperand(x, 0, k, true, 0),
                       gy, betaW, dw, 1);
    else // dW^T += dY^T X
      error = gemmInto(ctx, n, k, r.rows, 1.0f, yt,
                       gemmOperand(x, 0, k, false, 0), betaW, dw, 1);
  }
  if (!error.ok())
    return annotate(error, op.kind);
  if (r.addsBias && inputGrads.size() == 3 && inputGrads[2].present()) {
    // dBias[j] += the column sum of dY, in chunks of rows.
    const int64_t rows = r.rows;
    float *partials = ctx.workspace->floats(columnChunks(rows, n) * n);
    if (!partials)
      return absl::ResourceExhaustedError(
          op.kind + ": out of device memory for the bias gradient's sums");
    const Elements y = dy.elements;
    const Elements dBias =
        inputGrads[2].elements + (r.nLo - inputGrads[2].lo[0]);
    const bool set =
        writesGradient(ctx, inputGrads[2], inputGrads[2].count() == n);
    sumColumns(
        ctx.stream, rows, n, partials,
        [=] PPC_HD(int64_t row, int64_t j) {
          return static_cast<float>(y[row * n + j]);
        },
        [=] PPC_HD(int64_t j, float total) { addInto(dBias, j, total, set); });
  } else if (inputGrads.size() == 3) {
    // No contribution to the bias here (K does not start at 0).
    writesGradient(ctx, inputGrads[2], false);
  }
  return absl::OkStatus();
}

} // namespace

void registerContractionKernels(CudaKernelTable &table) {
  table["ppc.matmul"] = {matMulForward, matMulBackward, true, true};
  table["ppc.linear"] = {linearForward, linearBackward, true, true};
}

} // namespace ppc::runtime::cuda
