//===- Layout.h - where the pieces of an op's tensors live ------*- C++ -*-===//
//
// MLIR-free. The one geometry of a configured op that the simulator, the
// report and both lowering passes read: for every instance (a partition, or
// one of its replicas), its device, its iteration ranges and the box of
// every operand and result it touches, which replica it is, and whether a
// result is a partial sum. What the simulator prices is what the lowering
// emits because both ask this code.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SUPPORT_LAYOUT_H
#define PPC_SUPPORT_LAYOUT_H

#include "ppc/Support/IterationSpace.h"
#include "ppc/Support/MachineView.h"

#include <functional>
#include <optional>
#include <vector>

namespace ppc::geometry {

using Box = std::vector<Range>;

struct Piece {
  int64_t device = 0;
  Box box;
};

/// An op's pieces under one configuration, one entry per instance
/// (instances in the order of OpConfig::devices: partition-major, replica
/// innermost).
struct OpLayout {
  std::vector<int64_t> devices;               ///< per instance
  std::vector<int64_t> partition;             ///< per instance
  std::vector<int64_t> replica;               ///< per instance
  std::vector<Box> iter;                      ///< per instance
  std::vector<std::vector<Box>> operandBoxes; ///< [operand][instance]
  /// [result][instance]: the box each instance computes (and whose
  /// gradient its backward needs).
  std::vector<std::vector<Box>> resultBoxes;
  /// [result][instance]: the box each instance holds after forward, which
  /// readers fetch from: its resultBox, or for a reduce-scattered partial
  /// sum (OpConfig::scatterDim) piece i of it for member i of its summing
  /// group (sameResultBox order). A partial sum's backward is linear in the
  /// summands and never reads the summed value.
  std::vector<std::vector<Box>> heldBoxes;
  std::vector<bool> partial;   ///< per result
  std::vector<bool> scattered; ///< per result
  int64_t numReplicas = 1;
  /// With OpConfig::ring: the members of each ring, the instances that
  /// differ only in their share of RingSpec::along, in that order. Member m
  /// starts with block m of the streamed dim (its operandBoxes hold it).
  std::vector<std::vector<int64_t>> rings;

  int64_t numInstances() const { return static_cast<int64_t>(devices.size()); }
  /// The pieces of result `r` readers fetch from: one per instance (its
  /// heldBoxes).
  std::vector<Piece> resultPieces(unsigned r) const;
  /// The pieces operand `i` is read in: one per instance.
  std::vector<Piece> operandPieces(unsigned i) const;
  /// Instances of the same replica as `p` whose result `r` has the same box
  /// as `p`'s (the group that sums partials, in instance order).
  std::vector<int64_t> sameResultBox(unsigned r, int64_t p) const;
  /// The instances grouped by replica and by their iteration ranges on
  /// every dim but those in `dims` (a staged kernel's statistics groups),
  /// each group in instance order, the groups by their first instance.
  std::vector<std::vector<int64_t>>
  groupsAgreeingExcept(const std::vector<int32_t> &dims) const;
  /// The instances computing the same partition as `p` (its replicas, `p`
  /// included, in replica order).
  std::vector<int64_t> replicasOf(int64_t p) const;
};

/// `iter` with the range of the ring's streamed dim replaced by block
/// `block` of `members` (OpConfig::ring): what a ring member computes with
/// at the step it holds that block.
Box ringStepRanges(const IterationSpace &space, const Box &iter,
                   int64_t members, int64_t block);

/// Micro-batch `index` of `count` (a pipelined step): samples
/// [index * N / count, (index + 1) * N / count) of every sample dim of size
/// N. Any partition of one micro-batch is a partition of the batch, so the
/// kernels (which compute in global coordinates and divide means by global
/// counts) accumulate the step's gradients over the micro-batches.
struct MicroBatch {
  int64_t count = 1;
  int64_t index = 0;
};

/// The layout of `config`, or with `micro` of its share of one micro-batch:
/// the sample dims' ranges of that micro-batch split by the degrees (sample
/// dims must divide into micro.count: sim::checkPipeline).
OpLayout computeLayout(const IterationSpace &space, const OpConfig &config,
                       MicroBatch micro = {});

bool isEmpty(const Box &box);
bool contains(const Box &outer, const Box &inner);
/// Which of many boxes may overlap a given box, without trying each (a
/// producer's thousands of data-parallel pieces against each consumer's
/// would be quadratic): the boxes sorted by their start in the dim where
/// they start at the most distinct points; a box overlapping [lo, hi) there
/// starts in (lo - longest, hi).
class OverlapIndex {
public:
  explicit OverlapIndex(const std::vector<Box> &boxes);
  /// The indices of the boxes that may overlap `box`, ascending: every one
  /// that does, and perhaps others.
  void candidates(const Box &box, std::vector<size_t> &out) const;

private:
  size_t dim = 0;
  bool indexed = false;
  int64_t longest = 0;
  std::vector<std::pair<int64_t, size_t>> byStart; ///< (start, index)
};

/// Whether `a` and `b` share a point (intersect without the box).
bool overlaps(const Box &a, const Box &b);
std::optional<Box> intersect(const Box &a, const Box &b);
Box wholeBox(const std::vector<int64_t> &shape);
/// Whether box `a` of a row-major tensor of shape `shapeA` and box `b` of a
/// tensor of shape `shapeB` with as many elements (a reshape's operand and
/// result) hold the same elements of the flat order in the same order,
/// each row-major in its box: then a buffer of one is a buffer of the
/// other. A whole tensor, a batch split and a split of the innermost dim
/// kept by the reshape are; a split that a reshape interleaves is not.
bool sameFlatOrder(const std::vector<int64_t> &shapeA, const Box &a,
                   const std::vector<int64_t> &shapeB, const Box &b);

/// True if every consumer piece is held whole by a producer piece on the
/// same device: the edge needs no communication.
bool linesUp(const std::vector<Piece> &producer,
             const std::vector<Piece> &consumer);

/// Whether a weight piece `box` splits into `k` ZeRO shards: contiguous
/// blocks of its rows (dim 0, so contiguous in its row-major buffer), as
/// equal as the rows allow, which needs at least k rows. The one rule by
/// which the simulator and the lowering decide that a ZeRO stage applies
/// to a piece; one that does not keeps its whole training state (stage 0).
/// (Megatron-LM's distributed optimizer pads one flat buffer instead.)
bool zeroShardable(const Box &box, int64_t k);
/// Shard `i` of `k` of a zeroShardable `box`: the first (rows mod k)
/// shards have one row more than the others.
Box zeroShard(const Box &box, int64_t k, int64_t i);
/// Shard `i` of `k` of `box` along dim `dim` (dim 0: ZeRO's shards).
Box shardOf(const Box &box, int64_t k, int64_t i, unsigned dim = 0);

/// Which of the replicas `first`, `first + 1`, ... `first + replicas - 1`
/// (instances on `devices`) exchanges data with `device`: the one on it,
/// else the one `bandwidth(from, to)` says is fastest, ties to the lowest.
/// Replicas computed the same gradient, so this one alone sends it.
template <typename BandwidthFn>
int64_t nearestReplica(const std::vector<int64_t> &devices, int64_t first,
                       int64_t replicas, int64_t device,
                       BandwidthFn bandwidth) {
  int64_t best = 0;
  for (int64_t r = 0; r < replicas; ++r) {
    int64_t from = devices[first + r];
    if (from == device)
      return r;
    if (bandwidth(from, device) > bandwidth(devices[first + best], device))
      best = r;
  }
  return best;
}

/// One gradient going back from a consumer instance to a producer instance.
struct GradientRoute {
  int64_t consumer = 0; ///< consumer instance that sends.
  int64_t producer = 0; ///< producer instance that receives.
  Box box;              ///< the region, in the tensor's coordinates.
};

/// Where the gradients of an edge go in backward. The producer's instances
/// form groups that hold the same box and are of the same replica
/// (`producedBoxes`, `producerReplicas`, per instance): copies of a result
/// (partial sums once reduced), or the instances that synchronize a
/// weight's gradient. Replicas of a consumer partition computed the same
/// gradient, so one of them sends it: the one on the receiver's device if
/// any, else the one nearestReplica picks. With `everyMember` (activations)
/// every instance of a group receives each consumer partition's gradient;
/// without (weights, whose gradient sync sums the group), one member per
/// group does: one on the device of a consumer replica if any, else the
/// group's first. Instances flagged in `skip` (summed by an all-reduce
/// instead, see allReducedGradientGroups) get no route. The consumer's
/// instances are partition-major with `numConsumerReplicas` replicas each
/// (OpConfig::devices).
std::vector<GradientRoute> gradientRoutes(
    const std::vector<Box> &producedBoxes,
    const std::vector<int64_t> &producerDevices,
    const std::vector<int64_t> &producerReplicas,
    const std::vector<Box> &needed, const std::vector<int64_t> &consumerDevices,
    int64_t numConsumerReplicas, const std::vector<char> &skip,
    bool everyMember, const std::function<double(int64_t, int64_t)> &bandwidth);

/// The groups of producer instances whose gradient is summed by one
/// all-reduce among them instead of point-to-point transfers: instances
/// holding the same box B (`produced`, per instance) on k >= 2 distinct
/// devices, where exactly one consumer instance on each of those devices
/// reads any of B, all of distinct consumer partitions, each reading all
/// of B (`needed`, per consumer instance). This is Megatron-LM's
/// column-parallel layer after a replicated one: every device computes a
/// partial gradient of the whole input, and the all-reduce leaves the sum
/// on every copy. Groups list producer instances in order. The simulator
/// prices exactly these collectives and the lowering emits them.
std::vector<std::vector<int64_t>>
allReducedGradientGroups(const std::vector<Box> &produced,
                         const std::vector<int64_t> &producerDevices,
                         const std::vector<Box> &needed,
                         const std::vector<int64_t> &consumerDevices,
                         const std::vector<int64_t> &consumerPartitions);

} // namespace ppc::geometry

#endif // PPC_SUPPORT_LAYOUT_H
