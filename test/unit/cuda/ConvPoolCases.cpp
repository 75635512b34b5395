//===- ConvPoolCases.cpp - convolutions, pooling, resize on cuda ---------===//
//
// Oracle: the cpu backend's reference kernels (BackendAgreement.h), on the
// shapes and attributes of CpuKernelsATest's conv, conv_transpose, pool and
// resize cases: whole tensors and single partitions (samples, output
// channels across group boundaries, rows and cols with halos, split input
// channels whose partial sums take the bias only from channel 0), forward
// and backward, bf16 storage, and the errors the cpu kernels report for
// boxes they cannot compute.
//
//===----------------------------------------------------------------------===//

#include "ErrorAgreement.h"

#include "../KernelCases.h"

namespace ppc::runtime::test {
namespace {

//===----------------------------------------------------------------------===//
// conv2d
//===----------------------------------------------------------------------===//

/// KernelCases.h's convolutions, then the cuda kernels' own paths.
const std::vector<ConvCase> kCudaConvCases = [] {
  std::vector<ConvCase> cases = kConvCases;
  cases.insert(
      cases.end(),
      {
          // Stride 3 with dilation 2 in both dims, large pads, 3 samples.
          {{3, 2, 11, 10}, {5, 2, 3, 3}, {3, 2}, {2, 1, 2, 3}, {2, 2}, 1, true},
          // Strided 1x1 (not pointwise: im2col with stride).
          {{2, 3, 7, 6}, {4, 3, 1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, false},
          // Two groups of 16 output channels: grouped GEMMs (fewer per group
          // run
          // directly).
          {{1, 4, 5, 5}, {32, 2, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2, true},
          // Depthwise with multiplier 2, stride 1 x 2, dilation 2 x 1, pads.
          {{2, 4, 7, 6}, {8, 1, 3, 3}, {1, 2}, {2, 1, 2, 1}, {2, 1}, 4, true},
      });
  return cases;
}();

/// Every partition of CpuKernelsATest's partitionings of `c`, each checked
/// on its own.
std::vector<std::pair<std::string, Partition>>
convPartitions(const ConvCase &c) {
  std::vector<int64_t> r = c.result();
  Range allN{0, r[0]}, allF{0, r[1]}, allH{0, r[2]}, allW{0, r[3]},
      allC{0, c.weight[1]};
  std::vector<std::pair<std::string, Partition>> parts;
  for (Range n : splitRange(r[0], r[0]))
    parts.push_back({"samples " + std::to_string(n.first),
                     convPartition(c, n, allF, allH, allW, allC)});
  // Output channels cut across group boundaries when grouped.
  for (Range f : splitRange(r[1], 3))
    parts.push_back({"out channels " + std::to_string(f.first),
                     convPartition(c, allN, f, allH, allW, allC)});
  for (Range h : splitRange(r[2], 3))
    parts.push_back({"rows " + std::to_string(h.first),
                     convPartition(c, allN, allF, h, allW, allC)});
  for (Range w : splitRange(r[3], 2))
    parts.push_back({"cols " + std::to_string(w.first),
                     convPartition(c, allN, allF, allH, w, allC)});
  // Rows with halos x input channels (partial sums, groups == 1 only) x
  // output channels x samples.
  int64_t channelParts = c.groups == 1 ? 2 : 1;
  for (Range h : splitRange(r[2], 2))
    for (Range ch : splitRange(c.weight[1], channelParts))
      for (Range f : splitRange(r[1], 2))
        parts.push_back({"grid rows " + std::to_string(h.first) +
                             " in channels " + std::to_string(ch.first) +
                             " out channels " + std::to_string(f.first),
                         convPartition(c, {r[0] - 1, r[0]}, f, h, allW, ch)});
  // A corner tile: rows and cols both cut, halos on two sides.
  parts.push_back({"corner tile", convPartition(c, allN, allF, {r[2] / 2, r[2]},
                                                {r[3] / 2, r[3]}, allC)});
  return parts;
}

TEST(CudaConv2d, WholeTensorsAgree) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (size_t i = 0; i < kCudaConvCases.size(); ++i) {
    AgreementCase a = caseOf(convOp(kCudaConvCases[i]));
    expectBackendsAgree(a, "conv2d case " + std::to_string(i));
  }
}

TEST(CudaConv2d, PartitionsAgree) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (size_t i = 0; i < kCudaConvCases.size(); ++i)
    for (const auto &[what, p] : convPartitions(kCudaConvCases[i])) {
      AgreementCase a = caseOf(convOp(kCudaConvCases[i]));
      a.partition = p;
      expectBackendsAgree(a, "conv2d case " + std::to_string(i) + " " + what);
    }
}

TEST(CudaConv2d, OnlyTheWantedGradientsAreWritten) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (size_t i : {size_t(0), size_t(3)}) {
    const ConvCase &c = kCudaConvCases[i];
    for (size_t wanted = 0; wanted < 3; ++wanted) {
      AgreementCase a = caseOf(convOp(c));
      a.needsGrad = {wanted == 0, wanted == 1, wanted == 2};
      expectBackendsAgree(a, "conv2d case " + std::to_string(i) +
                                 " grad of operand " + std::to_string(wanted) +
                                 " alone");
    }
    // Split input channels from channel 2: no bias, no bias gradient.
    std::vector<int64_t> r = c.result();
    AgreementCase a = caseOf(convOp(c));
    a.partition =
        convPartition(c, {0, r[0]}, {0, r[1]}, {0, r[2]}, {0, r[3]}, {2, 4});
    expectBackendsAgree(a, "conv2d case " + std::to_string(i) +
                               " channels [2, 4)");
  }
}

TEST(CudaConv2d, Bf16StorageAgrees) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (size_t i : {size_t(0), size_t(2), size_t(4)}) {
    const ConvCase &c = kCudaConvCases[i];
    AgreementCase a = caseOf(convOp(c));
    a.dtype = DType::BF16;
    a.atol = 1e-2;
    a.rtol = 1e-2;
    expectBackendsAgree(a, "bf16 conv2d case " + std::to_string(i));
    std::vector<int64_t> r = c.result();
    a.partition = convPartition(c, {0, r[0]}, {0, r[1]}, {1, r[2]}, {0, r[3]},
                                {0, c.weight[1]});
    expectBackendsAgree(a, "bf16 conv2d case " + std::to_string(i) + " rows");
  }
}

TEST(CudaConv2d, InferenceAgrees) {
  PPC_REQUIRE_CUDA_BACKEND();
  AgreementCase a = caseOf(convOp(kCudaConvCases[0]));
  a.ctx.training = false;
  a.backward = false;
  expectBackendsAgree(a, "conv2d inference");
}

TEST(CudaConv2d, RejectsWhatTheCpuKernelRejects) {
  PPC_REQUIRE_CUDA_BACKEND();
  const ConvCase &c = kCudaConvCases[0];
  OpDesc op = convOp(c);
  Partition p = convPartition(c, {0, 2}, {0, 6}, {0, 6}, {0, 5}, {0, 2});
  p.inputs[1] = withRange(p.inputs[1], 1, 0, 4);
  expectSameErrorsMentioning(
      op, p, "weight box does not match the input channel range");
  // Rows without their halo.
  Partition noHalo = convPartition(c, {0, 2}, {0, 6}, {0, 3}, {0, 5}, {0, 4});
  noHalo.inputs[0] = withRange(noHalo.inputs[0], 2, 0, 3);
  expectSameErrorsMentioning(op, noHalo, "halo");
  // A weight box without the whole window.
  Partition cut = wholePartition(op);
  cut.inputs[1] = withRange(cut.inputs[1], 2, 0, 2);
  expectSameErrorsMentioning(op, cut, "whole kernel window");
  // Grouped: the input box misses a group's channels.
  const ConvCase &grouped = kCudaConvCases[2];
  OpDesc groupedOp = convOp(grouped);
  Partition missing = wholePartition(groupedOp);
  missing.inputs[0] = withRange(missing.inputs[0], 1, 0, 2);
  expectSameErrorsMentioning(groupedOp, missing, "groups' channels");
}

//===----------------------------------------------------------------------===//
// max_pool2d, avg_pool2d
//===----------------------------------------------------------------------===//

/// KernelCases.h's pools, then overlapping and gapped windows.
const std::vector<PoolCase> kCudaPoolCases = [] {
  std::vector<PoolCase> cases = kPoolCases;
  cases.insert(cases.end(),
               {
                   // Overlapping windows (stride 1), ceil mode without padding.
                   {{2, 2, 6, 5}, {3, 2}, {1, 1}, {0, 0, 0, 0}, true, false},
                   // Stride 3 with kernel 2 (gaps), ceil mode, padding counted.
                   {{1, 3, 8, 7}, {2, 2}, {3, 3}, {1, 1, 0, 1}, true, true},
               });
  return cases;
}();

std::vector<std::pair<std::string, Partition>>
poolPartitions(const PoolCase &c) {
  std::vector<int64_t> r = c.result();
  Range allN{0, r[0]}, allC{0, r[1]}, allH{0, r[2]}, allW{0, r[3]};
  std::vector<std::pair<std::string, Partition>> parts;
  for (Range n : splitRange(r[0], r[0]))
    parts.push_back({"samples " + std::to_string(n.first),
                     poolPartition(c, n, allC, allH, allW)});
  for (Range ch : splitRange(r[1], 2))
    parts.push_back({"channels " + std::to_string(ch.first),
                     poolPartition(c, allN, ch, allH, allW)});
  for (Range h : splitRange(r[2], 2))
    for (Range w : splitRange(r[3], 2))
      parts.push_back(
          {"tile " + std::to_string(h.first) + "," + std::to_string(w.first),
           poolPartition(c, allN, allC, h, w)});
  // An input box holding more samples and channels than the output's.
  Partition wider = poolPartition(c, allN, allC, {r[2] / 2, r[2]}, allW);
  wider.outputs[0] = withRange(wider.outputs[0], 1, r[1] - 1, r[1]);
  parts.push_back({"wider input", wider});
  return parts;
}

TEST(CudaPool2d, WholeTensorsAndPartitionsAgree) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (size_t i = 0; i < kCudaPoolCases.size(); ++i)
    for (const char *kind : {"ppc.max_pool2d", "ppc.avg_pool2d"}) {
      const PoolCase &c = kCudaPoolCases[i];
      OpDesc op = poolOp(kind, c);
      AgreementCase a = caseOf(op, {distinctValues(numElementsOf(c.input), 7)});
      expectBackendsAgree(a, std::string(kind) + " case " + std::to_string(i));
      // Random values: ties only by chance, the first maximum either way.
      AgreementCase random = caseOf(op);
      expectBackendsAgree(random, std::string(kind) + " case " +
                                      std::to_string(i) + " random");
      for (const auto &[what, p] : poolPartitions(c)) {
        a.partition = p;
        expectBackendsAgree(a, std::string(kind) + " case " +
                                   std::to_string(i) + " " + what);
      }
    }
}

TEST(CudaPool2d, MaxPoolRoutesTiesToTheFirstMaximum) {
  PPC_REQUIRE_CUDA_BACKEND();
  PoolCase c{{1, 1, 4, 4}, {2, 2}, {1, 1}, {1, 1, 1, 1}, false, false};
  OpDesc op = poolOp("ppc.max_pool2d", c);
  // Many ties: a few distinct values, and a window all padding in none.
  std::vector<float> values = {1, 2, 2, 0.5f, 2, 2, 1, 1,
                               0, 0, 0, 0,    3, 1, 3, 3};
  AgreementCase a = caseOf(op, {values});
  expectBackendsAgree(a, "max_pool2d ties");
  AgreementCase same = caseOf(op, {std::vector<float>(16, -1.0f)});
  expectBackendsAgree(same, "max_pool2d all equal");
}

TEST(CudaPool2d, Bf16StorageAgrees) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (const char *kind : {"ppc.max_pool2d", "ppc.avg_pool2d"}) {
    const PoolCase &c = kCudaPoolCases[3];
    AgreementCase a = caseOf(poolOp(kind, c));
    a.dtype = DType::BF16;
    a.atol = 1e-2;
    a.rtol = 1e-2;
    expectBackendsAgree(a, std::string("bf16 ") + kind);
  }
}

TEST(CudaPool2d, RejectsWhatTheCpuKernelRejects) {
  PPC_REQUIRE_CUDA_BACKEND();
  const PoolCase &c = kCudaPoolCases[1];
  for (const char *kind : {"ppc.max_pool2d", "ppc.avg_pool2d"}) {
    OpDesc op = poolOp(kind, c);
    std::vector<int64_t> r = c.result();
    Partition noHalo = poolPartition(c, {0, 2}, {0, 2}, {0, 2}, {0, r[3]});
    noHalo.inputs[0] = withRange(noHalo.inputs[0], 2, 0, 2);
    expectSameErrorsMentioning(op, noHalo, "halo");
    Partition fewer = wholePartition(op);
    fewer.inputs[0] = withRange(fewer.inputs[0], 1, 1, 2);
    expectSameErrorsMentioning(op, fewer, "samples/channels");
  }
}

//===----------------------------------------------------------------------===//
// global_avg_pool
//===----------------------------------------------------------------------===//

TEST(CudaGlobalAvgPool, WholeAndPartitionsAgree) {
  PPC_REQUIRE_CUDA_BACKEND();
  OpDesc op = makeOp("ppc.global_avg_pool", {{2, 3, 4, 5}}, {{2, 3, 1, 1}}, {});
  expectBackendsAgree(caseOf(op), "global_avg_pool whole");
  auto partition = [](Range n, Range c, Range h, Range w) {
    Box input{{n.first, c.first, h.first, w.first},
              {n.second, c.second, h.second, w.second}};
    Box output{{n.first, c.first, 0, 0}, {n.second, c.second, 1, 1}};
    return Partition{{input}, {output}};
  };
  for (Range n : splitRange(2, 2))
    for (Range c : splitRange(3, 2)) {
      AgreementCase a = caseOf(op);
      a.partition = partition(n, c, {0, 4}, {0, 5});
      expectBackendsAgree(a, "global_avg_pool samples/channels");
    }
  // A split spatial dim is a reduction: partial means of the global count.
  for (Range h : splitRange(4, 2))
    for (Range w : splitRange(5, 2)) {
      AgreementCase a = caseOf(op);
      a.partition = partition({0, 2}, {0, 3}, h, w);
      expectBackendsAgree(a, "global_avg_pool spatial part");
    }
  // An input box holding more channels than the output's.
  AgreementCase wider = caseOf(op);
  wider.partition = partition({0, 2}, {0, 3}, {0, 4}, {0, 5});
  wider.partition->outputs[0] = withRange(wider.partition->outputs[0], 1, 1, 2);
  expectBackendsAgree(wider, "global_avg_pool wider input");
  // bf16, and rank 3 ([N, C, L]).
  AgreementCase bf16 = caseOf(op);
  bf16.dtype = DType::BF16;
  bf16.atol = bf16.rtol = 1e-2;
  expectBackendsAgree(bf16, "bf16 global_avg_pool");
  OpDesc rank3 = makeOp("ppc.global_avg_pool", {{3, 2, 7}}, {{3, 2, 1}}, {});
  expectBackendsAgree(caseOf(rank3), "global_avg_pool rank 3");
}

//===----------------------------------------------------------------------===//
// conv_transpose2d
//===----------------------------------------------------------------------===//

TEST(CudaConvTranspose2d, WholeTensorsAndPartitionsAgree) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (size_t i = 0; i < kConvTransposeCases.size(); ++i) {
    const ConvTransposeCase &c = kConvTransposeCases[i];
    AgreementCase a = caseOf(convTransposeOp(c));
    std::string name = "conv_transpose2d case " + std::to_string(i);
    expectBackendsAgree(a, name);
    std::vector<int64_t> r = c.result();
    Range allN{0, r[0]}, allF{0, r[1]}, allC{0, c.input[1]};
    for (Range n : splitRange(r[0], r[0])) {
      a.partition = convTransposePartition(c, n, allF, allC);
      expectBackendsAgree(a, name + " samples " + std::to_string(n.first));
    }
    if (c.groups != 1)
      continue;
    // Input channels from 2: partial sums without the bias.
    for (Range ch : splitRange(c.input[1], 2))
      for (Range f : splitRange(r[1], 2)) {
        a.partition = convTransposePartition(c, allN, f, ch);
        expectBackendsAgree(a, name + " in channels " +
                                   std::to_string(ch.first) + " out channels " +
                                   std::to_string(f.first));
      }
  }
}

TEST(CudaConvTranspose2d, RejectsWhatTheCpuKernelRejects) {
  PPC_REQUIRE_CUDA_BACKEND();
  const ConvTransposeCase &c = kConvTransposeCases[0];
  OpDesc op = convTransposeOp(c);
  Partition p = convTransposePartition(c, {0, 2}, {0, 3}, {0, 2});
  p.inputs[1] = withRange(p.inputs[1], 0, 2, 4);
  expectSameErrorsMentioning(op, p,
                             "weight box does not hold the output channels");
}

//===----------------------------------------------------------------------===//
// resize
//===----------------------------------------------------------------------===//

TEST(CudaResize, WholeTensorsAndPartitionsAgree) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (size_t i = 0; i < kResizeCases.size(); ++i) {
    const ResizeCase &c = kResizeCases[i];
    AgreementCase a = caseOf(resizeOp(c));
    std::string name = "resize case " + std::to_string(i);
    expectBackendsAgree(a, name);
    Range allN{0, c.input[0]}, allC{0, c.input[1]};
    for (Range n : splitRange(c.input[0], c.input[0])) {
      a.partition = resizePartition(c, n, allC);
      expectBackendsAgree(a, name + " samples " + std::to_string(n.first));
    }
    for (Range ch : splitRange(c.input[1], 2)) {
      a.partition = resizePartition(c, allN, ch);
      expectBackendsAgree(a, name + " channels " + std::to_string(ch.first));
    }
  }
}

TEST(CudaResize, RejectsWhatTheCpuKernelRejects) {
  PPC_REQUIRE_CUDA_BACKEND();
  const ResizeCase &c = kResizeCases[0];
  OpDesc op = resizeOp(c);
  Partition rows = wholePartition(op);
  rows.inputs[0] = withRange(rows.inputs[0], 2, 0, 2);
  expectSameErrorsMentioning(op, rows, "whole planes");
  OpDesc bad = op;
  bad.attributes["nearest_mode"] = std::string("nearest");
  expectSameErrorsMentioning(bad, wholePartition(bad), "unknown nearest_mode");
}

} // namespace
} // namespace ppc::runtime::test
