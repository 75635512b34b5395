//===- GraphInterfaceTest.cpp - iteration spaces and costs of graph ops ---===//
//
// Checks ParallelizableOpInterface on every compute op of the ppc dialect:
// iteration dims (sizes, kinds, splittability), representative accesses
// (halos, grouped convolution, reshape groups, offsets) and FLOPs against
// hand-computed numbers.
//
//===----------------------------------------------------------------------===//

#include "EveryComputeOp.h"
#include "StatusText.h"

#include "ppc/Dialect/Graph/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <set>

using namespace mlir;
using namespace ppc;
using namespace ppc::graph;
using ppc::test::statusText;

namespace {

/// Iteration dims as text, e.g. "S8 P32 R3!": kind initial (Sample,
/// Attribute, Parameter, Reduction), size, and "!" when unsplittable.
std::string formatDims(const IterationSpace &space) {
  std::string text;
  for (const IterDim &dim : space.dims) {
    if (!text.empty())
      text += " ";
    text += static_cast<char>(std::toupper(stringifyIterKind(dim.kind)[0]));
    text += std::to_string(dim.size);
    if (!dim.splittable)
      text += "!";
  }
  return text;
}

/// An access as text: "d2" for identity on iteration dim 2, "*" for whole,
/// otherwise "{iterDim,divisor,stride,offset,extent}".
std::string formatAccess(const TensorAccess &access) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "[";
  llvm::interleaveComma(access.dims, os, [&](const DimAccess &a) {
    if (a.isWhole())
      os << "*";
    else if (a == DimAccess::identity(a.iterDim))
      os << "d" << a.iterDim;
    else
      os << "{" << a.iterDim << "," << a.divisor << "," << a.stride << ","
         << a.offset << "," << a.extent << "}";
  });
  os << "]";
  return text;
}

std::string formatSlice(const std::vector<Range> &slice) {
  std::string text;
  for (const Range &r : slice)
    text += (text.empty() ? "" : " ") + std::to_string(r.lo) + ":" +
            std::to_string(r.hi);
  return text;
}

/// Iteration ranges: the whole of every dim, except `dim` set to [lo, hi).
std::vector<Range> rangesWith(const IterationSpace &space, unsigned dim,
                              int64_t lo, int64_t hi) {
  std::vector<Range> ranges;
  for (const IterDim &d : space.dims)
    ranges.push_back({0, d.size});
  ranges[dim] = {lo, hi};
  return ranges;
}

class GraphInterfaceTest : public ::testing::Test {
protected:
  GraphInterfaceTest() { context.loadDialect<PPCDialect, func::FuncDialect>(); }

  /// Parses `body` inside a function with arguments `args` and returns its
  /// first parallelizable op (null on a parse or verification error).
  ParallelizableOpInterface parse(StringRef args, StringRef body) {
    std::string source =
        ("func.func @f(" + args + ") {\n" + body + "\n  return\n}\n").str();
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(source, ParserConfig(&context));
    if (!module)
      return nullptr;
    ParallelizableOpInterface found;
    module->walk([&](ParallelizableOpInterface op) {
      if (!found)
        found = op;
    });
    modules.push_back(std::move(module));
    return found;
  }

  /// The iteration space of the first op of `body`, checked self-consistent.
  IterationSpace spaceOf(StringRef args, StringRef body) {
    ParallelizableOpInterface op = parse(args, body);
    EXPECT_TRUE(op) << "failed to parse:\n" << body.str();
    if (!op)
      return {};
    IterationSpace space = op.getIterationSpace();
    EXPECT_EQ(statusText(space.validate()), "");
    return space;
  }

  OpCost costOf(StringRef args, StringRef body) {
    ParallelizableOpInterface op = parse(args, body);
    EXPECT_TRUE(op) << "failed to parse:\n" << body.str();
    return op ? op.getCost() : OpCost();
  }

  MLIRContext context;
  std::vector<OwningOpRef<ModuleOp>> modules;
};

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

TEST_F(GraphInterfaceTest, MatMul2D) {
  StringRef args = "%a: tensor<8x64xf32>, %b: tensor<64x32xf32>";
  StringRef body = "%0 = ppc.matmul %a, %b : (tensor<8x64xf32>, "
                   "tensor<64x32xf32>) -> tensor<8x32xf32>";
  IterationSpace space = spaceOf(args, body);
  EXPECT_EQ(formatDims(space), "S8 P32 R64");
  EXPECT_EQ(formatAccess(space.operands[0]), "[d0, d2]");
  EXPECT_EQ(formatAccess(space.operands[1]), "[d2, d1]");
  EXPECT_EQ(formatAccess(space.results[0]), "[d0, d1]");
  EXPECT_TRUE(space.makesPartialSum(2));
  EXPECT_FALSE(space.makesPartialSum(0));
  OpCost cost = costOf(args, body);
  EXPECT_EQ(cost.fwdFlops, 2.0 * 8 * 32 * 64);
  EXPECT_EQ(cost.bwdFlops, 4.0 * 8 * 32 * 64);
  EXPECT_EQ(cost.fwdBytes, 4.0 * (8 * 64 + 64 * 32 + 8 * 32));
  EXPECT_EQ(cost.bwdBytes, 2 * cost.fwdBytes);
}

TEST_F(GraphInterfaceTest, MatMul3D) {
  IterationSpace space =
      spaceOf("%a: tensor<4x8x16xf32>, %b: tensor<16x32xf32>",
              "%0 = ppc.matmul %a, %b : (tensor<4x8x16xf32>, "
              "tensor<16x32xf32>) -> tensor<4x8x32xf32>");
  EXPECT_EQ(formatDims(space), "S4 A8 P32 R16");
  // A rank-2 rhs has no batch dims: it is shared by every batch.
  EXPECT_EQ(formatAccess(space.operands[1]), "[d3, d2]");
}

TEST_F(GraphInterfaceTest, MatMulHeadsBroadcastTransposed) {
  // Attention-like: [batch, heads, M, N] with the rhs broadcast over batch.
  StringRef args = "%a: tensor<2x4x16x8xf32>, %b: tensor<1x4x32x16xf32>";
  StringRef body =
      "%0 = ppc.matmul %a, %b {transpose_lhs = true, transpose_rhs = true} : "
      "(tensor<2x4x16x8xf32>, tensor<1x4x32x16xf32>) -> tensor<2x4x8x32xf32>";
  IterationSpace space = spaceOf(args, body);
  EXPECT_EQ(formatDims(space), "S2 P4 A8 P32 R16");
  EXPECT_EQ(formatAccess(space.operands[0]), "[d0, d1, d4, d2]");
  EXPECT_EQ(formatAccess(space.operands[1]), "[*, d1, d3, d4]");
  EXPECT_EQ(costOf(args, body).fwdFlops, 2.0 * 2 * 4 * 8 * 32 * 16);
}

TEST_F(GraphInterfaceTest, Attention) {
  // [batch, heads, S, D] queries against T = 32 keys, value head size 6.
  StringRef args = "%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x32x8xf32>, "
                   "%v: tensor<2x4x32x6xf32>";
  StringRef body = "%0 = ppc.attention %q, %k, %v : (tensor<2x4x16x8xf32>, "
                   "tensor<2x4x32x8xf32>, tensor<2x4x32x6xf32>) -> "
                   "tensor<2x4x16x6xf32>";
  IterationSpace space = spaceOf(args, body);
  // Batch, heads, query positions and keys split (keys in blocks merged by
  // log-sum-exp); the head sizes may not be cut.
  EXPECT_EQ(formatDims(space), "S2 P4 A16 R32 R8! P6!");
  EXPECT_EQ(formatAccess(space.operands[0]), "[d0, d1, d2, d4]");
  EXPECT_EQ(formatAccess(space.operands[1]), "[d0, d1, d3, d4]");
  EXPECT_EQ(formatAccess(space.operands[2]), "[d0, d1, d3, d5]");
  EXPECT_EQ(formatAccess(space.results[0]), "[d0, d1, d2, d5]");
  // A query split leaves keys and values whole on every partition.
  EXPECT_EQ(
      formatSlice(sliceOf(space.operands[1], rangesWith(space, 2, 8, 16))),
      "0:2 0:4 0:32 0:8");
  // A key split: three stages over the partitions of the same rows, with
  // per-row statistics ([batch, heads, S] of the partition), the maxima
  // max-reduced after stage 0 and the sums summed after stage 1; none where
  // the keys are whole.
  ASSERT_TRUE(space.staged.has_value());
  const StagedKernel &staged = *space.staged;
  EXPECT_EQ(staged.acrossDims, std::vector<int32_t>{3});
  EXPECT_EQ(staged.forwardStages, 3);
  EXPECT_EQ(staged.backwardStages, 2);
  ASSERT_EQ(staged.forward.size(), 3u);
  EXPECT_TRUE(staged.forward[0].max);
  EXPECT_EQ(staged.forward[0].syncAfter, 0);
  EXPECT_EQ(staged.forward[1].syncAfter, 1);
  EXPECT_EQ(staged.forward[2].syncAfter, -1);
  EXPECT_EQ(staged.shapeOf(staged.forward[0], rangesWith(space, 2, 8, 16)),
            (std::vector<int64_t>{2, 4, 8}));
  EXPECT_TRUE(staged.runsFor({1, 1, 2, 2, 1, 1}, /*training=*/true));
  EXPECT_FALSE(staged.runsFor({2, 4, 2, 1, 1, 1}, /*training=*/true));
  EXPECT_TRUE(space.makesPartialSum(3));
  EXPECT_DOUBLE_EQ(staged.backwardWork, 3.5 / 2.5);
  OpCost cost = costOf(args, body);
  double forward = 2.0 * 2 * 4 * 16 * 32 * (8 + 6);
  EXPECT_EQ(cost.fwdFlops, forward);
  EXPECT_EQ(cost.bwdFlops, 2.5 * forward);
  EXPECT_EQ(cost.fwdBytes, 4.0 * (2 * 4 * (16 * 8 + 32 * 8 + 32 * 6 + 16 * 6)));
  EXPECT_EQ(cost.bwdBytes, 2 * cost.fwdBytes);
  EXPECT_EQ(cost.kernel, KernelKind::FusedAttention);
}

TEST_F(GraphInterfaceTest, AttentionCausalCountsVisiblePairs) {
  // Query i sees keys 0..i: 1 + 2 + ... + 8 = 36 pairs with S = T = 8; with
  // T = 4 keys the last four queries see all four: 10 + 16 = 26.
  StringRef args = "%q: tensor<8x4xf32>, %k: tensor<4x4xf32>";
  OpCost square = costOf(args, "%0 = ppc.attention %q, %q, %q {causal = true}"
                               " : (tensor<8x4xf32>, tensor<8x4xf32>, "
                               "tensor<8x4xf32>) -> tensor<8x4xf32>");
  EXPECT_EQ(square.fwdFlops, 2.0 * 36 * (4 + 4));
  OpCost fewKeys = costOf(args, "%0 = ppc.attention %q, %k, %k {causal = "
                                "true} : (tensor<8x4xf32>, tensor<4x4xf32>, "
                                "tensor<4x4xf32>) -> tensor<8x4xf32>");
  EXPECT_EQ(fewKeys.fwdFlops, 2.0 * 26 * (4 + 4));
}

TEST_F(GraphInterfaceTest, LinearTransposedWithBias) {
  StringRef args =
      "%x: tensor<4x10x64xf32>, %w: tensor<128x64xf32>, %b: tensor<128xf32>";
  StringRef body = "%0 = ppc.linear %x, %w, %b {transpose_weight = true} : "
                   "(tensor<4x10x64xf32>, tensor<128x64xf32>, tensor<128xf32>)"
                   " -> tensor<4x10x128xf32>";
  IterationSpace space = spaceOf(args, body);
  EXPECT_EQ(formatDims(space), "S4 A10 P128 R64");
  EXPECT_EQ(formatAccess(space.operands[0]), "[d0, d1, d3]");
  EXPECT_EQ(formatAccess(space.operands[1]), "[d2, d3]");
  EXPECT_EQ(formatAccess(space.operands[2]), "[d2]");
  EXPECT_EQ(formatAccess(space.results[0]), "[d0, d1, d2]");
  OpCost cost = costOf(args, body);
  // 2 * points + one bias add per output; backward two gradients + bias.
  EXPECT_EQ(cost.fwdFlops, 2.0 * 4 * 10 * 128 * 64 + 4 * 10 * 128);
  EXPECT_EQ(cost.bwdFlops, 4.0 * 4 * 10 * 128 * 64 + 4 * 10 * 128);
}

TEST_F(GraphInterfaceTest, Linear2D) {
  IterationSpace space =
      spaceOf("%x: tensor<32x784xf32>, %w: tensor<784x256xf32>",
              "%0 = ppc.linear %x, %w : (tensor<32x784xf32>, "
              "tensor<784x256xf32>) -> tensor<32x256xf32>");
  EXPECT_EQ(formatDims(space), "S32 P256 R784");
  EXPECT_EQ(formatAccess(space.operands[1]), "[d2, d1]");
}

TEST_F(GraphInterfaceTest, Conv2DHalo) {
  // 3x3, stride 2, pad 1: OH = (32 + 1 + 1 - 2 - 1) / 2 + 1 = 16.
  StringRef args = "%x: tensor<2x3x32x32xf32>, %w: tensor<16x3x3x3xf32>, "
                   "%b: tensor<16xf32>";
  StringRef body = "%0 = ppc.conv2d %x, %w, %b {pads = array<i64: 1, 1, 1, 1>,"
                   " strides = array<i64: 2, 2>} : (tensor<2x3x32x32xf32>, "
                   "tensor<16x3x3x3xf32>, tensor<16xf32>) -> "
                   "tensor<2x16x16x16xf32>";
  IterationSpace space = spaceOf(args, body);
  EXPECT_EQ(formatDims(space), "S2 P16 A16 A16 R3 R3! R3!");
  EXPECT_EQ(formatAccess(space.operands[0]),
            "[d0, d4, {2,1,2,-1,3}, {3,1,2,-1,3}]");
  EXPECT_EQ(formatAccess(space.operands[1]), "[d1, d4, d5, d6]");
  EXPECT_EQ(formatAccess(space.operands[2]), "[d1]");
  // Splitting oh in two: rows [0, 8) read input rows [0, 16) (the top pad
  // clipped), rows [8, 16) read [15, 32): row 15 is the halo.
  EXPECT_EQ(formatSlice(sliceOf(space.operands[0], rangesWith(space, 2, 0, 8))),
            "0:2 0:3 0:16 0:32");
  EXPECT_EQ(
      formatSlice(sliceOf(space.operands[0], rangesWith(space, 2, 8, 16))),
      "0:2 0:3 15:32 0:32");
  OpCost cost = costOf(args, body);
  double points = 2.0 * 16 * 16 * 16 * 3 * 3 * 3;
  EXPECT_EQ(cost.fwdFlops, 2 * points + 2 * 16 * 16 * 16);
  EXPECT_EQ(cost.bwdFlops, 4 * points + 2 * 16 * 16 * 16);
}

TEST_F(GraphInterfaceTest, Conv2DGroupedDilated) {
  // 4 groups of 2 input / 4 output channels; 3x3 dilated by 2 spans 5:
  // OH = (10 - 2 * 2 - 1) / 1 + 1 = 6.
  StringRef args = "%x: tensor<1x8x10x10xf32>, %w: tensor<16x2x3x3xf32>";
  StringRef body = "%0 = ppc.conv2d %x, %w {dilations = array<i64: 2, 2>, "
                   "groups = 4 : i64} : (tensor<1x8x10x10xf32>, "
                   "tensor<16x2x3x3xf32>) -> tensor<1x16x6x6xf32>";
  IterationSpace space = spaceOf(args, body);
  EXPECT_EQ(formatDims(space), "S1 P16 A6 A6 R2! R3! R3!");
  EXPECT_EQ(formatAccess(space.operands[0]),
            "[d0, {1,4,2,0,2}, {2,1,1,0,5}, {3,1,1,0,5}]");
  // Output channels [4, 8) are group 1: input channels [2, 4).
  EXPECT_EQ(formatSlice(sliceOf(space.operands[0], rangesWith(space, 1, 4, 8))),
            "0:1 2:4 0:10 0:10");
  // Output channels [4, 12) span groups 1 and 2: input channels [2, 6).
  EXPECT_EQ(
      formatSlice(sliceOf(space.operands[0], rangesWith(space, 1, 4, 12))),
      "0:1 2:6 0:10 0:10");
  EXPECT_EQ(costOf(args, body).fwdFlops, 2.0 * 16 * 6 * 6 * 2 * 3 * 3);
}

TEST_F(GraphInterfaceTest, ConvTranspose2DSplitsChannelsNotRows) {
  // 3x3, stride 2, pads 1, output_padding 1: OH = 7 * 2 - 2 + 3 + 1 = 16.
  StringRef args = "%x: tensor<2x4x8x8xf32>, %w: tensor<4x3x3x3xf32>, "
                   "%b: tensor<3xf32>";
  StringRef body =
      "%0 = ppc.conv_transpose2d %x, %w, %b {pads = array<i64: 1, 1, 1, 1>, "
      "strides = array<i64: 2, 2>, output_padding = array<i64: 1, 1>} : "
      "(tensor<2x4x8x8xf32>, tensor<4x3x3x3xf32>, tensor<3xf32>) -> "
      "tensor<2x3x16x16xf32>";
  IterationSpace space = spaceOf(args, body);
  EXPECT_EQ(formatDims(space), "S2 P3 A16! A16! R4 R3! R3!");
  EXPECT_EQ(formatAccess(space.operands[0]), "[d0, d4, *, *]");
  EXPECT_EQ(formatAccess(space.operands[1]), "[d4, d1, d5, d6]");
  EXPECT_EQ(formatAccess(space.operands[2]), "[d1]");
  EXPECT_EQ(formatAccess(space.results[0]), "[d0, d1, d2, d3]");
  EXPECT_TRUE(space.makesPartialSum(4));
  EXPECT_FALSE(space.makesPartialSum(1));
  // Every input element times the 3 x 3 x 3 taps of its row of weights.
  OpCost cost = costOf(args, body);
  double points = 2.0 * 4 * 8 * 8 * 3 * 3 * 3;
  EXPECT_EQ(cost.fwdFlops, 2 * points + 2 * 3 * 16 * 16);
  EXPECT_EQ(cost.bwdFlops, 4 * points + 2 * 3 * 16 * 16);
}

TEST_F(GraphInterfaceTest, ConvTranspose2DGroupedSplitsSamplesOnly) {
  StringRef args = "%x: tensor<1x4x3x3xf32>, %w: tensor<4x1x2x2xf32>";
  StringRef body = "%0 = ppc.conv_transpose2d %x, %w {groups = 2 : i64} : "
                   "(tensor<1x4x3x3xf32>, tensor<4x1x2x2xf32>) -> "
                   "tensor<1x2x4x4xf32>";
  IterationSpace space = spaceOf(args, body);
  EXPECT_EQ(formatDims(space), "S1 P2! A4! A4! R2! R2! R2!");
  EXPECT_EQ(formatAccess(space.operands[0]), "[d0, *, *, *]");
  EXPECT_EQ(formatAccess(space.operands[1]), "[*, *, d5, d6]");
}

//===----------------------------------------------------------------------===//
// Pooling and normalization
//===----------------------------------------------------------------------===//

TEST_F(GraphInterfaceTest, MaxPoolCeilMode) {
  // (8 - 3) / 2 = 2.5: floor gives 3 outputs, ceil 4.
  StringRef args = "%x: tensor<1x4x8x8xf32>";
  StringRef body =
      "%0 = ppc.max_pool2d %x {kernel = array<i64: 3, 3>, strides = "
      "array<i64: 2, 2>, ceil_mode = true} : tensor<1x4x8x8xf32> -> "
      "tensor<1x4x4x4xf32>";
  IterationSpace space = spaceOf(args, body);
  EXPECT_EQ(formatDims(space), "S1 P4 A4 A4 R3! R3!");
  EXPECT_EQ(formatAccess(space.operands[0]),
            "[d0, d1, {2,1,2,0,3}, {3,1,2,0,3}]");
  // The last window [6, 9) is clipped to the input.
  EXPECT_EQ(formatSlice(sliceOf(space.operands[0], rangesWith(space, 2, 3, 4))),
            "0:1 0:4 6:8 0:8");
  OpCost cost = costOf(args, body);
  EXPECT_EQ(cost.fwdFlops, 4.0 * 4 * 4 * 9);
  EXPECT_EQ(cost.bwdFlops, 4.0 * 4 * 4 * 9);
}

TEST_F(GraphInterfaceTest, AvgPoolPadded) {
  StringRef args = "%x: tensor<2x4x8x8xf32>";
  StringRef body =
      "%0 = ppc.avg_pool2d %x {kernel = array<i64: 3, 3>, pads = array<i64: "
      "1, 1, 1, 1>} : tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>";
  IterationSpace space = spaceOf(args, body);
  EXPECT_EQ(formatDims(space), "S2 P4 A8 A8 R3! R3!");
  EXPECT_EQ(formatAccess(space.operands[0]),
            "[d0, d1, {2,1,1,-1,3}, {3,1,1,-1,3}]");
  EXPECT_EQ(costOf(args, body).fwdFlops, 2.0 * 4 * 8 * 8 * 9);
}

TEST_F(GraphInterfaceTest, GlobalAvgPool) {
  StringRef args = "%x: tensor<2x8x5x5xf32>";
  StringRef body = "%0 = ppc.global_avg_pool %x : tensor<2x8x5x5xf32> -> "
                   "tensor<2x8x1x1xf32>";
  IterationSpace space = spaceOf(args, body);
  EXPECT_EQ(formatDims(space), "S2 P8 R5 R5");
  EXPECT_EQ(formatAccess(space.results[0]), "[d0, d1, *, *]");
  EXPECT_TRUE(space.makesPartialSum(2));
  EXPECT_EQ(costOf(args, body).fwdFlops, 2.0 * 8 * 5 * 5);
}

TEST_F(GraphInterfaceTest, ResizeSplitsSamplesAndChannelsOnly) {
  StringRef args = "%x: tensor<2x4x8x8xf32>";
  StringRef body = "%0 = ppc.resize %x {mode = \"linear\", scales = "
                   "array<f64: 2.0, 1.5>} : tensor<2x4x8x8xf32> -> "
                   "tensor<2x4x16x12xf32>";
  IterationSpace space = spaceOf(args, body);
  EXPECT_EQ(formatDims(space), "S2 P4 A16! A12!");
  EXPECT_EQ(formatAccess(space.operands[0]), "[d0, d1, *, *]");
  EXPECT_EQ(formatAccess(space.results[0]), "[d0, d1, d2, d3]");
  // Linear: 2 x 2 taps, 2 flops each, and 4 for the tap weights.
  OpCost cost = costOf(args, body);
  EXPECT_EQ(cost.fwdFlops, 2.0 * 4 * 16 * 12 * 12);
  EXPECT_EQ(cost.bwdFlops, cost.fwdFlops);
}

TEST_F(GraphInterfaceTest, BatchNorm) {
  StringRef args = "%x: tensor<4x8x6x6xf32>, %s: tensor<8xf32>, "
                   "%b: tensor<8xf32>, %m: tensor<8xf32>, %v: tensor<8xf32>";
  StringRef body = "%0 = ppc.batch_norm %x, %s, %b, %m, %v : "
                   "(tensor<4x8x6x6xf32>, tensor<8xf32>, tensor<8xf32>, "
                   "tensor<8xf32>, tensor<8xf32>) -> tensor<4x8x6x6xf32>";
  IterationSpace space = spaceOf(args, body);
  EXPECT_EQ(formatDims(space), "S4 P8 A6 A6");
  EXPECT_EQ(formatAccess(space.operands[0]), "[d0, d1, d2, d3]");
  for (unsigned i = 1; i < 5; ++i)
    EXPECT_EQ(formatAccess(space.operands[i]), "[d1]");
  OpCost cost = costOf(args, body);
  EXPECT_EQ(cost.fwdFlops, 8.0 * 4 * 8 * 6 * 6);
  EXPECT_EQ(cost.bwdFlops, 16.0 * 4 * 8 * 6 * 6);
  // Training sums [3, C] statistics over the partitions sharing channels
  // between two forward stages, [2, C] between two backward ones.
  ASSERT_TRUE(space.staged.has_value());
  const StagedKernel &staged = *space.staged;
  EXPECT_TRUE(staged.trainingOnly);
  EXPECT_EQ(staged.forwardStages, 2);
  EXPECT_EQ(staged.backwardStages, 2);
  EXPECT_EQ(staged.acrossDims, (std::vector<int32_t>{0, 2, 3}));
  std::vector<Range> half = {{0, 2}, {0, 4}, {0, 6}, {0, 6}};
  ASSERT_EQ(staged.forward.size(), 1u);
  EXPECT_EQ(staged.shapeOf(staged.forward[0], half),
            (std::vector<int64_t>{3, 8}));
  EXPECT_EQ(staged.forward[0].syncAfter, 0);
  EXPECT_FALSE(staged.forward[0].max);
  ASSERT_EQ(staged.backward.size(), 1u);
  EXPECT_EQ(staged.shapeOf(staged.backward[0], half),
            (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(statusText(space.validate()), "");
}

TEST_F(GraphInterfaceTest, BatchNorm2D) {
  // [N, C] (after a linear layer): channels are still dim 1.
  IterationSpace space =
      spaceOf("%x: tensor<4x8xf32>, %s: tensor<8xf32>",
              "%0 = ppc.batch_norm %x, %s, %s, %s, %s : (tensor<4x8xf32>, "
              "tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> "
              "tensor<4x8xf32>");
  EXPECT_EQ(formatDims(space), "S4 P8");
}

TEST_F(GraphInterfaceTest, LayerNorm) {
  StringRef args =
      "%x: tensor<2x5x16xf32>, %s: tensor<16xf32>, %b: tensor<16xf32>";
  StringRef body = "%0 = ppc.layer_norm %x, %s, %b : (tensor<2x5x16xf32>, "
                   "tensor<16xf32>, tensor<16xf32>) -> tensor<2x5x16xf32>";
  IterationSpace space = spaceOf(args, body);
  EXPECT_EQ(formatDims(space), "S2 A5 P16!");
  EXPECT_EQ(formatAccess(space.operands[1]), "[d2]");
  EXPECT_EQ(formatAccess(space.operands[2]), "[d2]");
  EXPECT_EQ(costOf(args, body).fwdFlops, 8.0 * 2 * 5 * 16);
}

TEST_F(GraphInterfaceTest, LayerNormTwoAxes) {
  IterationSpace space = spaceOf(
      "%x: tensor<2x5x16xf32>, %s: tensor<5x16xf32>",
      "%0 = ppc.layer_norm %x, %s {axis = 1 : i64} : (tensor<2x5x16xf32>, "
      "tensor<5x16xf32>) -> tensor<2x5x16xf32>");
  EXPECT_EQ(formatDims(space), "S2 A5! P16!");
  EXPECT_EQ(formatAccess(space.operands[1]), "[d1, d2]");
}

TEST_F(GraphInterfaceTest, SoftmaxAndLogSoftmax) {
  for (StringRef name : {"softmax", "log_softmax"}) {
    std::string body =
        ("%0 = ppc." + name + " %x {axis = 3 : i64} : tensor<2x4x8x8xf32>")
            .str();
    IterationSpace space = spaceOf("%x: tensor<2x4x8x8xf32>", body);
    EXPECT_EQ(formatDims(space), "S2 P4 A8 A8!") << name.str();
    OpCost cost = costOf("%x: tensor<2x4x8x8xf32>", body);
    EXPECT_EQ(cost.fwdFlops, 5.0 * 512) << name.str();
    EXPECT_EQ(cost.bwdFlops, 4.0 * 512) << name.str();
  }
  // The default axis is the last.
  EXPECT_EQ(formatDims(spaceOf("%x: tensor<8x10xf32>",
                               "%0 = ppc.softmax %x : tensor<8x10xf32>")),
            "S8 P10!");
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

TEST_F(GraphInterfaceTest, UnaryOps) {
  for (StringRef name :
       {"relu",     "leaky_relu",   "gelu",       "sigmoid",    "tanh",
        "clip",     "sqrt",         "rsqrt",      "exp",        "log",
        "erf",      "neg",          "abs",        "reciprocal", "silu",
        "dropout",  "hard_sigmoid", "hard_swish", "elu",        "selu",
        "softplus", "mish"}) {
    std::string body = ("%0 = ppc." + name + " %x : tensor<4x8xf32>").str();
    IterationSpace space = spaceOf("%x: tensor<4x8xf32>", body);
    EXPECT_EQ(formatDims(space), "S4 P8") << name.str();
    EXPECT_EQ(formatAccess(space.operands[0]), "[d0, d1]") << name.str();
    OpCost cost = costOf("%x: tensor<4x8xf32>", body);
    EXPECT_EQ(cost.fwdFlops, 32) << name.str();
    EXPECT_EQ(cost.bwdFlops, 32) << name.str();
    EXPECT_EQ(cost.fwdBytes, 2 * 32 * 4) << name.str();
  }
}

TEST_F(GraphInterfaceTest, BinaryOpsBroadcast) {
  // [4, 1, 8] op [3, 1] -> [4, 3, 8]; a comparison's i1 result passes no
  // gradient, so it costs nothing backward.
  struct Case {
    StringRef name, result;
    double bwdFlops;
  };
  for (const Case &c :
       {Case{"add", "f32", 192}, Case{"sub", "f32", 192},
        Case{"mul", "f32", 192}, Case{"div", "f32", 192},
        Case{"pow", "f32", 192}, Case{"max", "f32", 192},
        Case{"min", "f32", 192}, Case{"equal", "i1", 0}, Case{"less", "i1", 0},
        Case{"less_equal", "i1", 0}, Case{"greater", "i1", 0},
        Case{"greater_equal", "i1", 0}}) {
    std::string body = ("%0 = ppc." + c.name +
                        " %a, %b : (tensor<4x1x8xf32>, tensor<3x1xf32>) -> "
                        "tensor<4x3x8x" +
                        c.result + ">")
                           .str();
    StringRef args = "%a: tensor<4x1x8xf32>, %b: tensor<3x1xf32>";
    IterationSpace space = spaceOf(args, body);
    EXPECT_EQ(formatDims(space), "S4 A3 P8") << c.name.str();
    EXPECT_EQ(formatAccess(space.operands[0]), "[d0, *, d2]") << c.name.str();
    EXPECT_EQ(formatAccess(space.operands[1]), "[d1, *]") << c.name.str();
    OpCost cost = costOf(args, body);
    EXPECT_EQ(cost.fwdFlops, 96) << c.name.str();
    EXPECT_EQ(cost.bwdFlops, c.bwdFlops) << c.name.str();
  }
}

TEST_F(GraphInterfaceTest, SelectSplitsEveryDim) {
  // A [2, 1, 4] key padding mask, a scalar fill, [2, 3, 4] scores.
  StringRef args =
      "%c: tensor<2x1x4xi1>, %f: tensor<f32>, %s: tensor<2x3x4xf32>";
  StringRef body = "%0 = ppc.select %c, %f, %s : (tensor<2x1x4xi1>, "
                   "tensor<f32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>";
  IterationSpace space = spaceOf(args, body);
  EXPECT_EQ(formatDims(space), "S2 A3 P4");
  EXPECT_EQ(formatAccess(space.operands[0]), "[d0, *, d2]");
  EXPECT_EQ(formatAccess(space.operands[1]), "[]");
  EXPECT_EQ(formatAccess(space.operands[2]), "[d0, d1, d2]");
  OpCost cost = costOf(args, body);
  EXPECT_EQ(cost.fwdFlops, 24);
  EXPECT_EQ(cost.bwdFlops, 48);
}

TEST_F(GraphInterfaceTest, CumSumKeepsItsAxisWhole) {
  StringRef args = "%x: tensor<2x8x16xf32>";
  IterationSpace space =
      spaceOf(args, "%0 = ppc.cumsum %x {axis = 1 : i64} : tensor<2x8x16xf32>");
  EXPECT_EQ(formatDims(space), "S2 A8! P16");
  EXPECT_EQ(formatDims(spaceOf(
                args, "%0 = ppc.cumsum %x {axis = -1 : i64, reverse = true} : "
                      "tensor<2x8x16xf32>")),
            "S2 A8 P16!");
  OpCost cost =
      costOf(args, "%0 = ppc.cumsum %x {axis = 1 : i64} : tensor<2x8x16xf32>");
  EXPECT_EQ(cost.fwdFlops, 256);
  EXPECT_EQ(cost.bwdFlops, 256);
}

TEST_F(GraphInterfaceTest, PReluSlopePerChannel) {
  // A [C, 1, 1] slope against NCHW: the slope follows the channel dim only.
  StringRef args = "%x: tensor<2x4x3x3xf32>, %s: tensor<4x1x1xf32>";
  StringRef body = "%0 = ppc.prelu %x, %s : (tensor<2x4x3x3xf32>, "
                   "tensor<4x1x1xf32>) -> tensor<2x4x3x3xf32>";
  IterationSpace space = spaceOf(args, body);
  EXPECT_EQ(formatDims(space), "S2 P4 A3 A3");
  EXPECT_EQ(formatAccess(space.operands[0]), "[d0, d1, d2, d3]");
  EXPECT_EQ(formatAccess(space.operands[1]), "[d1, *, *]");
  OpCost cost = costOf(args, body);
  EXPECT_EQ(cost.fwdFlops, 72);
  EXPECT_EQ(cost.bwdFlops, 144);
}

TEST_F(GraphInterfaceTest, CastAndBroadcast) {
  StringRef castBody = "%0 = ppc.cast %x : tensor<4x8xf32> -> tensor<4x8xf16>";
  IterationSpace cast = spaceOf("%x: tensor<4x8xf32>", castBody);
  EXPECT_EQ(formatDims(cast), "S4 P8");
  OpCost castCost = costOf("%x: tensor<4x8xf32>", castBody);
  EXPECT_EQ(castCost.fwdFlops, 32);
  EXPECT_EQ(castCost.fwdBytes, 32 * 4 + 32 * 2);

  StringRef bcastBody =
      "%0 = ppc.broadcast %x : tensor<3x1xf32> -> tensor<2x3x4xf32>";
  IterationSpace bcast = spaceOf("%x: tensor<3x1xf32>", bcastBody);
  EXPECT_EQ(formatDims(bcast), "S2 A3 P4");
  EXPECT_EQ(formatAccess(bcast.operands[0]), "[d1, *]");
  OpCost bcastCost = costOf("%x: tensor<3x1xf32>", bcastBody);
  EXPECT_EQ(bcastCost.fwdFlops, 0);
  EXPECT_EQ(bcastCost.bwdFlops, 24);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

TEST_F(GraphInterfaceTest, Reductions) {
  StringRef args = "%x: tensor<4x6x8xf32>";
  IterationSpace kept =
      spaceOf(args, "%0 = ppc.reduce_sum %x {axes = array<i64: 1>} : "
                    "tensor<4x6x8xf32> -> tensor<4x1x8xf32>");
  EXPECT_EQ(formatDims(kept), "S4 R6 P8");
  EXPECT_EQ(formatAccess(kept.results[0]), "[d0, *, d2]");
  EXPECT_TRUE(kept.makesPartialSum(1));

  StringRef meanBody = "%0 = ppc.reduce_mean %x {axes = array<i64: -1>, "
                       "keep_dims = false} : tensor<4x6x8xf32> -> "
                       "tensor<4x6xf32>";
  IterationSpace dropped = spaceOf(args, meanBody);
  EXPECT_EQ(formatDims(dropped), "S4 A6 R8");
  EXPECT_EQ(formatAccess(dropped.results[0]), "[d0, d1]");
  EXPECT_EQ(costOf(args, meanBody).fwdFlops, 192);

  IterationSpace max =
      spaceOf(args, "%0 = ppc.reduce_max %x {axes = array<i64: 0, 2>, "
                    "keep_dims = false} : tensor<4x6x8xf32> -> tensor<6xf32>");
  // Partial maxima do not sum: reduce_max's reduced dims stay whole.
  EXPECT_EQ(formatDims(max), "R4! A6 R8!");
  EXPECT_EQ(formatAccess(max.results[0]), "[d1]");
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

TEST_F(GraphInterfaceTest, ReshapeSplitsDim) {
  // [6, 4] -> [2, 3, 4]: result index i of dim 0 reads input rows [3i, 3i+3).
  IterationSpace space =
      spaceOf("%x: tensor<6x4xf32>",
              "%0 = ppc.reshape %x : tensor<6x4xf32> -> tensor<2x3x4xf32>");
  EXPECT_EQ(formatDims(space), "S2 A3! P4");
  EXPECT_EQ(formatAccess(space.operands[0]), "[{0,1,3,0,3}, d2]");
  EXPECT_EQ(formatSlice(sliceOf(space.operands[0], rangesWith(space, 0, 1, 2))),
            "3:6 0:4");
}

TEST_F(GraphInterfaceTest, ReshapeMergesDims) {
  // [2, 3, 4] -> [6, 4]: result row r reads input row r / 3.
  IterationSpace space =
      spaceOf("%x: tensor<2x3x4xf32>",
              "%0 = ppc.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>");
  EXPECT_EQ(formatDims(space), "S6 P4");
  EXPECT_EQ(formatAccess(space.operands[0]), "[{0,3,1,0,1}, *, d1]");
  EXPECT_EQ(formatSlice(sliceOf(space.operands[0], rangesWith(space, 0, 3, 6))),
            "1:2 0:3 0:4");
  EXPECT_EQ(costOf("%x: tensor<2x3x4xf32>",
                   "%0 = ppc.reshape %x : tensor<2x3x4xf32> -> "
                   "tensor<6x4xf32>")
                .fwdBytes,
            0);
}

TEST_F(GraphInterfaceTest, ReshapeUnitDimsAndStraddling) {
  IterationSpace unit =
      spaceOf("%x: tensor<8x1x16xf32>",
              "%0 = ppc.reshape %x : tensor<8x1x16xf32> -> tensor<8x16xf32>");
  EXPECT_EQ(formatDims(unit), "S8 P16");
  EXPECT_EQ(formatAccess(unit.operands[0]), "[d0, *, d1]");

  // [6, 4] -> [4, 6]: result rows straddle input rows; nothing splits.
  IterationSpace straddle =
      spaceOf("%x: tensor<6x4xf32>",
              "%0 = ppc.reshape %x : tensor<6x4xf32> -> tensor<4x6xf32>");
  EXPECT_EQ(formatDims(straddle), "S4! P6!");
  EXPECT_EQ(formatAccess(straddle.operands[0]), "[*, *]");
}

TEST_F(GraphInterfaceTest, ReshapeHeads) {
  // [B, S, H*D] -> [B, S, H, D] (multi-head attention).
  IterationSpace space = spaceOf(
      "%x: tensor<2x16x64xf32>",
      "%0 = ppc.reshape %x : tensor<2x16x64xf32> -> tensor<2x16x8x8xf32>");
  EXPECT_EQ(formatDims(space), "S2 P16 A8 A8!");
  EXPECT_EQ(formatAccess(space.operands[0]), "[d0, d1, {2,1,8,0,8}]");
}

TEST_F(GraphInterfaceTest, Transpose) {
  StringRef args = "%x: tensor<2x3x4xf32>";
  StringRef body = "%0 = ppc.transpose %x {permutation = array<i64: 2, 0, 1>}"
                   " : tensor<2x3x4xf32> -> tensor<4x2x3xf32>";
  IterationSpace space = spaceOf(args, body);
  EXPECT_EQ(formatDims(space), "S4 A2 P3");
  EXPECT_EQ(formatAccess(space.operands[0]), "[d1, d2, d0]");
  OpCost cost = costOf(args, body);
  EXPECT_EQ(cost.fwdFlops, 0);
  EXPECT_EQ(cost.fwdBytes, 2 * 24 * 4);
}

TEST_F(GraphInterfaceTest, ConcatAndSplit) {
  IterationSpace concat =
      spaceOf("%a: tensor<2x3xf32>, %b: tensor<2x5xf32>",
              "%0 = ppc.concat %a, %b {axis = 1 : i64} : (tensor<2x3xf32>, "
              "tensor<2x5xf32>) -> tensor<2x8xf32>");
  EXPECT_EQ(formatDims(concat), "S2 P8");
  EXPECT_EQ(formatAccess(concat.operands[0]), "[d0, d1]");
  EXPECT_EQ(formatAccess(concat.operands[1]), "[d0, {1,1,1,-3,1}]");
  // Result columns [0, 4) read a's [0, 3) and b's [0, 1).
  std::vector<Range> left = rangesWith(concat, 1, 0, 4);
  EXPECT_EQ(formatSlice(sliceOf(concat.operands[0], left)), "0:2 0:3");
  EXPECT_EQ(formatSlice(sliceOf(concat.operands[1], left)), "0:2 0:1");

  IterationSpace split =
      spaceOf("%x: tensor<2x8xf32>",
              "%0:2 = ppc.split %x {axis = -1 : i64} : tensor<2x8xf32> -> "
              "tensor<2x3xf32>, tensor<2x5xf32>");
  EXPECT_EQ(formatDims(split), "S2 P8");
  EXPECT_EQ(formatAccess(split.operands[0]), "[d0, d1]");
  EXPECT_EQ(formatAccess(split.results[1]), "[d0, {1,1,1,-3,1}]");
  EXPECT_EQ(formatSlice(sliceOf(split.results[1], rangesWith(split, 1, 4, 8))),
            "0:2 1:5");
}

TEST_F(GraphInterfaceTest, SliceAndPad) {
  // Rows 1, 3, 5, 7 of 10.
  IterationSpace slice = spaceOf(
      "%x: tensor<10x8xf32>",
      "%0 = ppc.slice %x {starts = array<i64: 1, 0>, steps = array<i64: 2, "
      "1>} : tensor<10x8xf32> -> tensor<4x8xf32>");
  EXPECT_EQ(formatDims(slice), "S4 P8");
  EXPECT_EQ(formatAccess(slice.operands[0]), "[{0,1,2,1,1}, d1]");
  EXPECT_EQ(formatSlice(sliceOf(slice.operands[0], rangesWith(slice, 0, 2, 4))),
            "5:8 0:8");

  IterationSpace pad =
      spaceOf("%x: tensor<2x3x4xf32>",
              "%0 = ppc.pad %x {pads = array<i64: 0, 0, 1, 0, 0, 2>} : "
              "tensor<2x3x4xf32> -> tensor<2x3x7xf32>");
  EXPECT_EQ(formatDims(pad), "S2 A3 P7");
  EXPECT_EQ(formatAccess(pad.operands[0]), "[d0, d1, {2,1,1,-1,1}]");
  // Result columns [0, 3) read input columns [0, 2) (column 0 is padding).
  EXPECT_EQ(formatSlice(sliceOf(pad.operands[0], rangesWith(pad, 2, 0, 3))),
            "0:2 0:3 0:2");
}

TEST_F(GraphInterfaceTest, GatherEmbedding) {
  StringRef args = "%table: tensor<100x16xf32>, %ids: tensor<4x10xi64>";
  StringRef body = "%0 = ppc.gather %table, %ids : (tensor<100x16xf32>, "
                   "tensor<4x10xi64>) -> tensor<4x10x16xf32>";
  IterationSpace space = spaceOf(args, body);
  // The vocabulary is a reduction dim: vocabulary-parallel partial sums.
  EXPECT_EQ(formatDims(space), "S4 A10 P16 R100");
  EXPECT_EQ(formatAccess(space.operands[0]), "[d3, d2]");
  EXPECT_EQ(formatAccess(space.operands[1]), "[d0, d1]");
  EXPECT_TRUE(space.makesPartialSum(3));
  OpCost cost = costOf(args, body);
  EXPECT_EQ(cost.fwdFlops, 0);
  EXPECT_EQ(cost.bwdFlops, 4 * 10 * 16);
  EXPECT_EQ(cost.fwdBytes, 4 * 10 * 8 + 2 * 4 * 10 * 16 * 4);
}

TEST_F(GraphInterfaceTest, GatherInnerAxis) {
  IterationSpace space =
      spaceOf("%x: tensor<5x6x7xf32>, %i: tensor<3xi32>",
              "%0 = ppc.gather %x, %i {axis = 1 : i64} : (tensor<5x6x7xf32>, "
              "tensor<3xi32>) -> tensor<5x3x7xf32>");
  EXPECT_EQ(formatDims(space), "S5 A3 P7 R6");
  EXPECT_EQ(formatAccess(space.operands[0]), "[d0, d3, d2]");
  EXPECT_EQ(formatAccess(space.operands[1]), "[d1]");
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

TEST_F(GraphInterfaceTest, SoftmaxCrossEntropy) {
  StringRef args = "%logits: tensor<8x10xf32>, %labels: tensor<8xi64>";
  StringRef body = "%0 = ppc.softmax_cross_entropy %logits, %labels : "
                   "(tensor<8x10xf32>, tensor<8xi64>) -> tensor<f32>";
  IterationSpace space = spaceOf(args, body);
  EXPECT_EQ(formatDims(space), "S8 R10");
  EXPECT_EQ(formatAccess(space.operands[1]), "[d0]");
  EXPECT_EQ(formatAccess(space.results[0]), "[]");
  EXPECT_TRUE(space.makesPartialSum(0));
  EXPECT_TRUE(space.makesPartialSum(1));
  // Vocabulary parallel: the row maxima ([rows], max) after stage 0, the
  // sums and the labels' logits ([2, rows], sum) after stage 1, over the
  // partitions differing only in their classes; in inference too.
  ASSERT_TRUE(space.staged.has_value());
  const StagedKernel &staged = *space.staged;
  EXPECT_FALSE(staged.trainingOnly);
  EXPECT_EQ(staged.forwardStages, 3);
  EXPECT_EQ(staged.backwardStages, 1);
  EXPECT_EQ(staged.acrossDims, (std::vector<int32_t>{1}));
  ASSERT_EQ(staged.forward.size(), 2u);
  std::vector<Range> part = {{2, 6}, {5, 10}};
  EXPECT_EQ(staged.shapeOf(staged.forward[0], part), (std::vector<int64_t>{4}));
  EXPECT_TRUE(staged.forward[0].max);
  EXPECT_EQ(staged.forward[0].syncAfter, 0);
  EXPECT_EQ(staged.shapeOf(staged.forward[1], part),
            (std::vector<int64_t>{2, 4}));
  EXPECT_FALSE(staged.forward[1].max);
  EXPECT_EQ(staged.forward[1].syncAfter, 1);
  EXPECT_TRUE(staged.backward.empty());
  EXPECT_EQ(statusText(space.validate()), "");
  // One pass over the logits forward (maxima and exponentials), one
  // backward reading them and writing their gradient; the labels read once
  // each.
  OpCost cost = costOf(args, body);
  EXPECT_EQ(cost.fwdFlops, 6 * 80 + 2 * 8);
  EXPECT_EQ(cost.bwdFlops, 3 * 80);
  EXPECT_EQ(cost.fwdBytes, 80 * 4 + 8 * 8);
  EXPECT_EQ(cost.bwdBytes, 2 * 80 * 4 + 8 * 8);
}

TEST_F(GraphInterfaceTest, MseLoss) {
  StringRef args = "%p: tensor<4x3xf32>, %t: tensor<4x3xf32>";
  StringRef body = "%0 = ppc.mse_loss %p, %t : (tensor<4x3xf32>, "
                   "tensor<4x3xf32>) -> tensor<f32>";
  IterationSpace space = spaceOf(args, body);
  EXPECT_EQ(formatDims(space), "S4 P3");
  EXPECT_TRUE(space.makesPartialSum(0));
  EXPECT_TRUE(space.makesPartialSum(1));
  OpCost cost = costOf(args, body);
  EXPECT_EQ(cost.fwdFlops, 36);
  EXPECT_EQ(cost.bwdFlops, 24);
}

//===----------------------------------------------------------------------===//
// Every compute op
//===----------------------------------------------------------------------===//

TEST_F(GraphInterfaceTest, EveryComputeOpHasAValidSpaceAndCost) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(
      test::everyComputeOp(2), ParserConfig(&context));
  ASSERT_TRUE(module);
  std::set<std::string> seen;
  module->walk([&](ParallelizableOpInterface op) {
    std::string name = op->getName().getStringRef().str();
    seen.insert(name);
    IterationSpace space = op.getIterationSpace();
    EXPECT_EQ(statusText(space.validate()), "") << name;
    EXPECT_EQ(space.operands.size(), op->getNumOperands()) << name;
    EXPECT_EQ(space.results.size(), op->getNumResults()) << name;
    OpCost cost = op.getCost();
    EXPECT_GE(cost.fwdFlops, 0) << name;
    EXPECT_GE(cost.bwdFlops, 0) << name;
    EXPECT_GE(cost.bwdBytes, cost.fwdBytes) << name;
  });

  std::set<std::string> registered;
  for (RegisteredOperationName name : context.getRegisteredOperations())
    if (name.getDialectNamespace() == "ppc" &&
        name.hasInterface<ParallelizableOpInterface>())
      registered.insert(name.getStringRef().str());
  EXPECT_EQ(seen, registered);
  EXPECT_EQ(registered.size(), test::kNumComputeOps);
}

} // namespace
