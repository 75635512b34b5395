//===- DnnlConv.cpp - conv2d through oneDNN -------------------------------===//
//
// Each distinct convolution gets its primitives once: oneDNN picks the
// layouts its fastest implementation wants (format `any`), and reorders
// between them and the plan's plain NCHW buffers run around every call, as
// PyTorch does with dense tensors. The reordered buffers are kept with the
// primitives, so a step allocates nothing here after the first.
//
//===----------------------------------------------------------------------===//

#include "DnnlConv.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

namespace ppc::runtime::cpu {

namespace {

using namespace dnnl;
using tag = memory::format_tag;
using dt = memory::data_type;

engine &cpuEngine() {
  static engine eng(engine::kind::cpu, 0);
  return eng;
}

stream &cpuStream() {
  static stream s(cpuEngine());
  return s;
}

/// One arena per thread holds every buffer a call needs besides the plan's
/// (layouts oneDNN wants, gradients before they are added): the largest
/// call's, not one set per convolution.
struct Arena {
  /// Page-aligned, as oneDNN's own buffers are: its kernels run at half
  /// speed or worse on buffers that are not.
  std::unique_ptr<char, decltype(&std::free)> storage{nullptr, &std::free};
  size_t capacity = 0, used = 0;
  void reset(size_t bytes) {
    used = 0;
    if (capacity >= bytes)
      return;
    capacity = (bytes + 4095) / 4096 * 4096;
    storage.reset(static_cast<char *>(std::aligned_alloc(4096, capacity)));
  }
  float *take(size_t bytes) {
    char *at = storage.get() + used;
    used += (bytes + 63) / 64 * 64;
    return reinterpret_cast<float *>(at);
  }
};

Arena &arena() {
  static thread_local Arena a;
  return a;
}

/// A user buffer in the layout a primitive wants: reordered in (or out)
/// through the arena when the layouts differ, else used in place.
struct Staged {
  memory::desc user, wanted;
  bool differs = false;
  std::optional<memory> buffer; ///< in the wanted layout, when it differs
  std::optional<reorder> in, out;

  void init(const memory::desc &userDesc, const memory::desc &wantedDesc,
            bool toWanted, bool fromWanted) {
    user = userDesc;
    wanted = wantedDesc;
    differs = user != wanted;
    if (!differs)
      return;
    buffer.emplace(wanted, cpuEngine(), static_cast<void *>(DNNL_MEMORY_NONE));
    memory u(user, cpuEngine(), DNNL_MEMORY_NONE);
    if (toWanted)
      in.emplace(u, *buffer);
    if (fromWanted)
      out.emplace(*buffer, u);
  }
  /// Arena bytes a call needs (rounded as Arena::take rounds).
  size_t bytes() const {
    return differs ? (wanted.get_size() + 63) / 64 * 64 : 0;
  }
  void place() {
    if (differs)
      buffer->set_data_handle(arena().take(wanted.get_size()));
  }
  /// The memory the primitive reads, after copying `data` in.
  memory input(const void *data) {
    memory u(user, cpuEngine(), const_cast<void *>(data));
    if (!differs)
      return u;
    in->execute(cpuStream(), u, *buffer);
    return *buffer;
  }
  /// The memory the primitive writes; `finish` copies it out to `data`.
  memory output(void *data) {
    return differs ? *buffer : memory(user, cpuEngine(), data);
  }
  void finish(void *data) {
    if (differs) {
      memory u(user, cpuEngine(), data);
      out->execute(cpuStream(), *buffer, u);
    }
  }
};

struct Primitives {
  memory::desc src, weights, bias, dst, denseSrc;
  std::optional<convolution_forward::primitive_desc> forwardDesc;
  std::optional<convolution_forward> forward;
  Staged fwdSrc, fwdWeights, fwdDst;
  // Backward, made on first use.
  std::optional<convolution_backward_data> backwardData;
  Staged bdDiffDst, bdWeights, bdDiffSrc;
  std::optional<convolution_backward_weights> backwardWeights;
  Staged bwSrc, bwDiffDst, bwDiffWeights;
};

memory::dims dims(std::initializer_list<int64_t> values) {
  return memory::dims(values.begin(), values.end());
}

/// `d`'s dims in the layout oneDNN finds best.
memory::desc anyLayout(const memory::desc &d) {
  return memory::desc(d.dims(), dt::f32, tag::any);
}

/// The window of a convolution, as its primitives take it.
struct Window {
  memory::dims strides, dilates, padL, padR;
};

Window windowOf(const DnnlConv &c) {
  // oneDNN counts dilation from 0 (no gap between taps).
  return {dims({c.strides[0], c.strides[1]}),
          dims({c.dilations[0] - 1, c.dilations[1] - 1}),
          dims({c.padLo[0], c.padLo[1]}), dims({c.padHi[0], c.padHi[1]})};
}

std::string keyOf(const DnnlConv &c) {
  std::string key;
  for (int64_t v :
       {c.batch,         c.inChannels,    c.inRows,        c.inCols,
        c.srcStrides[0], c.srcStrides[1], c.srcStrides[2], c.srcStrides[3],
        c.outChannels,   c.outRows,       c.outCols,       c.groups,
        c.kernelRows,    c.kernelCols,    c.strides[0],    c.strides[1],
        c.dilations[0],  c.dilations[1],  c.padLo[0],      c.padLo[1],
        c.padHi[0],      c.padHi[1],      int64_t(c.bias)})
    key += std::to_string(v) + ",";
  return key;
}

Primitives &primitivesOf(const DnnlConv &c) {
  static thread_local std::map<std::string, std::unique_ptr<Primitives>> cache;
  std::unique_ptr<Primitives> &slot = cache[keyOf(c)];
  if (slot)
    return *slot;
  auto p = std::make_unique<Primitives>();
  const memory::dims srcDims =
      dims({c.batch, c.inChannels, c.inRows, c.inCols});
  p->src = memory::desc(srcDims, dt::f32,
                        dims({c.srcStrides[0], c.srcStrides[1], c.srcStrides[2],
                              c.srcStrides[3]}));
  p->denseSrc = memory::desc(srcDims, dt::f32, tag::nchw);
  p->weights = c.groups == 1
                   ? memory::desc(dims({c.outChannels, c.inChannels,
                                        c.kernelRows, c.kernelCols}),
                                  dt::f32, tag::oihw)
                   : memory::desc(dims({c.groups, c.outChannels / c.groups,
                                        c.inChannels / c.groups, c.kernelRows,
                                        c.kernelCols}),
                                  dt::f32, tag::goihw);
  p->bias = memory::desc(dims({c.outChannels}), dt::f32, tag::x);
  p->dst = memory::desc(dims({c.batch, c.outChannels, c.outRows, c.outCols}),
                        dt::f32, tag::nchw);
  const Window w = windowOf(c);
  convolution_forward::desc forward(
      prop_kind::forward_training, algorithm::convolution_direct,
      anyLayout(p->src), anyLayout(p->weights),
      c.bias ? p->bias : memory::desc(), anyLayout(p->dst), w.strides,
      w.dilates, w.padL, w.padR);
  p->forwardDesc.emplace(forward, cpuEngine());
  p->forward.emplace(*p->forwardDesc);
  p->fwdSrc.init(p->src, p->forwardDesc->src_desc(), true, false);
  p->fwdWeights.init(p->weights, p->forwardDesc->weights_desc(), true, false);
  p->fwdDst.init(p->dst, p->forwardDesc->dst_desc(), false, true);
  slot = std::move(p);
  return *slot;
}

void makeBackward(const DnnlConv &c, Primitives &p) {
  const Window w = windowOf(c);
  convolution_backward_data::desc data(
      algorithm::convolution_direct, anyLayout(p.src), anyLayout(p.weights),
      anyLayout(p.dst), w.strides, w.dilates, w.padL, w.padR);
  convolution_backward_data::primitive_desc dataDesc(data, cpuEngine(),
                                                     *p.forwardDesc);
  p.backwardData.emplace(dataDesc);
  p.bdDiffDst.init(p.dst, dataDesc.diff_dst_desc(), true, false);
  p.bdWeights.init(p.weights, dataDesc.weights_desc(), true, false);
  p.bdDiffSrc.init(p.denseSrc, dataDesc.diff_src_desc(), false, true);

  // The bias gradient is summed here in double (dnnlConvBackward), as the
  // reference kernel sums it: oneDNN's float sums differ between a whole
  // batch and its pieces by more than --verify allows where the gradient
  // cancels to rounding noise (a bias before batch norm).
  convolution_backward_weights::desc weights(
      algorithm::convolution_direct, anyLayout(p.src), anyLayout(p.weights),
      anyLayout(p.dst), w.strides, w.dilates, w.padL, w.padR);
  convolution_backward_weights::primitive_desc weightsDesc(weights, cpuEngine(),
                                                           *p.forwardDesc);
  p.backwardWeights.emplace(weightsDesc);
  p.bwSrc.init(p.src, weightsDesc.src_desc(), true, false);
  p.bwDiffDst.init(p.dst, weightsDesc.diff_dst_desc(), true, false);
  p.bwDiffWeights.init(p.weights, weightsDesc.diff_weights_desc(), false, true);
}

std::atomic<int64_t> calls{0};

} // namespace

int64_t dnnlConvCalls() { return calls; }

absl::Status dnnlConvForward(const DnnlConv &c, const float *src,
                             const float *weights, const float *bias,
                             float *dst) {
  ++calls;
  try {
    Primitives &p = primitivesOf(c);
    arena().reset(p.fwdSrc.bytes() + p.fwdWeights.bytes() + p.fwdDst.bytes());
    p.fwdSrc.place();
    p.fwdWeights.place();
    p.fwdDst.place();
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, p.fwdSrc.input(src)},
        {DNNL_ARG_WEIGHTS, p.fwdWeights.input(weights)},
        {DNNL_ARG_DST, p.fwdDst.output(dst)}};
    if (c.bias)
      args.emplace(DNNL_ARG_BIAS,
                   memory(p.bias, cpuEngine(), const_cast<float *>(bias)));
    p.forward->execute(cpuStream(), args);
    p.fwdDst.finish(dst);
    cpuStream().wait();
  } catch (const dnnl::error &e) {
    return absl::InvalidArgumentError(std::string("oneDNN convolution: ") +
                                      e.what());
  }
  return absl::OkStatus();
}

absl::Status dnnlConvBackward(const DnnlConv &c, const float *src,
                              const float *weights, const float *diffDst,
                              float *diffSrc, float *diffWeights,
                              float *diffBias) {
  ++calls;
  Primitives *p = nullptr;
  float *srcGrad = nullptr, *weightGrad = nullptr;
  const size_t srcBytes =
      static_cast<size_t>(c.batch * c.inChannels * c.inRows * c.inCols) *
      sizeof(float);
  try {
    p = &primitivesOf(c);
    if (!p->backwardData)
      makeBackward(c, *p);
    const size_t weightBytes = p->weights.get_size();
    arena().reset(p->bdDiffDst.bytes() + p->bdWeights.bytes() +
                  p->bdDiffSrc.bytes() + p->bwSrc.bytes() +
                  p->bwDiffDst.bytes() + p->bwDiffWeights.bytes() + srcBytes +
                  weightBytes + 2 * 64);
    for (Staged *staged : {&p->bdDiffDst, &p->bdWeights, &p->bdDiffSrc,
                           &p->bwSrc, &p->bwDiffDst, &p->bwDiffWeights})
      staged->place();
    srcGrad = arena().take(srcBytes);
    weightGrad = arena().take(weightBytes);
    if (diffSrc) {
      p->backwardData->execute(
          cpuStream(), {{DNNL_ARG_DIFF_DST, p->bdDiffDst.input(diffDst)},
                        {DNNL_ARG_WEIGHTS, p->bdWeights.input(weights)},
                        {DNNL_ARG_DIFF_SRC, p->bdDiffSrc.output(srcGrad)}});
      p->bdDiffSrc.finish(srcGrad);
    }
    if (diffWeights) {
      p->backwardWeights->execute(
          cpuStream(),
          {{DNNL_ARG_SRC, p->bwSrc.input(src)},
           {DNNL_ARG_DIFF_DST, p->bwDiffDst.input(diffDst)},
           {DNNL_ARG_DIFF_WEIGHTS, p->bwDiffWeights.output(weightGrad)}});
      p->bwDiffWeights.finish(weightGrad);
    }
    cpuStream().wait();
  } catch (const dnnl::error &e) {
    return absl::InvalidArgumentError(
        std::string("oneDNN convolution backward: ") + e.what());
  }
  // Backward kernels add their contributions (a tensor read by several ops
  // gets the sum of their gradients).
  if (diffSrc) {
    const float *from = srcGrad;
    for (int64_t n = 0; n < c.batch; ++n)
      for (int64_t ch = 0; ch < c.inChannels; ++ch)
        for (int64_t r = 0; r < c.inRows; ++r) {
          float *to = diffSrc + n * c.srcStrides[0] + ch * c.srcStrides[1] +
                      r * c.srcStrides[2];
          for (int64_t k = 0; k < c.inCols; ++k)
            to[k] += *from++;
        }
  }
  if (diffWeights) {
    const size_t count = p->weights.get_size() / sizeof(float);
    for (size_t i = 0; i < count; ++i)
      diffWeights[i] += weightGrad[i];
  }
  if (diffBias && c.bias) {
    const int64_t plane = c.outRows * c.outCols;
    for (int64_t f = 0; f < c.outChannels; ++f) {
      double sum = 0;
      for (int64_t n = 0; n < c.batch; ++n) {
        const float *row = diffDst + (n * c.outChannels + f) * plane;
        for (int64_t k = 0; k < plane; ++k)
          sum += row[k];
      }
      diffBias[f] += static_cast<float>(sum);
    }
  }
  return absl::OkStatus();
}

} // namespace ppc::runtime::cpu
