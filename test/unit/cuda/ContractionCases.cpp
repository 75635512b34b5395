//===- ContractionCases.cpp - matmul and linear on the cuda backend -------===//
//
// Oracle: the cpu backend's reference kernels (BackendAgreement.h) on the
// cpu kernel tests' shapes: batch broadcasting, transposes, partitions
// split along M, N, K (partial sums, linear's bias only at K = 0) and
// batch, float32 and bf16 operands.
//
//===----------------------------------------------------------------------===//

#include "BackendAgreement.h"

namespace ppc::runtime::test {
namespace {

using Range = std::pair<int64_t, int64_t>;

struct MatMulShape {
  std::vector<int64_t> lhs, rhs, result;
  bool transposeLhs, transposeRhs;
};

const std::vector<MatMulShape> kMatMulShapes = {
    {{3, 4}, {4, 5}, {3, 5}, false, false},
    {{2, 3, 4}, {2, 4, 5}, {2, 3, 5}, false, false},
    {{2, 3, 4}, {4, 5}, {2, 3, 5}, false, false},
    {{2, 4, 3}, {5, 4}, {2, 3, 5}, true, true},
    {{2, 1, 3, 4}, {1, 3, 5, 4}, {2, 3, 3, 5}, false, true},
    {{3, 4, 3}, {3, 4, 5}, {3, 3, 5}, true, false},
    {{3, 3, 4}, {2, 1, 4, 5}, {2, 3, 3, 5}, false, false},
};

OpDesc matMulOp(const MatMulShape &c) {
  return makeOp("ppc.matmul", {c.lhs, c.rhs}, {c.result},
                {{"transpose_lhs", int64_t{c.transposeLhs}},
                 {"transpose_rhs", int64_t{c.transposeRhs}}});
}

/// The cpu kernel test's partition of a matmul (batch ranges of the
/// result's batch dims; operands broadcast along a dim hold all of it).
Partition matMulPartition(const MatMulShape &c, const std::vector<Range> &batch,
                          Range m, Range n, Range k) {
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

TEST(CudaMatMul, AgreesWholeAndPartitioned) {
  PPC_REQUIRE_CUDA_BACKEND();
  int index = 0;
  for (const MatMulShape &s : kMatMulShapes) {
    const std::string name = "matmul shape " + std::to_string(index++);
    AgreementCase c;
    c.op = matMulOp(s);
    expectBackendsAgree(c, name + " whole");
    const size_t rank = s.result.size();
    const int64_t m = s.result[rank - 2], n = s.result[rank - 1];
    const int64_t k = s.transposeLhs ? s.lhs[s.lhs.size() - 2] : s.lhs.back();
    std::vector<Range> batch;
    for (size_t d = 0; d + 2 < rank; ++d)
      batch.push_back({0, s.result[d]});
    // The upper corner of a 2 x 2 x 2 grid: nothing starts at 0.
    c.partition = matMulPartition(s, batch, {1, m}, {2, n}, {1, k});
    expectBackendsAgree(c, name + " corner");
    if (rank > 2) {
      std::vector<Range> last = batch;
      last[0] = {s.result[0] - 1, s.result[0]};
      if (rank > 3)
        last[1] = {1, s.result[1]};
      c.partition = matMulPartition(s, last, {0, m}, {0, n}, {0, k});
      expectBackendsAgree(c, name + " batch slice");
    }
  }
}

TEST(CudaMatMul, AgreesInBf16) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (int i : {1, 3, 4}) {
    AgreementCase c;
    c.op = matMulOp(kMatMulShapes[i]);
    c.dtype = DType::BF16;
    c.rtol = 1e-2;
    c.atol = 1e-2;
    expectBackendsAgree(c, "bf16 matmul shape " + std::to_string(i));
  }
}

TEST(CudaMatMul, ReportsMismatchedReductionBoxes) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::string unused;
  Backend &cuda = *cudaBackendUnderTest(unused);
  const MatMulShape &s = kMatMulShapes[0];
  OpDesc op = matMulOp(s);
  Partition p = matMulPartition(s, {}, {0, 3}, {0, 5}, {0, 2});
  auto lhs = cuda.allocate(DType::F32, 12), rhs = cuda.allocate(DType::F32, 20),
       out = cuda.allocate(DType::F32, 15);
  std::string error =
      cuda.forward(op, {},
                   {{lhs.get(), 0, s.lhs, p.inputs[0].lo, p.inputs[0].hi},
                    {rhs.get(), 0, s.rhs, {0, 0}, {4, 5}}},
                   {{out.get(), 0, s.result, {0, 0}, {3, 5}}}, {});
  EXPECT_NE(error.find("rhs box along K does not match"), std::string::npos)
      << error;
}

OpDesc linearOp(const std::vector<int64_t> &input, int64_t n,
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

Partition linearPartition(const OpDesc &op, const std::vector<Range> &rows,
                          Range n, Range k) {
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

TEST(CudaLinear, AgreesWholeAndPartitioned) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (bool transposed : {false, true})
    for (bool bias : {false, true}) {
      const std::string name = std::string("linear") +
                               (transposed ? " transposed" : "") +
                               (bias ? " with bias" : "");
      AgreementCase c;
      c.op = linearOp({4, 3, 6}, 5, transposed, bias);
      expectBackendsAgree(c, name + " whole");
      c.partition = linearPartition(c.op, {{1, 4}, {0, 3}}, {2, 5}, {0, 6});
      expectBackendsAgree(c, name + " rows and columns");
      // A split K: only the partition at K = 0 adds the bias.
      for (Range k : {Range{0, 2}, Range{2, 6}}) {
        c.partition = linearPartition(c.op, {{0, 4}, {0, 3}}, {1, 4}, k);
        expectBackendsAgree(c, name + " K from " + std::to_string(k.first));
      }
      c.dtype = DType::BF16;
      c.partition.reset();
      c.rtol = c.atol = 1e-2;
      expectBackendsAgree(c, name + " bf16");
    }
}

} // namespace
} // namespace ppc::runtime::test
