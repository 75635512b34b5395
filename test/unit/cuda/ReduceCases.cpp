//===- ReduceCases.cpp - reduce_sum, reduce_mean, reduce_max on cuda ------===//
//
// Oracle: the cpu backend's reference kernels (BackendAgreement.h). Every
// reduction, every axes/keep_dims variant the cpu tests use (and all axes,
// default keep_dims, a long innermost run), forward and backward, whole and
// as every box of grid partitions: split kept dims, and split reduced dims
// (partial sums; means by the global count); reduce_max's ties; bf16
// storage; and the errors the cpu kernel reports, word for word.
//
//===----------------------------------------------------------------------===//

#include "ErrorAgreement.h"

#include "../KernelCases.h"

#include <memory>

namespace ppc::runtime::test {
namespace {

/// KernelCases.h's reductions, then all axes, the default keep_dims, a
/// long innermost run and rank 4.
std::vector<ReduceCase> cudaReduceCases() {
  std::vector<ReduceCase> cases = reduceCases();
  cases.insert(
      cases.end(),
      {
          {"sum_all", "ppc.reduce_sum", {0, 1, 2}, 0},
          {"sum_last_default", "ppc.reduce_sum", {-1}, -1},
          {"mean_0", "ppc.reduce_mean", {0}, 0},
          {"mean_all_keep", "ppc.reduce_mean", {0, -2, 2}, 1},
          {"max_last", "ppc.reduce_max", {2}, 0},
          {"max_all", "ppc.reduce_max", {0, 1, 2}, 1},
          {"sum_long_run", "ppc.reduce_sum", {2}, 0, {4, 3, 70}},
          {"mean_rank4", "ppc.reduce_mean", {1, 3}, 0, {2, 5, 3, 6}},
          {"max_rank4_keep", "ppc.reduce_max", {0, 3}, 1, {2, 5, 3, 6}},
      });
  return cases;
}

std::vector<int64_t> gridParts(const ReduceCase &c, bool splitReduced) {
  std::vector<bool> reduced = reducedDims(c);
  std::vector<int64_t> parts;
  for (size_t d = 0; d < reduced.size(); ++d)
    parts.push_back(reduced[d] && !splitReduced ? 1 : (d % 2 ? 3 : 2));
  return parts;
}

class CudaReduce : public ::testing::TestWithParam<ReduceCase> {};

TEST_P(CudaReduce, Whole) {
  PPC_REQUIRE_CUDA_BACKEND();
  AgreementCase c;
  c.op = reduceOp(GetParam());
  expectBackendsAgree(c, GetParam().name + " whole");
  c.backward = false;
  c.ctx.training = false;
  expectBackendsAgree(c, GetParam().name + " inference");
}

TEST_P(CudaReduce, KeptDimsSplit) {
  PPC_REQUIRE_CUDA_BACKEND();
  const ReduceCase &rc = GetParam();
  AgreementCase c;
  c.op = reduceOp(rc);
  for (const Box &b : gridBoxes(rc.input, gridParts(rc, false))) {
    c.partition = reducePartition(rc, b);
    expectBackendsAgree(c, rc.name + " partition " + boxName(b));
  }
}

TEST_P(CudaReduce, ReducedDimsSplit) {
  PPC_REQUIRE_CUDA_BACKEND();
  const ReduceCase &rc = GetParam();
  OpDesc op = reduceOp(rc);
  std::vector<float> x = randomValues(numElementsOf(rc.input), 23);
  for (const Box &b : gridBoxes(rc.input, gridParts(rc, true))) {
    Partition p = reducePartition(rc, b);
    if (rc.kind == "ppc.reduce_max") {
      // A max of partials is not their sum: the kernel refuses a split.
      bool split = false;
      std::vector<bool> reduced = reducedDims(rc);
      for (size_t d = 0; d < reduced.size(); ++d)
        split |= reduced[d] && (b.lo[d] != 0 || b.hi[d] != rc.input[d]);
      if (split)
        expectSameErrors(op, p, {x}, rc.name + " split " + boxName(b));
      continue;
    }
    // Partial sums over the held range (means by the global count).
    AgreementCase c;
    c.op = op;
    c.partition = p;
    expectBackendsAgree(c, rc.name + " split " + boxName(b));
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaReduce,
                         ::testing::ValuesIn(cudaReduceCases()),
                         [](const ::testing::TestParamInfo<ReduceCase> &info) {
                           return info.param.name;
                         });

TEST(CudaReduceMax, TiesShareTheGradient) {
  PPC_REQUIRE_CUDA_BACKEND();
  AgreementCase c;
  c.op = makeOp("ppc.reduce_max", {{2, 4}}, {{2}},
                {{"axes", std::vector<int64_t>{1}}, {"keep_dims", int64_t{0}}});
  c.inputs = {{3, 1, 3, 2, 0, 5, 1, 4}};
  expectBackendsAgree(c, "max ties");
  // Three-way ties, a NaN row, an all -inf row, along the first dim.
  const float inf = std::numeric_limits<float>::infinity();
  c.op = makeOp("ppc.reduce_max", {{4, 3}}, {{1, 3}},
                {{"axes", std::vector<int64_t>{0}}, {"keep_dims", int64_t{1}}});
  c.inputs = {{2, std::nanf(""), -inf, 2, 1, -inf, 2, 7, -inf, 1, 7, -inf}};
  expectBackendsAgree(c, "max ties, NaN, -inf");
  c.partition = Partition{{Box{{0, 1}, {4, 3}}}, {Box{{0, 1}, {1, 3}}}};
  expectBackendsAgree(c, "max ties, NaN, -inf, columns 1:3");
}

TEST(CudaReduce, SumWithNaNAndInf) {
  PPC_REQUIRE_CUDA_BACKEND();
  const float inf = std::numeric_limits<float>::infinity();
  AgreementCase c;
  c.op = makeOp("ppc.reduce_sum", {{2, 3}}, {{2}},
                {{"axes", std::vector<int64_t>{1}}, {"keep_dims", int64_t{0}}});
  c.inputs = {{1, std::nanf(""), 2, inf, 1, 2}};
  expectBackendsAgree(c, "sum NaN inf");
}

TEST(CudaReduce, Bf16) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (const ReduceCase &rc : reduceCases()) {
    if (rc.name != "sum_0_2" && rc.name != "mean_1_2_keep" &&
        rc.name != "max_1_keep")
      continue;
    AgreementCase c;
    c.op = reduceOp(rc);
    c.dtype = DType::BF16;
    c.rtol = 1e-2;
    c.atol = 1e-2;
    expectBackendsAgree(c, rc.name + " bf16");
    c.partition = reducePartition(rc, rc.kind == "ppc.reduce_max"
                                          ? Box{{1, 0, 1}, {3, 4, 4}}
                                          : Box{{1, 2, 1}, {3, 4, 4}});
    expectBackendsAgree(c, rc.name + " bf16 partition");
  }
}

TEST(CudaReduce, NoGradientWanted) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (const char *kind :
       {"ppc.reduce_sum", "ppc.reduce_mean", "ppc.reduce_max"}) {
    AgreementCase c;
    c.op = reduceOp({"x", kind, {1}, 1});
    c.needsGrad = {false};
    expectBackendsAgree(c, std::string(kind) + " no grad");
  }
}

TEST(CudaReduce, Errors) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::vector<float> x = randomValues(60, 5);
  auto op = [](std::map<std::string, AttributeValue> attributes,
               std::vector<int64_t> result) {
    return makeOp("ppc.reduce_sum", {{3, 4, 5}}, {result}, attributes);
  };
  OpDesc noAxes = op({}, {3, 4, 5});
  expectSameErrors(noAxes, wholePartition(noAxes), {x}, "no axes");
  OpDesc badAxis = op({{"axes", std::vector<int64_t>{3}}}, {3, 4, 1});
  expectSameErrors(badAxis, wholePartition(badAxis), {x}, "axis out of range");
  OpDesc badRank =
      op({{"axes", std::vector<int64_t>{1}}, {"keep_dims", int64_t{0}}},
         {3, 4, 5});
  expectSameErrors(badRank, wholePartition(badRank), {x}, "result rank");
  OpDesc ok = op({{"axes", std::vector<int64_t>{1}}, {"keep_dims", int64_t{0}}},
                 {3, 5});
  // The input view misses rows of the output box.
  expectSameErrors(ok,
                   Partition{{Box{{0, 0, 0}, {2, 4, 5}}}, {wholeBox({3, 5})}},
                   {x}, "input misses rows");
  // The output view misses what the input box reaches (keep_dims at 0).
  OpDesc keep = op({{"axes", std::vector<int64_t>{1}}}, {3, 1, 5});
  expectSameErrors(
      keep, Partition{{wholeBox({3, 4, 5})}, {Box{{0, 1, 0}, {3, 1, 5}}}}, {x},
      "output misses");
}

} // namespace
} // namespace ppc::runtime::test
