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

#include "ppc/Support/Status.h"

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

/// ZeRO's stages, per weight: how much of a weight's training state the
/// replicas that synchronize its gradient shard among themselves.
enum class StateSharding : uint8_t {
  None = 0,       ///< every replica keeps everything (plain all-reduce).
  Optimizer = 1,  ///< ZeRO-1: optimizer state (and its update) sharded.
  Gradients = 2,  ///< ZeRO-2: + gradients reduce-scattered, not all-reduced.
  Parameters = 3, ///< ZeRO-3 / FSDP: + the weight itself sharded, gathered
                  ///< before each use and freed after.
};
inline constexpr int kMaxStateSharding = 3;

struct OpConfig {
  /// One degree per iteration dim of the op.
  std::vector<int64_t> degrees;
  /// Device of instance 0.
  int64_t start = 0;
  /// One stride per dim with degree > 1, in order, then one for the
  /// replicas when `replicas` > 1; empty: contiguous (the row-major
  /// products of the partitioned degrees, replicas innermost).
  std::vector<int64_t> strides;
  /// Copies of every partition, each on its own device: the op runs whole
  /// (or partitioned) on every device of a group, as Megatron-LM runs layer
  /// norms inside a tensor-parallel group. Replicas compute identical
  /// results; their weight gradients are synchronized per replica.
  int64_t replicas = 1;
  /// Results are not kept for backward: the forward runs again right
  /// before the op's backward (activation recomputation).
  bool recompute = false;
  /// How the weights this op holds shard their training state.
  StateSharding sharding = StateSharding::None;
  /// Partial sums (results of a split reduction dim) are reduce-scattered
  /// along this dim of each such result instead of all-reduced: member i of
  /// a summing group keeps piece i of the group's box, as Megatron-LM's
  /// sequence parallelism leaves a row-parallel layer's output straight in
  /// the sequence-split layout of the next layer norm. -1: all-reduced.
  int64_t scatterDim = -1;
  /// Pipeline stage of the op (sim::Pipeline): its devices are that stage's
  /// submesh. 0 when the strategy has no pipeline.
  int64_t stage = 0;
  /// The op's ring dim (IterationSpace::ring) streams around each group of
  /// partitions that differ only in their share of its `along` dim: n steps
  /// of a block each, the blocks passed point to point while they compute,
  /// instead of gathering the operands whole (ring attention).
  bool ring = false;

  /// The product of the degrees: the number of distinct pieces of work.
  /// Callers that read degrees from input check them first (checkConfig):
  /// the product of unchecked degrees can overflow.
  int64_t numPartitions() const;
  /// Partitions times replicas: the number of devices the op runs on.
  int64_t numInstances() const { return numPartitions() * replicas; }
  /// The partition instance `i` computes, and which replica it is.
  int64_t partitionOf(int64_t instance) const { return instance / replicas; }
  int64_t replicaOf(int64_t instance) const { return instance % replicas; }
  /// The extents of the device grid: the degrees above 1, then the
  /// replicas when above 1 (one per stride of effectiveStrides()).
  std::vector<int64_t> gridExtents() const;
  std::vector<int64_t> effectiveStrides() const;
  /// Device of every instance, instances in row-major order over
  /// (degrees..., replicas): start + sum_i coord_i * stride_i over the
  /// partitioned dims and the replica dim.
  std::vector<int64_t> devices() const;
  bool operator==(const OpConfig &o) const {
    return degrees == o.degrees && start == o.start && strides == o.strides &&
           replicas == o.replicas && recompute == o.recompute &&
           sharding == o.sharding && scatterDim == o.scatterDim &&
           stage == o.stage && ring == o.ring;
  }
  bool operator!=(const OpConfig &o) const { return !(*this == o); }
};

struct IterationSpace;

/// Checks that `config` fits an op with iteration space `space` (one degree
/// per dim, splittable dims only, equal partitions, replicas >= 1, a
/// scatter dim only with partial sums whose boxes split evenly along it among
/// their summing group, no two
/// instances on one device) and, when given, a machine of `numDevices` devices
/// (else at most kMaxDevices). Returns OK when it fits, else the problem
/// (InvalidArgument). The
/// strategy verifier and the simulator both use it, so they accept exactly the
/// same configurations. Degrees, start and strides may be anything, overflowing
/// products included: only after they pass is any partition enumerated.
absl::Status checkConfig(const IterationSpace &space, const OpConfig &config,
                         std::optional<int64_t> numDevices = std::nullopt);

/// `config` run as a ring (OpConfig::ring), when that fits (checkConfig);
/// else why not.
absl::StatusOr<OpConfig> asRing(const IterationSpace &space, OpConfig config,
                                std::optional<int64_t> numDevices);

} // namespace ppc

#endif // PPC_SUPPORT_MACHINEVIEW_H
