//===- CpuBackend.cpp - buffers, copies and kernels in host memory --------===//

#include "ppc/Runtime/CpuBackend.h"

#include "ppc/Runtime/Boxes.h"
#include "ppc/Runtime/Communicator.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

namespace ppc::runtime {

int64_t DeviceView::numElements() const { return boxVolume(lo, hi); }

std::unique_ptr<Communicator> Backend::deviceCommunicator(Communicator &,
                                                          double) {
  return nullptr;
}

bool Backend::updateAll(const ppc::planfile::Optimizer &optimizer,
                        const std::vector<UpdateRequest> &requests,
                        double gradScale, size_t &failed) {
  for (failed = 0; failed < requests.size(); ++failed) {
    const UpdateRequest &r = requests[failed];
    if (!update(optimizer, *r.weight, r.offset, *r.grad, r.n, *r.state,
                gradScale, r.rounded))
      return false;
  }
  return true;
}

namespace {

class CpuBuffer final : public DeviceBuffer {
public:
  CpuBuffer(DType dtype, int64_t n, void *data)
      : DeviceBuffer(dtype, n, data) {}
  ~CpuBuffer() override { std::free(data()); }
};

class CpuEvent final : public Event {
public:
  bool done() override { return true; }
  void wait() override {}
};

/// Adds `n` values of `src` into `dst`, both of type `dtype`.
void addInto(DType dtype, const void *src, void *dst, int64_t n) {
  switch (dtype) {
  case DType::F32: {
    const float *s = static_cast<const float *>(src);
    float *d = static_cast<float *>(dst);
    for (int64_t i = 0; i < n; ++i)
      d[i] += s[i];
    return;
  }
  case DType::I64: {
    const int64_t *s = static_cast<const int64_t *>(src);
    int64_t *d = static_cast<int64_t *>(dst);
    for (int64_t i = 0; i < n; ++i)
      d[i] += s[i];
    return;
  }
  default: {
    std::vector<float> a(n), b(n);
    toFloat(dtype, src, n, a.data());
    toFloat(dtype, dst, n, b.data());
    for (int64_t i = 0; i < n; ++i)
      b[i] += a[i];
    fromFloat(dtype, b.data(), n, dst);
    return;
  }
  }
}

/// Float blocks for widened operands, kept from kernel to kernel: a fresh
/// allocation per operand cost its page faults every step (as much as the
/// widening itself on a 64 MiB weight). A rank runs one kernel at a time.
class WideningPool {
public:
  using Block = std::pair<int64_t, std::unique_ptr<float[]>>;

  /// A block of at least n floats, uninitialized.
  Block acquire(int64_t n) {
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->first >= n && (best == free_.end() || it->first < best->first))
        best = it;
    if (best == free_.end())
      return {n, std::unique_ptr<float[]>(new float[n])};
    Block block = std::move(*best);
    free_.erase(best);
    return block;
  }
  void release(Block block) {
    free_.push_back(std::move(block));
    // Keep the largest few: what the biggest kernels take at once.
    if (free_.size() > kMaxBlocks) {
      auto smallest = std::min_element(
          free_.begin(), free_.end(),
          [](const Block &a, const Block &b) { return a.first < b.first; });
      free_.erase(smallest);
    }
  }

private:
  static constexpr size_t kMaxBlocks = 12;
  std::vector<Block> free_;
};

/// Kernel views of device views: float32 buffers as they are, others
/// widened into pool blocks and, for results, rounded back afterwards.
class KernelViews {
public:
  /// `load`: widen the values (inputs, gradients summed into); otherwise
  /// the block is zero-filled (results a kernel writes). `asBf16`: bf16
  /// views the kernel only reads go to it unwidened (Kernels.h,
  /// readsBf16).
  KernelViews(WideningPool &pool, const std::vector<DeviceView> &from,
              bool load = true, bool asBf16 = false)
      : pool(pool), views(from.size()), blocks(from.size()) {
    for (size_t i = 0; i < from.size(); ++i) {
      const DeviceView &v = from[i];
      views[i] = {nullptr, v.shape, v.lo, v.hi};
      if (!v.buffer)
        continue;
      if (v.buffer->dtype() == DType::F32) {
        views[i].data = static_cast<float *>(v.buffer->at(v.offset));
        continue;
      }
      if (asBf16 && v.buffer->dtype() == DType::BF16) {
        views[i].bf16 = static_cast<const uint16_t *>(v.buffer->at(v.offset));
        continue;
      }
      const int64_t n = v.numElements();
      blocks[i] = pool.acquire(std::max<int64_t>(n, 1));
      float *data = blocks[i].second.get();
      if (load)
        toFloat(v.buffer->dtype(), v.buffer->at(v.offset), n, data);
      else
        std::fill(data, data + n, 0.0f);
      views[i].data = data;
    }
  }
  ~KernelViews() {
    for (WideningPool::Block &block : blocks)
      if (block.second)
        pool.release(std::move(block));
  }
  std::vector<TensorView> &get() { return views; }
  /// Rounds view i back into its buffer if it was widened.
  void writeBack(const std::vector<DeviceView> &to, size_t i) const {
    const DeviceView &v = to[i];
    if (v.buffer && v.buffer->dtype() != DType::F32 && views[i].data)
      fromFloat(v.buffer->dtype(), views[i].data, v.numElements(),
                v.buffer->at(v.offset));
  }
  void writeBackAll(const std::vector<DeviceView> &to) const {
    for (size_t i = 0; i < to.size(); ++i)
      writeBack(to, i);
  }

private:
  WideningPool &pool;
  std::vector<TensorView> views;
  std::vector<WideningPool::Block> blocks;
};

class CpuBackend final : public Backend {
public:
  explicit CpuBackend(bool poison) : poison(poison) {}
  const char *name() const override { return "cpu"; }

  std::shared_ptr<DeviceBuffer> allocate(DType dtype, int64_t n) override {
    n = std::max<int64_t>(n, 1);
    // calloc: large buffers come as zero pages from the kernel.
    void *data = std::calloc(static_cast<size_t>(n), dtypeBytes(dtype));
    if (!data)
      return nullptr;
    return std::make_shared<CpuBuffer>(dtype, n, data);
  }

  std::shared_ptr<DeviceBuffer> allocateUninitialized(DType dtype,
                                                      int64_t n) override {
    n = std::max<int64_t>(n, 1);
    void *data = std::malloc(static_cast<size_t>(n) * dtypeBytes(dtype));
    if (!data)
      return nullptr;
    auto buffer = std::make_shared<CpuBuffer>(dtype, n, data);
    if (poison)
      poisonBuffer(*buffer);
    return buffer;
  }

  void fill(DeviceBuffer &buffer, double value) override {
    const float v = static_cast<float>(value);
    if (buffer.dtype() == DType::F32) {
      float *data = static_cast<float *>(buffer.data());
      std::fill(data, data + buffer.size(), v);
      return;
    }
    // One element converted, then replicated.
    if (buffer.dtype() == DType::I64) {
      int64_t element;
      fromFloat(DType::I64, &v, 1, &element);
      std::fill_n(static_cast<int64_t *>(buffer.data()), buffer.size(),
                  element);
      return;
    }
    uint16_t element;
    fromFloat(buffer.dtype(), &v, 1, &element);
    std::fill_n(static_cast<uint16_t *>(buffer.data()), buffer.size(), element);
  }

  void write(DeviceBuffer &buffer, int64_t offset, const float *host,
             int64_t n) override {
    fromFloat(buffer.dtype(), host, n, buffer.at(offset));
  }

  void read(const DeviceBuffer &buffer, int64_t offset, int64_t n,
            float *host) override {
    toFloat(buffer.dtype(), buffer.at(offset), n, host);
  }

  void copyBox(const DeviceView &src, const DeviceView &dst, const Index &lo,
               const Index &hi, bool accumulate) override {
    const DType from = src.buffer->dtype(), to = dst.buffer->dtype();
    const int fromBytes = dtypeBytes(from), toBytes = dtypeBytes(to);
    const char *s = static_cast<const char *>(src.buffer->at(src.offset));
    char *d = static_cast<char *>(dst.buffer->at(dst.offset));
    std::vector<float> run;
    forEachRun(lo, hi, src.lo, src.hi, dst.lo, dst.hi,
               [&](int64_t a, int64_t b, int64_t n) {
                 const char *in = s + a * fromBytes;
                 char *out = d + b * toBytes;
                 if (from == to) {
                   if (accumulate)
                     addInto(to, in, out, n);
                   else
                     std::memmove(out, in, n * toBytes);
                   return;
                 }
                 // A float32 side converts directly (a master weight
                 // into its 16-bit copy); others go through floats, a
                 // chunk at a time so the temporaries stay in cache.
                 if (!accumulate && from == DType::F32) {
                   fromFloat(to, reinterpret_cast<const float *>(in), n, out);
                   return;
                 }
                 if (!accumulate && to == DType::F32) {
                   toFloat(from, in, n, reinterpret_cast<float *>(out));
                   return;
                 }
                 constexpr int64_t kChunk = 4096;
                 run.resize(2 * std::min(n, kChunk));
                 float *value = run.data(), *sum = value + std::min(n, kChunk);
                 for (int64_t at = 0; at < n; at += kChunk) {
                   const int64_t len = std::min(kChunk, n - at);
                   toFloat(from, in + at * fromBytes, len, value);
                   if (accumulate) {
                     toFloat(to, out + at * toBytes, len, sum);
                     for (int64_t i = 0; i < len; ++i)
                       value[i] += sum[i];
                   }
                   fromFloat(to, value, len, out + at * toBytes);
                 }
               });
  }

  absl::Status forward(const OpDesc &op, const KernelContext &ctx,
                       const std::vector<DeviceView> &inputs,
                       const std::vector<DeviceView> &outputs,
                       const std::vector<DeviceView> &scratch) override {
    // Results are written, not read, in a first stage; a later stage
    // continues from what the earlier one left.
    KernelViews in(pool, inputs, true, readsBf16(op)),
        out(pool, outputs, ctx.stage > 0), tmp(pool, scratch);
    PPC_RETURN_IF_ERROR(
        runtime::forward(op, ctx, in.get(), out.get(), tmp.get()));
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
    zeroOverwritten(inputGrads);
    const bool asBf16 = readsBf16(op);
    KernelViews in(pool, inputs, true, asBf16),
        out(pool, outputs, true, asBf16),
        outGrads(pool, outputGrads, true, asBf16), inGrads(pool, inputGrads),
        tmp(pool, scratch);
    absl::Status status = runtime::backward(
        op, ctx, in.get(), out.get(), outGrads.get(), inGrads.get(), tmp.get());
    if (!status.ok())
      return status;
    inGrads.writeBackAll(inputGrads);
    tmp.writeBackAll(scratch);
    return absl::OkStatus();
  }

  bool update(const ppc::planfile::Optimizer &optimizer, DeviceBuffer &weight,
              int64_t offset, const DeviceBuffer &grad, int64_t n,
              DeviceOptimizerState &state, double gradScale,
              DeviceBuffer *rounded) override {
    assert(weight.dtype() == DType::F32 && "master weights are float32");
    const int slots = numOptimizerSlots(optimizer);
    if (static_cast<int>(state.slots.size()) != slots) {
      state.slots.clear();
      state.elements = n;
      for (int s = 0; s < slots; ++s)
        if (!state.slots.emplace_back(allocate(DType::F32, n)))
          return false;
    }
    float *pointers[2] = {};
    for (int s = 0; s < slots; ++s)
      pointers[s] = cpuFloats(*state.slots[s]);
    float *w = cpuFloats(weight, offset);
    const int64_t step = ++state.steps;
    if (grad.dtype() == DType::F32 && gradScale == 1.0 && !rounded) {
      applyOptimizerStep(optimizer, w, cpuFloats(grad), n, step, pointers);
      return true;
    }
    // Widened and unscaled a chunk at a time, in cache, not as a copy of
    // the whole gradient.
    constexpr int64_t kChunk = 4096;
    float g[kChunk];
    const float scale = static_cast<float>(gradScale);
    for (int64_t at = 0; at < n; at += kChunk) {
      const int64_t len = std::min(kChunk, n - at);
      toFloat(grad.dtype(), grad.at(at), len, g);
      if (gradScale != 1.0)
        for (int64_t i = 0; i < len; ++i)
          g[i] *= scale;
      float *slots[2] = {pointers[0] ? pointers[0] + at : nullptr,
                         pointers[1] ? pointers[1] + at : nullptr};
      applyOptimizerStep(optimizer, w + at, g, len, step, slots);
      if (rounded)
        fromFloat(rounded->dtype(), w + at, len, rounded->at(offset + at));
    }
    return true;
  }

  bool anyNonfinite(const DeviceBuffer &buffer, int64_t n) override {
    if (buffer.dtype() == DType::I64)
      return false;
    constexpr int64_t kChunk = 4096;
    std::vector<float> chunk;
    const float *values = nullptr;
    for (int64_t start = 0; start < n; start += kChunk) {
      const int64_t len = std::min(kChunk, n - start);
      if (buffer.dtype() == DType::F32) {
        values = cpuFloats(buffer, start);
      } else {
        chunk.resize(len);
        toFloat(buffer.dtype(), buffer.at(start), len, chunk.data());
        values = chunk.data();
      }
      // x - x is NaN exactly for NaN and infinities.
      float probe = 0;
      for (int64_t i = 0; i < len; ++i)
        probe += values[i] - values[i];
      if (probe != 0 || std::isnan(probe))
        return true;
    }
    return false;
  }

  std::unique_ptr<Event> record() override {
    return std::make_unique<CpuEvent>();
  }
  void synchronize() override {}

private:
  /// NaN in every element (integers: the most negative value).
  void poisonBuffer(DeviceBuffer &buffer) {
    if (buffer.dtype() == DType::I64)
      std::fill_n(static_cast<int64_t *>(buffer.data()), buffer.size(),
                  std::numeric_limits<int64_t>::min());
    else
      fill(buffer, std::numeric_limits<double>::quiet_NaN());
  }

  /// Zeroes the input gradients a backward kernel overwrites: the cpu
  /// kernels add into theirs, so adding into zeros writes them.
  static void zeroOverwritten(const std::vector<DeviceView> &grads) {
    for (const DeviceView &g : grads)
      if (g.overwrite && g.buffer)
        std::memset(g.buffer->at(g.offset), 0,
                    static_cast<size_t>(g.numElements()) *
                        dtypeBytes(g.buffer->dtype()));
  }

  WideningPool pool;
  bool poison;
};

} // namespace

float *cpuFloats(const DeviceBuffer &buffer, int64_t offset) {
  assert(buffer.dtype() == DType::F32);
  return static_cast<float *>(buffer.at(offset));
}

std::unique_ptr<Backend> createCpuBackend(const BackendOptions &options) {
  setKernelThreads(std::max(1, options.threads)); // checked by the caller
  setLibraryKernels(!options.referenceKernels);
  return std::make_unique<CpuBackend>(options.poisonUninitialized);
}

} // namespace ppc::runtime
