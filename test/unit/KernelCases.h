//===- KernelCases.h - op cases shared by the kernel tests ------*- C++ -*-===//
//
// The cases, op builders and partition builders that the cpu kernel tests
// (CpuKernelsATest, CpuKernelsBTest, AttentionKernelTest) and the cuda
// backend's agreement cases (cuda/*Cases.cpp) both run: one definition of
// each shape list and of how a partition of an op is cut, so that the cuda
// oracle checks exactly the boxes the cpu tests check. A list here is the
// cpu tests' list; a cuda case file may append cases of its own after it
// (the indices of the shared cases stay as they are).
//
// API (everything in namespace ppc::runtime::test, on KernelTestUtil.h):
//   MatMulCase, kMatMulCases, matMulOp(c),
//     matMulPartition(c, batch, m, n, k)      batch ranges, rows, cols, K
//   linearOp(input, n, transposeWeight, bias),
//     linearPartition(op, rows, n, k)          the bias follows n
//   ConvCase, kConvCases, convOp(c),
//     convPartition(c, n, f, oh, ow, ch)       halos from the window
//   ConvTransposeCase, kConvTransposeCases, convTransposeOp(c),
//     convTransposePartition(c, n, f, ch)      rows and cols whole
//   PoolCase, kPoolCases, poolOp(kind, c), poolPartition(c, n, ch, oh, ow),
//     distinctValues(count, seed)              no ties in a pooling window
//   ResizeCase, kResizeCases, resizeOp(c), resizePartition(c, n, ch)
//   batchNormOp(input[, attributes]), withBatchNormStatistics(inputs),
//     batchNormPartition(shape, n, c, h[, perChannel]),
//     batchNormPartitionings(shape)           samples, channels, rows, grid
//   AttentionCase, kAttentionLeads, attentionOp(c),
//     attentionPartition(c, batch, rows), swapMiddleDims(x, shape)
//     ([a, b, c, d] <-> [a, c, b, d]: layout "bshd"'s operands),
//     bshdAttentionOp(c), bshdAttentionPartition(c, batch, heads, rows)
//   ReduceCase, reduceCases(), reducedDims(c), reduceResultShape(c),
//     reduceOp(c), reducePartition(c, box)
//   GatherCase, gatherCases(), gatherResultShape(c), gatherOp(c)
//   BinaryCase, binaryCases(), BroadcastShapes, broadcastShapes(),
//     broadcastBox(shape, box)                 numpy broadcasting of a box
//   CompareCase, compareCases(), compareInputs(c, count, seed)
//   SelectShapes, selectShapes(), selectInputs(s, seed)
//   CumSumCase, cumsumCases(), cumsumReference(x, shape, c)
//   pieceBoxes(b, pieces, axis)               concat/split pieces
//
//===----------------------------------------------------------------------===//

#ifndef PPC_TEST_UNIT_KERNELCASES_H
#define PPC_TEST_UNIT_KERNELCASES_H

#include "KernelTestUtil.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

namespace ppc::runtime::test {

//===----------------------------------------------------------------------===//
// matmul, linear
//===----------------------------------------------------------------------===//

struct MatMulCase {
  std::vector<int64_t> lhs, rhs, result;
  bool transposeLhs, transposeRhs;
};

/// Batch broadcasting (either side), transposes, rank 2 to 4.
inline const std::vector<MatMulCase> kMatMulCases = {
    {{3, 4}, {4, 5}, {3, 5}, false, false},
    {{2, 3, 4}, {2, 4, 5}, {2, 3, 5}, false, false},
    {{2, 3, 4}, {4, 5}, {2, 3, 5}, false, false},
    {{2, 4, 3}, {5, 4}, {2, 3, 5}, true, true},
    {{2, 1, 3, 4}, {1, 3, 5, 4}, {2, 3, 3, 5}, false, true},
    {{3, 4, 3}, {3, 4, 5}, {3, 3, 5}, true, false},
};

inline OpDesc matMulOp(const MatMulCase &c) {
  return makeOp("ppc.matmul", {c.lhs, c.rhs}, {c.result},
                {{"transpose_lhs", int64_t{c.transposeLhs}},
                 {"transpose_rhs", int64_t{c.transposeRhs}}});
}

/// The partition computing result batches `batch` (ranges of the result's
/// batch dims; operands broadcast along a dim hold all of it), rows m, cols
/// n over the reduction range k.
inline Partition matMulPartition(const MatMulCase &c,
                                 const std::vector<Range> &batch, Range m,
                                 Range n, Range k) {
  auto operandBox = [&](const std::vector<int64_t> &shape, Range rows,
                        Range cols, bool transposed) {
    Box box = wholeBox(shape);
    size_t lead = batch.size() - (shape.size() - 2);
    for (size_t d = 0; d + 2 < shape.size(); ++d)
      if (shape[d] != 1)
        box = withRange(box, d, batch[lead + d].first, batch[lead + d].second);
    if (transposed)
      std::swap(rows, cols);
    box = withRange(box, shape.size() - 2, rows.first, rows.second);
    return withRange(box, shape.size() - 1, cols.first, cols.second);
  };
  Box result = wholeBox(c.result);
  for (size_t d = 0; d < batch.size(); ++d)
    result = withRange(result, d, batch[d].first, batch[d].second);
  size_t rank = c.result.size();
  result = withRange(result, rank - 2, m.first, m.second);
  result = withRange(result, rank - 1, n.first, n.second);
  return {{operandBox(c.lhs, m, k, c.transposeLhs),
           operandBox(c.rhs, k, n, c.transposeRhs)},
          {result}};
}

inline OpDesc linearOp(const std::vector<int64_t> &input, int64_t n,
                       bool transposeWeight, bool bias) {
  int64_t k = input.back();
  std::vector<std::vector<int64_t>> operands = {
      input, transposeWeight ? std::vector<int64_t>{n, k}
                             : std::vector<int64_t>{k, n}};
  if (bias)
    operands.push_back({n});
  std::vector<int64_t> result = input;
  result.back() = n;
  return makeOp("ppc.linear", operands, {result},
                {{"transpose_weight", int64_t{transposeWeight}}});
}

/// Rows of the leading dims, cols n, reduction k; the bias follows n.
inline Partition linearPartition(const OpDesc &op,
                                 const std::vector<Range> &rows, Range n,
                                 Range k) {
  bool transposed = op.getInt("transpose_weight", 0) != 0;
  const auto &inputShape = op.operandShapes[0];
  size_t last = inputShape.size() - 1;
  Box input = wholeBox(inputShape), result = wholeBox(op.resultShapes[0]);
  for (size_t d = 0; d < last; ++d) {
    input = withRange(input, d, rows[d].first, rows[d].second);
    result = withRange(result, d, rows[d].first, rows[d].second);
  }
  input = withRange(input, last, k.first, k.second);
  result = withRange(result, last, n.first, n.second);
  Box weight = wholeBox(op.operandShapes[1]);
  weight = withRange(weight, transposed ? 1 : 0, k.first, k.second);
  weight = withRange(weight, transposed ? 0 : 1, n.first, n.second);
  Partition p{{input, weight}, {result}};
  if (op.operandShapes.size() == 3)
    p.inputs.push_back({{n.first}, {n.second}});
  return p;
}

//===----------------------------------------------------------------------===//
// conv2d
//===----------------------------------------------------------------------===//

struct ConvCase {
  std::vector<int64_t> input, weight;
  std::vector<int64_t> strides, pads, dilations;
  int64_t groups;
  bool bias;

  int64_t outSize(int i) const {
    int64_t window = (weight[2 + i] - 1) * dilations[i] + 1;
    return (input[2 + i] + pads[i] + pads[2 + i] - window) / strides[i] + 1;
  }
  std::vector<int64_t> result() const {
    return {input[0], weight[0], outSize(0), outSize(1)};
  }
};

inline OpDesc convOp(const ConvCase &c) {
  std::vector<std::vector<int64_t>> operands = {c.input, c.weight};
  if (c.bias)
    operands.push_back({c.weight[0]});
  return makeOp("ppc.conv2d", operands, {c.result()},
                {{"strides", c.strides},
                 {"pads", c.pads},
                 {"dilations", c.dilations},
                 {"groups", c.groups}});
}

inline const std::vector<ConvCase> kConvCases = {
    // 3x3, pad 1.
    {{2, 4, 6, 5}, {6, 4, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
    // Stride 2 x 1, asymmetric pads, dilation 2 x 1, no bias.
    {{2, 3, 9, 6}, {4, 3, 3, 2}, {2, 1}, {1, 0, 0, 1}, {2, 1}, 1, false},
    // Two groups.
    {{2, 4, 5, 5}, {6, 2, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2, true},
    // Pointwise (the im2col-free path).
    {{2, 4, 3, 5}, {3, 4, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true},
    // Depthwise, stride 2.
    {{1, 3, 5, 5}, {3, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 3, true},
};

/// The partition computing samples n, output channels f, rows oh, cols ow
/// over weight channels ch (a reduction range when groups == 1).
inline Partition convPartition(const ConvCase &c, Range n, Range f, Range oh,
                               Range ow, Range ch) {
  int64_t Cg = c.weight[1], Fg = c.weight[0] / c.groups;
  Range inChannels = ch;
  if (c.groups > 1)
    inChannels = {f.first / Fg * Cg, ((f.second - 1) / Fg + 1) * Cg};
  auto window = [&](Range out, int i) {
    return windowRange(out.first, out.second, c.strides[i], -c.pads[i],
                       (c.weight[2 + i] - 1) * c.dilations[i] + 1,
                       c.input[2 + i]);
  };
  Range rows = window(oh, 0), cols = window(ow, 1);
  Partition p;
  p.inputs.push_back({{n.first, inChannels.first, rows.first, cols.first},
                      {n.second, inChannels.second, rows.second, cols.second}});
  p.inputs.push_back({{f.first, ch.first, 0, 0},
                      {f.second, ch.second, c.weight[2], c.weight[3]}});
  if (c.bias)
    p.inputs.push_back({{f.first}, {f.second}});
  p.outputs.push_back({{n.first, f.first, oh.first, ow.first},
                       {n.second, f.second, oh.second, ow.second}});
  return p;
}

//===----------------------------------------------------------------------===//
// conv_transpose2d
//===----------------------------------------------------------------------===//

struct ConvTransposeCase {
  std::vector<int64_t> input, weight; ///< [N, C, H, W], [C, F / g, KH, KW]
  std::vector<int64_t> strides, pads, dilations, outputPadding;
  int64_t groups;
  bool bias;

  int64_t outSize(int i) const {
    return (input[2 + i] - 1) * strides[i] - pads[i] - pads[2 + i] +
           (weight[2 + i] - 1) * dilations[i] + 1 + outputPadding[i];
  }
  int64_t filters() const { return weight[1] * groups; }
  std::vector<int64_t> result() const {
    return {input[0], filters(), outSize(0), outSize(1)};
  }
};

inline OpDesc convTransposeOp(const ConvTransposeCase &c) {
  std::vector<std::vector<int64_t>> operands = {c.input, c.weight};
  if (c.bias)
    operands.push_back({c.filters()});
  return makeOp("ppc.conv_transpose2d", operands, {c.result()},
                {{"strides", c.strides},
                 {"pads", c.pads},
                 {"dilations", c.dilations},
                 {"output_padding", c.outputPadding},
                 {"groups", c.groups}});
}

inline const std::vector<ConvTransposeCase> kConvTransposeCases = {
    // 3x3, stride 1, pad 1 (the transpose of a same-size conv).
    {{2, 4, 5, 4}, {4, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, {0, 0}, 1, true},
    // Stride 2 x 3, asymmetric pads, output_padding 1 x 2, no bias.
    {{2, 3, 4, 3},
     {3, 2, 3, 2},
     {2, 3},
     {1, 0, 0, 1},
     {1, 1},
     {1, 2},
     1,
     false},
    // Dilation 2 x 1, stride 2, output rows nothing lands on (pad 0, kernel
    // shorter than the stride along W).
    {{1, 2, 3, 4}, {2, 3, 2, 1}, {2, 2}, {0, 0, 0, 0}, {2, 1}, {1, 1}, 1, true},
    // Two groups, stride 2, pads 1.
    {{2, 4, 3, 3}, {4, 3, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, {1, 1}, 2, true},
    // Pointwise (1x1, stride 1: conv2d's im2col-free path).
    {{2, 4, 3, 5}, {4, 3, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, {0, 0}, 1, true},
};

/// The partition computing samples n and output channels f over input
/// channels ch (a reduction); rows and cols are whole (the op does not split
/// them). With groups, f and ch must be whole (the op splits neither).
inline Partition convTransposePartition(const ConvTransposeCase &c, Range n,
                                        Range f, Range ch) {
  std::vector<int64_t> r = c.result();
  Partition p;
  p.inputs.push_back({{n.first, ch.first, 0, 0},
                      {n.second, ch.second, c.input[2], c.input[3]}});
  int64_t fg = c.weight[1];
  Range wf = c.groups == 1 ? f : Range{0, fg};
  p.inputs.push_back({{ch.first, wf.first, 0, 0},
                      {ch.second, wf.second, c.weight[2], c.weight[3]}});
  if (c.bias)
    p.inputs.push_back({{f.first}, {f.second}});
  p.outputs.push_back(
      {{n.first, f.first, 0, 0}, {n.second, f.second, r[2], r[3]}});
  return p;
}

//===----------------------------------------------------------------------===//
// max_pool2d, avg_pool2d
//===----------------------------------------------------------------------===//

struct PoolCase {
  std::vector<int64_t> input, kernel, strides, pads;
  bool ceilMode, countIncludePad;

  int64_t outSize(int i) const {
    int64_t span = input[2 + i] + pads[i] + pads[2 + i] - kernel[i];
    int64_t out =
        (ceilMode ? (span + strides[i] - 1) / strides[i] : span / strides[i]) +
        1;
    // As PyTorch: the last window must start inside the input or left pad.
    if (ceilMode && (out - 1) * strides[i] >= input[2 + i] + pads[i])
      --out;
    return out;
  }
  std::vector<int64_t> result() const {
    return {input[0], input[1], outSize(0), outSize(1)};
  }
};

inline OpDesc poolOp(const std::string &kind, const PoolCase &c) {
  return makeOp(kind, {c.input}, {c.result()},
                {{"kernel", c.kernel},
                 {"strides", c.strides},
                 {"pads", c.pads},
                 {"ceil_mode", int64_t{c.ceilMode}},
                 {"count_include_pad", int64_t{c.countIncludePad}}});
}

inline const std::vector<PoolCase> kPoolCases = {
    {{2, 3, 6, 6}, {2, 2}, {2, 2}, {0, 0, 0, 0}, false, false},
    {{2, 2, 7, 6}, {3, 3}, {2, 2}, {1, 1, 1, 1}, false, false},
    {{2, 2, 7, 6}, {3, 3}, {2, 2}, {1, 1, 1, 1}, false, true},
    {{1, 2, 6, 7}, {3, 2}, {2, 2}, {1, 0, 1, 1}, true, true},
    {{1, 2, 5, 5}, {2, 2}, {2, 2}, {0, 0, 0, 0}, true, false},
};

/// Distinct values 0.05 apart in shuffled order: no ties, and finite
/// differences do not reorder a window.
inline std::vector<float> distinctValues(int64_t count, uint32_t seed) {
  std::vector<float> values(count);
  for (int64_t i = 0; i < count; ++i)
    values[i] = 0.05f * static_cast<float>(i - count / 2);
  std::shuffle(values.begin(), values.end(), std::mt19937(seed));
  return values;
}

/// The partition computing samples n, channels ch, rows oh, cols ow (the
/// input box with its halos).
inline Partition poolPartition(const PoolCase &c, Range n, Range ch, Range oh,
                               Range ow) {
  auto window = [&](Range out, int i) {
    return windowRange(out.first, out.second, c.strides[i], -c.pads[i],
                       c.kernel[i], c.input[2 + i]);
  };
  Range rows = window(oh, 0), cols = window(ow, 1);
  Box input{{n.first, ch.first, rows.first, cols.first},
            {n.second, ch.second, rows.second, cols.second}};
  Box output{{n.first, ch.first, oh.first, ow.first},
             {n.second, ch.second, oh.second, ow.second}};
  return {{input}, {output}};
}

//===----------------------------------------------------------------------===//
// resize
//===----------------------------------------------------------------------===//

struct ResizeCase {
  std::vector<int64_t> input, result;
  std::vector<double> scales;
  std::string mode, coordinates, rounding = "round_prefer_floor";
  double cubicA = -0.75;
  bool excludeOutside = false;
  std::vector<double> roi = {}; ///< tf_crop_and_resize only
  double extrapolation = 0.0;
};

inline OpDesc resizeOp(const ResizeCase &c) {
  std::map<std::string, AttributeValue> attributes = {
      {"scales", c.scales},
      {"mode", c.mode},
      {"coordinate_transformation_mode", c.coordinates},
      {"nearest_mode", c.rounding},
      {"cubic_coeff_a", c.cubicA},
      {"exclude_outside", int64_t{c.excludeOutside}},
      {"extrapolation_value", c.extrapolation}};
  if (!c.roi.empty())
    attributes["roi"] = c.roi;
  return makeOp("ppc.resize", {c.input}, {c.result}, std::move(attributes));
}

/// Up and down, every mode and coordinate mode, a length-1 result; the
/// last is ONNX's test_resize_tf_crop_and_resize on two channels.
inline const std::vector<ResizeCase> kResizeCases = {
    {{2, 3, 4, 5}, {2, 3, 8, 10}, {2.0, 2.0}, "linear", "half_pixel"},
    {{2, 2, 6, 6}, {2, 2, 3, 4}, {0.5, 0.75}, "linear", "align_corners"},
    {{1, 2, 5, 4},
     {1, 2, 10, 12},
     {2.0, 3.0},
     "nearest",
     "asymmetric",
     "floor"},
    {{2, 1, 6, 5},
     {2, 1, 4, 7},
     {4.0 / 6, 7.0 / 5},
     "nearest",
     "pytorch_half_pixel",
     "round_prefer_ceil"},
    {{1, 2, 4, 3},
     {1, 2, 6, 7},
     {1.5, 7.0 / 3},
     "nearest",
     "tf_half_pixel_for_nn",
     "ceil"},
    {{1, 2, 4, 4},
     {1, 2, 8, 6},
     {2.0, 1.5},
     "cubic",
     "half_pixel",
     "round_prefer_floor",
     -0.5,
     true},
    {{1, 2, 5, 4}, {1, 2, 3, 8}, {0.6, 2.0}, "cubic", "align_corners"},
    {{1, 2, 3, 3},
     {1, 2, 7, 1},
     {7.0 / 3, 1.0 / 3},
     "linear",
     "pytorch_half_pixel"},
    {{1, 2, 4, 4},
     {1, 2, 3, 3},
     {3.0 / (4 * 0.8), 3.0 / (4 * 1.1)},
     "linear",
     "tf_crop_and_resize",
     "round_prefer_floor",
     -0.75,
     false,
     {0.4, 0.6, 1.2, 1.7},
     10.0},
};

/// Samples n and channels ch; the input holds whole planes.
inline Partition resizePartition(const ResizeCase &c, Range n, Range ch) {
  Box input{{n.first, ch.first, 0, 0},
            {n.second, ch.second, c.input[2], c.input[3]}};
  Box output{{n.first, ch.first, 0, 0},
             {n.second, ch.second, c.result[2], c.result[3]}};
  return {{input}, {output}};
}

//===----------------------------------------------------------------------===//
// batch_norm
//===----------------------------------------------------------------------===//

inline OpDesc batchNormOp(const std::vector<int64_t> &input,
                          std::map<std::string, AttributeValue> attributes = {
                              {"epsilon", 1e-5}, {"momentum", 0.9}}) {
  std::vector<int64_t> perChannel = {input[1]};
  return makeOp("ppc.batch_norm",
                {input, perChannel, perChannel, perChannel, perChannel},
                {input}, std::move(attributes));
}

/// Random input, scale, bias, running mean, running variance made
/// batch_norm's: the input spread to mean 0.5 and spread 2, the running
/// variance positive.
inline std::vector<std::vector<float>>
withBatchNormStatistics(std::vector<std::vector<float>> inputs) {
  for (float &v : inputs[0])
    v = 2.0f * v + 0.5f;
  for (float &v : inputs[4])
    v = 0.5f + std::fabs(v);
  return inputs;
}

/// Samples n, channels c and rows h of [N, C, H, W]; the per-channel
/// operands hold `perChannel` (default: the input's channels).
inline Partition batchNormPartition(const std::vector<int64_t> &shape, Range n,
                                    Range c, Range h,
                                    std::optional<Range> perChannel = {}) {
  Box input{{n.first, c.first, h.first, 0},
            {n.second, c.second, h.second, shape[3]}};
  Range held = perChannel ? *perChannel : c;
  Box channels{{held.first}, {held.second}};
  return {{input, channels, channels, channels, channels}, {input}};
}

/// The partitionings of a batch_norm of `shape` [N, C, H, W]: by samples
/// (3 parts), by channels (3), by rows (2), and a 2 x 2 x 2 grid of them.
inline std::vector<std::vector<Partition>>
batchNormPartitionings(const std::vector<int64_t> &shape) {
  Range allN{0, shape[0]}, allC{0, shape[1]}, allH{0, shape[2]};
  std::vector<Partition> byBatch, byChannels, byRows, grid;
  for (Range n : splitRange(shape[0], 3))
    byBatch.push_back(batchNormPartition(shape, n, allC, allH));
  for (Range c : splitRange(shape[1], 3))
    byChannels.push_back(batchNormPartition(shape, allN, c, allH));
  for (Range h : splitRange(shape[2], 2))
    byRows.push_back(batchNormPartition(shape, allN, allC, h));
  for (Range n : splitRange(shape[0], 2))
    for (Range c : splitRange(shape[1], 2))
      for (Range h : splitRange(shape[2], 2))
        grid.push_back(batchNormPartition(shape, n, c, h));
  return {byBatch, byChannels, byRows, grid};
}

//===----------------------------------------------------------------------===//
// attention
//===----------------------------------------------------------------------===//

/// One attention problem: leading dims, sizes and attributes.
struct AttentionCase {
  std::vector<int64_t> lead;
  int64_t S, T, D, Dv;
  double scale = 1.0;
  bool causal = false;
  double ratio = 0.0;
  int64_t seed = 0;
  /// Pairs of chunks of the zigzag order S and T are stored in (0: natural).
  int64_t zigzag = 0;

  /// [lead..., a, b]
  std::vector<int64_t> shape(int64_t a, int64_t b) const {
    std::vector<int64_t> s = lead;
    s.push_back(a);
    s.push_back(b);
    return s;
  }
  std::vector<int64_t> query() const { return shape(S, D); }
  std::vector<int64_t> key() const { return shape(T, D); }
  std::vector<int64_t> value() const { return shape(T, Dv); }
  std::vector<int64_t> result() const { return shape(S, Dv); }
  std::vector<int64_t> scores() const { return shape(S, T); }
};

/// The leading dims the attention cases run with: none, and two.
inline const std::vector<std::vector<int64_t>> kAttentionLeads = {{}, {2, 3}};

/// Every index of each leading dim: a partition holding them all.
inline std::vector<Range> wholeLeads(const std::vector<int64_t> &lead) {
  std::vector<Range> ranges;
  for (int64_t size : lead)
    ranges.push_back({0, size});
  return ranges;
}

inline OpDesc attentionOp(const AttentionCase &c) {
  return makeOp("ppc.attention", {c.query(), c.key(), c.value()}, {c.result()},
                {{"scale", c.scale},
                 {"causal", int64_t{c.causal}},
                 {"ratio", c.ratio},
                 {"seed", c.seed},
                 {"zigzag", c.zigzag}});
}

/// The partition computing leading ranges `batch` and query rows `rows`.
inline Partition attentionPartition(const AttentionCase &c,
                                    const std::vector<Range> &batch,
                                    Range rows) {
  auto box = [&](const std::vector<int64_t> &shape) {
    Box b = wholeBox(shape);
    for (size_t d = 0; d < batch.size(); ++d)
      b = withRange(b, d, batch[d].first, batch[d].second);
    return b;
  };
  size_t rowDim = c.lead.size();
  Box query = withRange(box(c.query()), rowDim, rows.first, rows.second);
  Box result = withRange(box(c.result()), rowDim, rows.first, rows.second);
  return {{query, box(c.key()), box(c.value())}, {result}};
}

/// `x` of shape [a, b, c, d] as [a, c, b, d] (and back: the swap is its own
/// inverse).
inline std::vector<float> swapMiddleDims(const std::vector<float> &x,
                                         const std::vector<int64_t> &shape) {
  const int64_t a = shape[0], b = shape[1], c = shape[2], d = shape[3];
  std::vector<float> out(x.size());
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t k = 0; k < c; ++k)
        for (int64_t l = 0; l < d; ++l)
          out[((i * c + k) * b + j) * d + l] = x[((i * b + j) * c + k) * d + l];
  return out;
}

/// [B, H, x, y] as layout "bshd" writes it: [B, x, H, y].
inline std::vector<int64_t> headsAfter(const std::vector<int64_t> &shape) {
  return {shape[0], shape[2], shape[1], shape[3]};
}

/// `c` (leading dims [B, H]) in layout "bshd".
inline OpDesc bshdAttentionOp(const AttentionCase &c) {
  OpDesc op = attentionOp(c);
  for (auto &shape : op.operandShapes)
    shape = headsAfter(shape);
  for (auto &shape : op.resultShapes)
    shape = headsAfter(shape);
  op.attributes["layout"] = std::string("bshd");
  return op;
}

/// The partition of bshdAttentionOp(c) computing samples `batch`, heads
/// `heads` and query rows `rows`.
inline Partition bshdAttentionPartition(const AttentionCase &c, Range batch,
                                        Range heads, Range rows) {
  auto box = [&](const std::vector<int64_t> &shape, bool splitRows) {
    Box b =
        withRange(wholeBox(headsAfter(shape)), 0, batch.first, batch.second);
    b = withRange(b, 2, heads.first, heads.second);
    return splitRows ? withRange(b, 1, rows.first, rows.second) : b;
  };
  return {{box(c.query(), true), box(c.key(), false), box(c.value(), false)},
          {box(c.result(), true)}};
}

//===----------------------------------------------------------------------===//
// reduce_sum, reduce_mean, reduce_max
//===----------------------------------------------------------------------===//

struct ReduceCase {
  std::string name;
  std::string kind;
  std::vector<int64_t> axes;
  int keepDims; ///< 0, 1, or -1: the attribute left out (default 1)
  std::vector<int64_t> input = {3, 4, 5};
};

inline void PrintTo(const ReduceCase &c, std::ostream *os) { *os << c.name; }

inline std::vector<ReduceCase> reduceCases() {
  return {
      {"sum_1_keep", "ppc.reduce_sum", {1}, 1},
      {"sum_0_2", "ppc.reduce_sum", {0, 2}, 0},
      {"mean_last", "ppc.reduce_mean", {-1}, 0},
      {"mean_1_2_keep", "ppc.reduce_mean", {1, 2}, 1},
      {"max_1_keep", "ppc.reduce_max", {1}, 1},
      {"max_0_2", "ppc.reduce_max", {0, 2}, 0},
  };
}

inline std::vector<bool> reducedDims(const ReduceCase &c) {
  std::vector<bool> reduced(c.input.size(), false);
  for (int64_t axis : c.axes)
    reduced[axis < 0 ? axis + static_cast<int64_t>(c.input.size()) : axis] =
        true;
  return reduced;
}

inline std::vector<int64_t> reduceResultShape(const ReduceCase &c) {
  std::vector<bool> reduced = reducedDims(c);
  std::vector<int64_t> shape;
  for (size_t d = 0; d < c.input.size(); ++d)
    if (!reduced[d])
      shape.push_back(c.input[d]);
    else if (c.keepDims != 0)
      shape.push_back(1);
  return shape;
}

inline OpDesc reduceOp(const ReduceCase &c) {
  std::map<std::string, AttributeValue> attributes = {{"axes", c.axes}};
  if (c.keepDims >= 0)
    attributes["keep_dims"] = int64_t{c.keepDims};
  return makeOp(c.kind, {c.input}, {reduceResultShape(c)}, attributes);
}

/// The partition of the input box `box` (an iteration box): the result box
/// follows it along the kept dims and is whole along the reduced ones.
inline Partition reducePartition(const ReduceCase &c, const Box &box) {
  std::vector<bool> reduced = reducedDims(c);
  Box result;
  for (size_t d = 0; d < c.input.size(); ++d) {
    if (!reduced[d]) {
      result.lo.push_back(box.lo[d]);
      result.hi.push_back(box.hi[d]);
    } else if (c.keepDims != 0) {
      result.lo.push_back(0);
      result.hi.push_back(1);
    }
  }
  return {{box}, {result}};
}

//===----------------------------------------------------------------------===//
// gather, concat/split
//===----------------------------------------------------------------------===//

struct GatherCase {
  std::vector<int64_t> data, indices;
  int64_t axis;
  std::vector<float> indexValues;
  /// Split of the iteration dims: the result dims, then the gathered rows.
  std::vector<int64_t> parts;
};

inline std::vector<GatherCase> gatherCases() {
  return {
      // An embedding lookup; -1 is the last row, 4 appears twice.
      {{5, 3}, {2, 3}, 0, {0, 4, 2, -1, 3, 1}, {2, 1, 2, 2}},
      {{2, 5, 3}, {4}, 1, {1, 4, 0, 1}, {2, 2, 1, 3}},
  };
}

inline std::vector<int64_t> gatherResultShape(const GatherCase &c) {
  int64_t axis =
      c.axis < 0 ? c.axis + static_cast<int64_t>(c.data.size()) : c.axis;
  std::vector<int64_t> shape(c.data.begin(), c.data.begin() + axis);
  shape.insert(shape.end(), c.indices.begin(), c.indices.end());
  shape.insert(shape.end(), c.data.begin() + axis + 1, c.data.end());
  return shape;
}

inline OpDesc gatherOp(const GatherCase &c) {
  return makeOp("ppc.gather", {c.data, c.indices}, {gatherResultShape(c)},
                {{"axis", c.axis}});
}

/// The parts of concat's (split's) pieces, laid end to end along `axis`,
/// that the iteration box `b` (in whole coordinates) covers, each in its
/// piece's coordinates (empty where `b` does not reach the piece).
inline std::vector<Box>
pieceBoxes(const Box &b, const std::vector<std::vector<int64_t>> &pieces,
           size_t axis) {
  std::vector<Box> boxes;
  int64_t offset = 0;
  for (const auto &piece : pieces) {
    int64_t size = piece[axis];
    int64_t lo = std::clamp<int64_t>(b.lo[axis] - offset, 0, size);
    int64_t hi = std::clamp<int64_t>(b.hi[axis] - offset, 0, size);
    boxes.push_back(withRange(b, axis, lo, std::max(lo, hi)));
    offset += size;
  }
  return boxes;
}

//===----------------------------------------------------------------------===//
// Binary ops with numpy broadcasting
//===----------------------------------------------------------------------===//

struct BinaryCase {
  std::string kind;
  std::function<double(double, double)> reference;
  float lhsLo, lhsHi, rhsLo, rhsHi;
};

inline void PrintTo(const BinaryCase &c, std::ostream *os) { *os << c.kind; }

inline std::vector<BinaryCase> binaryCases() {
  return {
      {"ppc.add", [](double l, double r) { return l + r; }, -1, 1, -1, 1},
      {"ppc.sub", [](double l, double r) { return l - r; }, -1, 1, -1, 1},
      {"ppc.mul", [](double l, double r) { return l * r; }, -1, 1, -1, 1},
      {"ppc.div", [](double l, double r) { return l / r; }, -1, 1, 0.5, 2},
      {"ppc.pow", [](double l, double r) { return std::pow(l, r); }, 0.5, 2,
       -1.5, 1.5},
      {"ppc.max", [](double l, double r) { return std::max(l, r); }, -1, 1, -1,
       1},
      {"ppc.min", [](double l, double r) { return std::min(l, r); }, -1, 1, -1,
       1},
      // The slope, negative here as a trained one may be.
      {"ppc.prelu", [](double l, double r) { return l < 0 ? r * l : l; }, -1, 1,
       -0.5, 0.8},
  };
}

/// Operand shapes, the broadcast result shape, and a grid split of it.
struct BroadcastShapes {
  std::vector<int64_t> lhs, rhs, result, parts;
};

inline std::vector<BroadcastShapes> broadcastShapes() {
  return {
      {{3, 4}, {3, 4}, {3, 4}, {3, 2}},
      {{2, 3, 4}, {4}, {2, 3, 4}, {2, 1, 2}},
      {{2, 1, 4}, {3, 1}, {2, 3, 4}, {2, 3, 2}},
      {{1}, {2, 3}, {2, 3}, {2, 1}},
      // A per-channel operand of an NCHW activation.
      {{2, 3, 2, 3}, {3, 1, 1}, {2, 3, 2, 3}, {2, 2, 1, 2}},
  };
}

//===----------------------------------------------------------------------===//
// Comparisons, logic, select, cumsum
//===----------------------------------------------------------------------===//

struct CompareCase {
  std::string kind;
  std::function<bool(float, float)> reference;
  bool logic; ///< operands are booleans (0 or 1)
};

inline void PrintTo(const CompareCase &c, std::ostream *os) { *os << c.kind; }

inline std::vector<CompareCase> compareCases() {
  return {
      {"ppc.equal", [](float l, float r) { return l == r; }, false},
      {"ppc.less", [](float l, float r) { return l < r; }, false},
      {"ppc.less_equal", [](float l, float r) { return l <= r; }, false},
      {"ppc.greater", [](float l, float r) { return l > r; }, false},
      {"ppc.greater_equal", [](float l, float r) { return l >= r; }, false},
      {"ppc.and", [](float l, float r) { return l != 0 && r != 0; }, true},
      {"ppc.or", [](float l, float r) { return l != 0 || r != 0; }, true},
  };
}

/// `count` operands of a comparison: -1, -0.5, 0, 0.5 or 1 (0 or 1 for
/// logic), reproducible from `seed`.
inline std::vector<float> compareInputs(const CompareCase &c, int64_t count,
                                        uint32_t seed) {
  std::vector<float> values = randomValues(count, seed, 0.0f, 1.0f);
  for (float &v : values)
    v = c.logic ? (v < 0.5f ? 0.0f : 1.0f) : std::floor(v * 5.0f) * 0.5f - 1.0f;
  return values;
}

/// ppc.select's operand shapes, the result shape and a grid split of it.
struct SelectShapes {
  std::vector<int64_t> condition, lhs, rhs, result, parts;
};

inline std::vector<SelectShapes> selectShapes() {
  return {
      {{3, 4}, {3, 4}, {3, 4}, {3, 4}, {3, 2}},
      // A key padding mask over the query rows; a scalar fill.
      {{2, 1, 4}, {}, {2, 3, 4}, {2, 3, 4}, {2, 3, 2}},
      {{4}, {2, 1, 4}, {3, 1}, {2, 3, 4}, {2, 2, 2}},
      {{3, 1}, {1}, {3, 4}, {3, 4}, {3, 2}},
  };
}

/// The condition (0 or 1) and both sides of a select, from `seed`.
inline std::vector<std::vector<float>> selectInputs(const SelectShapes &s,
                                                    uint32_t seed) {
  std::vector<float> condition =
      randomValues(numElementsOf(s.condition), seed, 0.0f, 1.0f);
  for (float &v : condition)
    v = v < 0.5f ? 0.0f : 1.0f;
  return {condition, randomValues(numElementsOf(s.lhs), seed + 1),
          randomValues(numElementsOf(s.rhs), seed + 2)};
}

struct CumSumCase {
  int64_t axis;
  bool exclusive, reverse;

  std::map<std::string, AttributeValue> attributes() const {
    return {{"axis", axis},
            {"exclusive", int64_t{exclusive}},
            {"reverse", int64_t{reverse}}};
  }
  std::string name() const {
    return "cumsum axis " + std::to_string(axis) +
           (exclusive ? " exclusive" : "") + (reverse ? " reverse" : "");
  }
};

/// Every axis (one negative) with every exclusive/reverse combination.
inline std::vector<CumSumCase> cumsumCases() {
  std::vector<CumSumCase> cases;
  for (int64_t axis : {0, 1, -1})
    for (bool exclusive : {false, true})
      for (bool reverse : {false, true})
        cases.push_back({axis, exclusive, reverse});
  return cases;
}

/// The cumulative sum of `x` (row-major, of `shape`), in double.
inline std::vector<float> cumsumReference(const std::vector<float> &x,
                                          const std::vector<int64_t> &shape,
                                          const CumSumCase &c) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  const int64_t axis = c.axis < 0 ? c.axis + rank : c.axis;
  int64_t stride = 1;
  for (int64_t d = axis + 1; d < rank; ++d)
    stride *= shape[d];
  const int64_t n = shape[axis];
  std::vector<float> y(x.size());
  for (size_t e = 0; e < x.size(); ++e) {
    const int64_t i = (static_cast<int64_t>(e) / stride) % n;
    const int64_t base = static_cast<int64_t>(e) - i * stride;
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      bool in = c.reverse ? (c.exclusive ? j > i : j >= i)
                          : (c.exclusive ? j < i : j <= i);
      if (in)
        sum += x[base + j * stride];
    }
    y[e] = static_cast<float>(sum);
  }
  return y;
}

/// The box of an operand of `shape` that numpy-broadcasts to the iteration
/// box `box`: size-1 dims are read whole.
inline Box broadcastBox(const std::vector<int64_t> &shape, const Box &box) {
  size_t lead = box.lo.size() - shape.size();
  Box operand = wholeBox(shape);
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != 1)
      operand = withRange(operand, i, box.lo[lead + i], box.hi[lead + i]);
  return operand;
}

} // namespace ppc::runtime::test

#endif // PPC_TEST_UNIT_KERNELCASES_H
