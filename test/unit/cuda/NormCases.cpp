//===- NormCases.cpp - batch/layer norm and softmax on both backends ------===//
//
// Oracle: the cpu backend's reference kernels (BackendAgreement.h). Every
// op of runtime/cuda/NormKernels.cu, forward and backward, whole and
// partitioned (boxes that do not start at 0, per-channel operands holding
// more channels than the input box, rows of layer_norm and lines of softmax
// split), every attribute, training (batch_norm's stages and scratch
// compared after each stage, running statistics updated in place) and
// inference, bf16 storage; and the errors the cpu kernels report, which the
// cuda kernels must report alike.
//
//===----------------------------------------------------------------------===//

#include "ErrorAgreement.h"

#include "../KernelCases.h"

#include "ppc/Runtime/CpuBackend.h"

#include <cmath>

namespace ppc::runtime::test {
namespace {

//===----------------------------------------------------------------------===//
// batch_norm
//===----------------------------------------------------------------------===//

/// Input (mean 0.5, spread 2), scale, bias, running mean, running variance
/// (positive).
std::vector<std::vector<float>> batchNormInputs(const OpDesc &op) {
  std::vector<std::vector<float>> inputs;
  for (size_t i = 0; i < op.operandShapes.size(); ++i)
    inputs.push_back(randomValues(numElementsOf(op.operandShapes[i]),
                                  1234 + static_cast<uint32_t>(i)));
  return withBatchNormStatistics(std::move(inputs));
}

AgreementCase batchNormCase(const OpDesc &op, KernelContext ctx,
                            std::optional<Partition> p = {}) {
  AgreementCase c;
  c.op = op;
  c.inputs = batchNormInputs(op);
  c.ctx = ctx;
  c.partition = p;
  if (ctx.training) // the running statistics do not reach the result
    c.needsGrad = {true, true, true, false, false};
  c.atol = 2e-5;
  c.rtol = 2e-4;
  return c;
}

TEST(CudaBatchNorm, WholeTrainingAndInference) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (const std::vector<int64_t> &shape :
       std::vector<std::vector<int64_t>>{{3, 2, 2, 3}, {4, 3, 4, 2}}) {
    OpDesc op = batchNormOp(shape);
    expectBackendsAgree(batchNormCase(op, trainingCtx()), "training");
    expectBackendsAgree(batchNormCase(op, inferenceCtx()), "inference");
  }
}

TEST(CudaBatchNorm, OtherRanksAndAttributes) {
  PPC_REQUIRE_CUDA_BACKEND();
  // [N, C]: one element per block; [N, C, D, H, W]; default attributes.
  for (auto attributes : std::vector<std::map<std::string, AttributeValue>>{
           {}, {{"epsilon", 1e-3}, {"momentum", 0.99}}, {{"momentum", 0.0}}})
    for (const std::vector<int64_t> &shape :
         std::vector<std::vector<int64_t>>{{5, 3}, {2, 3, 2, 3, 2}}) {
      OpDesc op = batchNormOp(shape, attributes);
      expectBackendsAgree(batchNormCase(op, trainingCtx()), "training");
      expectBackendsAgree(batchNormCase(op, inferenceCtx()), "inference");
    }
  // A single sample of a single element per channel: count 1, the running
  // variance takes the biased variance.
  OpDesc one = batchNormOp({1, 4});
  expectBackendsAgree(batchNormCase(one, trainingCtx()), "count 1");
}

TEST(CudaBatchNorm, Partitions) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::vector<int64_t> shape = {4, 3, 4, 2};
  OpDesc op = batchNormOp(shape);
  Range allC{0, 3}, allH{0, 4};
  std::vector<Partition> parts;
  for (const auto &partitioning : batchNormPartitionings(shape))
    parts.insert(parts.end(), partitioning.begin(), partitioning.end());
  // Per-channel operands holding more channels than the input box.
  parts.push_back(batchNormPartition(shape, {1, 3}, {1, 2}, {1, 4}, allC));
  parts.push_back(batchNormPartition(shape, {0, 2}, {1, 3}, allH, Range{0, 3}));
  parts.push_back(
      batchNormPartition(shape, {2, 4}, {2, 3}, {0, 1}, Range{1, 3}));
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string name = "partition " + std::to_string(i);
    expectBackendsAgree(batchNormCase(op, trainingCtx(), parts[i]),
                        name + " training");
    expectBackendsAgree(batchNormCase(op, inferenceCtx(), parts[i]),
                        name + " inference");
  }
}

TEST(CudaBatchNorm, SomeGradients) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::vector<int64_t> shape = {3, 4, 3, 2};
  OpDesc op = batchNormOp(shape);
  Partition p = batchNormPartition(shape, {1, 3}, {1, 4}, {0, 2}, Range{0, 4});
  for (std::vector<bool> needs :
       std::vector<std::vector<bool>>{{true, false, false, false, false},
                                      {false, true, false, false, false},
                                      {false, false, true, false, false},
                                      {false, true, true, false, false}}) {
    AgreementCase c = batchNormCase(op, trainingCtx(), p);
    c.needsGrad = needs;
    expectBackendsAgree(c, "training, some gradients");
  }
  for (std::vector<bool> needs :
       std::vector<std::vector<bool>>{{true, false, false, false, false},
                                      {false, false, false, true, false},
                                      {false, false, false, false, true},
                                      {true, true, true, true, true}}) {
    AgreementCase c = batchNormCase(op, inferenceCtx(), p);
    c.needsGrad = needs;
    expectBackendsAgree(c, "inference, some gradients");
  }
}

TEST(CudaBatchNorm, ForwardOnlyAndBf16) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::vector<int64_t> shape = {4, 3, 4, 2};
  OpDesc op = batchNormOp(shape);
  AgreementCase c = batchNormCase(op, trainingCtx());
  c.backward = false;
  expectBackendsAgree(c, "forward only");
  for (KernelContext ctx : {trainingCtx(), inferenceCtx()}) {
    AgreementCase b = batchNormCase(
        op, ctx,
        batchNormPartition(shape, {1, 4}, {0, 2}, {1, 3}, Range{0, 3}));
    b.dtype = DType::BF16;
    b.atol = 2e-2;
    b.rtol = 2e-2;
    expectBackendsAgree(b, ctx.training ? "bf16 training" : "bf16 inference");
  }
}

TEST(CudaBatchNorm, ReportsTheCpuKernelsErrors) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::vector<int64_t> shape = {2, 4, 2, 2};
  OpDesc op = batchNormOp(shape);
  // Per-channel boxes that miss some of the input's channels.
  Partition p = batchNormPartition(shape, {0, 2}, {1, 4}, {0, 2}, Range{1, 3});
  expectSameError(op, trainingCtx(), p, false, "channels not held");
  expectSameError(op, inferenceCtx(), p, false, "channels not held");
  // Result box differs from the input box.
  Partition q = batchNormPartition(shape, {0, 2}, {0, 4}, {0, 2});
  q.outputs[0] = withRange(q.outputs[0], 0, 0, 1);
  expectSameError(op, trainingCtx(), q, false, "result box");
  OpDesc rank1 = makeOp("ppc.batch_norm", {{4}, {4}, {4}, {4}, {4}}, {{4}});
  expectSameError(rank1, inferenceCtx(), wholePartition(rank1), false,
                  "rank 1");
}

//===----------------------------------------------------------------------===//
// layer_norm
//===----------------------------------------------------------------------===//

OpDesc layerNormOp(const std::vector<int64_t> &shape, int64_t axis, bool bias,
                   std::map<std::string, AttributeValue> attributes) {
  int64_t a = axis < 0 ? axis + static_cast<int64_t>(shape.size()) : axis;
  std::vector<int64_t> normalized(shape.begin() + a, shape.end());
  std::vector<std::vector<int64_t>> operands = {shape, normalized};
  if (bias)
    operands.push_back(normalized);
  attributes["axis"] = axis;
  return makeOp("ppc.layer_norm", operands, {shape}, attributes);
}

TEST(CudaLayerNorm, WholeAndRowPartitions) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::vector<int64_t> shape = {3, 4, 5};
  for (bool bias : {false, true})
    for (int64_t axis : {-1, 1, 2, -2})
      for (auto attributes : std::vector<std::map<std::string, AttributeValue>>{
               {{"epsilon", 1e-5}},
               {},
               {{"epsilon", 0.1}},
               {{"rms", int64_t(1)}, {"epsilon", 1e-6}}}) {
        OpDesc op = layerNormOp(shape, axis, bias, attributes);
        std::string name = "layer_norm axis " + std::to_string(axis) +
                           (bias ? " with bias" : "") +
                           (attributes.count("rms") ? " rms" : "");
        AgreementCase c;
        c.op = op;
        expectBackendsAgree(c, name);
        int64_t a = axis < 0 ? axis + 3 : axis;
        for (Range n : splitRange(3, 2))
          for (Range m : splitRange(4, a == 1 ? 1 : 2)) {
            Partition p = wholePartition(op);
            Box box =
                withRange(withRange(wholeBox(shape), 0, n.first, n.second), 1,
                          m.first, m.second);
            p.inputs[0] = box;
            p.outputs[0] = box;
            c.partition = p;
            expectBackendsAgree(c, name + " partition");
          }
      }
}

TEST(CudaLayerNorm, SomeGradientsAndBf16) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::vector<int64_t> shape = {6, 2, 33};
  OpDesc op = layerNormOp(shape, -1, true, {{"epsilon", 1e-5}});
  Partition p = wholePartition(op);
  p.inputs[0] = p.outputs[0] = Box{{2, 1, 0}, {5, 2, 33}};
  for (std::vector<bool> needs : std::vector<std::vector<bool>>{
           {true, false, false}, {false, true, false}, {false, false, true}}) {
    AgreementCase c;
    c.op = op;
    c.partition = p;
    c.needsGrad = needs;
    expectBackendsAgree(c, "layer_norm some gradients");
  }
  AgreementCase b;
  b.op = op;
  b.partition = p;
  b.dtype = DType::BF16;
  b.atol = 2e-2;
  b.rtol = 2e-2;
  expectBackendsAgree(b, "layer_norm bf16");
  b.ctx = inferenceCtx();
  b.backward = false;
  expectBackendsAgree(b, "layer_norm bf16 inference");
}

// Weight gradients summed over 300 rows in chunks, 70 columns in three
// tiles of 32 (the last partly filled).
TEST(CudaLayerNorm, ManyRowsSumInChunksOfRowsAndTilesOfColumns) {
  PPC_REQUIRE_CUDA_BACKEND();
  OpDesc op = layerNormOp({2, 150, 70}, -1, true, {{"epsilon", 1e-5}});
  AgreementCase c;
  c.op = op;
  expectBackendsAgree(c, "layer_norm 300 rows");
  Partition p = wholePartition(op);
  p.inputs[0] = p.outputs[0] = Box{{1, 10, 0}, {2, 150, 70}};
  c.partition = p;
  expectBackendsAgree(c, "layer_norm 140 rows of a partition");
}

TEST(CudaLayerNorm, ReportsTheCpuKernelsErrors) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::vector<int64_t> shape = {3, 4, 5};
  OpDesc op = layerNormOp(shape, 1, true, {});
  Partition p = wholePartition(op);
  p.inputs[0] = p.outputs[0] = withRange(wholeBox(shape), 1, 0, 2);
  expectSameError(op, trainingCtx(), p, false, "normalized dims split");
  Partition q = wholePartition(op);
  q.inputs[1] = withRange(q.inputs[1], 0, 1, 4);
  expectSameError(op, trainingCtx(), q, false, "scale not whole");
  OpDesc bad = op;
  bad.attributes["axis"] = int64_t{3};
  expectSameError(bad, trainingCtx(), wholePartition(bad), false, "axis");
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax
//===----------------------------------------------------------------------===//

TEST(CudaSoftmax, EveryAxisWholeAndPartitioned) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::vector<int64_t> shape = {2, 4, 3};
  for (const char *kind : {"ppc.softmax", "ppc.log_softmax"})
    for (int64_t axis : {-1, 0, 1, 2, -3})
      for (float spread : {3.0f, 100.0f}) {
        OpDesc op = makeOp(kind, {shape}, {shape}, {{"axis", axis}});
        std::string name = std::string(kind) + " axis " + std::to_string(axis) +
                           " spread " + std::to_string(spread);
        AgreementCase c;
        c.op = op;
        c.inputs = {randomValues(24, 7, -spread, spread)};
        expectBackendsAgree(c, name);
        int64_t a = axis < 0 ? axis + 3 : axis;
        std::vector<int64_t> others;
        for (int64_t d = 0; d < 3; ++d)
          if (d != a)
            others.push_back(d);
        for (Range r : splitRange(shape[others[0]], 2))
          for (Range s : splitRange(shape[others[1]], 2)) {
            Box box = withRange(
                withRange(wholeBox(shape), others[0], r.first, r.second),
                others[1], s.first, s.second);
            c.partition = Partition{{box}, {box}};
            expectBackendsAgree(c, name + " partition");
          }
      }
}

TEST(CudaSoftmax, DefaultAxisLongRowsAndBf16) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (const char *kind : {"ppc.softmax", "ppc.log_softmax"}) {
    std::vector<int64_t> shape = {5, 3, 129};
    OpDesc op = makeOp(kind, {shape}, {shape});
    AgreementCase c;
    c.op = op;
    c.inputs = {randomValues(numElementsOf(shape), 8, -5, 5)};
    expectBackendsAgree(c, std::string(kind) + " default axis");
    c.partition =
        Partition{{Box{{1, 1, 0}, {4, 3, 129}}}, {Box{{1, 1, 0}, {4, 3, 129}}}};
    c.ctx = inferenceCtx();
    expectBackendsAgree(c, std::string(kind) + " inference partition");
    c.needsGrad = {false};
    expectBackendsAgree(c, std::string(kind) + " no gradient");
    AgreementCase b = c;
    b.needsGrad = {};
    b.dtype = DType::BF16;
    b.atol = 2e-2;
    b.rtol = 2e-2;
    expectBackendsAgree(b, std::string(kind) + " bf16");
  }
}

TEST(CudaSoftmax, ReportsTheCpuKernelsErrors) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (const char *kind : {"ppc.softmax", "ppc.log_softmax"}) {
    OpDesc op = makeOp(kind, {{2, 4}}, {{2, 4}}, {{"axis", int64_t{1}}});
    Box half{{0, 0}, {2, 2}};
    expectSameError(op, trainingCtx(), Partition{{half}, {half}}, false,
                    "split axis");
    OpDesc bad = makeOp(kind, {{2, 4}}, {{2, 4}}, {{"axis", int64_t{-3}}});
    expectSameError(bad, trainingCtx(), wholePartition(bad), false, "axis");
  }
}

} // namespace
} // namespace ppc::runtime::test
