//===- AttentionKernelTest.cpp - the cpu kernel of ppc.attention ----------===//
//
// ppc.attention against its unfused chain run with the existing kernels
// (matmul(transpose_rhs), mul by scale, [add of a causal mask], softmax,
// dropout, matmul): forward output and the gradients of query, key and
// value, to float32 round-off, with and without leading dims, causal
// masking (S below, equal to and above T) and dropout in training; dropout
// ignored outside training; finite differences; partitions over the leading
// dims and S against the whole-op run (partial dK / dV summed); sequences
// longer than the kernel's row tile; layout "bshd" against the default
// layout on the transposed operands (whole and partitioned by samples, heads
// and rows); key blocks in the staged log-sum-exp merge (keys split, with
// and without rows split, causal and dropout) against the whole-op run; and
// the errors for boxes and statistics the kernel cannot compute from
// (KernelTestUtil.h).
//
//===----------------------------------------------------------------------===//

#include "KernelCases.h"
#include "KernelTestUtil.h"
#include "StatusText.h"
#include "ppc/Support/SequenceOrder.h"

#include <gtest/gtest.h>

#include <tuple>

using namespace ppc::runtime;
using namespace ppc::runtime::test;

namespace {

KernelContext trainingAt(int64_t step) {
  KernelContext ctx;
  ctx.step = step;
  return ctx;
}

/// Random query, key and value in [-1, 1).
std::vector<std::vector<float>> randomInputs(const AttentionCase &c,
                                             uint32_t seed) {
  return {randomValues(numElementsOf(c.query()), seed),
          randomValues(numElementsOf(c.key()), seed + 17),
          randomValues(numElementsOf(c.value()), seed + 34)};
}

/// Forward output and the three operand gradients.
struct Result {
  std::vector<float> out, dq, dk, dv;
};

/// Runs `op` whole, forward and backward with output gradient `dy`; the
/// operand gradients (those wanted) in order.
std::vector<std::vector<float>>
runGrad(const OpDesc &op, const KernelContext &ctx,
        const std::vector<std::vector<float>> &x, const std::vector<float> &dy,
        std::vector<float> *out, std::vector<bool> needsGrad = {}) {
  std::vector<std::vector<float>> dys = {dy};
  OpRun run = runOp(op, ctx, x, {wholePartition(op)}, &dys, needsGrad);
  EXPECT_EQ(run.error, "") << op.kind;
  if (!run.error.empty())
    return std::vector<std::vector<float>>(x.size());
  if (out)
    *out = run.outputs[0];
  return run.inputGrads;
}

/// The unfused chain with the existing kernels, forward and backward.
Result composedReference(const AttentionCase &c, const KernelContext &ctx,
                         const std::vector<std::vector<float>> &x,
                         const std::vector<float> &dOut) {
  std::vector<int64_t> scoresShape = c.scores();
  OpDesc scoresOp =
      makeOp("ppc.matmul", {c.query(), c.key()}, {scoresShape},
             {{"transpose_lhs", int64_t{0}}, {"transpose_rhs", int64_t{1}}});
  OpDesc scaleOp = makeOp("ppc.mul", {scoresShape, {1}}, {scoresShape});
  std::vector<int64_t> maskShape = {c.S, c.T};
  OpDesc maskOp = makeOp("ppc.add", {scoresShape, maskShape}, {scoresShape});
  OpDesc softmaxOp = makeOp("ppc.softmax", {scoresShape}, {scoresShape},
                            {{"axis", int64_t{-1}}});
  OpDesc dropoutOp = makeOp("ppc.dropout", {scoresShape}, {scoresShape},
                            {{"ratio", c.ratio}, {"seed", c.seed}});
  OpDesc outOp =
      makeOp("ppc.matmul", {scoresShape, c.value()}, {c.result()},
             {{"transpose_lhs", int64_t{0}}, {"transpose_rhs", int64_t{0}}});
  std::vector<float> scale = {static_cast<float>(c.scale)};
  std::vector<float> mask(c.S * c.T, 0.0f);
  for (int64_t i = 0; i < c.S; ++i)
    for (int64_t j = i + 1; j < c.T; ++j)
      mask[i * c.T + j] = -1e9f;

  // Forward, keeping each op's input.
  auto forward = [&](const OpDesc &op,
                     const std::vector<std::vector<float>> &in) {
    OpRun run = runOp(op, ctx, in, {wholePartition(op)});
    EXPECT_EQ(run.error, "") << op.kind;
    return run.error.empty() ? run.outputs[0] : std::vector<float>{};
  };
  std::vector<float> scores = forward(scoresOp, {x[0], x[1]});
  std::vector<float> scaled = forward(scaleOp, {scores, scale});
  std::vector<float> masked =
      c.causal ? forward(maskOp, {scaled, mask}) : scaled;
  std::vector<float> probs = forward(softmaxOp, {masked});
  std::vector<float> dropped = forward(dropoutOp, {probs});

  // Backward, in reverse.
  Result r;
  auto dOutOp = runGrad(outOp, ctx, {dropped, x[2]}, dOut, &r.out);
  r.dv = dOutOp[1];
  std::vector<float> dProbs =
      runGrad(dropoutOp, ctx, {probs}, dOutOp[0], nullptr)[0];
  std::vector<float> dMasked =
      runGrad(softmaxOp, ctx, {masked}, dProbs, nullptr)[0];
  std::vector<float> dScaled = c.causal
                                   ? runGrad(maskOp, ctx, {scaled, mask},
                                             dMasked, nullptr, {true, false})[0]
                                   : dMasked;
  std::vector<float> dScores = runGrad(scaleOp, ctx, {scores, scale}, dScaled,
                                       nullptr, {true, false})[0];
  auto dQk = runGrad(scoresOp, ctx, {x[0], x[1]}, dScores, nullptr);
  r.dq = dQk[0];
  r.dk = dQk[1];
  return r;
}

/// ppc.attention whole, forward and backward.
Result fused(const AttentionCase &c, const KernelContext &ctx,
             const std::vector<std::vector<float>> &x,
             const std::vector<float> &dOut) {
  Result r;
  auto grads = runGrad(attentionOp(c), ctx, x, dOut, &r.out);
  r.dq = grads[0];
  r.dk = grads[1];
  r.dv = grads[2];
  return r;
}

void expectResultsClose(const Result &actual, const Result &expected,
                        double tol, const std::string &what) {
  expectClose(actual.out, expected.out, tol, tol, what + " output");
  expectClose(actual.dq, expected.dq, tol, tol, what + " dQ");
  expectClose(actual.dk, expected.dk, tol, tol, what + " dK");
  expectClose(actual.dv, expected.dv, tol, tol, what + " dV");
}

/// Checks the fused op against the composed chain for `c` under `ctx`.
void expectMatchesComposed(const AttentionCase &c, const KernelContext &ctx,
                           uint32_t seed) {
  std::string what = "lead rank " + std::to_string(c.lead.size()) + " S " +
                     std::to_string(c.S) + " T " + std::to_string(c.T) +
                     (c.causal ? " causal" : "") +
                     (c.ratio > 0 ? " dropout" : "");
  auto x = randomInputs(c, seed);
  std::vector<float> dOut = randomValues(numElementsOf(c.result()), seed + 51);
  expectResultsClose(fused(c, ctx, x, dOut), composedReference(c, ctx, x, dOut),
                     1e-5, what);
}

TEST(AttentionKernel, MatchesComposedOps) {
  for (const auto &lead : kAttentionLeads)
    for (auto [S, T] : {Range{5, 7}, Range{6, 6}, Range{8, 3}}) {
      AttentionCase c{lead, S, T, 8, 5, 0.35};
      expectMatchesComposed(c, trainingAt(0), 1);
    }
}

TEST(AttentionKernel, CausalMatchesMaskedComposedOps) {
  for (const auto &lead : kAttentionLeads)
    for (auto [S, T] : {Range{5, 7}, Range{6, 6}, Range{8, 3}}) {
      AttentionCase c{lead, S, T, 4, 6, 0.5, /*causal=*/true};
      expectMatchesComposed(c, trainingAt(0), 2);
    }
}

TEST(AttentionKernel, DropoutMatchesComposedDropout) {
  for (const auto &lead : kAttentionLeads)
    for (bool causal : {false, true}) {
      AttentionCase c{lead,          6,          9, 4, 3, 0.4, causal,
                      /*ratio=*/0.1, /*seed=*/42};
      expectMatchesComposed(c, trainingAt(3), 3);
      expectMatchesComposed(c, trainingAt(4), 4);
    }
}

TEST(AttentionKernel, DropoutChangesTheOutputInTraining) {
  AttentionCase c{{2, 3}, 6, 9, 4, 3, 0.4, false, 0.1, 42};
  AttentionCase noDropout = c;
  noDropout.ratio = 0.0;
  auto x = randomInputs(c, 5);
  std::vector<float> dOut = randomValues(numElementsOf(c.result()), 6);
  Result dropped = fused(c, trainingAt(3), x, dOut);
  Result plain = fused(noDropout, trainingAt(3), x, dOut);
  ASSERT_EQ(dropped.out.size(), plain.out.size());
  EXPECT_NE(dropped.out, plain.out);
}

TEST(AttentionKernel, InferenceIgnoresDropout) {
  for (bool causal : {false, true}) {
    AttentionCase c{{2, 3}, 6, 9, 4, 3, 0.4, causal, 0.1, 42};
    AttentionCase noDropout = c;
    noDropout.ratio = 0.0;
    KernelContext inference = trainingAt(3);
    inference.training = false;
    auto x = randomInputs(c, 7);
    std::vector<float> dOut = randomValues(numElementsOf(c.result()), 8);
    expectResultsClose(fused(c, inference, x, dOut),
                       fused(noDropout, trainingAt(3), x, dOut), 0,
                       "inference");
    expectResultsClose(fused(c, inference, x, dOut),
                       composedReference(noDropout, inference, x, dOut), 1e-5,
                       "inference vs composed");
  }
}

TEST(AttentionKernel, GradientsMatchFiniteDifferences) {
  for (bool causal : {false, true}) {
    AttentionCase c{{2}, 4, 5, 3, 2, 0.7, causal, 0.2, 9};
    GradCheckOptions options;
    options.maxChecksPerOperand = 40;
    checkGradients(attentionOp(c), trainingAt(1), randomInputs(c, 11), {},
                   options);
  }
}

TEST(AttentionKernel, PartitionsMatchWholeOp) {
  for (bool causal : {false, true})
    for (double ratio : {0.0, 0.1}) {
      // Leading dims [2, 3] split 2 x 3, S split in 3: 18 partitions, three
      // per batch index, each adding its partial dK and dV.
      AttentionCase c{{2, 3}, 7, 6, 4, 3, 0.5, causal, ratio, 13};
      std::vector<Partition> parts;
      for (Range b0 : splitRange(2, 2))
        for (Range b1 : splitRange(3, 3))
          for (Range s : splitRange(c.S, 3))
            parts.push_back(attentionPartition(c, {b0, b1}, s));
      expectPartitionsMatchWhole(attentionOp(c), trainingAt(2),
                                 randomInputs(c, 21), parts);
      // No leading dims: S split in 4 (one query row per partition at
      // most two).
      AttentionCase flat{{}, 7, 6, 4, 3, 0.5, causal, ratio, 13};
      std::vector<Partition> rowParts;
      for (Range s : splitRange(flat.S, 4))
        rowParts.push_back(attentionPartition(flat, {}, s));
      expectPartitionsMatchWhole(attentionOp(flat), trainingAt(2),
                                 randomInputs(flat, 22), rowParts);
    }
}

/// ppc.attention run as partitions of `rows` x `keys` (query rows by key
/// blocks, leading dims whole) in the staged log-sum-exp merge, with the
/// plan's statistics reductions done here between the stages: forward
/// scratch 0 max-reduced after stage 0, scratch 1 summed after stage 1, the
/// backward's own scratch (after the forward's three) summed after its
/// stage 0, each over the partitions of the same rows. The partial results
/// and dQ are summed, the blocks' dK and dV assembled.
Result keyBlocks(const AttentionCase &c, const KernelContext &ctx,
                 const std::vector<std::vector<float>> &x,
                 const std::vector<float> &dOut,
                 const std::vector<Range> &rows,
                 const std::vector<Range> &keys) {
  OpDesc op = attentionOp(c);
  const size_t tDim = c.lead.size();
  const int64_t lead = numElementsOf(c.lead);
  const std::vector<Range> batch = wholeLeads(c.lead);
  struct Part {
    Partition boxes;
    size_t group;
    std::vector<std::vector<float>> in, out, grads, stats;
    std::vector<TensorView> inViews, outViews, gradViews, dOutViews;
    std::vector<float> dOutBox;
  };
  std::vector<Part> parts;
  for (size_t g = 0; g < rows.size(); ++g)
    for (Range block : keys) {
      Part part;
      part.group = g;
      part.boxes = attentionPartition(c, batch, rows[g]);
      for (int i : {1, 2})
        part.boxes.inputs[i] = withRange(part.boxes.inputs[i], tDim,
                                         block.first, block.second);
      for (size_t i = 0; i < 3; ++i) {
        part.in.push_back(
            extractBox(x[i], op.operandShapes[i], part.boxes.inputs[i]));
        part.grads.emplace_back(part.in[i].size(), 0.0f);
      }
      const Box &result = part.boxes.outputs[0];
      part.out.emplace_back(
          lead * (rows[g].second - rows[g].first) * c.Dv, std::nanf(""));
      part.dOutBox = extractBox(dOut, c.result(), result);
      for (size_t i = 0; i < 4; ++i)
        part.stats.emplace_back(lead * (rows[g].second - rows[g].first),
                                std::nanf(""));
      parts.push_back(std::move(part));
    }
  for (Part &part : parts) { // views once the buffers stay put
    for (size_t i = 0; i < 3; ++i) {
      part.inViews.push_back(
          boxView(part.in[i], op.operandShapes[i], part.boxes.inputs[i]));
      part.gradViews.push_back(
          boxView(part.grads[i], op.operandShapes[i], part.boxes.inputs[i]));
    }
    part.outViews.push_back(
        boxView(part.out[0], c.result(), part.boxes.outputs[0]));
    part.dOutViews.push_back(
        boxView(part.dOutBox, c.result(), part.boxes.outputs[0]));
  }
  auto statViews = [](Part &part, size_t count) {
    std::vector<TensorView> views;
    for (size_t i = 0; i < count; ++i)
      views.push_back(viewOf(part.stats[i],
                             {static_cast<int64_t>(part.stats[i].size())}));
    return views;
  };
  // Reduces statistics buffer `i` over the partitions of each row group.
  auto reduce = [&](size_t i, bool max) {
    for (size_t g = 0; g < rows.size(); ++g) {
      std::vector<float> total;
      for (Part &part : parts) {
        if (part.group != g)
          continue;
        if (total.empty()) {
          total = part.stats[i];
          continue;
        }
        for (size_t e = 0; e < total.size(); ++e)
          total[e] = max ? std::max(total[e], part.stats[i][e])
                         : total[e] + part.stats[i][e];
      }
      for (Part &part : parts)
        if (part.group == g)
          part.stats[i] = total;
    }
  };
  Result r;
  r.out.assign(numElementsOf(c.result()), 0.0f);
  for (int32_t stage = 0; stage < 3; ++stage) {
    if (stage == 1)
      reduce(0, /*max=*/true);
    if (stage == 2)
      reduce(1, /*max=*/false);
    for (Part &part : parts) {
      KernelContext staged = ctx;
      staged.stage = stage;
      std::vector<TensorView> stats = statViews(part, 3);
      std::string error = ppc::test::statusText(
          forward(op, staged, part.inViews, part.outViews, stats));
      EXPECT_EQ(error, "");
      if (!error.empty())
        return r;
    }
  }
  for (Part &part : parts)
    addBox(r.out, c.result(), part.boxes.outputs[0], part.out[0]);
  for (int32_t stage = 0; stage < 2; ++stage) {
    if (stage == 1)
      reduce(3, /*max=*/false);
    for (Part &part : parts) {
      KernelContext staged = ctx;
      staged.stage = stage;
      std::vector<TensorView> stats = statViews(part, 4);
      std::string error = ppc::test::statusText(
          backward(op, staged, part.inViews, part.outViews, part.dOutViews,
                   part.gradViews, stats));
      EXPECT_EQ(error, "");
      if (!error.empty())
        return r;
    }
  }
  r.dq.assign(numElementsOf(c.query()), 0.0f);
  r.dk.assign(numElementsOf(c.key()), 0.0f);
  r.dv.assign(numElementsOf(c.value()), 0.0f);
  for (Part &part : parts) {
    addBox(r.dq, c.query(), part.boxes.inputs[0], part.grads[0]);
    addBox(r.dk, c.key(), part.boxes.inputs[1], part.grads[1]);
    addBox(r.dv, c.value(), part.boxes.inputs[2], part.grads[2]);
  }
  return r;
}

TEST(AttentionKernel, KeyBlocksMergeToTheWholeOp) {
  // Keys split in 3 (causal: the first query rows see nothing of the last
  // blocks), with and without query rows split, with dropout; S = 300 spans
  // several row tiles.
  for (const auto &lead : kAttentionLeads)
    for (bool causal : {false, true})
      for (double ratio : {0.0, 0.2}) {
        AttentionCase c{lead, 9, 10, 4, 3, 0.6, causal, ratio, 29};
        auto x = randomInputs(c, 71);
        std::vector<float> dOut =
            randomValues(numElementsOf(c.result()), 72);
        Result whole = fused(c, trainingAt(3), x, dOut);
        std::string what = std::string(causal ? "causal" : "full") +
                           (ratio > 0 ? " dropout" : "") + " lead rank " +
                           std::to_string(lead.size());
        expectResultsClose(keyBlocks(c, trainingAt(3), x, dOut,
                                     {{0, c.S}}, splitRange(c.T, 3)),
                           whole, 1e-5, what + " keys / 3");
        expectResultsClose(keyBlocks(c, trainingAt(3), x, dOut,
                                     splitRange(c.S, 2), splitRange(c.T, 2)),
                           whole, 1e-5, what + " rows / 2 x keys / 2");
      }
  AttentionCase tall{{2}, 300, 260, 8, 4, 0.3, true, 0.1, 17};
  auto x = randomInputs(tall, 81);
  std::vector<float> dOut = randomValues(numElementsOf(tall.result()), 82);
  expectResultsClose(keyBlocks(tall, trainingAt(6), x, dOut,
                               splitRange(tall.S, 2), splitRange(tall.T, 4)),
                     fused(tall, trainingAt(6), x, dOut), 1e-5,
                     "row tiles x key blocks");
}

/// ppc.attention as a ring (RingSpec of AttentionOp): member c of
/// `members` holds query rows c and key block c, and visits the blocks c,
/// c - 1, ... (mod members): forward stage 0 on its own, stage 3 (merge) on
/// each after, then stage 2; backward stage 2 (the rows' dO . O), then
/// stage 1 on each block, adding to dQ and to the block's dK and dV (one
/// accumulator per block here, which the plan passes around with it).
Result ring(const AttentionCase &c, const KernelContext &ctx,
            const std::vector<std::vector<float>> &x,
            const std::vector<float> &dOut, int64_t members) {
  OpDesc op = attentionOp(c);
  const size_t tDim = c.lead.size();
  const int64_t lead = numElementsOf(c.lead);
  const std::vector<Range> batch = wholeLeads(c.lead);
  std::vector<Range> rows = splitRange(c.S, members),
                     keys = splitRange(c.T, members);
  // Per block: key and value, their boxes and gradient accumulators.
  struct Block {
    Box box[2];
    std::vector<float> values[2], grads[2];
  };
  std::vector<Block> blocks(members);
  Partition any = attentionPartition(c, batch, rows[0]);
  for (int64_t j = 0; j < members; ++j)
    for (int i : {1, 2}) {
      Block &b = blocks[j];
      b.box[i - 1] =
          withRange(any.inputs[i], tDim, keys[j].first, keys[j].second);
      b.values[i - 1] = extractBox(x[i], op.operandShapes[i], b.box[i - 1]);
      b.grads[i - 1].assign(b.values[i - 1].size(), 0.0f);
    }
  Result r;
  r.out.assign(numElementsOf(c.result()), 0.0f);
  r.dq.assign(numElementsOf(c.query()), 0.0f);
  for (int64_t m = 0; m < members; ++m) {
    Partition part = attentionPartition(c, batch, rows[m]);
    const int64_t n = lead * (rows[m].second - rows[m].first);
    std::vector<float> q = extractBox(x[0], op.operandShapes[0],
                                      part.inputs[0]),
                       dq(q.size(), 0.0f), out(n * c.Dv, std::nanf("")),
                       dOutBox = extractBox(dOut, c.result(), part.outputs[0]);
    std::vector<std::vector<float>> stats(4, std::vector<float>(n, NAN));
    std::vector<TensorView> outViews = {
        boxView(out, c.result(), part.outputs[0])};
    std::vector<TensorView> dOutViews = {
        boxView(dOutBox, c.result(), part.outputs[0])};
    auto statViews = [&](size_t count) {
      std::vector<TensorView> views;
      for (size_t i = 0; i < count; ++i)
        views.push_back(viewOf(stats[i], {n}));
      return views;
    };
    auto inputs = [&](int64_t j) {
      Block &b = blocks[j];
      return std::vector<TensorView>{
          boxView(q, op.operandShapes[0], part.inputs[0]),
          boxView(b.values[0], op.operandShapes[1], b.box[0]),
          boxView(b.values[1], op.operandShapes[2], b.box[1])};
    };
    auto run = [&](int32_t stage, int64_t j, bool backwardPass) {
      KernelContext staged = ctx;
      staged.stage = stage;
      std::vector<TensorView> in = inputs(j);
      std::vector<TensorView> st = statViews(backwardPass ? 4 : 3);
      if (!backwardPass)
        return ppc::test::statusText(forward(op, staged, in, outViews, st));
      Block &b = blocks[j];
      std::vector<TensorView> grads = {
          boxView(dq, op.operandShapes[0], part.inputs[0]),
          boxView(b.grads[0], op.operandShapes[1], b.box[0]),
          boxView(b.grads[1], op.operandShapes[2], b.box[1])};
      return ppc::test::statusText(
          backward(op, staged, in, outViews, dOutViews, grads, st));
    };
    for (int64_t s = 0; s < members; ++s)
      EXPECT_EQ(run(s == 0 ? 0 : 3, (m - s + members) % members, false), "");
    EXPECT_EQ(run(2, m, false), "");
    addBox(r.out, c.result(), part.outputs[0], out);
    EXPECT_EQ(run(2, m, true), "");
    for (int64_t s = 0; s < members; ++s)
      EXPECT_EQ(run(1, (m - s + members) % members, true), "");
    addBox(r.dq, c.query(), part.inputs[0], dq);
  }
  r.dk.assign(numElementsOf(c.key()), 0.0f);
  r.dv.assign(numElementsOf(c.value()), 0.0f);
  for (Block &b : blocks) {
    addBox(r.dk, c.key(), b.box[0], b.grads[0]);
    addBox(r.dv, c.value(), b.box[1], b.grads[1]);
  }
  return r;
}

TEST(AttentionKernel, RingStepsMergeToTheWholeOp) {
  // 2 and 3 members, causal (the later blocks past a member's rows add
  // nothing) or not, with dropout; S = T = 300 spans several row tiles.
  for (const auto &lead : kAttentionLeads)
    for (bool causal : {false, true})
      for (double ratio : {0.0, 0.2})
        for (int64_t members : {2, 3}) {
          AttentionCase c{lead, 12, 12, 4, 3, 0.6, causal, ratio, 29};
          auto x = randomInputs(c, 91);
          std::vector<float> dOut = randomValues(numElementsOf(c.result()), 92);
          expectResultsClose(ring(c, trainingAt(3), x, dOut, members),
                             fused(c, trainingAt(3), x, dOut), 1e-5,
                             std::string(causal ? "causal" : "full") +
                                 (ratio > 0 ? " dropout" : "") + " lead rank " +
                                 std::to_string(lead.size()) + ", " +
                                 std::to_string(members) + " members");
        }
  AttentionCase tall{{2}, 300, 300, 8, 4, 0.3, true, 0.1, 17};
  auto x = randomInputs(tall, 93);
  std::vector<float> dOut = randomValues(numElementsOf(tall.result()), 94);
  expectResultsClose(ring(tall, trainingAt(6), x, dOut, 4),
                     fused(tall, trainingAt(6), x, dOut), 1e-5,
                     "row tiles, 4 members");
}

/// `values` of shape [lead..., S, cols] with row p holding natural row
/// zigzagPosition(p) of `natural` (`pairs` pairs of chunks).
std::vector<float> zigzagRows(const std::vector<float> &natural, int64_t S,
                              int64_t cols, int64_t pairs) {
  std::vector<float> stored(natural.size());
  for (size_t lead = 0; lead < natural.size() / (S * cols); ++lead)
    for (int64_t p = 0; p < S; ++p) {
      const float *from =
          natural.data() + (lead * S + ppc::zigzagPosition(p, S, pairs)) * cols;
      std::copy(from, from + cols, stored.data() + (lead * S + p) * cols);
    }
  return stored;
}

TEST(AttentionKernel, ZigzagOrderMasksNaturalPositions) {
  // Oracle: attention on the sequence stored in zigzag order is causal
  // attention in natural order, stored so (result and every gradient);
  // its ring steps (4 members hold chunks j and 7 - j of 8) merge to it
  // as the natural order's do. S = 256 spans row tiles.
  for (const auto &lead : kAttentionLeads)
    for (auto [S, pairs, members] :
         {std::tuple{16, 2, 2}, std::tuple{16, 4, 4}, std::tuple{256, 4, 2}}) {
      AttentionCase natural{lead, S, S, 4, 3, 0.6, true, 0.0, 5};
      AttentionCase stored = natural;
      stored.zigzag = pairs;
      auto x = randomInputs(natural, 71);
      std::vector<float> dOut =
          randomValues(numElementsOf(natural.result()), 72);
      Result expected = fused(natural, trainingAt(1), x, dOut);
      std::vector<std::vector<float>> xStored = {
          zigzagRows(x[0], S, natural.D, pairs),
          zigzagRows(x[1], S, natural.D, pairs),
          zigzagRows(x[2], S, natural.Dv, pairs)};
      std::vector<float> dOutStored = zigzagRows(dOut, S, natural.Dv, pairs);
      expected.out = zigzagRows(expected.out, S, natural.Dv, pairs);
      expected.dq = zigzagRows(expected.dq, S, natural.D, pairs);
      expected.dk = zigzagRows(expected.dk, S, natural.D, pairs);
      expected.dv = zigzagRows(expected.dv, S, natural.Dv, pairs);
      std::string what = "S " + std::to_string(S) + ", " +
                         std::to_string(pairs) + " pairs, lead rank " +
                         std::to_string(lead.size());
      expectResultsClose(fused(stored, trainingAt(1), xStored, dOutStored),
                         expected, 1e-5, what);
      expectResultsClose(
          ring(stored, trainingAt(1), xStored, dOutStored, members), expected,
          1e-5, what + ", ring of " + std::to_string(members));
    }
}

TEST(AttentionKernel, KeyBlocksRunInStagesWithRowStatistics) {
  // What the executor's reference and ppc-profile read of a partition: a
  // key block runs 3 forward stages with three [rows] statistics and 2
  // backward ones with one more; a partition holding every key runs once,
  // in either layout.
  AttentionCase c{{2, 3}, 8, 6, 4, 5};
  OpDesc op = attentionOp(c);
  Partition p = attentionPartition(c, {{0, 2}, {1, 3}}, {2, 6});
  std::vector<float> none;
  auto boxes = [&](const Partition &part) {
    std::vector<TensorView> views;
    for (size_t i = 0; i < 3; ++i)
      views.push_back(boxView(none, op.operandShapes[i], part.inputs[i]));
    return views;
  };
  using Shapes = std::vector<std::vector<int64_t>>;
  EXPECT_EQ(numStages(op, boxes(p), true, false), 1);
  EXPECT_EQ(scratchShapes(op, boxes(p), false), Shapes{});
  for (int i : {1, 2})
    p.inputs[i] = withRange(p.inputs[i], 2, 3, 6);
  EXPECT_EQ(numStages(op, boxes(p), true, false), 3);
  EXPECT_EQ(numStages(op, boxes(p), true, true), 2);
  EXPECT_EQ(numStages(op, boxes(p), false, false), 3);
  // Rows: 2 samples x 2 heads x 4 query rows.
  EXPECT_EQ(scratchShapes(op, boxes(p), false), (Shapes{{16}, {16}, {16}}));
  EXPECT_EQ(scratchShapes(op, boxes(p), true), (Shapes{{16}}));
}

TEST(AttentionKernel, KeyBlocksRejectMismatchedStatistics) {
  AttentionCase c{{}, 4, 6, 3, 5};
  OpDesc op = attentionOp(c);
  auto x = randomInputs(c, 91);
  Partition p = wholePartition(op);
  p.inputs[1] = withRange(p.inputs[1], 0, 0, 3);
  p.inputs[2] = withRange(p.inputs[2], 0, 0, 3);
  std::vector<float> q = x[0], k = extractBox(x[1], c.key(), p.inputs[1]),
                     v = extractBox(x[2], c.value(), p.inputs[2]),
                     out(numElementsOf(c.result())), one(4), two(4), three(3);
  std::vector<TensorView> inputs = {viewOf(q, c.query()),
                                    boxView(k, c.key(), p.inputs[1]),
                                    boxView(v, c.value(), p.inputs[2])};
  std::vector<TensorView> outputs = {viewOf(out, c.result())};
  std::vector<TensorView> stats = {viewOf(one, {4}), viewOf(two, {4})};
  std::string error =
      ppc::test::statusText(forward(op, trainingAt(0), inputs, outputs, stats));
  EXPECT_NE(error.find("3 statistics buffers, got 2"), std::string::npos)
      << error;
  stats.push_back(viewOf(three, {3}));
  error =
      ppc::test::statusText(forward(op, trainingAt(0), inputs, outputs, stats));
  EXPECT_NE(error.find("one value per row (4)"), std::string::npos) << error;
  stats.back() = viewOf(two, {4});
  Box otherKeys = withRange(p.inputs[2], 0, 3, 6);
  std::vector<float> v2 = extractBox(x[2], c.value(), otherKeys);
  inputs[2] = boxView(v2, c.value(), otherKeys);
  error =
      ppc::test::statusText(forward(op, trainingAt(0), inputs, outputs, stats));
  EXPECT_NE(error.find("value must hold the key box's T range [0, 3)"),
            std::string::npos)
      << error;
}

TEST(AttentionKernel, LongSequencesSpanSeveralRowTiles) {
  // The kernel cuts the query rows into tiles of 128 (causal tiles skip the
  // keys past their last row); S = 300 gives three tiles, the partitions
  // start tiles off the multiples of 128.
  for (bool causal : {false, true}) {
    AttentionCase c{{2}, 300, 260, 8, 4, 0.3, causal, 0.1, 17};
    expectMatchesComposed(c, trainingAt(6), 61);
    std::vector<Partition> parts;
    for (Range b : splitRange(2, 2))
      for (Range s : splitRange(c.S, 3))
        parts.push_back(attentionPartition(c, {b}, s));
    expectPartitionsMatchWhole(attentionOp(c), trainingAt(6),
                               randomInputs(c, 62), parts);
  }
}

TEST(AttentionKernel, HeadsAfterPositionsMatchTransposedOperands) {
  for (bool causal : {false, true})
    for (double ratio : {0.0, 0.2}) {
      // B = 2, H = 3; S 5 (or 7) queries over T 6 keys, D 4, Dv 3.
      for (auto [S, T] : {Range{5, 6}, Range{7, 6}}) {
        AttentionCase c{{2, 3}, S, T, 4, 3, 0.45, causal, ratio, 5};
        KernelContext ctx = trainingAt(3);
        auto x = randomInputs(c, 71);
        std::vector<float> dOut = randomValues(numElementsOf(c.result()), 72);
        // The reference: the default layout on [B, H, ., .] operands.
        Result expected = fused(c, ctx, x, dOut);
        std::vector<std::vector<float>> xs = {swapMiddleDims(x[0], c.query()),
                                              swapMiddleDims(x[1], c.key()),
                                              swapMiddleDims(x[2], c.value())};
        Result actual;
        auto grads = runGrad(bshdAttentionOp(c), ctx, xs,
                             swapMiddleDims(dOut, c.result()), &actual.out);
        actual.out = swapMiddleDims(actual.out, headsAfter(c.result()));
        actual.dq = swapMiddleDims(grads[0], headsAfter(c.query()));
        actual.dk = swapMiddleDims(grads[1], headsAfter(c.key()));
        actual.dv = swapMiddleDims(grads[2], headsAfter(c.value()));
        std::string what = std::string("bshd S ") + std::to_string(S) +
                           (causal ? " causal" : "") +
                           (ratio > 0 ? " dropout" : "");
        expectResultsClose(actual, expected, 1e-6, what);

        // Partitions by samples, heads and query rows (12 of them, each
        // adding its partial dK and dV).
        std::vector<Partition> parts;
        for (Range b : splitRange(2, 2))
          for (Range h : splitRange(3, 3))
            for (Range s : splitRange(c.S, 2))
              parts.push_back(bshdAttentionPartition(c, b, h, s));
        expectPartitionsMatchWhole(bshdAttentionOp(c), ctx, xs, parts);
      }
    }
}

TEST(AttentionKernel, HeadsAfterPositionsNeedRankFour) {
  AttentionCase c{{2}, 4, 4, 3, 3};
  OpDesc op = attentionOp(c);
  op.attributes["layout"] = std::string("bshd");
  OpRun run =
      runOp(op, trainingAt(0), randomInputs(c, 3), {wholePartition(op)});
  EXPECT_EQ(run.error,
            "ppc.attention: layout \"bshd\" needs operands of rank 4, got 3");
  op.attributes["layout"] = std::string("sbhd");
  run = runOp(op, trainingAt(0), randomInputs(c, 3), {wholePartition(op)});
  EXPECT_EQ(run.error, "ppc.attention: layout \"sbhd\" is neither \"bhsd\" "
                       "nor \"bshd\"");
}

TEST(AttentionKernel, OnlyTheWantedGradientsAreWritten) {
  AttentionCase c{{2}, 5, 6, 4, 3, 0.5, true, 0.1, 3};
  auto x = randomInputs(c, 31);
  std::vector<float> dOut = randomValues(numElementsOf(c.result()), 32);
  Result all = fused(c, trainingAt(1), x, dOut);
  for (size_t wanted = 0; wanted < 3; ++wanted) {
    std::vector<bool> needsGrad(3, false);
    needsGrad[wanted] = true;
    auto grads =
        runGrad(attentionOp(c), trainingAt(1), x, dOut, nullptr, needsGrad);
    const std::vector<float> &expected = wanted == 0   ? all.dq
                                         : wanted == 1 ? all.dk
                                                       : all.dv;
    expectClose(grads[wanted], expected, 0, 0,
                "grad of operand " + std::to_string(wanted) + " alone");
  }
}

/// The error of a forward (and backward) run of `parts`.
void expectError(const AttentionCase &c, const std::vector<Partition> &parts,
                 const std::string &mentions) {
  OpDesc op = attentionOp(c);
  auto x = randomInputs(c, 41);
  std::string error = runOp(op, trainingAt(0), x, parts).error;
  EXPECT_NE(error.find("ppc.attention"), std::string::npos) << error;
  EXPECT_NE(error.find(mentions), std::string::npos)
      << "expected \"" << mentions << "\" in: " << error;
}

TEST(AttentionKernel, RejectsBoxesItCannotCompute) {
  AttentionCase c{{2}, 4, 6, 3, 5};
  Partition whole = wholePartition(attentionOp(c));
  Partition p = whole;
  p.inputs[1] = withRange(p.inputs[1], 1, 0, 5);
  // Part of the keys is a key block, whose values must be the same keys'.
  expectError(c, {p}, "value must hold the key box's T range [0, 5)");
  p = whole;
  p.inputs[1] = withRange(p.inputs[1], 2, 1, 3);
  expectError(c, {p}, "key must cover its whole D dim");
  p = whole;
  p.inputs[2] = withRange(p.inputs[2], 1, 2, 6);
  expectError(c, {p}, "value must cover its whole T dim");
  p = whole;
  p.inputs[2] = withRange(p.inputs[2], 2, 0, 4);
  expectError(c, {p}, "value must cover its whole Dv dim");
  p = whole;
  p.inputs[0] = withRange(p.inputs[0], 2, 0, 2);
  expectError(c, {p}, "query must cover its whole D dim");
  p = whole;
  p.outputs[0] = withRange(p.outputs[0], 2, 0, 4);
  expectError(c, {p}, "result must cover its whole Dv dim");
  p = whole;
  p.inputs[0] = withRange(p.inputs[0], 1, 1, 4);
  expectError(c, {p}, "query box does not hold the result's S rows");
  p = whole;
  p.inputs[1] = withRange(p.inputs[1], 0, 1, 2);
  expectError(c, {p}, "key box does not hold the result's leading");

  AttentionCase badRatio = c;
  badRatio.ratio = 1.0;
  expectError(badRatio, {whole}, "ratio");

  OpDesc mismatched =
      makeOp("ppc.attention", {{2, 4, 3}, {2, 6, 4}, {2, 6, 5}}, {{2, 4, 5}});
  EXPECT_NE(
      runOp(mismatched, trainingAt(0),
            {randomValues(24, 1), randomValues(48, 2), randomValues(60, 3)},
            {wholePartition(mismatched)})
          .error.find("D differs"),
      std::string::npos);
}

TEST(AttentionKernel, BackwardRejectsBoxesItCannotCompute) {
  AttentionCase c{{}, 4, 6, 3, 5};
  OpDesc op = attentionOp(c);
  auto x = randomInputs(c, 51);
  Partition p = wholePartition(op);
  p.inputs[1] = withRange(p.inputs[1], 0, 1, 6);
  std::vector<std::vector<float>> dys = {
      randomValues(numElementsOf(c.result()), 52)};
  // The forward fails first; run the backward kernel directly.
  std::vector<float> dy = dys[0], q = x[0],
                     k = extractBox(x[1], c.key(), p.inputs[1]), v = x[2],
                     dq(q.size()), dk(k.size()), dv(v.size());
  std::vector<TensorView> inputs = {viewOf(q, c.query()),
                                    boxView(k, c.key(), p.inputs[1]),
                                    viewOf(v, c.value())};
  std::vector<TensorView> grads = {viewOf(dq, c.query()),
                                   boxView(dk, c.key(), p.inputs[1]),
                                   viewOf(dv, c.value())};
  std::vector<TensorView> none, outputGrads = {viewOf(dy, c.result())};
  std::string error = ppc::test::statusText(
      backward(op, trainingAt(0), inputs, none, outputGrads, grads, none));
  EXPECT_NE(error.find("key must cover its whole T dim"), std::string::npos)
      << error;
}

} // namespace
