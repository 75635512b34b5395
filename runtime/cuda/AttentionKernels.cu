//===- AttentionKernels.cu - fused scaled dot-product attention -----------===//
//
// ppc.attention on boxes, as the cpu kernel (runtime/cpu/AttentionKernels.cpp):
// query [B..., S, D], key [B..., T, D], value [B..., T, Dv], result
// [B..., S, Dv],
//   result[b, i] = sum_j P'[b, i, j] value[b, j],
//   P = softmax_j(scale * query[b, i] . key[b, j]), P' = P * dropout factor,
// with j > i masked out (probability 0) when `causal` (top-left aligned;
// with `zigzag`, i and j are the natural positions of rows and keys stored
// in zigzag order, ppc/Support/SequenceOrder.h). The dropout factor of
// (b, i, j) is DropoutMask's at the GLOBAL flat index of the [B..., S, T]
// probabilities, applied only in training with ratio > 0. Partitions split
// only the leading dims and S: the result box gives those ranges; query, key
// and value must hold them (query all of D, key and value all of T and
// D / Dv), and the result all of Dv.
//
// Per run of the innermost leading dim (the outer leading dims loop on the
// host) and tile of query rows, the score block [batches, rows, cols] is
// one strided-batched Library GEMM of query and key as stored (16-bit
// operands on tensor cores) into float32; a block of threads per row
// (Reductions.h) takes its softmax (and dropout) and writes the
// probabilities in the operands' type, which a second GEMM multiplies by
// value into the result as stored (16-bit probabilities, as FlashAttention
// and PyTorch's matmul-softmax-matmul round them). With `causal`, keys past
// a tile's last row are masked for every row of it, so only the first
// min(T, last row + 1) columns are computed (all of them in zigzag order,
// where the row kernels set the scores of the keys a row does not see to
// -infinity, as the cpu kernel's maskKeys). Operands of mixed types are
// widened to float32. The backward recomputes P from query and key
// (nothing is kept from the forward), keeps P and dS in float32 for the
// softmax's gradient and rounds them to the operands' type for the GEMMs of
// dV, dQ and dK, which ADD into the grad views as stored; a partition of S
// rows contributes a partial dK and dV over all of T (the plan sums them).
//
// A key block (a partition split along T, given statistics scratch) runs
// the cpu kernel's stages on the same score blocks, its keys from keyLo: the
// forward's stage 0 writes each row's block maximum, sum of exponentials and
// the unnormalized output (a row kernel writes exp(score - max) times the
// dropout factor for the value GEMM); stages 1 and 2 rescale the result's
// rows (a row kernel); the backward's stage 0 sums P dP per row, stage 1
// the gradients with P from the rows' statistics. A ring (context
// parallelism) runs forward stage 3 instead of 1: a row kernel merges the
// block's maximum and sum into the rows' running ones, rescales the result
// rows and writes the rescaled exponentials, whose value GEMM then adds
// into the result; its backward's stage 2 writes each row's dO . O (a row
// kernel, in double) as the sum of P dP that stage 1 reads.
//
//===----------------------------------------------------------------------===//

#include "AttentionRanges.h"
#include "CudaKernels.h"
#include "FlashAttention.h"
#include "Library.h"
#include "Reductions.h"

#include "ppc/Runtime/DropoutMask.h"

#include <algorithm>

namespace ppc::runtime::cuda {

namespace {

/// Elements between consecutive values of the innermost leading dim.
int64_t batchStride(const AttentionRanges &r, const TensorView &view) {
  return r.rank > 2 ? strideOf(r, view, r.rank - 3) : view.numElements();
}

/// One score block: `count` consecutive values of the innermost leading dim
/// from `batch` on (the other leading dims as in `batch`), query rows
/// [rowLo, rowHi), key columns [0, cols).
struct Block {
  std::vector<int64_t> batch;
  int64_t count;
  int64_t rowLo, rowHi, cols;
  /// Flat index of element (batch, 0, 0) of the global [B..., S, T]
  /// probabilities.
  int64_t base;

  int64_t rows() const { return rowHi - rowLo; }
};

/// Floats a score block may take.
constexpr int64_t kBlockFloats = int64_t(1) << 24;

/// Calls fn(block) for the blocks covering the partition's batches and rows.
template <typename Fn> void forEachBlock(const AttentionRanges &r, Fn &&fn) {
  const size_t lead = r.batchLo.size();
  for (size_t d = 0; d < lead; ++d)
    if (r.batchHi[d] <= r.batchLo[d])
      return;
  if (r.rowHi <= r.rowLo)
    return;
  const int64_t rows = r.rowHi - r.rowLo;
  const int64_t tile = std::max<int64_t>(
      1, std::min(rows, kBlockFloats / std::max<int64_t>(r.T, 1)));
  const int64_t inner = lead ? r.batchHi[lead - 1] - r.batchLo[lead - 1] : 1;
  const int64_t chunk = std::max<int64_t>(
      1, std::min(inner, kBlockFloats / std::max<int64_t>(tile * r.T, 1)));
  std::vector<int64_t> batch = r.batchLo;
  while (true) {
    for (int64_t b = 0; b < inner; b += chunk) {
      Block block;
      block.batch = batch;
      if (lead)
        block.batch[lead - 1] = r.batchLo[lead - 1] + b;
      block.count = std::min(chunk, inner - b);
      block.base = probabilityBase(block.batch, r);
      for (int64_t lo = r.rowLo; lo < r.rowHi; lo += tile) {
        block.rowLo = lo;
        block.rowHi = std::min(r.rowHi, lo + tile);
        block.cols = r.keyColumns(block.rowLo, block.rowHi);
        fn(static_cast<const Block &>(block));
      }
    }
    // Odometer over the outer leading dims.
    if (lead <= 1)
      return;
    size_t d = lead - 1;
    while (true) {
      if (d == 0)
        return;
      --d;
      if (++batch[d] < r.batchHi[d])
        break;
      batch[d] = r.batchLo[d];
    }
  }
}

/// The most floats one of the partition's score blocks takes.
int64_t largestBlock(const AttentionRanges &r) {
  int64_t most = 0;
  forEachBlock(r, [&](const Block &block) {
    most = std::max(most, block.count * block.rows() * block.cols);
  });
  return most;
}

/// What the row kernels need of a block, by value.
struct RowDims {
  int64_t rows, cols;   ///< of the block, per batch
  int64_t rowLo;        ///< global query row of the block's row 0
  int64_t keyLo;        ///< global key of the block's column 0
  int64_t T, batchSize; ///< T, and S * T (the flat step of a batch)
  int64_t base;         ///< flat index of the block's (batch 0, 0, 0)
  bool causal;
  int64_t zigzag;   ///< pairs of the zigzag order (0: natural)
  int64_t firstKey; ///< in zigzag order, the block's least key position

  PPC_HD int64_t flat(int64_t b, int64_t row, int64_t j) const {
    return base + b * batchSize + (rowLo + row) * T + keyLo + j;
  }
  /// Keys [0, seen) of the block row `row` reads: those it sees (a prefix)
  /// in natural order; in zigzag order all, or none if it sees none.
  PPC_HD int64_t seen(int64_t row) const {
    if (!causal || zigzag == 0)
      return keysSeen(causal, cols, rowLo + row, keyLo);
    return firstKey <= zigzagPosition(rowLo + row, T, zigzag) ? cols : 0;
  }
  /// seen(row), having set this thread's scores of `line` (its columns
  /// t.thread, + t.threads, ..., as every loop of the row kernels) that the
  /// row does not see to -infinity in zigzag order: the cpu kernel's
  /// maskKeys, spread over the row's threads.
  PPC_HD int64_t masked(const RowThreads &t, int64_t row, float *line) const {
    const int64_t n = seen(row);
    if (causal && zigzag > 0)
      for (int64_t j = t.thread; j < n; j += t.threads)
        if (!keyVisible(causal, zigzag, T, rowLo + row, keyLo + j))
          line[j] = -INFINITY;
    return n;
  }
};

RowDims rowDims(const AttentionRanges &r, const Block &block) {
  RowDims d{block.rows(), block.cols, block.rowLo, r.keyLo,  r.T,
            r.S * r.T,    block.base, r.causal,    r.zigzag, 0};
  if (r.causal && r.zigzag > 0)
    d.firstKey = zigzagSpan(r.keyLo, r.keyLo + block.cols, r.T, r.zigzag).first;
  return d;
}

/// Whether some row of `block` sees some of its keys: block.cols > 0 in
/// natural order; in zigzag order, the keys' least position at most the
/// rows' greatest.
bool blockSeen(const AttentionRanges &r, const Block &block) {
  if (block.cols <= 0 || !r.causal || r.zigzag == 0)
    return block.cols > 0;
  return zigzagSpan(r.keyLo, r.keyLo + block.cols, r.T, r.zigzag).first <=
         zigzagSpan(block.rowLo, block.rowHi, r.T, r.zigzag).last;
}

/// Where a key block's statistics of a score block's rows lie: row `row` of
/// batch `b` of the block at base + b * batchStride + row.
struct StatRows {
  int64_t base, batchStride;

  PPC_HD int64_t at(int64_t b, int64_t row) const {
    return base + b * batchStride + row;
  }
};

StatRows statRows(const AttentionRanges &r, const Block &block) {
  return {statIndex(r, block.batch, block.rowLo), r.rowHi - r.rowLo};
}

/// The largest of a row's first `seen` scores, on every thread of its block.
PPC_HD inline float rowMax(const RowThreads &t, const float *line,
                           int64_t seen) {
  float max = -INFINITY;
  for (int64_t j = t.thread; j < seen; j += t.threads)
    max = max < line[j] ? line[j] : max;
  return t.max(max);
}

/// Replaces a row's first `seen` scores by exp(score - max); returns the
/// row's sum of them (in double), on every thread.
PPC_HD inline double expInPlace(const RowThreads &t, float *line, int64_t seen,
                                float max) {
  double sum = 0;
  for (int64_t j = t.thread; j < seen; j += t.threads) {
    line[j] = expf(line[j] - max);
    sum += line[j];
  }
  return t.sum(sum);
}

/// The causal-masked softmax of each row of the scaled scores `p` (max and
/// exponentials in float, the sum in double, as the cpu kernel's
/// softmaxRow), 0 past the keys a row sees: written as P into `p` where
/// `keep` (the backward's dS needs it), and times the dropout factor when
/// `dropout` into `out` (which may be `p` itself, then without `keep`); a
/// block of threads per row.
void softmaxRows(Stream stream, RowDims d, float *p, int64_t count, bool keep,
                 bool dropout, DropoutMask mask, Elements out) {
  launchRows(stream, count * d.rows, d.cols,
             [=] PPC_HD(const RowThreads &t, int64_t i) {
               const int64_t b = i / d.rows, row = i % d.rows;
               float *line = p + i * d.cols;
               const Elements outLine = out + i * d.cols;
               const int64_t seen = d.masked(t, row, line);
               const float max = rowMax(t, line, seen);
               const float inverse =
                   static_cast<float>(1.0 / expInPlace(t, line, seen, max));
               for (int64_t j = t.thread; j < d.cols; j += t.threads) {
                 const float value = j < seen ? line[j] * inverse : 0.0f;
                 if (keep)
                   line[j] = value;
                 outLine[j] =
                     dropout ? value * mask.factor(d.flat(b, row, j)) : value;
               }
             });
}

/// ds (= dP' on entry) becomes dS = P (dP - sum_l P dP), dP = dP' * factor,
/// the dot in double (softmaxGradRow), and is written to `out` as well
/// (which may be `ds` itself); a block of threads per row. A key block
/// reads each row's sum_l P dP over all keys from `dots` (at `st`).
void softmaxGradRows(Stream stream, RowDims d, const float *p, float *ds,
                     int64_t count, bool dropout, DropoutMask mask,
                     Elements out, Elements dots = {}, StatRows st = {}) {
  launchRows(stream, count * d.rows, d.cols,
             [=] PPC_HD(const RowThreads &t, int64_t i) {
               const int64_t b = i / d.rows, row = i % d.rows;
               const float *pLine = p + i * d.cols;
               float *dLine = ds + i * d.cols;
               const Elements outLine = out + i * d.cols;
               double dot = 0;
               for (int64_t j = t.thread; j < d.cols; j += t.threads) {
                 if (dropout)
                   dLine[j] *= mask.factor(d.flat(b, row, j));
                 dot += static_cast<double>(pLine[j]) * dLine[j];
               }
               const float sum = dots ? static_cast<float>(dots[st.at(b, row)])
                                      : static_cast<float>(t.sum(dot));
               for (int64_t j = t.thread; j < d.cols; j += t.threads)
                 outLine[j] = pLine[j] * (dLine[j] - sum);
             });
}

/// A key block's forward stage 0 on the scaled scores `p`: each row's
/// maximum over the keys it sees (into `max` and `own`), its sum of
/// exp(score - maximum) in double (into `sum`), and exp(score - maximum)
/// times the dropout factor, 0 past the keys it sees, into `out` (which may
/// be `p` itself). Rows seeing no key get -inf and 0.
void blockExpRows(Stream stream, RowDims d, StatRows st, float *p,
                  int64_t count, bool dropout, DropoutMask mask, Elements out,
                  Elements max, Elements own, Elements sum) {
  launchRows(stream, count * d.rows, d.cols,
             [=] PPC_HD(const RowThreads &t, int64_t i) {
               const int64_t b = i / d.rows, row = i % d.rows;
               float *line = p + i * d.cols;
               const Elements outLine = out + i * d.cols;
               const int64_t seen = d.masked(t, row, line);
               const float m = rowMax(t, line, seen);
               double total = 0;
               for (int64_t j = t.thread; j < d.cols; j += t.threads) {
                 const float e = j < seen ? expf(line[j] - m) : 0.0f;
                 total += e;
                 outLine[j] = dropout ? e * mask.factor(d.flat(b, row, j)) : e;
               }
               total = t.sum(total);
               if (t.thread == 0) {
                 const int64_t at = st.at(b, row);
                 max[at] = m;
                 own[at] = m;
                 sum[at] = static_cast<float>(total);
               }
             });
}

/// A ring's forward stage 3 (merge) on the scaled scores `p`: each row's
/// block maximum m over the keys it sees and sum l of exp(score - m) (in
/// double) merge into the rows' running maximum `max` and sum `sum`, both
/// rescaled to newMax = max(max, m): sum = kept * sum + added * l with
/// kept = exp(max - newMax), added = exp(m - newMax). The row's result
/// (`res` at the block's first row, rows `ld` and batches `batchLd` apart,
/// `width` values) is scaled by kept, and exp(score - m) * added times the
/// dropout factor, 0 past the keys the row sees, goes to `out` (which may
/// be `p` itself) for the value GEMM, which adds into the result. A row
/// that has seen no key yet (newMax -inf) keeps its statistics and result.
void mergeExpRows(Stream stream, RowDims d, StatRows st, float *p,
                  int64_t count, bool dropout, DropoutMask mask, Elements out,
                  Elements res, int64_t ld, int64_t batchLd, int64_t width,
                  Elements max, Elements sum) {
  launchRows(stream, count * d.rows, d.cols,
             [=] PPC_HD(const RowThreads &t, int64_t i) {
               const int64_t b = i / d.rows, row = i % d.rows;
               const int64_t at = st.at(b, row);
               // The running statistics, read by thread 0 alone and passed to
               // the others by reductions: thread 0 writes them back at the
               // end.
               const bool first = t.thread == 0;
               const float runningMax =
                   t.max(first ? float(max[at]) : -INFINITY);
               const float runningSum = t.sum(first ? float(sum[at]) : 0.0f);
               float *line = p + i * d.cols;
               const Elements outLine = out + i * d.cols;
               const int64_t seen = d.masked(t, row, line);
               const float m = rowMax(t, line, seen);
               const double total = expInPlace(t, line, seen, m);
               const float newMax = runningMax < m ? m : runningMax;
               const bool merge = newMax != -INFINITY;
               const float kept = merge ? expf(runningMax - newMax) : 1.0f,
                           added = merge ? expf(m - newMax) : 1.0f;
               for (int64_t j = t.thread; j < d.cols; j += t.threads) {
                 const float e = j < seen ? line[j] * added : 0.0f;
                 outLine[j] = dropout ? e * mask.factor(d.flat(b, row, j)) : e;
               }
               if (!merge)
                 return; // every thread of the row is past its reductions
               const Elements result = res + b * batchLd + row * ld;
               for (int64_t c = t.thread; c < width; c += t.threads)
                 result[c] = float(result[c]) * kept;
               if (first) {
                 sum[at] =
                     kept * runningSum + added * static_cast<float>(total);
                 max[at] = newMax;
               }
             });
}

/// A key block's result rows (laid out as rescaleRows's) set to 0: the
/// output of rows that see no key of the block, as the value GEMM writes
/// it for such rows of a block that has keys.
void zeroRows(Stream stream, RowDims d, int64_t count, Elements out, int64_t ld,
              int64_t batchLd, int64_t width) {
  launchRows(stream, count * d.rows, width,
             [=] PPC_HD(const RowThreads &t, int64_t i) {
               const int64_t b = i / d.rows, row = i % d.rows;
               const Elements line = out + b * batchLd + row * ld;
               for (int64_t c = t.thread; c < width; c += t.threads)
                 line[c] = 0.0f;
             });
}

/// A key block's forward stages 1 and 2 on its result rows (`out` at the
/// block's first row, rows `ld` and batches `batchLd` apart, `width`
/// values each): stage 1 scales the row's sum and values by
/// exp(own - max) (0 for a row that saw no key: its values become 0),
/// stage 2 divides the values by the sum.
void rescaleRows(Stream stream, RowDims d, StatRows st, int64_t count,
                 Elements out, int64_t ld, int64_t batchLd, int64_t width,
                 bool first, Elements max, Elements own, Elements sum) {
  launchRows(stream, count * d.rows, width,
             [=] PPC_HD(const RowThreads &t, int64_t i) {
               const int64_t b = i / d.rows, row = i % d.rows;
               const int64_t at = st.at(b, row);
               float factor;
               if (first) {
                 const float mine = own[at];
                 factor =
                     mine == -INFINITY ? 0.0f : expf(mine - float(max[at]));
               } else {
                 factor = 1.0f / float(sum[at]);
               }
               const Elements line = out + b * batchLd + row * ld;
               for (int64_t c = t.thread; c < width; c += t.threads)
                 line[c] = factor == 0.0f ? 0.0f : line[c] * factor;
               if (first && t.thread == 0)
                 sum[at] = float(sum[at]) * factor;
             });
}

/// A key block's backward: P = exp(score - max) / sum of the rows' whole
/// statistics into `p` (kept, float32), 0 past the keys a row sees, and
/// P' = P times the dropout factor into `out` (which may be `p` itself
/// without dropout).
void blockProbabilityRows(Stream stream, RowDims d, StatRows st, float *p,
                          int64_t count, bool dropout, DropoutMask mask,
                          Elements out, Elements max, Elements sum) {
  launchRows(stream, count * d.rows, d.cols,
             [=] PPC_HD(const RowThreads &t, int64_t i) {
               const int64_t b = i / d.rows, row = i % d.rows;
               const int64_t at = st.at(b, row);
               const float m = max[at], inverse = 1.0f / float(sum[at]);
               float *line = p + i * d.cols;
               const int64_t seen = d.masked(t, row, line);
               const Elements outLine = out + i * d.cols;
               for (int64_t j = t.thread; j < d.cols; j += t.threads) {
                 const float value =
                     j < seen ? expf(line[j] - m) * inverse : 0.0f;
                 line[j] = value;
                 outLine[j] =
                     dropout ? value * mask.factor(d.flat(b, row, j)) : value;
               }
             });
}

/// A key block's backward stage 0: each row's sum of P dP over the block
/// (dP = dP' `ds` times the dropout factor), in double, into `dots`.
void blockDotRows(Stream stream, RowDims d, StatRows st, const float *p,
                  const float *ds, int64_t count, bool dropout,
                  DropoutMask mask, Elements dots) {
  launchRows(stream, count * d.rows, d.cols,
             [=] PPC_HD(const RowThreads &t, int64_t i) {
               const int64_t b = i / d.rows, row = i % d.rows;
               const float *pLine = p + i * d.cols, *dLine = ds + i * d.cols;
               double dot = 0;
               for (int64_t j = t.thread; j < d.cols; j += t.threads) {
                 const float dp =
                     dropout ? dLine[j] * mask.factor(d.flat(b, row, j))
                             : dLine[j];
                 dot += static_cast<double>(pLine[j]) * dp;
               }
               dot = t.sum(dot);
               if (t.thread == 0)
                 dots[st.at(b, row)] = static_cast<float>(dot);
             });
}

/// A ring's backward stage 2: each row's dO . O (`dOut` and the forward's
/// result `o` at the block's first row, rows `ldd` / `ldo` and batches
/// `batchLdd` / `batchLdo` apart, `width` values each), in double, into
/// `dots`: the row's sum of P dP over every key.
void rowDotRows(Stream stream, RowDims d, StatRows st, int64_t count,
                Elements o, int64_t ldo, int64_t batchLdo, Elements dOut,
                int64_t ldd, int64_t batchLdd, int64_t width, Elements dots) {
  launchRows(stream, count * d.rows, width,
             [=] PPC_HD(const RowThreads &t, int64_t i) {
               const int64_t b = i / d.rows, row = i % d.rows;
               const Elements oLine = o + b * batchLdo + row * ldo,
                              dLine = dOut + b * batchLdd + row * ldd;
               double dot = 0;
               for (int64_t c = t.thread; c < width; c += t.threads)
                 dot += static_cast<double>(float(oLine[c])) * float(dLine[c]);
               dot = t.sum(dot);
               if (t.thread == 0)
                 dots[st.at(b, row)] = static_cast<float>(dot);
             });
}

/// The GEMM result at row `row` of `block`'s first batch of a result-like
/// view (result or operand gradient, as stored), its batches apart as the
/// view's.
GemmResult typedResult(const AttentionRanges &r, const KernelView &view,
                       const Block &block, int64_t row) {
  return gemmResult(view, offsetIn(r, view, block.batch, row, 0),
                    rowStride(r, view), batchStride(r, view));
}

/// An operand at row `row` of `block`'s first batch of `view`.
GemmOperand blockOperand(const AttentionRanges &r, const KernelView &view,
                         const Block &block, int64_t row, bool transposed) {
  return gemmOperand(view, offsetIn(r, view, block.batch, row, 0),
                     rowStride(r, view), transposed, batchStride(r, view));
}

/// A [count, rows, cols] block of `type` as a GEMM operand.
GemmOperand blockOperand(Elements block, int64_t rows, int64_t cols,
                         bool transposed) {
  GemmOperand g;
  g.data = block.data;
  g.type = block.type;
  g.ld = cols;
  g.transposed = transposed;
  g.batchStride = rows * cols;
  return g;
}

/// The scaled scores of `block` into p ([count, rows, cols], float32).
absl::Status scores(ExecContext &ctx, const AttentionRanges &r,
                    const Block &block, const KernelView &q,
                    const KernelView &k, float *p) {
  const int64_t rows = block.rows(), cols = block.cols;
  return ctx.library->gemm(ctx.stream, rows, cols, r.D, r.scale,
                           blockOperand(r, q, block, block.rowLo, false),
                           blockOperand(r, k, block, r.keyLo, true), 0.0f,
                           floatResult(p, cols, rows * cols), block.count);
}

/// The result rows of `block` = probs V (probs [count, rows, cols] in the
/// operands' type), written (beta 0) or added (beta 1: a ring's merge).
absl::Status multiplyValues(ExecContext &ctx, const AttentionRanges &r,
                            const Block &block, Elements probs,
                            const KernelView &v, const KernelView &result,
                            float beta = 0.0f) {
  const int64_t rows = block.rows(), cols = block.cols;
  return gemmInto(ctx, rows, r.Dv, cols, 1.0f,
                  blockOperand(probs, rows, cols, false),
                  blockOperand(r, v, block, r.keyLo, false), beta,
                  typedResult(r, result, block, block.rowLo), block.count);
}

/// dV of the block's keys += P'^T dO.
absl::Status addValueGradient(ExecContext &ctx, const AttentionRanges &r,
                              const Block &block, Elements probs,
                              const GemmOperand &dOut, const KernelView &dv) {
  const int64_t rows = block.rows(), cols = block.cols;
  return gemmInto(ctx, cols, r.Dv, rows, 1.0f,
                  blockOperand(probs, rows, cols, true), dOut, 1.0f,
                  typedResult(r, dv, block, r.keyLo), block.count);
}

/// dP' = dO V^T into ds ([count, rows, cols], float32).
absl::Status probabilityGradient(ExecContext &ctx, const AttentionRanges &r,
                                 const Block &block, const GemmOperand &dOut,
                                 const KernelView &v, float *ds) {
  const int64_t rows = block.rows(), cols = block.cols;
  return ctx.library->gemm(ctx.stream, rows, cols, r.Dv, 1.0f, dOut,
                           blockOperand(r, v, block, r.keyLo, true), 0.0f,
                           floatResult(ds, cols, rows * cols), block.count);
}

/// dQ += scale * dS K and dK of the block's keys += scale * dS^T Q (those
/// wanted), dS [count, rows, cols] in the operands' type.
absl::Status addScoreGradients(ExecContext &ctx, const AttentionRanges &r,
                               const Block &block, Elements dsOut,
                               const KernelView &q, const KernelView &k,
                               const KernelView &dq, const KernelView &dk) {
  const int64_t rows = block.rows(), cols = block.cols;
  absl::Status error;
  if (dq.present())
    error = gemmInto(ctx, rows, r.D, cols, r.scale,
                     blockOperand(dsOut, rows, cols, false),
                     blockOperand(r, k, block, r.keyLo, false), 1.0f,
                     typedResult(r, dq, block, block.rowLo), block.count);
  if (error.ok() && dk.present())
    error = gemmInto(ctx, cols, r.D, rows, r.scale,
                     blockOperand(dsOut, rows, cols, true),
                     blockOperand(r, q, block, block.rowLo, false), 1.0f,
                     typedResult(r, dk, block, r.keyLo), block.count);
  return error;
}

/// The operands (and, in the backward, the result's gradient) as the GEMMs
/// take them: as stored where they share one floating type, else widened
/// to float32. False when out of memory.
bool operandsOfOneType(ExecContext &ctx, std::vector<KernelView *> views) {
  const DType type = views.front()->elements.type;
  bool same = type != DType::I64;
  for (const KernelView *v : views)
    same &= v->elements.type == type;
  if (same)
    return true;
  for (KernelView *v : views)
    if (!(*v = widenedToFloat(ctx, *v)).elements)
      return false;
  return true;
}

/// `n` elements of `type` from the workspace (null data when out of
/// memory): a 16-bit block takes half the floats.
Elements typedBlock(ExecContext &ctx, DType type, int64_t n) {
  const int64_t floats = type == DType::F32 ? n : (n + 1) / 2;
  return {ctx.workspace->floats(floats), type};
}

/// The forward stages of a key block (see the file comment).
absl::Status blockForward(const OpDesc &op, const KernelContext &kctx,
                          ExecContext &ctx,
                          const std::vector<KernelView> &inputs,
                          const std::vector<KernelView> &outputs,
                          const std::vector<KernelView> &scratch) {
  AttentionRanges r;
  if (absl::Status s =
          forwardRanges(op, kctx, inputs, outputs, r, /*keyBlock=*/true);
      !s.ok())
    return s;
  if (absl::Status s = checkStatistics(op, r, scratch, 3); !s.ok())
    return s;
  const KernelView &result = outputs[0];
  const Elements max = scratch[0].elements, sum = scratch[1].elements,
                 own = scratch[2].elements;
  if (kctx.stage == 1 || kctx.stage == 2) {
    forEachBlock(r, [&](const Block &block) {
      rescaleRows(
          ctx.stream, rowDims(r, block), statRows(r, block), block.count,
          result.elements + offsetIn(r, result, block.batch, block.rowLo, 0),
          rowStride(r, result), batchStride(r, result), r.Dv,
          /*first=*/kctx.stage == 1, max, own, sum);
    });
    return absl::OkStatus();
  }
  KernelView q = inputs[0], k = inputs[1], v = inputs[2];
  if (!operandsOfOneType(ctx, {&q, &k, &v}))
    return absl::ResourceExhaustedError(
        op.kind + ": out of device memory for its float32 operands");
  const DType type = q.elements.type;
  const DropoutMask mask(op.getInt("seed", 0), kctx.step, r.ratio);
  const int64_t blockFloats = std::max<int64_t>(largestBlock(r), 1);
  // p: the float32 scores; probs: exp(score - max) P'/P in the operands'
  // type for the value GEMM (p itself for float32 operands).
  float *p = ctx.workspace->floats(blockFloats);
  Elements probs = type == DType::F32 ? floatElements(p)
                                      : typedBlock(ctx, type, blockFloats);
  if (!p || !probs)
    return absl::ResourceExhaustedError(
        op.kind + ": out of device memory for its score block");
  // Stage 3 (a ring's merge) adds into the result rows it rescales.
  const bool merge = kctx.stage == 3;
  absl::Status error;
  forEachBlock(r, [&](const Block &block) {
    if (!error.ok())
      return;
    const bool seen = blockSeen(r, block);
    if (merge && !seen)
      return; // a causal block past every row: nothing to merge
    if (seen && !(error = scores(ctx, r, block, q, k, p)).ok())
      return;
    const RowDims d = rowDims(r, block);
    const Elements rows =
        result.elements + offsetIn(r, result, block.batch, block.rowLo, 0);
    const int64_t ld = rowStride(r, result), batchLd = batchStride(r, result);
    if (merge) {
      mergeExpRows(ctx.stream, d, statRows(r, block), p, block.count, r.dropout,
                   mask, probs, rows, ld, batchLd, r.Dv, max, sum);
      error = multiplyValues(ctx, r, block, probs, v, result, /*beta=*/1.0f);
      return;
    }
    blockExpRows(ctx.stream, d, statRows(r, block), p, block.count, r.dropout,
                 mask, probs, max, own, sum);
    if (seen)
      error = multiplyValues(ctx, r, block, probs, v, result);
    else // as the cpu kernel: a ring's merge rescales these rows
      zeroRows(ctx.stream, d, block.count, rows, ld, batchLd, r.Dv);
  });
  return annotate(error, op.kind);
}

/// The backward stages of a key block (see the file comment).
absl::Status blockBackward(const OpDesc &op, const KernelContext &kctx,
                           ExecContext &ctx,
                           const std::vector<KernelView> &inputs,
                           const std::vector<KernelView> &outputs,
                           const std::vector<KernelView> &outputGrads,
                           const std::vector<KernelView> &inputGrads,
                           const std::vector<KernelView> &scratch) {
  AttentionRanges r;
  if (absl::Status s = backwardRanges(op, kctx, inputs, outputs, outputGrads,
                                      inputGrads, r, /*keyBlock=*/true);
      !s.ok())
    return s;
  if (absl::Status s = checkStatistics(op, r, scratch, 4); !s.ok())
    return s;
  const Elements max = scratch[0].elements, sum = scratch[1].elements,
                 dots = scratch[3].elements;
  const KernelView &dq = inputGrads[0], &dk = inputGrads[1],
                   &dv = inputGrads[2];
  // Stage 2 (a ring's first) reads the forward's result.
  if (kctx.stage == 2 && (outputs.empty() || !outputs[0].present()))
    return absl::InvalidArgumentError(
        op.kind + ": a ring's backward reads the forward's result");
  // The score blocks add into the gradients: overwritten ones start at 0
  // (the first stage, which adds nothing, is where the plan marks them).
  for (const KernelView *g : {&dq, &dk, &dv})
    writesGradient(ctx, *g, false);
  if (kctx.stage == 2) { // ring: sum_l P dP of all keys is dO . O, per row
    const KernelView &result = outputs[0], &dResult = outputGrads[0];
    forEachBlock(r, [&](const Block &block) {
      rowDotRows(
          ctx.stream, rowDims(r, block), statRows(r, block), block.count,
          result.elements + offsetIn(r, result, block.batch, block.rowLo, 0),
          rowStride(r, result), batchStride(r, result),
          dResult.elements + offsetIn(r, dResult, block.batch, block.rowLo, 0),
          rowStride(r, dResult), batchStride(r, dResult), r.Dv, dots);
    });
    return absl::OkStatus();
  }
  KernelView q = inputs[0], k = inputs[1], v = inputs[2],
             dResult = outputGrads[0];
  if (!operandsOfOneType(ctx, {&q, &k, &v, &dResult}))
    return absl::ResourceExhaustedError(
        op.kind + ": out of device memory for its float32 operands");
  const DType type = q.elements.type;
  const DropoutMask mask(op.getInt("seed", 0), kctx.step, r.ratio);
  const bool stats = kctx.stage == 0;
  // As the whole op's backward: p and ds in float32, probs (P') and dsOut
  // (dS) in the operands' type.
  const int64_t blockFloats = std::max<int64_t>(largestBlock(r), 1);
  float *p = ctx.workspace->floats(blockFloats),
        *ds = ctx.workspace->floats(blockFloats);
  Elements probs = type == DType::F32 && !r.dropout
                       ? floatElements(p)
                       : typedBlock(ctx, type, blockFloats);
  Elements dsOut = type == DType::F32 ? floatElements(ds)
                                      : typedBlock(ctx, type, blockFloats);
  if (!p || !ds || !probs || !dsOut)
    return absl::ResourceExhaustedError(
        op.kind + ": out of device memory for its score blocks");
  absl::Status error;
  forEachBlock(r, [&](const Block &block) {
    if (!error.ok())
      return;
    const RowDims d = rowDims(r, block);
    const StatRows st = statRows(r, block);
    // No key of the block is seen: nothing to add (in zigzag order every
    // block runs, as the cpu kernel's: cols is all of them).
    if (block.cols == 0) {
      if (stats)
        blockDotRows(ctx.stream, d, st, p, ds, block.count, false, mask, dots);
      return;
    }
    if (!(error = scores(ctx, r, block, q, k, p)).ok())
      return;
    blockProbabilityRows(ctx.stream, d, st, p, block.count, r.dropout, mask,
                         probs, max, sum);
    const GemmOperand dOut =
        blockOperand(r, dResult, block, block.rowLo, false);
    if (!(error = probabilityGradient(ctx, r, block, dOut, v, ds)).ok())
      return;
    if (stats) {
      blockDotRows(ctx.stream, d, st, p, ds, block.count, r.dropout, mask,
                   dots);
      return;
    }
    if (dv.present() &&
        !(error = addValueGradient(ctx, r, block, probs, dOut, dv)).ok())
      return;
    if (!dq.present() && !dk.present())
      return;
    softmaxGradRows(ctx.stream, d, p, ds, block.count, r.dropout, mask, dsOut,
                    dots, st);
    error = addScoreGradients(ctx, r, block, dsOut, q, k, dq, dk);
  });
  return annotate(error, op.kind);
}

absl::Status attentionForward(const OpDesc &op, const KernelContext &kctx,
                              ExecContext &ctx,
                              const std::vector<KernelView> &inputs,
                              const std::vector<KernelView> &outputs,
                              const std::vector<KernelView> &scratch) {
  if (!scratch.empty())
    return blockForward(op, kctx, ctx, inputs, outputs, scratch);
  AttentionRanges r;
  if (absl::Status s = forwardRanges(op, kctx, inputs, outputs, r); !s.ok())
    return s;
  const KernelView &result = outputs[0];
  const DropoutMask mask(op.getInt("seed", 0), kctx.step, r.ratio);
  if (flashAttentionFits(r, inputs[0], inputs[1], inputs[2], nullptr)) {
    absl::Status s = flashAttentionForward(ctx, r, mask, inputs[0], inputs[1],
                                           inputs[2], result);
    return annotate(s, op.kind);
  }
  KernelView q = inputs[0], k = inputs[1], v = inputs[2];
  if (!operandsOfOneType(ctx, {&q, &k, &v}))
    return absl::ResourceExhaustedError(
        op.kind + ": out of device memory for its float32 operands");
  const DType type = q.elements.type;
  const int64_t blockFloats = largestBlock(r);
  // p: the float32 scores; probs: P' in the operands' type (p itself for
  // float32 operands).
  float *p = nullptr;
  Elements probs;
  absl::Status error;
  forEachBlock(r, [&](const Block &block) {
    if (!error.ok())
      return;
    if (!p) {
      p = ctx.workspace->floats(blockFloats);
      probs = type == DType::F32 ? floatElements(p)
                                 : typedBlock(ctx, type, blockFloats);
      if (!p || !probs) {
        error = absl::ResourceExhaustedError(
            "out of device memory for its score block");
        return;
      }
    }
    if ((error = scores(ctx, r, block, q, k, p)).ok()) {
      softmaxRows(ctx.stream, rowDims(r, block), p, block.count,
                  /*keep=*/false, r.dropout, mask, probs);
      error = multiplyValues(ctx, r, block, probs, v, result);
    }
  });
  return annotate(error, op.kind);
}

absl::Status attentionBackward(const OpDesc &op, const KernelContext &kctx,
                               ExecContext &ctx,
                               const std::vector<KernelView> &inputs,
                               const std::vector<KernelView> &outputs,
                               const std::vector<KernelView> &outputGrads,
                               const std::vector<KernelView> &inputGrads,
                               const std::vector<KernelView> &scratch) {
  if (!scratch.empty())
    return blockBackward(op, kctx, ctx, inputs, outputs, outputGrads,
                         inputGrads, scratch);
  AttentionRanges r;
  if (absl::Status s =
          backwardRanges(op, kctx, inputs, outputs, outputGrads, inputGrads, r);
      !s.ok())
    return s;
  const KernelView &dq = inputGrads[0], &dk = inputGrads[1],
                   &dv = inputGrads[2];
  if (!dq.present() && !dk.present() && !dv.present())
    return absl::OkStatus();
  const DropoutMask mask(op.getInt("seed", 0), kctx.step, r.ratio);
  if (!outputs.empty() && outputs[0].present() &&
      flashAttentionFits(r, inputs[0], inputs[1], inputs[2], &outputGrads[0])) {
    absl::Status s =
        flashAttentionBackward(ctx, r, mask, inputs[0], inputs[1], inputs[2],
                               outputs[0], outputGrads[0], dq, dk, dv);
    return annotate(s, op.kind);
  }
  // The score blocks add into the gradients: overwritten ones start at 0.
  for (const KernelView *g : {&dq, &dk, &dv})
    writesGradient(ctx, *g, false);
  KernelView q = inputs[0], k = inputs[1], v = inputs[2],
             dResult = outputGrads[0];
  if (!operandsOfOneType(ctx, {&q, &k, &v, &dResult}))
    return absl::ResourceExhaustedError(
        op.kind + ": out of device memory for its float32 operands");
  const DType type = q.elements.type;
  // p: P and ds: dP', then dS, in float32; probs: P' and dsOut: dS in the
  // operands' type for the GEMMs (p and ds themselves for float32 operands
  // without dropout).
  const int64_t blockFloats = largestBlock(r);
  float *p = nullptr, *ds = nullptr;
  Elements probs, dsOut;
  absl::Status error;
  forEachBlock(r, [&](const Block &block) {
    if (!error.ok())
      return;
    if (!p) {
      p = ctx.workspace->floats(blockFloats);
      ds = ctx.workspace->floats(blockFloats);
      probs = type == DType::F32 && !r.dropout
                  ? floatElements(p)
                  : typedBlock(ctx, type, blockFloats);
      dsOut = type == DType::F32 ? floatElements(ds)
                                 : typedBlock(ctx, type, blockFloats);
      if (!p || !ds || !probs || !dsOut) {
        error = absl::ResourceExhaustedError(
            "out of device memory for its score blocks");
        return;
      }
    }
    const RowDims d = rowDims(r, block);
    if (!(error = scores(ctx, r, block, q, k, p)).ok())
      return;
    softmaxRows(ctx.stream, d, p, block.count, /*keep=*/true, r.dropout, mask,
                probs);
    const GemmOperand dOut =
        blockOperand(r, dResult, block, block.rowLo, false);
    if (dv.present() &&
        !(error = addValueGradient(ctx, r, block, probs, dOut, dv)).ok())
      return;
    if (!dq.present() && !dk.present())
      return;
    // dP' = dO V^T; dP = dP' * factor; dS = P (dP - sum_l P dP).
    if (!(error = probabilityGradient(ctx, r, block, dOut, v, ds)).ok())
      return;
    softmaxGradRows(ctx.stream, d, p, ds, block.count, r.dropout, mask, dsOut);
    error = addScoreGradients(ctx, r, block, dsOut, q, k, dq, dk);
  });
  return annotate(error, op.kind);
}

} // namespace

void registerAttentionKernels(CudaKernelTable &t) {
  t["ppc.attention"] = {attentionForward, attentionBackward, true, true};
}

} // namespace ppc::runtime::cuda
