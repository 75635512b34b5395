//===- ContractionCases.cpp - matmul and linear on the cuda backend -------===//
//
// Oracle: the cpu backend's reference kernels (BackendAgreement.h) on the
// cpu kernel tests' shapes: batch broadcasting, transposes, partitions
// split along M, N, K (partial sums, linear's bias only at K = 0) and
// batch, float32 and bf16 operands.
//
//===----------------------------------------------------------------------===//

#include "../StatusText.h"
#include "BackendAgreement.h"

#include "../KernelCases.h"

using ppc::test::statusText;

namespace ppc::runtime::test {
namespace {

/// KernelCases.h's matmuls, and batch dims broadcast from both sides.
const std::vector<MatMulCase> kCudaMatMulCases = [] {
  std::vector<MatMulCase> shapes = kMatMulCases;
  shapes.push_back({{3, 3, 4}, {2, 1, 4, 5}, {2, 3, 3, 5}, false, false});
  return shapes;
}();

TEST(CudaMatMul, AgreesWholeAndPartitioned) {
  PPC_REQUIRE_CUDA_BACKEND();
  int index = 0;
  for (const MatMulCase &s : kCudaMatMulCases) {
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
    c.op = matMulOp(kMatMulCases[i]);
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
  const MatMulCase &s = kMatMulCases[0];
  OpDesc op = matMulOp(s);
  Partition p = matMulPartition(s, {}, {0, 3}, {0, 5}, {0, 2});
  auto lhs = cuda.allocate(DType::F32, 12), rhs = cuda.allocate(DType::F32, 20),
       out = cuda.allocate(DType::F32, 15);
  std::string error = statusText(
      cuda.forward(op, {},
                   {{lhs.get(), 0, s.lhs, p.inputs[0].lo, p.inputs[0].hi},
                    {rhs.get(), 0, s.rhs, {0, 0}, {4, 5}}},
                   {{out.get(), 0, s.result, {0, 0}, {3, 5}}}, {}));
  EXPECT_NE(error.find("rhs box along K does not match"), std::string::npos)
      << error;
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
