//===- CudaBackend.cu - buffers, copies and kernels on one GPU ------------===//
//
// Work is issued in program order on one stream: kernels, copies, the
// optimizer. Memory comes from a caching allocator (blocks are reused in
// stream order, so a block freed after its last kernel was issued may serve
// the next allocation at once, as PyTorch's allocator does). 16-bit
// operands are widened into pooled float32 blocks for the kernels and their
// results rounded back, as the cpu backend does; GEMM operands stay bf16.
// Under PPC_CUDA_EMULATION (Device.h) the same code runs on host memory.
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"
#include "Library.h"
#if !defined(PPC_CUDA_EMULATION)
#include "NcclCommunicator.h"
#endif

#include "ppc/Runtime/Boxes.h"
#include "ppc/Runtime/Communicator.h"
#include "ppc/Runtime/CudaBackend.h"
#include "ppc/Runtime/DType.h"
#include "ppc/Runtime/Optimizer.h"
#include "ppc/Runtime/OptimizerStep.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

namespace ppc::runtime {

namespace cuda {

namespace {

//===----------------------------------------------------------------------===//
// Device memory and the host's view of it
//===----------------------------------------------------------------------===//

#if defined(PPC_CUDA_EMULATION)
void *rawAllocate(size_t bytes) { return std::malloc(bytes); }
void rawFree(void *p) { std::free(p); }
void copyIn(Stream, void *dst, const void *src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}
void copyOut(Stream, void *dst, const void *src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}
void waitFor(Stream) {}
void *pinnedAllocate(size_t bytes) { return std::malloc(bytes); }
void pinnedFree(void *p) { std::free(p); }
#else
void *rawAllocate(size_t bytes) {
  void *p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) {
    cudaGetLastError(); // clear the sticky-free out-of-memory error
    return nullptr;
  }
  return p;
}
void rawFree(void *p) { cudaFree(p); }
void copyIn(Stream stream, void *dst, const void *src, size_t bytes) {
  cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream);
}
void copyOut(Stream stream, void *dst, const void *src, size_t bytes) {
  cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream);
}
void waitFor(Stream stream) { cudaStreamSynchronize(stream); }
void *pinnedAllocate(size_t bytes) {
  void *p = nullptr;
  return cudaMallocHost(&p, bytes) == cudaSuccess ? p : nullptr;
}
void pinnedFree(void *p) { cudaFreeHost(p); }
#endif

/// Caching allocator: freed blocks wait in per-size lists for the next
/// request of their size class; when the device is full, the cache is
/// returned to it and the request tried again.
class Allocator {
public:
  ~Allocator() { releaseCache(); }

  void *allocate(size_t bytes) {
    const size_t size = sizeClass(bytes);
    {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = cache.find(size);
      if (it != cache.end() && !it->second.empty()) {
        void *p = it->second.back();
        it->second.pop_back();
        cachedBytes -= size;
        return p;
      }
    }
    void *p = rawAllocate(size);
    if (!p) {
      releaseCache();
      p = rawAllocate(size);
    }
    return p;
  }
  void release(void *p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex);
    cache[sizeClass(bytes)].push_back(p);
    cachedBytes += sizeClass(bytes);
  }
  void releaseCache() {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto &[size, blocks] : cache)
      for (void *p : blocks)
        rawFree(p);
    cache.clear();
    cachedBytes = 0;
  }

private:
  /// 512-byte steps to 1 MiB, 2 MiB steps above: few classes, little waste.
  static size_t sizeClass(size_t bytes) {
    const size_t step = bytes <= (size_t(1) << 20) ? 512 : size_t(2) << 20;
    return std::max(step, (bytes + step - 1) / step * step);
  }

  std::mutex mutex;
  std::map<size_t, std::vector<void *>> cache;
  size_t cachedBytes = 0;
};

class CudaBuffer final : public DeviceBuffer {
public:
  CudaBuffer(DType dtype, int64_t n, void *data,
             std::shared_ptr<Allocator> allocator)
      : DeviceBuffer(dtype, n, data), allocator(std::move(allocator)) {}
  ~CudaBuffer() override { allocator->release(data(), bytes()); }

private:
  std::shared_ptr<Allocator> allocator;
};

//===----------------------------------------------------------------------===//
// Elementwise helpers on typed device memory
//===----------------------------------------------------------------------===//

void convertToFloat(Stream stream, DType dtype, const void *src, float *dst,
                    int64_t n) {
  launch(stream, n,
         [=] PPC_HD(int64_t i) { dst[i] = loadAsFloat(dtype, src, i); });
}

void convertFromFloat(Stream stream, DType dtype, const float *src, void *dst,
                      int64_t n) {
  launch(stream, n,
         [=] PPC_HD(int64_t i) { storeFromFloat(dtype, dst, i, src[i]); });
}

void fillWith(Stream stream, DType dtype, void *data, int64_t n, float value) {
  launch(stream, n,
         [=] PPC_HD(int64_t i) { storeFromFloat(dtype, data, i, value); });
}

/// copyBox's kernel: box `region` from a buffer holding `src` to one holding
/// `dst`, converting, or adding when `accumulate`.
void copyRegion(Stream stream, DeviceBox region, DType from, const void *s,
                DeviceBox src, DType to, void *d, DeviceBox dst,
                bool accumulate) {
  launch(stream, region.count(), [=] PPC_HD(int64_t i) {
    int64_t index[kMaxRank];
    region.indexOf(i, index);
    const int64_t a = src.offsetOf(index), b = dst.offsetOf(index);
    if (from == DType::I64 && to == DType::I64) {
      int64_t *out = static_cast<int64_t *>(d) + b;
      const int64_t in = static_cast<const int64_t *>(s)[a];
      *out = accumulate ? *out + in : in;
      return;
    }
    if (from == to && !accumulate) { // bit copy: NaN payloads as they are
      if (bytesOf(to) == 4)
        static_cast<uint32_t *>(d)[b] = static_cast<const uint32_t *>(s)[a];
      else
        static_cast<uint16_t *>(d)[b] = static_cast<const uint16_t *>(s)[a];
      return;
    }
    float value = loadAsFloat(from, s, a);
    if (accumulate)
      value += loadAsFloat(to, d, b);
    storeFromFloat(to, d, b, value);
  });
}

/// One weight of an optimizer step as its kernel reads it: the float32
/// master `w`, the gradient as stored, the state slots, and the 16-bit copy
/// to round into (null: none).
struct UpdateEntry {
  float *w = nullptr;
  const void *grad = nullptr;
  DType gradType = DType::F32;
  float *m = nullptr, *v = nullptr;
  void *rounded = nullptr;
  DType roundedType = DType::F32;
  int64_t n = 0;

  bool operator==(const UpdateEntry &o) const {
    return w == o.w && grad == o.grad && gradType == o.gradType && m == o.m &&
           v == o.v && rounded == o.rounded && roundedType == o.roundedType &&
           n == o.n;
  }
};

/// Element `i` of an entry's step.
PPC_HD inline void updateElement(const OptimizerCoefficients &c,
                                 const UpdateEntry &e, int64_t i, float scale) {
  float g = loadAsFloat(e.gradType, e.grad, i);
  if (scale != 1.0f)
    g *= scale;
  switch (c.kind) {
  case OptimizerKind::Momentum:
    momentumElement(c, e.w[i], g, e.m[i]);
    break;
  case OptimizerKind::Adam:
    adamElement(c, e.w[i], g, e.m[i], e.v[i]);
    break;
  case OptimizerKind::Sgd:
    sgdElement(c, e.w[i], g);
    break;
  }
  if (e.rounded)
    storeFromFloat(e.roundedType, e.rounded, i, e.w[i]);
}

/// Elements of one weight each thread block of the multi-tensor step takes.
constexpr int64_t kUpdateChunk = 4096;

/// A chunk of the multi-tensor step: entry `entry`, elements from `start`.
struct UpdateChunk {
  int64_t entry = 0, start = 0;
  bool operator==(const UpdateChunk &o) const {
    return entry == o.entry && start == o.start;
  }
};

/// The step of every entry in one launch: a thread per element of every
/// chunk (a weight's last chunk partly idle).
void multiTensorKernel(Stream stream, OptimizerCoefficients c,
                       const UpdateEntry *entries, const UpdateChunk *chunks,
                       int64_t numChunks, float scale) {
  launch(stream, numChunks * kUpdateChunk, [=] PPC_HD(int64_t i) {
    const UpdateChunk chunk = chunks[i / kUpdateChunk];
    const int64_t element = chunk.start + i % kUpdateChunk;
    const UpdateEntry &e = entries[chunk.entry];
    if (element < e.n)
      updateElement(c, e, element, scale);
  });
}

void nonfiniteKernel(Stream stream, DType dtype, const void *data, int64_t n,
                     int *flag) {
  launch(stream, n, [=] PPC_HD(int64_t i) {
    const float x = loadAsFloat(dtype, data, i);
    if (x - x != 0)
      *flag = 1; // every writer writes 1: no race that matters
  });
}

//===----------------------------------------------------------------------===//
// Kernel views
//===----------------------------------------------------------------------===//

/// Float32 blocks for widened operands and kernels' workspaces, kept from
/// kernel to kernel (stream order makes a block free for the next kernel
/// as soon as the last one using it was issued).
class BlockPool {
public:
  explicit BlockPool(std::shared_ptr<Allocator> allocator)
      : allocator(std::move(allocator)) {}
  ~BlockPool() {
    for (auto &[size, block] : free)
      allocator->release(block, size * sizeof(float));
  }
  float *acquire(int64_t n) {
    n = std::max<int64_t>(n, 1);
    auto it = free.lower_bound(n);
    if (it != free.end() && it->first <= 2 * n) {
      float *block = it->second;
      used.emplace(block, it->first);
      free.erase(it);
      return block;
    }
    float *block =
        static_cast<float *>(allocator->allocate(size_t(n) * sizeof(float)));
    if (block)
      used.emplace(block, n);
    return block;
  }
  void release(float *block) {
    auto it = used.find(block);
    if (it == used.end())
      return;
    free.emplace(it->second, block);
    used.erase(it);
    // Keep the largest few: what the biggest kernels take at once.
    while (free.size() > kMaxBlocks) {
      allocator->release(free.begin()->second,
                         free.begin()->first * sizeof(float));
      free.erase(free.begin());
    }
  }

private:
  static constexpr size_t kMaxBlocks = 16;
  std::shared_ptr<Allocator> allocator;
  std::multimap<int64_t, float *> free;
  std::map<float *, int64_t> used;
};

/// A kernel's workspace: pool blocks given back when the kernel returns.
class KernelWorkspace final : public Workspace {
public:
  KernelWorkspace(BlockPool &pool, Stream stream)
      : pool(pool), stream(stream) {}
  ~KernelWorkspace() override {
    for (float *block : blocks)
      pool.release(block);
  }
  float *floats(int64_t n, bool zero) override {
    float *block = pool.acquire(n);
    if (!block)
      return nullptr;
    blocks.push_back(block);
    if (zero)
      zeroFloats(stream, block, n);
    return block;
  }

private:
  BlockPool &pool;
  Stream stream;
  std::vector<float *> blocks;
};

/// Kernel views of device views. For a native kernel, every buffer as it
/// is stored. Otherwise float32 buffers as they are, bf16 ones as they are
/// for ops that read bf16, others widened into pool blocks and, for
/// results, rounded back afterwards.
class KernelViews {
public:
  /// `native`: the buffers as stored. Else `load`: widen the values
  /// (inputs, gradients summed into); otherwise the block is zero-filled
  /// (results a kernel writes).
  KernelViews(BlockPool &pool, Stream stream,
              const std::vector<DeviceView> &from, bool native, bool load,
              bool asBf16 = false, bool bf16Results = false)
      : pool(pool), stream(stream), views(from.size()),
        blocks(from.size(), nullptr) {
    for (size_t i = 0; i < from.size(); ++i) {
      const DeviceView &v = from[i];
      KernelView &k = views[i];
      k.shape = v.shape;
      k.lo = v.lo;
      k.hi = v.hi;
      k.box = makeBox(v.shape, v.lo, v.hi);
      if (!v.buffer)
        continue;
      const DType dtype = v.buffer->dtype();
      void *address = v.buffer->at(v.offset);
      k.stored = dtype;
      if (dtype == DType::F32) {
        k.data = static_cast<float *>(address);
        k.elements = {address, dtype};
        continue;
      }
      if (native) {
        k.storage = address;
        k.elements = {address, dtype};
        continue;
      }
      if (bf16Results && dtype == DType::BF16) {
        k.bf16Result = static_cast<uint16_t *>(address);
        k.bf16 = k.bf16Result;
        k.elements = {address, dtype};
        continue;
      }
      if (asBf16 && dtype == DType::BF16) {
        k.bf16 = static_cast<const uint16_t *>(address);
        k.elements = {address, dtype};
        continue;
      }
      const int64_t n = v.numElements();
      blocks[i] = pool.acquire(n);
      if (!blocks[i]) {
        failed = true;
        continue;
      }
      if (load)
        convertToFloat(stream, dtype, address, blocks[i], n);
      else
        zeroFloats(stream, blocks[i], n);
      k.data = blocks[i];
      k.elements = floatElements(blocks[i]);
    }
  }
  ~KernelViews() {
    for (float *block : blocks)
      if (block)
        pool.release(block);
  }
  bool outOfMemory() const { return failed; }
  std::vector<KernelView> &get() { return views; }
  void writeBack(const std::vector<DeviceView> &to, size_t i) const {
    const DeviceView &v = to[i];
    if (blocks[i])
      convertFromFloat(stream, v.buffer->dtype(), blocks[i],
                       v.buffer->at(v.offset), v.numElements());
  }
  void writeBackAll(const std::vector<DeviceView> &to) const {
    for (size_t i = 0; i < to.size(); ++i)
      writeBack(to, i);
  }

private:
  BlockPool &pool;
  Stream stream;
  std::vector<KernelView> views;
  std::vector<float *> blocks;
  bool failed = false;
};

/// The backend's DeviceChecks: slots in one device array, preset to all
/// ones when the first check after a report takes one; read back, and the
/// checks' messages made, once the work is done (report). A step that
/// takes more slots than the array holds has them read on the spot.
class CheckSlots final : public DeviceChecks {
public:
  CheckSlots(std::shared_ptr<Allocator> allocator, Stream stream)
      : allocator(std::move(allocator)), stream(stream) {}
  ~CheckSlots() override {
    if (slots)
      allocator->release(slots, kSlots * sizeof(unsigned long long));
  }

  unsigned long long *
  slot(int64_t instruction,
       std::function<absl::Status(unsigned long long)> message) override {
    if (!slots) {
      slots = static_cast<unsigned long long *>(
          allocator->allocate(kSlots * sizeof(unsigned long long)));
      if (!slots)
        return nullptr;
    }
    if (checks.size() == kSlots)
      readBack();
    if (checks.empty()) {
      unsigned long long *all = slots;
      launch(stream, kSlots, [=] PPC_HD(int64_t i) { all[i] = ~0ull; });
    }
    checks.push_back({instruction, std::move(message)});
    return slots + checks.size() - 1;
  }

  /// The first flagged check's error since the last report (waits for the
  /// stream's work); OK when none.
  absl::Status report(int64_t &instruction) {
    readBack();
    instruction = firstInstruction;
    absl::Status error = std::move(firstError);
    firstError = absl::OkStatus();
    firstInstruction = -1;
    return error;
  }

private:
  static constexpr size_t kSlots = 4096;

  struct Check {
    int64_t instruction;
    std::function<absl::Status(unsigned long long)> message;
  };

  /// Reads the slots of the pending checks, keeps the first error found,
  /// and frees the slots.
  void readBack() {
    if (checks.empty())
      return;
    std::vector<unsigned long long> keys(checks.size());
    copyOut(stream, keys.data(), slots, keys.size() * sizeof(keys[0]));
    waitFor(stream);
    for (size_t i = 0; i < keys.size() && firstError.ok(); ++i)
      if (keys[i] != ~0ull) {
        firstError = checks[i].message(keys[i]);
        firstInstruction = checks[i].instruction;
      }
    checks.clear();
  }

  std::shared_ptr<Allocator> allocator;
  Stream stream;
  unsigned long long *slots = nullptr;
  std::vector<Check> checks;
  absl::Status firstError;
  int64_t firstInstruction = -1;
};

/// The checks every kernel call passes before its kernel sees the views.
absl::Status
checkViews(const OpDesc &op,
           std::initializer_list<const std::vector<DeviceView> *> lists) {
  for (const std::vector<DeviceView> *list : lists)
    for (const DeviceView &v : *list)
      if (v.shape.size() > static_cast<size_t>(kMaxRank))
        return absl::InvalidArgumentError(
            op.kind + ": rank " + std::to_string(v.shape.size()) +
            " is above the cuda backend's " + std::to_string(kMaxRank));
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// Events
//===----------------------------------------------------------------------===//

#if defined(PPC_CUDA_EMULATION)
/// Work is done when it is issued: the host's clock is the device's.
class CudaEvent final : public Event {
public:
  CudaEvent(Stream, bool) : at(std::chrono::steady_clock::now()) {}
  bool done() override { return true; }
  void wait() override {}
  double secondsSince(Event &earlier) override {
    return std::chrono::duration<double>(
               at - static_cast<CudaEvent &>(earlier).at)
        .count();
  }

private:
  std::chrono::steady_clock::time_point at;
};
#else
class CudaEvent final : public Event {
public:
  CudaEvent(Stream stream, bool timed) : timed(timed) {
    cudaEventCreateWithFlags(&event, timed ? cudaEventDefault
                                           : cudaEventDisableTiming);
    cudaEventRecord(event, stream);
  }
  ~CudaEvent() override { cudaEventDestroy(event); }
  bool done() override { return cudaEventQuery(event) != cudaErrorNotReady; }
  void wait() override { cudaEventSynchronize(event); }
  double secondsSince(Event &earlier) override {
    auto &from = static_cast<CudaEvent &>(earlier);
    float ms = 0;
    if (!timed || !from.timed ||
        cudaEventElapsedTime(&ms, from.event, event) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return ms * 1e-3;
  }

private:
  cudaEvent_t event;
  bool timed;
};
#endif

/// An event at the stream's current point; `timed` keeps the device's time.
std::unique_ptr<Event> recordEvent(Stream stream, bool timed = false) {
  return std::make_unique<CudaEvent>(stream, timed);
}

/// Dense FLOPs one multiprocessor of compute capability `cc` (86 for 8.6)
/// does per clock on `dtype`: tensor cores for bf16 and f16 (float32
/// accumulation), FMA units for float32; 0 where not known. From NVIDIA's
/// data sheets: A100 312 TFLOP/s bf16 = 108 SMs x 1.41 GHz x 2048, 19.5
/// float32 = x 128; H100 SXM 989 bf16 = 132 x 1.83 GHz x 4096, 67 float32 =
/// x 1.98 GHz x 256.
double flopsPerClockPerSM(int cc, DType dtype) {
  const bool tensor = dtype == DType::BF16 || dtype == DType::F16;
  if (cc >= 100)
    return tensor ? 8192 : 256;
  if (cc >= 90)
    return tensor ? 4096 : 256;
  if (cc == 80)
    return tensor ? 2048 : 128;
  if (cc >= 86)
    return tensor ? 1024 : 256;
  if (cc >= 70)
    return tensor ? 1024 : 128;
  return 0;
}

//===----------------------------------------------------------------------===//
// The multi-tensor optimizer's tables
//===----------------------------------------------------------------------===//

/// The entries and chunks of multi-tensor steps in device memory: uploaded
/// (through pinned memory, in stream order) only when they differ from the
/// ones last uploaded for the same table, which a plan's steps repeat; a
/// few tables kept at once (one per group of weights stepping together).
class UpdateTables {
public:
  UpdateTables(std::shared_ptr<Allocator> allocator, Stream stream)
      : allocator(std::move(allocator)), stream(stream) {}
  ~UpdateTables() {
    for (Table &t : tables) {
      if (t.device)
        allocator->release(t.device, t.capacity);
      if (t.pinned)
        pinnedFree(t.pinned);
    }
  }

  /// The device copies of `entries` and `chunks` (valid until the next
  /// call); false when out of memory.
  bool upload(const std::vector<UpdateEntry> &entries,
              const std::vector<UpdateChunk> &chunks,
              const UpdateEntry *&deviceEntries,
              const UpdateChunk *&deviceChunks) {
    Table *table = nullptr;
    for (Table &t : tables)
      if (t.entries == entries && t.chunks == chunks)
        table = &t;
    if (!table) {
      next = (next + 1) % kTables;
      table = &tables[next];
      const size_t entryBytes = entries.size() * sizeof(UpdateEntry);
      const size_t bytes = entryBytes + chunks.size() * sizeof(UpdateChunk);
      if (bytes > table->capacity) {
        if (table->device)
          allocator->release(table->device, table->capacity);
        if (table->pinned)
          pinnedFree(table->pinned);
        table->device = allocator->allocate(bytes);
        table->pinned = pinnedAllocate(bytes);
        table->capacity = table->device && table->pinned ? bytes : 0;
        if (!table->capacity)
          return false;
      }
      // The pinned copy may still be read by its last upload.
      if (table->copied)
        table->copied->wait();
      std::memcpy(table->pinned, entries.data(), entryBytes);
      std::memcpy(static_cast<char *>(table->pinned) + entryBytes,
                  chunks.data(), chunks.size() * sizeof(UpdateChunk));
      copyIn(stream, table->device, table->pinned, bytes);
      table->copied = recordEvent(stream);
      table->entries = entries;
      table->chunks = chunks;
    }
    deviceEntries = static_cast<const UpdateEntry *>(table->device);
    deviceChunks = reinterpret_cast<const UpdateChunk *>(
        static_cast<const char *>(table->device) +
        entries.size() * sizeof(UpdateEntry));
    return true;
  }

private:
  static constexpr size_t kTables = 4;
  struct Table {
    std::vector<UpdateEntry> entries;
    std::vector<UpdateChunk> chunks;
    void *device = nullptr, *pinned = nullptr;
    size_t capacity = 0;
    std::unique_ptr<Event> copied; ///< the end of the last upload
  };
  std::shared_ptr<Allocator> allocator;
  Stream stream;
  Table tables[kTables];
  size_t next = 0;
};

//===----------------------------------------------------------------------===//
// The backend
//===----------------------------------------------------------------------===//

class CudaBackend final : public Backend {
public:
  CudaBackend(Stream stream, std::unique_ptr<Library> library, bool poison)
      : stream(stream), library(std::move(library)), poison(poison),
        allocator(std::make_shared<Allocator>()), pool(allocator),
        checks(allocator, stream), updateTables(allocator, stream) {}
  ~CudaBackend() override {
    synchronize();
    if (staging)
      pinnedFree(staging);
#if !defined(PPC_CUDA_EMULATION)
    if (stagingRead)
      cudaEventDestroy(stagingRead);
    cudaStreamDestroy(stream);
#endif
  }

  const char *name() const override { return "cuda"; }
  bool queuesWork() const override { return true; }

  std::shared_ptr<DeviceBuffer> allocate(DType dtype, int64_t n) override {
    n = std::max<int64_t>(n, 1);
    const size_t bytes = size_t(n) * dtypeBytes(dtype);
    void *data = allocator->allocate(bytes);
    if (!data)
      return nullptr;
    launch(stream, (bytes + 3) / 4,
           [=] PPC_HD(int64_t i) { static_cast<uint32_t *>(data)[i] = 0; });
    return std::make_shared<CudaBuffer>(dtype, n, data, allocator);
  }

  std::shared_ptr<DeviceBuffer> allocateUninitialized(DType dtype,
                                                      int64_t n) override {
    n = std::max<int64_t>(n, 1);
    void *data = allocator->allocate(size_t(n) * dtypeBytes(dtype));
    if (!data)
      return nullptr;
    auto buffer = std::make_shared<CudaBuffer>(dtype, n, data, allocator);
    if (poison) {
      if (dtype == DType::I64)
        launch(stream, n, [=] PPC_HD(int64_t i) {
          static_cast<int64_t *>(data)[i] = INT64_MIN;
        });
      else
        fillWith(stream, dtype, data, n, NAN);
    }
    return buffer;
  }

  void fill(DeviceBuffer &buffer, double value) override {
    fillWith(stream, buffer.dtype(), buffer.data(), buffer.size(),
             static_cast<float>(value));
  }

  void write(DeviceBuffer &buffer, int64_t offset, const float *host,
             int64_t n) override {
    const int bytes = dtypeBytes(buffer.dtype());
    for (int64_t at = 0; at < n; at += kStagingElements) {
      const int64_t len = std::min(kStagingElements, n - at);
      // The staging block is reused: the copy that read it last must be
      // done, not the whole stream (a load mid-step would otherwise hold
      // the host until the GPU drained its queue).
      waitStaging();
      fromFloat(buffer.dtype(), host + at, len, stagingBlock());
      copyIn(stream, buffer.at(offset + at), stagingBlock(),
             size_t(len) * bytes);
      markStaging();
    }
  }

  void read(const DeviceBuffer &buffer, int64_t offset, int64_t n,
            float *host) override {
    const int bytes = dtypeBytes(buffer.dtype());
    for (int64_t at = 0; at < n; at += kStagingElements) {
      const int64_t len = std::min(kStagingElements, n - at);
      copyOut(stream, stagingBlock(), buffer.at(offset + at),
              size_t(len) * bytes);
      waitStream();
      toFloat(buffer.dtype(), stagingBlock(), len, host + at);
    }
  }

  void copyBox(const DeviceView &src, const DeviceView &dst, const Index &lo,
               const Index &hi, bool accumulate) override {
    if (boxVolume(lo, hi) == 0)
      return;
    copyRegion(stream, makeBox(src.shape, lo, hi), src.buffer->dtype(),
               src.buffer->at(src.offset), makeBox(src.shape, src.lo, src.hi),
               dst.buffer->dtype(), dst.buffer->at(dst.offset),
               makeBox(dst.shape, dst.lo, dst.hi), accumulate);
  }

  absl::Status forward(const OpDesc &op, const KernelContext &ctx,
                       const std::vector<DeviceView> &inputs,
                       const std::vector<DeviceView> &outputs,
                       const std::vector<DeviceView> &scratch) override {
    const CudaKernel *kernel = find(op);
    if (!kernel)
      return unsupported(op);
    PPC_RETURN_IF_ERROR(checkViews(op, {&inputs, &outputs, &scratch}));
    // A first stage of a bf16-reading op over bf16 data writes its bf16
    // results itself (the GEMMs' epilogue rounds them).
    auto allBf16 = [](const std::vector<DeviceView> &views) {
      return std::all_of(views.begin(), views.end(), [](const DeviceView &v) {
        return !v.buffer || v.buffer->dtype() == DType::BF16;
      });
    };
    const bool native = kernel->native;
    const bool bf16Results = !native && readsBf16(op) && ctx.stage == 0 &&
                             allBf16(inputs) && allBf16(outputs);
    // Results are written, not read, in a first stage; a later stage
    // continues from what the earlier one left.
    KernelViews in(pool, stream, inputs, native, true, readsBf16(op)),
        out(pool, stream, outputs, native, ctx.stage > 0, false, bf16Results),
        tmp(pool, stream, scratch, native, true);
    if (in.outOfMemory() || out.outOfMemory() || tmp.outOfMemory())
      return absl::ResourceExhaustedError(
          op.kind + ": out of device memory for its float32 views");
    KernelWorkspace workspace(pool, stream);
    ExecContext exec{stream, library.get(), &workspace, &checks};
    PPC_RETURN_IF_ERROR(
        kernel->forward(op, ctx, exec, in.get(), out.get(), tmp.get()));
    out.writeBackAll(outputs);
    tmp.writeBackAll(scratch);
    for (int i : updatedOperands(op, ctx.training))
      if (i < static_cast<int>(inputs.size()))
        in.writeBack(inputs, i);
    return absl::OkStatus();
  }

  absl::Status backward(const OpDesc &op, const KernelContext &ctx,
                        const std::vector<DeviceView> &inputs,
                        const std::vector<DeviceView> &outputs,
                        const std::vector<DeviceView> &outputGrads,
                        const std::vector<DeviceView> &inputGrads,
                        const std::vector<DeviceView> &scratch) override {
    const CudaKernel *kernel = find(op);
    if (!kernel)
      return unsupported(op);
    PPC_RETURN_IF_ERROR(checkViews(
        op, {&inputs, &outputs, &outputGrads, &inputGrads, &scratch}));
    // Gradients the kernel overwrites: it writes them itself, or they are
    // zeroed for it to add into.
    for (const DeviceView &g : inputGrads)
      if (g.overwrite && g.buffer && !kernel->overwrites)
        fillWith(stream, g.buffer->dtype(), g.buffer->at(g.offset),
                 g.numElements(), 0.0f);
    const bool asBf16 = readsBf16(op), native = kernel->native;
    KernelViews in(pool, stream, inputs, native, true, asBf16),
        out(pool, stream, outputs, native, true, asBf16),
        outGrads(pool, stream, outputGrads, native, true, asBf16),
        inGrads(pool, stream, inputGrads, native, true),
        tmp(pool, stream, scratch, native, true);
    if (kernel->overwrites)
      for (size_t i = 0; i < inputGrads.size(); ++i)
        inGrads.get()[i].overwrite =
            inputGrads[i].overwrite && inputGrads[i].buffer;
    if (in.outOfMemory() || out.outOfMemory() || outGrads.outOfMemory() ||
        inGrads.outOfMemory() || tmp.outOfMemory())
      return absl::ResourceExhaustedError(
          op.kind + ": out of device memory for its float32 views");
    KernelWorkspace workspace(pool, stream);
    ExecContext exec{stream, library.get(), &workspace, &checks};
    PPC_RETURN_IF_ERROR(kernel->backward(op, ctx, exec, in.get(), out.get(),
                                         outGrads.get(), inGrads.get(),
                                         tmp.get()));
    inGrads.writeBackAll(inputGrads);
    tmp.writeBackAll(scratch);
    return absl::OkStatus();
  }

  bool update(const ppc::planfile::Optimizer &optimizer, DeviceBuffer &weight,
              int64_t offset, const DeviceBuffer &grad, int64_t n,
              DeviceOptimizerState &state, double gradScale,
              DeviceBuffer *rounded) override {
    size_t failed;
    return updateAll(optimizer, {{&weight, offset, &grad, n, &state, rounded}},
                     gradScale, failed);
  }

  bool updateAll(const ppc::planfile::Optimizer &optimizer,
                 const std::vector<UpdateRequest> &requests, double gradScale,
                 size_t &failed) override {
    const int slots = numOptimizerSlots(optimizer);
    // Entries grouped by their step number (one set of coefficients each;
    // every weight of a plan steps together, so one group).
    std::map<int64_t, std::vector<UpdateEntry>> groups;
    for (failed = 0; failed < requests.size(); ++failed) {
      const UpdateRequest &r = requests[failed];
      DeviceOptimizerState &state = *r.state;
      if (static_cast<int>(state.slots.size()) != slots) {
        state.slots.clear();
        state.elements = r.n;
        for (int k = 0; k < slots; ++k)
          if (!state.slots.emplace_back(allocate(DType::F32, r.n)))
            return false;
      }
      UpdateEntry e;
      e.w = static_cast<float *>(r.weight->at(r.offset));
      e.grad = r.grad->data();
      e.gradType = r.grad->dtype();
      e.m = slots > 0 ? static_cast<float *>(state.slots[0]->data()) : nullptr;
      e.v = slots > 1 ? static_cast<float *>(state.slots[1]->data()) : nullptr;
      e.rounded = r.rounded ? r.rounded->at(r.offset) : nullptr;
      e.roundedType = r.rounded ? r.rounded->dtype() : DType::F32;
      e.n = r.n;
      groups[++state.steps].push_back(e);
    }
    for (auto &[steps, entries] : groups) {
      std::vector<UpdateChunk> chunks;
      for (size_t k = 0; k < entries.size(); ++k)
        for (int64_t start = 0; start < entries[k].n; start += kUpdateChunk)
          chunks.push_back({static_cast<int64_t>(k), start});
      const UpdateEntry *deviceEntries = nullptr;
      const UpdateChunk *deviceChunks = nullptr;
      if (!updateTables.upload(entries, chunks, deviceEntries, deviceChunks))
        return false;
      multiTensorKernel(stream, optimizerCoefficients(optimizer, steps),
                        deviceEntries, deviceChunks,
                        static_cast<int64_t>(chunks.size()),
                        static_cast<float>(gradScale));
    }
    return true;
  }

  bool anyNonfinite(const DeviceBuffer &buffer, int64_t n) override {
    if (buffer.dtype() == DType::I64 || n <= 0)
      return false;
    std::shared_ptr<DeviceBuffer> flag = allocate(DType::F32, 1);
    if (!flag)
      return true; // no memory to check: report overflow, skip the step
    nonfiniteKernel(stream, buffer.dtype(), buffer.data(), n,
                    static_cast<int *>(flag->data()));
    int result = 0;
    copyOut(stream, &result, flag->data(), sizeof(int));
    waitStream();
    return result != 0;
  }

  absl::Status deferredError(int64_t &instruction) override {
    return checks.report(instruction);
  }

  int64_t launches() const override { return launchCount().load(); }

  double peakFlops(DType dtype) const override {
#if defined(PPC_CUDA_EMULATION)
    (void)dtype;
    return 0;
#else
    int device = 0, sms = 0, kiloHertz = 0, major = 0, minor = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) !=
            cudaSuccess ||
        cudaDeviceGetAttribute(&kiloHertz, cudaDevAttrClockRate, device) !=
            cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
                               device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor,
                               device) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return sms * (kiloHertz * 1e3) *
           flopsPerClockPerSM(major * 10 + minor, dtype);
#endif
  }

  std::unique_ptr<Event> record() override { return recordEvent(stream); }
  std::unique_ptr<Event> recordTimed() override {
    return recordEvent(stream, /*timed=*/true);
  }
  void synchronize() override { waitStream(); }

#if !defined(PPC_CUDA_EMULATION)
  std::unique_ptr<Communicator>
  deviceCommunicator(Communicator &host, double timeoutSeconds) override {
    return createNcclCommunicator(
        host, stream, timeoutSeconds,
        [this](StallCheck check) { stallCheck = std::move(check); });
  }
#endif

private:
  /// Waits for the stream's work; with a communicator, a wait that lasts
  /// lets its stall check end the job (a dead peer) instead of hanging.
  void waitStream() {
#if defined(PPC_CUDA_EMULATION)
    waitFor(stream);
#else
    waitUntil(nullptr);
#endif
  }

#if defined(PPC_CUDA_EMULATION)
  void markStaging() {}
  void waitStaging() {}
#else
  /// Records, on the stream, the end of the copy that reads staging.
  void markStaging() {
    if (!stagingRead)
      cudaEventCreateWithFlags(&stagingRead, cudaEventDisableTiming);
    cudaEventRecord(stagingRead, stream);
  }
  /// Waits until the staging block may be written again.
  void waitStaging() {
    if (stagingRead)
      waitUntil(stagingRead);
  }
  /// Waits for `event`, or for all the stream's work when null.
  void waitUntil(cudaEvent_t event) {
    auto pending = [&] {
      return (event ? cudaEventQuery(event) : cudaStreamQuery(stream)) ==
             cudaErrorNotReady;
    };
    if (!stallCheck) {
      if (event)
        cudaEventSynchronize(event);
      else
        waitFor(stream);
      return;
    }
    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = Clock::now();
    double nextCheck = 1;
    while (pending()) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      const double waited =
          std::chrono::duration<double>(Clock::now() - start).count();
      if (waited >= nextCheck) {
        stallCheck(waited);
        nextCheck = waited + 1;
      }
    }
  }
#endif

  static constexpr int64_t kStagingElements = int64_t(1) << 20;

  /// Pinned host memory for kStagingElements of the widest type.
  void *stagingBlock() {
    if (!staging)
      staging = pinnedAllocate(size_t(kStagingElements) * 8);
    return staging;
  }
  const CudaKernel *find(const OpDesc &op) const {
    auto it = cudaKernels().find(op.kind);
    return it == cudaKernels().end() ? nullptr : &it->second;
  }
  static absl::Status unsupported(const OpDesc &op) {
    return absl::InvalidArgumentError(
        op.kind + ": the cuda backend has no kernel for it");
  }

  Stream stream;
  std::unique_ptr<Library> library;
  /// BackendOptions::poisonUninitialized.
  bool poison;
  std::shared_ptr<Allocator> allocator;
  BlockPool pool;
  CheckSlots checks;
  UpdateTables updateTables;
  void *staging = nullptr;
#if !defined(PPC_CUDA_EMULATION)
  cudaEvent_t stagingRead = nullptr;
  cuda::StallCheck stallCheck;
#endif
};

#if !defined(PPC_CUDA_EMULATION)
/// The GPU of this rank: its local rank (as mpirun, srun or the user set
/// it) modulo the GPUs visible.
int localRank() {
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                           "SLURM_LOCALID", "LOCAL_RANK"})
    if (const char *value = std::getenv(name))
      return std::atoi(value);
  return 0;
}
#endif

} // namespace
} // namespace cuda

absl::StatusOr<std::unique_ptr<Backend>>
createCudaBackend(const BackendOptions &options) {
  using namespace cuda;
  Stream stream{};
#if !defined(PPC_CUDA_EMULATION)
  int devices = 0;
  cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    cudaGetLastError();
    return absl::UnavailableError(
        std::string("no GPU visible (cudaGetDeviceCount: ") +
        (status != cudaSuccess ? cudaGetErrorString(status) : "0 devices") +
        ")");
  }
  const int device = localRank() % devices;
  if ((status = cudaSetDevice(device)) != cudaSuccess ||
      (status = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)) !=
          cudaSuccess) {
    return absl::UnavailableError("GPU " + std::to_string(device) + ": " +
                                  cudaGetErrorString(status));
  }
#endif
  absl::StatusOr<std::unique_ptr<Library>> library = createLibrary();
  if (!library.ok())
    return library.status();
  (*library)->allowTf32 = options.allowTf32;
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(
      stream, std::move(*library), options.poisonUninitialized));
}

std::vector<std::string> cudaSupportedOps() { return cuda::cudaKernelOps(); }

} // namespace ppc::runtime
