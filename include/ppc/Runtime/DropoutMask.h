//===- DropoutMask.h - dropout's keep mask, on any backend ------*- C++ -*-===//
//
// MLIR-free. The keep mask of a dropout as a pure function of (seed, step,
// global flat index), so every partitioning, the backward and every backend
// draw the same mask: ppc.dropout and ppc.attention (on its [B..., S, T]
// probabilities) share it, and it is PPC_HD so the cuda backend's kernels
// compute it as the cpu kernels do.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_DROPOUTMASK_H
#define PPC_RUNTIME_DROPOUTMASK_H

#include "ppc/Runtime/HostDevice.h"

#include <cstdint>

namespace ppc::runtime {

/// The splitmix64 finalizer: a bijective 64-bit mix.
PPC_HD inline uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

struct DropoutMask {
  uint64_t stream;
  float ratio;
  float scale;

  DropoutMask(int64_t seed, int64_t step, double dropRatio)
      : stream(splitmix64(splitmix64(static_cast<uint64_t>(seed)) ^
                          static_cast<uint64_t>(step))),
        ratio(static_cast<float>(dropRatio)), scale(1.0f / (1.0f - ratio)) {}

  /// The scale of element `flatIndex`: 0 if dropped, 1 / (1 - ratio) if kept.
  PPC_HD float factor(int64_t flatIndex) const {
    uint64_t bits = splitmix64(stream + static_cast<uint64_t>(flatIndex) *
                                            0x9e3779b97f4a7c15ULL);
    // 24 random bits: uniform in [0, 1), exact in a float.
    float uniform = static_cast<float>(bits >> 40) * 0x1.0p-24f;
    return uniform < ratio ? 0.0f : scale;
  }
};

} // namespace ppc::runtime

#endif // PPC_RUNTIME_DROPOUTMASK_H
