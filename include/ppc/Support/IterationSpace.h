//===- IterationSpace.h - SOAP iteration spaces of graph ops ----*- C++ -*-===//
//
// The MLIR-free description of an operator that makes SOAP partitioning
// generic: iteration dimensions with a kind (sample, attribute, parameter,
// reduction), and for every operand and result the map from iteration
// dimensions to tensor dimensions. Graph ops produce it through
// ParallelizableOpInterface; the simulator, search and lowering only ever read
// this form, so adding an op means describing it, not writing new search code.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SUPPORT_ITERATIONSPACE_H
#define PPC_SUPPORT_ITERATIONSPACE_H

#include "ppc/Support/Status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ppc {

/// What an iteration dimension means, in FlexFlow's SOAP vocabulary.
enum class IterKind : uint8_t {
  Sample,    ///< batch: splitting it is data parallelism.
  Attribute, ///< spatial / sequence: length, height, width.
  Parameter, ///< output channels, hidden units, heads.
  Reduction, ///< contracted: splitting it makes partial sums.
};

const char *stringifyIterKind(IterKind kind);
std::optional<IterKind> symbolizeIterKind(const std::string &name);

struct IterDim {
  int64_t size = 1;
  IterKind kind = IterKind::Sample;
  /// False where a split would need communication the op does not describe
  /// (the softmax axis, a kernel window, the normalized dims of layer norm).
  bool splittable = true;
};

/// How one tensor dimension is indexed by the iteration space. An iteration
/// range [a, b) along `iterDim` touches the tensor range
///   [floor(a / divisor) * stride + offset,
///    floor((b - 1) / divisor) * stride + offset + extent)
/// clipped to the tensor's size. Identity is {d, 1, 1, 0, 1}; a convolution's
/// input height is {oh, 1, stride, -padTop, (k - 1) * dilation + 1}, whose
/// overlap between neighbours is the halo; a grouped convolution's input
/// channels are {oc, outPerGroup, inPerGroup, 0, inPerGroup}.
struct DimAccess {
  int32_t iterDim = -1; ///< -1: the whole dimension is read (broadcast).
  int64_t divisor = 1;
  int64_t stride = 1;
  int64_t offset = 0;
  int64_t extent = 1;

  static DimAccess whole() { return DimAccess(); }
  static DimAccess identity(int32_t d) { return {d, 1, 1, 0, 1}; }
  static DimAccess window(int32_t d, int64_t stride, int64_t offset,
                          int64_t extent) {
    return {d, 1, stride, offset, extent};
  }
  bool isWhole() const { return iterDim < 0; }
  bool operator==(const DimAccess &o) const {
    return iterDim == o.iterDim && divisor == o.divisor && stride == o.stride &&
           offset == o.offset && extent == o.extent;
  }
};

/// One operand or result: its shape and how each of its dims is indexed.
struct TensorAccess {
  std::vector<int64_t> shape;
  std::vector<DimAccess> dims; ///< one per tensor dimension.

  /// Whether some dim of the tensor is indexed by iteration dim `d` (not
  /// read whole).
  bool indexes(size_t d) const {
    for (const DimAccess &access : dims)
      if (!access.isWhole() && access.iterDim == static_cast<int32_t>(d))
        return true;
    return false;
  }

  /// Tensor dim i indexed by iteration dim i (an elementwise op's tensors).
  static TensorAccess identity(std::vector<int64_t> shape) {
    TensorAccess t{std::move(shape), {}};
    for (size_t i = 0; i < t.shape.size(); ++i)
      t.dims.push_back(DimAccess::identity(static_cast<int32_t>(i)));
    return t;
  }
};

/// Half-open index range [lo, hi).
struct Range {
  int64_t lo = 0;
  int64_t hi = 0;
  int64_t size() const { return hi > lo ? hi - lo : 0; }
  bool operator==(const Range &o) const { return lo == o.lo && hi == o.hi; }
};

/// One dim of a staged kernel's scratch buffer: `size` elements, or with
/// `iterDim` >= 0 the partition's extent of that iteration dim (so that
/// partitions with equal ranges there hold equal-shaped statistics).
struct ScratchDim {
  int64_t size = 1;
  int32_t iterDim = -1;
};

/// A scratch buffer of a staged kernel, reduced over the partitions of a
/// statistics group after stage `syncAfter` of its pass (-1: never).
struct StageScratch {
  std::vector<ScratchDim> shape;
  int32_t syncAfter = -1;
  bool max = false; ///< reduced with max rather than sum.
};

/// A kernel whose partitions exchange statistics between its stages, so that
/// a split the math does not decompose into partial sums still computes what
/// the whole op does: batch norm's batch sums over a split batch, a
/// vocabulary-parallel cross-entropy's row maxima and exponential sums over
/// split classes. Partitions whose ranges differ only in `acrossDims` form a
/// statistics group. The forward's scratch is passed to the backward too,
/// before the backward's own.
struct StagedKernel {
  int32_t forwardStages = 1;
  int32_t backwardStages = 1;
  std::vector<StageScratch> forward, backward;
  std::vector<int32_t> acrossDims;
  /// Inference runs one stage without scratch (batch norm reads its running
  /// statistics); otherwise the stages run in inference too.
  bool trainingOnly = false;
  /// The stages run only where some dim of `acrossDims` is split (a
  /// statistics group of more than one partition); elsewhere the kernel runs
  /// once, without scratch, as the whole op (attention split along its
  /// keys merges by log-sum-exp; unsplit, it stays one fused kernel).
  bool onlyWhenSplit = false;
  /// The backward's work where the stages run, relative to the op's
  /// backward cost (OpCost::bwdFlops): stages that recompute what the
  /// unstaged kernel computes once cost more (attention's key blocks
  /// recompute the scores and dO V^T for the rows' sums, 3.5 / 2.5).
  double backwardWork = 1.0;

  /// Whether the stages run for an op split by `degrees` in `training`.
  bool runsFor(const std::vector<int64_t> &degrees, bool training) const;

  /// Shape of `scratch` for a partition with iteration ranges `iter`.
  std::vector<int64_t> shapeOf(const StageScratch &scratch,
                               const std::vector<Range> &iter) const;
};

/// Ops that do work only at the points where key position t <= query
/// position s (causal attention, top-left aligned): the iteration dims of
/// s and t. A split along s gives the later query rows more keys to see, so
/// partitions of equal boxes do unequal work, unless the positions are
/// stored in zigzag order (SequenceOrder.h): `zigzag` pairs of chunks, 0 in
/// natural order; s and t are then natural positions of the stored indices.
struct CausalDomain {
  int32_t query = -1;
  int32_t key = -1;
  int64_t zigzag = 0;
};

/// A reduction dim whose operands can stream around a ring instead of being
/// held whole (ring attention, as Megatron-Core's context parallelism runs
/// it): where `along` is split n ways and `streamed` is not, partition c
/// holds block c of the `operands`' `streamed` dim (the dim its share of
/// `along` indexes, both of one extent) and passes blocks to the next member
/// of its group while it computes, n steps, merging each block's partial
/// result into the last (the staged kernel's log-sum-exp merge). Its work is
/// that of the unsplit dim; its memory, two blocks.
struct RingSpec {
  int32_t streamed = -1;
  int32_t along = -1;
  std::vector<int32_t> operands;
  /// The stages of the staged kernel (with its forward scratch, then its
  /// backward's) a member runs. Forward: `first` on the block it starts
  /// with, `merge` on each block after (merged into the statistics and
  /// partial result so far), `finish` once. Backward: `prepare` once (what
  /// every block's gradient reads, from the result and its gradient), then
  /// `block` on each block, adding to the gradients of the operands and of
  /// the block it holds.
  int32_t firstStage = 0, mergeStage = 0, finishStage = 0;
  int32_t prepareStage = 0, blockStage = 0;
};

struct IterationSpace {
  std::vector<IterDim> dims;
  std::vector<TensorAccess> operands;
  std::vector<TensorAccess> results;
  /// Set for ops whose kernel runs in synchronized stages.
  std::optional<StagedKernel> staged;
  /// Set for ops whose result 0 holds operand 0's elements in the same
  /// row-major order (a reshape): a partition whose operand and result
  /// boxes visit the same elements in the same order
  /// (geometry::sameFlatOrder) runs no kernel, its result shares the
  /// operand's buffer (ppc-alias-views), and holds no memory of its own.
  bool flatView = false;
  /// Set for ops that are one matrix product of their operands (a linear
  /// layer, a matmul): over a weight, the layer Megatron-LM splits by
  /// columns and rows, and that the "one weird trick" runs model parallel.
  bool matrixProduct = false;
  /// Set where the op works on a triangle of (query, key) points only.
  std::optional<CausalDomain> causal;
  /// Set where the op routes tokens to experts (a mixture-of-experts
  /// dispatch): the iteration dim of its result that indexes them. The ops
  /// that read that tensor dim carry the experts (search::megatron's
  /// expert parallelism splits them).
  int32_t expertDim = -1;
  /// Set where a reduction dim may stream around a ring (OpConfig::ring).
  std::optional<RingSpec> ring;

  /// Number of points of the iteration space (product of the dim sizes);
  /// validate() checks that it fits in int64.
  int64_t numPoints() const;
  /// True if splitting iteration dim `d` leaves each partition of result `r`
  /// with a partial sum (d indexes no dim of that result).
  bool makesPartialSum(unsigned d, unsigned r = 0) const;
  /// The share of the op's work in the iteration box `iter` (one range per
  /// dim): its points over numPoints(), or with `causal` its points inside
  /// the triangle over the whole triangle's.
  double workFraction(const std::vector<Range> &iter) const;
  /// Checks the space is self-consistent: sizes positive, every access names
  /// an existing iteration dim, ranks agree, the number of points and every
  /// tensor's element count fit in int64. Returns OK or the problem
  /// (InvalidArgument).
  absl::Status validate() const;
};

/// The slice of `access` touched by the iteration ranges `iter` (one per
/// iteration dim), halos included.
std::vector<Range> sliceOf(const TensorAccess &access,
                           const std::vector<Range> &iter);

/// Iteration ranges of partition `index` (row-major over `degrees`) when the
/// space's dims are split evenly by `degrees`.
std::vector<Range> partitionRanges(const IterationSpace &space,
                                   const std::vector<int64_t> &degrees,
                                   int64_t index);

/// Which kind of kernel runs an op, where a device rates it apart from the
/// roofline: fused attention (FlashAttention-style: the score matrix stays
/// on chip) runs at the attention efficiency measured for the device.
enum class KernelKind : uint8_t { Default, FusedAttention };

/// Forward and backward work of one op, for the cost model.
struct OpCost {
  double fwdFlops = 0;
  double bwdFlops = 0;
  double fwdBytes = 0; ///< bytes read and written by the forward kernel.
  double bwdBytes = 0;
  KernelKind kernel = KernelKind::Default;
};

// Equality of every field: two ops whose spaces and costs compare equal
// are priced alike (sim::sameButNames reuses a simulation on it). A field
// added to one of these structs belongs in its operator too.
bool operator==(const IterDim &a, const IterDim &b);
bool operator==(const TensorAccess &a, const TensorAccess &b);
bool operator==(const ScratchDim &a, const ScratchDim &b);
bool operator==(const StageScratch &a, const StageScratch &b);
bool operator==(const StagedKernel &a, const StagedKernel &b);
bool operator==(const CausalDomain &a, const CausalDomain &b);
bool operator==(const IterationSpace &a, const IterationSpace &b);
bool operator==(const OpCost &a, const OpCost &b);

/// Default SOAP kinds for an activation of `rank` dims, in the layouts the
/// importers produce: [N], [N, F], [N, S, H], [N, C, H, W], [N, C, D, H, W].
std::vector<IterKind> activationKinds(unsigned rank);

} // namespace ppc

#endif // PPC_SUPPORT_ITERATIONSPACE_H
