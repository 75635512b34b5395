//===- Reductions.h - row and column reductions on the device ---*- C++ -*-===//
//
// Private to runtime/cuda. The building blocks of every kernel that sums or
// takes a maximum over many elements (softmax, layer and RMS norm,
// cross-entropy, bias gradients, batch-norm statistics, the reduce ops),
// written once for both builds of Device.h:
//  - launchRows: a warp per row for rows up to 1024 elements (8 rows to a
//    block; their reductions are warp shuffles alone), a block of up to 256
//    threads per wider row. The row's threads stride over its elements and
//    combine their partial values (warp shuffles, then, in a block, one
//    warp over the warps' results), so a row's statistic is ready to every
//    thread of it, which then writes the row. The order of every sum is
//    fixed by the threads per row, which the row's width fixes: results
//    are deterministic. Every thread of a row must reach every reduction
//    (no early return before one).
//  - sumColumns: per column of a [rows, cols] iteration, a sum over the rows
//    in two deterministic levels, a block per tile of 32 columns in each
//    (chunks of rows split among the block's warps, then the chunks), so
//    few columns over many rows still fill the device with many loads in
//    flight.
// In the host emulation a row has one thread (its reductions return their
// argument) and the chunks run in order: the same arithmetic, one order.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_CUDA_REDUCTIONS_H
#define PPC_RUNTIME_CUDA_REDUCTIONS_H

#include "Blocks.h"
#include "Device.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace ppc::runtime::cuda {

/// The threads that share one row of a launchRows kernel: this one is
/// number `thread` of `threads`; it takes the row's elements thread,
/// thread + threads, ...
struct RowThreads {
  int64_t thread = 0;
  int64_t threads = 1;
  /// 33 doubles of the block's shared memory (null in emulation).
  double *slots = nullptr;

  /// The sum of every thread's `value`, in every thread.
  PPC_HD float sum(float value) const;
  PPC_HD double sum(double value) const;
  /// The largest of every thread's `value` (NaN if any is), in every thread.
  PPC_HD float max(float value) const;
};

#if defined(__CUDA_ARCH__)
namespace detail {

struct SumOp {
  template <typename T> __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const {
    return a != a || b != b ? NAN : (a < b ? b : a);
  }
};

/// The block-wide combination of every thread's `value` (blockDim.x a
/// multiple of 32), `identity` the operation's neutral element; the same
/// order of operations for every call of one block size.
template <typename T, typename Op>
__device__ T blockReduce(T value, Op op, T identity, double *slots) {
  for (int offset = 16; offset > 0; offset /= 2)
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  const int warps = blockDim.x / 32;
  if (warps == 1)
    return value;
  T *shared = reinterpret_cast<T *>(slots);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0)
    shared[warp] = value;
  __syncthreads();
  if (warp == 0) {
    T total = lane < warps ? shared[lane] : identity;
    for (int offset = 16; offset > 0; offset /= 2)
      total = op(total, __shfl_xor_sync(0xffffffffu, total, offset));
    if (lane == 0)
      shared[32] = total;
  }
  __syncthreads();
  const T result = shared[32];
  __syncthreads(); // the slots are free for the next reduction
  return result;
}

} // namespace detail
#endif

#if defined(__CUDA_ARCH__)
namespace detail {
/// The combination of a warp's values, in every lane of it.
template <typename T, typename Op> __device__ T warpReduce(T value, Op op) {
  for (int offset = 16; offset > 0; offset /= 2)
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}
} // namespace detail
#endif

PPC_HD inline float RowThreads::sum(float value) const {
#if defined(__CUDA_ARCH__)
  if (threads == 1)
    return value;
  if (threads == 32)
    return detail::warpReduce(value, detail::SumOp());
  return detail::blockReduce(value, detail::SumOp(), 0.0f, slots);
#else
  return value;
#endif
}

PPC_HD inline double RowThreads::sum(double value) const {
#if defined(__CUDA_ARCH__)
  if (threads == 1)
    return value;
  if (threads == 32)
    return detail::warpReduce(value, detail::SumOp());
  return detail::blockReduce(value, detail::SumOp(), 0.0, slots);
#else
  return value;
#endif
}

PPC_HD inline float RowThreads::max(float value) const {
#if defined(__CUDA_ARCH__)
  if (threads == 1)
    return value;
  if (threads == 32)
    return detail::warpReduce(value, detail::MaxOp());
  return detail::blockReduce(value, detail::MaxOp(), -INFINITY, slots);
#else
  return value;
#endif
}

/// Rows up to this wide run a warp each, 8 to a block: their reductions
/// are shuffles alone (a block per row waits at two barriers per reduction).
constexpr int64_t kWarpRowWidth = 1024;

/// Threads per row for rows of `width` elements: a warp up to
/// kWarpRowWidth, then up to 256 (each thread takes several elements).
inline int rowThreads(int64_t width) {
  int threads = 32;
  while (width > kWarpRowWidth && threads < 256 && threads * 4 < width)
    threads *= 2;
  return threads;
}

#if defined(__CUDACC__)
/// Rows of `perRow` threads each, blockDim.x / perRow of them to a block
/// (perRow 32, or the whole block).
template <typename Fn>
__global__ void rowsKernel(int64_t rows, int perRow, Fn fn) {
  __shared__ double slots[33];
  RowThreads t;
  t.thread = threadIdx.x % perRow;
  t.threads = perRow;
  t.slots = slots;
  const int64_t rowsPerBlock = blockDim.x / perRow;
  // The threads of a row take the same rows, so every one meets every
  // reduction of every row.
  for (int64_t row = blockIdx.x * rowsPerBlock + threadIdx.x / perRow;
       row < rows; row += int64_t(gridDim.x) * rowsPerBlock)
    fn(t, row);
}
#endif

/// Rows narrower than this run one per thread (a block would idle).
constexpr int64_t kBlockRowWidth = 32;

/// Calls fn(threads, row) for every row in [0, rows), rows of about
/// `width` elements each: a block of threads per row (their number set by
/// the width), or one thread per row for rows under kBlockRowWidth. fn is a
/// PPC_HD lambda capturing by value; see the header for its rules.
template <typename Fn>
void launchRows(Stream stream, int64_t rows, int64_t width, Fn fn) {
  if (rows <= 0)
    return;
#if defined(PPC_CUDA_EMULATION)
  (void)stream;
  (void)width;
  launchCount().fetch_add(1, std::memory_order_relaxed);
  RowThreads t;
  for (int64_t row = 0; row < rows; ++row)
    fn(t, row);
#else
  if (width < kBlockRowWidth) {
    launch(stream, rows, [=] PPC_HD(int64_t row) {
      RowThreads t;
      fn(t, row);
    });
    return;
  }
  launchCount().fetch_add(1, std::memory_order_relaxed);
  const int perRow = rowThreads(width);
  const int block = perRow == 32 ? 256 : perRow;
  const int64_t rowsPerBlock = block / perRow;
  const int64_t blocks = std::min<int64_t>(
      (rows + rowsPerBlock - 1) / rowsPerBlock, int64_t(1) << 20);
  rowsKernel<<<static_cast<unsigned>(blocks), block, 0, stream>>>(rows, perRow,
                                                                  fn);
#endif
}

/// Columns a block of sumColumns takes (a warp's lanes) and the warps that
/// split its rows.
constexpr int kColumnTile = 32;
constexpr int kColumnWarps = 8;

/// Chunks of rows sumColumns splits `rows` into for `cols` columns: enough
/// blocks (chunk, tile of 32 columns) to fill a device several times over,
/// chunks of at least 64 rows.
inline int64_t columnChunks(int64_t rows, int64_t cols) {
  const int64_t tiles =
      (std::max<int64_t>(cols, 1) + kColumnTile - 1) / kColumnTile;
  const int64_t wanted = (2048 + tiles - 1) / tiles;
  return std::max<int64_t>(1, std::min(wanted, rows / 64));
}

/// store(c, the sum of the block's warps' `sums` of column c, in warp
/// order) for the columns of `tile`, by warp 0, once every warp has
/// written its sums.
template <typename T, typename Store>
PPC_HD void combineWarpSums(const BlockThreads &t, int64_t tile, int64_t cols,
                            const T *sums, Store store) {
  t.sync();
  if (t.warp != 0)
    return;
  for (int lane = t.lane; lane < kColumnTile; lane += t.lanes) {
    const int64_t c = tile * kColumnTile + lane;
    if (c >= cols)
      continue;
    T total = 0;
    for (int w = 0; w < kColumnWarps; ++w)
      total += sums[w * kColumnTile + lane];
    store(c, total);
  }
}

/// For every column c in [0, cols): finish(c, sum of term(r, c) over the
/// rows r in [0, rows)), in type T and two levels, each a block per tile of
/// 32 columns (a lane per column, reading neighbouring columns together):
/// per chunk of rows, warp w sums the rows w, w + 8, ... of the chunk and
/// the warps' sums are added in warp order; then per tile the chunks'
/// sums, warp w taking the chunks w, w + 8, ..., added likewise. The order
/// is fixed by the shape: results are deterministic. `partials` holds
/// columnChunks(rows, cols) * cols values of T. term and finish are PPC_HD
/// lambdas capturing by value.
template <typename T, typename Term, typename Finish>
void sumColumns(Stream stream, int64_t rows, int64_t cols, T *partials,
                Term term, Finish finish) {
  if (cols <= 0)
    return;
  const int64_t chunks = columnChunks(rows, cols);
  const int64_t perChunk = (rows + chunks - 1) / chunks;
  const int64_t tiles = (cols + kColumnTile - 1) / kColumnTile;
  constexpr int threads = 32 * kColumnWarps;
  constexpr size_t shared = sizeof(T) * kColumnWarps * kColumnTile;
  launchBlocks(
      stream, chunks * tiles, threads, shared,
      [=] PPC_HD(const BlockThreads &t, int64_t block, char *memory) {
        T *sums = reinterpret_cast<T *>(memory);
        const int64_t chunk = block / tiles, tile = block % tiles;
        const int64_t lo = chunk * perChunk;
        const int64_t hi = lo + perChunk < rows ? lo + perChunk : rows;
        for (int w = t.warp; w < kColumnWarps; w += t.warps)
          for (int lane = t.lane; lane < kColumnTile; lane += t.lanes) {
            const int64_t c = tile * kColumnTile + lane;
            T total = 0;
            if (c < cols)
              for (int64_t r = lo + w; r < hi; r += kColumnWarps)
                total += term(r, c);
            sums[w * kColumnTile + lane] = total;
          }
        combineWarpSums<T>(t, tile, cols, sums, [&](int64_t c, T total) {
          partials[chunk * cols + c] = total;
        });
      });
  launchBlocks(
      stream, tiles, threads, shared,
      [=] PPC_HD(const BlockThreads &t, int64_t tile, char *memory) {
        T *sums = reinterpret_cast<T *>(memory);
        for (int w = t.warp; w < kColumnWarps; w += t.warps)
          for (int lane = t.lane; lane < kColumnTile; lane += t.lanes) {
            const int64_t c = tile * kColumnTile + lane;
            T total = 0;
            if (c < cols)
              for (int64_t chunk = w; chunk < chunks; chunk += kColumnWarps)
                total += partials[chunk * cols + c];
            sums[w * kColumnTile + lane] = total;
          }
        combineWarpSums<T>(t, tile, cols, sums, finish);
      });
}

} // namespace ppc::runtime::cuda

#endif // PPC_RUNTIME_CUDA_REDUCTIONS_H
