//===- Layout.h - where the pieces of an op's tensors live ------*- C++ -*-===//
//
// Private to lib/Conversion. The geometry both lowering passes share: for an
// op and its configuration, the device and iteration ranges of every
// partition and the box of every operand and result it touches (the same
// sliceOf/partitionRanges the simulator costs), and whether a result is a
// partial sum.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_LIB_CONVERSION_LAYOUT_H
#define PPC_LIB_CONVERSION_LAYOUT_H

#include "ppc/Support/IterationSpace.h"
#include "ppc/Support/MachineView.h"

#include <optional>
#include <vector>

namespace ppc::conversion {

using Box = std::vector<Range>;

struct Piece {
  int64_t device = 0;
  Box box;
};

struct OpLayout {
  std::vector<int64_t> devices;               ///< per partition
  std::vector<Box> iter;                      ///< per partition
  std::vector<std::vector<Box>> operandBoxes; ///< [operand][partition]
  std::vector<std::vector<Box>> resultBoxes;  ///< [result][partition]
  std::vector<bool> partial;                  ///< per result

  int64_t numPartitions() const { return static_cast<int64_t>(devices.size()); }
  /// The pieces of result `r`: one per partition.
  std::vector<Piece> resultPieces(unsigned r) const;
  /// The pieces operand `i` is read in: one per partition.
  std::vector<Piece> operandPieces(unsigned i) const;
  /// Partitions whose result `r` has the same box as partition `p`'s (the
  /// group that sums partials, in partition order).
  std::vector<int64_t> sameResultBox(unsigned r, int64_t p) const;
  /// Partitions whose iteration ranges agree with `p`'s on every dim but
  /// those in `dims` (batch_norm's statistics groups).
  std::vector<int64_t>
  sameRangesExcept(int64_t p, const std::vector<unsigned> &dims) const;
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

} // namespace ppc::conversion

#endif // PPC_LIB_CONVERSION_LAYOUT_H
