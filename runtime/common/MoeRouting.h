//===- MoeRouting.h - which capacity slot each token's choices fill -*- C++
//-*-===//
//
// The routing ppc.moe_dispatch and ppc.moe_combine share (GraphOps.td): one
// sample's tokens, each sent to its top_k most probable experts (ties to
// the lower expert), slots filled by choice rank, then position, up to C
// per expert; a choice whose expert is full is dropped. Both ops and every
// partition of them compute it from the same probabilities, so they agree
// on every slot without exchanging it. Header-only, no MLIR: the backends'
// kernels and their tests include it.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_COMMON_MOEROUTING_H
#define PPC_RUNTIME_COMMON_MOEROUTING_H

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

} // namespace ppc::runtime

#endif // PPC_RUNTIME_COMMON_MOEROUTING_H
