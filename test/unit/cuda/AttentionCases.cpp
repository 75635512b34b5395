//===- AttentionCases.cpp - ppc.attention on the cuda backend -------------===//
//
// Oracle: the cpu backend's kernel (BackendAgreement.h), on the shapes and
// attributes of AttentionKernelTest: no and two leading dims, causal, the
// dropout mask at the global index of the probabilities (training, and
// inference where it is off), partitions of the leading dims and of the
// query rows (partial dK and dV), sequences longer than the cpu kernel's
// row tile, only some gradients wanted, bf16 storage, layout "bshd" (rows
// H * D apart, on the GEMM path and the tiled kernels, partitioned by
// samples, heads and rows), key blocks (the staged log-sum-exp merge:
// halves of the keys, rows whole and split, causal, dropout, bf16), a
// ring's stages on a key block (merge, and the backward's dO . O), and the
// errors the cpu kernel reports.
//
//===----------------------------------------------------------------------===//

#include "ErrorAgreement.h"

#include "../KernelCases.h"

namespace ppc::runtime::test {
namespace {

AgreementCase agreement(const AttentionCase &c, int64_t step,
                        bool training = true) {
  AgreementCase a = caseOf(attentionOp(c));
  a.ctx.step = step;
  a.ctx.training = training;
  a.atol = 2e-5;
  a.rtol = 2e-4;
  return a;
}

std::string describe(const AttentionCase &c) {
  std::string s = "attention lead " + std::to_string(c.lead.size()) + " S " +
                  std::to_string(c.S) + " T " + std::to_string(c.T);
  if (c.causal)
    s += " causal";
  if (c.ratio > 0)
    s += " dropout " + std::to_string(c.ratio);
  return s;
}

TEST(CudaAttention, WholeTensorsAgree) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (const auto &lead : kAttentionLeads)
    for (auto [S, T] : {Range{5, 7}, Range{6, 6}, Range{8, 3}})
      for (bool causal : {false, true}) {
        AttentionCase c{lead,           S,    T,     causal ? 4 : 8,
                        causal ? 6 : 5, 0.35, causal};
        expectBackendsAgree(agreement(c, 0), describe(c));
      }
}

TEST(CudaAttention, DropoutAgreesInTrainingAndIsOffInInference) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (const auto &lead : kAttentionLeads)
    for (bool causal : {false, true}) {
      AttentionCase c{lead,          6,          9, 4, 3, 0.4, causal,
                      /*ratio=*/0.1, /*seed=*/42};
      expectBackendsAgree(agreement(c, 3), describe(c) + " step 3");
      expectBackendsAgree(agreement(c, 4), describe(c) + " step 4");
      AttentionCase heavy = c;
      heavy.ratio = 0.6;
      heavy.seed = 7;
      expectBackendsAgree(agreement(heavy, 1), describe(heavy));
      expectBackendsAgree(agreement(c, 3, /*training=*/false),
                          describe(c) + " inference");
    }
}

TEST(CudaAttention, PartitionsAgree) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (bool causal : {false, true})
    for (double ratio : {0.0, 0.1}) {
      // Leading dims [2, 3] split 2 x 3 (also a range of 2 along the inner
      // one), S split in 3.
      AttentionCase c{{2, 3}, 7, 6, 4, 3, 0.5, causal, ratio, 13};
      for (Range b0 : splitRange(2, 2))
        for (Range b1 : {Range{0, 1}, Range{1, 3}, Range{2, 3}})
          for (Range s : splitRange(c.S, 3)) {
            AgreementCase a = agreement(c, 2);
            a.partition = attentionPartition(c, {b0, b1}, s);
            expectBackendsAgree(a, describe(c) + " batch " +
                                       std::to_string(b0.first) + "," +
                                       std::to_string(b1.first) + " rows " +
                                       std::to_string(s.first));
          }
      // Outer leading dim whole, inner cut: the host loops the outer one.
      AgreementCase inner = agreement(c, 2);
      inner.partition = attentionPartition(c, {{0, 2}, {1, 3}}, {2, 6});
      expectBackendsAgree(inner, describe(c) + " outer whole, inner cut");
      // A query box holding more rows than the result's.
      AgreementCase wider = agreement(c, 2);
      wider.partition = attentionPartition(c, {{0, 2}, {0, 3}}, {0, 7});
      wider.partition->outputs[0] =
          withRange(wider.partition->outputs[0], 2, 3, 5);
      wider.needsGrad = {false, true, true};
      expectBackendsAgree(wider, describe(c) + " wider query, no dQ");
      // No leading dims: S split in 4.
      AttentionCase flat{{}, 7, 6, 4, 3, 0.5, causal, ratio, 13};
      for (Range s : splitRange(flat.S, 4)) {
        AgreementCase a = agreement(flat, 2);
        a.partition = attentionPartition(flat, {}, s);
        expectBackendsAgree(a, describe(flat) + " rows " +
                                   std::to_string(s.first));
      }
    }
}

TEST(CudaAttention, LongSequencesAgree) {
  PPC_REQUIRE_CUDA_BACKEND();
  // Longer than the cpu kernel's row tile of 128; the partitions start
  // off its multiples.
  for (bool causal : {false, true}) {
    AttentionCase c{{2}, 300, 260, 8, 4, 0.3, causal, 0.1, 17};
    AgreementCase whole = agreement(c, 6);
    whole.atol = 1e-4;
    whole.rtol = 1e-3;
    expectBackendsAgree(whole, describe(c));
    for (Range s : splitRange(c.S, 3)) {
      AgreementCase a = whole;
      a.partition = attentionPartition(c, {{1, 2}}, s);
      expectBackendsAgree(a, describe(c) + " rows " + std::to_string(s.first));
    }
  }
}

TEST(CudaAttention, KeyBlocksAgree) {
  PPC_REQUIRE_CUDA_BACKEND();
  // One key block's stages (AttentionOp's log-sum-exp merge; one partition,
  // so its statistics are its own): the halves of the keys, with the query
  // rows whole or split, causal (rows [0, 4) see nothing of keys [5, 10):
  // both backends leave them NaN), with dropout and bf16 storage.
  for (const auto &lead : kAttentionLeads)
    for (bool causal : {false, true})
      for (double ratio : {0.0, 0.2}) {
        AttentionCase c{lead, 9, 10, 4, 3, 0.6, causal, ratio, 29};
        const std::vector<Range> batch = wholeLeads(lead);
        for (Range keys : splitRange(c.T, 2))
          for (Range rows : {Range{0, c.S}, Range{0, 4}, Range{4, 9}}) {
            AgreementCase a = agreement(c, 5);
            Partition part = attentionPartition(c, batch, rows);
            for (int i : {1, 2})
              part.inputs[i] = withRange(part.inputs[i], lead.size(),
                                         keys.first, keys.second);
            a.partition = part; // staged: numStages, scratchShapes
            const std::string what =
                describe(c) + " keys " + std::to_string(keys.first) +
                " rows " + std::to_string(rows.first) + ".." +
                std::to_string(rows.second);
            expectBackendsAgree(a, what);
            a.dtype = DType::BF16;
            a.atol = 2e-2;
            a.rtol = 2e-2;
            expectBackendsAgree(a, what + " bf16");
          }
      }
}

/// A ring's statistics before one more key block `keys` of the partition
/// of leading ranges `batch` and query rows `rows` (AttentionOp's
/// RingSpec): running maxima in [-1, 2) (above and below the block's), sums
/// in [1, 3), and every fourth row that sees a key of the block merging its
/// first (maximum -inf, sum 0).
void presetRingState(AgreementCase &a, const AttentionCase &c,
                     const std::vector<Range> &batch, Range keys, Range rows) {
  const int64_t count = rows.second - rows.first;
  int64_t n = count;
  for (Range b : batch)
    n *= b.second - b.first;
  std::vector<float> max = randomValues(n, 41), sum = randomValues(n, 42);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = rows.first + i % count;
    const bool sees = !c.causal || row >= keys.first;
    max[i] = 1.5f * max[i] + 0.5f;
    sum[i] += 2.0f;
    if (sees && i % 4 == 3) {
      max[i] = -INFINITY;
      sum[i] = 0.0f;
    }
  }
  a.initialScratch = {max, sum, std::vector<float>(n, 0.0f)};
}

/// The error of a ring's backward stage 2 on `backend` without the
/// forward's result (no result views, or one without a buffer) for the
/// key-block partition `p`, "" if none.
std::string ringBackwardErrorWithoutResult(Backend &backend, const OpDesc &op,
                                           const Partition &p,
                                           bool resultView) {
  std::vector<std::shared_ptr<DeviceBuffer>> owned;
  auto view = [&](const std::vector<int64_t> &shape, const Box &box) {
    int64_t n = 1;
    for (size_t d = 0; d < box.lo.size(); ++d)
      n *= box.hi[d] - box.lo[d];
    std::vector<float> values = randomValues(n, 5);
    owned.push_back(backend.allocate(DType::F32, n));
    backend.write(*owned.back(), 0, values.data(), n);
    return DeviceView{owned.back().get(), 0, shape, box.lo, box.hi};
  };
  std::vector<DeviceView> inputs, grads, outputs, outputGrads, scratch;
  for (size_t i = 0; i < op.operandShapes.size(); ++i) {
    inputs.push_back(view(op.operandShapes[i], p.inputs[i]));
    grads.push_back(view(op.operandShapes[i], p.inputs[i]));
  }
  outputGrads.push_back(view(op.resultShapes[0], p.outputs[0]));
  if (resultView)
    outputs.push_back(
        {nullptr, 0, op.resultShapes[0], p.outputs[0].lo, p.outputs[0].hi});
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < p.inputs[0].lo.size(); ++d)
    rows *= p.inputs[0].hi[d] - p.inputs[0].lo[d];
  for (int i = 0; i < 4; ++i)
    scratch.push_back(view({rows}, wholeBox({rows})));
  KernelContext ctx{0, true, 2};
  return withDeferred(
      backend, statusText(backend.backward(op, ctx, inputs, outputs,
                                           outputGrads, grads, scratch)));
}

TEST(CudaAttention, RingStagesAgree) {
  PPC_REQUIRE_CUDA_BACKEND();
  // A ring's sequences on one key block (AttentionOp's RingSpec): forward
  // stages 0, 3 (merging the same block again: each row's maximum stays,
  // its sum and output double) and 2, and stages 3 and 2 continuing a
  // preset state (presetRingState: the merge rescales both sides); the
  // backward's stage 2 (dO . O into the fourth statistic), then stage 1.
  // The result starts with values in [-1, 1): stale ones, which stage 0
  // overwrites, or the unnormalized output so far. Keys [5, 10) with rows
  // [0, 4) causal: a block past every row, which the merge leaves as it is.
  auto ring = [](const AgreementCase &base, const std::string &what,
                 const AttentionCase &c, const std::vector<Range> &batch,
                 Range keys, Range rows, double atol, double rtol) {
    Partition part = attentionPartition(c, batch, rows);
    for (int i : {1, 2})
      part.inputs[i] =
          withRange(part.inputs[i], c.lead.size(), keys.first, keys.second);
    const std::string name = what + " keys " + std::to_string(keys.first) +
                             " rows " + std::to_string(rows.first) + ".." +
                             std::to_string(rows.second);
    for (bool preset : {false, true}) {
      AgreementCase a = base;
      a.partition = part;
      a.initialOutputs = {randomValues(numElementsOf(c.result()), 43)};
      a.forwardStages = {0, 3, 2};
      a.backwardStages = {2, 1};
      a.atol = atol;
      a.rtol = rtol;
      std::string sequence = name + " stages 0, 3, 2";
      if (preset) {
        presetRingState(a, c, batch, keys, rows);
        a.forwardStages = {3, 2};
        sequence = name + " merged into a preset state";
      }
      expectBackendsAgree(a, sequence);
      a.dtype = DType::BF16;
      a.atol = 2e-2;
      a.rtol = 2e-2;
      expectBackendsAgree(a, sequence + " bf16");
    }
  };
  for (const auto &lead : kAttentionLeads)
    for (bool causal : {false, true})
      for (double ratio : {0.0, 0.2}) {
        AttentionCase c{lead, 9, 10, 4, 3, 0.6, causal, ratio, 29};
        const std::vector<Range> batch = wholeLeads(lead);
        for (Range keys : splitRange(c.T, 2))
          for (Range rows : {Range{0, c.S}, Range{0, 4}, Range{4, 9}})
            ring(agreement(c, 5), "ring " + describe(c), c, batch, keys, rows,
                 2e-5, 2e-4);
      }
  // Longer than the cpu kernel's row tile of 128: rows starting off its
  // multiples, and (causal) rows [0, 128), one tile past keys [130, 260).
  // Not rows [0, 300) with those keys: rows [0, 130) would have seen no key
  // (their output 0 / 0, and dO . O NaN), which only a whole ring rules
  // out, and the backends tile such rows differently.
  for (bool causal : {false, true}) {
    AttentionCase c{{2}, 300, 260, 8, 4, 0.3, causal, 0.2, 17};
    for (auto [keys, rows] : {std::pair{Range{0, 130}, Range{0, 300}},
                              std::pair{Range{0, 130}, Range{20, 140}},
                              std::pair{Range{130, 260}, Range{130, 300}},
                              std::pair{Range{130, 260}, Range{0, 128}}})
      ring(agreement(c, 6), "ring " + describe(c), c, {{1, 2}}, keys, rows,
           1e-4, 1e-3);
  }
  // Backward stage 2 reads the forward's result: without it, the same
  // error on both backends.
  AttentionCase c{{2, 3}, 9, 10, 4, 3, 0.6, true, 0.2, 29};
  Partition part = attentionPartition(c, {{0, 2}, {0, 3}}, {0, 9});
  for (int i : {1, 2})
    part.inputs[i] = withRange(part.inputs[i], 2, 5, 10);
  std::string unused;
  Backend &cuda = *cudaBackendUnderTest(unused);
  std::unique_ptr<Backend> cpu = createCpuBackend({1, true});
  for (bool resultView : {false, true}) {
    const std::string want =
        ringBackwardErrorWithoutResult(*cpu, attentionOp(c), part, resultView);
    EXPECT_NE(want.find("a ring's backward reads the forward's result"),
              std::string::npos)
        << want;
    EXPECT_EQ(
        ringBackwardErrorWithoutResult(cuda, attentionOp(c), part, resultView),
        want);
  }
}

TEST(CudaAttention, OnlyTheWantedGradientsAreWritten) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (double ratio : {0.0, 0.1}) {
    AttentionCase c{{2}, 5, 6, 4, 3, 0.5, true, ratio, 3};
    for (size_t wanted = 0; wanted < 3; ++wanted) {
      AgreementCase a = agreement(c, 1);
      a.needsGrad = {wanted == 0, wanted == 1, wanted == 2};
      expectBackendsAgree(a, describe(c) + " grad of operand " +
                                 std::to_string(wanted) + " alone");
    }
    AgreementCase none = agreement(c, 1);
    none.needsGrad = {false, false, false};
    expectBackendsAgree(none, describe(c) + " no gradient");
  }
}

TEST(CudaAttention, Bf16StorageAgrees) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (bool causal : {false, true}) {
    AttentionCase c{{2, 2}, 6, 9, 8, 4, 0.35, causal, 0.1, 5};
    AgreementCase a = agreement(c, 2);
    a.dtype = DType::BF16;
    a.atol = 1e-2;
    a.rtol = 1e-2;
    expectBackendsAgree(a, "bf16 " + describe(c));
  }
}

// The tiled kernels of FlashAttention.h take 16-bit operands with D == Dv a
// multiple of 16: several tiles of 64 rows and keys (and partial ones),
// causal and not, dropout, partitions of the leading dims and rows (and a
// query box wider than the result's), f16 too. Their probabilities and dS
// round to the operands' type before the products, as FlashAttention's do.
TEST(CudaAttention, TiledKernelsAgree) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (bool causal : {false, true})
    for (double ratio : {0.0, 0.1}) {
      AttentionCase c{{2, 2}, 140, 130, 32, 32, 0.25, causal, ratio, 11};
      AgreementCase a = agreement(c, 2);
      a.dtype = DType::BF16;
      a.atol = 2e-2;
      a.rtol = 2e-2;
      expectBackendsAgree(a, "tiled bf16 " + describe(c));
      AgreementCase half = a;
      half.dtype = DType::F16;
      half.atol = 5e-3;
      half.rtol = 5e-3;
      expectBackendsAgree(half, "tiled f16 " + describe(c));
      for (Range s : {Range{0, 64}, Range{50, 140}, Range{64, 130}}) {
        AgreementCase part = a;
        part.partition = attentionPartition(c, {{1, 2}, {0, 2}}, s);
        expectBackendsAgree(part, "tiled bf16 " + describe(c) + " rows " +
                                      std::to_string(s.first));
      }
      AgreementCase wider = a;
      wider.partition = attentionPartition(c, {{0, 2}, {1, 2}}, {0, 140});
      wider.partition->outputs[0] =
          withRange(wider.partition->outputs[0], 2, 30, 100);
      wider.needsGrad = {false, true, true};
      expectBackendsAgree(wider, "tiled bf16 " + describe(c) + " wider query");
    }
  // Head dims of each compiled bound (16, 32, 64, 128) and between two
  // (48: zeros past its columns), one tile.
  for (int64_t D : {16, 48, 64, 128}) {
    AttentionCase c{{3}, 20, 24, D, D, 0.3, true, 0.0, 1};
    AgreementCase a = agreement(c, 0);
    a.dtype = DType::BF16;
    a.atol = 2e-2;
    a.rtol = 2e-2;
    expectBackendsAgree(a, "tiled bf16 D " + std::to_string(D));
  }
  // GPT-2's heads (64) over several tiles of rows and keys, with dropout.
  AttentionCase gpt{{2}, 150, 150, 64, 64, 0.125, true, 0.1, 5};
  AgreementCase a = agreement(gpt, 0);
  a.dtype = DType::BF16;
  a.atol = 2e-2;
  a.rtol = 2e-2;
  expectBackendsAgree(a, "tiled bf16 D 64 " + describe(gpt));
}

// Layout "bshd": [B, S, H, D] operands, whose rows lie H * D apart, on the
// GEMM path (float32, and bf16 with D = 4) and on the tiled kernels (bf16,
// D = 32, several tiles), whole and partitioned by samples, heads and rows.
TEST(CudaAttention, HeadsAfterPositionsAgree) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (bool causal : {false, true})
    for (double ratio : {0.0, 0.1}) {
      AttentionCase c{{2, 3}, 7, 6, 4, 3, 0.5, causal, ratio, 13};
      AgreementCase a = agreement(c, 2);
      a.op = bshdAttentionOp(c);
      expectBackendsAgree(a, "bshd " + describe(c));
      for (Range b : splitRange(2, 2))
        for (Range h : {Range{0, 1}, Range{1, 3}})
          for (Range s : splitRange(c.S, 2)) {
            AgreementCase part = a;
            part.partition = bshdAttentionPartition(c, b, h, s);
            expectBackendsAgree(part, "bshd " + describe(c) + " batch " +
                                          std::to_string(b.first) + " heads " +
                                          std::to_string(h.first) + " rows " +
                                          std::to_string(s.first));
          }
      AgreementCase half = a;
      half.dtype = DType::BF16;
      half.atol = 1e-2;
      half.rtol = 1e-2;
      expectBackendsAgree(half, "bshd bf16 " + describe(c));

      AttentionCase tiled{{2, 2}, 140, 130, 32, 32, 0.25, causal, ratio, 11};
      AgreementCase t = agreement(tiled, 2);
      t.op = bshdAttentionOp(tiled);
      t.dtype = DType::BF16;
      t.atol = 2e-2;
      t.rtol = 2e-2;
      expectBackendsAgree(t, "tiled bshd bf16 " + describe(tiled));
      AgreementCase part = t;
      part.partition = bshdAttentionPartition(tiled, {1, 2}, {1, 2}, {50, 140});
      expectBackendsAgree(part, "tiled bshd bf16 " + describe(tiled) +
                                    " sample 1, head 1, rows 50..140");
    }
}

TEST(CudaAttention, RejectsWhatTheCpuKernelRejects) {
  PPC_REQUIRE_CUDA_BACKEND();
  AttentionCase c{{2}, 4, 6, 3, 5};
  OpDesc op = attentionOp(c);
  Partition whole = wholePartition(op);
  Partition p = whole;
  p.inputs[1] = withRange(p.inputs[1], 1, 0, 5);
  expectSameErrorsMentioning(op, p, "key must cover its whole T dim");
  p = whole;
  p.inputs[1] = withRange(p.inputs[1], 2, 1, 3);
  expectSameErrorsMentioning(op, p, "key must cover its whole D dim");
  p = whole;
  p.inputs[2] = withRange(p.inputs[2], 1, 2, 6);
  expectSameErrorsMentioning(op, p, "value must cover its whole T dim");
  p = whole;
  p.inputs[2] = withRange(p.inputs[2], 2, 0, 4);
  expectSameErrorsMentioning(op, p, "value must cover its whole Dv dim");
  p = whole;
  p.inputs[0] = withRange(p.inputs[0], 2, 0, 2);
  expectSameErrorsMentioning(op, p, "query must cover its whole D dim");
  p = whole;
  p.outputs[0] = withRange(p.outputs[0], 2, 0, 4);
  expectSameErrorsMentioning(op, p, "result must cover its whole Dv dim");
  p = whole;
  p.inputs[0] = withRange(p.inputs[0], 1, 1, 4);
  expectSameErrorsMentioning(op, p,
                             "query box does not hold the result's S rows");
  p = whole;
  p.inputs[1] = withRange(p.inputs[1], 0, 1, 2);
  expectSameErrorsMentioning(op, p,
                             "key box does not hold the result's leading");

  AttentionCase badRatio = c;
  badRatio.ratio = 1.0;
  expectSameErrorsMentioning(attentionOp(badRatio), whole, "ratio");

  OpDesc mismatched =
      makeOp("ppc.attention", {{2, 4, 3}, {2, 6, 4}, {2, 6, 5}}, {{2, 4, 5}});
  expectSameErrorsMentioning(mismatched, wholePartition(mismatched),
                             "D differs");
}

} // namespace
} // namespace ppc::runtime::test
