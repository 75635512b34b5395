//===- BackendTest.cpp - storage types and the cpu backend ----------------===//
//
// Oracles: every 16-bit pattern round-trips through float; rounding to
// nearest even at the ties; the cpu backend's copies, kernels and optimizer
// on 16-bit buffers equal the float32 computation on the rounded values,
// rounded once at the end.
//
//===----------------------------------------------------------------------===//

#include "DnnlMatmul.h"
#include "StatusText.h"
#include "ppc/Runtime/CpuBackend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using ppc::test::statusText;

using namespace ppc::runtime;

namespace {

TEST(DType, EverySixteenBitPatternRoundTrips) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    const float half = halfToFloat(h), brain = bfloat16ToFloat(h);
    if (!std::isnan(half)) {
      EXPECT_EQ(floatToHalf(half), h) << std::hex << bits;
    }
    if (!std::isnan(brain)) {
      EXPECT_EQ(floatToBFloat16(brain), h) << std::hex << bits;
    }
  }
}

TEST(DType, ArrayConversionsMatchTheScalarOnes) {
  // The vector paths (AVX2 clones, F16C) against the scalar functions, on
  // every 16-bit pattern and on floats around every rounding boundary.
  std::vector<uint16_t> patterns(0x10000);
  for (uint32_t bits = 0; bits < 0x10000; ++bits)
    patterns[bits] = static_cast<uint16_t>(bits);
  std::vector<float> widened(patterns.size());
  std::vector<uint16_t> narrowed(patterns.size());
  for (DType dtype : {DType::BF16, DType::F16}) {
    auto widen = dtype == DType::BF16 ? bfloat16ToFloat : halfToFloat;
    auto narrow = dtype == DType::BF16 ? floatToBFloat16 : floatToHalf;
    toFloat(dtype, patterns.data(), 0x10000, widened.data());
    for (uint32_t bits = 0; bits < 0x10000; ++bits) {
      const float want = widen(patterns[bits]);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(widened[bits]));
      } else {
        EXPECT_EQ(widened[bits], want) << std::hex << bits;
      }
    }
    // Halfway points and their neighbours between consecutive values.
    std::vector<float> probes;
    for (uint32_t bits = 0; bits + 1 < 0x7c00; bits += 7) {
      const float a = widen(static_cast<uint16_t>(bits));
      const float b = widen(static_cast<uint16_t>(bits + 1));
      const float mid = a + (b - a) / 2;
      for (float x : {mid, std::nextafter(mid, a), std::nextafter(mid, b)})
        for (float sign : {1.0f, -1.0f})
          probes.push_back(sign * x);
    }
    narrowed.resize(probes.size());
    fromFloat(dtype, probes.data(), static_cast<int64_t>(probes.size()),
              narrowed.data());
    for (size_t i = 0; i < probes.size(); ++i)
      EXPECT_EQ(narrowed[i], narrow(probes[i])) << probes[i];
  }
}

TEST(DType, RoundsToNearestEven) {
  // bf16 keeps 7 fraction bits: 1 + 2^-8 lies halfway between 1 and
  // 1 + 2^-7 and goes to the even 1; 1 + 3 * 2^-8 goes up to 1 + 2^-6.
  EXPECT_EQ(floatToBFloat16(1.0f + 0x1p-8f), 0x3f80);
  EXPECT_EQ(floatToBFloat16(1.0f + 3 * 0x1p-8f), 0x3f82);
  EXPECT_EQ(floatToBFloat16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  // f16 keeps 10: the same at 2^-11.
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(floatToHalf(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff); // the largest half
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00); // rounds to infinity
  EXPECT_EQ(halfToFloat(0x0001), 0x1p-24f); // the smallest subnormal
  EXPECT_EQ(halfToFloat(0x8001), -0x1p-24f);
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(NAN))));
  EXPECT_TRUE(std::isnan(bfloat16ToFloat(floatToBFloat16(NAN))));
  EXPECT_EQ(bfloat16ToFloat(floatToBFloat16(-INFINITY)), -INFINITY);
}

TEST(DType, PlanTypesMapToStorageTypes) {
  DType d;
  ASSERT_TRUE(storageDType("f32", d));
  EXPECT_EQ(d, DType::F32);
  ASSERT_TRUE(storageDType("f64", d));
  EXPECT_EQ(d, DType::F32);
  ASSERT_TRUE(storageDType("bf16", d));
  EXPECT_EQ(d, DType::BF16);
  ASSERT_TRUE(storageDType("f16", d));
  EXPECT_EQ(d, DType::F16);
  for (const char *integer : {"i64", "i32", "i1", "ui8", "si16"}) {
    ASSERT_TRUE(storageDType(integer, d)) << integer;
    EXPECT_EQ(d, DType::I64) << integer;
  }
  for (const char *other : {"f8", "complex64", "i", "xi8", "i8x", ""})
    EXPECT_FALSE(storageDType(other, d)) << other;
}

std::vector<float> roundedTo(DType dtype, std::vector<float> values) {
  roundToDType(dtype, values.data(), static_cast<int64_t>(values.size()));
  return values;
}

std::vector<float> read(Backend &backend, const DeviceBuffer &buffer) {
  std::vector<float> values(buffer.size());
  backend.read(buffer, 0, buffer.size(), values.data());
  return values;
}

TEST(CpuBackend, BuffersAreZeroedTypedAndConvertOnTheWay) {
  std::unique_ptr<Backend> backend = createCpuBackend();
  for (DType dtype : {DType::F32, DType::BF16, DType::F16, DType::I64}) {
    std::shared_ptr<DeviceBuffer> b = backend->allocate(dtype, 4);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->dtype(), dtype);
    EXPECT_EQ(b->bytes(), 4 * dtypeBytes(dtype));
    EXPECT_EQ(read(*backend, *b), std::vector<float>(4, 0.0f));
    const std::vector<float> values = {1.0f / 3, -2.5f, 7.0f, 1000.25f};
    backend->write(*b, 0, values.data(), 4);
    std::vector<float> expected =
        dtype == DType::I64 ? std::vector<float>{0, -2, 7, 1000} // llround
                            : roundedTo(dtype, values);
    if (dtype == DType::I64)
      expected[1] = -3; // llround rounds halves away from zero
    EXPECT_EQ(read(*backend, *b), expected) << dtypeName(dtype);
    backend->fill(*b, 3.0);
    EXPECT_EQ(read(*backend, *b), std::vector<float>(4, 3.0f));
  }
  // Never empty, so a view's data is null only where the plan wants none.
  EXPECT_EQ(backend->allocate(DType::BF16, 0)->size(), 1);
}

TEST(CpuBackend, CopyBoxConvertsAndAccumulatesInTheDestinationType) {
  std::unique_ptr<Backend> backend = createCpuBackend();
  // A [4, 3] tensor: src holds rows 0..3, dst rows 1..3; copy rows 1..2.
  std::shared_ptr<DeviceBuffer> src = backend->allocate(DType::F32, 12);
  std::shared_ptr<DeviceBuffer> dst = backend->allocate(DType::BF16, 9);
  std::vector<float> values(12);
  for (int i = 0; i < 12; ++i)
    values[i] = 1.0f + i * 0x1p-9f; // below bf16's resolution at 1
  backend->write(*src, 0, values.data(), 12);
  DeviceView from{src.get(), 0, {4, 3}, {0, 0}, {4, 3}};
  DeviceView to{dst.get(), 0, {4, 3}, {1, 0}, {4, 3}};
  backend->copyBox(from, to, {1, 0}, {3, 3}, false);
  std::vector<float> expected(9, 0.0f);
  for (int i = 0; i < 6; ++i)
    expected[i] = bfloat16ToFloat(floatToBFloat16(values[3 + i]));
  EXPECT_EQ(read(*backend, *dst), expected);
  // Adding rounds the float sum of the two values once.
  backend->copyBox(from, to, {1, 0}, {3, 3}, true);
  for (int i = 0; i < 6; ++i)
    expected[i] = bfloat16ToFloat(floatToBFloat16(expected[i] + values[3 + i]));
  EXPECT_EQ(read(*backend, *dst), expected);
}

OpDesc matmulOp(int64_t m, int64_t k, int64_t n) {
  OpDesc op;
  op.kind = "ppc.matmul";
  op.operandShapes = {{m, k}, {k, n}};
  op.resultShapes = {{m, n}};
  return op;
}

DeviceView whole(std::shared_ptr<DeviceBuffer> &b, std::vector<int64_t> shape) {
  return {b.get(), 0, shape, std::vector<int64_t>(shape.size(), 0), shape};
}

TEST(CpuBackend, SixteenBitKernelsComputeInFloatAndRoundTheirResults) {
  std::unique_ptr<Backend> backend = createCpuBackend();
  const int64_t bf16Gemms = cpu::dnnlGemmBf16Calls();
  const int64_t m = 3, k = 64, n = 5;
  std::vector<float> a(m * k), b(k * n);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = std::sin(0.37f * i) * 1.7f;
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = std::cos(0.11f * i) * 0.9f;
  for (DType dtype : {DType::BF16, DType::F16}) {
    // The float32 result on the rounded inputs, rounded once.
    std::vector<float> ra = roundedTo(dtype, a), rb = roundedTo(dtype, b);
    std::vector<float> expected(m * n, 0.0f);
    kernelGemm(m, n, k, ra.data(), rb.data(), expected.data());
    roundToDType(dtype, expected.data(), m * n);

    auto A = backend->allocate(dtype, m * k),
         B = backend->allocate(dtype, k * n),
         C = backend->allocate(dtype, m * n);
    backend->write(*A, 0, a.data(), m * k);
    backend->write(*B, 0, b.data(), k * n);
    KernelContext ctx;
    ASSERT_EQ(statusText(backend->forward(matmulOp(m, k, n), ctx,
                                          {whole(A, {m, k}), whole(B, {k, n})},
                                          {whole(C, {m, n})}, {})),
              "");
    // bf16 matmuls run as oneDNN bf16 GEMMs, whose float sums go in
    // another order: the rounded result may differ by one bf16 step.
    std::vector<float> got = read(*backend, *C);
    for (int64_t i = 0; i < m * n; ++i)
      EXPECT_NEAR(got[i], expected[i],
                  dtype == DType::BF16 ? std::fabs(expected[i]) * 0x1p-7f : 0)
          << dtypeName(dtype) << " C[" << i << "]";

    // Backward: the gradient of A is added to what the buffer holds and
    // rounded once.
    auto dC = backend->allocate(dtype, m * n),
         dA = backend->allocate(dtype, m * k);
    backend->fill(*dC, 1.0);
    backend->fill(*dA, 0.5);
    DeviceView noGrad{nullptr, 0, {k, n}, {0, 0}, {0, 0}};
    ASSERT_EQ(statusText(backend->backward(
                  matmulOp(m, k, n), ctx, {whole(A, {m, k}), whole(B, {k, n})},
                  {whole(C, {m, n})}, {whole(dC, {m, n})},
                  {whole(dA, {m, k}), noGrad}, {})),
              "");
    std::vector<float> grad = read(*backend, *dA);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < k; ++j) {
        float sum = 0;
        for (int64_t c = 0; c < n; ++c)
          sum += rb[j * n + c];
        const float want = roundedTo(dtype, {0.5f + sum})[0];
        EXPECT_NEAR(grad[i * k + j], want,
                    std::fabs(want) * (dtype == DType::BF16 ? 0x1p-7f : 1e-6f))
            << dtypeName(dtype) << " dA[" << i << ", " << j << "]";
      }
  }
  // The bf16 products went to oneDNN's bf16 GEMM where the CPU has the
  // instructions (elsewhere oneDNN may offer only its reference code, and
  // the operands are widened for the float32 GEMM).
  if (__builtin_cpu_supports("avx512bf16")) {
    EXPECT_EQ(cpu::dnnlGemmBf16Calls() - bf16Gemms, 2); // C, dA
  }
}

TEST(CpuBackend, UpdatesAFloatMasterWithUnscaledSixteenBitGradients) {
  std::unique_ptr<Backend> backend = createCpuBackend();
  ppc::planfile::Optimizer sgd;
  sgd.set_kind(ppc::planfile::Optimizer::SGD);
  sgd.set_learning_rate(0.5);
  auto master = backend->allocate(DType::F32, 6);
  auto grad = backend->allocate(DType::F16, 4);
  std::vector<float> w = {1, 2, 3, 4, 5, 6}, g = {1024, -2048, 4096, 512};
  backend->write(*master, 0, w.data(), 6);
  backend->write(*grad, 0, g.data(), 4);
  DeviceOptimizerState state;
  // The model's bf16 copy, stale outside the shard.
  auto copy = backend->allocate(DType::BF16, 6);
  backend->fill(*copy, 9.0);
  // Rows 1..2 of a [3, 2] weight (a ZeRO shard at offset 2), loss scale 1024.
  ASSERT_TRUE(backend->update(sgd, *master, 2, *grad, 4, state, 1.0 / 1024,
                              copy.get()));
  EXPECT_EQ(state.steps, 1);
  EXPECT_EQ(read(*backend, *master),
            (std::vector<float>{1, 2, 3 - 0.5f, 4 + 1, 5 - 2, 6 - 0.25f}));
  // Every value here is a bf16 value: the copy holds them exactly.
  EXPECT_EQ(read(*backend, *copy),
            (std::vector<float>{9, 9, 2.5f, 5, 3, 5.75f}));
}

TEST(CpuBackend, KeepsAdamStateOnTheDeviceAsTheHostStepDoes) {
  std::unique_ptr<Backend> backend = createCpuBackend();
  ppc::planfile::Optimizer adam;
  adam.set_kind(ppc::planfile::Optimizer::ADAM);
  adam.set_learning_rate(0.01);
  std::vector<float> w = {0.5f, -1.0f, 2.0f}, g = {0.1f, -0.3f, 0.05f};
  auto weight = backend->allocate(DType::F32, 3);
  auto grad = backend->allocate(DType::F32, 3);
  backend->write(*weight, 0, w.data(), 3);
  backend->write(*grad, 0, g.data(), 3);
  DeviceOptimizerState device;
  OptimizerState host;
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(backend->update(adam, *weight, 0, *grad, 3, device, 1.0));
    applyOptimizer(adam, w.data(), g.data(), 3, host);
  }
  EXPECT_EQ(read(*backend, *weight), w);
  ASSERT_EQ(device.slots.size(), 2u);
  EXPECT_EQ(device.steps, 3);
  EXPECT_EQ(device.elements, 3);
  for (int s = 0; s < 2; ++s) {
    std::vector<float> slot(3);
    backend->read(*device.slots[s], 0, 3, slot.data());
    EXPECT_EQ(slot, host.slots[s]);
  }
}

TEST(CpuBackend, FindsNonfiniteValuesAnywhere) {
  std::unique_ptr<Backend> backend = createCpuBackend();
  for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    auto b = backend->allocate(dtype, 10000);
    backend->fill(*b, 60000.0); // finite in every type
    EXPECT_FALSE(backend->anyNonfinite(*b, 10000)) << dtypeName(dtype);
    for (float bad : {INFINITY, -INFINITY, NAN}) {
      backend->write(*b, 9000, &bad, 1);
      EXPECT_TRUE(backend->anyNonfinite(*b, 10000)) << dtypeName(dtype);
      EXPECT_FALSE(backend->anyNonfinite(*b, 9000)) << dtypeName(dtype);
      float fine = 1.0f;
      backend->write(*b, 9000, &fine, 1);
    }
  }
}

TEST(Kernels, BatchNormUpdatesItsRunningStatisticsOnlyInTraining) {
  OpDesc bn;
  bn.kind = "ppc.batch_norm";
  EXPECT_EQ(updatedOperands(bn, true), (std::vector<int>{3, 4}));
  EXPECT_TRUE(updatedOperands(bn, false).empty());
  EXPECT_TRUE(updatedOperands(matmulOp(1, 1, 1), true).empty());
}

} // namespace
