//===- CpuKernelsBTest.cpp - elementwise, reduce, data movement kernels ---===//
//
// For every op: the forward against a naive reference, the backward against
// finite differences, and partitioned runs (the boxes its iteration space
// allows, as the plan would hand them out) against the whole-op run.
//
//===----------------------------------------------------------------------===//

#include "KernelCases.h"
#include "KernelTestUtil.h"

#include <functional>
#include <limits>

using namespace ppc::runtime;
using namespace ppc::runtime::test;

namespace {

//===----------------------------------------------------------------------===//
// Helpers: indices, grids of boxes, numpy broadcasting
//===----------------------------------------------------------------------===//

std::vector<int64_t> unravel(int64_t flat, const std::vector<int64_t> &shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

int64_t ravel(const std::vector<int64_t> &index,
              const std::vector<int64_t> &shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    flat = flat * shape[d] + index[d];
  return flat;
}

/// One partition per iteration box, its views' boxes given by `boxesOf`.
std::vector<Partition>
partitionsOf(const std::vector<Box> &iterationBoxes,
             const std::function<Partition(const Box &)> &boxesOf) {
  std::vector<Partition> partitions;
  for (const Box &box : iterationBoxes)
    partitions.push_back(boxesOf(box));
  return partitions;
}

/// Flat offset of the element of an operand of `shape` that broadcasts to
/// result index `index`.
int64_t broadcastOffset(const std::vector<int64_t> &index,
                        const std::vector<int64_t> &shape) {
  size_t lead = index.size() - shape.size();
  std::vector<int64_t> operand(shape.size());
  for (size_t i = 0; i < shape.size(); ++i)
    operand[i] = shape[i] == 1 ? 0 : index[lead + i];
  return ravel(operand, shape);
}

OpRun runWhole(const OpDesc &op, const std::vector<std::vector<float>> &inputs,
               const KernelContext &ctx = {}) {
  return runOp(op, ctx, inputs, {wholePartition(op)});
}

/// Runs forward and backward whole with output gradient `dy`.
OpRun runWholeWithGrad(const OpDesc &op,
                       const std::vector<std::vector<float>> &inputs,
                       const std::vector<std::vector<float>> &dy,
                       std::vector<bool> needsGrad = {},
                       const KernelContext &ctx = {}) {
  return runOp(op, ctx, inputs, {wholePartition(op)}, &dy,
               std::move(needsGrad));
}

/// Finite differences of these smooth (or kink-avoiding) ops in float agree
/// to well under 1e-3; tighter than the shared default so that a gradient a
/// percent off fails.
GradCheckOptions tightGradCheck() {
  GradCheckOptions options;
  options.atol = 5e-4;
  options.rtol = 2e-3;
  return options;
}

std::string nameOf(const std::string &kind) {
  return kind.substr(kind.find('.') + 1);
}

//===----------------------------------------------------------------------===//
// Unary ops
//===----------------------------------------------------------------------===//

struct UnaryCase {
  std::string name;
  std::string kind;
  std::map<std::string, AttributeValue> attributes;
  std::function<double(double)> reference;
  float lo, hi; ///< input range
  /// Inputs keep 0.05 away from these points (kinks of the function), so
  /// finite differences do not straddle them.
  std::vector<float> kinks;
};

double sigmoidRef(double x) { return 1 / (1 + std::exp(-x)); }

std::vector<UnaryCase> unaryCases() {
  const double pi = std::acos(-1.0);
  return {
      {"relu",
       "ppc.relu",
       {},
       [](double x) { return x > 0 ? x : 0; },
       -2,
       2,
       {0}},
      {"leaky_relu",
       "ppc.leaky_relu",
       {{"alpha", 0.2}},
       [](double x) { return x < 0 ? 0.2 * x : x; },
       -2,
       2,
       {0}},
      {"leaky_relu_default",
       "ppc.leaky_relu",
       {},
       [](double x) { return x < 0 ? 0.01 * x : x; },
       -2,
       2,
       {0}},
      {"gelu",
       "ppc.gelu",
       {{"approximation", std::string("none")}},
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); },
       -3,
       3,
       {}},
      {"gelu_tanh",
       "ppc.gelu",
       {{"approximation", std::string("tanh")}},
       [pi](double x) {
         return 0.5 * x *
                (1 + std::tanh(std::sqrt(2 / pi) * (x + 0.044715 * x * x * x)));
       },
       -3,
       3,
       {}},
      // As the plan file exports the I32EnumAttr: its value.
      {"gelu_tanh_enum_value",
       "ppc.gelu",
       {{"approximation", int64_t{1}}},
       [pi](double x) {
         return 0.5 * x *
                (1 + std::tanh(std::sqrt(2 / pi) * (x + 0.044715 * x * x * x)));
       },
       -3,
       3,
       {}},
      {"gelu_default",
       "ppc.gelu",
       {},
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); },
       -3,
       3,
       {}},
      {"sigmoid", "ppc.sigmoid", {}, sigmoidRef, -4, 4, {}},
      {"tanh",
       "ppc.tanh",
       {},
       [](double x) { return std::tanh(x); },
       -3,
       3,
       {}},
      {"clip",
       "ppc.clip",
       {{"min", -0.5}, {"max", 0.7}},
       [](double x) { return std::min(std::max(x, -0.5), 0.7); },
       -1.5,
       1.5,
       {-0.5f, 0.7f}},
      {"clip_min_only",
       "ppc.clip",
       {{"min", 0.1}},
       [](double x) { return std::max(x, 0.1); },
       -1.5,
       1.5,
       {0.1f}},
      {"sqrt",
       "ppc.sqrt",
       {},
       [](double x) { return std::sqrt(x); },
       0.2,
       3,
       {}},
      {"rsqrt",
       "ppc.rsqrt",
       {},
       [](double x) { return 1 / std::sqrt(x); },
       0.2,
       3,
       {}},
      {"exp", "ppc.exp", {}, [](double x) { return std::exp(x); }, -2, 2, {}},
      {"log", "ppc.log", {}, [](double x) { return std::log(x); }, 0.2, 3, {}},
      {"erf", "ppc.erf", {}, [](double x) { return std::erf(x); }, -2, 2, {}},
      {"neg", "ppc.neg", {}, [](double x) { return -x; }, -2, 2, {}},
      {"abs", "ppc.abs", {}, [](double x) { return std::fabs(x); }, -2, 2, {0}},
      {"reciprocal",
       "ppc.reciprocal",
       {},
       [](double x) { return 1 / x; },
       0.3,
       3,
       {}},
      {"silu",
       "ppc.silu",
       {},
       [](double x) { return x * sigmoidRef(x); },
       -4,
       4,
       {}},
      {"hard_sigmoid",
       "ppc.hard_sigmoid",
       {{"alpha", 0.25}, {"beta", 0.4}},
       [](double x) { return std::min(std::max(0.25 * x + 0.4, 0.0), 1.0); },
       -3,
       3,
       {-1.6f, 2.4f}},
      {"hard_sigmoid_default",
       "ppc.hard_sigmoid",
       {},
       [](double x) { return std::min(std::max(0.2 * x + 0.5, 0.0), 1.0); },
       -4,
       4,
       {-2.5f, 2.5f}},
      {"hard_swish",
       "ppc.hard_swish",
       {},
       [](double x) { return x * std::min(std::max(x / 6 + 0.5, 0.0), 1.0); },
       -5,
       5,
       {-3, 3}},
      {"elu",
       "ppc.elu",
       {{"alpha", 0.5}},
       [](double x) { return x > 0 ? x : 0.5 * (std::exp(x) - 1); },
       -3,
       3,
       {0}},
      {"elu_default",
       "ppc.elu",
       {},
       [](double x) { return x > 0 ? x : std::exp(x) - 1; },
       -3,
       3,
       {0}},
      {"selu",
       "ppc.selu",
       {{"alpha", 2.0}, {"gamma", 3.0}},
       [](double x) { return 3 * (x > 0 ? x : 2 * (std::exp(x) - 1)); },
       -3,
       3,
       {0}},
      {"selu_default",
       "ppc.selu",
       {},
       [](double x) {
         return 1.0507009873554805 *
                (x > 0 ? x : 1.6732632423543772 * (std::exp(x) - 1));
       },
       -3,
       3,
       {0}},
      {"softplus",
       "ppc.softplus",
       {},
       [](double x) { return std::log(1 + std::exp(x)); },
       -6,
       6,
       {}},
      {"mish",
       "ppc.mish",
       {},
       [](double x) { return x * std::tanh(std::log(1 + std::exp(x))); },
       -5,
       5,
       {}},
      {"cast_f32",
       "ppc.cast",
       {{"to", std::string("f32")}},
       [](double x) { return x; },
       -2,
       2,
       {}},
  };
}

std::vector<float> unaryInputs(const UnaryCase &c, int64_t count) {
  std::vector<float> x = randomValues(count, 17, c.lo, c.hi);
  for (float &v : x)
    for (float kink : c.kinks)
      if (std::fabs(v - kink) < 0.05f)
        v = kink + (v >= kink ? 0.05f : -0.05f);
  return x;
}

void PrintTo(const UnaryCase &c, std::ostream *os) { *os << c.name; }

class UnaryTest : public ::testing::TestWithParam<UnaryCase> {};

TEST_P(UnaryTest, ForwardMatchesReference) {
  const UnaryCase &c = GetParam();
  std::vector<int64_t> shape = {4, 6};
  OpDesc op = makeOp(c.kind, {shape}, {shape}, c.attributes);
  std::vector<float> x = unaryInputs(c, numElementsOf(shape));
  OpRun run = runWhole(op, {x});
  ASSERT_EQ(run.error, "");
  std::vector<float> expected;
  for (float v : x)
    expected.push_back(static_cast<float>(c.reference(v)));
  expectClose(run.outputs[0], expected, 1e-6, 1e-5, c.name);
}

TEST_P(UnaryTest, GradientMatchesFiniteDifferences) {
  const UnaryCase &c = GetParam();
  std::vector<int64_t> shape = {4, 6};
  OpDesc op = makeOp(c.kind, {shape}, {shape}, c.attributes);
  checkGradients(op, {}, {unaryInputs(c, numElementsOf(shape))}, {},
                 tightGradCheck());
}

TEST_P(UnaryTest, PartitionsMatchWhole) {
  const UnaryCase &c = GetParam();
  std::vector<int64_t> shape = {5, 6};
  OpDesc op = makeOp(c.kind, {shape}, {shape}, c.attributes);
  std::vector<std::vector<float>> inputs = {
      unaryInputs(c, numElementsOf(shape))};
  expectPartitionsMatchWhole(
      op, {}, inputs, partitionsOf(gridBoxes(shape, {2, 3}), [](const Box &b) {
        return Partition{{b}, {b}};
      }));
  // Views holding more than the partition reads take the strided path.
  expectPartitionsMatchWhole(
      op, {}, inputs, partitionsOf(gridBoxes(shape, {3, 2}), [&](const Box &b) {
        return Partition{{wholeBox(shape)}, {b}};
      }));
}

INSTANTIATE_TEST_SUITE_P(Ops, UnaryTest, ::testing::ValuesIn(unaryCases()),
                         [](const ::testing::TestParamInfo<UnaryCase> &info) {
                           return info.param.name;
                         });

TEST(GeluTest, RejectsUnknownApproximation) {
  for (AttributeValue approximation :
       {AttributeValue(std::string("fast")), AttributeValue(int64_t{2})}) {
    OpDesc op =
        makeOp("ppc.gelu", {{3}}, {{3}}, {{"approximation", approximation}});
    OpRun run = runWhole(op, {{0.0f, 1.0f, 2.0f}});
    EXPECT_NE(run.error.find("approximation"), std::string::npos) << run.error;
  }
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

TEST(CastTest, IntegerTargetsTruncateTowardZero) {
  std::vector<float> x = {-2.7f, -0.5f, 0.0f, 0.5f, 2.7f, 3.0f};
  for (const char *to : {"i64", "i32", "si8", "ui8"}) {
    OpDesc op = makeOp("ppc.cast", {{6}}, {{6}}, {{"to", std::string(to)}});
    OpRun run = runWhole(op, {x});
    ASSERT_EQ(run.error, "") << to;
    expectClose(run.outputs[0], {-2, 0, 0, 0, 2, 3}, 0, 0, to);
  }
}

TEST(CastTest, BoolTargetIsNonZero) {
  OpDesc op = makeOp("ppc.cast", {{5}}, {{5}}, {{"to", std::string("i1")}});
  OpRun run = runWhole(op, {{-2.0f, 0.0f, 0.25f, 0.0f, 7.0f}});
  ASSERT_EQ(run.error, "");
  expectClose(run.outputs[0], {1, 0, 1, 0, 1}, 0, 0, "i1");
}

TEST(CastTest, FloatTargetsKeepValuesAndOnlyThemPassGradients) {
  std::vector<float> x = {-1.5f, 0.5f, 2.5f}, dy = {1.0f, 2.0f, 3.0f};
  OpDesc toInt = makeOp("ppc.cast", {{3}}, {{3}}, {{"to", std::string("i64")}});
  OpRun run = runWholeWithGrad(toInt, {x}, {dy});
  ASSERT_EQ(run.error, "");
  expectClose(run.inputGrads[0], {0, 0, 0}, 0, 0, "grad through i64");
  for (const char *to : {"bf16", "f16", "f64", "f8E4M3FN"}) {
    OpDesc toFloat =
        makeOp("ppc.cast", {{3}}, {{3}}, {{"to", std::string(to)}});
    run = runWholeWithGrad(toFloat, {x}, {dy});
    ASSERT_EQ(run.error, "") << to;
    expectClose(run.outputs[0], x, 0, 0, to);
    expectClose(run.inputGrads[0], dy, 0, 0, to);
  }
}

TEST(CastTest, RejectsUnknownTarget) {
  OpDesc op = makeOp("ppc.cast", {{2}}, {{2}}, {{"to", std::string("q7")}});
  OpRun run = runWhole(op, {{1.0f, 2.0f}});
  EXPECT_NE(run.error.find("ppc.cast"), std::string::npos) << run.error;
}

//===----------------------------------------------------------------------===//
// Binary ops with numpy broadcasting
//===----------------------------------------------------------------------===//

class BinaryTest : public ::testing::TestWithParam<BinaryCase> {};

TEST_P(BinaryTest, ForwardMatchesReference) {
  const BinaryCase &c = GetParam();
  for (const BroadcastShapes &s : broadcastShapes()) {
    OpDesc op = makeOp(c.kind, {s.lhs, s.rhs}, {s.result});
    std::vector<float> l =
        randomValues(numElementsOf(s.lhs), 3, c.lhsLo, c.lhsHi);
    std::vector<float> r =
        randomValues(numElementsOf(s.rhs), 4, c.rhsLo, c.rhsHi);
    OpRun run = runWhole(op, {l, r});
    ASSERT_EQ(run.error, "");
    std::vector<float> expected;
    for (int64_t e = 0; e < numElementsOf(s.result); ++e) {
      std::vector<int64_t> index = unravel(e, s.result);
      expected.push_back(static_cast<float>(c.reference(
          l[broadcastOffset(index, s.lhs)], r[broadcastOffset(index, s.rhs)])));
    }
    expectClose(run.outputs[0], expected, 1e-6, 1e-5, c.kind);
  }
}

TEST_P(BinaryTest, GradientMatchesFiniteDifferences) {
  const BinaryCase &c = GetParam();
  for (const BroadcastShapes &s : broadcastShapes()) {
    OpDesc op = makeOp(c.kind, {s.lhs, s.rhs}, {s.result});
    checkGradients(op, {},
                   {randomValues(numElementsOf(s.lhs), 5, c.lhsLo, c.lhsHi),
                    randomValues(numElementsOf(s.rhs), 6, c.rhsLo, c.rhsHi)},
                   {}, tightGradCheck());
  }
}

TEST_P(BinaryTest, PartitionsMatchWhole) {
  const BinaryCase &c = GetParam();
  for (const BroadcastShapes &s : broadcastShapes()) {
    OpDesc op = makeOp(c.kind, {s.lhs, s.rhs}, {s.result});
    std::vector<std::vector<float>> inputs = {
        randomValues(numElementsOf(s.lhs), 7, c.lhsLo, c.lhsHi),
        randomValues(numElementsOf(s.rhs), 8, c.rhsLo, c.rhsHi)};
    expectPartitionsMatchWhole(
        op, {}, inputs,
        partitionsOf(gridBoxes(s.result, s.parts), [&](const Box &b) {
          return Partition{{broadcastBox(s.lhs, b), broadcastBox(s.rhs, b)},
                           {b}};
        }));
    // Only one operand's gradient wanted.
    expectPartitionsMatchWhole(
        op, {}, inputs,
        partitionsOf(gridBoxes(s.result, s.parts),
                     [&](const Box &b) {
                       return Partition{
                           {broadcastBox(s.lhs, b), broadcastBox(s.rhs, b)},
                           {b}};
                     }),
        {false, true});
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, BinaryTest, ::testing::ValuesIn(binaryCases()),
                         [](const ::testing::TestParamInfo<BinaryCase> &info) {
                           return nameOf(info.param.kind);
                         });

TEST(BinaryTest, TiesSplitTheGradient) {
  OpDesc op = makeOp("ppc.max", {{2}, {2}}, {{2}});
  OpRun run =
      runWholeWithGrad(op, {{1.0f, 2.0f}, {1.0f, 0.0f}}, {{4.0f, 4.0f}});
  ASSERT_EQ(run.error, "");
  expectClose(run.inputGrads[0], {2, 4}, 0, 0, "lhs");
  expectClose(run.inputGrads[1], {2, 0}, 0, 0, "rhs");
}

TEST(BinaryTest, BroadcastGradientSumsOverBroadcastPositions) {
  // d(l + r)/dr for r of shape [3] against l of shape [2, 3]: column sums.
  OpDesc op = makeOp("ppc.add", {{2, 3}, {3}}, {{2, 3}});
  OpRun run = runWholeWithGrad(op, {std::vector<float>(6, 0.0f), {0, 0, 0}},
                               {{1, 2, 3, 4, 5, 6}});
  ASSERT_EQ(run.error, "");
  expectClose(run.inputGrads[1], {5, 7, 9}, 0, 0, "rhs grad");
}

//===----------------------------------------------------------------------===//
// Comparisons and logic: 0/1 results, no gradient
//===----------------------------------------------------------------------===//

TEST(CompareTest, ForwardBroadcastsAndPassesNoGradient) {
  for (const CompareCase &c : compareCases())
    for (const BroadcastShapes &s : broadcastShapes()) {
      OpDesc op = makeOp(c.kind, {s.lhs, s.rhs}, {s.result});
      // Few distinct values, so that ties occur.
      std::vector<float> l = compareInputs(c, numElementsOf(s.lhs), 3);
      std::vector<float> r = compareInputs(c, numElementsOf(s.rhs), 4);
      std::vector<float> dy(numElementsOf(s.result), 1.0f);
      OpRun run = runWholeWithGrad(op, {l, r}, {dy});
      ASSERT_EQ(run.error, "");
      std::vector<float> expected;
      for (int64_t e = 0; e < numElementsOf(s.result); ++e) {
        std::vector<int64_t> index = unravel(e, s.result);
        expected.push_back(c.reference(l[broadcastOffset(index, s.lhs)],
                                       r[broadcastOffset(index, s.rhs)])
                               ? 1.0f
                               : 0.0f);
      }
      expectClose(run.outputs[0], expected, 0, 0, c.kind);
      // Nothing is added to the gradient views (which start at kGradBase:
      // a kernel that overwrote them would fail).
      expectClose(run.inputGrads[0], std::vector<float>(l.size(), 0.0f), 0, 0,
                  c.kind + " lhs gradient");
      expectClose(run.inputGrads[1], std::vector<float>(r.size(), 0.0f), 0, 0,
                  c.kind + " rhs gradient");
      expectPartitionsMatchWhole(
          op, {}, {l, r},
          partitionsOf(gridBoxes(s.result, s.parts), [&](const Box &b) {
            return Partition{{broadcastBox(s.lhs, b), broadcastBox(s.rhs, b)},
                             {b}};
          }));
    }
}

TEST(CompareTest, NotFlipsZeroAndNonZero) {
  OpDesc op = makeOp("ppc.not", {{4}}, {{4}});
  OpRun run = runWholeWithGrad(op, {{0.0f, 1.0f, 1.0f, 0.0f}}, {{1, 1, 1, 1}});
  ASSERT_EQ(run.error, "");
  expectClose(run.outputs[0], {1, 0, 0, 1}, 0, 0, "not");
  expectClose(run.inputGrads[0], std::vector<float>(4, 0.0f), 0, 0,
              "not gradient");
}

//===----------------------------------------------------------------------===//
// Select
//===----------------------------------------------------------------------===//

TEST(SelectTest, ForwardGradientAndPartitions) {
  for (const SelectShapes &s : selectShapes()) {
    OpDesc op = makeOp("ppc.select", {s.condition, s.lhs, s.rhs}, {s.result});
    std::vector<std::vector<float>> inputs = selectInputs(s, 11);
    const std::vector<float> &c = inputs[0], &l = inputs[1], &r = inputs[2];
    OpRun run = runWhole(op, inputs);
    ASSERT_EQ(run.error, "");
    std::vector<float> expected;
    for (int64_t e = 0; e < numElementsOf(s.result); ++e) {
      std::vector<int64_t> index = unravel(e, s.result);
      expected.push_back(c[broadcastOffset(index, s.condition)] != 0
                             ? l[broadcastOffset(index, s.lhs)]
                             : r[broadcastOffset(index, s.rhs)]);
    }
    expectClose(run.outputs[0], expected, 0, 0, "select");
    // The condition is no differentiable input.
    checkGradients(op, {}, inputs, {false, true, true}, tightGradCheck());
    expectPartitionsMatchWhole(op, {}, inputs,
                               partitionsOf(gridBoxes(s.result, s.parts),
                                            [&](const Box &b) {
                                              return Partition{
                                                  {broadcastBox(s.condition, b),
                                                   broadcastBox(s.lhs, b),
                                                   broadcastBox(s.rhs, b)},
                                                  {b}};
                                            }),
                               {false, true, true});
  }
}

TEST(SelectTest, InfinityOnTheSideNotTakenGivesNoNaN) {
  // A key padding mask: -inf where the mask holds, scores elsewhere.
  OpDesc op = makeOp("ppc.select", {{3}, {}, {2, 3}}, {{2, 3}});
  const float inf = std::numeric_limits<float>::infinity();
  OpRun run = runWholeWithGrad(op, {{0, 1, 0}, {-inf}, {1, 2, 3, 4, 5, 6}},
                               {{1, 2, 3, 4, 5, 6}});
  ASSERT_EQ(run.error, "");
  EXPECT_EQ(run.outputs[0], (std::vector<float>{1, -inf, 3, 4, -inf, 6}));
  // The fill gets 2 + 5, the scores what was not masked; the condition
  // nothing.
  expectClose(run.inputGrads[1], {7}, 0, 0, "fill gradient");
  expectClose(run.inputGrads[2], {1, 0, 3, 4, 0, 6}, 0, 0, "scores gradient");
  expectClose(run.inputGrads[0], {0, 0, 0}, 0, 0, "condition gradient");
}

//===----------------------------------------------------------------------===//
// Cumulative sum
//===----------------------------------------------------------------------===//

TEST(CumSumTest, ForwardGradientAndPartitions) {
  const std::vector<int64_t> shape = {2, 3, 4};
  std::vector<float> x = randomValues(numElementsOf(shape), 12);
  for (const CumSumCase &c : cumsumCases()) {
    OpDesc op = makeOp("ppc.cumsum", {shape}, {shape}, c.attributes());
    OpRun run = runWhole(op, {x});
    ASSERT_EQ(run.error, "") << c.name();
    expectClose(run.outputs[0], cumsumReference(x, shape, c), 1e-6, 1e-5,
                c.name());
    checkGradients(op, {}, {x}, {}, tightGradCheck());
    // Every dim but the axis split.
    std::vector<int64_t> parts = {2, 3, 2};
    parts[c.axis < 0 ? c.axis + 3 : c.axis] = 1;
    expectPartitionsMatchWhole(
        op, {}, {x}, partitionsOf(gridBoxes(shape, parts), [](const Box &b) {
          return Partition{{b}, {b}};
        }));
  }
}

TEST(CumSumTest, RejectsASplitAxisAndABadAxis) {
  OpDesc op = makeOp("ppc.cumsum", {{4, 6}}, {{4, 6}}, {{"axis", int64_t{1}}});
  std::vector<float> x = randomValues(24, 13);
  OpRun run = runOp(op, {}, {x},
                    partitionsOf(gridBoxes({4, 6}, {1, 2}), [](const Box &b) {
                      return Partition{{b}, {b}};
                    }));
  EXPECT_NE(run.error.find("does not hold the whole axis 1"), std::string::npos)
      << run.error;
  op.attributes["axis"] = int64_t{2};
  run = runWhole(op, {x});
  EXPECT_NE(run.error.find("axis 2 is out of range for rank 2"),
            std::string::npos)
      << run.error;
}

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

OpDesc dropoutOp(const std::vector<int64_t> &shape, double ratio,
                 int64_t seed) {
  return makeOp("ppc.dropout", {shape}, {shape},
                {{"ratio", ratio}, {"seed", seed}});
}

/// Positions the mask drops (outputs 0 for inputs that are never 0).
std::vector<bool> droppedOf(const std::vector<float> &y) {
  std::vector<bool> dropped;
  for (float v : y)
    dropped.push_back(v == 0.0f);
  return dropped;
}

TEST(DropoutTest, KeepsAndScalesAtTheRatio) {
  std::vector<int64_t> shape = {64, 100};
  std::vector<float> x = randomValues(numElementsOf(shape), 1, 0.5f, 1.5f);
  OpRun run = runWhole(dropoutOp(shape, 0.3, 7), {x});
  ASSERT_EQ(run.error, "");
  float scale = 1.0f / (1.0f - 0.3f);
  int64_t dropped = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (run.outputs[0][i] == 0.0f)
      ++dropped;
    else
      EXPECT_FLOAT_EQ(run.outputs[0][i], x[i] * scale) << i;
  }
  double fraction = static_cast<double>(dropped) / x.size();
  EXPECT_NEAR(fraction, 0.3, 0.03);
}

TEST(DropoutTest, MaskDependsOnSeedAndStepOnly) {
  std::vector<int64_t> shape = {8, 50};
  std::vector<float> x = randomValues(numElementsOf(shape), 2, 0.5f, 1.5f);
  auto maskOf = [&](int64_t seed, int64_t step) {
    KernelContext ctx;
    ctx.step = step;
    OpRun run = runOp(dropoutOp(shape, 0.5, seed), ctx, {x},
                      {wholePartition(dropoutOp(shape, 0.5, seed))});
    EXPECT_EQ(run.error, "");
    return droppedOf(run.outputs[0]);
  };
  EXPECT_EQ(maskOf(3, 10), maskOf(3, 10));
  EXPECT_NE(maskOf(3, 10), maskOf(3, 11));
  EXPECT_NE(maskOf(3, 10), maskOf(4, 10));
}

TEST(DropoutTest, PartitionsDrawTheWholeMask) {
  std::vector<int64_t> shape = {6, 10};
  OpDesc op = dropoutOp(shape, 0.4, 11);
  KernelContext ctx;
  ctx.step = 5;
  std::vector<float> x = randomValues(numElementsOf(shape), 3, 0.5f, 1.5f);
  expectPartitionsMatchWhole(op, ctx, {x},
                             partitionsOf(gridBoxes(shape, {3, 2}),
                                          [](const Box &b) {
                                            return Partition{{b}, {b}};
                                          }),
                             {}, 0.0);
}

TEST(DropoutTest, GradientUsesTheForwardMask) {
  KernelContext ctx;
  ctx.step = 2;
  checkGradients(dropoutOp({4, 6}, 0.5, 9), ctx,
                 {randomValues(24, 4, -1.0f, 1.0f)}, {}, tightGradCheck());
}

TEST(DropoutTest, IdentityOutsideTrainingAndAtRatioZero) {
  std::vector<int64_t> shape = {3, 5};
  std::vector<float> x = randomValues(15, 5), dy = randomValues(15, 6);
  KernelContext inference;
  inference.training = false;
  OpRun run =
      runWholeWithGrad(dropoutOp(shape, 0.5, 1), {x}, {dy}, {}, inference);
  ASSERT_EQ(run.error, "");
  expectClose(run.outputs[0], x, 0, 0, "inference output");
  expectClose(run.inputGrads[0], dy, 0, 0, "inference grad");
  run = runWholeWithGrad(dropoutOp(shape, 0.0, 1), {x}, {dy});
  ASSERT_EQ(run.error, "");
  expectClose(run.outputs[0], x, 0, 0, "ratio 0 output");
}

//===----------------------------------------------------------------------===//
// Broadcast
//===----------------------------------------------------------------------===//

TEST(BroadcastTest, ForwardGradientAndPartitions) {
  struct Case {
    std::vector<int64_t> input, result, parts;
  };
  for (const Case &c :
       {Case{{3, 1}, {2, 3, 4}, {2, 3, 2}}, Case{{4}, {3, 4}, {3, 2}},
        Case{{1, 1}, {2, 2}, {2, 2}}}) {
    OpDesc op = makeOp("ppc.broadcast", {c.input}, {c.result});
    std::vector<float> x = randomValues(numElementsOf(c.input), 9);
    OpRun run = runWhole(op, {x});
    ASSERT_EQ(run.error, "");
    std::vector<float> expected;
    for (int64_t e = 0; e < numElementsOf(c.result); ++e)
      expected.push_back(x[broadcastOffset(unravel(e, c.result), c.input)]);
    expectClose(run.outputs[0], expected, 0, 0, "broadcast");
    checkGradients(op, {}, {x}, {}, tightGradCheck());
    expectPartitionsMatchWhole(
        op, {}, {x},
        partitionsOf(gridBoxes(c.result, c.parts), [&](const Box &b) {
          return Partition{{broadcastBox(c.input, b)}, {b}};
        }));
  }
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class ReduceTest : public ::testing::TestWithParam<ReduceCase> {};

TEST_P(ReduceTest, ForwardMatchesReference) {
  const ReduceCase &c = GetParam();
  std::vector<float> x = randomValues(numElementsOf(c.input), 21);
  OpRun run = runWhole(reduceOp(c), {x});
  ASSERT_EQ(run.error, "");
  std::vector<int64_t> resultShape = reduceResultShape(c);
  std::vector<bool> reduced = reducedDims(c);
  bool isMax = c.kind == "ppc.reduce_max";
  std::vector<double> acc(numElementsOf(resultShape), isMax ? -INFINITY : 0.0);
  int64_t count = 1;
  for (size_t d = 0; d < reduced.size(); ++d)
    count *= reduced[d] ? c.input[d] : 1;
  for (int64_t e = 0; e < numElementsOf(c.input); ++e) {
    std::vector<int64_t> index = unravel(e, c.input), out;
    for (size_t d = 0; d < index.size(); ++d)
      if (!reduced[d])
        out.push_back(index[d]);
      else if (c.keepDims)
        out.push_back(0);
    double &slot = acc[ravel(out, resultShape)];
    slot = isMax ? std::max(slot, static_cast<double>(x[e])) : slot + x[e];
  }
  std::vector<float> expected;
  for (double v : acc)
    expected.push_back(
        static_cast<float>(c.kind == "ppc.reduce_mean" ? v / count : v));
  expectClose(run.outputs[0], expected, 1e-5, 1e-5, c.name);
}

TEST_P(ReduceTest, GradientMatchesFiniteDifferences) {
  const ReduceCase &c = GetParam();
  checkGradients(reduceOp(c), {}, {randomValues(numElementsOf(c.input), 22)},
                 {}, tightGradCheck());
}

TEST_P(ReduceTest, PartitionsMatchWhole) {
  const ReduceCase &c = GetParam();
  std::vector<std::vector<float>> inputs = {
      randomValues(numElementsOf(c.input), 23)};
  std::vector<bool> reduced = reducedDims(c);
  auto partitions = [&](bool splitReduced) {
    std::vector<int64_t> parts;
    for (size_t d = 0; d < reduced.size(); ++d)
      parts.push_back(reduced[d] && !splitReduced ? 1 : 2);
    return partitionsOf(gridBoxes(c.input, parts),
                        [&](const Box &b) { return reducePartition(c, b); });
  };
  expectPartitionsMatchWhole(reduceOp(c), {}, inputs, partitions(false));
  if (c.kind == "ppc.reduce_max") {
    // A max of partials is not their sum: the lowering never splits it.
    OpRun run = runOp(reduceOp(c), {}, inputs, partitions(true));
    EXPECT_NE(run.error.find("must not be split"), std::string::npos)
        << run.error;
    return;
  }
  // Split reduced axes: partial sums that add up (means by global count).
  expectPartitionsMatchWhole(reduceOp(c), {}, inputs, partitions(true));
}

INSTANTIATE_TEST_SUITE_P(Ops, ReduceTest, ::testing::ValuesIn(reduceCases()),
                         [](const ::testing::TestParamInfo<ReduceCase> &info) {
                           return info.param.name;
                         });

TEST(ReduceMaxTest, TiesShareTheGradient) {
  OpDesc op =
      makeOp("ppc.reduce_max", {{2, 4}}, {{2}},
             {{"axes", std::vector<int64_t>{1}}, {"keep_dims", int64_t{0}}});
  OpRun run = runWholeWithGrad(op, {{3, 1, 3, 2, 0, 5, 1, 4}}, {{2.0f, 1.0f}});
  ASSERT_EQ(run.error, "");
  expectClose(run.outputs[0], {3, 5}, 0, 0, "max");
  expectClose(run.inputGrads[0], {1, 0, 1, 0, 0, 1, 0, 0}, 0, 0, "grad");
}

//===----------------------------------------------------------------------===//
// Reshape
//===----------------------------------------------------------------------===//

TEST(ReshapeTest, ForwardIsRowMajorReinterpretation) {
  std::vector<float> x = randomValues(24, 31);
  for (const auto &[from, to] :
       std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{2, 3, 4}, {6, 4}}, {{6, 4}, {2, 3, 4}}, {{4, 6}, {6, 4}}}) {
    OpDesc op = makeOp("ppc.reshape", {from}, {to});
    OpRun run = runWhole(op, {x});
    ASSERT_EQ(run.error, "");
    expectClose(run.outputs[0], x, 0, 0, "reshape");
    checkGradients(op, {}, {x}, {}, tightGradCheck());
  }
}

TEST(ReshapeTest, PartitionsMatchWhole) {
  std::vector<float> x = randomValues(24, 32);
  // [2, 3, 4] -> [6, 4]: result rows [a, b) read input rows [a/3, (b-1)/3],
  // the trailing 4 maps to itself.
  // Whole rows are one run of the flat order on both sides; a column split
  // is not.
  OpDesc merge = makeOp("ppc.reshape", {{2, 3, 4}}, {{6, 4}});
  for (const std::vector<int64_t> &parts :
       {std::vector<int64_t>{2, 1}, std::vector<int64_t>{2, 2}})
    expectPartitionsMatchWhole(
        merge, {}, {x},
        partitionsOf(gridBoxes({6, 4}, parts), [](const Box &b) {
          Box input = {{b.lo[0] / 3, 0, b.lo[1]},
                       {(b.hi[0] - 1) / 3 + 1, 3, b.hi[1]}};
          return Partition{{input}, {b}};
        }));
  // [6, 4] -> [2, 3, 4]: result index i of dim 0 reads input rows [3i, 3i+3).
  OpDesc split = makeOp("ppc.reshape", {{6, 4}}, {{2, 3, 4}});
  expectPartitionsMatchWhole(
      split, {}, {x},
      partitionsOf(gridBoxes({2, 3, 4}, {2, 1, 2}), [](const Box &b) {
        Box input = {{3 * b.lo[0], b.lo[2]}, {3 * b.hi[0], b.hi[2]}};
        return Partition{{input}, {b}};
      }));
  // [4, 6] -> [6, 4] straddles rows: with the input whole, any result split.
  OpDesc straddle = makeOp("ppc.reshape", {{4, 6}}, {{6, 4}});
  expectPartitionsMatchWhole(
      straddle, {}, {x},
      partitionsOf(gridBoxes({6, 4}, {2, 2}), [](const Box &b) {
        return Partition{{wholeBox({4, 6})}, {b}};
      }));
}

TEST(ReshapeTest, RejectsMissingInput) {
  OpDesc op = makeOp("ppc.reshape", {{2, 3}}, {{3, 2}});
  std::vector<float> x = randomValues(6, 33);
  Box firstRow = {{0, 0}, {1, 3}};
  OpRun run = runOp(op, {}, {x}, {Partition{{firstRow}, {wholeBox({3, 2})}}});
  EXPECT_NE(run.error.find("ppc.reshape"), std::string::npos) << run.error;
}

//===----------------------------------------------------------------------===//
// Transpose
//===----------------------------------------------------------------------===//

TEST(TransposeTest, ForwardGradientAndPartitions) {
  struct Case {
    std::vector<int64_t> input, permutation, parts;
  };
  // A rank-3 rotation, and NCHW -> NHWC.
  for (const Case &c : {Case{{2, 3, 4}, {2, 0, 1}, {2, 2, 2}},
                        Case{{2, 3, 2, 4}, {0, 2, 3, 1}, {2, 1, 2, 2}}}) {
    size_t rank = c.input.size();
    std::vector<int64_t> result;
    for (int64_t p : c.permutation)
      result.push_back(c.input[p]);
    OpDesc op = makeOp("ppc.transpose", {c.input}, {result},
                       {{"permutation", c.permutation}});
    std::vector<float> x = randomValues(numElementsOf(c.input), 41);
    OpRun run = runWhole(op, {x});
    ASSERT_EQ(run.error, "");
    std::vector<float> expected;
    for (int64_t e = 0; e < numElementsOf(result); ++e) {
      std::vector<int64_t> index = unravel(e, result), source(rank);
      for (size_t i = 0; i < rank; ++i)
        source[c.permutation[i]] = index[i];
      expected.push_back(x[ravel(source, c.input)]);
    }
    expectClose(run.outputs[0], expected, 0, 0, "transpose");
    checkGradients(op, {}, {x}, {}, tightGradCheck());
    expectPartitionsMatchWhole(
        op, {}, {x},
        partitionsOf(gridBoxes(result, c.parts), [&](const Box &b) {
          Box in = wholeBox(c.input);
          for (size_t i = 0; i < rank; ++i)
            in = withRange(in, c.permutation[i], b.lo[i], b.hi[i]);
          return Partition{{in}, {b}};
        }));
  }
}

//===----------------------------------------------------------------------===//
// Concat and split
//===----------------------------------------------------------------------===//

TEST(ConcatTest, ForwardGradientAndPartitions) {
  std::vector<std::vector<int64_t>> pieces = {{2, 3}, {2, 1}, {2, 2}};
  std::vector<int64_t> result = {2, 6};
  for (int64_t axisAttr : {int64_t{1}, int64_t{-1}}) {
    OpDesc op = makeOp("ppc.concat", pieces, {result}, {{"axis", axisAttr}});
    std::vector<std::vector<float>> inputs = {
        randomValues(6, 51), randomValues(2, 52), randomValues(4, 53)};
    OpRun run = runWhole(op, inputs);
    ASSERT_EQ(run.error, "");
    std::vector<float> expected;
    for (int64_t row = 0; row < 2; ++row)
      for (size_t i = 0; i < pieces.size(); ++i)
        for (int64_t col = 0; col < pieces[i][1]; ++col)
          expected.push_back(inputs[i][row * pieces[i][1] + col]);
    expectClose(run.outputs[0], expected, 0, 0, "concat");
    checkGradients(op, {}, inputs, {}, tightGradCheck());
    // Splits along the axis give some partitions empty pieces.
    expectPartitionsMatchWhole(
        op, {}, inputs,
        partitionsOf(gridBoxes(result, {2, 3}), [&](const Box &b) {
          return Partition{pieceBoxes(b, pieces, 1), {b}};
        }));
  }
}

TEST(SplitTest, ForwardGradientAndPartitions) {
  std::vector<int64_t> input = {5, 4};
  std::vector<std::vector<int64_t>> pieces = {{2, 4}, {3, 4}};
  OpDesc op = makeOp("ppc.split", {input}, pieces, {{"axis", int64_t{0}}});
  std::vector<float> x = randomValues(20, 61);
  OpRun run = runWhole(op, {x});
  ASSERT_EQ(run.error, "");
  expectClose(run.outputs[0], std::vector<float>(x.begin(), x.begin() + 8), 0,
              0, "first piece");
  expectClose(run.outputs[1], std::vector<float>(x.begin() + 8, x.end()), 0, 0,
              "second piece");
  checkGradients(op, {}, {x}, {}, tightGradCheck());
  // The iteration space is the input's: the results' boxes are its clipped
  // shifts, empty where a partition does not reach a piece.
  expectPartitionsMatchWhole(
      op, {}, {x}, partitionsOf(gridBoxes(input, {3, 2}), [&](const Box &b) {
        return Partition{{b}, pieceBoxes(b, pieces, 0)};
      }));
}

//===----------------------------------------------------------------------===//
// Slice and pad
//===----------------------------------------------------------------------===//

TEST(SliceTest, ForwardGradientAndPartitions) {
  std::vector<int64_t> input = {7, 5}, starts = {1, 0}, steps = {2, 2},
                       result = {3, 3};
  OpDesc op = makeOp("ppc.slice", {input}, {result},
                     {{"starts", starts}, {"steps", steps}});
  std::vector<float> x = randomValues(35, 71);
  OpRun run = runWhole(op, {x});
  ASSERT_EQ(run.error, "");
  std::vector<float> expected;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 3; ++j)
      expected.push_back(x[(1 + 2 * i) * 5 + 2 * j]);
  expectClose(run.outputs[0], expected, 0, 0, "slice");
  checkGradients(op, {}, {x}, {}, tightGradCheck());
  expectPartitionsMatchWhole(
      op, {}, {x}, partitionsOf(gridBoxes(result, {2, 3}), [&](const Box &b) {
        Box in = wholeBox(input);
        for (size_t d = 0; d < 2; ++d) {
          auto [lo, hi] =
              windowRange(b.lo[d], b.hi[d], steps[d], starts[d], 1, input[d]);
          in = withRange(in, d, lo, hi);
        }
        return Partition{{in}, {b}};
      }));
}

TEST(PadTest, ForwardGradientAndPartitions) {
  std::vector<int64_t> input = {3, 4};
  // Positive pads, then a negative low pad that crops.
  for (const std::vector<int64_t> &pads :
       {std::vector<int64_t>{1, 0, 2, 1}, std::vector<int64_t>{-1, 1, 0, 1}}) {
    std::vector<int64_t> result = {input[0] + pads[0] + pads[2],
                                   input[1] + pads[1] + pads[3]};
    OpDesc op =
        makeOp("ppc.pad", {input}, {result}, {{"pads", pads}, {"value", 0.5}});
    std::vector<float> x = randomValues(12, 81);
    OpRun run = runWhole(op, {x});
    ASSERT_EQ(run.error, "");
    std::vector<float> expected;
    for (int64_t i = 0; i < result[0]; ++i)
      for (int64_t j = 0; j < result[1]; ++j) {
        int64_t si = i - pads[0], sj = j - pads[1];
        bool inside = si >= 0 && si < input[0] && sj >= 0 && sj < input[1];
        expected.push_back(inside ? x[si * input[1] + sj] : 0.5f);
      }
    expectClose(run.outputs[0], expected, 0, 0, "pad");
    checkGradients(op, {}, {x}, {}, tightGradCheck());
    expectPartitionsMatchWhole(
        op, {}, {x}, partitionsOf(gridBoxes(result, {3, 2}), [&](const Box &b) {
          Box in = wholeBox(input);
          for (size_t d = 0; d < 2; ++d) {
            auto [lo, hi] =
                windowRange(b.lo[d], b.hi[d], 1, -pads[d], 1, input[d]);
            in = withRange(in, d, lo, std::max(lo, hi));
          }
          return Partition{{in}, {b}};
        }));
  }
}

//===----------------------------------------------------------------------===//
// Gather
//===----------------------------------------------------------------------===//

TEST(GatherTest, ForwardMatchesReference) {
  for (const GatherCase &c : gatherCases()) {
    std::vector<float> data = randomValues(numElementsOf(c.data), 91);
    OpRun run = runWhole(gatherOp(c), {data, c.indexValues});
    ASSERT_EQ(run.error, "");
    std::vector<int64_t> result = gatherResultShape(c);
    size_t indicesRank = c.indices.size();
    std::vector<float> expected;
    for (int64_t e = 0; e < numElementsOf(result); ++e) {
      std::vector<int64_t> index = unravel(e, result), source;
      std::vector<int64_t> idx(index.begin() + c.axis,
                               index.begin() + c.axis + indicesRank);
      int64_t row = static_cast<int64_t>(c.indexValues[ravel(idx, c.indices)]);
      source.assign(index.begin(), index.begin() + c.axis);
      source.push_back(row < 0 ? row + c.data[c.axis] : row);
      source.insert(source.end(), index.begin() + c.axis + indicesRank,
                    index.end());
      expected.push_back(data[ravel(source, c.data)]);
    }
    expectClose(run.outputs[0], expected, 0, 0, "gather");
  }
}

TEST(GatherTest, GradientScatterAddsIntoData) {
  for (const GatherCase &c : gatherCases())
    checkGradients(gatherOp(c), {},
                   {randomValues(numElementsOf(c.data), 92), c.indexValues},
                   {true, false}, tightGradCheck());
}

TEST(GatherTest, VocabularyAndBatchSplitsMatchWhole) {
  for (const GatherCase &c : gatherCases()) {
    std::vector<int64_t> result = gatherResultShape(c);
    std::vector<int64_t> iteration = result;
    iteration.push_back(c.data[c.axis]);
    size_t rowsDim = result.size(), indicesRank = c.indices.size();
    auto partitionOf = [&](const Box &b) {
      Box resultBox = {std::vector<int64_t>(b.lo.begin(), b.lo.end() - 1),
                       std::vector<int64_t>(b.hi.begin(), b.hi.end() - 1)};
      Box data = wholeBox(c.data), indices = wholeBox(c.indices);
      for (int64_t d = 0; d < static_cast<int64_t>(c.data.size()); ++d) {
        size_t iterDim = d < c.axis    ? d
                         : d == c.axis ? rowsDim
                                       : d - 1 + indicesRank;
        data = withRange(data, d, b.lo[iterDim], b.hi[iterDim]);
      }
      for (size_t k = 0; k < indicesRank; ++k)
        indices = withRange(indices, k, b.lo[c.axis + k], b.hi[c.axis + k]);
      return Partition{{data, indices}, {resultBox}};
    };
    // Rows split: partitions sharing a result box hold partial results that
    // are zero outside their rows and sum to the whole.
    expectPartitionsMatchWhole(
        gatherOp(c), {},
        {randomValues(numElementsOf(c.data), 93), c.indexValues},
        partitionsOf(gridBoxes(iteration, c.parts), partitionOf),
        {true, false});
  }
}

TEST(GatherTest, RejectsOutOfRangeIndex) {
  GatherCase c = gatherCases()[0];
  c.indexValues[2] = 5;
  OpRun run = runWhole(
      gatherOp(c), {randomValues(numElementsOf(c.data), 94), c.indexValues});
  EXPECT_NE(run.error.find("out of range"), std::string::npos) << run.error;
}

} // namespace
