//===- MoeCases.cpp - the cuda MoE kernels against the cpu ones -----------===//
//
// ppc.moe_dispatch (with the load-balancing loss or not) and
// ppc.moe_combine (normalized or not) on the two
// backends: whole, and every partition of grids over their experts,
// samples, positions and hidden dims; with probabilities that tie and
// capacities that drop choices, in f32 and bf16; and the same errors for a
// partition without its samples' whole routing or a top_k out of range.
//
//===----------------------------------------------------------------------===//

#include "ErrorAgreement.h"

namespace ppc::runtime::test {
namespace {

// 3 samples of 6 tokens, 4 experts, top 2, 2 slots each (some choices
// dropped), hidden 4.
const std::vector<int64_t> kTokens = {3, 6, 4}, kProbs = {3, 6, 4},
                           kSlots = {4, 3, 2, 4};

/// Probabilities with ties (every third token's first two experts equal).
std::vector<float> probsWithTies() {
  std::vector<float> p(numElementsOf(kProbs));
  for (size_t i = 0; i < p.size(); ++i)
    p[i] = 0.05f + 0.9f * static_cast<float>((i * 7) % 24) / 24.0f;
  for (size_t t = 0; t < p.size() / 4; t += 3)
    p[4 * t + 1] = p[4 * t];
  return p;
}

OpDesc moeOp(const std::string &kind, int64_t topK, int64_t normalize = 0) {
  bool dispatch = kind == "ppc.moe_dispatch";
  return makeOp(kind, {dispatch ? kTokens : kSlots, kProbs},
                {dispatch ? kSlots : kTokens},
                {{"top_k", topK}, {"normalize", normalize}});
}

/// Dispatch's iteration box (e, b, c, h): tokens [b, :, h], probs
/// [b, :, :], slots the box.
Partition dispatchPartition(const Box &it) {
  Box tokens = withRange(withRange(wholeBox(kTokens), 0, it.lo[1], it.hi[1]), 2,
                         it.lo[3], it.hi[3]);
  Box probs = withRange(wholeBox(kProbs), 0, it.lo[1], it.hi[1]);
  return Partition{{tokens, probs}, {it}};
}

/// Combine's iteration box (b, s, h): slots [:, b, :, h], probs [b, :, :].
Partition combinePartition(const Box &it) {
  Box slots = withRange(withRange(wholeBox(kSlots), 1, it.lo[0], it.hi[0]), 3,
                        it.lo[2], it.hi[2]);
  Box probs = withRange(wholeBox(kProbs), 0, it.lo[0], it.hi[0]);
  return Partition{{slots, probs}, {it}};
}

TEST(CudaMoe, DispatchAgrees) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (DType dtype : {DType::F32, DType::BF16})
    for (int64_t topK : {1, 2, 3}) {
      AgreementCase c =
          caseOf(moeOp("ppc.moe_dispatch", topK), {{}, probsWithTies()});
      c.needsGrad = {true, false};
      c.dtype = dtype;
      if (dtype == DType::BF16)
        c.atol = c.rtol = 1e-2;
      std::string name = "dispatch top " + std::to_string(topK) +
                         (dtype == DType::BF16 ? " bf16" : "");
      agreeWholeAndGrid(c, name, kSlots, {2, 3, 1, 2}, dispatchPartition);
      agreeWholeAndGrid(c, name, kSlots, {4, 1, 1, 1}, dispatchPartition);
    }
}

TEST(CudaMoe, DispatchWithLoadBalancingLossAgrees) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (DType dtype : {DType::F32, DType::BF16}) {
    OpDesc op = moeOp("ppc.moe_dispatch", 2);
    op.attributes["aux_loss_coef"] = 0.05;
    AgreementCase c = caseOf(op, {{}, probsWithTies()});
    c.dtype = dtype;
    if (dtype == DType::BF16)
      c.atol = c.rtol = 1e-2;
    std::string name = std::string("dispatch with aux loss") +
                       (dtype == DType::BF16 ? " bf16" : "");
    agreeWholeAndGrid(c, name, kSlots, {2, 3, 1, 2}, dispatchPartition);
    agreeWholeAndGrid(c, name, kSlots, {4, 1, 1, 1}, dispatchPartition);
  }
}

TEST(CudaMoe, CombineAgrees) {
  PPC_REQUIRE_CUDA_BACKEND();
  for (DType dtype : {DType::F32, DType::BF16})
    for (int64_t normalize : {0, 1})
      for (int64_t topK : {1, 2}) {
        AgreementCase c = caseOf(moeOp("ppc.moe_combine", topK, normalize),
                                 {{}, probsWithTies()});
        c.dtype = dtype;
        if (dtype == DType::BF16)
          c.atol = c.rtol = 2e-2;
        std::string name = "combine top " + std::to_string(topK) +
                           (normalize ? " normalized" : "") +
                           (dtype == DType::BF16 ? " bf16" : "");
        agreeWholeAndGrid(c, name, kTokens, {3, 2, 2}, combinePartition);
        agreeWholeAndGrid(c, name, kTokens, {1, 3, 4}, combinePartition);
      }
}

TEST(CudaMoe, SameErrors) {
  PPC_REQUIRE_CUDA_BACKEND();
  // Half the positions of the probabilities: no whole routing.
  OpDesc dispatch = moeOp("ppc.moe_dispatch", 2);
  Partition half{{wholeBox(kTokens), withRange(wholeBox(kProbs), 1, 0, 3)},
                 {wholeBox(kSlots)}};
  expectSameErrorsMentioning(dispatch, half, "every position and expert");
  OpDesc combine = moeOp("ppc.moe_combine", 2);
  Partition someExperts{
      {withRange(wholeBox(kSlots), 0, 0, 2), wholeBox(kProbs)},
      {wholeBox(kTokens)}};
  expectSameErrorsMentioning(combine, someExperts, "every expert's slots");
  OpDesc badK = moeOp("ppc.moe_combine", 5);
  expectSameErrorsMentioning(badK, wholePartition(badK),
                             "top_k 5 must be in [1, 4]");
}

} // namespace
} // namespace ppc::runtime::test
