//===- BackendCases.cpp - the cuda backend's buffers, copies, optimizer ---===//
//
// Oracles: values written come back as the storage type rounds them (the
// cpu backend's conversions); copyBox moves and sums boxes between
// differently placed buffers and types as the cpu backend does; the
// optimizer step equals the cpu backend's on the same state.
//
//===----------------------------------------------------------------------===//

#include "../StatusText.h"
#include "BackendAgreement.h"

#include "ppc/Runtime/CpuBackend.h"

#include <limits>

using ppc::test::statusText;

namespace ppc::runtime::test {
namespace {

TEST(CudaBackend, WritesAndReadsEveryStorageType) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::string unused;
  Backend &cuda = *cudaBackendUnderTest(unused);
  std::unique_ptr<Backend> cpu = createCpuBackend();
  std::vector<float> values = randomValues(3000001, 5, -70000, 70000);
  values[0] = 2.5f; // i64 rounding away from zero
  values[1] = -2.5f;
  for (DType dtype : {DType::F32, DType::BF16, DType::F16, DType::I64}) {
    auto a = cuda.allocate(dtype, values.size());
    auto b = cpu->allocate(dtype, values.size());
    cuda.write(*a, 0, values.data(), values.size());
    cpu->write(*b, 0, values.data(), values.size());
    std::vector<float> got(values.size()), want(values.size());
    cuda.read(*a, 0, values.size(), got.data());
    cpu->read(*b, 0, values.size(), want.data());
    EXPECT_EQ(got, want) << dtypeName(dtype);
    // fill, then a read from an offset
    cuda.fill(*a, -3.75);
    cpu->fill(*b, -3.75);
    cuda.read(*a, 17, 100, got.data());
    cpu->read(*b, 17, 100, want.data());
    EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + 100),
              std::vector<float>(want.begin(), want.begin() + 100))
        << dtypeName(dtype);
  }
}

TEST(CudaBackend, AllocatesZeroedBuffers) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::string unused;
  Backend &cuda = *cudaBackendUnderTest(unused);
  // Dirty a block, free it, take one of the same size class again.
  std::vector<float> ones(4096, 1.0f), got(4096, -1.0f);
  {
    auto a = cuda.allocate(DType::F32, 4096);
    cuda.write(*a, 0, ones.data(), 4096);
  }
  auto b = cuda.allocate(DType::F32, 4000);
  cuda.read(*b, 0, 4000, got.data());
  EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + 4000),
            std::vector<float>(4000, 0.0f));
}

TEST(CudaBackend, CopiesAndSumsBoxesAcrossTypes) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::string unused;
  Backend &cuda = *cudaBackendUnderTest(unused);
  std::unique_ptr<Backend> cpu = createCpuBackend();
  const std::vector<int64_t> shape = {6, 5, 7};
  const Box srcBox{{1, 0, 2}, {6, 5, 7}}, dstBox{{0, 1, 0}, {4, 5, 6}};
  const std::vector<int64_t> lo = {1, 1, 2}, hi = {4, 5, 6};
  std::vector<float> srcValues = randomValues(5 * 5 * 5, 9, -4, 4);
  std::vector<float> dstValues = randomValues(4 * 4 * 6, 10, -4, 4);
  for (DType from : {DType::F32, DType::BF16, DType::F16, DType::I64})
    for (DType to : {DType::F32, DType::BF16, DType::F16, DType::I64})
      for (bool accumulate : {false, true}) {
        std::vector<float> results[2];
        Backend *backends[2] = {&cuda, cpu.get()};
        for (int k = 0; k < 2; ++k) {
          Backend &b = *backends[k];
          auto s = b.allocate(from, srcValues.size());
          auto d = b.allocate(to, dstValues.size());
          b.write(*s, 0, srcValues.data(), srcValues.size());
          b.write(*d, 0, dstValues.data(), dstValues.size());
          b.copyBox({s.get(), 0, shape, srcBox.lo, srcBox.hi},
                    {d.get(), 0, shape, dstBox.lo, dstBox.hi}, lo, hi,
                    accumulate);
          results[k].resize(dstValues.size());
          b.read(*d, 0, dstValues.size(), results[k].data());
        }
        EXPECT_EQ(results[0], results[1])
            << dtypeName(from) << " -> " << dtypeName(to)
            << (accumulate ? " (sum)" : "");
      }
}

TEST(CudaBackend, OptimizerStepsMatchTheCpuBackend) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::string unused;
  Backend &cuda = *cudaBackendUnderTest(unused);
  std::unique_ptr<Backend> cpu = createCpuBackend();
  const int64_t n = 5000;
  std::vector<float> weights = randomValues(n, 11), grads = randomValues(n, 12);
  for (auto kind :
       {ppc::planfile::Optimizer::SGD, ppc::planfile::Optimizer::MOMENTUM,
        ppc::planfile::Optimizer::ADAM})
    for (DType gradType : {DType::F32, DType::BF16}) {
      ppc::planfile::Optimizer optimizer;
      optimizer.set_kind(kind);
      optimizer.set_learning_rate(0.01);
      optimizer.set_weight_decay(0.001);
      optimizer.set_momentum(0.9);
      std::vector<float> results[2], roundedResults[2];
      Backend *backends[2] = {&cuda, cpu.get()};
      for (int k = 0; k < 2; ++k) {
        Backend &b = *backends[k];
        auto w = b.allocate(DType::F32, n + 3);
        auto g = b.allocate(gradType, n);
        auto rounded = b.allocate(DType::BF16, n + 3);
        b.write(*w, 3, weights.data(), n);
        b.write(*g, 0, grads.data(), n);
        DeviceOptimizerState state;
        for (int step = 0; step < 3; ++step)
          ASSERT_TRUE(b.update(optimizer, *w, 3, *g, n, state, 0.5,
                               step == 2 ? rounded.get() : nullptr));
        results[k].resize(n);
        roundedResults[k].resize(n);
        b.read(*w, 3, n, results[k].data());
        b.read(*rounded, 3, n, roundedResults[k].data());
      }
      for (int64_t i = 0; i < n; ++i)
        ASSERT_NEAR(results[0][i], results[1][i],
                    1e-6 * (1 + std::fabs(results[1][i])))
            << "optimizer " << kind << ", element " << i;
      int64_t roundingDiffers = 0;
      for (int64_t i = 0; i < n; ++i)
        roundingDiffers += roundedResults[0][i] != roundedResults[1][i];
      // Only a weight within float round-off of a bf16 tie may round apart.
      EXPECT_LE(roundingDiffers, 2) << "optimizer " << kind;
    }
}

TEST(CudaBackend, UpdatesManyWeightsAsOneStepEach) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::string unused;
  Backend &cuda = *cudaBackendUnderTest(unused);
  std::unique_ptr<Backend> cpu = createCpuBackend();
  // Sizes around the multi-tensor step's chunks (4096), grads of two types,
  // some with a bf16 copy to round into.
  const std::vector<int64_t> sizes = {1, 4095, 4096, 4097, 9000, 37};
  ppc::planfile::Optimizer optimizer;
  optimizer.set_kind(ppc::planfile::Optimizer::ADAM);
  optimizer.set_learning_rate(0.01);
  optimizer.set_weight_decay(0.001);
  std::vector<std::vector<float>> results[2], rounded[2];
  Backend *backends[2] = {&cuda, cpu.get()};
  for (int k = 0; k < 2; ++k) {
    Backend &b = *backends[k];
    std::vector<std::shared_ptr<DeviceBuffer>> weights, copies;
    std::vector<DeviceOptimizerState> states(sizes.size());
    for (size_t t = 0; t < sizes.size(); ++t) {
      std::vector<float> w = randomValues(sizes[t], 20 + t);
      weights.push_back(b.allocate(DType::F32, sizes[t]));
      b.write(*weights.back(), 0, w.data(), sizes[t]);
      copies.push_back(t % 2 ? b.allocate(DType::BF16, sizes[t]) : nullptr);
    }
    for (int step = 0; step < 3; ++step) {
      // New gradient buffers every step, as a plan allocates them.
      std::vector<std::shared_ptr<DeviceBuffer>> grads;
      std::vector<Backend::UpdateRequest> requests;
      for (size_t t = 0; t < sizes.size(); ++t) {
        std::vector<float> g = randomValues(sizes[t], 40 + 7 * step + t);
        grads.push_back(b.allocate(t % 3 ? DType::BF16 : DType::F32, sizes[t]));
        b.write(*grads.back(), 0, g.data(), sizes[t]);
        requests.push_back({weights[t].get(), 0, grads.back().get(), sizes[t],
                            &states[t], copies[t].get()});
      }
      size_t failed = 0;
      ASSERT_TRUE(b.updateAll(optimizer, requests, 0.5, failed));
    }
    for (size_t t = 0; t < sizes.size(); ++t) {
      results[k].emplace_back(sizes[t]);
      b.read(*weights[t], 0, sizes[t], results[k].back().data());
      rounded[k].emplace_back(copies[t] ? sizes[t] : 0);
      if (copies[t])
        b.read(*copies[t], 0, sizes[t], rounded[k].back().data());
      EXPECT_EQ(states[t].steps, 3);
    }
  }
  for (size_t t = 0; t < sizes.size(); ++t) {
    for (int64_t i = 0; i < sizes[t]; ++i)
      ASSERT_NEAR(results[0][t][i], results[1][t][i],
                  1e-6 * (1 + std::fabs(results[1][t][i])))
          << "weight " << t << ", element " << i;
    int64_t roundingDiffers = 0;
    for (size_t i = 0; i < rounded[0][t].size(); ++i)
      roundingDiffers += rounded[0][t][i] != rounded[1][t][i];
    EXPECT_LE(roundingDiffers, 2) << "weight " << t;
  }
}

TEST(CudaBackend, FindsNonfiniteValues) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::string unused;
  Backend &cuda = *cudaBackendUnderTest(unused);
  for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    std::vector<float> values = randomValues(10000, 13);
    auto b = cuda.allocate(dtype, values.size());
    cuda.write(*b, 0, values.data(), values.size());
    EXPECT_FALSE(cuda.anyNonfinite(*b, values.size())) << dtypeName(dtype);
    values[9999] = std::numeric_limits<float>::infinity();
    cuda.write(*b, 0, values.data(), values.size());
    EXPECT_TRUE(cuda.anyNonfinite(*b, values.size())) << dtypeName(dtype);
    EXPECT_FALSE(cuda.anyNonfinite(*b, 9999)) << dtypeName(dtype);
    values[5] = std::nanf("");
    cuda.write(*b, 0, values.data(), values.size());
    EXPECT_TRUE(cuda.anyNonfinite(*b, 9999)) << dtypeName(dtype);
  }
}

TEST(CudaBackend, NamesOpsWithoutAKernel) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::string unused;
  Backend &cuda = *cudaBackendUnderTest(unused);
  OpDesc op = makeOp("ppc.no_such_op", {{2}}, {{2}});
  EXPECT_EQ(statusText(cuda.forward(op, {}, {}, {}, {})),
            "ppc.no_such_op: the cuda backend has no kernel for it");
}

} // namespace
} // namespace ppc::runtime::test
