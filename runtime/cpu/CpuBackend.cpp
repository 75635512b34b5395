//===- CpuBackend.cpp - buffers, copies and kernels in host memory --------===//

#include "ppc/Runtime/CpuBackend.h"

#include "ppc/Runtime/Boxes.h"

#include <cassert>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

namespace ppc::runtime {

int64_t DeviceView::numElements() const { return boxVolume(lo, hi); }

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

/// A device view as the kernels see it: float data, widened into `widened`
/// when the buffer holds another type.
TensorView kernelView(const DeviceView &v, std::vector<float> &widened) {
  TensorView view{nullptr, v.shape, v.lo, v.hi};
  if (!v.buffer)
    return view;
  if (v.buffer->dtype() == DType::F32) {
    view.data = static_cast<float *>(v.buffer->at(v.offset));
    return view;
  }
  const int64_t n = std::max<int64_t>(v.numElements(), 1);
  widened.resize(n);
  toFloat(v.buffer->dtype(), v.buffer->at(v.offset), v.numElements(),
          widened.data());
  view.data = widened.data();
  return view;
}

/// Kernel views of `views`, remembering which were widened.
struct KernelViews {
  std::vector<TensorView> views;
  std::vector<std::vector<float>> widened;

  explicit KernelViews(const std::vector<DeviceView> &from)
      : views(from.size()), widened(from.size()) {
    for (size_t i = 0; i < from.size(); ++i)
      views[i] = kernelView(from[i], widened[i]);
  }
  /// Rounds view i back into its buffer if it was widened.
  void writeBack(const std::vector<DeviceView> &to, size_t i) const {
    const DeviceView &v = to[i];
    if (v.buffer && v.buffer->dtype() != DType::F32)
      fromFloat(v.buffer->dtype(), widened[i].data(), v.numElements(),
                v.buffer->at(v.offset));
  }
  void writeBackAll(const std::vector<DeviceView> &to) const {
    for (size_t i = 0; i < to.size(); ++i)
      writeBack(to, i);
  }
};

class CpuBackend final : public Backend {
public:
  const char *name() const override { return "cpu"; }

  std::shared_ptr<DeviceBuffer> allocate(DType dtype, int64_t n) override {
    n = std::max<int64_t>(n, 1);
    // calloc: large buffers come as zero pages from the kernel.
    void *data = std::calloc(static_cast<size_t>(n), dtypeBytes(dtype));
    if (!data)
      return nullptr;
    return std::make_shared<CpuBuffer>(dtype, n, data);
  }

  void fill(DeviceBuffer &buffer, double value) override {
    const float v = static_cast<float>(value);
    if (buffer.dtype() == DType::F32) {
      float *data = static_cast<float *>(buffer.data());
      std::fill(data, data + buffer.size(), v);
      return;
    }
    // One element converted, then replicated.
    fromFloat(buffer.dtype(), &v, 1, buffer.data());
    const int bytes = dtypeBytes(buffer.dtype());
    for (int64_t i = 1; i < buffer.size(); ++i)
      std::memcpy(buffer.at(i), buffer.data(), bytes);
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
                 run.resize(n);
                 toFloat(from, in, n, run.data());
                 if (!accumulate) {
                   fromFloat(to, run.data(), n, out);
                   return;
                 }
                 std::vector<float> sum(n);
                 toFloat(to, out, n, sum.data());
                 for (int64_t i = 0; i < n; ++i)
                   sum[i] += run[i];
                 fromFloat(to, sum.data(), n, out);
               });
  }

  std::string forward(const OpDesc &op, const KernelContext &ctx,
                      const std::vector<DeviceView> &inputs,
                      const std::vector<DeviceView> &outputs,
                      const std::vector<DeviceView> &scratch) override {
    KernelViews in(inputs), out(outputs), tmp(scratch);
    std::string status =
        runtime::forward(op, ctx, in.views, out.views, tmp.views);
    if (!status.empty())
      return status;
    out.writeBackAll(outputs);
    tmp.writeBackAll(scratch);
    for (int i : updatedOperands(op, ctx.training))
      if (i < static_cast<int>(inputs.size()))
        in.writeBack(inputs, i);
    return "";
  }

  std::string backward(const OpDesc &op, const KernelContext &ctx,
                       const std::vector<DeviceView> &inputs,
                       const std::vector<DeviceView> &outputs,
                       const std::vector<DeviceView> &outputGrads,
                       const std::vector<DeviceView> &inputGrads,
                       const std::vector<DeviceView> &scratch) override {
    KernelViews in(inputs), out(outputs), outGrads(outputGrads),
        inGrads(inputGrads), tmp(scratch);
    std::string status = runtime::backward(
        op, ctx, in.views, out.views, outGrads.views, inGrads.views, tmp.views);
    if (!status.empty())
      return status;
    inGrads.writeBackAll(inputGrads);
    tmp.writeBackAll(scratch);
    return "";
  }

  void update(const ppc::planfile::Optimizer &optimizer, DeviceBuffer &weight,
              int64_t offset, const DeviceBuffer &grad, int64_t n,
              OptimizerState &state, double gradScale) override {
    assert(weight.dtype() == DType::F32 && "master weights are float32");
    float *w = cpuFloats(weight, offset);
    if (grad.dtype() == DType::F32 && gradScale == 1.0) {
      applyOptimizer(optimizer, w, cpuFloats(grad), n, state);
      return;
    }
    std::vector<float> g(n);
    toFloat(grad.dtype(), grad.data(), n, g.data());
    if (gradScale != 1.0) {
      const float scale = static_cast<float>(gradScale);
      for (float &x : g)
        x *= scale;
    }
    applyOptimizer(optimizer, w, g.data(), n, state);
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
};

} // namespace

float *cpuFloats(const DeviceBuffer &buffer, int64_t offset) {
  assert(buffer.dtype() == DType::F32);
  return static_cast<float *>(buffer.at(offset));
}

std::unique_ptr<Backend> createCpuBackend() {
  return std::make_unique<CpuBackend>();
}

} // namespace ppc::runtime
