//===- Blocks.h - block kernels with shared memory and tensor cores -*- C++
//-*-===//
//
// Private to runtime/cuda. The building blocks of kernels that a block of
// threads runs together over a tile of shared memory (the fused attention
// of FlashAttention.cu), written once for both builds of Device.h:
// launchBlocks calls fn(threads, block, shared) for every block, `shared`
// the block's dynamic shared memory. The block's threads split work by
// thread, by warp and by lane; sync() is __syncthreads, syncWarp()
// __syncwarp. Every thread of a block must reach every sync(). In the host
// emulation a block has one thread, which is warp 0 of 1 and lane 0 of 1 (so
// a loop over a block's threads runs every iteration on it) and sync() does
// nothing; WarpTiles.h holds a warp's registers for such a thread.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_CUDA_BLOCKS_H
#define PPC_RUNTIME_CUDA_BLOCKS_H

#include "Device.h"

#include <cstdint>
#include <vector>

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

} // namespace ppc::runtime::cuda

#endif // PPC_RUNTIME_CUDA_BLOCKS_H
