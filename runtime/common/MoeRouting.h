//===- MoeRouting.h - the slots of a mixture of experts ---------*- C++ -*-===//
//
// The routing ppc.moe_dispatch and ppc.moe_combine share (GraphOps.td): one
// sample's tokens, each sent to its top_k most probable experts (ties to
// the lower expert), slots filled by choice rank, then position, up to C
// per expert; a choice whose expert is full is dropped. Both ops and every
// partition of them compute it from the same probabilities, so they agree
// on every slot without exchanging it; and the checks of a partition's
// views that routing needs, alike on both backends. Header-only, no MLIR:
// the backends' kernels and their tests include it.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_COMMON_MOEROUTING_H
#define PPC_RUNTIME_COMMON_MOEROUTING_H

#include "ppc/Runtime/Kernels.h"

#include "absl/status/status.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

namespace ppc::runtime {

/// One sample's routing: for token s and choice j (row-major [S, k]) its
/// expert and slot (-1: dropped), and for expert e and slot c (row-major
/// [E, C]) the token there (-1: empty) and its choice.
struct MoeRoute {
  std::vector<int32_t> expert, slot;
  std::vector<int32_t> token, choice;
};

/// Routes the S tokens of one sample from `probs` (row-major [S, E], row
/// stride `rowStride` floats). A NaN ranks below every number.
inline void routeSample(const float *probs, int64_t rowStride, int64_t S,
                        int64_t E, int64_t k, int64_t C, MoeRoute &route) {
  route.expert.assign(S * k, -1);
  route.slot.assign(S * k, -1);
  route.token.assign(E * C, -1);
  route.choice.assign(E * C, -1);
  std::vector<int32_t> order(E);
  auto rank = [](float p) {
    return std::isnan(p) ? -std::numeric_limits<float>::infinity() : p;
  };
  for (int64_t s = 0; s < S; ++s) {
    const float *row = probs + s * rowStride;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t a, int32_t b) {
                        float pa = rank(row[a]), pb = rank(row[b]);
                        return pa > pb || (pa == pb && a < b);
                      });
    for (int64_t j = 0; j < k; ++j)
      route.expert[s * k + j] = order[j];
  }
  std::vector<int64_t> filled(E, 0);
  for (int64_t j = 0; j < k; ++j)
    for (int64_t s = 0; s < S; ++s) {
      int32_t e = route.expert[s * k + j];
      if (filled[e] == C)
        continue;
      int64_t c = filled[e]++;
      route.slot[s * k + j] = static_cast<int32_t>(c);
      route.token[e * C + c] = static_cast<int32_t>(s);
      route.choice[e * C + c] = static_cast<int32_t>(j);
    }
}

/// What both ops' kernels read of a partition: the experts E, positions
/// S, capacity C and top_k.
struct MoeShape {
  int64_t experts = 0, positions = 0, capacity = 0, topK = 1;
};

/// The shape of `op` from its slots' and probabilities' views, checking
/// that the probabilities hold every position and expert of their samples
/// and the slots every capacity slot (the routing needs them whole).
inline absl::Status moeShape(const OpDesc &op, const TensorView &slots,
                             const TensorView &probs, MoeShape &shape) {
  if (probs.rank() != 3 || slots.rank() != 4)
    return absl::InvalidArgumentError(
        op.kind + ": expects probabilities [B, S, E] and slots [E, B, C, H]");
  shape.positions = probs.shape[1];
  shape.experts = probs.shape[2];
  shape.capacity = slots.shape[2];
  shape.topK = op.getInt("top_k", 1);
  if (shape.topK < 1 || shape.topK > shape.experts)
    return absl::InvalidArgumentError(
        op.kind + ": top_k " + std::to_string(shape.topK) + " must be in [1, " +
        std::to_string(shape.experts) + "]");
  if (probs.extent(1) != shape.positions || probs.extent(2) != shape.experts ||
      slots.extent(2) != shape.capacity)
    return absl::InvalidArgumentError(
        op.kind + ": a partition must hold every position and expert of its "
                  "samples' probabilities and every capacity slot");
  return absl::OkStatus();
}

/// Dispatch's tokens (or their gradient) must hold every position of their
/// samples: any of them may fill a slot.
inline absl::Status moeTokensWhole(const OpDesc &op, const TensorView &tokens,
                                   const MoeShape &shape) {
  if (tokens.extent(1) == shape.positions)
    return absl::OkStatus();
  return absl::InvalidArgumentError(
      op.kind + ": a partition must hold every position of its samples' "
                "tokens");
}

/// Combine's slots must hold every expert's: a token's choices may be any.
inline absl::Status moeExpertsWhole(const OpDesc &op, const TensorView &slots,
                                    const MoeShape &shape) {
  if (slots.extent(0) == shape.experts)
    return absl::OkStatus();
  return absl::InvalidArgumentError(
      op.kind + ": a partition must hold every expert's slots of its samples");
}

/// The load-balancing loss's gradient per choice of an expert
/// (GraphOps.td, aux_loss_coef): probs[b, s, e] gets this times the choices
/// n_e of expert e in sample b, written by the partitions holding the
/// first hidden range of the slots, each for its own experts, so the
/// plan's sum over the partitions reading the probabilities counts each
/// once. 0: no auxiliary loss, or this partition does not write it.
inline double moeAuxGradientPerChoice(const OpDesc &op, const MoeShape &shape,
                                      int64_t samples, int64_t slotsHiddenLo) {
  double coef = op.getFloat("aux_loss_coef", 0.0);
  if (!(coef > 0) || slotsHiddenLo != 0 || samples == 0 || shape.positions == 0)
    return 0.0;
  double s = static_cast<double>(shape.positions);
  return coef * static_cast<double>(shape.experts) /
         (static_cast<double>(shape.topK) * s * s *
          static_cast<double>(samples));
}

} // namespace ppc::runtime

#endif // PPC_RUNTIME_COMMON_MOEROUTING_H
