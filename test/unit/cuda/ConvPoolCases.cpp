//===- ConvPoolCases.cpp - conv2d and pooling on the cuda backend ---------===//
//
// Oracle: the cpu backend's reference kernels (BackendAgreement.h), on the
// shapes and attributes of CpuKernelsATest's conv/pool cases: whole
// tensors and single partitions (samples, output channels across group
// boundaries, rows and cols with halos, split input channels whose partial
// sums take the bias only from channel 0), forward and backward, bf16
// storage, and the errors the cpu kernels report for boxes they cannot
// compute.
//
//===----------------------------------------------------------------------===//

#include "BackendAgreement.h"

#include "ppc/Runtime/CpuBackend.h"

namespace ppc::runtime::test {
namespace {

using Range = std::pair<int64_t, int64_t>;

/// A case of `op` with the harness's defaults (given operand values).
AgreementCase caseOf(OpDesc op, std::vector<std::vector<float>> inputs = {}) {
  AgreementCase a;
  a.op = std::move(op);
  a.inputs = std::move(inputs);
  return a;
}

//===----------------------------------------------------------------------===//
// conv2d
//===----------------------------------------------------------------------===//

struct ConvCase {
  std::vector<int64_t> input, weight;
  std::vector<int64_t> strides, pads, dilations;
  int64_t groups;
  bool bias;

  int64_t outSize(int i) const {
    int64_t window = (weight[2 + i] - 1) * dilations[i] + 1;
    return (input[2 + i] + pads[i] + pads[2 + i] - window) / strides[i] + 1;
  }
  std::vector<int64_t> result() const {
    return {input[0], weight[0], outSize(0), outSize(1)};
  }
};

OpDesc convOp(const ConvCase &c) {
  std::vector<std::vector<int64_t>> operands = {c.input, c.weight};
  if (c.bias)
    operands.push_back({c.weight[0]});
  return makeOp("ppc.conv2d", operands, {c.result()},
                {{"strides", c.strides},
                 {"pads", c.pads},
                 {"dilations", c.dilations},
                 {"groups", c.groups}});
}

const std::vector<ConvCase> kConvCases = {
    // 3x3, pad 1.
    {{2, 4, 6, 5}, {6, 4, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
    // Stride 2 x 1, asymmetric pads, dilation 2 x 1, no bias.
    {{2, 3, 9, 6}, {4, 3, 3, 2}, {2, 1}, {1, 0, 0, 1}, {2, 1}, 1, false},
    // Two groups.
    {{2, 4, 5, 5}, {6, 2, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2, true},
    // Pointwise (the im2col-free path).
    {{2, 4, 3, 5}, {3, 4, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true},
    // Depthwise, stride 2.
    {{1, 3, 5, 5}, {3, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 3, true},
    // Stride 3 with dilation 2 in both dims, large pads, 3 samples.
    {{3, 2, 11, 10}, {5, 2, 3, 3}, {3, 2}, {2, 1, 2, 3}, {2, 2}, 1, true},
    // Strided 1x1 (not pointwise: im2col with stride).
    {{2, 3, 7, 6}, {4, 3, 1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, false},
    // Two groups of 16 output channels: grouped GEMMs (fewer per group run
    // directly).
    {{1, 4, 5, 5}, {32, 2, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 2, true},
    // Depthwise with multiplier 2, stride 1 x 2, dilation 2 x 1, pads.
    {{2, 4, 7, 6}, {8, 1, 3, 3}, {1, 2}, {2, 1, 2, 1}, {2, 1}, 4, true},
};

/// The partition computing samples n, output channels f, rows oh, cols ow
/// over weight channels ch (a reduction range when groups == 1).
Partition convPartition(const ConvCase &c, Range n, Range f, Range oh, Range ow,
                        Range ch) {
  int64_t Cg = c.weight[1], Fg = c.weight[0] / c.groups;
  Range inChannels = ch;
  if (c.groups > 1)
    inChannels = {f.first / Fg * Cg, ((f.second - 1) / Fg + 1) * Cg};
  auto window = [&](Range out, int i) {
    return windowRange(out.first, out.second, c.strides[i], -c.pads[i],
                       (c.weight[2 + i] - 1) * c.dilations[i] + 1,
                       c.input[2 + i]);
  };
  Range rows = window(oh, 0), cols = window(ow, 1);
  Partition p;
  p.inputs.push_back({{n.first, inChannels.first, rows.first, cols.first},
                      {n.second, inChannels.second, rows.second, cols.second}});
  p.inputs.push_back({{f.first, ch.first, 0, 0},
                      {f.second, ch.second, c.weight[2], c.weight[3]}});
  if (c.bias)
    p.inputs.push_back({{f.first}, {f.second}});
  p.outputs.push_back({{n.first, f.first, oh.first, ow.first},
                       {n.second, f.second, oh.second, ow.second}});
  return p;
}

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
  for (size_t i = 0; i < kConvCases.size(); ++i) {
    AgreementCase a = caseOf(convOp(kConvCases[i]));
    expectBackendsAgree(a, "conv2d case " + std::to_string(i));
  }
}

TEST(CudaConv2d, PartitionsAgree) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (size_t i = 0; i < kConvCases.size(); ++i)
    for (const auto &[what, p] : convPartitions(kConvCases[i])) {
      AgreementCase a = caseOf(convOp(kConvCases[i]));
      a.partition = p;
      expectBackendsAgree(a, "conv2d case " + std::to_string(i) + " " + what);
    }
}

TEST(CudaConv2d, OnlyTheWantedGradientsAreWritten) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (size_t i : {size_t(0), size_t(3)}) {
    const ConvCase &c = kConvCases[i];
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
    const ConvCase &c = kConvCases[i];
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
  AgreementCase a = caseOf(convOp(kConvCases[0]));
  a.ctx.training = false;
  a.backward = false;
  expectBackendsAgree(a, "conv2d inference");
}

/// The forward (and backward) errors of a partition on both backends.
void expectSameErrors(const OpDesc &op, const Partition &p,
                      const std::string &mentions) {
  std::string unused;
  Backend &cuda = *cudaBackendUnderTest(unused);
  std::unique_ptr<Backend> cpu =
      createCpuBackend({1, /*referenceKernels=*/true});
  std::string errors[2][2];
  Backend *backends[2] = {cpu.get(), &cuda};
  for (int b = 0; b < 2; ++b) {
    Backend &backend = *backends[b];
    std::vector<std::shared_ptr<DeviceBuffer>> owned;
    auto views = [&](const std::vector<std::vector<int64_t>> &shapes,
                     const std::vector<Box> &boxes) {
      std::vector<DeviceView> out;
      for (size_t i = 0; i < shapes.size(); ++i) {
        int64_t n = 1;
        for (size_t d = 0; d < boxes[i].lo.size(); ++d)
          n *= std::max<int64_t>(0, boxes[i].hi[d] - boxes[i].lo[d]);
        owned.push_back(backend.allocate(DType::F32, std::max<int64_t>(n, 1)));
        out.push_back(
            {owned.back().get(), 0, shapes[i], boxes[i].lo, boxes[i].hi});
      }
      return out;
    };
    std::vector<DeviceView> in = views(op.operandShapes, p.inputs);
    std::vector<DeviceView> out = views(op.resultShapes, p.outputs);
    std::vector<DeviceView> outGrads = views(op.resultShapes, p.outputs);
    std::vector<DeviceView> inGrads = views(op.operandShapes, p.inputs);
    KernelContext ctx;
    errors[b][0] = backend.forward(op, ctx, in, out, {});
    errors[b][1] = backend.backward(op, ctx, in, out, outGrads, inGrads, {});
    backend.synchronize();
  }
  for (int k = 0; k < 2; ++k) {
    EXPECT_NE(errors[0][k].find(mentions), std::string::npos)
        << (k ? "backward: " : "forward: ") << errors[0][k];
    EXPECT_EQ(errors[1][k], errors[0][k]) << (k ? "backward" : "forward");
  }
}

TEST(CudaConv2d, RejectsWhatTheCpuKernelRejects) {
  PPC_REQUIRE_CUDA_BACKEND();
  const ConvCase &c = kConvCases[0];
  OpDesc op = convOp(c);
  Partition p = convPartition(c, {0, 2}, {0, 6}, {0, 6}, {0, 5}, {0, 2});
  p.inputs[1] = withRange(p.inputs[1], 1, 0, 4);
  expectSameErrors(op, p, "weight box does not match the input channel range");
  // Rows without their halo.
  Partition noHalo = convPartition(c, {0, 2}, {0, 6}, {0, 3}, {0, 5}, {0, 4});
  noHalo.inputs[0] = withRange(noHalo.inputs[0], 2, 0, 3);
  expectSameErrors(op, noHalo, "halo");
  // A weight box without the whole window.
  Partition cut = wholePartition(op);
  cut.inputs[1] = withRange(cut.inputs[1], 2, 0, 2);
  expectSameErrors(op, cut, "whole kernel window");
  // Grouped: the input box misses a group's channels.
  const ConvCase &grouped = kConvCases[2];
  OpDesc groupedOp = convOp(grouped);
  Partition missing = wholePartition(groupedOp);
  missing.inputs[0] = withRange(missing.inputs[0], 1, 0, 2);
  expectSameErrors(groupedOp, missing, "groups' channels");
}

//===----------------------------------------------------------------------===//
// max_pool2d, avg_pool2d
//===----------------------------------------------------------------------===//

struct PoolCase {
  std::vector<int64_t> input, kernel, strides, pads;
  bool ceilMode, countIncludePad;

  int64_t outSize(int i) const {
    int64_t span = input[2 + i] + pads[i] + pads[2 + i] - kernel[i];
    int64_t out =
        (ceilMode ? (span + strides[i] - 1) / strides[i] : span / strides[i]) +
        1;
    // As PyTorch: the last window must start inside the input or left pad.
    if (ceilMode && (out - 1) * strides[i] >= input[2 + i] + pads[i])
      --out;
    return out;
  }
  std::vector<int64_t> result() const {
    return {input[0], input[1], outSize(0), outSize(1)};
  }
};

OpDesc poolOp(const std::string &kind, const PoolCase &c) {
  return makeOp(kind, {c.input}, {c.result()},
                {{"kernel", c.kernel},
                 {"strides", c.strides},
                 {"pads", c.pads},
                 {"ceil_mode", int64_t{c.ceilMode}},
                 {"count_include_pad", int64_t{c.countIncludePad}}});
}

const std::vector<PoolCase> kPoolCases = {
    {{2, 3, 6, 6}, {2, 2}, {2, 2}, {0, 0, 0, 0}, false, false},
    {{2, 2, 7, 6}, {3, 3}, {2, 2}, {1, 1, 1, 1}, false, false},
    {{2, 2, 7, 6}, {3, 3}, {2, 2}, {1, 1, 1, 1}, false, true},
    {{1, 2, 6, 7}, {3, 2}, {2, 2}, {1, 0, 1, 1}, true, true},
    {{1, 2, 5, 5}, {2, 2}, {2, 2}, {0, 0, 0, 0}, true, false},
    // Overlapping windows (stride 1), ceil mode without padding.
    {{2, 2, 6, 5}, {3, 2}, {1, 1}, {0, 0, 0, 0}, true, false},
    // Stride 3 with kernel 2 (gaps), ceil mode, padding counted.
    {{1, 3, 8, 7}, {2, 2}, {3, 3}, {1, 1, 0, 1}, true, true},
};

/// Distinct values 0.05 apart in shuffled order: no ties.
std::vector<float> distinctValues(int64_t count, uint32_t seed) {
  std::vector<float> values(count);
  for (int64_t i = 0; i < count; ++i)
    values[i] = 0.05f * static_cast<float>(i - count / 2);
  std::shuffle(values.begin(), values.end(), std::mt19937(seed));
  return values;
}

Partition poolPartition(const PoolCase &c, Range n, Range ch, Range oh,
                        Range ow) {
  auto window = [&](Range out, int i) {
    return windowRange(out.first, out.second, c.strides[i], -c.pads[i],
                       c.kernel[i], c.input[2 + i]);
  };
  Range rows = window(oh, 0), cols = window(ow, 1);
  Box input{{n.first, ch.first, rows.first, cols.first},
            {n.second, ch.second, rows.second, cols.second}};
  Box output{{n.first, ch.first, oh.first, ow.first},
             {n.second, ch.second, oh.second, ow.second}};
  return {{input}, {output}};
}

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
  for (size_t i = 0; i < kPoolCases.size(); ++i)
    for (const char *kind : {"ppc.max_pool2d", "ppc.avg_pool2d"}) {
      const PoolCase &c = kPoolCases[i];
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
    const PoolCase &c = kPoolCases[3];
    AgreementCase a = caseOf(poolOp(kind, c));
    a.dtype = DType::BF16;
    a.atol = 1e-2;
    a.rtol = 1e-2;
    expectBackendsAgree(a, std::string("bf16 ") + kind);
  }
}

TEST(CudaPool2d, RejectsWhatTheCpuKernelRejects) {
  PPC_REQUIRE_CUDA_BACKEND();
  const PoolCase &c = kPoolCases[1];
  for (const char *kind : {"ppc.max_pool2d", "ppc.avg_pool2d"}) {
    OpDesc op = poolOp(kind, c);
    std::vector<int64_t> r = c.result();
    Partition noHalo = poolPartition(c, {0, 2}, {0, 2}, {0, 2}, {0, r[3]});
    noHalo.inputs[0] = withRange(noHalo.inputs[0], 2, 0, 2);
    expectSameErrors(op, noHalo, "halo");
    Partition fewer = wholePartition(op);
    fewer.inputs[0] = withRange(fewer.inputs[0], 1, 1, 2);
    expectSameErrors(op, fewer, "samples/channels");
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

} // namespace
} // namespace ppc::runtime::test
