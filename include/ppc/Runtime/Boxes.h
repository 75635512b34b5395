//===- Boxes.h - walking boxes held in dense buffers ------------*- C++ -*-===//
//
// MLIR-free, for the executor and the backends. A buffer holds box [lo, hi) of
// a tensor, row-major over the box; copies, sends and loads move a sub-box
// between two such buffers as runs of contiguous elements.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_BOXES_H
#define PPC_RUNTIME_BOXES_H

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace ppc::runtime {

using Index = std::vector<int64_t>;

inline int64_t boxVolume(const Index &lo, const Index &hi) {
  int64_t n = 1;
  for (size_t d = 0; d < lo.size(); ++d)
    n *= hi[d] > lo[d] ? hi[d] - lo[d] : 0;
  return n;
}

/// True if box [lo, hi) lies inside [outerLo, outerHi) (same rank).
inline bool boxInside(const Index &lo, const Index &hi, const Index &outerLo,
                      const Index &outerHi) {
  if (lo.size() != outerLo.size() || hi.size() != outerHi.size() ||
      lo.size() != hi.size())
    return false;
  for (size_t d = 0; d < lo.size(); ++d)
    if (lo[d] < outerLo[d] || hi[d] > outerHi[d] || lo[d] > hi[d])
      return false;
  return true;
}

/// The intersection of two boxes; empty (volume 0) when they do not meet.
inline void boxIntersect(const Index &aLo, const Index &aHi, const Index &bLo,
                         const Index &bHi, Index &lo, Index &hi) {
  lo.resize(aLo.size());
  hi.resize(aLo.size());
  for (size_t d = 0; d < aLo.size(); ++d) {
    lo[d] = aLo[d] > bLo[d] ? aLo[d] : bLo[d];
    hi[d] = aHi[d] < bHi[d] ? aHi[d] : bHi[d];
    if (hi[d] < lo[d])
      hi[d] = lo[d];
  }
}

/// True if box [lo, hi) is a block of whole rows of box [outerLo, outerHi):
/// a ZeRO shard (dim 0 within, every other dim the same).
inline bool isRowBlock(const Index &lo, const Index &hi, const Index &outerLo,
                       const Index &outerHi) {
  return !lo.empty() && lo.size() == outerLo.size() && lo[0] >= outerLo[0] &&
         hi[0] <= outerHi[0] &&
         std::equal(lo.begin() + 1, lo.end(), outerLo.begin() + 1) &&
         std::equal(hi.begin() + 1, hi.end(), outerHi.begin() + 1);
}

/// Offset, in a buffer holding box [lo, hi), of its global row `row` (dim
/// 0): where a ZeRO shard, a block of whole rows, starts.
inline int64_t rowOffset(const Index &lo, const Index &hi, int64_t row) {
  const int64_t rows = hi[0] - lo[0];
  return rows > 0 ? (row - lo[0]) * (boxVolume(lo, hi) / rows) : 0;
}

inline std::string boxString(const Index &lo, const Index &hi) {
  std::string s = "[";
  for (size_t d = 0; d < lo.size(); ++d)
    s += (d ? ", " : "") + std::to_string(lo[d]) + ":" + std::to_string(hi[d]);
  return s + "]";
}

/// Steps `index` to the next point of box [lo, hi) over its first `dims`
/// dims, row-major (the last of them fastest); false after the last point.
inline bool nextIndex(Index &index, const Index &lo, const Index &hi,
                      size_t dims) {
  for (size_t d = dims; d-- > 0;) {
    if (++index[d] < hi[d])
      return true;
    index[d] = lo[d];
  }
  return false;
}

/// Calls fn(aOffset, bOffset, length) for runs of contiguous elements that
/// together cover box [lo, hi), where `a` holds box [aLo, aHi) and `b` holds
/// [bLo, bHi), both containing [lo, hi). Trailing dims that all three boxes
/// cover whole merge into one run.
template <typename Fn>
void forEachRun(const Index &lo, const Index &hi, const Index &aLo,
                const Index &aHi, const Index &bLo, const Index &bHi, Fn &&fn) {
  const size_t rank = lo.size();
  if (boxVolume(lo, hi) == 0)
    return;
  if (rank == 0) {
    fn(int64_t(0), int64_t(0), int64_t(1));
    return;
  }
  // The first dim of the run: every later dim is whole in all three boxes.
  size_t k = rank - 1;
  while (k > 0 && lo[k] == aLo[k] && hi[k] == aHi[k] && lo[k] == bLo[k] &&
         hi[k] == bHi[k])
    --k;
  Index aStride(rank, 1), bStride(rank, 1);
  for (size_t d = rank - 1; d > 0; --d) {
    aStride[d - 1] = aStride[d] * (aHi[d] - aLo[d]);
    bStride[d - 1] = bStride[d] * (bHi[d] - bLo[d]);
  }
  const int64_t length = (hi[k] - lo[k]) * aStride[k];
  Index index(lo.begin(), lo.begin() + k);
  while (true) {
    int64_t a = (lo[k] - aLo[k]) * aStride[k];
    int64_t b = (lo[k] - bLo[k]) * bStride[k];
    for (size_t d = 0; d < k; ++d) {
      a += (index[d] - aLo[d]) * aStride[d];
      b += (index[d] - bLo[d]) * bStride[d];
    }
    fn(a, b, length);
    if (!nextIndex(index, lo, hi, k))
      return;
  }
}

} // namespace ppc::runtime

#endif // PPC_RUNTIME_BOXES_H
