//===- Reductions.h - row and column reductions on the device ---*- C++ -*-===//
//
// Private to runtime/cuda. The building blocks of every kernel that sums or
// takes a maximum over many elements (softmax, layer and RMS norm,
// cross-entropy, bias gradients, batch-norm statistics, the reduce ops),
// written once for both builds of Device.h:
//  - launchRows: one thread block per row. The row's threads stride over
//    its elements and combine their partial values with block-wide
//    reductions (warp shuffles, then one warp over the warps' results), so a
//    row's statistic is ready to every thread of it, which then writes the
//    row. The order of every sum is fixed by the block size, which is fixed
//    by the row's width: results are deterministic. Every thread of a row
//    must reach every reduction (no early return before one).
//  - sumColumns: per column of a [rows, cols] iteration, a sum over the rows
//    in two deterministic levels: chunks of rows (one thread per chunk and
//    column, neighbouring columns on neighbouring threads), then the chunks
//    in order, so few columns over many rows still fill the device.
// In the host emulation a row has one thread (its reductions return their
// argument) and the chunks run in order: the same arithmetic, one order.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_CUDA_REDUCTIONS_H
#define PPC_RUNTIME_CUDA_REDUCTIONS_H

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

PPC_HD inline float RowThreads::sum(float value) const {
#if defined(__CUDA_ARCH__)
  if (threads == 1)
    return value;
  return detail::blockReduce(value, detail::SumOp(), 0.0f, slots);
#else
  return value;
#endif
}

PPC_HD inline double RowThreads::sum(double value) const {
#if defined(__CUDA_ARCH__)
  if (threads == 1)
    return value;
  return detail::blockReduce(value, detail::SumOp(), 0.0, slots);
#else
  return value;
#endif
}

PPC_HD inline float RowThreads::max(float value) const {
#if defined(__CUDA_ARCH__)
  if (threads == 1)
    return value;
  return detail::blockReduce(value, detail::MaxOp(), -INFINITY, slots);
#else
  return value;
#endif
}

/// Threads per row for rows of `width` elements: a warp for short rows, up
/// to 256 for long ones (each thread then takes several elements).
inline int rowThreads(int64_t width) {
  int threads = 32;
  while (threads < 256 && threads * 4 < width)
    threads *= 2;
  return threads;
}

#if defined(__CUDACC__)
template <typename Fn> __global__ void rowsKernel(int64_t rows, Fn fn) {
  __shared__ double slots[33];
  RowThreads t;
  t.thread = threadIdx.x;
  t.threads = blockDim.x;
  t.slots = slots;
  // The whole block takes the same rows, so every thread meets every
  // reduction of every row.
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x)
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
  const int64_t blocks = std::min<int64_t>(rows, int64_t(1) << 20);
  rowsKernel<<<static_cast<unsigned>(blocks), rowThreads(width), 0, stream>>>(
      rows, fn);
#endif
}

/// Chunks of rows sumColumns splits `rows` into for `cols` columns: enough
/// (chunk, column) threads to fill a device, chunks of at least 16 rows.
inline int64_t columnChunks(int64_t rows, int64_t cols) {
  const int64_t wanted = (int64_t(1) << 16) / std::max<int64_t>(cols, 1);
  return std::max<int64_t>(1, std::min(wanted, rows / 16));
}

/// For every column c in [0, cols): finish(c, sum of term(r, c) over the
/// rows r in [0, rows)), the sum taken in two levels (chunks of rows, then
/// the chunks in order) in type T. `partials` holds
/// columnChunks(rows, cols) * cols values of T. term and finish are PPC_HD
/// lambdas capturing by value.
template <typename T, typename Term, typename Finish>
void sumColumns(Stream stream, int64_t rows, int64_t cols, T *partials,
                Term term, Finish finish) {
  if (cols <= 0)
    return;
  const int64_t chunks = columnChunks(rows, cols);
  const int64_t perChunk = (rows + chunks - 1) / std::max<int64_t>(chunks, 1);
  launch(stream, chunks * cols, [=] PPC_HD(int64_t i) {
    const int64_t chunk = i / cols, c = i % cols;
    const int64_t lo = chunk * perChunk;
    const int64_t hi = lo + perChunk < rows ? lo + perChunk : rows;
    T total = 0;
    for (int64_t r = lo; r < hi; ++r)
      total += term(r, c);
    partials[i] = total;
  });
  launch(stream, cols, [=] PPC_HD(int64_t c) {
    T total = 0;
    for (int64_t chunk = 0; chunk < chunks; ++chunk)
      total += partials[chunk * cols + c];
    finish(c, total);
  });
}

} // namespace ppc::runtime::cuda

#endif // PPC_RUNTIME_CUDA_REDUCTIONS_H
