//===- LossCases.cpp - softmax_cross_entropy and mse_loss on both backends ===//
//
// Oracle: the cpu backend's reference kernels (BackendAgreement.h). Every
// op of runtime/cuda/LossKernels.cu, forward and backward:
// softmax_cross_entropy's three stages (row maxima and sums scratch
// compared after each), row partitions, class partitions (only the one
// holding class 0 writes the loss), label boxes wider than the rows, large
// logits, inference, bf16; mse_loss whole and as grids of boxes; and the
// errors the cpu kernels report (labels that are not classes, mismatched
// boxes), which the cuda kernels must report alike.
//
//===----------------------------------------------------------------------===//

#include "../StatusText.h"
#include "ErrorAgreement.h"

#include "ppc/Runtime/CpuBackend.h"

using ppc::test::statusText;

namespace ppc::runtime::test {
namespace {

using Range = std::pair<int64_t, int64_t>;

//===----------------------------------------------------------------------===//
// softmax_cross_entropy
//===----------------------------------------------------------------------===//

OpDesc crossEntropyOp(int64_t rows, int64_t classes) {
  return makeOp("ppc.softmax_cross_entropy", {{rows, classes}, {rows}}, {{}});
}

AgreementCase crossEntropyCase(int64_t rows, int64_t classes,
                               std::vector<float> labels, float spread = 2) {
  AgreementCase c;
  c.op = crossEntropyOp(rows, classes);
  c.inputs = {randomValues(rows * classes, 11, -spread, spread),
              std::move(labels)};
  c.integerOperands = {1};
  return c;
}

/// Rows r and classes k of the logits; labels hold `labelRows` (default:
/// the same rows).
Partition crossEntropyPartition(Range r, Range k,
                                std::optional<Range> labelRows = {}) {
  Range l = labelRows ? *labelRows : r;
  return Partition{{Box{{r.first, k.first}, {r.second, k.second}},
                    Box{{l.first}, {l.second}}},
                   {Box{}}};
}

TEST(CudaSoftmaxCrossEntropy, WholeAndRowPartitions) {
  PPC_REQUIRE_CUDA_BACKEND();
  AgreementCase c = crossEntropyCase(6, 4, {0, 3, 1, 1, 2, 0});
  expectBackendsAgree(c, "whole");
  for (Range r : splitRange(6, 3)) {
    c.partition = crossEntropyPartition(r, {0, 4});
    expectBackendsAgree(c, "rows " + std::to_string(r.first));
    c.partition = crossEntropyPartition(r, {0, 4}, Range{0, 6});
    expectBackendsAgree(c, "rows with all labels " + std::to_string(r.first));
  }
  c.partition = crossEntropyPartition({2, 5}, {0, 4}, Range{1, 6});
  expectBackendsAgree(c, "rows inside a wider labels box");
}

TEST(CudaSoftmaxCrossEntropy, ClassPartitions) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (float spread : {3.0f, 300.0f}) {
    AgreementCase c = crossEntropyCase(4, 6, {0, 5, 2, 3}, spread);
    for (Range r : splitRange(4, 2))
      for (Range k : splitRange(6, 3)) {
        c.partition = crossEntropyPartition(r, k);
        std::string name = "rows " + std::to_string(r.first) + " classes " +
                           std::to_string(k.first) + " spread " +
                           std::to_string(spread);
        expectBackendsAgree(c, name);
        c.ctx = inferenceCtx();
        expectBackendsAgree(c, name + " inference");
        c.ctx = trainingCtx();
      }
    c.partition = crossEntropyPartition({1, 4}, {2, 6}, Range{0, 4});
    expectBackendsAgree(c, "wider labels, classes from 2");
  }
}

TEST(CudaSoftmaxCrossEntropy, LongRowsForwardOnlyAndBf16) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::vector<float> labels;
  for (int64_t r = 0; r < 9; ++r)
    labels.push_back(static_cast<float>((r * 37) % 300));
  AgreementCase c = crossEntropyCase(9, 300, labels, 5);
  expectBackendsAgree(c, "long rows");
  c.partition = crossEntropyPartition({3, 9}, {100, 300});
  expectBackendsAgree(c, "long rows, classes from 100");
  AgreementCase f = c;
  f.backward = false;
  f.ctx = inferenceCtx();
  expectBackendsAgree(f, "forward only, inference");
  AgreementCase n = c;
  n.needsGrad = {false, false};
  expectBackendsAgree(n, "no gradient");
  AgreementCase b = c;
  b.partition.reset();
  b.dtype = DType::BF16;
  b.atol = 2e-2;
  b.rtol = 2e-2;
  expectBackendsAgree(b, "bf16");
  b.partition = crossEntropyPartition({0, 4}, {0, 150});
  expectBackendsAgree(b, "bf16 classes from 0");
}

TEST(CudaSoftmaxCrossEntropy, ReportsTheCpuKernelsErrors) {
  PPC_REQUIRE_CUDA_BACKEND();
  OpDesc op = crossEntropyOp(2, 3);
  // errorOn's operand values are in [0.5, 1.5): not integers, so not
  // labels.
  expectSameError(op, trainingCtx(), wholePartition(op), false,
                  "labels not classes");
  expectSameError(op, inferenceCtx(), crossEntropyPartition({1, 2}, {1, 3}),
                  false, "labels not classes, partition");
  // Labels box without the logits rows.
  expectSameError(op, trainingCtx(),
                  crossEntropyPartition({0, 2}, {0, 3}, Range{1, 2}), false,
                  "labels box");
}

TEST(CudaSoftmaxCrossEntropy, RejectsLabelsOutOfRangeAsTheCpuKernel) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::string unused;
  Backend &cuda = *cudaBackendUnderTest(unused);
  std::unique_ptr<Backend> cpu = createCpuBackend({1, true});
  OpDesc op = crossEntropyOp(3, 4);
  for (float bad : {4.0f, -1.0f, 1.5f, NAN}) {
    std::string errors[2];
    Backend *backends[2] = {&cuda, cpu.get()};
    for (int k = 0; k < 2; ++k) {
      Backend &b = *backends[k];
      std::vector<float> logits = randomValues(12, 2), labels = {0, bad, 3};
      auto l = b.allocate(DType::F32, 12), y = b.allocate(DType::F32, 3);
      auto out = b.allocate(DType::F32, 1), m = b.allocate(DType::F32, 3),
           s = b.allocate(DType::F32, 6);
      b.write(*l, 0, logits.data(), 12);
      b.write(*y, 0, labels.data(), 3);
      std::vector<DeviceView> inputs = {{l.get(), 0, {3, 4}, {0, 0}, {3, 4}},
                                        {y.get(), 0, {3}, {0}, {3}}};
      std::vector<DeviceView> outputs = {{out.get(), 0, {}, {}, {}}};
      std::vector<DeviceView> scratch = {{m.get(), 0, {3}, {0}, {3}},
                                         {s.get(), 0, {2, 3}, {0, 0}, {2, 3}}};
      errors[k] = withDeferred(
          b,
          statusText(b.forward(op, trainingCtx(), inputs, outputs, scratch)));
    }
    EXPECT_NE(errors[1], "") << bad;
    EXPECT_EQ(errors[0], errors[1]) << bad;
  }
}

//===----------------------------------------------------------------------===//
// mse_loss
//===----------------------------------------------------------------------===//

TEST(CudaMseLoss, WholeAndPartitions) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::vector<int64_t> shape = {4, 3};
  OpDesc op = makeOp("ppc.mse_loss", {shape, shape}, {{}});
  AgreementCase c;
  c.op = op;
  expectBackendsAgree(c, "whole");
  for (Range r : splitRange(4, 2))
    for (Range k : splitRange(3, 2)) {
      Box box{{r.first, k.first}, {r.second, k.second}};
      c.partition = Partition{{box, box}, {Box{}}};
      expectBackendsAgree(c, "box " + std::to_string(r.first) + "," +
                                 std::to_string(k.first));
    }
  for (std::vector<bool> needs : std::vector<std::vector<bool>>{
           {true, false}, {false, true}, {false, false}}) {
    c.needsGrad = needs;
    expectBackendsAgree(c, "some gradients");
  }
}

TEST(CudaMseLoss, LargeRank3AndBf16) {
  PPC_REQUIRE_CUDA_BACKEND();
  // More elements than one chunk of the forward's partial sums.
  std::vector<int64_t> shape = {7, 40, 50};
  OpDesc op = makeOp("ppc.mse_loss", {shape, shape}, {{}});
  AgreementCase c;
  c.op = op;
  expectBackendsAgree(c, "large");
  Box box{{2, 5, 1}, {7, 40, 49}};
  c.partition = Partition{{box, box}, {Box{}}};
  expectBackendsAgree(c, "large partition");
  c.ctx = inferenceCtx();
  c.backward = false;
  expectBackendsAgree(c, "inference forward");
  AgreementCase b;
  b.op = op;
  b.dtype = DType::BF16;
  b.atol = 2e-2;
  b.rtol = 2e-2;
  expectBackendsAgree(b, "bf16");
}

TEST(CudaMseLoss, ReportsTheCpuKernelsErrors) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::vector<int64_t> shape = {4, 3};
  OpDesc op = makeOp("ppc.mse_loss", {shape, shape}, {{}});
  Partition p = wholePartition(op);
  p.inputs[1] = withRange(p.inputs[1], 0, 1, 3);
  expectSameError(op, trainingCtx(), p, false, "boxes differ");
  OpDesc other = makeOp("ppc.mse_loss", {shape, {4, 4}}, {{}});
  expectSameError(other, trainingCtx(), wholePartition(other), false,
                  "shapes differ");
  OpDesc notScalar = makeOp("ppc.mse_loss", {shape, shape}, {{1}});
  expectSameError(notScalar, trainingCtx(), wholePartition(notScalar), false,
                  "result not scalar");
}

} // namespace
} // namespace ppc::runtime::test
