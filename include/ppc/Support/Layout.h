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
  std::vector<std::vector<Box>> resultBoxes;  ///< [result][instance]
  std::vector<bool> partial;                  ///< per result
  int64_t numReplicas = 1;

  int64_t numInstances() const { return static_cast<int64_t>(devices.size()); }
  /// The pieces of result `r`: one per instance.
  std::vector<Piece> resultPieces(unsigned r) const;
  /// The pieces operand `i` is read in: one per instance.
  std::vector<Piece> operandPieces(unsigned i) const;
  /// Instances of the same replica as `p` whose result `r` has the same box
  /// as `p`'s (the group that sums partials, in instance order).
  std::vector<int64_t> sameResultBox(unsigned r, int64_t p) const;
  /// Instances of the same replica as `p` whose iteration ranges agree with
  /// `p`'s on every dim but those in `dims` (batch_norm's statistics groups).
  std::vector<int64_t>
  sameRangesExcept(int64_t p, const std::vector<unsigned> &dims) const;
  /// The instances computing the same partition as `p` (its replicas, `p`
  /// included, in replica order).
  std::vector<int64_t> replicasOf(int64_t p) const;
};

OpLayout computeLayout(const IterationSpace &space, const OpConfig &config);

bool isEmpty(const Box &box);
bool contains(const Box &outer, const Box &inner);
std::optional<Box> intersect(const Box &a, const Box &b);
Box wholeBox(const std::vector<int64_t> &shape);

/// True if every consumer piece is held whole by a producer piece on the
/// same device: the edge needs no communication.
bool linesUp(const std::vector<Piece> &producer,
             const std::vector<Piece> &consumer);

} // namespace ppc::geometry

#endif // PPC_SUPPORT_LAYOUT_H
