//===- AttentionRanges.h - an attention partition ---------------*- C++ -*-===//
//
// Private to the backends (runtime/cpu, runtime/cuda), shared by their
// ppc.attention kernels: which batch (leading dims) and query-row ranges a
// partition's result (or result grad) box gives, checked against what the
// query, key and value views hold (the same errors on every backend); the
// offsets and flat dropout indices of those ranges; and the per-row softmax
// and softmax gradient of a score block (PPC_HD), which both backends run
// alike. Partitions split the leading dims and S: query must hold all of D,
// key and value all of D / Dv, the result all of Dv. A partition split along
// T too (a key block, the staged log-sum-exp merge of AttentionOp) takes its
// keys [keyLo, keyHi) from the key view's box, which the value view's must
// equal (as a matmul's K range is its lhs's box); unsplit, key and value
// hold all of T.
//
// With `zigzag` (causal, S == T) the positions are stored in zigzag order
// (ppc/Support/SequenceOrder.h): a row sees the keys whose natural positions
// are at most its own, which in a block of stored keys is no longer a prefix.
//
// Ranges and indices are in the default layout's terms ([B..., S, D]:
// batch, row, column); `dims` says which dim of every view holds each of
// them, so layout "bshd" ([B, S, H, D], heads after positions) reads rows
// H * D apart through the views' strides.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_COMMON_ATTENTIONRANGES_H
#define PPC_RUNTIME_COMMON_ATTENTIONRANGES_H

#include "KernelChecks.h"

#include "ppc/Runtime/HostDevice.h"
#include "ppc/Runtime/Kernels.h"
#include "ppc/Support/SequenceOrder.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ppc::runtime {

/// The ranges of one attention partition, checked against the views.
struct AttentionRanges {
  int64_t rank;
  /// The view dim holding each default-layout dim [B..., S, D]: the
  /// identity, or {0, 2, 1, 3} for "bshd".
  std::vector<int64_t> dims;
  /// The leading (batch) dims' global sizes, ranges, and the query rows.
  std::vector<int64_t> batchShape;
  std::vector<int64_t> batchLo, batchHi;
  int64_t rowLo, rowHi;
  /// The keys of the partition: [0, T) unless it is a key block.
  int64_t keyLo, keyHi;
  /// Global sizes.
  int64_t S, T, D, Dv;
  float scale;
  bool causal;
  /// Pairs of chunks of the zigzag order the positions are stored in (0:
  /// natural order; causal only).
  int64_t zigzag = 0;
  /// Dropout is applied (training with ratio > 0).
  bool dropout;
  double ratio;

  /// Key columns [0, cols) of the partition's keys (from keyLo) any query
  /// row of [rowLo, rowHi) attends to: with `causal`, row i sees the keys
  /// at natural positions up to its own, so none stored past the last of
  /// those (in natural order, none past the last row; in zigzag order, a
  /// key block whose chunks all lie later is skipped, and one whose second
  /// chunk does is cut after its first).
  int64_t keyColumns(int64_t rowLo, int64_t rowHi) const {
    if (!causal)
      return keyHi - keyLo;
    if (zigzag == 0)
      return std::max<int64_t>(std::min(keyHi, rowHi) - keyLo, 0);
    const int64_t last = zigzagSpan(rowLo, rowHi, S, zigzag).last;
    int64_t cols = 0, at = keyLo;
    forEachZigzagRun(
        keyLo, keyHi, T, zigzag, [&](int64_t position, int64_t count) {
          if (position <= last)
            cols = at - keyLo + std::min(count, last - position + 1);
          at += count;
        });
    return cols;
  }
};

/// True if `view` holds [lo, hi) along its leading dims (empty ranges are
/// held).
inline bool holdsBatch(const AttentionRanges &r, const TensorView &view,
                       const std::vector<int64_t> &lo,
                       const std::vector<int64_t> &hi) {
  for (size_t d = 0; d < lo.size(); ++d) {
    int64_t at = r.dims[d];
    if (lo[d] < hi[d] && (lo[d] < view.lo[at] || hi[d] > view.hi[at]))
      return false;
  }
  return true;
}

inline bool holdsWholeDim(const TensorView &view, int64_t d) {
  return view.lo[d] == 0 && view.hi[d] == view.shape[d];
}

/// Checks the operand views (and the result or result grad box `result`)
/// and fills `r`; with `keyBlock` the key and value views hold the
/// partition's keys, else all of them. `View`: a TensorView, or a
/// backend's view derived from one.
template <typename View>
absl::Status attentionRanges(const OpDesc &op, const KernelContext &ctx,
                             const std::vector<View> &inputs,
                             const TensorView &result, AttentionRanges &r,
                             bool keyBlock = false) {
  if (inputs.size() != 3)
    return absl::InvalidArgumentError(
        op.kind + ": expects 3 operands (query, key, value), got " +
        std::to_string(inputs.size()));
  const TensorView &q = inputs[0], &k = inputs[1], &v = inputs[2];
  int64_t rank = q.rank();
  r.rank = rank;
  if (rank < 2)
    return absl::InvalidArgumentError(
        op.kind + ": operands and result must have rank >= 2");
  for (const TensorView *view : {&k, &v, &result})
    if (view->rank() != rank || view->lo.size() != view->shape.size() ||
        view->hi.size() != view->shape.size())
      return absl::InvalidArgumentError(
          op.kind + ": operands and result must have the same rank");
  if (q.lo.size() != q.shape.size() || q.hi.size() != q.shape.size())
    return absl::InvalidArgumentError(
        op.kind + ": query view's box does not match its rank");
  std::string layout = op.getString("layout", "bhsd");
  r.dims.resize(rank);
  for (int64_t d = 0; d < rank; ++d)
    r.dims[d] = d;
  if (layout == "bshd") {
    if (rank != 4)
      return absl::InvalidArgumentError(
          op.kind + ": layout \"bshd\" needs operands of rank 4, got " +
          std::to_string(rank));
    r.dims = {0, 2, 1, 3};
  } else if (layout != "bhsd") {
    return absl::InvalidArgumentError(op.kind + ": layout \"" + layout +
                                      "\" is neither \"bhsd\" nor \"bshd\"");
  }
  // The global size of default-layout dim d of a view.
  auto size = [&](const TensorView &view, int64_t d) {
    return view.shape[r.dims[d]];
  };
  int64_t lead = rank - 2;
  r.batchShape.clear();
  for (int64_t d = 0; d < lead; ++d) {
    if (size(k, d) != size(q, d) || size(v, d) != size(q, d) ||
        size(result, d) != size(q, d))
      return absl::InvalidArgumentError(
          op.kind + ": leading dims differ between operands and result");
    r.batchShape.push_back(size(q, d));
  }
  r.S = size(q, rank - 2);
  r.D = size(q, rank - 1);
  r.T = size(k, rank - 2);
  r.Dv = size(v, rank - 1);
  if (size(k, rank - 1) != r.D)
    return absl::InvalidArgumentError(op.kind +
                                      ": key's D differs from query's");
  if (size(v, rank - 2) != r.T)
    return absl::InvalidArgumentError(op.kind +
                                      ": value's T differs from key's");
  if (size(result, rank - 2) != r.S || size(result, rank - 1) != r.Dv)
    return absl::InvalidArgumentError(
        op.kind + (layout == "bshd" ? ": result shape must be [B, S, H, Dv]"
                                    : ": result shape must be [B..., S, Dv]"));

  auto holdsWhole = [&](const TensorView &view, int64_t d) {
    return holdsWholeDim(view, r.dims[d]);
  };
  if (!holdsWhole(q, rank - 1))
    return absl::InvalidArgumentError(op.kind +
                                      ": query must cover its whole D dim");
  const int64_t kT = r.dims[rank - 2];
  r.keyLo = k.lo[kT];
  r.keyHi = k.hi[kT];
  if (!keyBlock && !holdsWhole(k, rank - 2))
    return absl::InvalidArgumentError(op.kind +
                                      ": key must cover its whole T dim");
  if (!holdsWhole(k, rank - 1))
    return absl::InvalidArgumentError(op.kind +
                                      ": key must cover its whole D dim");
  if (v.lo[kT] != r.keyLo || v.hi[kT] != r.keyHi)
    return absl::InvalidArgumentError(
        op.kind + (keyBlock ? ": value must hold the key box's T range [" +
                                  std::to_string(r.keyLo) + ", " +
                                  std::to_string(r.keyHi) + ")"
                            : ": value must cover its whole T dim"));
  if (!holdsWhole(v, rank - 1))
    return absl::InvalidArgumentError(op.kind +
                                      ": value must cover its whole Dv dim");
  if (!holdsWhole(result, rank - 1))
    return absl::InvalidArgumentError(op.kind +
                                      ": result must cover its whole Dv dim");

  r.batchLo.clear();
  r.batchHi.clear();
  for (int64_t d = 0; d < lead; ++d) {
    r.batchLo.push_back(result.lo[r.dims[d]]);
    r.batchHi.push_back(result.hi[r.dims[d]]);
  }
  r.rowLo = result.lo[r.dims[rank - 2]];
  r.rowHi = result.hi[r.dims[rank - 2]];
  bool empty = r.rowHi <= r.rowLo;
  for (int64_t d = 0; d < lead; ++d)
    empty |= r.batchHi[d] <= r.batchLo[d];
  if (!empty) {
    if (r.rowLo < q.lo[r.dims[rank - 2]] || r.rowHi > q.hi[r.dims[rank - 2]])
      return absl::InvalidArgumentError(
          op.kind + ": query box does not hold the result's S rows");
    for (auto [view, what] :
         {std::pair{&q, "query"}, std::pair{&k, "key"}, std::pair{&v, "value"}})
      if (!holdsBatch(r, *view, r.batchLo, r.batchHi))
        return absl::InvalidArgumentError(
            op.kind + ": " + what +
            " box does not hold the result's leading (batch) dims");
  }

  r.scale = static_cast<float>(op.getFloat("scale", 1.0));
  r.causal = op.getInt("causal", 0) != 0;
  r.zigzag = op.getInt("zigzag", 0);
  if (r.zigzag < 0 ||
      (r.zigzag > 0 && (!r.causal || r.S != r.T || r.S % (2 * r.zigzag) != 0)))
    return absl::InvalidArgumentError(
        op.kind + ": zigzag " + std::to_string(r.zigzag) +
        " needs causal attention with S == T divisible by " +
        std::to_string(2 * r.zigzag));
  r.ratio = op.getFloat("ratio", 0.0);
  if (!(r.ratio >= 0 && r.ratio < 1))
    return absl::InvalidArgumentError(
        op.kind + ": ratio " + std::to_string(r.ratio) + " must be in [0, 1)");
  r.dropout = ctx.training && r.ratio > 0;
  return absl::OkStatus();
}

/// A forward's checks: one result, and the ranges of its box.
template <typename View>
absl::Status forwardRanges(const OpDesc &op, const KernelContext &ctx,
                           const std::vector<View> &inputs,
                           const std::vector<View> &outputs,
                           AttentionRanges &r, bool keyBlock = false) {
  if (outputs.size() != 1)
    return absl::InvalidArgumentError(op.kind + ": expects 1 result, got " +
                                      std::to_string(outputs.size()));
  return attentionRanges(op, ctx, inputs, outputs[0], r, keyBlock);
}

/// A backward's checks: one result grad, the grad boxes (checkGradBoxes),
/// and the ranges of the result grad's box.
template <typename View>
absl::Status backwardRanges(const OpDesc &op, const KernelContext &ctx,
                            const std::vector<View> &inputs,
                            const std::vector<View> &outputs,
                            const std::vector<View> &outputGrads,
                            const std::vector<View> &inputGrads,
                            AttentionRanges &r, bool keyBlock = false) {
  if (outputGrads.size() != 1)
    return absl::InvalidArgumentError(op.kind + ": expects 1 result grad");
  if (absl::Status s =
          checkGradBoxes(op, inputs, outputs, outputGrads, inputGrads);
      !s.ok())
    return s;
  return attentionRanges(op, ctx, inputs, outputGrads[0], r, keyBlock);
}

/// Checks the per-row statistics scratch of a key block partition: `count`
/// buffers of one float per (leading index, query row) of the result box.
template <typename View>
absl::Status checkStatistics(const OpDesc &op, const AttentionRanges &r,
                             const std::vector<View> &scratch, size_t count) {
  if (scratch.size() != count)
    return absl::InvalidArgumentError(
        op.kind + ": a key block runs with " + std::to_string(count) +
        " statistics buffers, got " + std::to_string(scratch.size()));
  int64_t rows = r.rowHi - r.rowLo;
  for (size_t d = 0; d < r.batchLo.size(); ++d)
    rows *= r.batchHi[d] - r.batchLo[d];
  for (const View &buffer : scratch)
    if (!buffer.present() || buffer.numElements() != rows)
      return absl::InvalidArgumentError(
          op.kind + ": a statistics buffer must hold one value per row (" +
          std::to_string(rows) + ")");
  return absl::OkStatus();
}

/// Whether the partition whose operand boxes are `inputs` (query, key,
/// value) is a key block (its key box holds part of T: it runs in stages,
/// numStages), and its statistics' rows: the query box's leading indices
/// times its rows (every dim but D, the last in either layout).
struct KeyBlockShape {
  bool block = false;
  int64_t rows = 0;
};

inline KeyBlockShape keyBlockShape(const OpDesc &op,
                                   const std::vector<TensorView> &inputs) {
  KeyBlockShape shape;
  if (inputs.size() != 3 || inputs[1].rank() < 2 ||
      inputs[1].lo.size() != inputs[1].shape.size() || inputs[0].rank() < 1)
    return shape;
  const TensorView &q = inputs[0], &k = inputs[1];
  const int64_t rank = k.rank();
  const int64_t t =
      rank == 4 && op.getString("layout", "bhsd") == "bshd" ? 1 : rank - 2;
  shape.block = k.lo[t] != 0 || k.hi[t] != k.shape[t];
  shape.rows = 1;
  for (int64_t d = 0; d + 1 < q.rank(); ++d)
    shape.rows *= q.extent(d);
  return shape;
}

/// Index of (leading index `batch`, query row `row`) in a key block's
/// statistics: row-major over the result box's leading ranges and rows.
inline int64_t statIndex(const AttentionRanges &r,
                         const std::vector<int64_t> &batch, int64_t row) {
  int64_t at = 0;
  for (size_t d = 0; d < batch.size(); ++d)
    at = at * (r.batchHi[d] - r.batchLo[d]) + (batch[d] - r.batchLo[d]);
  return at * (r.rowHi - r.rowLo) + (row - r.rowLo);
}

/// Elements between consecutive indices of default-layout dim `d` in
/// `view` (a row's when d = rank - 2).
inline int64_t strideOf(const AttentionRanges &r, const TensorView &view,
                        int64_t d) {
  return view.strides()[r.dims[d]];
}

/// Elements between consecutive rows of `view`.
inline int64_t rowStride(const AttentionRanges &r, const TensorView &view) {
  return strideOf(r, view, r.rank - 2);
}

/// Offset in `view` of global index [batch..., row, col] (default layout).
inline int64_t offsetIn(const AttentionRanges &r, const TensorView &view,
                        const std::vector<int64_t> &batch, int64_t row,
                        int64_t col) {
  const size_t lead = batch.size();
  std::vector<int64_t> index(lead + 2);
  for (size_t d = 0; d < lead; ++d)
    index[r.dims[d]] = batch[d];
  index[r.dims[lead]] = row;
  index[r.dims[lead + 1]] = col;
  return view.offsetOf(index);
}

/// Flat index of element (batch, 0, 0) of the global [B..., S, T]
/// probabilities, where the dropout index of the batch starts.
inline int64_t probabilityBase(const std::vector<int64_t> &batch,
                               const AttentionRanges &r) {
  int64_t flat = 0;
  for (size_t d = 0; d < batch.size(); ++d)
    flat = flat * r.batchShape[d] + batch[d];
  return flat * r.S * r.T;
}

/// Keys [0, seen) of global query row `row` among a block's `cols` keys
/// from global key `keyLo` on: all of them, or with `causal` those up to
/// the row (none where the block starts past it).
PPC_HD inline int64_t keysSeen(bool causal, int64_t cols, int64_t row,
                               int64_t keyLo = 0) {
  if (!causal)
    return cols;
  const int64_t upTo = row + 1 - keyLo;
  return upTo < 0 ? 0 : (cols < upTo ? cols : upTo);
}

/// Whether global query row `row` sees global key `key`: every key, or with
/// `causal` those at natural positions up to the row's (`zigzag`: the
/// sequence's pairs of chunks, 0 in natural order, `length` its positions).
PPC_HD inline bool keyVisible(bool causal, int64_t zigzag, int64_t length,
                              int64_t row, int64_t key) {
  return !causal || zigzagPosition(key, length, zigzag) <=
                        zigzagPosition(row, length, zigzag);
}

/// The keys a row sees among a block's `cols` keys from global key `keyLo`,
/// for a kernel that then reads the first `seen` scores of `line`: in
/// natural order a prefix (keysSeen); in zigzag order every column, the
/// scores of the keys the row does not see set to -infinity (which the
/// softmax and the exponentials turn into 0), or none when it sees none.
PPC_HD inline int64_t maskKeys(bool causal, int64_t zigzag, int64_t length,
                               float *line, int64_t cols, int64_t row,
                               int64_t keyLo) {
  if (!causal || zigzag == 0)
    return keysSeen(causal, cols, row, keyLo);
  // By runs of natural positions: a row sees the start of each run up to
  // its own position (no position arithmetic per key).
  const int64_t position = zigzagPosition(row, length, zigzag);
  int64_t visible = 0, at = 0;
  forEachZigzagRun(
      keyLo, keyLo + cols, length, zigzag, [&](int64_t first, int64_t count) {
        const int64_t upTo = position - first + 1;
        const int64_t seen = upTo < 0 ? 0 : (upTo < count ? upTo : count);
        visible += seen;
        for (int64_t j = at + seen; j < at + count; ++j)
          line[j] = -INFINITY;
        at += count;
      });
  return visible == 0 ? 0 : cols;
}

/// The scaled scores `line` [0, cols) of a query row become its softmax over
/// keys [0, seen) (max and exponentials in float, the sum in double) and 0
/// past them (masked).
PPC_HD inline void softmaxRow(float *line, int64_t seen, int64_t cols) {
  float max = -INFINITY;
  for (int64_t j = 0; j < seen; ++j)
    max = max < line[j] ? line[j] : max;
  double sum = 0;
  for (int64_t j = 0; j < seen; ++j) {
    line[j] = expf(line[j] - max);
    sum += line[j];
  }
  const float inverse = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < seen; ++j)
    line[j] *= inverse;
  for (int64_t j = seen; j < cols; ++j)
    line[j] = 0.0f;
}

/// dLine (dP of a row of P, `pLine`) becomes dS = P (dP - sum_l P dP), the
/// dot in double.
PPC_HD inline void softmaxGradRow(const float *pLine, float *dLine,
                                  int64_t cols) {
  double dot = 0;
  for (int64_t j = 0; j < cols; ++j)
    dot += static_cast<double>(pLine[j]) * dLine[j];
  const float sum = static_cast<float>(dot);
  for (int64_t j = 0; j < cols; ++j)
    dLine[j] = pLine[j] * (dLine[j] - sum);
}

} // namespace ppc::runtime

#endif // PPC_RUNTIME_COMMON_ATTENTIONRANGES_H
