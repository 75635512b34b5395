//===- MachineView.h - which device runs which partition -------*- C++ -*-===//
//
// An op's configuration in the SOAP space: a degree per iteration dimension
// and a machine view in Unity's style (a start device and a stride per
// partitioned dim). MLIR-free: #ppc.strategy, the simulator and the search
// all map partitions to devices with this one piece of code.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SUPPORT_MACHINEVIEW_H
#define PPC_SUPPORT_MACHINEVIEW_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ppc {

/// The most devices a machine may have (docs/machine-format.md, "Limits").
/// The simulator keeps per-device state and the search enumerates machine
/// views per op in O(devices), so both are sized for this many and no
/// more; readers of machines and strategies reject larger counts before
/// building anything of that size.
inline constexpr int64_t kMaxDevices = int64_t(1) << 16;

struct OpConfig {
  /// One degree per iteration dim of the op.
  std::vector<int64_t> degrees;
  /// Device of partition 0.
  int64_t start = 0;
  /// One stride per dim with degree > 1, in order; empty: contiguous (the
  /// row-major products of the partitioned degrees).
  std::vector<int64_t> strides;

  /// The product of the degrees. Callers that read degrees from input check
  /// them first (checkConfig): the product of unchecked degrees can
  /// overflow.
  int64_t numPartitions() const;
  std::vector<int64_t> effectiveStrides() const;
  /// Device of every partition, partitions in row-major order over degrees:
  /// start + sum_i coord_i * stride_i over the partitioned dims.
  std::vector<int64_t> devices() const;
  bool operator==(const OpConfig &o) const {
    return degrees == o.degrees && start == o.start && strides == o.strides;
  }
  bool operator!=(const OpConfig &o) const { return !(*this == o); }
};

struct IterationSpace;

/// Checks that `config` fits an op with iteration space `space` (one degree
/// per dim, splittable dims only, equal partitions, no two partitions on one
/// device) and, when given, a machine of `numDevices` devices (else at most
/// kMaxDevices). Returns the problem, or "" when it fits. The strategy
/// verifier and the simulator both use it, so they accept exactly the same
/// configurations. Degrees, start and strides may be anything, overflowing
/// products included: only after they pass is any partition enumerated.
std::string checkConfig(const IterationSpace &space, const OpConfig &config,
                        std::optional<int64_t> numDevices = std::nullopt);

} // namespace ppc

#endif // PPC_SUPPORT_MACHINEVIEW_H
