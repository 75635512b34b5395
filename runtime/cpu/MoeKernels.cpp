//===- MoeKernels.cpp - mixture-of-experts dispatch and combine -----------===//
//
// ppc.moe_dispatch and ppc.moe_combine on boxes (GraphOps.td). Every
// partition routes each of its samples from the whole sample's
// probabilities (MoeRouting.h), so partitions of different experts or
// positions agree on every slot without exchanging it:
//   - dispatch: its experts' slots [e, b, :, h] get their tokens' hidden
//     range, empty slots zero; backward adds them back to the tokens (the
//     plan sums the tokens' gradient over the partitions of other experts)
//     and, with aux_loss_coef, the load-balancing loss's gradient to its
//     experts' probabilities (MoeRouting.h);
//   - combine: its tokens [b, s, h] sum their kept slots, weighted by their
//     probabilities (over the k chosen, when `normalize`); backward gives
//     each slot its weight times the token's gradient, and each chosen
//     probability the chain rule of the weights from its partition's
//     hidden range (summed over hidden splits by the plan).
//
//===----------------------------------------------------------------------===//

#include "KernelHelpers.h"
#include "KernelRegistry.h"

#include "KernelChecks.h"
#include "MoeRouting.h"

namespace ppc::runtime::cpu {
namespace {

/// Routes sample `b`, which the probabilities' view holds.
void route(const TensorView &probs, const MoeShape &shape, int64_t b,
           MoeRoute &out) {
  const float *row = probs.data + probs.offsetOf({b, 0, 0});
  routeSample(row, shape.experts, shape.positions, shape.experts, shape.topK,
              shape.capacity, out);
}

/// Offset of [e, b, c, h] in a slots view and of [b, s, h] in a tokens view.
int64_t slotAt(const TensorView &v, int64_t e, int64_t b, int64_t c,
               int64_t h) {
  return v.offsetOf({e, b, c, h});
}
int64_t tokenAt(const TensorView &v, int64_t b, int64_t s, int64_t h) {
  return v.offsetOf({b, s, h});
}

KernelImpl dispatchKernel() {
  KernelImpl impl;
  impl.forward = [](const OpDesc &op, const KernelContext &,
                    const std::vector<TensorView> &inputs,
                    std::vector<TensorView> &outputs,
                    std::vector<TensorView> &) -> absl::Status {
    if (absl::Status s = checkForwardArity(op, inputs, 2, outputs, 1); !s.ok())
      return s;
    const TensorView &tokens = inputs[0], &probs = inputs[1];
    TensorView &slots = outputs[0];
    MoeShape shape;
    if (absl::Status s = moeShape(op, slots, probs, shape); !s.ok())
      return s;
    if (absl::Status s = moeTokensWhole(op, tokens, shape); !s.ok())
      return s;
    int64_t h0 = slots.lo[3], width = slots.extent(3);
    MoeRoute r;
    for (int64_t b = slots.lo[1]; b < slots.hi[1]; ++b) {
      route(probs, shape, b, r);
      for (int64_t e = slots.lo[0]; e < slots.hi[0]; ++e)
        for (int64_t c = 0; c < shape.capacity; ++c) {
          float *dst = slots.data + slotAt(slots, e, b, c, h0);
          int32_t s = r.token[e * shape.capacity + c];
          if (s < 0)
            std::fill(dst, dst + width, 0.0f);
          else
            std::copy_n(tokens.data + tokenAt(tokens, b, s, h0), width, dst);
        }
    }
    return {};
  };
  impl.backward = [](const OpDesc &op, const KernelContext &,
                     const std::vector<TensorView> &inputs,
                     const std::vector<TensorView> &outputs,
                     const std::vector<TensorView> &outputGrads,
                     std::vector<TensorView> &inputGrads,
                     std::vector<TensorView> &) -> absl::Status {
    if (absl::Status s = checkBackwardArity(op, inputs, 2, outputs, 1,
                                            outputGrads, inputGrads);
        !s.ok())
      return s;
    // The routing is a choice: the probabilities get no gradient from the
    // slots, only the load-balancing loss's (aux_loss_coef).
    TensorView &dTokens = inputGrads[0], &dProbs = inputGrads[1];
    const TensorView &dSlots = outputGrads[0], &probs = inputs[1];
    MoeShape shape;
    if (absl::Status s = moeShape(op, dSlots, probs, shape); !s.ok())
      return s;
    double aux =
        dProbs.data
            ? moeAuxGradientPerChoice(op, shape, probs.shape[0], dSlots.lo[3])
            : 0.0;
    if (!dTokens.data && aux == 0)
      return {};
    if (dTokens.data)
      if (absl::Status s = moeTokensWhole(op, dTokens, shape); !s.ok())
        return s;
    int64_t h0 = dSlots.lo[3], width = dSlots.extent(3);
    MoeRoute r;
    std::vector<int64_t> choices(shape.experts);
    for (int64_t b = dSlots.lo[1]; b < dSlots.hi[1]; ++b) {
      route(probs, shape, b, r);
      if (aux != 0) {
        std::fill(choices.begin(), choices.end(), 0);
        for (int32_t e : r.expert)
          ++choices[e];
        for (int64_t s = 0; s < shape.positions; ++s)
          for (int64_t e = dSlots.lo[0]; e < dSlots.hi[0]; ++e)
            dProbs.data[dProbs.offsetOf({b, s, e})] +=
                static_cast<float>(aux * static_cast<double>(choices[e]));
      }
      if (!dTokens.data)
        continue;
      for (int64_t e = dSlots.lo[0]; e < dSlots.hi[0]; ++e)
        for (int64_t c = 0; c < shape.capacity; ++c) {
          int32_t s = r.token[e * shape.capacity + c];
          if (s < 0)
            continue;
          const float *src = dSlots.data + slotAt(dSlots, e, b, c, h0);
          float *dst = dTokens.data + tokenAt(dTokens, b, s, h0);
          for (int64_t h = 0; h < width; ++h)
            dst[h] += src[h];
        }
    }
    return {};
  };
  return impl;
}

/// Token (b, s)'s weights: g[j] for its choice j (0 where dropped), and
/// the sum of its k choices' probabilities it was divided by (1 unless
/// `normalize`).
double tokenWeights(const TensorView &probs, const MoeShape &shape,
                    const MoeRoute &r, int64_t b, int64_t s, bool normalize,
                    std::vector<double> &g) {
  const float *row = probs.data + probs.offsetOf({b, s, 0});
  double total = 0;
  for (int64_t j = 0; j < shape.topK; ++j)
    total += row[r.expert[s * shape.topK + j]];
  double scale = normalize ? total : 1.0;
  for (int64_t j = 0; j < shape.topK; ++j) {
    int64_t k = s * shape.topK + j;
    g[j] = r.slot[k] < 0 || scale == 0 ? 0.0 : row[r.expert[k]] / scale;
  }
  return scale;
}

KernelImpl combineKernel() {
  KernelImpl impl;
  impl.forward = [](const OpDesc &op, const KernelContext &,
                    const std::vector<TensorView> &inputs,
                    std::vector<TensorView> &outputs,
                    std::vector<TensorView> &) -> absl::Status {
    if (absl::Status s = checkForwardArity(op, inputs, 2, outputs, 1); !s.ok())
      return s;
    const TensorView &slots = inputs[0], &probs = inputs[1];
    TensorView &tokens = outputs[0];
    MoeShape shape;
    if (absl::Status s = moeShape(op, slots, probs, shape); !s.ok())
      return s;
    if (absl::Status s = moeExpertsWhole(op, slots, shape); !s.ok())
      return s;
    bool normalize = op.getInt("normalize", 0) != 0;
    int64_t h0 = tokens.lo[2], width = tokens.extent(2);
    MoeRoute r;
    std::vector<double> g(shape.topK);
    std::vector<double> sum(width);
    for (int64_t b = tokens.lo[0]; b < tokens.hi[0]; ++b) {
      route(probs, shape, b, r);
      for (int64_t s = tokens.lo[1]; s < tokens.hi[1]; ++s) {
        tokenWeights(probs, shape, r, b, s, normalize, g);
        std::fill(sum.begin(), sum.end(), 0.0);
        for (int64_t j = 0; j < shape.topK; ++j) {
          int64_t k = s * shape.topK + j;
          if (r.slot[k] < 0)
            continue;
          const float *src =
              slots.data + slotAt(slots, r.expert[k], b, r.slot[k], h0);
          for (int64_t h = 0; h < width; ++h)
            sum[h] += g[j] * src[h];
        }
        float *dst = tokens.data + tokenAt(tokens, b, s, h0);
        for (int64_t h = 0; h < width; ++h)
          dst[h] = static_cast<float>(sum[h]);
      }
    }
    return {};
  };
  impl.backward = [](const OpDesc &op, const KernelContext &,
                     const std::vector<TensorView> &inputs,
                     const std::vector<TensorView> &outputs,
                     const std::vector<TensorView> &outputGrads,
                     std::vector<TensorView> &inputGrads,
                     std::vector<TensorView> &) -> absl::Status {
    if (absl::Status s = checkBackwardArity(op, inputs, 2, outputs, 1,
                                            outputGrads, inputGrads);
        !s.ok())
      return s;
    const TensorView &slots = inputs[0], &probs = inputs[1];
    const TensorView &dTokens = outputGrads[0];
    TensorView &dSlots = inputGrads[0], &dProbs = inputGrads[1];
    MoeShape shape;
    if (absl::Status s = moeShape(op, slots, probs, shape); !s.ok())
      return s;
    if (absl::Status s = moeExpertsWhole(op, slots, shape); !s.ok())
      return s;
    bool normalize = op.getInt("normalize", 0) != 0;
    int64_t h0 = dTokens.lo[2], width = dTokens.extent(2);
    MoeRoute r;
    std::vector<double> g(shape.topK), dg(shape.topK);
    for (int64_t b = dTokens.lo[0]; b < dTokens.hi[0]; ++b) {
      route(probs, shape, b, r);
      for (int64_t s = dTokens.lo[1]; s < dTokens.hi[1]; ++s) {
        double scale = tokenWeights(probs, shape, r, b, s, normalize, g);
        const float *dy = dTokens.data + tokenAt(dTokens, b, s, h0);
        for (int64_t j = 0; j < shape.topK; ++j) {
          int64_t k = s * shape.topK + j;
          dg[j] = 0;
          if (r.slot[k] < 0)
            continue;
          int64_t at = slotAt(slots, r.expert[k], b, r.slot[k], h0);
          const float *y = slots.data + at;
          for (int64_t h = 0; h < width; ++h)
            dg[j] += static_cast<double>(y[h]) * dy[h];
          if (dSlots.data) {
            float *dst = dSlots.data + at;
            for (int64_t h = 0; h < width; ++h)
              dst[h] += static_cast<float>(g[j] * dy[h]);
          }
        }
        if (!dProbs.data || scale == 0)
          continue;
        // g_j = p_j / Z over the k choices: dp_i = (dg_i - sum_j dg_j g_j)
        // / Z; without normalization Z = 1 and the sum is not there.
        double mixed = 0;
        if (normalize)
          for (int64_t j = 0; j < shape.topK; ++j)
            mixed += dg[j] * g[j];
        float *row = dProbs.data + dProbs.offsetOf({b, s, 0});
        for (int64_t j = 0; j < shape.topK; ++j)
          row[r.expert[s * shape.topK + j]] +=
              static_cast<float>((dg[j] - mixed) / scale);
      }
    }
    return {};
  };
  return impl;
}

} // namespace

void registerMoeKernels(KernelTable &table) {
  table["ppc.moe_dispatch"] = dispatchKernel();
  table["ppc.moe_combine"] = combineKernel();
}

} // namespace ppc::runtime::cpu
