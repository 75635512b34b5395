//===- AttentionKernels.cpp - fused scaled dot-product attention ----------===//
//
// ppc.attention on boxes: query [B..., S, D], key [B..., T, D], value
// [B..., T, Dv], result [B..., S, Dv] (the same leading dims B... on all),
//   result[b, i] = sum_j P'[b, i, j] value[b, j],
//   P = softmax_j(scale * query[b, i] . key[b, j]), P' = P * dropout factor,
// with j > i masked out (probability 0) when `causal` (top-left aligned, as
// PyTorch's is_causal). The dropout factor of (b, i, j) is the one
// ppc.dropout with the same `ratio` and `seed` draws for that element of the
// [B..., S, T] probabilities (DropoutMask at its GLOBAL flat index), applied
// only in training with ratio > 0; so the op equals the chain matmul
// (transpose_rhs), mul by scale, softmax, dropout, matmul.
//
// Partitions split only the leading dims and S (the query rows): the result
// box gives those ranges; query, key and value must hold them (query all of
// D, key and value all of T and D / Dv), and the result all of Dv. Indices
// are global: causal masking and the dropout index use the global query row
// and batch index.
//
// Per batch index and tile of at most kRowTile query rows the kernel
// materializes the rows x T score block (OpenBLAS sgemm), takes the softmax
// of each row in place and multiplies by value. With `causal`, keys past the
// tile's last row are masked for every row of it, so only the first
// min(T, last row + 1) columns are computed. The backward recomputes P from
// query and key (no saved scores, as FlashAttention) and ADDS its contributions
// into the grad views; a partition of S rows contributes a partial dK and dV
// over all of T (the plan sums them).
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
  /// Key columns [0, cols) any of the rows attends to: with `causal`, row i
  /// sees keys [0, i], so none past the last row.
  int64_t cols;

  int64_t rows() const { return hi - lo; }
};

/// The partition's rows cut into tiles of at most kRowTile rows.
std::vector<RowTile> rowTiles(const AttentionRanges &r) {
  std::vector<RowTile> tiles;
  for (int64_t lo = r.rowLo; lo < r.rowHi; lo += kRowTile) {
    int64_t hi = std::min(r.rowHi, lo + kRowTile);
    tiles.push_back({lo, hi, r.keyColumns(hi)});
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

/// P (rows x cols of `tile`, row-major): the softmax of the scaled scores
/// of the tile's rows, causal-masked. `q` points at the tile's first query
/// row, `k` at key row 0.
void probabilities(const AttentionRanges &r, const RowTile &tile,
                   const float *q, const float *k, float *p) {
  int64_t rows = tile.rows(), cols = tile.cols;
  gemm(false, true, rows, cols, r.D, r.scale, q, r.D, k, r.D, 0.0f, p, cols);
  for (int64_t row = 0; row < rows; ++row)
    softmaxRow(p + row * cols, keysSeen(r.causal, cols, tile.lo + row), cols);
}

/// Calls fn(element, factor) for every element of the score block of `tile`
/// with its dropout factor; `base` is probabilityBase of the batch index.
template <typename Fn>
void forEachFactor(const AttentionRanges &r, const RowTile &tile,
                   const DropoutMask &mask, int64_t base, Fn &&fn) {
  int64_t cols = tile.cols;
  for (int64_t row = 0; row < tile.rows(); ++row) {
    int64_t flat = base + (tile.lo + row) * r.T;
    for (int64_t j = 0; j < cols; ++j)
      fn(row * cols + j, mask.factor(flat + j));
  }
}

absl::Status attentionForward(const OpDesc &op, const KernelContext &ctx,
                              const std::vector<TensorView> &inputs,
                              std::vector<TensorView> &outputs,
                              std::vector<TensorView> &) {
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
  forEachIndex(r.batchLo, r.batchHi, [&](const std::vector<int64_t> &batch) {
    const float *kAll = k.data + offsetIn(k, batch, 0, 0);
    const float *vAll = v.data + offsetIn(v, batch, 0, 0);
    int64_t base = probabilityBase(batch, q.shape, r);
    for (const RowTile &tile : tiles) {
      probabilities(r, tile, q.data + offsetIn(q, batch, tile.lo, 0), kAll,
                    p.data());
      if (r.dropout)
        forEachFactor(r, tile, mask, base,
                      [&](int64_t e, float factor) { p[e] *= factor; });
      gemm(false, false, tile.rows(), r.Dv, tile.cols, 1.0f, p.data(),
           tile.cols, vAll, r.Dv, 0.0f,
           result.data + offsetIn(result, batch, tile.lo, 0), r.Dv);
    }
  });
  return absl::OkStatus();
}

absl::Status attentionBackward(const OpDesc &op, const KernelContext &ctx,
                               const std::vector<TensorView> &inputs,
                               const std::vector<TensorView> &outputs,
                               const std::vector<TensorView> &outputGrads,
                               std::vector<TensorView> &inputGrads,
                               std::vector<TensorView> &) {
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
  forEachIndex(r.batchLo, r.batchHi, [&](const std::vector<int64_t> &batch) {
    const float *kAll = k.data + offsetIn(k, batch, 0, 0);
    const float *vAll = v.data + offsetIn(v, batch, 0, 0);
    int64_t base = probabilityBase(batch, q.shape, r);
    for (const RowTile &tile : tiles) {
      int64_t rows = tile.rows(), cols = tile.cols;
      const float *qRows = q.data + offsetIn(q, batch, tile.lo, 0);
      const float *dOut = dResult.data + offsetIn(dResult, batch, tile.lo, 0);
      probabilities(r, tile, qRows, kAll, p.data());
      if (dv) { // dV[0, cols) += P'^T dO
        const float *pUsed = p.data();
        if (r.dropout) {
          forEachFactor(r, tile, mask, base, [&](int64_t e, float factor) {
            pd[e] = p[e] * factor;
          });
          pUsed = pd.data();
        }
        gemm(true, false, cols, r.Dv, rows, 1.0f, pUsed, cols, dOut, r.Dv, 1.0f,
             dv + offsetIn(inputGrads[2], batch, 0, 0), r.Dv);
      }
      if (!dq && !dk)
        continue;
      // dP' = dO V^T; dP = dP' * factor; dS = P (dP - sum_l P dP).
      gemm(false, true, rows, cols, r.Dv, 1.0f, dOut, r.Dv, vAll, r.Dv, 0.0f,
           ds.data(), cols);
      if (r.dropout)
        forEachFactor(r, tile, mask, base,
                      [&](int64_t e, float factor) { ds[e] *= factor; });
      for (int64_t row = 0; row < rows; ++row)
        softmaxGradRow(p.data() + row * cols, ds.data() + row * cols, cols);
      if (dq) // dQ += scale * dS K
        gemm(false, false, rows, r.D, cols, r.scale, ds.data(), cols, kAll, r.D,
             1.0f, dq + offsetIn(inputGrads[0], batch, tile.lo, 0), r.D);
      if (dk) // dK[0, cols) += scale * dS^T Q
        gemm(true, false, cols, r.D, rows, r.scale, ds.data(), cols, qRows, r.D,
             1.0f, dk + offsetIn(inputGrads[1], batch, 0, 0), r.D);
    }
  });
  return absl::OkStatus();
}

} // namespace

void registerAttentionKernels(KernelTable &table) {
  table["ppc.attention"] = {attentionForward, attentionBackward, nullptr, 1};
}

} // namespace ppc::runtime::cpu
