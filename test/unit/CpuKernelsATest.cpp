//===- CpuKernelsATest.cpp - contraction, conv/pool, norm, loss kernels ---===//
//
// For every op: the forward against a naive reference on small shapes, the
// backward against finite differences, and partitioned runs (batch, output
// channels, split reductions with partial sums, halos, staged batch_norm)
// against the whole-op run (KernelTestUtil.h).
//
//===----------------------------------------------------------------------===//

#include "DnnlConv.h"
#include "KernelCases.h"
#include "KernelHelpers.h"
#include "KernelTestUtil.h"

#include <gtest/gtest.h>

#include <numeric>

using namespace ppc::runtime;
using namespace ppc::runtime::test;

namespace {

KernelContext training() { return {}; }

KernelContext inference() {
  KernelContext ctx;
  ctx.training = false;
  return ctx;
}

/// The op's operands as random values in [-1, 1), one seed per operand.
std::vector<std::vector<float>> randomInputs(const OpDesc &op,
                                             uint32_t seed = 1) {
  std::vector<std::vector<float>> inputs;
  for (size_t i = 0; i < op.operandShapes.size(); ++i)
    inputs.push_back(
        randomValues(numElementsOf(op.operandShapes[i]), seed + 17 * i));
  return inputs;
}

std::vector<float> forwardWhole(const OpDesc &op, const KernelContext &ctx,
                                const std::vector<std::vector<float>> &inputs,
                                size_t result = 0) {
  OpRun run = runOp(op, ctx, inputs, {wholePartition(op)});
  EXPECT_EQ(run.error, "");
  return run.error.empty() ? run.outputs[result] : std::vector<float>{};
}

std::string forwardError(const OpDesc &op, const KernelContext &ctx,
                         const std::vector<std::vector<float>> &inputs,
                         const std::vector<Partition> &partitions) {
  return runOp(op, ctx, inputs, partitions).error;
}

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

/// Naive batched matmul with numpy broadcasting of the batch dims.
std::vector<float> referenceMatMul(const MatMulCase &c,
                                   const std::vector<float> &lhs,
                                   const std::vector<float> &rhs) {
  size_t rank = c.result.size(), batchRank = rank - 2;
  int64_t m = c.result[rank - 2], n = c.result[rank - 1];
  int64_t k = c.transposeLhs ? c.lhs[c.lhs.size() - 2] : c.lhs.back();
  std::vector<float> out(numElementsOf(c.result));
  std::vector<int64_t> batchShape(c.result.begin(), c.result.end() - 2);
  // Offset of the matrix of `batch` in an operand, broadcasting size-1 dims.
  auto matrixOffset = [&](const std::vector<int64_t> &shape,
                          const std::vector<int64_t> &batch) {
    size_t lead = batchRank - (shape.size() - 2);
    int64_t offset = 0;
    for (size_t d = 0; d + 2 < shape.size(); ++d)
      offset = offset * shape[d] + (shape[d] == 1 ? 0 : batch[lead + d]);
    return offset * shape[shape.size() - 2] * shape.back();
  };
  int64_t batches = numElementsOf(batchShape);
  for (int64_t b = 0; b < batches; ++b) {
    std::vector<int64_t> batch(batchRank);
    for (int64_t d = batchRank, rest = b; d-- > 0; rest /= batchShape[d])
      batch[d] = rest % batchShape[d];
    const float *a = lhs.data() + matrixOffset(c.lhs, batch);
    const float *bm = rhs.data() + matrixOffset(c.rhs, batch);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p)
          sum += static_cast<double>(c.transposeLhs ? a[p * m + i]
                                                    : a[i * k + p]) *
                 (c.transposeRhs ? bm[j * k + p] : bm[p * n + j]);
        out[(b * m + i) * n + j] = static_cast<float>(sum);
      }
  }
  return out;
}

TEST(CpuMatMul, ForwardMatchesNaiveProduct) {
  for (const MatMulCase &c : kMatMulCases) {
    OpDesc op = matMulOp(c);
    auto inputs = randomInputs(op);
    expectClose(forwardWhole(op, training(), inputs),
                referenceMatMul(c, inputs[0], inputs[1]), 1e-5, 1e-5,
                "matmul forward");
  }
}

TEST(CpuMatMul, GradientsMatchFiniteDifferences) {
  for (const MatMulCase &c : kMatMulCases) {
    OpDesc op = matMulOp(c);
    checkGradients(op, training(), randomInputs(op));
  }
}

TEST(CpuMatMul, PartitionsMatchWholeOp) {
  for (const MatMulCase &c : kMatMulCases) {
    OpDesc op = matMulOp(c);
    auto inputs = randomInputs(op);
    size_t rank = c.result.size();
    int64_t m = c.result[rank - 2], n = c.result[rank - 1];
    int64_t k = c.transposeLhs ? c.lhs[c.lhs.size() - 2] : c.lhs.back();
    std::vector<Range> wholeBatch;
    for (size_t d = 0; d + 2 < rank; ++d)
      wholeBatch.push_back({0, c.result[d]});
    // M x N x K split (K partial sums), 2 x 2 x 2.
    std::vector<Partition> grid;
    for (Range mr : splitRange(m, 2))
      for (Range nr : splitRange(n, 2))
        for (Range kr : splitRange(k, 2))
          grid.push_back(matMulPartition(c, wholeBatch, mr, nr, kr));
    expectPartitionsMatchWhole(op, training(), inputs, grid);
    // Batch split along dim 0 (weights broadcast over it are replicated).
    if (rank > 2) {
      std::vector<Partition> byBatch;
      for (Range br : splitRange(c.result[0], c.result[0])) {
        std::vector<Range> batch = wholeBatch;
        batch[0] = br;
        byBatch.push_back(matMulPartition(c, batch, {0, m}, {0, n}, {0, k}));
      }
      expectPartitionsMatchWhole(op, training(), inputs, byBatch);
    }
  }
}

TEST(CpuMatMul, RejectsMismatchedReductionBoxes) {
  MatMulCase c = kMatMulCases[0];
  OpDesc op = matMulOp(c);
  Partition p = matMulPartition(c, {}, {0, 3}, {0, 5}, {0, 2});
  p.inputs[1] = withRange(p.inputs[1], 0, 0, 4);
  EXPECT_NE(forwardError(op, training(), randomInputs(op), {p})
                .find("rhs box along K does not match"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// linear
//===----------------------------------------------------------------------===//

TEST(CpuLinear, ForwardMatchesNaiveProduct) {
  for (bool transposed : {false, true})
    for (bool bias : {false, true}) {
      OpDesc op = linearOp({2, 3, 4}, 5, transposed, bias);
      auto inputs = randomInputs(op);
      std::vector<float> expected(2 * 3 * 5);
      for (int64_t r = 0; r < 6; ++r)
        for (int64_t j = 0; j < 5; ++j) {
          double sum = bias ? inputs[2][j] : 0.0;
          for (int64_t p = 0; p < 4; ++p)
            sum += static_cast<double>(inputs[0][r * 4 + p]) *
                   inputs[1][transposed ? j * 4 + p : p * 5 + j];
          expected[r * 5 + j] = static_cast<float>(sum);
        }
      expectClose(forwardWhole(op, training(), inputs), expected, 1e-5, 1e-5,
                  "linear forward");
    }
}

TEST(CpuLinear, GradientsMatchFiniteDifferences) {
  for (bool transposed : {false, true})
    for (bool bias : {false, true}) {
      OpDesc op = linearOp({2, 3, 4}, 5, transposed, bias);
      checkGradients(op, training(), randomInputs(op));
    }
}

TEST(CpuLinear, PartitionsMatchWholeOp) {
  for (bool transposed : {false, true}) {
    OpDesc op = linearOp({4, 3, 6}, 5, transposed, /*bias=*/true);
    auto inputs = randomInputs(op);
    std::vector<Partition> byRows, byColumns, byReduction, grid;
    for (Range r : splitRange(4, 2))
      byRows.push_back(linearPartition(op, {r, {0, 3}}, {0, 5}, {0, 6}));
    for (Range n : splitRange(5, 3))
      byColumns.push_back(linearPartition(op, {{0, 4}, {0, 3}}, n, {0, 6}));
    for (Range k : splitRange(6, 3))
      byReduction.push_back(linearPartition(op, {{0, 4}, {0, 3}}, {0, 5}, k));
    for (Range r : splitRange(4, 2))
      for (Range n : splitRange(5, 2))
        for (Range k : splitRange(6, 2))
          grid.push_back(linearPartition(op, {r, {0, 3}}, n, k));
    for (const auto &partitions : {byRows, byColumns, byReduction, grid})
      expectPartitionsMatchWhole(op, training(), inputs, partitions);
  }
}

TEST(CpuLinear, RejectsMismatchedWeightBox) {
  OpDesc op = linearOp({2, 4}, 3, false, false);
  Partition p = linearPartition(op, {{0, 2}}, {0, 3}, {0, 2});
  p.inputs[1] = withRange(p.inputs[1], 0, 2, 4);
  EXPECT_NE(forwardError(op, training(), randomInputs(op), {p})
                .find("weight box along K does not match"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// conv2d
//===----------------------------------------------------------------------===//

std::vector<float> referenceConv(const ConvCase &c,
                                 const std::vector<std::vector<float>> &in) {
  std::vector<int64_t> r = c.result();
  int64_t C = c.input[1], H = c.input[2], W = c.input[3];
  int64_t Cg = c.weight[1], KH = c.weight[2], KW = c.weight[3];
  int64_t Fg = r[1] / c.groups;
  std::vector<float> out(numElementsOf(r));
  for (int64_t n = 0; n < r[0]; ++n)
    for (int64_t f = 0; f < r[1]; ++f)
      for (int64_t oh = 0; oh < r[2]; ++oh)
        for (int64_t ow = 0; ow < r[3]; ++ow) {
          double sum = c.bias ? in[2][f] : 0.0;
          for (int64_t j = 0; j < Cg; ++j)
            for (int64_t i = 0; i < KH; ++i)
              for (int64_t l = 0; l < KW; ++l) {
                int64_t ih = oh * c.strides[0] - c.pads[0] + i * c.dilations[0];
                int64_t iw = ow * c.strides[1] - c.pads[1] + l * c.dilations[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                  continue;
                int64_t ch = f / Fg * Cg + j;
                sum += static_cast<double>(
                           in[0][((n * C + ch) * H + ih) * W + iw]) *
                       in[1][((f * Cg + j) * KH + i) * KW + l];
              }
          out[((n * r[1] + f) * r[2] + oh) * r[3] + ow] =
              static_cast<float>(sum);
        }
  return out;
}

TEST(CpuConv2d, ForwardMatchesNaiveConvolution) {
  for (const ConvCase &c : kConvCases) {
    OpDesc op = convOp(c);
    auto inputs = randomInputs(op);
    expectClose(forwardWhole(op, training(), inputs), referenceConv(c, inputs),
                1e-5, 1e-5, "conv2d forward");
  }
}

TEST(CpuConv2d, GradientsMatchFiniteDifferences) {
  for (const ConvCase &c : kConvCases) {
    OpDesc op = convOp(c);
    checkGradients(op, training(), randomInputs(op));
  }
}

TEST(CpuConv2d, PartitionsMatchWholeOp) {
  for (const ConvCase &c : kConvCases) {
    OpDesc op = convOp(c);
    auto inputs = randomInputs(op);
    std::vector<int64_t> r = c.result();
    Range allN{0, r[0]}, allF{0, r[1]}, allH{0, r[2]}, allW{0, r[3]},
        allC{0, c.weight[1]};
    std::vector<Partition> byBatch, byChannels, byRows, byCols, grid;
    for (Range n : splitRange(r[0], r[0]))
      byBatch.push_back(convPartition(c, n, allF, allH, allW, allC));
    // Output channels cut across group boundaries when grouped.
    for (Range f : splitRange(r[1], 3))
      byChannels.push_back(convPartition(c, allN, f, allH, allW, allC));
    for (Range h : splitRange(r[2], 3))
      byRows.push_back(convPartition(c, allN, allF, h, allW, allC));
    for (Range w : splitRange(r[3], 2))
      byCols.push_back(convPartition(c, allN, allF, allH, w, allC));
    // Rows with halos x input channels (partial sums, groups == 1 only).
    int64_t channelParts = c.groups == 1 ? 2 : 1;
    for (Range h : splitRange(r[2], 2))
      for (Range ch : splitRange(c.weight[1], channelParts))
        for (Range f : splitRange(r[1], 2))
          grid.push_back(convPartition(c, allN, f, h, allW, ch));
    for (const auto &partitions : {byBatch, byChannels, byRows, byCols, grid})
      expectPartitionsMatchWhole(op, training(), inputs, partitions);
  }
}

TEST(CpuConv2d, OneDnnMatchesTheReferenceKernel) {
  for (const ConvCase &c : kConvCases) {
    OpDesc op = convOp(c);
    auto inputs = randomInputs(op);
    std::vector<int64_t> r = c.result();
    std::vector<std::vector<float>> dy = {randomValues(numElementsOf(r), 7)};
    Range allN{0, r[0]}, allF{0, r[1]}, allW{0, r[3]}, allC{0, c.weight[1]};
    // Whole, and by rows with halos (oneDNN pads only outside the tensor).
    std::vector<Partition> rows;
    for (Range h : splitRange(r[2], 2))
      rows.push_back(convPartition(c, allN, allF, h, allW, allC));
    for (const std::vector<Partition> &parts :
         {std::vector<Partition>{wholePartition(op)}, rows}) {
      const bool library = libraryKernels();
      setLibraryKernels(false);
      const int64_t before = cpu::dnnlConvCalls();
      OpRun reference = runOp(op, training(), inputs, parts, &dy);
      EXPECT_EQ(cpu::dnnlConvCalls(), before);
      setLibraryKernels(true);
      OpRun libraryRun = runOp(op, training(), inputs, parts, &dy);
      setLibraryKernels(library);
      EXPECT_EQ(cpu::dnnlConvCalls(),
                before + 2 * static_cast<int64_t>(parts.size()));
      ASSERT_EQ(reference.error, "");
      ASSERT_EQ(libraryRun.error, "");
      expectClose(libraryRun.outputs[0], reference.outputs[0], 1e-5, 1e-5,
                  "oneDNN conv2d forward");
      for (size_t i = 0; i < reference.inputGrads.size(); ++i)
        expectClose(libraryRun.inputGrads[i], reference.inputGrads[i], 1e-5,
                    1e-5, "oneDNN conv2d gradient");
    }
  }
}

TEST(CpuConv2d, RejectsMismatchedChannelBoxes) {
  const ConvCase &c = kConvCases[0];
  OpDesc op = convOp(c);
  Partition p = convPartition(c, {0, 2}, {0, 6}, {0, 6}, {0, 5}, {0, 2});
  p.inputs[1] = withRange(p.inputs[1], 1, 0, 4);
  EXPECT_NE(forwardError(op, training(), randomInputs(op), {p})
                .find("weight box does not match the input channel range"),
            std::string::npos);
  // Rows without their halo.
  Partition noHalo = convPartition(c, {0, 2}, {0, 6}, {0, 3}, {0, 5}, {0, 4});
  noHalo.inputs[0] = withRange(noHalo.inputs[0], 2, 0, 3);
  EXPECT_NE(
      forwardError(op, training(), randomInputs(op), {noHalo}).find("halo"),
      std::string::npos);
}

//===----------------------------------------------------------------------===//
// conv_transpose2d
//===----------------------------------------------------------------------===//

/// Each input element scattered through its group's weights onto the
/// result, in double.
std::vector<float>
referenceConvTranspose(const ConvTransposeCase &c,
                       const std::vector<std::vector<float>> &in) {
  std::vector<int64_t> r = c.result();
  int64_t C = c.input[1], H = c.input[2], W = c.input[3];
  int64_t Fg = c.weight[1], KH = c.weight[2], KW = c.weight[3];
  int64_t Cg = C / c.groups;
  std::vector<double> out(numElementsOf(r));
  for (int64_t n = 0; n < r[0]; ++n)
    for (int64_t f = 0; f < r[1]; ++f)
      for (int64_t k = 0; k < r[2] * r[3]; ++k)
        out[(n * r[1] + f) * r[2] * r[3] + k] = c.bias ? in[2][f] : 0.0;
  for (int64_t n = 0; n < r[0]; ++n)
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w)
          for (int64_t j = 0; j < Fg; ++j)
            for (int64_t i = 0; i < KH; ++i)
              for (int64_t l = 0; l < KW; ++l) {
                int64_t oh = h * c.strides[0] - c.pads[0] + i * c.dilations[0];
                int64_t ow = w * c.strides[1] - c.pads[1] + l * c.dilations[1];
                if (oh < 0 || oh >= r[2] || ow < 0 || ow >= r[3])
                  continue;
                int64_t f = ch / Cg * Fg + j;
                out[((n * r[1] + f) * r[2] + oh) * r[3] + ow] +=
                    static_cast<double>(in[0][((n * C + ch) * H + h) * W + w]) *
                    in[1][((ch * Fg + j) * KH + i) * KW + l];
              }
  return std::vector<float>(out.begin(), out.end());
}

TEST(CpuConvTranspose2d, ForwardMatchesNaiveScatter) {
  for (const ConvTransposeCase &c : kConvTransposeCases) {
    OpDesc op = convTransposeOp(c);
    auto inputs = randomInputs(op);
    expectClose(forwardWhole(op, training(), inputs),
                referenceConvTranspose(c, inputs), 1e-5, 1e-5,
                "conv_transpose2d forward");
  }
}

/// ONNX's test_convtranspose node test: x = 0..8 on 3x3, a ones kernel of
/// 2 output channels.
TEST(CpuConvTranspose2d, ForwardMatchesOnnxNodeTest) {
  ConvTransposeCase c{{1, 1, 3, 3}, {1, 2, 3, 3}, {1, 1}, {0, 0, 0, 0},
                      {1, 1},       {0, 0},       1,      false};
  OpDesc op = convTransposeOp(c);
  std::vector<std::vector<float>> inputs = {{0, 1, 2, 3, 4, 5, 6, 7, 8},
                                            std::vector<float>(18, 1.0f)};
  std::vector<float> plane = {0,  1,  3, 3,  2,  3,  8,  15, 12, 7,  9,  21, 36,
                              27, 15, 9, 20, 33, 24, 13, 6,  13, 21, 15, 8};
  std::vector<float> expected = plane;
  expected.insert(expected.end(), plane.begin(), plane.end());
  expectClose(forwardWhole(op, training(), inputs), expected, 0, 0,
              "conv_transpose2d ONNX node test");
}

TEST(CpuConvTranspose2d, GradientsMatchFiniteDifferences) {
  for (const ConvTransposeCase &c : kConvTransposeCases) {
    OpDesc op = convTransposeOp(c);
    checkGradients(op, training(), randomInputs(op));
  }
}

TEST(CpuConvTranspose2d, PartitionsMatchWholeOp) {
  for (const ConvTransposeCase &c : kConvTransposeCases) {
    OpDesc op = convTransposeOp(c);
    auto inputs = randomInputs(op);
    std::vector<int64_t> r = c.result();
    Range allN{0, r[0]}, allF{0, r[1]}, allC{0, c.input[1]};
    std::vector<Partition> byBatch, byChannels, byInputChannels, grid;
    for (Range n : splitRange(r[0], r[0]))
      byBatch.push_back(convTransposePartition(c, n, allF, allC));
    // Output channels and input channels (partial sums): groups == 1 only.
    int64_t parts = c.groups == 1 ? 2 : 1;
    for (Range f : splitRange(r[1], parts))
      byChannels.push_back(convTransposePartition(c, allN, f, allC));
    for (Range ch : splitRange(c.input[1], parts))
      byInputChannels.push_back(convTransposePartition(c, allN, allF, ch));
    for (Range n : splitRange(r[0], 2))
      for (Range ch : splitRange(c.input[1], parts))
        for (Range f : splitRange(r[1], parts))
          grid.push_back(convTransposePartition(c, n, f, ch));
    for (const auto &partitions : {byBatch, byChannels, byInputChannels, grid})
      expectPartitionsMatchWhole(op, training(), inputs, partitions);
  }
}

TEST(CpuConvTranspose2d, OneDnnMatchesTheReferenceKernel) {
  for (const ConvTransposeCase &c : kConvTransposeCases) {
    OpDesc op = convTransposeOp(c);
    auto inputs = randomInputs(op);
    std::vector<std::vector<float>> dy = {
        randomValues(numElementsOf(c.result()), 7)};
    std::vector<Partition> whole = {wholePartition(op)};
    const bool library = libraryKernels();
    setLibraryKernels(false);
    const int64_t before = cpu::dnnlConvCalls();
    OpRun reference = runOp(op, training(), inputs, whole, &dy);
    EXPECT_EQ(cpu::dnnlConvCalls(), before);
    setLibraryKernels(true);
    OpRun libraryRun = runOp(op, training(), inputs, whole, &dy);
    setLibraryKernels(library);
    // Forward (backward-data), input grad (forward), weight grad.
    EXPECT_EQ(cpu::dnnlConvCalls(), before + 3);
    ASSERT_EQ(reference.error, "");
    ASSERT_EQ(libraryRun.error, "");
    expectClose(libraryRun.outputs[0], reference.outputs[0], 1e-5, 1e-5,
                "oneDNN conv_transpose2d forward");
    for (size_t i = 0; i < reference.inputGrads.size(); ++i)
      expectClose(libraryRun.inputGrads[i], reference.inputGrads[i], 1e-5, 1e-5,
                  "oneDNN conv_transpose2d gradient");
  }
}

TEST(CpuConvTranspose2d, RejectsMismatchedChannelBoxes) {
  const ConvTransposeCase &c = kConvTransposeCases[0];
  OpDesc op = convTransposeOp(c);
  // The weight's input-channel rows are not the input's channels.
  Partition p = convTransposePartition(c, {0, 2}, {0, 3}, {0, 2});
  p.inputs[1] = withRange(p.inputs[1], 0, 2, 4);
  EXPECT_NE(forwardError(op, training(), randomInputs(op), {p})
                .find("weight box does not hold the output channels"),
            std::string::npos);
  // The weight's result-channel columns are not the result's channels.
  Partition q = convTransposePartition(c, {0, 2}, {0, 3}, {0, 4});
  q.inputs[1] = withRange(q.inputs[1], 1, 0, 2);
  EXPECT_NE(forwardError(op, training(), randomInputs(op), {q})
                .find("weight box does not match the input channel range"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// max_pool2d, avg_pool2d
//===----------------------------------------------------------------------===//

/// Naive pooling; a window's divisor follows PyTorch (count_include_pad
/// counts the padding up to the padded size, never a ceil_mode overhang).
std::vector<float> referencePool(const PoolCase &c, bool max,
                                 const std::vector<float> &in) {
  std::vector<int64_t> r = c.result();
  int64_t H = c.input[2], W = c.input[3];
  std::vector<float> out(numElementsOf(r));
  for (int64_t plane = 0; plane < r[0] * r[1]; ++plane)
    for (int64_t oh = 0; oh < r[2]; ++oh)
      for (int64_t ow = 0; ow < r[3]; ++ow) {
        int64_t hs = oh * c.strides[0] - c.pads[0];
        int64_t ws = ow * c.strides[1] - c.pads[1];
        int64_t he = std::min(hs + c.kernel[0], H + c.pads[2]);
        int64_t we = std::min(ws + c.kernel[1], W + c.pads[3]);
        double best = -1e30, sum = 0;
        int64_t count = 0;
        for (int64_t ih = std::max<int64_t>(hs, 0); ih < std::min(he, H); ++ih)
          for (int64_t iw = std::max<int64_t>(ws, 0); iw < std::min(we, W);
               ++iw) {
            float v = in[(plane * H + ih) * W + iw];
            best = std::max<double>(best, v);
            sum += v;
            ++count;
          }
        int64_t divisor = c.countIncludePad ? (he - hs) * (we - ws) : count;
        out[(plane * r[2] + oh) * r[3] + ow] =
            static_cast<float>(max ? best : sum / divisor);
      }
  return out;
}

std::vector<std::vector<Partition>> poolPartitionings(const PoolCase &c) {
  std::vector<int64_t> r = c.result();
  Range allN{0, r[0]}, allC{0, r[1]}, allH{0, r[2]}, allW{0, r[3]};
  std::vector<Partition> byBatch, byChannels, byRowsAndCols;
  for (Range n : splitRange(r[0], r[0]))
    byBatch.push_back(poolPartition(c, n, allC, allH, allW));
  for (Range ch : splitRange(r[1], 2))
    byChannels.push_back(poolPartition(c, allN, ch, allH, allW));
  for (Range h : splitRange(r[2], 2))
    for (Range w : splitRange(r[3], 2))
      byRowsAndCols.push_back(poolPartition(c, allN, allC, h, w));
  return {byBatch, byChannels, byRowsAndCols};
}

TEST(CpuPool2d, ForwardMatchesNaivePooling) {
  for (const PoolCase &c : kPoolCases)
    for (bool max : {true, false}) {
      OpDesc op = poolOp(max ? "ppc.max_pool2d" : "ppc.avg_pool2d", c);
      std::vector<std::vector<float>> inputs = {
          randomValues(numElementsOf(c.input), 3)};
      expectClose(forwardWhole(op, training(), inputs),
                  referencePool(c, max, inputs[0]), 1e-6, 1e-5,
                  op.kind + " forward");
    }
}

TEST(CpuPool2d, GradientsMatchFiniteDifferences) {
  for (const PoolCase &c : kPoolCases)
    for (const char *kind : {"ppc.max_pool2d", "ppc.avg_pool2d"}) {
      OpDesc op = poolOp(kind, c);
      checkGradients(op, training(),
                     {distinctValues(numElementsOf(c.input), 5)});
    }
}

TEST(CpuPool2d, MaxPoolRoutesTiesToTheFirstMaximum) {
  PoolCase c{{1, 1, 2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, false, false};
  OpDesc op = poolOp("ppc.max_pool2d", c);
  std::vector<std::vector<float>> grads = {{3.0f}};
  OpRun run = runOp(op, training(), {{1.0f, 2.0f, 2.0f, 0.5f}},
                    {wholePartition(op)}, &grads);
  ASSERT_EQ(run.error, "");
  expectClose(run.outputs[0], {2.0f}, 0, 0, "max_pool2d tie forward");
  expectClose(run.inputGrads[0], {0.0f, 3.0f, 0.0f, 0.0f}, 0, 0,
              "max_pool2d tie backward");
}

TEST(CpuPool2d, PartitionsMatchWholeOp) {
  for (const PoolCase &c : kPoolCases)
    for (const char *kind : {"ppc.max_pool2d", "ppc.avg_pool2d"}) {
      OpDesc op = poolOp(kind, c);
      std::vector<std::vector<float>> inputs = {
          distinctValues(numElementsOf(c.input), 7)};
      for (const auto &partitions : poolPartitionings(c))
        expectPartitionsMatchWhole(op, training(), inputs, partitions);
    }
}

//===----------------------------------------------------------------------===//
// resize
//===----------------------------------------------------------------------===//

/// 1, 2, ..., count: the inputs of ONNX's Resize test cases.
std::vector<float> countingValues(int64_t count) {
  std::vector<float> values(count);
  std::iota(values.begin(), values.end(), 1.0f);
  return values;
}

/// ONNX's own expected outputs (libonnx-testdata's node tests of Resize
/// 13, test_data_set_0) for the cases' inputs.
TEST(CpuResize, ForwardMatchesOnnxTestData) {
  struct OnnxCase {
    const char *name;
    ResizeCase c;
    std::vector<float> expected;
  };
  // KernelCases.h's tf_crop_and_resize case (ONNX's) on one channel.
  ResizeCase crop = kResizeCases.back();
  crop.input[1] = crop.result[1] = 1;
  const std::vector<OnnxCase> cases = {
      {"test_resize_upsample_scales_linear",
       {{1, 1, 2, 2}, {1, 1, 4, 4}, {2.0, 2.0}, "linear", "half_pixel"},
       {1.0f, 1.25f, 1.75f, 2.0f, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f, 2.75f, 3.25f,
        3.5f, 3.0f, 3.25f, 3.75f, 4.0f}},
      {"test_resize_downsample_scales_linear_align_corners",
       {{1, 1, 2, 4}, {1, 1, 1, 2}, {0.6, 0.6}, "linear", "align_corners"},
       {1.0f, 3.142857074737549f}},
      {"test_resize_upsample_sizes_nearest_ceil_half_pixel",
       {{1, 1, 4, 4},
        {1, 1, 8, 8},
        {2.0, 2.0},
        "nearest",
        "half_pixel",
        "ceil"},
       {1,  2,  2,  3,  3,  4,  4,  4,  5,  6,  6,  7,  7,  8,  8,  8,
        5,  6,  6,  7,  7,  8,  8,  8,  9,  10, 10, 11, 11, 12, 12, 12,
        9,  10, 10, 11, 11, 12, 12, 12, 13, 14, 14, 15, 15, 16, 16, 16,
        13, 14, 14, 15, 15, 16, 16, 16, 13, 14, 14, 15, 15, 16, 16, 16}},
      {"test_resize_tf_crop_and_resize",
       crop,
       {7.6f, 10, 10, 12.4f, 10, 10, 10, 10, 10}},
  };
  for (const OnnxCase &k : cases) {
    OpDesc op = resizeOp(k.c);
    expectClose(forwardWhole(op, training(),
                             {countingValues(numElementsOf(k.c.input))}),
                k.expected, 1e-5, 1e-5, k.name);
  }
  // test_resize_upsample_scales_cubic_A_n0p5_exclude_outside: rows 0 and 3.
  ResizeCase cubic{{1, 1, 4, 4}, {1, 1, 8, 8},         {2.0, 2.0}, "cubic",
                   "half_pixel", "round_prefer_floor", -0.5,       true};
  std::vector<float> got =
      forwardWhole(resizeOp(cubic), training(), {countingValues(16)});
  ASSERT_EQ(got.size(), 64u);
  expectClose({got.begin(), got.begin() + 8},
              {0.5588235259056091f, 0.8149420619010925f, 1.3569824695587158f,
               1.8970588445663452f, 2.3970587253570557f, 2.9371352195739746f,
               3.479175567626953f, 3.7352941036224365f},
              1e-5, 1e-5, "cubic exclude_outside row 0");
  expectClose({got.begin() + 24, got.begin() + 32},
              {5.911764621734619f, 6.167883396148682f, 6.70992374420166f, 7.25f,
               7.75f, 8.29007625579834f, 8.832117080688477f,
               9.088234901428223f},
              1e-5, 1e-5, "cubic exclude_outside row 3");
}

TEST(CpuResize, GradientsMatchFiniteDifferences) {
  for (const ResizeCase &c : kResizeCases)
    checkGradients(resizeOp(c), training(),
                   {randomValues(numElementsOf(c.input), 11)});
}

TEST(CpuResize, PartitionsMatchWholeOp) {
  for (const ResizeCase &c : kResizeCases) {
    OpDesc op = resizeOp(c);
    std::vector<std::vector<float>> inputs = {
        randomValues(numElementsOf(c.input), 13)};
    Range allN{0, c.input[0]}, allC{0, c.input[1]};
    std::vector<Partition> bySamples, byChannels;
    for (Range n : splitRange(c.input[0], c.input[0]))
      bySamples.push_back(resizePartition(c, n, allC));
    for (Range ch : splitRange(c.input[1], 2))
      byChannels.push_back(resizePartition(c, allN, ch));
    expectPartitionsMatchWhole(op, training(), inputs, bySamples);
    expectPartitionsMatchWhole(op, training(), inputs, byChannels);
  }
}

TEST(CpuResize, RejectsSplitPlanesAndUnknownModes) {
  const ResizeCase &c = kResizeCases[0];
  OpDesc op = resizeOp(c);
  std::vector<std::vector<float>> inputs = {
      randomValues(numElementsOf(c.input), 3)};
  Partition rows = wholePartition(op);
  rows.inputs[0] = withRange(rows.inputs[0], 2, 0, 2);
  rows.outputs[0] = withRange(rows.outputs[0], 2, 0, 4);
  EXPECT_NE(runOp(op, training(), inputs, {rows}).error.find("whole planes"),
            std::string::npos);
  OpDesc bad = op;
  bad.attributes["mode"] = std::string("bilinear");
  EXPECT_EQ(runOp(bad, training(), inputs, {wholePartition(bad)}).error,
            "ppc.resize: unknown mode 'bilinear'; expected one of 'nearest', "
            "'linear', 'cubic'");
}

//===----------------------------------------------------------------------===//
// global_avg_pool
//===----------------------------------------------------------------------===//

TEST(CpuGlobalAvgPool, ForwardGradientsAndPartitions) {
  OpDesc op = makeOp("ppc.global_avg_pool", {{2, 3, 4, 5}}, {{2, 3, 1, 1}}, {});
  auto inputs = randomInputs(op);
  std::vector<float> expected(6, 0.0f);
  for (int64_t plane = 0; plane < 6; ++plane) {
    double sum = 0;
    for (int64_t k = 0; k < 20; ++k)
      sum += inputs[0][plane * 20 + k];
    expected[plane] = static_cast<float>(sum / 20);
  }
  expectClose(forwardWhole(op, training(), inputs), expected, 1e-6, 1e-5,
              "global_avg_pool forward");
  checkGradients(op, training(), inputs);

  auto partition = [](Range n, Range c, Range h, Range w) {
    Box input{{n.first, c.first, h.first, w.first},
              {n.second, c.second, h.second, w.second}};
    Box output{{n.first, c.first, 0, 0}, {n.second, c.second, 1, 1}};
    return Partition{{input}, {output}};
  };
  std::vector<Partition> byBatchAndChannel, bySpatial;
  for (Range n : splitRange(2, 2))
    for (Range c : splitRange(3, 2))
      byBatchAndChannel.push_back(partition(n, c, {0, 4}, {0, 5}));
  // A split spatial dim is a reduction: partial means add up.
  for (Range h : splitRange(4, 2))
    for (Range w : splitRange(5, 2))
      bySpatial.push_back(partition({0, 2}, {0, 3}, h, w));
  expectPartitionsMatchWhole(op, training(), inputs, byBatchAndChannel);
  expectPartitionsMatchWhole(op, training(), inputs, bySpatial);
}

//===----------------------------------------------------------------------===//
// batch_norm
//===----------------------------------------------------------------------===//

/// Input, scale, bias, running mean, running variance (positive).
std::vector<std::vector<float>> batchNormInputs(const OpDesc &op) {
  return withBatchNormStatistics(randomInputs(op));
}

TEST(CpuBatchNorm, TrainingForwardNormalizesAndUpdatesRunningStats) {
  std::vector<int64_t> shape = {3, 2, 2, 3};
  OpDesc op = batchNormOp(shape);
  auto inputs = batchNormInputs(op);
  OpRun run = runOp(op, training(), inputs, {wholePartition(op)});
  ASSERT_EQ(run.error, "");
  std::vector<float> expected(inputs[0].size());
  std::vector<float> mean = inputs[3], variance = inputs[4];
  for (int64_t c = 0; c < 2; ++c) {
    std::vector<int64_t> at;
    for (int64_t n = 0; n < 3; ++n)
      for (int64_t k = 0; k < 6; ++k)
        at.push_back((n * 2 + c) * 6 + k);
    double sum = 0, squares = 0;
    for (int64_t i : at)
      sum += inputs[0][i];
    double m = sum / at.size();
    for (int64_t i : at)
      squares += (inputs[0][i] - m) * (inputs[0][i] - m);
    double biased = squares / at.size();
    for (int64_t i : at)
      expected[i] = static_cast<float>(
          (inputs[0][i] - m) / std::sqrt(biased + 1e-5) * inputs[1][c] +
          inputs[2][c]);
    mean[c] = static_cast<float>(0.9 * mean[c] + 0.1 * m);
    variance[c] =
        static_cast<float>(0.9 * variance[c] + 0.1 * squares / (at.size() - 1));
  }
  expectClose(run.outputs[0], expected, 1e-5, 1e-4, "batch_norm forward");
  expectClose(run.inputs[3], mean, 1e-6, 1e-5, "batch_norm running mean");
  expectClose(run.inputs[4], variance, 1e-6, 1e-5,
              "batch_norm running variance");
}

TEST(CpuBatchNorm, InferenceForwardUsesRunningStats) {
  OpDesc op = batchNormOp({2, 3, 2, 2});
  auto inputs = batchNormInputs(op);
  OpRun run = runOp(op, inference(), inputs, {wholePartition(op)});
  ASSERT_EQ(run.error, "");
  std::vector<float> expected(inputs[0].size());
  for (size_t i = 0; i < expected.size(); ++i) {
    int64_t c = (i / 4) % 3;
    expected[i] =
        static_cast<float>((inputs[0][i] - inputs[3][c]) /
                               std::sqrt(inputs[4][c] + 1e-5) * inputs[1][c] +
                           inputs[2][c]);
  }
  expectClose(run.outputs[0], expected, 1e-5, 1e-5,
              "batch_norm inference forward");
  expectClose(run.inputs[3], inputs[3], 0, 0, "running mean untouched");
  expectClose(run.inputs[4], inputs[4], 0, 0, "running variance untouched");
}

TEST(CpuBatchNorm, GradientsMatchFiniteDifferences) {
  OpDesc op = batchNormOp({3, 2, 2, 3});
  auto inputs = batchNormInputs(op);
  // In training the running statistics do not reach the result.
  checkGradients(op, training(), inputs, {true, true, true, false, false});
  checkGradients(op, inference(), inputs);
}

TEST(CpuBatchNorm, PartitionsWithSummedStatisticsMatchWholeOp) {
  std::vector<int64_t> shape = {4, 3, 4, 2};
  OpDesc op = batchNormOp(shape);
  auto inputs = batchNormInputs(op);
  std::vector<bool> needsGrad = {true, true, true, false, false};
  for (const auto &partitions : batchNormPartitionings(shape)) {
    expectPartitionsMatchWhole(op, training(), inputs, partitions, needsGrad,
                               2e-5);
    expectPartitionsMatchWhole(op, inference(), inputs, partitions, {}, 1e-5);
  }
}

TEST(CpuBatchNorm, StagesAndScratchShapes) {
  OpDesc op = batchNormOp({2, 5, 3, 3});
  std::vector<float> data(2 * 5 * 3 * 3);
  TensorView half =
      boxView(data, op.operandShapes[0], {{0, 1, 0, 0}, {2, 3, 3, 3}});
  EXPECT_EQ(numStages(op, {half}, true, false), 2);
  EXPECT_EQ(numStages(op, {half}, true, true), 2);
  EXPECT_EQ(numStages(op, {half}, false, false), 1);
  using Shapes = std::vector<std::vector<int64_t>>;
  EXPECT_EQ(scratchShapes(op, {half}, false), (Shapes{{3, 5}}));
  EXPECT_EQ(scratchShapes(op, {half}, true), (Shapes{{2, 5}}));
}

//===----------------------------------------------------------------------===//
// layer_norm
//===----------------------------------------------------------------------===//

TEST(CpuLayerNorm, ForwardGradientsAndPartitions) {
  // rms: RMSNorm (no mean subtracted; the variance is the mean square).
  for (bool rms : {false, true})
  for (bool bias : {false, true})
    for (int64_t axis : {-1, 1}) {
      std::vector<int64_t> shape = {3, 4, 5};
      std::vector<int64_t> normalized(shape.begin() + (axis == 1 ? 1 : 2),
                                      shape.end());
      std::vector<std::vector<int64_t>> operands = {shape, normalized};
      if (bias)
        operands.push_back(normalized);
      OpDesc op = makeOp("ppc.layer_norm", operands, {shape},
                         {{"axis", axis},
                          {"epsilon", 1e-5},
                          {"rms", int64_t(rms)}});
      auto inputs = randomInputs(op);
      int64_t width = numElementsOf(normalized), rows = 60 / width;
      std::vector<float> expected(60);
      for (int64_t r = 0; r < rows; ++r) {
        const float *x = inputs[0].data() + r * width;
        double mean = rms ? 0.0 : std::accumulate(x, x + width, 0.0) / width;
        double var = 0;
        for (int64_t k = 0; k < width; ++k)
          var += (x[k] - mean) * (x[k] - mean) / width;
        for (int64_t k = 0; k < width; ++k)
          expected[r * width + k] = static_cast<float>(
              (x[k] - mean) / std::sqrt(var + 1e-5) * inputs[1][k] +
              (bias ? inputs[2][k] : 0.0));
      }
      expectClose(forwardWhole(op, training(), inputs), expected, 1e-5, 1e-4,
                  "layer_norm forward");
      checkGradients(op, training(), inputs);

      std::vector<Partition> byRows;
      for (Range n : splitRange(3, 3))
        for (Range m : splitRange(4, axis == 1 ? 1 : 2)) {
          Partition p = wholePartition(op);
          Box box = withRange(withRange(wholeBox(shape), 0, n.first, n.second),
                              1, m.first, m.second);
          p.inputs[0] = box;
          p.outputs[0] = box;
          byRows.push_back(p);
        }
      expectPartitionsMatchWhole(op, training(), inputs, byRows);
    }
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax
//===----------------------------------------------------------------------===//

TEST(CpuSoftmax, ForwardGradientsAndPartitions) {
  for (const char *kind : {"ppc.softmax", "ppc.log_softmax"})
    for (int64_t axis : {-1, 1}) {
      std::vector<int64_t> shape = {2, 4, 3};
      OpDesc op = makeOp(kind, {shape}, {shape}, {{"axis", axis}});
      auto inputs = randomInputs(op);
      for (float &v : inputs[0])
        v *= 3.0f;
      bool log = std::string(kind) == "ppc.log_softmax";
      int64_t a = axis == 1 ? 1 : 2;
      int64_t inner = a == 1 ? 3 : 1, size = shape[a];
      std::vector<float> expected(24);
      for (int64_t i = 0; i < 24; ++i) {
        int64_t k = (i / inner) % size, first = i - k * inner;
        double sum = 0;
        for (int64_t j = 0; j < size; ++j)
          sum += std::exp(inputs[0][first + j * inner]);
        double p = std::exp(inputs[0][i]) / sum;
        expected[i] = static_cast<float>(log ? std::log(p) : p);
      }
      expectClose(forwardWhole(op, training(), inputs), expected, 1e-6, 1e-5,
                  op.kind + " forward");
      checkGradients(op, training(), inputs);

      std::vector<Partition> split;
      int64_t other = a == 1 ? 2 : 1;
      for (Range n : splitRange(2, 2))
        for (Range r : splitRange(shape[other], 2)) {
          Box box = withRange(withRange(wholeBox(shape), 0, n.first, n.second),
                              other, r.first, r.second);
          split.push_back({{box}, {box}});
        }
      expectPartitionsMatchWhole(op, training(), inputs, split);
    }
}

TEST(CpuSoftmax, RejectsSplitAxis) {
  OpDesc op = makeOp("ppc.softmax", {{2, 4}}, {{2, 4}}, {{"axis", int64_t{1}}});
  Box half{{0, 0}, {2, 2}};
  EXPECT_NE(forwardError(op, training(), randomInputs(op), {{{half}, {half}}})
                .find("softmax axis whole"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// softmax_cross_entropy, mse_loss
//===----------------------------------------------------------------------===//

TEST(CpuSoftmaxCrossEntropy, ForwardGradientsAndRowPartitions) {
  OpDesc op = makeOp("ppc.softmax_cross_entropy", {{6, 4}, {6}}, {{}}, {});
  std::vector<std::vector<float>> inputs = {randomValues(24, 11, -2, 2),
                                            {0, 3, 1, 1, 2, 0}};
  double total = 0;
  for (int64_t r = 0; r < 6; ++r) {
    double sum = 0;
    for (int64_t k = 0; k < 4; ++k)
      sum += std::exp(inputs[0][r * 4 + k]);
    total += std::log(sum) - inputs[0][r * 4 + int64_t(inputs[1][r])];
  }
  expectClose(forwardWhole(op, training(), inputs),
              {static_cast<float>(total / 6)}, 1e-6, 1e-5,
              "softmax_cross_entropy forward");
  checkGradients(op, training(), inputs, {true, false});

  std::vector<Partition> byRows;
  for (Range r : splitRange(6, 3))
    byRows.push_back(Partition{
        {Box{{r.first, 0}, {r.second, 4}}, Box{{r.first}, {r.second}}},
        {Box{}}});
  expectPartitionsMatchWhole(op, training(), inputs, byRows, {true, false});
}

// Vocabulary parallel: partitions holding some classes of some rows agree on
// each row's maximum and sum between the stages; the loss and the logits'
// gradient match the whole op's, with labels in every partition's classes.
TEST(CpuSoftmaxCrossEntropy, ClassPartitionsMatchWhole) {
  OpDesc op = makeOp("ppc.softmax_cross_entropy", {{4, 6}, {4}}, {{}}, {});
  std::vector<std::vector<float>> inputs = {randomValues(24, 5, -3, 3),
                                            {0, 5, 2, 3}};
  std::vector<Partition> grid;
  for (Range r : splitRange(4, 2))
    for (Range c : splitRange(6, 3))
      grid.push_back(Partition{{Box{{r.first, c.first}, {r.second, c.second}},
                                Box{{r.first}, {r.second}}},
                               {Box{}}});
  expectPartitionsMatchWhole(op, training(), inputs, grid, {true, false});
  // Large logits: the shared maximum keeps the exponentials finite.
  for (float &x : inputs[0])
    x *= 100;
  expectPartitionsMatchWhole(op, training(), inputs, grid, {true, false});
  OpRun whole = runOp(op, training(), inputs, {wholePartition(op)});
  ASSERT_TRUE(whole.error.empty()) << whole.error;
  EXPECT_TRUE(std::isfinite(whole.outputs[0][0]));
}

TEST(CpuSoftmaxCrossEntropy, RejectsLabelsThatAreNotClasses) {
  OpDesc op = makeOp("ppc.softmax_cross_entropy", {{2, 3}, {2}}, {{}}, {});
  std::vector<std::vector<float>> inputs = {randomValues(6, 1), {0, 3}};
  EXPECT_NE(forwardError(op, training(), inputs, {wholePartition(op)})
                .find("is not a class in [0, 3)"),
            std::string::npos);
}

TEST(CpuMseLoss, ForwardGradientsAndPartitions) {
  std::vector<int64_t> shape = {4, 3};
  OpDesc op = makeOp("ppc.mse_loss", {shape, shape}, {{}}, {});
  auto inputs = randomInputs(op);
  double total = 0;
  for (size_t i = 0; i < 12; ++i)
    total += (inputs[0][i] - inputs[1][i]) * (inputs[0][i] - inputs[1][i]);
  expectClose(forwardWhole(op, training(), inputs),
              {static_cast<float>(total / 12)}, 1e-6, 1e-5, "mse_loss forward");
  checkGradients(op, training(), inputs);

  std::vector<Partition> grid;
  for (Range r : splitRange(4, 2))
    for (Range c : splitRange(3, 2)) {
      Box box{{r.first, c.first}, {r.second, c.second}};
      grid.push_back(Partition{{box, box}, {Box{}}});
    }
  expectPartitionsMatchWhole(op, training(), inputs, grid);
}

TEST(CpuKernelsA, RegistersItsOps) {
  std::vector<std::string> ops = supportedOps();
  for (const char *kind :
       {"ppc.matmul", "ppc.linear", "ppc.conv2d", "ppc.conv_transpose2d",
        "ppc.max_pool2d", "ppc.avg_pool2d", "ppc.global_avg_pool", "ppc.resize",
        "ppc.batch_norm", "ppc.layer_norm", "ppc.softmax", "ppc.log_softmax",
        "ppc.softmax_cross_entropy", "ppc.mse_loss"})
    EXPECT_TRUE(std::find(ops.begin(), ops.end(), kind) != ops.end()) << kind;
}

} // namespace

//===----------------------------------------------------------------------===//
// The softmax family's vectorizable exponential
//===----------------------------------------------------------------------===//

TEST(CpuSoftmaxExp, WithinTwoUlpOfExp) {
  double worst = 0;
  for (double x = -86.6; x <= 88.3; x += 0.0037) {
    const float f = static_cast<float>(x);
    const double exact = std::exp(static_cast<double>(f));
    worst = std::max(worst, std::fabs(softmaxExp(f) - exact) / exact);
  }
  EXPECT_LT(worst, 2.4e-7); // 2 ulp of float
  EXPECT_EQ(softmaxExp(0.0f), 1.0f);
  EXPECT_EQ(softmaxExp(-100.0f), 0.0f);
  EXPECT_EQ(softmaxExp(-INFINITY), 0.0f);
  EXPECT_EQ(softmaxExp(89.0f), INFINITY);
  EXPECT_TRUE(std::isnan(softmaxExp(NAN)));
}
