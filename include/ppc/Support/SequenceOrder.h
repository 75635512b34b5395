//===- SequenceOrder.h - zigzag order of a causal sequence ------*- C++ -*-===//
//
// Causal attention split along its sequence gives the later positions more
// keys to see: n contiguous parts do 1, 3, 5, ... units of work. Megatron-
// Core balances it by storing the sequence in zigzag order: 2 * pairs
// chunks of length / (2 * pairs) positions, storage chunk 2j holding chunk
// j and storage chunk 2j + 1 holding chunk 2 * pairs - 1 - j. A contiguous
// split of the stored sequence into n parts, n dividing `pairs`, then gives
// each part chunks j and 2 * pairs - 1 - j for a run of j: equal causal
// work, and each ring step of equal work too.
//
// One definition of the order for the graph pass that permutes a model's
// sequence (ppc-zigzag-sequence), the cost model's causal work and the
// kernels' causal masks on both backends (PPC_HD). `pairs` 0: natural order.
// Header-only; the caller checks that 2 * pairs divides `length`.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SUPPORT_SEQUENCEORDER_H
#define PPC_SUPPORT_SEQUENCEORDER_H

#include "ppc/Runtime/HostDevice.h"

#include <cstdint>

namespace ppc {

/// The position (in natural order) of the element stored at `index`.
PPC_HD inline int64_t zigzagPosition(int64_t index, int64_t length,
                                     int64_t pairs) {
  if (pairs <= 0)
    return index;
  const int64_t chunk = length / (2 * pairs);
  const int64_t stored = index / chunk, offset = index - stored * chunk;
  const int64_t pair = stored / 2;
  return (stored % 2 == 0 ? pair : 2 * pairs - 1 - pair) * chunk + offset;
}

/// Where the element of natural position `position` is stored: the inverse
/// of zigzagPosition.
PPC_HD inline int64_t zigzagIndex(int64_t position, int64_t length,
                                  int64_t pairs) {
  if (pairs <= 0)
    return position;
  const int64_t chunk = length / (2 * pairs);
  const int64_t natural = position / chunk, offset = position - natural * chunk;
  const int64_t stored =
      natural < pairs ? 2 * natural : 2 * (2 * pairs - 1 - natural) + 1;
  return stored * chunk + offset;
}

/// Elements stored contiguously from `index` on whose positions are
/// contiguous too (to the end of its chunk, at most `limit`).
PPC_HD inline int64_t zigzagRun(int64_t index, int64_t length, int64_t pairs,
                                int64_t limit) {
  if (pairs <= 0)
    return limit;
  const int64_t chunk = length / (2 * pairs);
  const int64_t toEnd = chunk - index % chunk;
  return toEnd < limit ? toEnd : limit;
}

/// Calls fn(position, count) for each run of the elements stored at
/// [lo, hi): `count` elements from natural position `position` on, in
/// storage order (the whole range in natural order).
template <typename Fn>
PPC_HD inline void forEachZigzagRun(int64_t lo, int64_t hi, int64_t length,
                                    int64_t pairs, Fn &&fn) {
  for (int64_t i = lo; i < hi;) {
    const int64_t count = zigzagRun(i, length, pairs, hi - i);
    fn(zigzagPosition(i, length, pairs), count);
    i += count;
  }
}

/// The least and greatest natural positions of the elements stored at
/// [lo, hi) of a sequence of `length` in zigzag order of `pairs` (a run of
/// positions per chunk); first > last when the range is empty. What the
/// attention kernels skip keys and tiles by.
struct PositionSpan {
  int64_t first, last;
};
PPC_HD inline PositionSpan zigzagSpan(int64_t lo, int64_t hi, int64_t length,
                                      int64_t pairs) {
  PositionSpan span{length, -1};
  forEachZigzagRun(lo, hi, length, pairs, [&](int64_t at, int64_t count) {
    span.first = at < span.first ? at : span.first;
    span.last = at + count - 1 > span.last ? at + count - 1 : span.last;
  });
  return span;
}

} // namespace ppc

#endif // PPC_SUPPORT_SEQUENCEORDER_H
