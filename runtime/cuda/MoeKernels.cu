//===- MoeKernels.cu - mixture-of-experts dispatch and combine ------------===//
//
// ppc.moe_dispatch and ppc.moe_combine on the device, as their cpu twins
// (runtime/cpu/MoeKernels.cpp) compute them: every partition routes each of
// its samples from the whole sample's probabilities (MoeRouting.h's rule),
// here in two passes: a thread per token picks its top_k experts, then a
// thread per (sample, expert) fills that expert's slots in choice, then
// position order. The maps live in the kernel's workspace as floats
// (exact: positions and slots stay far below 2^24). Every element of a
// result or gradient is written by one thread: dispatch's token gradient
// sums the token's slots (and its probabilities' gradient is the
// load-balancing loss's, from each sample's choices per expert), combine's
// slot gradient is its token's, and a token's probabilities' gradient is
// one thread's. Views as stored.
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"

#include "KernelChecks.h"
#include "MoeRouting.h"

namespace ppc::runtime::cuda {
namespace {

using Views = std::vector<KernelView>;

/// The routing of the samples [b0, b0 + samples) of a partition of the
/// op's shape, on the device: per token and choice its expert and slot
/// (-1: dropped), per expert and slot its token (-1: empty), sample-major.
struct Routes : MoeShape {
  int64_t b0 = 0, samples = 0;
  float *expert = nullptr, *slot = nullptr, *token = nullptr;
};

/// Checks the views as the cpu kernels do and routes the samples of
/// `probs` (which holds them whole).
absl::Status route(const OpDesc &op, ExecContext &ctx, const KernelView &slots,
                   const KernelView &probs, Routes &r) {
  if (absl::Status s = moeShape(op, slots, probs, r); !s.ok())
    return s;
  r.b0 = probs.lo[0];
  r.samples = probs.extent(0);
  const int64_t choices = r.samples * r.positions * r.topK;
  const int64_t slotCount = r.samples * r.experts * r.capacity;
  if (choices == 0 || slotCount == 0)
    return {};
  if (!ctx.workspace)
    return absl::FailedPreconditionError(op.kind + ": no workspace");
  r.expert = ctx.workspace->floats(choices);
  r.slot = ctx.workspace->floats(choices);
  r.token = ctx.workspace->floats(slotCount);
  if (!r.expert || !r.slot || !r.token)
    return absl::ResourceExhaustedError(
        op.kind + ": out of device memory for its routing");
  const Elements p = probs.elements;
  const Routes m = r;
  // A token's top k: k passes of the largest not yet taken (a NaN ranks
  // below every number; ties to the lower expert).
  launch(ctx.stream, m.samples * m.positions, [=] PPC_HD(int64_t t) {
    const int64_t row = t * m.experts;
    for (int64_t j = 0; j < m.topK; ++j) {
      int64_t best = -1;
      float bestValue = 0;
      for (int64_t e = 0; e < m.experts; ++e) {
        bool taken = false;
        for (int64_t i = 0; i < j; ++i)
          taken = taken || m.expert[t * m.topK + i] == static_cast<float>(e);
        if (taken)
          continue;
        float v = static_cast<float>(p[row + e]);
        if (v != v)
          v = -INFINITY;
        if (best < 0 || v > bestValue) {
          best = e;
          bestValue = v;
        }
      }
      m.expert[t * m.topK + j] = static_cast<float>(best);
    }
  });
  // An expert's slots: its choices in choice, then position order.
  launch(ctx.stream, m.samples * m.experts, [=] PPC_HD(int64_t i) {
    const int64_t b = i / m.experts, e = i % m.experts;
    float *token = m.token + i * m.capacity;
    int64_t filled = 0;
    for (int64_t j = 0; j < m.topK; ++j)
      for (int64_t s = 0; s < m.positions; ++s) {
        const int64_t k = (b * m.positions + s) * m.topK + j;
        if (m.expert[k] != static_cast<float>(e))
          continue;
        if (filled == m.capacity) {
          m.slot[k] = -1;
          continue;
        }
        m.slot[k] = static_cast<float>(filled);
        token[filled++] = static_cast<float>(s);
      }
    for (; filled < m.capacity; ++filled)
      token[filled] = -1;
  });
  return {};
}

/// Token (b, s)'s weight of choice j (0 where dropped) and the sum of its
/// k choices' probabilities (1 unless `normalize`), b and s in the
/// partition's coordinates of the routing.
struct Weights {
  PPC_HD static float scaleOf(const Routes &m, Elements p, int64_t t,
                              bool normalize) {
    if (!normalize)
      return 1.0f;
    float total = 0;
    for (int64_t j = 0; j < m.topK; ++j)
      total += static_cast<float>(
          p[t * m.experts + static_cast<int64_t>(m.expert[t * m.topK + j])]);
    return total;
  }
  PPC_HD static float weightOf(const Routes &m, Elements p, int64_t t,
                               int64_t j, float scale) {
    const int64_t k = t * m.topK + j;
    if (m.slot[k] < 0 || scale == 0)
      return 0.0f;
    return static_cast<float>(
               p[t * m.experts + static_cast<int64_t>(m.expert[k])]) /
           scale;
  }
};

absl::Status dispatchForward(const OpDesc &op, const KernelContext &,
                             ExecContext &ctx, const Views &inputs,
                             const Views &outputs, const Views &) {
  if (absl::Status s = checkForwardArity(op, inputs, 2, outputs, 1); !s.ok())
    return s;
  const KernelView &tokens = inputs[0], &slots = outputs[0];
  Routes r;
  if (absl::Status s = route(op, ctx, slots, inputs[1], r); !s.ok())
    return s;
  if (absl::Status s = moeTokensWhole(op, tokens, r); !s.ok())
    return s;
  const DeviceBox box = slots.box;
  const Elements x = tokens.elements, y = slots.elements;
  const int64_t width = tokens.extent(2), tokenB0 = tokens.lo[0],
                tokenH0 = tokens.lo[2];
  const Routes m = r;
  launch(ctx.stream, box.count(), [=] PPC_HD(int64_t i) {
    int64_t at[kMaxRank];
    box.indexOf(i, at); // e, b, c, h (global)
    const int64_t b = at[1] - m.b0;
    const float s = m.token[(b * m.experts + at[0]) * m.capacity + at[2]];
    y[i] = s < 0 ? 0.0f
                 : static_cast<float>(x[((at[1] - tokenB0) * m.positions +
                                         static_cast<int64_t>(s)) *
                                            width +
                                        (at[3] - tokenH0)]);
  });
  return {};
}

absl::Status dispatchBackward(const OpDesc &op, const KernelContext &,
                              ExecContext &ctx, const Views &inputs,
                              const Views &outputs, const Views &outputGrads,
                              const Views &inputGrads, const Views &) {
  if (absl::Status s = checkBackwardArity(op, inputs, 2, outputs, 1,
                                          outputGrads, inputGrads);
      !s.ok())
    return s;
  // The routing is a choice: the probabilities get no gradient from the
  // slots, only the load-balancing loss's (aux_loss_coef).
  const KernelView &dTokens = inputGrads[0], &dSlots = outputGrads[0],
                   &dProbs = inputGrads[1];
  MoeShape shape;
  if (absl::Status s = moeShape(op, dSlots, inputs[1], shape); !s.ok())
    return s;
  const double aux =
      dProbs.present()
          ? moeAuxGradientPerChoice(op, shape, inputs[1].shape[0], dSlots.lo[3])
          : 0.0;
  if (!dTokens.present() && aux == 0)
    return {};
  Routes r;
  if (absl::Status s = route(op, ctx, dSlots, inputs[1], r); !s.ok())
    return s;
  const DeviceBox slotBox = dSlots.box;
  const Routes m = r;
  if (aux != 0 && m.samples * m.positions > 0) {
    // Each (sample, expert)'s choices, then each probability's share.
    float *choices = ctx.workspace->floats(m.samples * m.experts);
    if (!choices)
      return absl::ResourceExhaustedError(
          op.kind + ": out of device memory for its load-balancing loss");
    launch(ctx.stream, m.samples * m.experts, [=] PPC_HD(int64_t i) {
      const int64_t b = i / m.experts, e = i % m.experts;
      float n = 0;
      for (int64_t k = b * m.positions * m.topK;
           k < (b + 1) * m.positions * m.topK; ++k)
        n += m.expert[k] == static_cast<float>(e) ? 1.0f : 0.0f;
      choices[i] = n;
    });
    const DeviceBox probBox = dProbs.box;
    const Elements dp = dProbs.elements;
    const float perChoice = static_cast<float>(aux);
    launch(ctx.stream, probBox.count(), [=] PPC_HD(int64_t i) {
      int64_t at[kMaxRank];
      probBox.indexOf(i, at); // b, s, e (global)
      if (at[2] < slotBox.lo[0] || at[2] >= slotBox.hi[0] ||
          at[0] < slotBox.lo[1] || at[0] >= slotBox.hi[1])
        return;
      dp[i] += perChoice * choices[(at[0] - m.b0) * m.experts + at[2]];
    });
  }
  if (!dTokens.present())
    return {};
  if (absl::Status s = moeTokensWhole(op, dTokens, r); !s.ok())
    return s;
  const DeviceBox box = dTokens.box;
  const Elements dx = dTokens.elements, dy = dSlots.elements;
  launch(ctx.stream, box.count(), [=] PPC_HD(int64_t i) {
    int64_t at[kMaxRank];
    box.indexOf(i, at); // b, s, h (global)
    const int64_t t = (at[0] - m.b0) * m.positions + at[1];
    float sum = 0;
    for (int64_t j = 0; j < m.topK; ++j) {
      const int64_t e = static_cast<int64_t>(m.expert[t * m.topK + j]);
      const float c = m.slot[t * m.topK + j];
      if (c < 0 || e < slotBox.lo[0] || e >= slotBox.hi[0])
        continue;
      sum += static_cast<float>(dy[(((e - slotBox.lo[0]) * slotBox.extent(1) +
                                     (at[0] - slotBox.lo[1])) *
                                        m.capacity +
                                    static_cast<int64_t>(c)) *
                                       slotBox.extent(3) +
                                   (at[2] - slotBox.lo[3])]);
    }
    dx[i] += sum;
  });
  return {};
}

absl::Status combineForward(const OpDesc &op, const KernelContext &,
                            ExecContext &ctx, const Views &inputs,
                            const Views &outputs, const Views &) {
  if (absl::Status s = checkForwardArity(op, inputs, 2, outputs, 1); !s.ok())
    return s;
  const KernelView &slots = inputs[0], &probs = inputs[1], &tokens = outputs[0];
  Routes r;
  if (absl::Status s = route(op, ctx, slots, probs, r); !s.ok())
    return s;
  if (absl::Status s = moeExpertsWhole(op, slots, r); !s.ok())
    return s;
  const bool normalize = op.getInt("normalize", 0) != 0;
  const DeviceBox box = tokens.box, slotBox = slots.box;
  const Elements y = slots.elements, p = probs.elements, out = tokens.elements;
  const Routes m = r;
  launch(ctx.stream, box.count(), [=] PPC_HD(int64_t i) {
    int64_t at[kMaxRank];
    box.indexOf(i, at); // b, s, h (global)
    const int64_t t = (at[0] - m.b0) * m.positions + at[1];
    const float scale = Weights::scaleOf(m, p, t, normalize);
    float sum = 0;
    for (int64_t j = 0; j < m.topK; ++j) {
      const float g = Weights::weightOf(m, p, t, j, scale);
      if (g == 0)
        continue;
      const int64_t e = static_cast<int64_t>(m.expert[t * m.topK + j]);
      const int64_t c = static_cast<int64_t>(m.slot[t * m.topK + j]);
      sum += g * static_cast<float>(
                     y[((e * slotBox.extent(1) + (at[0] - slotBox.lo[1])) *
                            m.capacity +
                        c) *
                           slotBox.extent(3) +
                       (at[2] - slotBox.lo[3])]);
    }
    out[i] = sum;
  });
  return {};
}

absl::Status combineBackward(const OpDesc &op, const KernelContext &,
                             ExecContext &ctx, const Views &inputs,
                             const Views &outputs, const Views &outputGrads,
                             const Views &inputGrads, const Views &) {
  if (absl::Status s = checkBackwardArity(op, inputs, 2, outputs, 1,
                                          outputGrads, inputGrads);
      !s.ok())
    return s;
  const KernelView &slots = inputs[0], &probs = inputs[1],
                   &dTokens = outputGrads[0];
  const KernelView &dSlots = inputGrads[0], &dProbs = inputGrads[1];
  Routes r;
  if (absl::Status s = route(op, ctx, slots, probs, r); !s.ok())
    return s;
  if (absl::Status s = moeExpertsWhole(op, slots, r); !s.ok())
    return s;
  const bool normalize = op.getInt("normalize", 0) != 0;
  const DeviceBox tokenBox = dTokens.box, slotBox = slots.box;
  const Elements y = slots.elements, p = probs.elements, dy = dTokens.elements;
  const Routes m = r;
  const int64_t width = tokenBox.extent(2);
  // A slot's gradient: its weight times its token's, where the partition
  // holds that token.
  if (dSlots.present()) {
    const Elements dSlot = dSlots.elements;
    launch(ctx.stream, slotBox.count(), [=] PPC_HD(int64_t i) {
      int64_t at[kMaxRank];
      slotBox.indexOf(i, at); // e, b, c, h (global)
      const int64_t b = at[1] - m.b0;
      const float s = m.token[(b * m.experts + at[0]) * m.capacity + at[2]];
      if (s < 0 || s < tokenBox.lo[1] || s >= tokenBox.hi[1] ||
          at[3] < tokenBox.lo[2] || at[3] >= tokenBox.hi[2])
        return;
      const int64_t t = b * m.positions + static_cast<int64_t>(s);
      int64_t j = 0;
      while (j < m.topK &&
             !(m.expert[t * m.topK + j] == static_cast<float>(at[0]) &&
               m.slot[t * m.topK + j] == static_cast<float>(at[2])))
        ++j;
      if (j == m.topK) // the token map and the choices agree: never
        return;
      const float g =
          Weights::weightOf(m, p, t, j, Weights::scaleOf(m, p, t, normalize));
      dSlot[i] += g * static_cast<float>(
                          dy[((at[1] - tokenBox.lo[0]) * tokenBox.extent(1) +
                              (static_cast<int64_t>(s) - tokenBox.lo[1])) *
                                 width +
                             (at[3] - tokenBox.lo[2])]);
    });
  }
  // A token's probabilities: the chain rule of its weights from the dot
  // products of its slots with its gradient over the partition's hidden
  // range, one thread per token.
  if (dProbs.present() && r.topK <= 8) {
    const Elements dp = dProbs.elements;
    launch(ctx.stream, tokenBox.extent(0) * tokenBox.extent(1),
           [=] PPC_HD(int64_t i) {
             const int64_t b = tokenBox.lo[0] + i / tokenBox.extent(1);
             const int64_t s = tokenBox.lo[1] + i % tokenBox.extent(1);
             const int64_t t = (b - m.b0) * m.positions + s;
             const float scale = Weights::scaleOf(m, p, t, normalize);
             if (scale == 0)
               return;
             float dg[8], mixed = 0;
             for (int64_t j = 0; j < m.topK; ++j) {
               dg[j] = 0;
               const int64_t c = static_cast<int64_t>(m.slot[t * m.topK + j]);
               if (c < 0)
                 continue;
               const int64_t e = static_cast<int64_t>(m.expert[t * m.topK + j]);
               const int64_t slotRow =
                   ((e * slotBox.extent(1) + (b - slotBox.lo[1])) * m.capacity +
                    c) *
                       slotBox.extent(3) +
                   (tokenBox.lo[2] - slotBox.lo[3]);
               const int64_t tokenRow = i * width; // (b, s)'s row
               for (int64_t h = 0; h < width; ++h)
                 dg[j] += static_cast<float>(y[slotRow + h]) *
                          static_cast<float>(dy[tokenRow + h]);
               if (normalize)
                 mixed += dg[j] * Weights::weightOf(m, p, t, j, scale);
             }
             const int64_t row =
                 (b - m.b0) * m.positions * m.experts + s * m.experts;
             for (int64_t j = 0; j < m.topK; ++j) {
               const int64_t e = static_cast<int64_t>(m.expert[t * m.topK + j]);
               dp[row + e] += (dg[j] - mixed) / scale;
             }
           });
  } else if (dProbs.present()) {
    return absl::UnimplementedError(
        op.kind + ": the cuda backend takes top_k up to 8, not " +
        std::to_string(r.topK));
  }
  return {};
}

} // namespace

void registerMoeKernels(CudaKernelTable &table) {
  table["ppc.moe_dispatch"] = {dispatchForward, dispatchBackward, true, false};
  table["ppc.moe_combine"] = {combineForward, combineBackward, true, false};
}

} // namespace ppc::runtime::cuda
