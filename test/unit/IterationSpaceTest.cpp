//===- IterationSpaceTest.cpp - slices, halos and partial sums ------------===//

#include "ppc/Support/IterationSpace.h"
#include "StatusText.h"
#include "ppc/Support/Layout.h"
#include "ppc/Support/MachineView.h"
#include "ppc/Support/PipelineSchedule.h"

#include <gtest/gtest.h>

using namespace ppc;
using ppc::test::statusText;

namespace {

// A 3x3 convolution, stride 1, pad 1, on a 1x1x8x8 input, 4 output channels:
// iteration dims n, f, oh, ow, c, kh, kw.
IterationSpace conv3x3() {
  IterationSpace s;
  s.dims = {{1, IterKind::Sample},          {4, IterKind::Parameter},
            {8, IterKind::Attribute},       {8, IterKind::Attribute},
            {1, IterKind::Reduction},       {3, IterKind::Reduction, false},
            {3, IterKind::Reduction, false}};
  s.operands.push_back(
      {{1, 1, 8, 8},
       {DimAccess::identity(0), DimAccess::identity(4),
        DimAccess::window(2, 1, -1, 3), DimAccess::window(3, 1, -1, 3)}});
  s.operands.push_back({{4, 1, 3, 3},
                        {DimAccess::identity(1), DimAccess::identity(4),
                         DimAccess::identity(5), DimAccess::identity(6)}});
  s.results.push_back({{1, 4, 8, 8},
                       {DimAccess::identity(0), DimAccess::identity(1),
                        DimAccess::identity(2), DimAccess::identity(3)}});
  return s;
}

TEST(IterationSpace, ValidatesAndCountsPoints) {
  IterationSpace s = conv3x3();
  EXPECT_EQ(statusText(s.validate()), "");
  EXPECT_EQ(s.numPoints(), 1 * 4 * 8 * 8 * 1 * 3 * 3);
  s.operands[0].dims[2].iterDim = 9;
  EXPECT_NE(statusText(s.validate()), "");
}

TEST(IterationSpace, CausalWorkFollowsTheTriangle) {
  // Query s and key t dims of 8 each, 2 heads: the op works on the 36 of
  // 64 (s, t) pairs with t <= s, per head.
  IterationSpace s;
  s.dims = {{2, IterKind::Parameter},
            {8, IterKind::Attribute},
            {8, IterKind::Reduction, false}};
  s.causal = CausalDomain{1, 2};
  EXPECT_EQ(statusText(s.validate()), "");
  std::vector<Range> whole = {{0, 2}, {0, 8}, {0, 8}};
  EXPECT_DOUBLE_EQ(s.workFraction(whole), 1.0);
  // Query rows split in two: rows 0..3 see 1 + 2 + 3 + 4 = 10 keys, rows
  // 4..7 see 5 + 6 + 7 + 8 = 26.
  EXPECT_DOUBLE_EQ(s.workFraction({{0, 2}, {0, 4}, {0, 8}}), 10.0 / 36);
  EXPECT_DOUBLE_EQ(s.workFraction({{0, 2}, {4, 8}, {0, 8}}), 26.0 / 36);
  // One head of the late rows: half of that.
  EXPECT_DOUBLE_EQ(s.workFraction({{1, 2}, {4, 8}, {0, 8}}), 13.0 / 36);
  // A key block: rows 4..7 against keys 2..5 see 3 + 4 + 4 + 4 = 15 pairs;
  // rows 0..1 against keys 2..5 none.
  EXPECT_DOUBLE_EQ(s.workFraction({{0, 2}, {4, 8}, {2, 6}}), 30.0 / 72);
  EXPECT_DOUBLE_EQ(s.workFraction({{0, 2}, {0, 2}, {2, 6}}), 0.0);
  // Without the domain every point works.
  s.causal.reset();
  EXPECT_DOUBLE_EQ(s.workFraction({{0, 2}, {4, 8}, {0, 8}}), 0.5);
  // A domain naming a missing or the same dim is refused.
  s.causal = CausalDomain{1, 3};
  EXPECT_EQ(statusText(s.validate()),
            "a causal domain names iteration dims 1 and 3 "
            "of 3");
  s.causal = CausalDomain{1, 1};
  EXPECT_NE(statusText(s.validate()), "");
}

TEST(IterationSpace, ZigzagOrderBalancesCausalWork) {
  // 16 positions in zigzag order of 4 pairs: 8 chunks of 2, stored as
  // chunks 0 7 1 6 2 5 3 4. A split of the stored rows in 2 or 4 (both
  // divide the pairs) does equal work; in natural order the last of 4
  // parts does 5.8 times the first's (rows 0..3 see 10 keys, 12..15 see 58).
  IterationSpace s;
  s.dims = {{16, IterKind::Attribute}, {16, IterKind::Reduction}};
  s.causal = CausalDomain{0, 1, 4};
  EXPECT_EQ(statusText(s.validate()), "");
  EXPECT_DOUBLE_EQ(s.workFraction({{0, 16}, {0, 16}}), 1.0);
  for (int64_t part = 0; part < 4; ++part)
    EXPECT_DOUBLE_EQ(s.workFraction({{4 * part, 4 * part + 4}, {0, 16}}), 0.25)
        << "part " << part << " of 4";
  for (int64_t part = 0; part < 2; ++part)
    EXPECT_DOUBLE_EQ(s.workFraction({{8 * part, 8 * part + 8}, {0, 16}}), 0.5);
  // A ring step of 4 members: a member's rows (chunks r and 7 - r) against
  // another member's keys (k and 7 - k) see two whole chunks, 8 pairs of
  // the triangle's 136; against its own, one whole chunk and two halves
  // with their diagonals (4 + 3 + 3).
  for (int64_t rows = 0; rows < 4; ++rows)
    for (int64_t keys = 0; keys < 4; ++keys)
      EXPECT_DOUBLE_EQ(
          s.workFraction({{4 * rows, 4 * rows + 4}, {4 * keys, 4 * keys + 4}}),
          (rows == keys ? 10.0 : 8.0) / 136)
          << "rows of member " << rows << ", keys of member " << keys;
  s.causal->zigzag = 0;
  EXPECT_DOUBLE_EQ(s.workFraction({{0, 4}, {0, 16}}), 10.0 / 136);
  EXPECT_DOUBLE_EQ(s.workFraction({{12, 16}, {0, 16}}), 58.0 / 136);
  // The order needs as many keys as queries, in whole chunks.
  s.causal->zigzag = 3;
  EXPECT_EQ(statusText(s.validate()),
            "a causal domain in zigzag order of 3 pairs needs as many keys "
            "as queries, a multiple of 6");
}

TEST(IterationSpace, ValidatesStagedKernels) {
  IterationSpace s = conv3x3();
  StagedKernel staged;
  staged.forwardStages = 2;
  staged.forward = {{{{3}, {1, /*iterDim=*/1}}, /*syncAfter=*/0}};
  staged.acrossDims = {0, 2, 3};
  s.staged = staged;
  EXPECT_EQ(statusText(s.validate()), "");
  EXPECT_EQ(staged.shapeOf(staged.forward[0],
                           partitionRanges(s, {1, 2, 1, 1, 1, 1, 1}, 1)),
            (std::vector<int64_t>{3, 2}));
  // A statistics group over a dim the op lacks, a reduction after the last
  // stage (nothing reads it), a scratch dim of a missing iteration dim, an
  // empty one.
  s.staged->acrossDims = {7};
  EXPECT_NE(statusText(s.validate()).find("names iteration dim 7"),
            std::string::npos);
  s.staged = staged;
  s.staged->forward[0].syncAfter = 1;
  EXPECT_NE(statusText(s.validate()).find("syncs after stage 1 of 2"),
            std::string::npos);
  s.staged = staged;
  s.staged->forward[0].shape[1].iterDim = 12;
  EXPECT_NE(statusText(s.validate()).find("missing iteration dim"),
            std::string::npos);
  s.staged = staged;
  s.staged->forward[0].shape[0].size = 0;
  EXPECT_NE(statusText(s.validate()).find("empty"), std::string::npos);
}

TEST(IterationSpace, HeightSplitHasOneRowHalo) {
  IterationSpace s = conv3x3();
  // Split output rows 2 ways: partition 1 computes rows [4, 8).
  std::vector<int64_t> degrees = {1, 1, 2, 1, 1, 1, 1};
  std::vector<Range> iter = partitionRanges(s, degrees, 1);
  EXPECT_EQ(iter[2], (Range{4, 8}));
  std::vector<Range> in = sliceOf(s.operands[0], iter);
  // Needs input rows 3..8 (one halo row above, the bottom pad is clipped).
  EXPECT_EQ(in[2], (Range{3, 8}));
  EXPECT_EQ(in[3], (Range{0, 8}));
  // Partition 0 computes rows [0, 4) and reads rows [0, 5).
  in = sliceOf(s.operands[0], partitionRanges(s, degrees, 0));
  EXPECT_EQ(in[2], (Range{0, 5}));
}

TEST(IterationSpace, StridedWindow) {
  // Output rows [2, 4) of a stride-2, 3-tap window without padding read
  // input rows [4, 9).
  TensorAccess a{{16}, {DimAccess::window(0, 2, 0, 3)}};
  EXPECT_EQ(sliceOf(a, {{2, 4}})[0], (Range{4, 9}));
}

TEST(IterationSpace, GroupedChannels) {
  // 8 output channels in 2 groups over 6 input channels: output channels
  // [4, 8) (group 1) read input channels [3, 6).
  TensorAccess a{{6}, {DimAccess{0, 4, 3, 0, 3}}};
  EXPECT_EQ(sliceOf(a, {{4, 8}})[0], (Range{3, 6}));
  EXPECT_EQ(sliceOf(a, {{0, 2}})[0], (Range{0, 3}));
}

TEST(IterationSpace, ParameterSplitReplicatesNothingOfTheInput) {
  IterationSpace s = conv3x3();
  std::vector<int64_t> degrees = {1, 4, 1, 1, 1, 1, 1};
  for (int64_t p = 0; p < 4; ++p) {
    auto iter = partitionRanges(s, degrees, p);
    EXPECT_EQ(sliceOf(s.operands[1], iter)[0], (Range{p, p + 1}));
    EXPECT_EQ(sliceOf(s.operands[0], iter)[2], (Range{0, 8}));
  }
}

TEST(IterationSpace, PartialSumsComeFromDimsAbsentFromTheResult) {
  IterationSpace s = conv3x3();
  EXPECT_FALSE(s.makesPartialSum(0));
  EXPECT_FALSE(s.makesPartialSum(2));
  EXPECT_TRUE(s.makesPartialSum(4)); // input channels
}

TEST(IterationSpace, UnevenSplitCoversEverything) {
  IterationSpace s;
  s.dims = {{10, IterKind::Sample}};
  std::vector<Range> got;
  for (int64_t p = 0; p < 3; ++p)
    got.push_back(partitionRanges(s, {3}, p)[0]);
  EXPECT_EQ(got[0], (Range{0, 4}));
  EXPECT_EQ(got[1], (Range{4, 7}));
  EXPECT_EQ(got[2], (Range{7, 10}));
}

TEST(IterationSpace, KindNamesRoundTrip) {
  for (IterKind k : {IterKind::Sample, IterKind::Attribute, IterKind::Parameter,
                     IterKind::Reduction})
    EXPECT_EQ(symbolizeIterKind(stringifyIterKind(k)), k);
  EXPECT_FALSE(symbolizeIterKind("channel").has_value());
}

TEST(IterationSpace, ActivationKinds) {
  EXPECT_EQ(activationKinds(2),
            (std::vector<IterKind>{IterKind::Sample, IterKind::Parameter}));
  EXPECT_EQ(activationKinds(4)[3], IterKind::Attribute);
}

} // namespace

namespace {

/// A [rows, cols] elementwise space.
IterationSpace elementwise(int64_t rows, int64_t cols) {
  IterationSpace s;
  s.dims = {{rows, IterKind::Sample}, {cols, IterKind::Parameter}};
  s.operands.push_back(TensorAccess::identity({rows, cols}));
  s.results.push_back(TensorAccess::identity({rows, cols}));
  return s;
}

} // namespace

TEST(IterationSpace, PointsAndVolumesMustFitInt64) {
  constexpr int64_t k2p62 = int64_t(1) << 62;
  EXPECT_EQ(statusText(elementwise(k2p62, 1).validate()), "");
  EXPECT_EQ(statusText(elementwise(k2p62, 2).validate()),
            "the iteration space has more than 2^63 points");
  IterationSpace s = elementwise(4, 4);
  s.operands[0].shape = {k2p62, 4};
  EXPECT_EQ(statusText(s.validate()), "operand #0 has more than 2^63 elements");
}

TEST(CheckConfig, DegreesAndStridesThatOverflow) {
  constexpr int64_t k2p62 = int64_t(1) << 62;
  const std::string beyond = "strategy uses devices beyond 2^63";
  // 2^62 x 4 = 2^64 wraps to 0 (a crash), 2^62 x 2 to a negative count (a
  // length_error) without checked arithmetic.
  for (int64_t second : {4, 2})
    EXPECT_EQ(
        statusText(checkConfig(elementwise(k2p62, 4), {{k2p62, second}, 0, {}}))
            .rfind(beyond, 0),
        0u)
        << second;
  // Strides times degrees, and start plus the view's reach.
  EXPECT_EQ(statusText(checkConfig(elementwise(8, 8), {{4, 1}, 0, {INT64_MAX}}))
                .rfind(beyond, 0),
            0u);
  EXPECT_EQ(statusText(checkConfig(elementwise(8, 8), {{2, 1}, INT64_MAX, {}}))
                .rfind(beyond, 0),
            0u);
  // A product that fits but exceeds the machine (or, without one, the
  // limit) is rejected before 2^40 partitions are enumerated.
  int64_t k2p40 = int64_t(1) << 40;
  EXPECT_EQ(
      statusText(checkConfig(elementwise(k2p40, 1), {{k2p40, 1}, 0, {}}, 8)),
      "strategy uses device 1099511627775 but the machine has 8 "
      "devices");
  EXPECT_EQ(statusText(checkConfig(elementwise(k2p40, 1), {{k2p40, 1}, 0, {}})),
            "strategy uses device 1099511627775 but ppc supports at most "
            "65536 devices");
  // Overlapping strides with more partitions than devices in range.
  EXPECT_EQ(statusText(checkConfig(elementwise(4096, 4096),
                                   {{4096, 4096}, 0, {1, 1}})),
            "strategy maps two instances to one device; the strides overlap");
  // Strides that do not nest: the devices themselves tell (two instances
  // on device 1; a 3 x 2 grid at strides 2 and 3 on six devices).
  EXPECT_EQ(statusText(checkConfig(elementwise(4, 4), {{2, 2}, 0, {1, 1}}, 8)),
            "strategy maps two instances to one device; the strides overlap");
  EXPECT_EQ(statusText(checkConfig(elementwise(6, 4), {{3, 2}, 0, {2, 3}}, 8)),
            "");
  // Nested strides, in either order.
  EXPECT_EQ(statusText(checkConfig(elementwise(4, 4), {{2, 2}, 1, {1, 2}}, 8)),
            "");
  EXPECT_EQ(statusText(checkConfig(elementwise(4, 4), {{2, 2}, 0, {4, 1}}, 8)),
            "");
  // The largest machine still fits.
  EXPECT_EQ(statusText(checkConfig(elementwise(kMaxDevices, 1),
                                   {{kMaxDevices, 1}, 0, {}}, kMaxDevices)),
            "");
}

namespace {

// x[8, 4] @ w[4, 6]: iteration dims n (sample), f (parameter), k
// (reduction).
IterationSpace matmul() {
  IterationSpace s;
  s.dims = {{8, IterKind::Sample},
            {6, IterKind::Parameter},
            {4, IterKind::Reduction}};
  s.operands.push_back(
      {{8, 4}, {DimAccess::identity(0), DimAccess::identity(2)}});
  s.operands.push_back(
      {{4, 6}, {DimAccess::identity(2), DimAccess::identity(1)}});
  s.results.push_back(
      {{8, 6}, {DimAccess::identity(0), DimAccess::identity(1)}});
  return s;
}

/// "F0 B0 ...": the micro-batches; with several stages per group,
/// "F2:0": stage 2, micro-batch 0.
std::string orderOf(PipelineSchedule schedule, int64_t stages, int64_t stage,
                    int64_t m, int64_t groups = 0) {
  std::string text;
  for (const PipelineTask &task :
       pipelineOrder(schedule, stages, groups ? groups : stages, stage, m)) {
    text += (text.empty() ? "" : " ") + std::string(task.forward ? "F" : "B");
    if (groups)
      text += std::to_string(task.stage) + ":";
    text += std::to_string(task.microbatch);
  }
  return text;
}

} // namespace

TEST(Layout, MicroBatchSplitsItsSamplesByTheDegrees) {
  // Data parallel over 2 devices, 2 micro-batches of 4 samples: micro-batch
  // 1 is samples [4, 8), each device takes half of it.
  IterationSpace s = matmul();
  OpConfig config{{2, 1, 1}, 0, {}};
  geometry::OpLayout layout = geometry::computeLayout(s, config, {2, 1});
  ASSERT_EQ(layout.numInstances(), 2);
  EXPECT_EQ(layout.iter[0][0], (Range{4, 6}));
  EXPECT_EQ(layout.iter[1][0], (Range{6, 8}));
  EXPECT_EQ(layout.operandBoxes[0][1], (geometry::Box{{6, 8}, {0, 4}}));
  // The weight is read whole by every micro-batch.
  EXPECT_EQ(layout.operandBoxes[1][0], (geometry::Box{{0, 4}, {0, 6}}));
  EXPECT_EQ(layout.resultBoxes[0][0], (geometry::Box{{4, 6}, {0, 6}}));
  // Micro-batch j is samples [2j, 2j + 2) of the batch (then split), not a
  // piece of each device's whole-batch share: the pieces of all
  // micro-batches tile the batch, each row once.
  std::vector<int> covered(8, 0);
  for (int64_t j = 0; j < 4; ++j) {
    geometry::OpLayout micro = geometry::computeLayout(s, config, {4, j});
    for (int64_t p = 0; p < micro.numInstances(); ++p) {
      Range rows = micro.resultBoxes[0][p][0];
      EXPECT_GE(rows.lo, 2 * j);
      EXPECT_LE(rows.hi, 2 * j + 2);
      for (int64_t r = rows.lo; r < rows.hi; ++r)
        ++covered[r];
    }
  }
  EXPECT_EQ(covered, std::vector<int>(8, 1));
  geometry::OpLayout whole = geometry::computeLayout(s, config);
  // One micro-batch is the whole layout.
  EXPECT_EQ(geometry::computeLayout(s, config, {1, 0}).iter, whole.iter);
}

TEST(PipelineSchedule, InterleavedSubmeshesRepeatRoundRobin) {
  using S = PipelineSchedule;
  // 4 stages dealt to 2 submeshes.
  EXPECT_EQ(statusText(checkPipelineShape(4, S::Interleaved, {0, 2, 0, 2},
                                          {2, 2, 2, 2}, 4)),
            "");
  EXPECT_EQ(pipelineGroups({0, 2, 0, 2}, {2, 2, 2, 2}), 2);
  // Not round-robin; too few stages per group; micro-batches not in rounds.
  EXPECT_EQ(statusText(checkPipelineShape(4, S::Interleaved, {0, 2, 2, 0},
                                          {2, 2, 2, 2}, 4)),
            "stage 2 must run on the devices of stage 0 (interleaved-1f1b "
            "deals stages round-robin to 2 submeshes)");
  EXPECT_EQ(
      statusText(checkPipelineShape(4, S::Interleaved, {0, 2}, {2, 2}, 4)),
      "interleaved-1f1b deals the 2 stages to 2 submeshes: each needs "
      "the same number of stages, at least 2");
  EXPECT_EQ(statusText(checkPipelineShape(3, S::Interleaved, {0, 2, 0, 2},
                                          {2, 2, 2, 2}, 4)),
            "interleaved-1f1b runs micro-batches in rounds of one per "
            "submesh: 3 micro-batches do not divide into 2");
  // Other schedules keep the submeshes disjoint.
  EXPECT_EQ(statusText(checkPipelineShape(4, S::OneFOneB, {0, 2, 0, 2},
                                          {2, 2, 2, 2}, 4)),
            "stages 0 and 2 share devices");
}

TEST(PipelineSchedule, StageOrdersAndMicroBatchesInFlight) {
  using S = PipelineSchedule;
  // 1F1B: stage 1 of 4 warms up with 2 forwards, then alternates.
  EXPECT_EQ(orderOf(S::OneFOneB, 4, 1, 4), "F0 F1 F2 B0 F3 B1 B2 B3");
  EXPECT_EQ(pipelineInFlight(S::OneFOneB, 4, 4, 1, 4), 3);
  // The last stage alternates from the start: one micro-batch in flight.
  EXPECT_EQ(orderOf(S::OneFOneB, 4, 3, 3), "F0 B0 F1 B1 F2 B2");
  EXPECT_EQ(pipelineInFlight(S::OneFOneB, 4, 4, 3, 3), 1);
  // Fewer micro-batches than warm-up forwards.
  EXPECT_EQ(orderOf(S::OneFOneB, 4, 0, 2), "F0 F1 B0 B1");
  EXPECT_EQ(pipelineInFlight(S::OneFOneB, 4, 4, 0, 2), 2);
  // GPipe: every forward, then every backward; all in flight.
  EXPECT_EQ(orderOf(S::GPipe, 4, 1, 3), "F0 F1 F2 B0 B1 B2");
  EXPECT_EQ(pipelineInFlight(S::GPipe, 4, 4, 1, 3), 3);
  // Interleaved, 4 stages on 2 groups (group 0: stages 0 and 2), 4
  // micro-batches, as Megatron-LM orders them: forwards through the chunks
  // in rounds of 2 micro-batches, backwards the other way; group 0 warms
  // up with (2 - 0 - 1) * 2 + (2 - 1) * 2 = 4 forwards, group 1 with 2.
  EXPECT_EQ(orderOf(S::Interleaved, 4, 0, 4, 2),
            "F0:0 F0:1 F2:0 F2:1 F0:2 B2:0 F0:3 B2:1 "
            "F2:2 B0:0 F2:3 B0:1 B2:2 B2:3 B0:2 B0:3");
  EXPECT_EQ(orderOf(S::Interleaved, 4, 1, 4, 2),
            "F1:0 F1:1 F3:0 B3:0 F3:1 B3:1 F1:2 B1:0 "
            "F1:3 B1:1 F3:2 B3:2 F3:3 B3:3 B1:2 B1:3");
  EXPECT_EQ(pipelineInFlight(S::Interleaved, 4, 2, 0, 4), 4);
  EXPECT_EQ(pipelineInFlight(S::Interleaved, 4, 2, 2, 4), 2);
  // As many micro-batches as groups: every forward first.
  EXPECT_EQ(orderOf(S::Interleaved, 4, 1, 2, 2),
            "F1:0 F1:1 F3:0 F3:1 B3:0 B3:1 B1:0 B1:1");
}

TEST(Layout, ZeroShardsSplitRowsAsEvenlyAsTheyCan) {
  geometry::Box w = {{10, 20}, {0, 4}};
  EXPECT_TRUE(geometry::zeroShardable(w, 2));
  EXPECT_TRUE(geometry::zeroShardable(w, 10));
  EXPECT_FALSE(geometry::zeroShardable(w, 11)); // a member without a row
  EXPECT_FALSE(geometry::zeroShardable(w, 1));  // nothing to shard
  // 10 rows over 4: 3, 3, 2, 2, contiguous and covering the piece.
  EXPECT_EQ(geometry::zeroShard(w, 4, 0), (geometry::Box{{10, 13}, {0, 4}}));
  EXPECT_EQ(geometry::zeroShard(w, 4, 1), (geometry::Box{{13, 16}, {0, 4}}));
  EXPECT_EQ(geometry::zeroShard(w, 4, 2), (geometry::Box{{16, 18}, {0, 4}}));
  EXPECT_EQ(geometry::zeroShard(w, 4, 3), (geometry::Box{{18, 20}, {0, 4}}));
  EXPECT_EQ(geometry::zeroShard(w, 2, 1), (geometry::Box{{15, 20}, {0, 4}}));
}

/// The global flat indices box `box` of a row-major tensor of `shape` holds,
/// in the box's own row-major order: the oracle of sameFlatOrder.
static std::vector<int64_t> flatIndices(const std::vector<int64_t> &shape,
                                        const geometry::Box &box) {
  std::vector<int64_t> out, at(shape.size());
  for (size_t d = 0; d < shape.size(); ++d)
    at[d] = box[d].lo;
  if (geometry::isEmpty(box))
    return out;
  while (true) {
    int64_t flat = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      flat = flat * shape[d] + at[d];
    out.push_back(flat);
    size_t d = shape.size();
    while (d-- > 0 && ++at[d] == box[d].hi)
      at[d] = box[d].lo;
    if (d == size_t(-1))
      return out;
  }
}

TEST(Layout, SameFlatOrderAgreesWithTheElementsEachBoxVisits) {
  using geometry::Box;
  // The logits' reshape [B, S, V] -> [B * S, V]: whole, batch split, a
  // split of the vocabulary (kept innermost) and a split of S (rows of
  // one sample: contiguous too) share memory; S split with B whole does not.
  std::vector<int64_t> bsv = {4, 3, 10}, rows = {12, 10};
  EXPECT_TRUE(geometry::sameFlatOrder(bsv, geometry::wholeBox(bsv), rows,
                                      geometry::wholeBox(rows)));
  EXPECT_TRUE(geometry::sameFlatOrder(bsv, {{2, 4}, {0, 3}, {0, 10}}, rows,
                                      {{6, 12}, {0, 10}}));
  EXPECT_TRUE(geometry::sameFlatOrder(bsv, {{0, 4}, {0, 3}, {5, 10}}, rows,
                                      {{0, 12}, {5, 10}}));
  EXPECT_TRUE(geometry::sameFlatOrder(bsv, {{1, 2}, {1, 3}, {0, 10}}, rows,
                                      {{4, 6}, {0, 10}}));
  EXPECT_FALSE(geometry::sameFlatOrder(bsv, {{0, 4}, {0, 2}, {0, 10}}, rows,
                                       {{0, 8}, {0, 10}}));
  // Different element counts are no reshape.
  EXPECT_FALSE(
      geometry::sameFlatOrder({4, 3}, {{0, 4}, {0, 3}}, {13}, {{0, 12}}));

  // Every pair of boxes of two shapes of 24 elements, against the oracle.
  std::vector<std::vector<int64_t>> shapes = {
      {24}, {4, 6}, {2, 3, 4}, {6, 1, 4}, {2, 12}};
  auto boxesOf = [](const std::vector<int64_t> &shape) {
    std::vector<Box> boxes = {{}};
    for (int64_t size : shape) {
      std::vector<Box> next;
      for (const Box &b : boxes)
        for (int64_t lo = 0; lo < size; ++lo)
          for (int64_t hi = lo + 1; hi <= size; ++hi) {
            next.push_back(b);
            next.back().push_back({lo, hi});
          }
      boxes = std::move(next);
    }
    return boxes;
  };
  int agreeing = 0;
  for (const auto &shapeA : shapes)
    for (const auto &shapeB : shapes)
      for (const Box &a : boxesOf(shapeA))
        for (const Box &b : boxesOf(shapeB)) {
          bool same = flatIndices(shapeA, a) == flatIndices(shapeB, b);
          agreeing += same;
          ASSERT_EQ(geometry::sameFlatOrder(shapeA, a, shapeB, b), same);
        }
  EXPECT_GT(agreeing, 100); // the oracle found views to agree on
}
