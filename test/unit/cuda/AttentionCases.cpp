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
// Causal attention in zigzag order (`zigzag` N, ppc/Support/SequenceOrder.h)
// agrees with the cpu backend on the same cases (whole, rows split, "bshd",
// the tiled kernels over several tiles and chunks shorter than a warp's 16
// rows, key blocks and ring stages), and has an oracle of its own: on
// operands stored in zigzag order it is the natural-order causal op on the
// operands as they were, its result and gradients stored in zigzag order
// (whole, and merged from a ring's key blocks; on both backends).
//
//===----------------------------------------------------------------------===//

#include "ErrorAgreement.h"

#include "../KernelCases.h"

#include "ppc/Support/SequenceOrder.h"

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

std::string describe(const AttentionCase &c, int64_t zigzag = 0) {
  std::string s = "attention lead " + std::to_string(c.lead.size()) + " S " +
                  std::to_string(c.S) + " T " + std::to_string(c.T);
  if (c.causal)
    s += " causal";
  if (zigzag > 0)
    s += " zigzag " + std::to_string(zigzag);
  if (c.ratio > 0)
    s += " dropout " + std::to_string(c.ratio);
  return s;
}

/// `op` on positions stored in zigzag order of `pairs`.
OpDesc withZigzag(OpDesc op, int64_t pairs) {
  op.attributes["zigzag"] = pairs;
  return op;
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
                describe(c) + " keys " + std::to_string(keys.first) + " rows " +
                std::to_string(rows.first) + ".." + std::to_string(rows.second);
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
/// first (maximum -inf, sum 0). `zigzag`: the pairs of the order the
/// positions are stored in.
void presetRingState(AgreementCase &a, const AttentionCase &c,
                     const std::vector<Range> &batch, Range keys, Range rows,
                     int64_t zigzag = 0) {
  const int64_t count = rows.second - rows.first;
  int64_t n = count;
  for (Range b : batch)
    n *= b.second - b.first;
  std::vector<float> max = randomValues(n, 41), sum = randomValues(n, 42);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = rows.first + i % count;
    bool sees = !c.causal;
    for (int64_t j = keys.first; j < keys.second; ++j)
      sees |=
          zigzagPosition(j, c.T, zigzag) <= zigzagPosition(row, c.S, zigzag);
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

/// A ring's sequences on the key block `keys` of the partition of leading
/// ranges `batch` and query rows `rows` of `c` (the op `base.op`, in zigzag
/// order of `zigzag` pairs where positive) agree on both backends, f32 and
/// bf16 (see RingStagesAgree).
void expectRingStagesAgree(const AgreementCase &base, const std::string &what,
                           const AttentionCase &c,
                           const std::vector<Range> &batch, Range keys,
                           Range rows, double atol, double rtol,
                           int64_t zigzag = 0) {
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
      presetRingState(a, c, batch, keys, rows, zigzag);
      a.forwardStages = {3, 2};
      sequence = name + " merged into a preset state";
    }
    expectBackendsAgree(a, sequence);
    a.dtype = DType::BF16;
    a.atol = 2e-2;
    a.rtol = 2e-2;
    expectBackendsAgree(a, sequence + " bf16");
  }
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
  for (const auto &lead : kAttentionLeads)
    for (bool causal : {false, true})
      for (double ratio : {0.0, 0.2}) {
        AttentionCase c{lead, 9, 10, 4, 3, 0.6, causal, ratio, 29};
        const std::vector<Range> batch = wholeLeads(lead);
        for (Range keys : splitRange(c.T, 2))
          for (Range rows : {Range{0, c.S}, Range{0, 4}, Range{4, 9}})
            expectRingStagesAgree(agreement(c, 5), "ring " + describe(c), c,
                                  batch, keys, rows, 2e-5, 2e-4);
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
      expectRingStagesAgree(agreement(c, 6), "ring " + describe(c), c, {{1, 2}},
                            keys, rows, 1e-4, 1e-3);
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

  // Zigzag order needs causal attention with S == T divisible by 2N.
  expectSameErrorsMentioning(withZigzag(op, 1), whole, "zigzag 1");
  AttentionCase square{{2}, 6, 6, 3, 5, 1.0, true};
  OpDesc zigzag = withZigzag(attentionOp(square), 2);
  expectSameErrorsMentioning(zigzag, wholePartition(zigzag), "zigzag 2");
}

//===----------------------------------------------------------------------===//
// Zigzag order
//===----------------------------------------------------------------------===//

// The cases of the natural order's tests in zigzag order of N pairs (chunks
// of S / 2N positions): S = T = 16 and 32 with N = 2 and 4, no and two
// leading dims, dropout, rows split (halves, and a range across chunks),
// layout "bshd" (split too), bf16 on the score-block path.
TEST(CudaAttention, ZigzagAgrees) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (const auto &lead : kAttentionLeads)
    for (int64_t S : {16, 32})
      for (int64_t pairs : {2, 4})
        for (double ratio : {0.0, 0.1}) {
          AttentionCase c{lead, S, S, 4, 3, 0.5, true, ratio, 19};
          const std::string what = describe(c, pairs);
          AgreementCase a = agreement(c, 2);
          a.op = withZigzag(attentionOp(c), pairs);
          expectBackendsAgree(a, what);
          for (Range rows : {Range{0, S / 2}, Range{S / 2, S}, Range{3, 13}}) {
            AgreementCase part = a;
            part.partition = attentionPartition(c, wholeLeads(lead), rows);
            expectBackendsAgree(part, what + " rows " +
                                          std::to_string(rows.first) + ".." +
                                          std::to_string(rows.second));
          }
          AgreementCase half = a;
          half.dtype = DType::BF16;
          half.atol = 1e-2;
          half.rtol = 1e-2;
          expectBackendsAgree(half, what + " bf16");
          if (lead.empty())
            continue;
          AgreementCase bshd = a;
          bshd.op = withZigzag(bshdAttentionOp(c), pairs);
          expectBackendsAgree(bshd, "bshd " + what);
          bshd.partition = bshdAttentionPartition(c, {1, 2}, {1, 3}, {3, 13});
          expectBackendsAgree(bshd, "bshd " + what +
                                        " sample 1, heads 1.., rows 3..13");
        }
}

// The tiled kernels (FlashAttention.h) in zigzag order: several tiles of 64
// rows and keys with chunks of 40 and 20 positions (a tile's keys and a
// warp's rows span several chunks, so tiles are skipped by their natural
// positions), chunks of 4 (S = 32, N = 4: 4 chunks to a warp's rows), with
// dropout, rows split, f16, "bshd", each compiled head dim bound.
TEST(CudaAttention, ZigzagTiledKernelsAgree) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (int64_t pairs : {2, 4})
    for (double ratio : {0.0, 0.1}) {
      AttentionCase c{{2, 2}, 160, 160, 32, 32, 0.25, true, ratio, 11};
      const std::string what = "tiled bf16 " + describe(c, pairs);
      AgreementCase a = agreement(c, 2);
      a.op = withZigzag(attentionOp(c), pairs);
      a.dtype = DType::BF16;
      a.atol = 2e-2;
      a.rtol = 2e-2;
      expectBackendsAgree(a, what);
      AgreementCase half = a;
      half.dtype = DType::F16;
      half.atol = 5e-3;
      half.rtol = 5e-3;
      expectBackendsAgree(half, "tiled f16 " + describe(c, pairs));
      for (Range s : {Range{0, 64}, Range{50, 140}, Range{80, 160}}) {
        AgreementCase part = a;
        part.partition = attentionPartition(c, {{1, 2}, {0, 2}}, s);
        expectBackendsAgree(part, what + " rows " + std::to_string(s.first));
      }
      AgreementCase bshd = a;
      bshd.op = withZigzag(bshdAttentionOp(c), pairs);
      expectBackendsAgree(bshd, "bshd " + what);
      bshd.partition = bshdAttentionPartition(c, {1, 2}, {1, 2}, {50, 140});
      expectBackendsAgree(bshd, "bshd " + what + " rows 50..140");
    }
  for (int64_t D : {16, 48, 64, 128}) {
    AttentionCase c{{3}, 32, 32, D, D, 0.3, true, 0.0, 1};
    AgreementCase a = agreement(c, 0);
    a.op = withZigzag(attentionOp(c), 4);
    a.dtype = DType::BF16;
    a.atol = 2e-2;
    a.rtol = 2e-2;
    expectBackendsAgree(a, "tiled bf16 D " + std::to_string(D) + " zigzag 4");
  }
}

// Key blocks and a ring's stages in zigzag order: the halves of the keys
// and a block across chunks, rows whole and split (stored rows [0, 4), at
// natural positions [0, 4) with N = 2, see no key of [8, 16): NaN on both
// backends, as in natural order), dropout, bf16.
TEST(CudaAttention, ZigzagKeyBlocksAndRingStagesAgree) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (const auto &lead : kAttentionLeads)
    for (int64_t pairs : {2, 4})
      for (double ratio : {0.0, 0.2}) {
        AttentionCase c{lead, 16, 16, 4, 3, 0.6, true, ratio, 29};
        const std::vector<Range> batch = wholeLeads(lead);
        AgreementCase base = agreement(c, 5);
        base.op = withZigzag(attentionOp(c), pairs);
        for (Range keys : {Range{0, 8}, Range{8, 16}, Range{5, 11}})
          for (Range rows : {Range{0, 16}, Range{0, 4}, Range{4, 12}}) {
            const std::string what = describe(c, pairs) + " keys " +
                                     std::to_string(keys.first) + " rows " +
                                     std::to_string(rows.first) + ".." +
                                     std::to_string(rows.second);
            AgreementCase a = base;
            Partition part = attentionPartition(c, batch, rows);
            for (int i : {1, 2})
              part.inputs[i] = withRange(part.inputs[i], lead.size(),
                                         keys.first, keys.second);
            a.partition = part;
            expectBackendsAgree(a, what);
            a.dtype = DType::BF16;
            a.atol = 2e-2;
            a.rtol = 2e-2;
            expectBackendsAgree(a, what + " bf16");
            expectRingStagesAgree(base, "ring " + describe(c, pairs), c, batch,
                                  keys, rows, 2e-5, 2e-4, pairs);
          }
      }
}

/// `x` of `shape` with its dim `dim` (`length` positions) stored in zigzag
/// order of `pairs`: element i of the dim holds natural position
/// zigzagPosition(i).
std::vector<float> inZigzagOrder(const std::vector<float> &x,
                                 const std::vector<int64_t> &shape, size_t dim,
                                 int64_t pairs) {
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < dim; ++d)
    outer *= shape[d];
  for (size_t d = dim + 1; d < shape.size(); ++d)
    inner *= shape[d];
  const int64_t length = shape[dim];
  std::vector<float> out(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < length; ++i) {
      const int64_t from = zigzagPosition(i, length, pairs);
      std::copy_n(x.begin() + (o * length + from) * inner, inner,
                  out.begin() + (o * length + i) * inner);
    }
  return out;
}

/// The result and operand gradients of an attention, whole tensors.
struct AttentionRun {
  std::vector<float> out, dq, dk, dv;
};

/// ppc.attention `op` on `backend` from whole operands `x` and result
/// gradient `dOut`, as a ring of `members` (RingSpec of AttentionOp, as
/// AttentionKernelTest's ring): member m holds the query rows and key block
/// m of S split evenly (`partitionOf(rows)`: the partition of those rows,
/// keys along dim `tDim` of the key and value boxes), runs forward stage 0
/// on its own block, 3 on each after (m - 1, m - 2, ... mod members) and
/// 2; backward stage 2, then 1 on each block, the blocks' dK and dV
/// accumulated where they are (one buffer per block). One member: the whole
/// op, unstaged.
AttentionRun runRing(Backend &backend, const OpDesc &op, size_t tDim,
                     const std::function<Partition(Range)> &partitionOf,
                     const std::vector<std::vector<float>> &x,
                     const std::vector<float> &dOut, int64_t members,
                     DType dtype) {
  std::vector<std::shared_ptr<DeviceBuffer>> owned;
  auto boxOf = [](const Box &box) {
    int64_t n = 1;
    for (size_t d = 0; d < box.lo.size(); ++d)
      n *= box.hi[d] - box.lo[d];
    return n;
  };
  // A buffer holding `box` of a tensor of `shape` (zeros, or `values`).
  auto view = [&](DType type, const std::vector<int64_t> &shape, const Box &box,
                  const std::vector<float> *values) {
    const int64_t n = boxOf(box);
    owned.push_back(backend.allocate(type, std::max<int64_t>(n, 1)));
    if (values)
      backend.write(*owned.back(), 0, values->data(), n);
    return DeviceView{owned.back().get(), 0, shape, box.lo, box.hi};
  };
  auto read = [&](const DeviceView &v) {
    std::vector<float> values(boxOf({v.lo, v.hi}));
    backend.read(*v.buffer, 0, static_cast<int64_t>(values.size()),
                 values.data());
    return values;
  };
  const std::vector<int64_t> &qShape = op.operandShapes[0],
                             &kShape = op.operandShapes[1],
                             &vShape = op.operandShapes[2],
                             &oShape = op.resultShapes[0];
  const int64_t S = kShape[tDim];
  const std::vector<Range> parts = splitRange(S, members);
  // Per block: key, value and their gradient accumulators.
  std::vector<DeviceView> keys, values, dKeys, dValues;
  for (Range block : parts) {
    const Partition any = partitionOf(block);
    const Box kBox = withRange(any.inputs[1], tDim, block.first, block.second);
    const Box vBox = withRange(any.inputs[2], tDim, block.first, block.second);
    const std::vector<float> k = extractBox(x[1], kShape, kBox),
                             v = extractBox(x[2], vShape, vBox);
    keys.push_back(view(dtype, kShape, kBox, &k));
    values.push_back(view(dtype, vShape, vBox, &v));
    dKeys.push_back(view(dtype, kShape, kBox, nullptr));
    dValues.push_back(view(dtype, vShape, vBox, nullptr));
  }
  AttentionRun run;
  run.out.assign(numElementsOf(oShape), 0.0f);
  run.dq.assign(numElementsOf(qShape), 0.0f);
  run.dk.assign(numElementsOf(kShape), 0.0f);
  run.dv.assign(numElementsOf(vShape), 0.0f);
  for (int64_t m = 0; m < members; ++m) {
    const Partition part = partitionOf(parts[m]);
    const std::vector<float> q = extractBox(x[0], qShape, part.inputs[0]),
                             dOutBox =
                                 extractBox(dOut, oShape, part.outputs[0]);
    const DeviceView qView = view(dtype, qShape, part.inputs[0], &q),
                     dqView = view(dtype, qShape, part.inputs[0], nullptr),
                     outView = view(dtype, oShape, part.outputs[0], nullptr),
                     dOutView = view(dtype, oShape, part.outputs[0], &dOutBox);
    // The rows' statistics: three forward, the dots too backward.
    std::vector<DeviceView> stats;
    if (members > 1) {
      const int64_t rows = boxOf(part.inputs[0]) / qShape.back();
      for (int i = 0; i < 4; ++i)
        stats.push_back(view(DType::F32, {rows}, wholeBox({rows}), nullptr));
    }
    auto step = [&](int32_t stage, int64_t j, bool backwardPass) {
      const KernelContext ctx{0, true, stage};
      const std::vector<DeviceView> in = {qView, keys[j], values[j]};
      std::vector<DeviceView> st = stats;
      if (!backwardPass) {
        if (!st.empty())
          st.pop_back();
        return statusText(backend.forward(op, ctx, in, {outView}, st));
      }
      return statusText(backend.backward(op, ctx, in, {outView}, {dOutView},
                                         {dqView, dKeys[j], dValues[j]}, st));
    };
    for (int64_t s = 0; s < members; ++s)
      EXPECT_EQ(step(s == 0 ? 0 : 3, (m - s + members) % members, false), "");
    if (members > 1) {
      EXPECT_EQ(step(2, m, false), "");
      EXPECT_EQ(step(2, m, true), "");
    }
    for (int64_t s = 0; s < members; ++s)
      EXPECT_EQ(step(members > 1 ? 1 : 0, (m - s + members) % members, true),
                "");
    addBox(run.out, oShape, part.outputs[0], read(outView));
    addBox(run.dq, qShape, part.inputs[0], read(dqView));
  }
  for (size_t j = 0; j < parts.size(); ++j) {
    addBox(run.dk, kShape, {dKeys[j].lo, dKeys[j].hi}, read(dKeys[j]));
    addBox(run.dv, vShape, {dValues[j].lo, dValues[j].hi}, read(dValues[j]));
  }
  backend.synchronize();
  int64_t instruction;
  EXPECT_EQ(statusText(backend.deferredError(instruction)), "");
  return run;
}

// The oracle of zigzag order: on operands stored in zigzag order of N, the
// op in zigzag order N is the natural-order causal op on the operands as
// they were, its result and gradients stored in zigzag order. Whole (the
// score-block path in float32, the tiled kernels in bf16 over several tiles
// and with chunks of 4) and as rings of 2 and 4 members (key blocks merged
// in stages), layouts "bhsd" and "bshd", on both backends.
TEST(CudaAttention, ZigzagIsNaturalOrderPermuted) {
  PPC_REQUIRE_CUDA_BACKEND();
  std::string unused;
  Backend &cuda = *cudaBackendUnderTest(unused);
  std::unique_ptr<Backend> cpu = createCpuBackend({1, true});
  struct Shape {
    int64_t S, D;
    DType dtype;
    std::vector<int64_t> members;
  };
  for (const Shape &shape :
       {Shape{16, 4, DType::F32, {1, 2, 4}}, Shape{32, 4, DType::F32, {1, 2}},
        Shape{160, 32, DType::BF16, {1}}, Shape{32, 16, DType::BF16, {1}}})
    for (bool bshd : {false, true})
      for (int64_t pairs : {2, 4}) {
        const bool f32 = shape.dtype == DType::F32;
        const int64_t Dv = f32 ? 3 : shape.D; // the tiled kernels: D == Dv
        AttentionCase c{{2, 3}, shape.S, shape.S, shape.D, Dv, 0.5, true};
        const OpDesc natural = bshd ? bshdAttentionOp(c) : attentionOp(c);
        const OpDesc zigzag = withZigzag(natural, pairs);
        const size_t tDim = bshd ? 1 : 2;
        auto partitionOf = [&](Range rows) {
          return bshd ? bshdAttentionPartition(c, {0, 2}, {0, 3}, rows)
                      : attentionPartition(c, wholeLeads(c.lead), rows);
        };
        std::vector<std::vector<float>> x, xz;
        for (size_t i = 0; i < 3; ++i) {
          x.push_back(randomValues(numElementsOf(natural.operandShapes[i]),
                                   61 + static_cast<uint32_t>(i)));
          xz.push_back(
              inZigzagOrder(x[i], natural.operandShapes[i], tDim, pairs));
        }
        const std::vector<int64_t> &oShape = natural.resultShapes[0];
        const std::vector<float> dOut = randomValues(numElementsOf(oShape), 67);
        const std::vector<float> dOutZ =
            inZigzagOrder(dOut, oShape, tDim, pairs);
        const double tol = f32 ? 2e-5 : 2e-2;
        for (Backend *backend : {&cuda, cpu.get()}) {
          const AttentionRun want = runRing(
              *backend, natural, tDim, partitionOf, x, dOut, 1, shape.dtype);
          for (int64_t members : shape.members) {
            const std::string what =
                std::string(backend->name()) + (bshd ? " bshd " : " ") +
                (f32 ? "f32 " : "bf16 ") + describe(c, pairs) + ", " +
                std::to_string(members) + " members";
            const AttentionRun got =
                runRing(*backend, zigzag, tDim, partitionOf, xz, dOutZ, members,
                        shape.dtype);
            expectClose(got.out, inZigzagOrder(want.out, oShape, tDim, pairs),
                        tol, tol, what + " result");
            expectClose(
                got.dq,
                inZigzagOrder(want.dq, natural.operandShapes[0], tDim, pairs),
                tol, tol, what + " dQ");
            expectClose(
                got.dk,
                inZigzagOrder(want.dk, natural.operandShapes[1], tDim, pairs),
                tol, tol, what + " dK");
            expectClose(
                got.dv,
                inZigzagOrder(want.dv, natural.operandShapes[2], tDim, pairs),
                tol, tol, what + " dV");
          }
        }
      }
}

} // namespace
} // namespace ppc::runtime::test
