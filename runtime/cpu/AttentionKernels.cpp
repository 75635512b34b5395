//===- AttentionKernels.cpp - fused scaled dot-product attention ----------===//
//
// ppc.attention on boxes: query [B..., S, D], key [B..., T, D], value
// [B..., T, Dv], result [B..., S, Dv] (the same leading dims B... on all),
//   result[b, i] = sum_j P'[b, i, j] value[b, j],
//   P = softmax_j(scale * query[b, i] . key[b, j]), P' = P * dropout factor,
// with j > i masked out (probability 0) when `causal` (top-left aligned, as
// PyTorch's is_causal; with `zigzag`, j and i are the natural positions of
// keys and rows stored in zigzag order, ppc/Support/SequenceOrder.h). The
// dropout factor of (b, i, j) is the one ppc.dropout with the same `ratio` and
// `seed` draws for that element of the [B..., S, T] probabilities (DropoutMask
// at its GLOBAL flat index), applied only in training with ratio > 0; so the op
// equals the chain matmul (transpose_rhs), mul by scale, softmax, dropout,
// matmul.
//
// Partitions split the leading dims and S (the query rows): the result box
// gives those ranges; query, key and value must hold them (query all of D,
// key and value all of T and D / Dv), and the result all of Dv. Indices are
// global: causal masking and the dropout index use the global query row, key
// and batch index. With layout "bshd" the rows of every view lie H * D apart
// (AttentionRanges: rowStride), which the GEMMs take as leading dimensions.
//
// A partition split along T as well (given scratch: AttentionOp's staged
// log-sum-exp merge) holds the key block of its key view's box and runs in
// stages, per row r of its block: forward stage 0 writes the block maximum
// m_r (scratch 0, max-reduced by the plan, and scratch 2, kept), the sum
// l_r of exp(score - m_r) (scratch 1) and the unnormalized output
// sum_j exp(score - m_r) P'/P value_j; stage 1, with scratch 0 now the
// row's maximum M_r, scales l_r and the output by exp(m_r - M_r) (the plan
// then sums l_r); stage 2 divides the output by the sum, a partial sum of
// the result. The backward's stage 0 sums P dP over the block into its own
// scratch (scratch 3, summed by the plan: sum_l P dP over all keys); stage 1
// adds dQ, the block's dK and dV with P = exp(score - M_r) / L_r.
//
// Per batch index and tile of at most kRowTile query rows the kernel
// materializes the rows x T score block (OpenBLAS sgemm), takes the softmax
// of each row in place and multiplies by value. With `causal`, keys past the
// tile's last row are masked for every row of it, so only the first
// min(T, last row + 1) columns are computed (in zigzag order, up to the last
// key stored whose natural position some row of the tile sees: a ring's
// block of two chunks later than the tile's rows is skipped, and one whose
// second chunk is later than them is cut after its first). The
// backward recomputes P from query and key (no saved scores, as FlashAttention)
// and ADDS its contributions into the grad views; a partition of S rows
// contributes a partial dK and dV over all of T (the plan sums them).
//
//===----------------------------------------------------------------------===//

#include "AttentionRanges.h"
#include "KernelHelpers.h"
#include "KernelRegistry.h"

#include <algorithm>

namespace ppc::runtime::cpu {
namespace {

/// Query rows per score block: bounds the block's memory and lets a causal
/// block skip the keys past its last row.
constexpr int64_t kRowTile = 128;

/// Query rows [lo, hi) of a partition, processed as one score block.
struct RowTile {
  int64_t lo, hi;
  /// Key columns [0, cols) any of the rows attends to
  /// (AttentionRanges::keyColumns).
  int64_t cols;

  int64_t rows() const { return hi - lo; }
};

/// The partition's rows cut into tiles of at most kRowTile rows.
std::vector<RowTile> rowTiles(const AttentionRanges &r) {
  std::vector<RowTile> tiles;
  for (int64_t lo = r.rowLo; lo < r.rowHi; lo += kRowTile) {
    int64_t hi = std::min(r.rowHi, lo + kRowTile);
    tiles.push_back({lo, hi, r.keyColumns(lo, hi)});
  }
  return tiles;
}

/// The most elements of a tile's score block.
size_t blockSize(const std::vector<RowTile> &tiles) {
  size_t size = 0;
  for (const RowTile &tile : tiles)
    size = std::max(size, static_cast<size_t>(tile.rows() * tile.cols));
  return size;
}

/// The scaled scores (rows x cols of `tile`, row-major) of the tile's rows
/// and the partition's keys. `q` points at the tile's first query row, `k`
/// at key row keyLo; their rows lie `ldq` and `ldk` apart.
void scores(const AttentionRanges &r, const RowTile &tile, const float *q,
            int64_t ldq, const float *k, int64_t ldk, float *p) {
  gemm(false, true, tile.rows(), tile.cols, r.D, r.scale, q, ldq, k, ldk, 0.0f,
       p, tile.cols);
}

/// Keys of the block a tile row sees, whose scores are `line` (maskKeys:
/// in zigzag order, those it does not see are set to -infinity).
int64_t seenBy(const AttentionRanges &r, const RowTile &tile, int64_t row,
               float *line) {
  return maskKeys(r.causal, r.zigzag, r.S, line, tile.cols, tile.lo + row,
                  r.keyLo);
}

/// P: the softmax of the scaled scores of the tile's rows, causal-masked.
void probabilities(const AttentionRanges &r, const RowTile &tile,
                   const float *q, int64_t ldq, const float *k, int64_t ldk,
                   float *p) {
  scores(r, tile, q, ldq, k, ldk, p);
  for (int64_t row = 0; row < tile.rows(); ++row) {
    float *line = p + row * tile.cols;
    softmaxRow(line, seenBy(r, tile, row, line), tile.cols);
  }
}

/// Calls fn(element, factor) for every element of the score block of `tile`
/// with its dropout factor; `base` is probabilityBase of the batch index.
template <typename Fn>
void forEachFactor(const AttentionRanges &r, const RowTile &tile,
                   const DropoutMask &mask, int64_t base, Fn &&fn) {
  int64_t cols = tile.cols;
  for (int64_t row = 0; row < tile.rows(); ++row) {
    int64_t flat = base + (tile.lo + row) * r.T + r.keyLo;
    for (int64_t j = 0; j < cols; ++j)
      fn(row * cols + j, mask.factor(flat + j));
  }
}

/// Forward stages of a key block (see the file comment).
absl::Status blockForward(const OpDesc &op, const KernelContext &ctx,
                          const std::vector<TensorView> &inputs,
                          std::vector<TensorView> &outputs,
                          std::vector<TensorView> &scratch) {
  AttentionRanges r;
  if (absl::Status s =
          forwardRanges(op, ctx, inputs, outputs, r, /*keyBlock=*/true);
      !s.ok())
    return s;
  if (absl::Status s = checkStatistics(op, r, scratch, 3); !s.ok())
    return s;
  TensorView &result = outputs[0];
  const TensorView &q = inputs[0], &k = inputs[1], &v = inputs[2];
  float *max = scratch[0].data, *sum = scratch[1].data,
        *blockMax = scratch[2].data;
  const int64_t ldq = rowStride(r, q), ldk = rowStride(r, k),
                ldv = rowStride(r, v), ldo = rowStride(r, result);
  std::vector<RowTile> tiles = rowTiles(r);
  std::vector<float> p(blockSize(tiles));
  DropoutMask mask(op.getInt("seed", 0), ctx.step, r.ratio);
  forEachIndex(r.batchLo, r.batchHi, [&](const std::vector<int64_t> &batch) {
    int64_t base = probabilityBase(batch, r);
    for (const RowTile &tile : tiles) {
      float *out = result.data + offsetIn(r, result, batch, tile.lo, 0);
      const int64_t stat = statIndex(r, batch, tile.lo);
      if (ctx.stage == 1 || ctx.stage == 2) {
        for (int64_t row = 0; row < tile.rows(); ++row) {
          const int64_t i = stat + row;
          float factor;
          if (ctx.stage == 1) {
            factor = blockMax[i] == -INFINITY ? 0.0f
                                              : std::exp(blockMax[i] - max[i]);
            sum[i] *= factor;
          } else {
            factor = 1.0f / sum[i];
          }
          for (int64_t c = 0; c < r.Dv; ++c)
            out[row * ldo + c] *= factor;
        }
        continue;
      }
      const bool merge = ctx.stage == 3;
      if (tile.cols == 0) { // a causal block past every row of the tile
        if (merge)
          continue; // nothing to merge
        for (int64_t row = 0; row < tile.rows(); ++row) {
          max[stat + row] = blockMax[stat + row] = -INFINITY;
          sum[stat + row] = 0.0f;
          std::fill(out + row * ldo, out + row * ldo + r.Dv, 0.0f);
        }
        continue;
      }
      scores(r, tile, q.data + offsetIn(r, q, batch, tile.lo, 0), ldq,
             k.data + offsetIn(r, k, batch, r.keyLo, 0), ldk, p.data());
      for (int64_t row = 0; row < tile.rows(); ++row) {
        float *line = p.data() + row * tile.cols;
        const int64_t seen = seenBy(r, tile, row, line);
        float m = -INFINITY;
        for (int64_t j = 0; j < seen; ++j)
          m = std::max(m, line[j]);
        double total = 0;
        for (int64_t j = 0; j < seen; ++j) {
          line[j] = std::exp(line[j] - m);
          total += line[j];
        }
        std::fill(line + seen, line + tile.cols, 0.0f);
        const int64_t i = stat + row;
        if (!merge) {
          max[i] = blockMax[i] = m;
          sum[i] = static_cast<float>(total);
          continue;
        }
        // Ring: this block's statistics and output merged into the rows'
        // so far, both rescaled to the larger maximum.
        const float newMax = std::max(max[i], m);
        if (newMax == -INFINITY)
          continue; // no key seen yet: the row stays empty
        const float kept = std::exp(max[i] - newMax),
                    added = std::exp(m - newMax);
        sum[i] = kept * sum[i] + added * static_cast<float>(total);
        max[i] = newMax;
        for (int64_t c = 0; c < r.Dv; ++c)
          out[row * ldo + c] *= kept;
        for (int64_t j = 0; j < seen; ++j)
          line[j] *= added;
      }
      if (r.dropout)
        forEachFactor(r, tile, mask, base,
                      [&](int64_t e, float factor) { p[e] *= factor; });
      gemm(false, false, tile.rows(), r.Dv, tile.cols, 1.0f, p.data(),
           tile.cols, v.data + offsetIn(r, v, batch, r.keyLo, 0), ldv,
           merge ? 1.0f : 0.0f, out, ldo);
    }
  });
  return absl::OkStatus();
}

absl::Status attentionForward(const OpDesc &op, const KernelContext &ctx,
                              const std::vector<TensorView> &inputs,
                              std::vector<TensorView> &outputs,
                              std::vector<TensorView> &scratch) {
  if (!scratch.empty())
    return blockForward(op, ctx, inputs, outputs, scratch);
  AttentionRanges r;
  if (absl::Status s = forwardRanges(op, ctx, inputs, outputs, r); !s.ok())
    return s;
  TensorView &result = outputs[0];
  const TensorView &q = inputs[0], &k = inputs[1], &v = inputs[2];
  std::vector<RowTile> tiles = rowTiles(r);
  if (tiles.empty())
    return absl::OkStatus();
  std::vector<float> p(blockSize(tiles));
  DropoutMask mask(op.getInt("seed", 0), ctx.step, r.ratio);
  const int64_t ldq = rowStride(r, q), ldk = rowStride(r, k),
                ldv = rowStride(r, v), ldo = rowStride(r, result);
  forEachIndex(r.batchLo, r.batchHi, [&](const std::vector<int64_t> &batch) {
    const float *kAll = k.data + offsetIn(r, k, batch, 0, 0);
    const float *vAll = v.data + offsetIn(r, v, batch, 0, 0);
    int64_t base = probabilityBase(batch, r);
    for (const RowTile &tile : tiles) {
      probabilities(r, tile, q.data + offsetIn(r, q, batch, tile.lo, 0), ldq,
                    kAll, ldk, p.data());
      if (r.dropout)
        forEachFactor(r, tile, mask, base,
                      [&](int64_t e, float factor) { p[e] *= factor; });
      gemm(false, false, tile.rows(), r.Dv, tile.cols, 1.0f, p.data(),
           tile.cols, vAll, ldv, 0.0f,
           result.data + offsetIn(r, result, batch, tile.lo, 0), ldo);
    }
  });
  return absl::OkStatus();
}

/// dot[row] = dO[row] . O[row] over the partition's rows (double sums): a
/// ring's sum_l P dP over every key, without the keys.
absl::Status rowDots(const OpDesc &op, const AttentionRanges &r,
                     const std::vector<TensorView> &outputs,
                     const TensorView &dResult, float *dot) {
  if (outputs.empty() || !outputs[0].data)
    return absl::InvalidArgumentError(
        op.kind + ": a ring's backward reads the forward's result");
  const TensorView &result = outputs[0];
  const int64_t ldo = rowStride(r, result), ldd = rowStride(r, dResult);
  forEachIndex(r.batchLo, r.batchHi, [&](const std::vector<int64_t> &batch) {
    const float *o = result.data + offsetIn(r, result, batch, r.rowLo, 0);
    const float *d = dResult.data + offsetIn(r, dResult, batch, r.rowLo, 0);
    const int64_t stat = statIndex(r, batch, r.rowLo);
    for (int64_t row = 0; row < r.rowHi - r.rowLo; ++row) {
      double total = 0;
      for (int64_t c = 0; c < r.Dv; ++c)
        total += static_cast<double>(o[row * ldo + c]) * d[row * ldd + c];
      dot[stat + row] = static_cast<float>(total);
    }
  });
  return absl::OkStatus();
}

/// Backward stages of a key block (see the file comment).
absl::Status blockBackward(const OpDesc &op, const KernelContext &ctx,
                           const std::vector<TensorView> &inputs,
                           const std::vector<TensorView> &outputs,
                           const std::vector<TensorView> &outputGrads,
                           std::vector<TensorView> &inputGrads,
                           std::vector<TensorView> &scratch) {
  AttentionRanges r;
  if (absl::Status s = backwardRanges(op, ctx, inputs, outputs, outputGrads,
                                      inputGrads, r, /*keyBlock=*/true);
      !s.ok())
    return s;
  if (absl::Status s = checkStatistics(op, r, scratch, 4); !s.ok())
    return s;
  const float *max = scratch[0].data, *sum = scratch[1].data;
  float *dot = scratch[3].data;
  const TensorView &dResult = outputGrads[0];
  if (ctx.stage == 2) // ring: sum_l P dP of all keys is dO . O, per row
    return rowDots(op, r, outputs, dResult, dot);
  const TensorView &q = inputs[0], &k = inputs[1], &v = inputs[2];
  float *dq = inputGrads[0].data, *dk = inputGrads[1].data,
        *dv = inputGrads[2].data;
  std::vector<RowTile> tiles = rowTiles(r);
  size_t block = blockSize(tiles);
  // p: P; pd: P' (P when there is no dropout); ds: dP', then dP, then dS.
  std::vector<float> p(block), ds(block), pd(r.dropout ? block : 0);
  DropoutMask mask(op.getInt("seed", 0), ctx.step, r.ratio);
  const int64_t ldq = rowStride(r, q), ldk = rowStride(r, k),
                ldv = rowStride(r, v), ldo = rowStride(r, dResult);
  forEachIndex(r.batchLo, r.batchHi, [&](const std::vector<int64_t> &batch) {
    const float *kBlock = k.data + offsetIn(r, k, batch, r.keyLo, 0);
    const float *vBlock = v.data + offsetIn(r, v, batch, r.keyLo, 0);
    int64_t base = probabilityBase(batch, r);
    for (const RowTile &tile : tiles) {
      const int64_t rows = tile.rows(), cols = tile.cols,
                    stat = statIndex(r, batch, tile.lo);
      if (cols == 0) { // a causal block past every row: no contribution
        if (ctx.stage == 0)
          std::fill(dot + stat, dot + stat + rows, 0.0f);
        continue;
      }
      const float *qRows = q.data + offsetIn(r, q, batch, tile.lo, 0);
      const float *dOut =
          dResult.data + offsetIn(r, dResult, batch, tile.lo, 0);
      scores(r, tile, qRows, ldq, kBlock, ldk, p.data());
      for (int64_t row = 0; row < rows; ++row) {
        float *line = p.data() + row * cols;
        const int64_t seen = seenBy(r, tile, row, line);
        const float inverse = 1.0f / sum[stat + row];
        for (int64_t j = 0; j < seen; ++j)
          line[j] = std::exp(line[j] - max[stat + row]) * inverse;
        std::fill(line + seen, line + cols, 0.0f);
      }
      // dP' = dO V^T; dP = dP' * factor.
      gemm(false, true, rows, cols, r.Dv, 1.0f, dOut, ldo, vBlock, ldv, 0.0f,
           ds.data(), cols);
      if (r.dropout)
        forEachFactor(r, tile, mask, base, [&](int64_t e, float factor) {
          ds[e] *= factor;
          pd[e] = p[e] * factor;
        });
      if (ctx.stage == 0) { // the block's share of sum_l P dP
        for (int64_t row = 0; row < rows; ++row) {
          double partial = 0;
          for (int64_t j = 0; j < cols; ++j)
            partial += static_cast<double>(p[row * cols + j]) *
                       ds[row * cols + j];
          dot[stat + row] = static_cast<float>(partial);
        }
        continue;
      }
      if (dv) // dV += P'^T dO
        gemm(true, false, cols, r.Dv, rows, 1.0f,
             r.dropout ? pd.data() : p.data(), cols, dOut, ldo, 1.0f,
             dv + offsetIn(r, inputGrads[2], batch, r.keyLo, 0),
             rowStride(r, inputGrads[2]));
      for (int64_t row = 0; row < rows; ++row) // dS = P (dP - sum_l P dP)
        for (int64_t j = 0; j < cols; ++j)
          ds[row * cols + j] =
              p[row * cols + j] * (ds[row * cols + j] - dot[stat + row]);
      if (dq) // dQ += scale * dS K
        gemm(false, false, rows, r.D, cols, r.scale, ds.data(), cols, kBlock,
             ldk, 1.0f, dq + offsetIn(r, inputGrads[0], batch, tile.lo, 0),
             rowStride(r, inputGrads[0]));
      if (dk) // dK += scale * dS^T Q
        gemm(true, false, cols, r.D, rows, r.scale, ds.data(), cols, qRows,
             ldq, 1.0f, dk + offsetIn(r, inputGrads[1], batch, r.keyLo, 0),
             rowStride(r, inputGrads[1]));
    }
  });
  return absl::OkStatus();
}

absl::Status attentionBackward(const OpDesc &op, const KernelContext &ctx,
                               const std::vector<TensorView> &inputs,
                               const std::vector<TensorView> &outputs,
                               const std::vector<TensorView> &outputGrads,
                               std::vector<TensorView> &inputGrads,
                               std::vector<TensorView> &scratch) {
  if (!scratch.empty())
    return blockBackward(op, ctx, inputs, outputs, outputGrads, inputGrads,
                         scratch);
  AttentionRanges r;
  if (absl::Status s =
          backwardRanges(op, ctx, inputs, outputs, outputGrads, inputGrads, r);
      !s.ok())
    return s;
  const TensorView &dResult = outputGrads[0];
  const TensorView &q = inputs[0], &k = inputs[1], &v = inputs[2];
  float *dq = inputGrads[0].data, *dk = inputGrads[1].data,
        *dv = inputGrads[2].data;
  if (!dq && !dk && !dv)
    return absl::OkStatus();
  std::vector<RowTile> tiles = rowTiles(r);
  if (tiles.empty())
    return absl::OkStatus();
  size_t block = blockSize(tiles);
  // p: P; pd: P' (P when there is no dropout); ds: dP', then dS.
  std::vector<float> p(block), ds(block);
  std::vector<float> pd(r.dropout && dv ? block : 0);
  DropoutMask mask(op.getInt("seed", 0), ctx.step, r.ratio);
  const int64_t ldq = rowStride(r, q), ldk = rowStride(r, k),
                ldv = rowStride(r, v), ldo = rowStride(r, dResult);
  forEachIndex(r.batchLo, r.batchHi, [&](const std::vector<int64_t> &batch) {
    const float *kAll = k.data + offsetIn(r, k, batch, 0, 0);
    const float *vAll = v.data + offsetIn(r, v, batch, 0, 0);
    int64_t base = probabilityBase(batch, r);
    for (const RowTile &tile : tiles) {
      int64_t rows = tile.rows(), cols = tile.cols;
      const float *qRows = q.data + offsetIn(r, q, batch, tile.lo, 0);
      const float *dOut =
          dResult.data + offsetIn(r, dResult, batch, tile.lo, 0);
      probabilities(r, tile, qRows, ldq, kAll, ldk, p.data());
      if (dv) { // dV[0, cols) += P'^T dO
        const float *pUsed = p.data();
        if (r.dropout) {
          forEachFactor(r, tile, mask, base, [&](int64_t e, float factor) {
            pd[e] = p[e] * factor;
          });
          pUsed = pd.data();
        }
        gemm(true, false, cols, r.Dv, rows, 1.0f, pUsed, cols, dOut, ldo, 1.0f,
             dv + offsetIn(r, inputGrads[2], batch, 0, 0),
             rowStride(r, inputGrads[2]));
      }
      if (!dq && !dk)
        continue;
      // dP' = dO V^T; dP = dP' * factor; dS = P (dP - sum_l P dP).
      gemm(false, true, rows, cols, r.Dv, 1.0f, dOut, ldo, vAll, ldv, 0.0f,
           ds.data(), cols);
      if (r.dropout)
        forEachFactor(r, tile, mask, base,
                      [&](int64_t e, float factor) { ds[e] *= factor; });
      for (int64_t row = 0; row < rows; ++row)
        softmaxGradRow(p.data() + row * cols, ds.data() + row * cols, cols);
      if (dq) // dQ += scale * dS K
        gemm(false, false, rows, r.D, cols, r.scale, ds.data(), cols, kAll, ldk,
             1.0f, dq + offsetIn(r, inputGrads[0], batch, tile.lo, 0),
             rowStride(r, inputGrads[0]));
      if (dk) // dK[0, cols) += scale * dS^T Q
        gemm(true, false, cols, r.D, rows, r.scale, ds.data(), cols, qRows, ldq,
             1.0f, dk + offsetIn(r, inputGrads[1], batch, 0, 0),
             rowStride(r, inputGrads[1]));
    }
  });
  return absl::OkStatus();
}

/// A key block's statistics: three [rows] forward, one more backward.
std::vector<std::vector<int64_t>>
attentionScratchShapes(const OpDesc &op, const std::vector<TensorView> &inputs,
                       bool backward) {
  const KeyBlockShape shape = keyBlockShape(op, inputs);
  if (!shape.block)
    return {};
  return std::vector<std::vector<int64_t>>(backward ? 1 : 3, {shape.rows});
}

int32_t attentionStages(const OpDesc &op,
                        const std::vector<TensorView> &inputs, bool backward) {
  if (!keyBlockShape(op, inputs).block)
    return 1;
  return backward ? 2 : 3;
}

} // namespace

void registerAttentionKernels(KernelTable &table) {
  KernelImpl attention{attentionForward, attentionBackward,
                       attentionScratchShapes, 1};
  attention.stages = attentionStages;
  table["ppc.attention"] = std::move(attention);
}

} // namespace ppc::runtime::cpu
