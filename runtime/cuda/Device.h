//===- Device.h - the cuda backend's portable kernel layer ------*- C++ -*-===//
//
// Private to runtime/cuda. The backend's own kernels are written once, as
// per-element functions launched over an index range, and compiled twice:
//  - by nvcc (PPCCudaBackend): launch() runs a grid-stride CUDA kernel on
//    the backend's stream;
//  - by the host compiler with PPC_CUDA_EMULATION (PPCCudaEmulated):
//    launch() is a loop and device memory is host memory, so the same
//    kernels, dispatch and backend code run, and are tested against the cpu
//    backend, on machines without a GPU (CI).
// What cannot be emulated (cuBLAS, cuDNN, NCCL) sits behind seams with a
// plain implementation in emulation (Library.h).
//
// Kernels index boxes as the cpu kernels do (Kernels.h): a DeviceBox is a
// view's box of a global tensor, passed to kernels by value.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_CUDA_DEVICE_H
#define PPC_RUNTIME_CUDA_DEVICE_H

#include "ppc/Runtime/DType.h"
#include "ppc/Runtime/HostDevice.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <vector>

#if !defined(PPC_CUDA_EMULATION)
#include <cuda_runtime.h>
#endif

/// Unrolls the loop it precedes on the device (loops over arrays of
/// registers must be unrolled for the arrays to stay in registers).
#if defined(__CUDA_ARCH__)
#define PPC_UNROLL _Pragma("unroll")
#else
#define PPC_UNROLL
#endif

namespace ppc::runtime::cuda {

/// The most dims a kernel's box has (the plan's tensors have at most 6).
constexpr int kMaxRank = 8;

/// Box [lo, hi) of a global tensor of shape `shape`, held row-major.
struct DeviceBox {
  int32_t rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t lo[kMaxRank] = {};
  int64_t hi[kMaxRank] = {};

  PPC_HD int64_t extent(int d) const { return hi[d] - lo[d]; }
  PPC_HD int64_t count() const {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d)
      n *= hi[d] > lo[d] ? hi[d] - lo[d] : 0;
    return n;
  }
  /// The global index of the box's element number `i` (row-major).
  PPC_HD void indexOf(int64_t i, int64_t *index) const {
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t e = hi[d] - lo[d];
      index[d] = lo[d] + i % e;
      i /= e;
    }
  }
  /// Offset in the buffer of global index `index` (inside the box).
  PPC_HD int64_t offsetOf(const int64_t *index) const {
    int64_t offset = 0;
    for (int d = 0; d < rank; ++d)
      offset = offset * (hi[d] - lo[d]) + (index[d] - lo[d]);
    return offset;
  }
  PPC_HD bool contains(const int64_t *index) const {
    for (int d = 0; d < rank; ++d)
      if (index[d] < lo[d] || index[d] >= hi[d])
        return false;
    return true;
  }
  /// Row-major flat index of `index` in the whole tensor.
  PPC_HD int64_t globalFlat(const int64_t *index) const {
    int64_t flat = 0;
    for (int d = 0; d < rank; ++d)
      flat = flat * shape[d] + index[d];
    return flat;
  }
};

/// The box of a view's shape, lo and hi (rank <= kMaxRank, checked by the
/// dispatch).
inline DeviceBox makeBox(const std::vector<int64_t> &shape,
                         const std::vector<int64_t> &lo,
                         const std::vector<int64_t> &hi) {
  DeviceBox box;
  box.rank = static_cast<int32_t>(shape.size());
  for (size_t d = 0; d < shape.size() && d < kMaxRank; ++d) {
    box.shape[d] = shape[d];
    box.lo[d] = lo[d];
    box.hi[d] = hi[d];
  }
  return box;
}

/// Bytes of one element of `dtype`.
PPC_HD inline int bytesOf(DType dtype) {
  return dtype == DType::I64 ? 8 : dtype == DType::F32 ? 4 : 2;
}

/// Element `i` of `data`, stored as `dtype`, as a float.
PPC_HD inline float loadAsFloat(DType dtype, const void *data, int64_t i) {
  switch (dtype) {
  case DType::F32:
    return static_cast<const float *>(data)[i];
  case DType::BF16:
    return bfloat16ToFloat(static_cast<const uint16_t *>(data)[i]);
  case DType::F16:
    return halfToFloat(static_cast<const uint16_t *>(data)[i]);
  case DType::I64:
    return static_cast<float>(static_cast<const int64_t *>(data)[i]);
  }
  return 0;
}

/// Stores `value` as element `i` of `data`, rounded to `dtype` as the cpu
/// backend rounds (DType.h).
PPC_HD inline void storeFromFloat(DType dtype, void *data, int64_t i,
                                  float value) {
  switch (dtype) {
  case DType::F32:
    static_cast<float *>(data)[i] = value;
    return;
  case DType::BF16:
    static_cast<uint16_t *>(data)[i] = floatToBFloat16(value);
    return;
  case DType::F16:
    static_cast<uint16_t *>(data)[i] = floatToHalf(value);
    return;
  case DType::I64:
    // As fromFloat: nearest, ties away from zero; non-finite as 0.
    static_cast<int64_t *>(data)[i] =
        value - value == 0
            ? static_cast<int64_t>(value < 0 ? value - 0.5f : value + 0.5f)
            : 0;
    return;
  }
}

/// One element of an Elements (below), read and written as a float.
struct ElementRef {
  void *data;
  DType type;
  int64_t i;

  PPC_HD operator float() const { return loadAsFloat(type, data, i); }
  PPC_HD ElementRef &operator=(float value) {
    storeFromFloat(type, data, i, value);
    return *this;
  }
  /// The value, not the reference, is copied.
  PPC_HD ElementRef &operator=(const ElementRef &other) {
    return *this = static_cast<float>(other);
  }
  PPC_HD ElementRef &operator+=(float value) {
    return *this = static_cast<float>(*this) + value;
  }
  PPC_HD ElementRef &operator-=(float value) {
    return *this = static_cast<float>(*this) - value;
  }
  PPC_HD ElementRef &operator*=(float value) {
    return *this = static_cast<float>(*this) * value;
  }
};

/// A tensor's elements in device memory as they are stored (float32, bf16,
/// f16 or int64), read and written as floats through `[]` as a float
/// pointer's would be: kernels compute in float registers and round once,
/// where they store, to the storage type. The type is the same for every
/// element, so the switch on it costs a kernel no divergence. The shared
/// per-element arithmetic of both backends (templates over the pointer
/// type) runs on a float pointer in the cpu backend and on Elements here.
/// Null: no tensor (a gradient that is not wanted).
struct Elements {
  void *data = nullptr;
  DType type = DType::F32;

  PPC_HD explicit operator bool() const { return data != nullptr; }
  PPC_HD ElementRef operator[](int64_t i) const { return {data, type, i}; }
  /// The elements from element `offset` on.
  PPC_HD Elements operator+(int64_t offset) const {
    return {data ? static_cast<char *>(data) + offset * bytesOf(type) : nullptr,
            type};
  }
  /// The address of element `i` (for libraries).
  PPC_HD void *at(int64_t i) const {
    return static_cast<char *>(data) + i * bytesOf(type);
  }
};

/// Adds `value` into element `i` of `e`, or where `overwrite` writes it (a
/// gradient's first contribution: what the element held is not read).
PPC_HD inline void addInto(Elements e, int64_t i, float value, bool overwrite) {
  if (overwrite)
    e[i] = value;
  else
    e[i] += value;
}

/// Float32 elements at `data`.
PPC_HD inline Elements floatElements(float *data) { return {data, DType::F32}; }

/// A stream of work: cudaStream_t, or nothing in emulation.
#if defined(PPC_CUDA_EMULATION)
using Stream = void *;
#else
using Stream = cudaStream_t;
#endif

/// Adds `value` to `*target`; atomic on the device, for kernels whose
/// elements sum into shared places (a gather's backward into its table).
PPC_HD inline void atomicAddFloat(float *target, float value) {
#ifdef __CUDA_ARCH__
  atomicAdd(target, value);
#else
  *target += value;
#endif
}

/// Largest of two floats, atomically on the device.
PPC_HD inline void atomicMaxFloat(float *target, float value) {
#ifdef __CUDA_ARCH__
  // Floats order as their bits do among non-negatives, reversed among
  // negatives.
  if (value >= 0)
    atomicMax(reinterpret_cast<int *>(target), __float_as_int(value));
  else
    atomicMin(reinterpret_cast<unsigned *>(target), __float_as_uint(value));
#else
  if (value > *target)
    *target = value;
#endif
}

/// Lowers `*slot` to `key` (atomically on the device): a check's flag that
/// keeps the least key its failing elements report (DeviceChecks).
PPC_HD inline void flagLeast(unsigned long long *slot, unsigned long long key) {
#ifdef __CUDA_ARCH__
  atomicMin(slot, key);
#else
  if (key < *slot)
    *slot = key;
#endif
}

/// Copies `bytes` of device memory at `device` to `host` once the stream's
/// work before it is done (a kernel's host-side check of device values:
/// labels, indices). Waits for the stream.
inline void copyToHost(Stream stream, void *host, const void *device,
                       size_t bytes) {
  if (bytes == 0)
    return;
#if defined(PPC_CUDA_EMULATION)
  (void)stream;
  std::memcpy(host, device, bytes);
#else
  cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream);
  cudaStreamSynchronize(stream);
#endif
}

#if defined(__CUDACC__)
template <typename Fn> __global__ void forEachIndexKernel(int64_t n, Fn fn) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride)
    fn(i);
}
#endif

/// Kernels launched and library calls made by this process (the
/// backend's Backend::launches).
inline std::atomic<int64_t> &launchCount() {
  static std::atomic<int64_t> count{0};
  return count;
}

/// Calls fn(i) for every i in [0, n), in parallel on the device: elements
/// must not depend on each other (use atomicAddFloat where they sum into
/// one place). fn is a PPC_HD lambda capturing by value.
template <typename Fn> void launch(Stream stream, int64_t n, Fn fn) {
  if (n <= 0)
    return;
  launchCount().fetch_add(1, std::memory_order_relaxed);
#if defined(PPC_CUDA_EMULATION)
  (void)stream;
  for (int64_t i = 0; i < n; ++i)
    fn(i);
#else
  constexpr int kThreads = 256;
  const int64_t blocks =
      std::min<int64_t>((n + kThreads - 1) / kThreads, int64_t(1) << 20);
  forEachIndexKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      n, fn);
#endif
}

//===----------------------------------------------------------------------===//
// Runs of elements of one storage type
//===----------------------------------------------------------------------===//

/// Elements one thread of launchRuns takes: 16 bytes of 16-bit storage.
constexpr int kRun = 8;

/// Elements [first, first + kRun) of `data`, stored as T (float32, bf16 or
/// f16), as floats; those from n on read as 0. A whole run is read 16
/// bytes at a time (`data` 16-byte aligned, first a multiple of kRun).
template <DType T>
PPC_HD inline void loadRun(const void *data, int64_t first, int64_t n,
                           float (&v)[kRun]) {
  if (first + kRun > n) {
    for (int k = 0; k < kRun; ++k)
      v[k] = first + k < n ? loadAsFloat(T, data, first + k) : 0.0f;
    return;
  }
  if (T == DType::F32) {
    float raw[kRun];
#if defined(__CUDA_ARCH__)
    const float4 *p = static_cast<const float4 *>(data) + first / 4;
    *reinterpret_cast<float4 *>(raw) = p[0];
    *reinterpret_cast<float4 *>(raw + 4) = p[1];
#else
    std::memcpy(raw, static_cast<const float *>(data) + first, sizeof(raw));
#endif
    PPC_UNROLL
    for (int k = 0; k < kRun; ++k)
      v[k] = raw[k];
    return;
  }
  uint16_t raw[kRun];
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<uint4 *>(raw) = *reinterpret_cast<const uint4 *>(
      static_cast<const uint16_t *>(data) + first);
#else
  std::memcpy(raw, static_cast<const uint16_t *>(data) + first, sizeof(raw));
#endif
  PPC_UNROLL
  for (int k = 0; k < kRun; ++k)
    v[k] = T == DType::BF16 ? bfloat16ToFloat(raw[k]) : halfToFloat(raw[k]);
}

/// Stores v as elements [first, first + kRun) of `data` (those below n),
/// rounded to T as storeFromFloat rounds; a whole run 16 bytes at a time.
template <DType T>
PPC_HD inline void storeRun(void *data, int64_t first, int64_t n,
                            const float (&v)[kRun]) {
  if (first + kRun > n) {
    for (int k = 0; k < kRun; ++k)
      if (first + k < n)
        storeFromFloat(T, data, first + k, v[k]);
    return;
  }
  if (T == DType::F32) {
#if defined(__CUDA_ARCH__)
    float4 *p = static_cast<float4 *>(data) + first / 4;
    p[0] = *reinterpret_cast<const float4 *>(v);
    p[1] = *reinterpret_cast<const float4 *>(v + 4);
#else
    std::memcpy(static_cast<float *>(data) + first, v, sizeof(v));
#endif
    return;
  }
  uint16_t raw[kRun];
  PPC_UNROLL
  for (int k = 0; k < kRun; ++k)
    raw[k] = T == DType::BF16 ? floatToBFloat16(v[k]) : floatToHalf(v[k]);
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<uint4 *>(static_cast<uint16_t *>(data) + first) =
      *reinterpret_cast<const uint4 *>(raw);
#else
  std::memcpy(static_cast<uint16_t *>(data) + first, raw, sizeof(raw));
#endif
}

/// The arrays a launchRuns reads.
template <int kInputs> struct RunInputs { const void *data[kInputs]; };

namespace detail {
template <DType T, int kInputs, typename Fn>
void runsOf(Stream stream, int64_t n, RunInputs<kInputs> in, void *out,
            bool accumulate, Fn fn) {
  launch(stream, (n + kRun - 1) / kRun, [=] PPC_HD(int64_t run) {
    const int64_t first = run * kRun;
    float args[kInputs][kRun], result[kRun];
    PPC_UNROLL
    for (int j = 0; j < kInputs; ++j)
      loadRun<T>(in.data[j], first, n, args[j]);
    if (accumulate)
      loadRun<T>(out, first, n, result);
    PPC_UNROLL
    for (int k = 0; k < kRun; ++k) {
      float a[kInputs];
      PPC_UNROLL
      for (int j = 0; j < kInputs; ++j)
        a[j] = args[j][k];
      const float value = fn(a);
      result[k] = accumulate ? result[k] + value : value;
    }
    storeRun<T>(out, first, n, result);
  });
}
} // namespace detail

/// Whether launchRuns takes these arrays: one storage type (float32, bf16
/// or f16), each 16-byte aligned.
inline bool runsFit(std::initializer_list<Elements> arrays) {
  const DType type = arrays.begin()->type;
  for (const Elements &e : arrays)
    if (e.type != type ||
        (type != DType::F32 && type != DType::BF16 && type != DType::F16) ||
        reinterpret_cast<uintptr_t>(e.data) % 16 != 0)
      return false;
  return true;
}

/// For i in [0, n): out[i] = fn(a) with a[j] = in[j][i] (out[i] + fn(a)
/// where `accumulate`), every array of storage `type` (runsFit), kRun
/// elements a thread read and written 16 bytes at a time: the storage type
/// is known where the kernel is compiled (no switch per element) and a
/// thread has whole runs of loads in flight. fn is a PPC_HD lambda taking
/// `const float *` (kInputs values), capturing by value.
template <int kInputs, typename Fn>
void launchRuns(Stream stream, DType type, int64_t n, RunInputs<kInputs> in,
                void *out, bool accumulate, Fn fn) {
  if (type == DType::F32)
    detail::runsOf<DType::F32>(stream, n, in, out, accumulate, fn);
  else if (type == DType::BF16)
    detail::runsOf<DType::BF16>(stream, n, in, out, accumulate, fn);
  else
    detail::runsOf<DType::F16>(stream, n, in, out, accumulate, fn);
}

} // namespace ppc::runtime::cuda

#endif // PPC_RUNTIME_CUDA_DEVICE_H
