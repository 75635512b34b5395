//===- Blocks.h - block kernels with shared memory and tensor cores -*- C++
//-*-===//
//
// Private to runtime/cuda. The building blocks of kernels that a block of
// threads runs together over a tile of shared memory (the fused attention
// of FlashAttention.cu), written once for both builds of Device.h:
//  - launchBlocks: fn(threads, block, shared) for every block, `shared` the
//    block's dynamic shared memory. The block's threads split work by
//    thread, by warp and by lane; sync() is __syncthreads, syncWarp()
//    __syncwarp. Every thread of a block must reach every sync().
//  - warpMma: one warp's 16 x 16 float tile C = A B of 16-bit operands in
//    shared memory, on tensor cores (WMMA, float accumulation); all lanes of
//    the warp call it.
// In the host emulation a block has one thread, which is warp 0 of 1 and
// lane 0 of 1 (so a loop over a block's warps or a warp's lanes runs every
// iteration on it), sync() does nothing, and warpMma is a plain loop: the
// same arithmetic, in one order.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_CUDA_BLOCKS_H
#define PPC_RUNTIME_CUDA_BLOCKS_H

#include "Device.h"

#include <cstdint>
#include <vector>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#endif

namespace ppc::runtime::cuda {

/// One thread of a launchBlocks block: its index among the block's
/// threads, its warp among the block's warps, its lane among its warp's.
struct BlockThreads {
  int thread = 0, threads = 1;
  int warp = 0, warps = 1;
  int lane = 0, lanes = 1;

  PPC_HD void sync() const {
#if defined(__CUDA_ARCH__)
    __syncthreads();
#endif
  }
  PPC_HD void syncWarp() const {
#if defined(__CUDA_ARCH__)
    __syncwarp();
#endif
  }
};

#if defined(__CUDACC__)
template <typename Fn> __global__ void blocksKernel(int64_t blocks, Fn fn) {
  extern __shared__ __align__(16) char shared[];
  BlockThreads t;
  t.thread = threadIdx.x;
  t.threads = blockDim.x;
  t.warp = threadIdx.x / 32;
  t.warps = blockDim.x / 32;
  t.lane = threadIdx.x % 32;
  t.lanes = 32;
  for (int64_t block = blockIdx.x; block < blocks; block += gridDim.x)
    fn(t, block, shared);
}
#endif

/// The most dynamic shared memory one block may have on this device (the
/// emulation: any); 0 if unknown.
inline size_t maxBlockSharedBytes() {
#if defined(PPC_CUDA_EMULATION)
  return size_t(1) << 30;
#else
  int device = 0, bytes = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                             device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return static_cast<size_t>(bytes);
#endif
}

/// Calls fn(threads, block, shared) for every block in [0, blocks) on
/// blocks of `threads` threads (a multiple of 32) with `sharedBytes` of
/// shared memory each (at most maxBlockSharedBytes()). fn is a PPC_HD
/// lambda capturing by value. False when the device refuses the launch.
template <typename Fn>
bool launchBlocks(Stream stream, int64_t blocks, int threads,
                  size_t sharedBytes, Fn fn) {
  if (blocks <= 0)
    return true;
  launchCount().fetch_add(1, std::memory_order_relaxed);
#if defined(PPC_CUDA_EMULATION)
  (void)stream;
  (void)threads;
  std::vector<double> shared((sharedBytes + sizeof(double) - 1) /
                             sizeof(double));
  BlockThreads t;
  for (int64_t block = 0; block < blocks; ++block)
    fn(t, block, reinterpret_cast<char *>(shared.data()));
  return true;
#else
  if (sharedBytes > 48 * 1024 &&
      cudaFuncSetAttribute(blocksKernel<Fn>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(sharedBytes)) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  const int64_t grid = std::min<int64_t>(blocks, int64_t(1) << 20);
  blocksKernel<<<static_cast<unsigned>(grid), threads, sharedBytes, stream>>>(
      blocks, fn);
  return true;
#endif
}

#if defined(__CUDA_ARCH__)
namespace detail {

template <typename T, bool ATransposed, bool BTransposed>
__device__ void wmmaTile(const uint16_t *a, int lda, const uint16_t *b, int ldb,
                         float *c, int ldc, int kSteps) {
  using namespace nvcuda;
  using LayoutA = typename std::conditional<ATransposed, wmma::col_major,
                                            wmma::row_major>::type;
  using LayoutB = typename std::conditional<BTransposed, wmma::col_major,
                                            wmma::row_major>::type;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, T, LayoutA> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LayoutB> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  for (int s = 0; s < kSteps; ++s) {
    // A's columns 16s.., B's rows 16s..: where they start in storage.
    const uint16_t *as = ATransposed ? a + 16 * s * lda : a + 16 * s;
    const uint16_t *bs = BTransposed ? b + 16 * s : b + 16 * s * ldb;
    wmma::load_matrix_sync(fa, reinterpret_cast<const T *>(as), lda);
    wmma::load_matrix_sync(fb, reinterpret_cast<const T *>(bs), ldb);
    wmma::mma_sync(acc, fa, fb, acc);
  }
  wmma::store_matrix_sync(c, acc, ldc, wmma::mem_row_major);
}

} // namespace detail
#endif

/// C = A B for one warp's 16 x 16 tile: A is 16 x 16k and B 16k x 16 (k =
/// kSteps), 16-bit values of `type` (bf16 or f16) in shared memory, A
/// stored row-major with leading dimension lda (ATransposed: its transpose
/// stored row-major, element (i, l) at a[l * lda + i]), B likewise; C is
/// float, row-major with leading dimension ldc. Products accumulate in
/// float. Every lane of the warp calls it.
template <bool ATransposed, bool BTransposed>
PPC_HD void warpMma(const BlockThreads &t, DType type, const uint16_t *a,
                    int lda, const uint16_t *b, int ldb, float *c, int ldc,
                    int kSteps) {
#if defined(__CUDA_ARCH__)
  (void)t;
  if (type == DType::BF16)
    detail::wmmaTile<__nv_bfloat16, ATransposed, BTransposed>(a, lda, b, ldb, c,
                                                              ldc, kSteps);
  else
    detail::wmmaTile<__half, ATransposed, BTransposed>(a, lda, b, ldb, c, ldc,
                                                       kSteps);
#else
  (void)t;
  auto value = [type](uint16_t bits) {
    return type == DType::BF16 ? bfloat16ToFloat(bits) : halfToFloat(bits);
  };
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float sum = 0.0f;
      for (int l = 0; l < 16 * kSteps; ++l)
        sum += value(ATransposed ? a[l * lda + i] : a[i * lda + l]) *
               value(BTransposed ? b[j * ldb + l] : b[l * ldb + j]);
      c[i * ldc + j] = sum;
    }
#endif
}

/// `value` rounded to the 16-bit `type` (bf16 or f16), as bits.
PPC_HD inline uint16_t toHalfBits(DType type, float value) {
  return type == DType::BF16 ? floatToBFloat16(value) : floatToHalf(value);
}

} // namespace ppc::runtime::cuda

#endif // PPC_RUNTIME_CUDA_BLOCKS_H
