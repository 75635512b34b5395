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

#include "KernelHelpers.h"
#include "KernelRegistry.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ppc::runtime::cpu {
namespace {

/// The ranges of one attention partition, checked against the views.
struct AttentionRanges {
  int64_t rank;
  /// The leading (batch) dims' ranges and the query rows.
  std::vector<int64_t> batchLo, batchHi;
  int64_t rowLo, rowHi;
  /// Global sizes.
  int64_t S, T, D, Dv;
  float scale;
  bool causal;
  /// Dropout is applied (training with ratio > 0).
  bool dropout;
  double ratio;
};

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
    tiles.push_back({lo, hi, r.causal ? std::min(r.T, hi) : r.T});
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

/// True if `view` holds [lo, hi) along its leading dims.
bool holdsBatch(const TensorView &view, const std::vector<int64_t> &lo,
                const std::vector<int64_t> &hi) {
  for (size_t d = 0; d < lo.size(); ++d)
    if (lo[d] < hi[d] && (lo[d] < view.lo[d] || hi[d] > view.hi[d]))
      return false;
  return true;
}

bool holdsWholeDim(const TensorView &view, int64_t d) {
  return view.lo[d] == 0 && view.hi[d] == view.shape[d];
}

/// Checks the operand views (and the result or result grad box `result`)
/// and fills `r`.
KernelStatus attentionRanges(const OpDesc &op, const KernelContext &ctx,
                             const std::vector<TensorView> &inputs,
                             const TensorView &result, AttentionRanges &r) {
  if (inputs.size() != 3)
    return op.kind + ": expects 3 operands (query, key, value), got " +
           std::to_string(inputs.size());
  const TensorView &q = inputs[0], &k = inputs[1], &v = inputs[2];
  int64_t rank = q.rank();
  r.rank = rank;
  if (rank < 2)
    return op.kind + ": operands and result must have rank >= 2";
  for (const TensorView *view : {&k, &v, &result})
    if (view->rank() != rank || view->lo.size() != view->shape.size() ||
        view->hi.size() != view->shape.size())
      return op.kind + ": operands and result must have the same rank";
  if (q.lo.size() != q.shape.size() || q.hi.size() != q.shape.size())
    return op.kind + ": query view's box does not match its rank";
  int64_t lead = rank - 2;
  for (int64_t d = 0; d < lead; ++d)
    if (k.shape[d] != q.shape[d] || v.shape[d] != q.shape[d] ||
        result.shape[d] != q.shape[d])
      return op.kind + ": leading dims differ between operands and result";
  r.S = q.shape[rank - 2];
  r.D = q.shape[rank - 1];
  r.T = k.shape[rank - 2];
  r.Dv = v.shape[rank - 1];
  if (k.shape[rank - 1] != r.D)
    return op.kind + ": key's D differs from query's";
  if (v.shape[rank - 2] != r.T)
    return op.kind + ": value's T differs from key's";
  if (result.shape[rank - 2] != r.S || result.shape[rank - 1] != r.Dv)
    return op.kind + ": result shape must be [B..., S, Dv]";

  if (!holdsWholeDim(q, rank - 1))
    return op.kind + ": query must cover its whole D dim";
  if (!holdsWholeDim(k, rank - 2))
    return op.kind + ": key must cover its whole T dim";
  if (!holdsWholeDim(k, rank - 1))
    return op.kind + ": key must cover its whole D dim";
  if (!holdsWholeDim(v, rank - 2))
    return op.kind + ": value must cover its whole T dim";
  if (!holdsWholeDim(v, rank - 1))
    return op.kind + ": value must cover its whole Dv dim";
  if (!holdsWholeDim(result, rank - 1))
    return op.kind + ": result must cover its whole Dv dim";

  r.batchLo.assign(result.lo.begin(), result.lo.end() - 2);
  r.batchHi.assign(result.hi.begin(), result.hi.end() - 2);
  r.rowLo = result.lo[rank - 2];
  r.rowHi = result.hi[rank - 2];
  bool empty = r.rowHi <= r.rowLo;
  for (int64_t d = 0; d < lead; ++d)
    empty |= r.batchHi[d] <= r.batchLo[d];
  if (!empty) {
    if (r.rowLo < q.lo[rank - 2] || r.rowHi > q.hi[rank - 2])
      return op.kind + ": query box does not hold the result's S rows";
    for (auto [view, what] :
         {std::pair{&q, "query"}, std::pair{&k, "key"}, std::pair{&v, "value"}})
      if (!holdsBatch(*view, r.batchLo, r.batchHi))
        return op.kind + ": " + what +
               " box does not hold the result's leading (batch) dims";
  }

  r.scale = static_cast<float>(op.getFloat("scale", 1.0));
  r.causal = op.getInt("causal", 0) != 0;
  r.ratio = op.getFloat("ratio", 0.0);
  if (!(r.ratio >= 0 && r.ratio < 1))
    return op.kind + ": ratio " + std::to_string(r.ratio) +
           " must be in [0, 1)";
  r.dropout = ctx.training && r.ratio > 0;
  return "";
}

/// The global index [batch..., row, col] as a vector.
std::vector<int64_t> indexOf(const std::vector<int64_t> &batch, int64_t row,
                             int64_t col) {
  std::vector<int64_t> index = batch;
  index.push_back(row);
  index.push_back(col);
  return index;
}

/// Flat index of element (batch, 0, 0) of the global [B..., S, T] tensor.
int64_t probabilityBase(const std::vector<int64_t> &batch,
                        const std::vector<int64_t> &shape,
                        const AttentionRanges &r) {
  int64_t flat = 0;
  for (size_t d = 0; d < batch.size(); ++d)
    flat = flat * shape[d] + batch[d];
  return flat * r.S * r.T;
}

/// P (rows x cols of `tile`, row-major): the softmax of the scaled scores
/// of the tile's rows, causal-masked. `q` points at the tile's first query
/// row, `k` at key row 0.
void probabilities(const AttentionRanges &r, const RowTile &tile,
                   const float *q, const float *k, float *p) {
  int64_t rows = tile.rows(), cols = tile.cols;
  gemm(false, true, rows, cols, r.D, r.scale, q, r.D, k, r.D, 0.0f, p, cols);
  for (int64_t row = 0; row < rows; ++row) {
    float *line = p + row * cols;
    // Keys [0, seen) are attended; the rest is masked (probability 0).
    int64_t seen = r.causal ? std::min(cols, tile.lo + row + 1) : cols;
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < seen; ++j)
      max = std::max(max, line[j]);
    double sum = 0;
    for (int64_t j = 0; j < seen; ++j) {
      line[j] = std::exp(line[j] - max);
      sum += line[j];
    }
    float inverse = static_cast<float>(1.0 / sum);
    for (int64_t j = 0; j < seen; ++j)
      line[j] *= inverse;
    std::fill(line + seen, line + cols, 0.0f);
  }
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

KernelStatus attentionForward(const OpDesc &op, const KernelContext &ctx,
                              const std::vector<TensorView> &inputs,
                              std::vector<TensorView> &outputs,
                              std::vector<TensorView> &) {
  if (outputs.size() != 1)
    return op.kind + ": expects 1 result, got " +
           std::to_string(outputs.size());
  TensorView &result = outputs[0];
  AttentionRanges r;
  if (KernelStatus s = attentionRanges(op, ctx, inputs, result, r); !s.empty())
    return s;
  const TensorView &q = inputs[0], &k = inputs[1], &v = inputs[2];
  std::vector<RowTile> tiles = rowTiles(r);
  if (tiles.empty())
    return "";
  std::vector<float> p(blockSize(tiles));
  DropoutMask mask(op.getInt("seed", 0), ctx.step, r.ratio);
  forEachIndex(r.batchLo, r.batchHi, [&](const std::vector<int64_t> &batch) {
    const float *kAll = k.data + k.offsetOf(indexOf(batch, 0, 0));
    const float *vAll = v.data + v.offsetOf(indexOf(batch, 0, 0));
    int64_t base = probabilityBase(batch, q.shape, r);
    for (const RowTile &tile : tiles) {
      std::vector<int64_t> rowsAt = indexOf(batch, tile.lo, 0);
      probabilities(r, tile, q.data + q.offsetOf(rowsAt), kAll, p.data());
      if (r.dropout)
        forEachFactor(r, tile, mask, base,
                      [&](int64_t e, float factor) { p[e] *= factor; });
      gemm(false, false, tile.rows(), r.Dv, tile.cols, 1.0f, p.data(),
           tile.cols, vAll, r.Dv, 0.0f, result.data + result.offsetOf(rowsAt),
           r.Dv);
    }
  });
  return "";
}

KernelStatus attentionBackward(const OpDesc &op, const KernelContext &ctx,
                               const std::vector<TensorView> &inputs,
                               const std::vector<TensorView> &outputs,
                               const std::vector<TensorView> &outputGrads,
                               std::vector<TensorView> &inputGrads,
                               std::vector<TensorView> &) {
  if (outputGrads.size() != 1)
    return op.kind + ": expects 1 result grad";
  if (KernelStatus s =
          checkGradBoxes(op, inputs, outputs, outputGrads, inputGrads);
      !s.empty())
    return s;
  const TensorView &dResult = outputGrads[0];
  AttentionRanges r;
  if (KernelStatus s = attentionRanges(op, ctx, inputs, dResult, r); !s.empty())
    return s;
  const TensorView &q = inputs[0], &k = inputs[1], &v = inputs[2];
  float *dq = inputGrads[0].data, *dk = inputGrads[1].data,
        *dv = inputGrads[2].data;
  if (!dq && !dk && !dv)
    return "";
  std::vector<RowTile> tiles = rowTiles(r);
  if (tiles.empty())
    return "";
  size_t block = blockSize(tiles);
  // p: P; pd: P' (P when there is no dropout); ds: dP', then dS.
  std::vector<float> p(block), ds(block);
  std::vector<float> pd(r.dropout && dv ? block : 0);
  DropoutMask mask(op.getInt("seed", 0), ctx.step, r.ratio);
  forEachIndex(r.batchLo, r.batchHi, [&](const std::vector<int64_t> &batch) {
    std::vector<int64_t> keysAt = indexOf(batch, 0, 0);
    const float *kAll = k.data + k.offsetOf(keysAt);
    const float *vAll = v.data + v.offsetOf(keysAt);
    int64_t base = probabilityBase(batch, q.shape, r);
    for (const RowTile &tile : tiles) {
      int64_t rows = tile.rows(), cols = tile.cols;
      std::vector<int64_t> rowsAt = indexOf(batch, tile.lo, 0);
      const float *qRows = q.data + q.offsetOf(rowsAt);
      const float *dOut = dResult.data + dResult.offsetOf(rowsAt);
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
             dv + inputGrads[2].offsetOf(keysAt), r.Dv);
      }
      if (!dq && !dk)
        continue;
      // dP' = dO V^T; dP = dP' * factor; dS = P (dP - sum_l P dP).
      gemm(false, true, rows, cols, r.Dv, 1.0f, dOut, r.Dv, vAll, r.Dv, 0.0f,
           ds.data(), cols);
      if (r.dropout)
        forEachFactor(r, tile, mask, base,
                      [&](int64_t e, float factor) { ds[e] *= factor; });
      for (int64_t row = 0; row < rows; ++row) {
        const float *pLine = p.data() + row * cols;
        float *dLine = ds.data() + row * cols;
        double dot = 0;
        for (int64_t j = 0; j < cols; ++j)
          dot += static_cast<double>(pLine[j]) * dLine[j];
        float sum = static_cast<float>(dot);
        for (int64_t j = 0; j < cols; ++j)
          dLine[j] = pLine[j] * (dLine[j] - sum);
      }
      if (dq) // dQ += scale * dS K
        gemm(false, false, rows, r.D, cols, r.scale, ds.data(), cols, kAll, r.D,
             1.0f, dq + inputGrads[0].offsetOf(rowsAt), r.D);
      if (dk) // dK[0, cols) += scale * dS^T Q
        gemm(true, false, cols, r.D, rows, r.scale, ds.data(), cols, qRows, r.D,
             1.0f, dk + inputGrads[1].offsetOf(keysAt), r.D);
    }
  });
  return "";
}

} // namespace

void registerAttentionKernels(KernelTable &table) {
  table["ppc.attention"] = {attentionForward, attentionBackward, nullptr, 1};
}

} // namespace ppc::runtime::cpu
