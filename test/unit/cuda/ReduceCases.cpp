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

#include "BackendAgreement.h"

#include "ppc/Runtime/CpuBackend.h"

#include <memory>

namespace ppc::runtime::test {
namespace {

std::vector<Box> gridBoxes(const std::vector<int64_t> &shape,
                           const std::vector<int64_t> &parts) {
  std::vector<Box> boxes = {wholeBox(shape)};
  for (size_t d = 0; d < shape.size(); ++d) {
    std::vector<Box> next;
    for (const Box &box : boxes) {
      int64_t base = shape[d] / parts[d], extra = shape[d] % parts[d];
      for (int64_t p = 0; p < parts[d]; ++p) {
        int64_t lo = p * base + std::min(p, extra);
        next.push_back(withRange(box, d, lo, lo + base + (p < extra ? 1 : 0)));
      }
    }
    boxes = std::move(next);
  }
  return boxes;
}

std::string boxName(const Box &b) {
  std::string s = "[";
  for (size_t d = 0; d < b.lo.size(); ++d)
    s += (d ? "," : "") + std::to_string(b.lo[d]) + ":" +
         std::to_string(b.hi[d]);
  return s + "]";
}

struct ReduceCase {
  std::string name;
  std::string kind;
  std::vector<int64_t> axes;
  int keepDims; ///< 0, 1, or -1: the attribute left out (default 1)
  std::vector<int64_t> input = {3, 4, 5};
};

std::vector<ReduceCase> reduceCases() {
  return {
      {"sum_1_keep", "ppc.reduce_sum", {1}, 1},
      {"sum_0_2", "ppc.reduce_sum", {0, 2}, 0},
      {"sum_all", "ppc.reduce_sum", {0, 1, 2}, 0},
      {"sum_last_default", "ppc.reduce_sum", {-1}, -1},
      {"mean_last", "ppc.reduce_mean", {-1}, 0},
      {"mean_1_2_keep", "ppc.reduce_mean", {1, 2}, 1},
      {"mean_0", "ppc.reduce_mean", {0}, 0},
      {"mean_all_keep", "ppc.reduce_mean", {0, -2, 2}, 1},
      {"max_1_keep", "ppc.reduce_max", {1}, 1},
      {"max_0_2", "ppc.reduce_max", {0, 2}, 0},
      {"max_last", "ppc.reduce_max", {2}, 0},
      {"max_all", "ppc.reduce_max", {0, 1, 2}, 1},
      {"sum_long_run", "ppc.reduce_sum", {2}, 0, {4, 3, 70}},
      {"mean_rank4", "ppc.reduce_mean", {1, 3}, 0, {2, 5, 3, 6}},
      {"max_rank4_keep", "ppc.reduce_max", {0, 3}, 1, {2, 5, 3, 6}},
  };
}

std::vector<bool> reducedDims(const ReduceCase &c) {
  std::vector<bool> reduced(c.input.size(), false);
  for (int64_t axis : c.axes)
    reduced[axis < 0 ? axis + static_cast<int64_t>(c.input.size()) : axis] =
        true;
  return reduced;
}

std::vector<int64_t> resultShape(const ReduceCase &c) {
  std::vector<bool> reduced = reducedDims(c);
  std::vector<int64_t> shape;
  for (size_t d = 0; d < c.input.size(); ++d)
    if (!reduced[d])
      shape.push_back(c.input[d]);
    else if (c.keepDims != 0)
      shape.push_back(1);
  return shape;
}

OpDesc reduceOp(const ReduceCase &c) {
  std::map<std::string, AttributeValue> attributes = {{"axes", c.axes}};
  if (c.keepDims >= 0)
    attributes["keep_dims"] = int64_t{c.keepDims};
  return makeOp(c.kind, {c.input}, {resultShape(c)}, attributes);
}

/// The partition of the input box `box`: the result box follows it along
/// the kept dims and is whole along the reduced ones.
Partition reducePartition(const ReduceCase &c, const Box &box) {
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

std::vector<int64_t> gridParts(const ReduceCase &c, bool splitReduced) {
  std::vector<bool> reduced = reducedDims(c);
  std::vector<int64_t> parts;
  for (size_t d = 0; d < reduced.size(); ++d)
    parts.push_back(reduced[d] && !splitReduced ? 1 : (d % 2 ? 3 : 2));
  return parts;
}

/// The errors of the forward and the backward of one partition on a
/// backend (the backward runs even when the forward failed).
std::pair<std::string, std::string> errorsOn(Backend &backend, const OpDesc &op,
                                             const Partition &p,
                                             const std::vector<float> &whole) {
  std::vector<std::shared_ptr<DeviceBuffer>> owned;
  auto viewOf = [&](const std::vector<int64_t> &shape, const Box &box,
                    const std::vector<float> *values) {
    int64_t n = 1;
    for (size_t d = 0; d < box.lo.size(); ++d)
      n *= box.hi[d] - box.lo[d];
    std::vector<float> part(std::max<int64_t>(n, 1), 0.5f);
    if (values)
      part = extractBox(*values, shape, box);
    auto buffer =
        backend.allocate(DType::F32, std::max<size_t>(1, part.size()));
    backend.write(*buffer, 0, part.data(), static_cast<int64_t>(part.size()));
    owned.push_back(buffer);
    return DeviceView{buffer.get(), 0, shape, box.lo, box.hi};
  };
  std::vector<DeviceView> inputs = {
      viewOf(op.operandShapes[0], p.inputs[0], &whole)};
  std::vector<DeviceView> inputGrads = {
      viewOf(op.operandShapes[0], p.inputs[0], nullptr)};
  std::vector<DeviceView> outputs = {
      viewOf(op.resultShapes[0], p.outputs[0], nullptr)};
  std::vector<DeviceView> outputGrads = {
      viewOf(op.resultShapes[0], p.outputs[0], nullptr)};
  std::pair<std::string, std::string> errors;
  errors.first = backend.forward(op, {}, inputs, outputs, {});
  errors.second =
      backend.backward(op, {}, inputs, outputs, outputGrads, inputGrads, {});
  backend.synchronize();
  return errors;
}

void expectSameErrors(const OpDesc &op, const Partition &p,
                      const std::vector<float> &whole,
                      const std::string &name) {
  std::string skipReason;
  Backend *cuda = cudaBackendUnderTest(skipReason);
  ASSERT_NE(cuda, nullptr) << skipReason;
  std::unique_ptr<Backend> cpu = createCpuBackend({1, true});
  auto want = errorsOn(*cpu, op, p, whole);
  auto got = errorsOn(*cuda, op, p, whole);
  EXPECT_NE(want.first, "") << name;
  EXPECT_NE(want.second, "") << name;
  EXPECT_EQ(got.first, want.first) << name << " (forward)";
  EXPECT_EQ(got.second, want.second) << name << " (backward)";
}

void PrintTo(const ReduceCase &c, std::ostream *os) { *os << c.name; }

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
        expectSameErrors(op, p, x, rc.name + " split " + boxName(b));
      continue;
    }
    // Partial sums over the held range (means by the global count).
    AgreementCase c;
    c.op = op;
    c.partition = p;
    expectBackendsAgree(c, rc.name + " split " + boxName(b));
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaReduce, ::testing::ValuesIn(reduceCases()),
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
  expectSameErrors(noAxes, wholePartition(noAxes), x, "no axes");
  OpDesc badAxis = op({{"axes", std::vector<int64_t>{3}}}, {3, 4, 1});
  expectSameErrors(badAxis, wholePartition(badAxis), x, "axis out of range");
  OpDesc badRank =
      op({{"axes", std::vector<int64_t>{1}}, {"keep_dims", int64_t{0}}},
         {3, 4, 5});
  expectSameErrors(badRank, wholePartition(badRank), x, "result rank");
  OpDesc ok = op({{"axes", std::vector<int64_t>{1}}, {"keep_dims", int64_t{0}}},
                 {3, 5});
  // The input view misses rows of the output box.
  expectSameErrors(ok,
                   Partition{{Box{{0, 0, 0}, {2, 4, 5}}}, {wholeBox({3, 5})}},
                   x, "input misses rows");
  // The output view misses what the input box reaches (keep_dims at 0).
  OpDesc keep = op({{"axes", std::vector<int64_t>{1}}}, {3, 1, 5});
  expectSameErrors(
      keep, Partition{{wholeBox({3, 4, 5})}, {Box{{0, 1, 0}, {3, 1, 5}}}}, x,
      "output misses");
}

} // namespace
} // namespace ppc::runtime::test
