//===- MoeKernelTest.cpp - ppc.moe_dispatch and ppc.moe_combine on cpu ----===//
//
// The routing against a hand-worked sample (choice-major slots, a tie, a
// dropped choice), both kernels' forward against that routing written out
// by hand, their gradients against finite differences (the load-balancing
// loss's against its formula), and every split of their iteration spaces
// (experts, samples, positions, hidden) against the whole op.
//
//===----------------------------------------------------------------------===//

#include "KernelTestUtil.h"
#include "MoeRouting.h"

using namespace ppc::runtime;
using namespace ppc::runtime::test;

namespace {

// One sample of 4 tokens over 3 experts, top 2, 2 slots per expert.
// Token 0: experts 0 then 1; token 1: 0 then 2; token 2: 1 and 2 tie at
// 0.4, so 1 then 2; token 3: 0 then 1. First choices fill expert 0's two
// slots with tokens 0 and 1 and expert 1's first with token 2; token 3's
// first choice (expert 0) is dropped. Second choices: token 0 -> expert 1
// slot 1, token 1 -> expert 2 slot 0, token 2 -> expert 2 slot 1, token
// 3 -> expert 1, full: dropped.
const std::vector<float> kProbs = {0.5f, 0.3f, 0.2f,  // token 0
                                   0.6f, 0.1f, 0.3f,  // token 1
                                   0.2f, 0.4f, 0.4f,  // token 2
                                   0.7f, 0.2f, 0.1f}; // token 3

TEST(MoeRouting, FillsSlotsByChoiceThenPositionAndDropsOverCapacity) {
  MoeRoute r;
  routeSample(kProbs.data(), 3, /*S=*/4, /*E=*/3, /*k=*/2, /*C=*/2, r);
  EXPECT_EQ(r.expert, (std::vector<int32_t>{0, 1, 0, 2, 1, 2, 0, 1}));
  EXPECT_EQ(r.slot, (std::vector<int32_t>{0, 1, 1, 0, 0, 1, -1, -1}));
  EXPECT_EQ(r.token, (std::vector<int32_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(r.choice, (std::vector<int32_t>{0, 0, 0, 1, 1, 1}));
}

TEST(MoeRouting, ANaNRanksLastAndEmptySlotsStayEmpty) {
  std::vector<float> probs = {NAN, 0.1f, 0.2f};
  MoeRoute r;
  routeSample(probs.data(), 3, 1, 3, 2, 2, r);
  EXPECT_EQ(r.expert, (std::vector<int32_t>{2, 1}));
  EXPECT_EQ(r.token, (std::vector<int32_t>{-1, -1, 0, -1, 0, -1}));
}

const std::vector<int64_t> kTokens = {1, 4, 2}, kProbsShape = {1, 4, 3},
                           kSlots = {3, 1, 2, 2};

TEST(MoeDispatch, CopiesTokensToTheirSlots) {
  OpDesc op = makeOp("ppc.moe_dispatch", {kTokens, kProbsShape}, {kSlots},
                     {{"top_k", int64_t{2}}});
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8}; // token s: 2s+1, 2s+2
  OpRun run = runOp(op, {}, {x, kProbs}, {wholePartition(op)});
  ASSERT_EQ(run.error, "");
  // [e][c]: e0 = tokens 0, 1; e1 = tokens 2, 0; e2 = tokens 1, 2.
  EXPECT_EQ(run.outputs[0],
            (std::vector<float>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}));
}

TEST(MoeCombine, SumsKeptSlotsWeightedByTheirProbabilities) {
  std::vector<float> slots(12);
  for (size_t i = 0; i < slots.size(); ++i)
    slots[i] = static_cast<float>(i + 1);
  for (bool normalize : {false, true}) {
    OpDesc op = makeOp(
        "ppc.moe_combine", {kSlots, kProbsShape}, {kTokens},
        {{"top_k", int64_t{2}}, {"normalize", int64_t{normalize ? 1 : 0}}});
    OpRun run = runOp(op, {}, {slots, kProbs}, {wholePartition(op)});
    ASSERT_EQ(run.error, "");
    // Slot (e, c) holds {4e + 2c + 1, 4e + 2c + 2}.
    auto slot = [&](int e, int c, int h) { return 4.0 * e + 2 * c + 1 + h; };
    for (int h = 0; h < 2; ++h) {
      double z0 = normalize ? 0.8 : 1, z1 = normalize ? 0.9 : 1,
             z2 = normalize ? 0.8 : 1, z3 = normalize ? 0.9 : 1;
      std::vector<double> expected = {
          (0.5 * slot(0, 0, h) + 0.3 * slot(1, 1, h)) / z0,
          (0.6 * slot(0, 1, h) + 0.3 * slot(2, 0, h)) / z1,
          (0.4 * slot(1, 0, h) + 0.4 * slot(2, 1, h)) / z2,
          0.0 / z3}; // both of token 3's choices dropped
      for (int s = 0; s < 4; ++s)
        EXPECT_NEAR(run.outputs[0][2 * s + h], expected[s], 1e-5)
            << "token " << s << " h " << h << " normalize " << normalize;
    }
  }
}

// A larger case: 3 samples of 6 tokens, 4 experts, top 2, 2 slots each
// (some choices dropped), hidden 4. Probabilities well apart, so finite
// differences do not change the routing.
const std::vector<int64_t> kBigTokens = {3, 6, 4}, kBigProbs = {3, 6, 4},
                           kBigSlots = {4, 3, 2, 4};

std::vector<float> separatedProbs() {
  std::vector<float> p(numElementsOf(kBigProbs));
  for (size_t i = 0; i < p.size(); ++i)
    p[i] = 0.05f + 0.9f * static_cast<float>((i * 7) % 24) / 24.0f;
  return p;
}

TEST(MoeDispatch, GradientMatchesFiniteDifferences) {
  OpDesc op = makeOp("ppc.moe_dispatch", {kBigTokens, kBigProbs}, {kBigSlots},
                     {{"top_k", int64_t{2}}});
  checkGradients(op, {}, {randomValues(72, 3), separatedProbs()},
                 {true, false});
}

TEST(MoeCombine, GradientMatchesFiniteDifferences) {
  for (int64_t normalize : {0, 1}) {
    OpDesc op = makeOp("ppc.moe_combine", {kBigSlots, kBigProbs}, {kBigTokens},
                       {{"top_k", int64_t{2}}, {"normalize", normalize}});
    checkGradients(op, {}, {randomValues(96, 4), separatedProbs()});
  }
}

// With the load-balancing loss too: each probability's share is written
// once, by the partition of its expert and the first hidden range.
TEST(MoeDispatch, PartitionsOfExpertsSamplesAndHiddenMatchWhole) {
  // Iteration box (e, b, c, h): tokens [b, :, h], probs [b, :, :].
  auto partition = [&](const Box &it) {
    Box tokens =
        withRange(withRange(wholeBox(kBigTokens), 0, it.lo[1], it.hi[1]), 2,
                  it.lo[3], it.hi[3]);
    Box probs = withRange(wholeBox(kBigProbs), 0, it.lo[1], it.hi[1]);
    return Partition{{tokens, probs}, {it}};
  };
  for (double coef : {0.0, 0.05}) {
    OpDesc op = makeOp("ppc.moe_dispatch", {kBigTokens, kBigProbs}, {kBigSlots},
                       {{"top_k", int64_t{2}}, {"aux_loss_coef", coef}});
    for (std::vector<int64_t> parts :
         {std::vector<int64_t>{2, 1, 1, 1}, std::vector<int64_t>{4, 3, 1, 2},
          std::vector<int64_t>{1, 3, 1, 4}}) {
      std::vector<Partition> partitions;
      for (const Box &it : gridBoxes(kBigSlots, parts))
        partitions.push_back(partition(it));
      expectPartitionsMatchWhole(op, {},
                                 {randomValues(72, 5), separatedProbs()},
                                 partitions, {true, coef > 0});
    }
  }
}

TEST(MoeCombine, PartitionsOfSamplesPositionsAndHiddenMatchWhole) {
  OpDesc op = makeOp("ppc.moe_combine", {kBigSlots, kBigProbs}, {kBigTokens},
                     {{"top_k", int64_t{2}}, {"normalize", int64_t{1}}});
  // Iteration box (b, s, h): slots [:, b, :, h], probs [b, :, :].
  auto partition = [&](const Box &it) {
    Box slots = withRange(withRange(wholeBox(kBigSlots), 1, it.lo[0], it.hi[0]),
                          3, it.lo[2], it.hi[2]);
    Box probs = withRange(wholeBox(kBigProbs), 0, it.lo[0], it.hi[0]);
    return Partition{{slots, probs}, {it}};
  };
  for (std::vector<int64_t> parts :
       {std::vector<int64_t>{3, 1, 1}, std::vector<int64_t>{1, 3, 2},
        std::vector<int64_t>{3, 2, 4}}) {
    std::vector<Partition> partitions;
    for (const Box &it : gridBoxes(kBigTokens, parts))
      partitions.push_back(partition(it));
    expectPartitionsMatchWhole(op, {}, {randomValues(96, 6), separatedProbs()},
                               partitions);
  }
}

// The load-balancing loss: with the slots' gradient zero, the
// probabilities' gradient is coef * E * n_e / (k * S^2 * B) per sample's
// choices n_e of expert e (before drops), written out here from the
// routing; and it is the derivative of the loss the op's description
// states, by finite differences of that loss with the routing held.
TEST(MoeDispatch, LoadBalancingLossGradient) {
  const double coef = 0.01;
  OpDesc op = makeOp("ppc.moe_dispatch", {kBigTokens, kBigProbs}, {kBigSlots},
                     {{"top_k", int64_t{2}}, {"aux_loss_coef", coef}});
  std::vector<float> probs = separatedProbs();
  std::vector<std::vector<float>> zero = {
      std::vector<float>(numElementsOf(kBigSlots), 0.0f)};
  OpRun run =
      runOp(op, {}, {randomValues(72, 3), probs}, {wholePartition(op)}, &zero);
  ASSERT_EQ(run.error, "");
  const int64_t B = 3, S = 6, E = 4, k = 2;
  auto auxLoss = [&](const std::vector<float> &p,
                     const std::vector<MoeRoute> &routes) {
    double loss = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t e = 0; e < E; ++e) {
        double n = 0, mass = 0;
        for (int32_t chosen : routes[b].expert)
          n += chosen == e;
        for (int64_t s = 0; s < S; ++s)
          mass += p[(b * S + s) * E + e];
        loss += coef * E / (k * S * S) * n * mass / B;
      }
    return loss;
  };
  std::vector<MoeRoute> routes(B);
  for (int64_t b = 0; b < B; ++b)
    routeSample(probs.data() + b * S * E, E, S, E, k, 2, routes[b]);
  for (int64_t i = 0; i < B * S * E; ++i) {
    std::vector<float> plus = probs, minus = probs;
    plus[i] += 1e-3f;
    minus[i] -= 1e-3f;
    double numeric = (auxLoss(plus, routes) - auxLoss(minus, routes)) /
                     (static_cast<double>(plus[i]) - minus[i]);
    EXPECT_NEAR(run.inputGrads[1][i], numeric, 1e-6) << "element " << i;
  }
  // Four experts chosen twice per token: at a perfect balance each
  // probability's gradient would be coef / (S * B); a nonzero one here.
  EXPECT_GT(
      *std::max_element(run.inputGrads[1].begin(), run.inputGrads[1].end()),
      0.0f);
  // Without the coefficient the probabilities get nothing.
  OpDesc plain = makeOp("ppc.moe_dispatch", {kBigTokens, kBigProbs},
                        {kBigSlots}, {{"top_k", int64_t{2}}});
  OpRun none = runOp(plain, {}, {randomValues(72, 3), probs},
                     {wholePartition(plain)}, &zero);
  ASSERT_EQ(none.error, "");
  for (float g : none.inputGrads[1])
    EXPECT_EQ(g, 0.0f);
}

TEST(MoeDispatch, RefusesAPartitionWithoutItsSamplesWholeRouting) {
  OpDesc op = makeOp("ppc.moe_dispatch", {kBigTokens, kBigProbs}, {kBigSlots},
                     {{"top_k", int64_t{2}}});
  Box probs = withRange(wholeBox(kBigProbs), 1, 0, 3); // half the positions
  Partition p{{wholeBox(kBigTokens), probs}, {wholeBox(kBigSlots)}};
  OpRun run = runOp(op, {}, {randomValues(72, 5), separatedProbs()}, {p});
  EXPECT_NE(run.error.find("every position and expert"), std::string::npos)
      << run.error;
  OpDesc badK = makeOp("ppc.moe_dispatch", {kBigTokens, kBigProbs}, {kBigSlots},
                       {{"top_k", int64_t{5}}});
  run = runOp(badK, {}, {randomValues(72, 5), separatedProbs()},
              {wholePartition(badK)});
  EXPECT_NE(run.error.find("top_k 5 must be in [1, 4]"), std::string::npos)
      << run.error;
}

} // namespace
