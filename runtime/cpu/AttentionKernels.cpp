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
// and batch index. With layout "bshd" the rows of every view lie H * D apart
// (AttentionRanges: rowStride), which the GEMMs take as leading dimensions.
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
/// row, `k` at key row 0; their rows lie `ldq` and `ldk` apart.
void probabilities(const AttentionRanges &r, const RowTile &tile,
                   const float *q, int64_t ldq, const float *k, int64_t ldk,
                   float *p) {
  int64_t rows = tile.rows(), cols = tile.cols;
  gemm(false, true, rows, cols, r.D, r.scale, q, ldq, k, ldk, 0.0f, p, cols);
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

} // namespace

void registerAttentionKernels(KernelTable &table) {
  table["ppc.attention"] = {attentionForward, attentionBackward, nullptr, 1};
}

} // namespace ppc::runtime::cpu
