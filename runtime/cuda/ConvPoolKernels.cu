//===- ConvPoolKernels.cu - convolutions, pooling and resize on boxes -----===//
//
// NCHW, the cpu kernels' partitions (runtime/cpu/ConvPoolKernels.cpp): the
// output box gives the batch, channel, row and column ranges to compute; the
// input view holds the windows of those rows/cols (halo included) clipped
// to the tensor, and window positions outside the tensor are padding: zero
// for conv2d and avg_pool2d, skipped by max_pool2d.
//
// conv2d is im2col + Library GEMM per group the output channels touch, a
// strided-batched GEMM over the samples (in chunks that bound the im2col
// block): forward W col; backward dW += dY col^T (per-sample products
// summed in sample order by a kernel), dCol = W^T dY gathered back onto the
// input grad by one thread per input element (no atomics). A pointwise
// partition (1x1, stride 1, no padding, input rows/cols = output's) reads
// the input as its own im2col matrix. Grouped convolutions with fewer than 16
// output channels per group (depthwise ones) run directly instead, a thread per
// output, input grad or weight grad element. With groups == 1 the input
// channels may be split (a reduction: the weight's dim-1 box must equal the
// input's channel box, and only the partition starting at channel 0 adds the
// bias and takes its gradient).
//
// On the GPU, cuDNN runs conv2d instead (cudnnConvolutionForward + the bias
// kernel; cudnnConvolutionBackwardData/BackwardFilter with beta = 1, adding
// into the input and weight grads) when the partition splits no spatial dim
// (input and output boxes hold all rows and cols), the padding is symmetric
// per dim, a grouped conv's output channel box is whole groups (the input
// channels of those groups, and with groups == 1 an input channel split, are
// a strided slice of the input box), sizes fit an int, the tensors are
// 16-byte aligned, and cuDNN's heuristics (..._v7, cached per shape) offer an
// algorithm within 256 MiB of workspace, deterministic where one is: fp32
// FMA math, or TF32 tensor cores where the operands are stored in 16 bits
// (TF32 holds bf16 and f16 values exactly: the same products as a 16-bit
// convolution with float32 sums) or --allow-tf32 asks for them. Otherwise, and
// always in emulation (no cuDNN handle), the kernels above run.
//
// conv_transpose2d runs on the conv2d kernels above (cuDNN where they take
// the partition) as the input gradient of the conv2d from its result to its
// input: backward-data for its forward, forward for its input grad.
//
// Pooling runs one thread per output (forward) and one thread per input
// grad element looping over the windows that cover it (backward), adding in
// the cpu kernel's order; max_pool2d's backward first finds each window's
// maximum once (a thread per output), then compares. max_pool2d routes a tie to
// the first maximum in row-major order. global_avg_pool divides by the GLOBAL
// spatial count (a split spatial dim makes partial means).
//
// resize runs one thread per output (forward, summing its taps in the cpu
// kernel's order) and one thread per result grad element adding into its
// taps with atomicAddFloat (backward), on ResizeGeometry.h's taps.
//
//===----------------------------------------------------------------------===//

#include "ConvPoolGeometry.h"
#include "CudaKernels.h"
#include "Library.h"
#include "ResizeGeometry.h"

#include <algorithm>
#include <utility>

#if !defined(PPC_CUDA_EMULATION)
#include <cudnn.h>

#include <climits>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#endif

namespace ppc::runtime::cuda {

namespace {

/// Offset in a rank-4 DeviceBox of (n, c, row, col).
PPC_HD inline int64_t offset4(const DeviceBox &box, int64_t n, int64_t c,
                              int64_t row, int64_t col) {
  int64_t plane = (n - box.lo[0]) * (box.hi[1] - box.lo[1]) + (c - box.lo[1]);
  int64_t line = plane * (box.hi[2] - box.lo[2]) + (row - box.lo[2]);
  return line * (box.hi[3] - box.lo[3]) + (col - box.lo[3]);
}

//===----------------------------------------------------------------------===//
// conv2d
//===----------------------------------------------------------------------===//

/// What the im2col kernels need of a partition, by value.
struct PatchDims {
  Axis rows, cols;
  int64_t kh, kw, patch, plane, outW;
};

PatchDims patchDims(const ConvGeometry &g) {
  return {g.rows, g.cols, g.kh, g.kw, g.patchSize(), g.outPlane(), g.outW()};
}

/// col[n - n0][patchRow][position] for samples [n0, n0 + count): the input
/// patches of channels from cFirst, zero where a tap reads padding.
void im2col(Stream stream, PatchDims d, const float *input, DeviceBox inBox,
            int64_t n0, int64_t count, int64_t cFirst, float *col) {
  launch(stream, count * d.patch * d.plane, [=] PPC_HD(int64_t i) {
    const int64_t p = i % d.plane;
    const int64_t r = (i / d.plane) % d.patch;
    const int64_t n = n0 + i / (d.plane * d.patch);
    const int64_t c = r / (d.kh * d.kw), ki = (r / d.kw) % d.kh, kj = r % d.kw;
    const int64_t oh = d.rows.outLo + p / d.outW,
                  ow = d.cols.outLo + p % d.outW;
    const int64_t ih = d.rows.tap(oh, ki);
    const int64_t iw = d.cols.tap(ow, kj);
    float value = 0.0f;
    if (d.rows.inside(ih) && d.cols.inside(iw))
      value = input[offset4(inBox, n, cFirst + c, ih, iw)];
    col[i] = value;
  });
}

/// Adds the patch gradients dCol (laid out as im2col's) of samples [n0, n0
/// + count) onto the input grad, channels [cFirst, cFirst + channels): one
/// thread per input grad element, gathering the taps that read it.
void col2imAdd(Stream stream, PatchDims d, int64_t channels, const float *dCol,
               float *dInput, DeviceBox inBox, int64_t n0, int64_t count,
               int64_t cFirst) {
  const int64_t height = inBox.extent(2), width = inBox.extent(3);
  launch(stream, count * channels * height * width, [=] PPC_HD(int64_t i) {
    const int64_t iw = inBox.lo[3] + i % width;
    const int64_t ih = inBox.lo[2] + (i / width) % height;
    const int64_t c = (i / (width * height)) % channels;
    const int64_t n = n0 + i / (width * height * channels);
    const float *block = dCol + (n - n0) * d.patch * d.plane;
    float sum = 0.0f;
    for (int64_t ki = 0; ki < d.kh; ++ki) {
      int64_t oh;
      if (!d.rows.tapOutput(ih, ki, oh))
        continue;
      for (int64_t kj = 0; kj < d.kw; ++kj) {
        int64_t ow;
        if (!d.cols.tapOutput(iw, kj, ow))
          continue;
        const int64_t r = (c * d.kh + ki) * d.kw + kj;
        sum += block[r * d.plane + (oh - d.rows.outLo) * d.outW +
                     (ow - d.cols.outLo)];
      }
    }
    dInput[offset4(inBox, n, cFirst + c, ih, iw)] += sum;
  });
}

/// out[n, f, :] += bias[f] over the output box.
void addBias(Stream stream, float *out, DeviceBox outBox, const float *bias,
             int64_t biasLo, int64_t plane) {
  const int64_t channels = outBox.extent(1);
  launch(stream, outBox.count(), [=] PPC_HD(int64_t i) {
    const int64_t f = outBox.lo[1] + (i / plane) % channels;
    out[i] += bias[f - biasLo];
  });
}

/// dBias[f] += sum over samples and positions of dY[n, f, :], a sample at
/// a time (the position sum in double), as the cpu kernel.
void biasGrad(Stream stream, const float *dy, DeviceBox outBox, float *dBias,
              int64_t biasLo, int64_t plane) {
  const int64_t channels = outBox.extent(1), samples = outBox.extent(0);
  launch(stream, channels, [=] PPC_HD(int64_t k) {
    float acc = dBias[outBox.lo[1] + k - biasLo];
    for (int64_t n = 0; n < samples; ++n) {
      const float *row = dy + (n * channels + k) * plane;
      double sum = 0;
      for (int64_t p = 0; p < plane; ++p)
        sum += row[p];
      acc += static_cast<float>(sum);
    }
    dBias[outBox.lo[1] + k - biasLo] = acc;
  });
}

/// biasGrad of the result grad when the partition takes the bias grad
/// (biasGradOf).
void addBiasGrad(Stream stream, const ConvGeometry &g,
                 const KernelView &dOutput,
                 const std::vector<KernelView> &inputGrads) {
  if (const KernelView *dBias = biasGradOf(g, inputGrads))
    biasGrad(stream, dOutput.data, dOutput.box, dBias->data, dBias->lo[0],
             g.outPlane());
}

/// dW[f, r] += sum over the chunk's samples of parts[n][f][r], in order.
void addSampleSum(Stream stream, const float *parts, int64_t count,
                  int64_t rows, int64_t cols, float *dW) {
  launch(stream, rows * cols, [=] PPC_HD(int64_t i) {
    float acc = dW[i];
    for (int64_t n = 0; n < count; ++n)
      acc += parts[n * rows * cols + i];
    dW[i] = acc;
  });
}

/// Workspace floats a chunk of samples may take (im2col blocks and the
/// like): 64 Mi floats, at least one sample.
constexpr int64_t kChunkFloats = int64_t(1) << 26;

int64_t samplesPerChunk(int64_t perSample, int64_t samples) {
  return std::max<int64_t>(
      1, std::min(samples, kChunkFloats / std::max<int64_t>(perSample, 1)));
}

/// Grouped convolutions whose groups have few output channels (depthwise
/// ones) run directly, one thread per element, instead of as many tiny
/// GEMMs: fewer launches, no im2col block.
constexpr int64_t kDirectMaxOutPerGroup = 16;

bool runsDirect(const ConvGeometry &g) {
  return g.groups > 1 && g.outPerGroup < kDirectMaxOutPerGroup;
}

/// What the direct kernels need of a grouped partition, by value.
struct DirectDims {
  PatchDims d;
  int64_t inPerGroup, outPerGroup;
};

/// One thread per output element: its window over its group's channels.
void directForward(Stream stream, DirectDims x, const float *input,
                   DeviceBox inBox, const float *weight, DeviceBox wBox,
                   const float *bias, int64_t biasLo, float *output,
                   DeviceBox outBox) {
  launch(stream, outBox.count(), [=] PPC_HD(int64_t i) {
    int64_t index[kMaxRank];
    outBox.indexOf(i, index);
    const int64_t n = index[0], f = index[1], oh = index[2], ow = index[3];
    const int64_t cFirst = f / x.outPerGroup * x.inPerGroup;
    float sum = 0.0f;
    for (int64_t c = 0; c < x.inPerGroup; ++c)
      for (int64_t ki = 0; ki < x.d.kh; ++ki) {
        const int64_t ih = x.d.rows.tap(oh, ki);
        if (!x.d.rows.inside(ih))
          continue;
        for (int64_t kj = 0; kj < x.d.kw; ++kj) {
          const int64_t iw = x.d.cols.tap(ow, kj);
          if (!x.d.cols.inside(iw))
            continue;
          sum += weight[offset4(wBox, f, c, ki, kj)] *
                 input[offset4(inBox, n, cFirst + c, ih, iw)];
        }
      }
    if (bias)
      sum += bias[f - biasLo];
    output[i] = sum;
  });
}

/// One thread per input grad element: the output grads of its group's
/// output channels (in the box) whose windows read it, times the weights.
void directInputGrad(Stream stream, DirectDims x, const float *weight,
                     DeviceBox wBox, const float *dy, DeviceBox outBox,
                     float *dInput, DeviceBox inBox) {
  launch(stream, inBox.count(), [=] PPC_HD(int64_t i) {
    int64_t index[kMaxRank];
    inBox.indexOf(i, index);
    const int64_t n = index[0], ci = index[1], ih = index[2], iw = index[3];
    if (n < outBox.lo[0] || n >= outBox.hi[0])
      return;
    const int64_t group = ci / x.inPerGroup, c = ci % x.inPerGroup;
    int64_t fFirst = group * x.outPerGroup, fLast = fFirst + x.outPerGroup;
    fFirst = fFirst > outBox.lo[1] ? fFirst : outBox.lo[1];
    fLast = fLast < outBox.hi[1] ? fLast : outBox.hi[1];
    const PatchDims &d = x.d;
    float sum = 0.0f;
    for (int64_t f = fFirst; f < fLast; ++f)
      for (int64_t ki = 0; ki < d.kh; ++ki) {
        int64_t oh;
        if (!d.rows.tapOutput(ih, ki, oh))
          continue;
        for (int64_t kj = 0; kj < d.kw; ++kj) {
          int64_t ow;
          if (!d.cols.tapOutput(iw, kj, ow))
            continue;
          sum += dy[offset4(outBox, n, f, oh, ow)] *
                 weight[offset4(wBox, f, c, ki, kj)];
        }
      }
    dInput[i] += sum;
  });
}

/// One thread per weight grad element of the output channels in the box:
/// the sum over samples and output positions of dY times the input it read.
void directWeightGrad(Stream stream, DirectDims x, const float *input,
                      DeviceBox inBox, const float *dy, DeviceBox outBox,
                      float *dWeight, DeviceBox wBox) {
  launch(stream, wBox.count(), [=] PPC_HD(int64_t i) {
    int64_t index[kMaxRank];
    wBox.indexOf(i, index);
    const int64_t f = index[0], c = index[1], ki = index[2], kj = index[3];
    if (f < outBox.lo[1] || f >= outBox.hi[1])
      return;
    const int64_t ci = f / x.outPerGroup * x.inPerGroup + c;
    const PatchDims &d = x.d;
    float sum = 0.0f;
    for (int64_t n = outBox.lo[0]; n < outBox.hi[0]; ++n)
      for (int64_t oh = d.rows.outLo; oh < d.rows.outHi; ++oh) {
        const int64_t ih = d.rows.tap(oh, ki);
        if (!d.rows.inside(ih))
          continue;
        for (int64_t ow = d.cols.outLo; ow < d.cols.outHi; ++ow) {
          const int64_t iw = d.cols.tap(ow, kj);
          if (!d.cols.inside(iw))
            continue;
          sum += dy[offset4(outBox, n, f, oh, ow)] *
                 input[offset4(inBox, n, ci, ih, iw)];
        }
      }
    dWeight[i] += sum;
  });
}

#if !defined(PPC_CUDA_EMULATION)
//===----------------------------------------------------------------------===//
// conv2d on cuDNN (GPU only)
//===----------------------------------------------------------------------===//

/// Returns "ppc.conv2d: cudnnXxx: <message>" from the enclosing function
/// when the cuDNN call fn(...) does not succeed.
#define PPC_CUDNN(fn, ...)                                                     \
  do {                                                                         \
    const cudnnStatus_t cudnnStatus_ = fn(__VA_ARGS__);                        \
    if (cudnnStatus_ != CUDNN_STATUS_SUCCESS)                                  \
      return absl::InternalError(                                              \
          "ppc.conv2d: " #fn ": " +                                            \
          std::string(cudnnGetErrorString(cudnnStatus_)));                     \
  } while (0)

/// A partition as cuDNN's descriptors take it (ints only: the bytes are
/// the algorithm cache's key): the input slice the output reads (samples of
/// the output box, channels of its groups; strided in the input box), the
/// output box, the weight rows of the output channels.
struct CudnnShape {
  int x[4], xStrides[4], y[4], yStrides[4], w[4];
  int pad[2], stride[2], dilation[2], groups;
  /// 1: the products may run on TF32 tensor cores (operands stored in 16
  /// bits, which TF32 holds exactly, or --allow-tf32); 0: FMA math.
  int tensorOps;
};

struct CudnnPartition {
  CudnnShape shape;
  int64_t xOffset, wOffset; ///< of the slices in the input / weight boxes
};

/// A size or stride cuDNN takes: positive and an int.
bool fitsInt(int64_t v) { return v > 0 && v <= INT_MAX; }

/// cuDNN gets only 16-byte aligned tensors (a box's slice may start
/// anywhere).
bool aligned(const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

/// False when cuDNN does not run the partition: a split spatial dim,
/// asymmetric padding, an output channel box cutting a group, a size beyond
/// int.
bool cudnnPartition(const ConvGeometry &g, const KernelView &input,
                    const KernelView &weight, const KernelView &output,
                    CudnnPartition &p) {
  const Axis *axes[2] = {&g.rows, &g.cols};
  for (int d = 0; d < 2; ++d) {
    const Axis &a = *axes[d];
    const int64_t span = a.size + 2 * a.padLo - a.dilation * (a.kernel - 1);
    if (a.viewLo != 0 || a.viewHi != a.size || a.outLo != 0 ||
        a.outHi != output.shape[2 + d] || a.padLo != a.padHi || span < 1 ||
        (span - 1) / a.stride + 1 != a.outHi)
      return false;
  }
  int64_t cFirst = input.lo[1], channels = input.extent(1), groups = 1;
  if (g.groups > 1) {
    if (output.lo[1] % g.outPerGroup != 0 || output.hi[1] % g.outPerGroup != 0)
      return false;
    groups = output.extent(1) / g.outPerGroup;
    cFirst = output.lo[1] / g.outPerGroup * g.inPerGroup;
    channels = groups * g.inPerGroup;
  }
  const int64_t height = input.shape[2], width = input.shape[3];
  const int64_t outH = output.shape[2], outW = output.shape[3];
  const int64_t values[] = {output.extent(0),
                            channels,
                            height,
                            width,
                            input.extent(1) * height * width,
                            output.extent(1),
                            outH,
                            outW,
                            output.extent(1) * outH * outW,
                            weight.extent(1),
                            g.kh,
                            g.kw,
                            g.rows.padLo + 1, // a pad may be 0
                            g.cols.padLo + 1,
                            g.rows.stride,
                            g.cols.stride,
                            g.rows.dilation,
                            g.cols.dilation,
                            input.count(),
                            output.count(),
                            weight.count()};
  for (int64_t v : values)
    if (!fitsInt(v))
      return false;
  const auto i = [](int64_t v) { return static_cast<int>(v); };
  const int64_t samples = output.extent(0), outC = output.extent(1);
  p.shape = {
      {i(samples), i(channels), i(height), i(width)},
      {i(input.extent(1) * height * width), i(height * width), i(width), 1},
      {i(samples), i(outC), i(outH), i(outW)},
      {i(outC * outH * outW), i(outH * outW), i(outW), 1},
      {i(outC), i(weight.extent(1)), i(g.kh), i(g.kw)},
      {i(g.rows.padLo), i(g.cols.padLo)},
      {i(g.rows.stride), i(g.cols.stride)},
      {i(g.rows.dilation), i(g.cols.dilation)},
      i(groups)};
  p.xOffset = offset4(input, output.lo[0], cFirst, 0, 0);
  p.wOffset = offset4(weight, output.lo[1], weight.lo[1], 0, 0);
  return true;
}

/// The descriptors of a CudnnShape, destroyed with it; fp32 FMA math, or
/// cuDNN's default (TF32 tensor cores allowed) where the shape says
/// tensorOps.
struct CudnnDescriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;

  CudnnDescriptors() = default;
  CudnnDescriptors(const CudnnDescriptors &) = delete;
  CudnnDescriptors &operator=(const CudnnDescriptors &) = delete;
  ~CudnnDescriptors() {
    if (x)
      cudnnDestroyTensorDescriptor(x);
    if (y)
      cudnnDestroyTensorDescriptor(y);
    if (w)
      cudnnDestroyFilterDescriptor(w);
    if (conv)
      cudnnDestroyConvolutionDescriptor(conv);
  }

  absl::Status make(const CudnnShape &s) {
    PPC_CUDNN(cudnnCreateTensorDescriptor, &x);
    PPC_CUDNN(cudnnCreateTensorDescriptor, &y);
    PPC_CUDNN(cudnnCreateFilterDescriptor, &w);
    PPC_CUDNN(cudnnCreateConvolutionDescriptor, &conv);
    PPC_CUDNN(cudnnSetTensorNdDescriptor, x, CUDNN_DATA_FLOAT, 4, s.x,
              s.xStrides);
    PPC_CUDNN(cudnnSetTensorNdDescriptor, y, CUDNN_DATA_FLOAT, 4, s.y,
              s.yStrides);
    PPC_CUDNN(cudnnSetFilter4dDescriptor, w, CUDNN_DATA_FLOAT,
              CUDNN_TENSOR_NCHW, s.w[0], s.w[1], s.w[2], s.w[3]);
    PPC_CUDNN(cudnnSetConvolution2dDescriptor, conv, s.pad[0], s.pad[1],
              s.stride[0], s.stride[1], s.dilation[0], s.dilation[1],
              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
    PPC_CUDNN(cudnnSetConvolutionGroupCount, conv, s.groups);
    PPC_CUDNN(cudnnSetConvolutionMathType, conv,
              s.tensorOps ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH);
    return absl::OkStatus();
  }
};

enum class CudnnPass { Forward, BackwardData, BackwardFilter };

/// An algorithm of one pass, the math it runs in and its workspace; algo
/// < 0: none fits.
struct CudnnAlgo {
  int algo = -1;
  cudnnMathType_t math = CUDNN_FMA_MATH;
  size_t bytes = 0;
};

/// The most workspace a cuDNN algorithm may take.
constexpr size_t kCudnnWorkspaceBytes = size_t(256) << 20;

/// The first of cuDNN's ranked results that runs, fits the workspace limit
/// and keeps float32 operands (tensor-op math only where `tensorOps`, and
/// never one that converts them to 16 bits), preferring a deterministic
/// one; -1 if none.
template <typename Perf>
int pickAlgo(const Perf *perfs, int count, bool tensorOps) {
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < count; ++i)
      if (perfs[i].status == CUDNN_STATUS_SUCCESS &&
          perfs[i].memory <= kCudnnWorkspaceBytes &&
          (perfs[i].mathType == CUDNN_FMA_MATH ||
           perfs[i].mathType == CUDNN_DEFAULT_MATH ||
           (tensorOps && perfs[i].mathType == CUDNN_TENSOR_OP_MATH)) &&
          (pass == 1 || perfs[i].determinism == CUDNN_DETERMINISTIC))
        return i;
  return -1;
}

/// The algorithm of `pass` for the shape: cuDNN's heuristic choice
/// (..._v7), made once per handle, pass and shape and cached.
absl::Status cudnnAlgo(cudnnHandle_t handle, CudnnPass pass,
                       const CudnnShape &s, const CudnnDescriptors &d,
                       CudnnAlgo &chosen) {
  static std::mutex mutex;
  static std::map<std::string, CudnnAlgo> cache;
  std::string key(reinterpret_cast<const char *>(&s), sizeof s);
  key += static_cast<char>(pass);
  key.append(reinterpret_cast<const char *>(&handle), sizeof handle);
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(key); it != cache.end()) {
    chosen = it->second;
    return absl::OkStatus();
  }
  chosen = CudnnAlgo{};
  int count = 0;
  if (pass == CudnnPass::Forward) {
    cudnnConvolutionFwdAlgoPerf_t perfs[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    PPC_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7, handle, d.x, d.w, d.conv,
              d.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perfs);
    if (int i = pickAlgo(perfs, count, s.tensorOps); i >= 0) {
      PPC_CUDNN(cudnnGetConvolutionForwardWorkspaceSize, handle, d.x, d.w,
                d.conv, d.y, perfs[i].algo, &chosen.bytes);
      chosen.algo = perfs[i].algo;
      chosen.math = perfs[i].mathType;
    }
  } else if (pass == CudnnPass::BackwardData) {
    cudnnConvolutionBwdDataAlgoPerf_t
        perfs[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    PPC_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7, handle, d.w, d.y,
              d.conv, d.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count,
              perfs);
    if (int i = pickAlgo(perfs, count, s.tensorOps); i >= 0) {
      PPC_CUDNN(cudnnGetConvolutionBackwardDataWorkspaceSize, handle, d.w, d.y,
                d.conv, d.x, perfs[i].algo, &chosen.bytes);
      chosen.algo = perfs[i].algo;
      chosen.math = perfs[i].mathType;
    }
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t
        perfs[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    PPC_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7, handle, d.x, d.y,
              d.conv, d.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count,
              perfs);
    if (int i = pickAlgo(perfs, count, s.tensorOps); i >= 0) {
      PPC_CUDNN(cudnnGetConvolutionBackwardFilterWorkspaceSize, handle, d.x,
                d.y, d.conv, d.w, perfs[i].algo, &chosen.bytes);
      chosen.algo = perfs[i].algo;
      chosen.math = perfs[i].mathType;
    }
  }
  if (chosen.bytes > kCudnnWorkspaceBytes)
    chosen = CudnnAlgo{};
  cache[key] = chosen;
  return absl::OkStatus();
}

/// `bytes` of workspace (null for none); false when out of device memory.
bool cudnnWorkspace(ExecContext &ctx, size_t bytes, void *&workspace) {
  workspace = nullptr;
  if (bytes == 0)
    return true;
  workspace = ctx.workspace->floats(
      static_cast<int64_t>((bytes + sizeof(float) - 1) / sizeof(float)));
  return workspace != nullptr;
}

/// The cuDNN handle, the partition and its descriptors when cuDNN runs it.
struct CudnnConv {
  cudnnHandle_t handle = nullptr;
  CudnnPartition p;
  CudnnDescriptors d;
};

/// False when cuDNN does not run the partition: no handle, or a shape
/// cudnnPartition turns down. Tensor cores where every operand of the
/// products (input, weight, and the result gradient `grad` of a backward)
/// is stored in 16 bits, or TF32 is allowed.
bool cudnnFits(ExecContext &ctx, const ConvGeometry &g, const KernelView &input,
               const KernelView &weight, const KernelView &output,
               const KernelView *grad, CudnnConv &c) {
  c.handle = static_cast<cudnnHandle_t>(ctx.library->cudnn(ctx.stream));
  if (!c.handle || !cudnnPartition(g, input, weight, output, c.p))
    return false;
  const auto half = [](const KernelView &v) {
    return v.stored == DType::BF16 || v.stored == DType::F16;
  };
  c.p.shape.tensorOps = ctx.library->allowTf32 ||
                        (half(input) && half(weight) && (!grad || half(*grad)));
  return true;
}

/// conv2d's forward on cuDNN, then the bias; `taken` false (nothing
/// enqueued, no error): the im2col path runs it.
absl::Status cudnnForward(ExecContext &ctx, const ConvGeometry &g,
                          const KernelView &input, const KernelView &weight,
                          const KernelView &output, bool &taken) {
  taken = false;
  CudnnConv c;
  if (!cudnnFits(ctx, g, input, weight, output, nullptr, c))
    return absl::OkStatus();
  const float *x = input.data + c.p.xOffset, *w = weight.data + c.p.wOffset;
  if (!aligned(x) || !aligned(w) || !aligned(output.data))
    return absl::OkStatus();
  if (absl::Status status = c.d.make(c.p.shape); !status.ok())
    return status;
  CudnnAlgo algo;
  if (absl::Status status =
          cudnnAlgo(c.handle, CudnnPass::Forward, c.p.shape, c.d, algo);
      !status.ok())
    return status;
  void *workspace = nullptr;
  if (algo.algo < 0 || !cudnnWorkspace(ctx, algo.bytes, workspace))
    return absl::OkStatus();
  const float one = 1.0f, zero = 0.0f;
  PPC_CUDNN(cudnnSetConvolutionMathType, c.d.conv, algo.math);
  PPC_CUDNN(cudnnConvolutionForward, c.handle, &one, c.d.x, x, c.d.w, w,
            c.d.conv, static_cast<cudnnConvolutionFwdAlgo_t>(algo.algo),
            workspace, algo.bytes, &zero, c.d.y, output.data);
  launchCount().fetch_add(1, std::memory_order_relaxed);
  taken = true;
  if (g.addsBias)
    addBias(ctx.stream, output.data, output.box, g.bias->data, g.bias->lo[0],
            g.outPlane());
  return absl::OkStatus();
}

/// conv2d's backward on cuDNN (weight and input grads ADDED, beta = 1),
/// then the bias grad; `taken` as cudnnForward's.
absl::Status cudnnBackward(ExecContext &ctx, const ConvGeometry &g,
                           const KernelView &input, const KernelView &weight,
                           const KernelView &dOutput,
                           const std::vector<KernelView> &inputGrads,
                           bool &taken) {
  taken = false;
  CudnnConv c;
  if (!cudnnFits(ctx, g, input, weight, dOutput, &dOutput, c))
    return absl::OkStatus();
  const KernelView &dInput = inputGrads[0], &dWeight = inputGrads[1];
  float *dx = dInput.data ? dInput.data + c.p.xOffset : nullptr;
  float *dw = dWeight.data ? dWeight.data + c.p.wOffset : nullptr;
  const float *x = input.data + c.p.xOffset, *w = weight.data + c.p.wOffset;
  if (!aligned(dOutput.data) || (dx && !(aligned(dx) && aligned(w))) ||
      (dw && !(aligned(dw) && aligned(x))))
    return absl::OkStatus();
  if (absl::Status status = c.d.make(c.p.shape); !status.ok())
    return status;
  CudnnAlgo dataAlgo, filterAlgo;
  absl::Status status;
  if (dx && !(status = cudnnAlgo(c.handle, CudnnPass::BackwardData, c.p.shape,
                                 c.d, dataAlgo))
                 .ok())
    return status;
  if (dw && !(status = cudnnAlgo(c.handle, CudnnPass::BackwardFilter, c.p.shape,
                                 c.d, filterAlgo))
                 .ok())
    return status;
  // One workspace serves both: the calls run one after the other on the
  // stream.
  void *workspace = nullptr;
  if ((dx && dataAlgo.algo < 0) || (dw && filterAlgo.algo < 0) ||
      !cudnnWorkspace(ctx, std::max(dataAlgo.bytes, filterAlgo.bytes),
                      workspace))
    return absl::OkStatus();
  const float one = 1.0f;
  if (dw) {
    PPC_CUDNN(cudnnSetConvolutionMathType, c.d.conv, filterAlgo.math);
    PPC_CUDNN(cudnnConvolutionBackwardFilter, c.handle, &one, c.d.x, x, c.d.y,
              dOutput.data, c.d.conv,
              static_cast<cudnnConvolutionBwdFilterAlgo_t>(filterAlgo.algo),
              workspace, filterAlgo.bytes, &one, c.d.w, dw);
    launchCount().fetch_add(1, std::memory_order_relaxed);
  }
  if (dx) {
    PPC_CUDNN(cudnnSetConvolutionMathType, c.d.conv, dataAlgo.math);
    PPC_CUDNN(cudnnConvolutionBackwardData, c.handle, &one, c.d.w, w, c.d.y,
              dOutput.data, c.d.conv,
              static_cast<cudnnConvolutionBwdDataAlgo_t>(dataAlgo.algo),
              workspace, dataAlgo.bytes, &one, c.d.x, dx);
    launchCount().fetch_add(1, std::memory_order_relaxed);
  }
  taken = true;
  addBiasGrad(ctx.stream, g, dOutput, inputGrads);
  return absl::OkStatus();
}

#undef PPC_CUDNN
#endif // !PPC_CUDA_EMULATION

absl::Status conv2dForward(const OpDesc &op, const KernelContext &,
                           ExecContext &ctx,
                           const std::vector<KernelView> &inputs,
                           const std::vector<KernelView> &outputs,
                           const std::vector<KernelView> &) {
  ConvGeometry g;
  if (absl::Status status = forwardGeometry(op, inputs, outputs, g);
      !status.ok())
    return status;
  const KernelView &output = outputs[0];
  const KernelView &input = inputs[0], &weight = inputs[1];
  const int64_t plane = g.outPlane(), patch = g.patchSize();
  const int64_t outC = output.extent(1), samples = output.extent(0);
  if (output.box.count() == 0)
    return absl::OkStatus();
#if !defined(PPC_CUDA_EMULATION)
  bool taken = false;
  if (absl::Status status = cudnnForward(ctx, g, input, weight, output, taken);
      taken || !status.ok())
    return status;
#endif
  if (runsDirect(g)) {
    directForward(ctx.stream, {patchDims(g), g.inPerGroup, g.outPerGroup},
                  input.data, input.box, weight.data, weight.box,
                  g.addsBias ? g.bias->data : nullptr,
                  g.addsBias ? g.bias->lo[0] : 0, output.data, output.box);
    return absl::OkStatus();
  }
  const bool pointwise = isPointwise(g);
  const int64_t chunk = samplesPerChunk(patch * plane, samples);
  float *col = nullptr;
  if (!pointwise && patch > 0 &&
      !(col = ctx.workspace->floats(chunk * patch * plane)))
    return absl::ResourceExhaustedError(
        op.kind + ": out of device memory for its im2col block");
  const PatchDims d = patchDims(g);
  const int64_t inPlane = input.extent(2) * input.extent(3);
  absl::Status error;
  for (int64_t n0 = output.lo[0]; n0 < output.hi[0] && error.ok();
       n0 += chunk) {
    const int64_t count = std::min(chunk, output.hi[0] - n0);
    forEachGroup(g, output, [&](int64_t fFirst, int64_t fLast, int64_t cFirst) {
      if (!error.ok())
        return;
      GemmOperand patches;
      if (pointwise) {
        patches = floatOperand(
            input.data + offset4(input, n0, cFirst, g.rows.outLo, g.cols.outLo),
            plane, false, input.extent(1) * inPlane);
      } else {
        im2col(ctx.stream, d, input.data, input.box, n0, count, cFirst, col);
        patches = floatOperand(col, plane, false, patch * plane);
      }
      const GemmOperand w =
          floatOperand(weight.data + offset4(weight, fFirst, g.weightCLo, 0, 0),
                       patch, false, 0);
      float *out = output.data + (n0 - output.lo[0]) * outC * plane +
                   (fFirst - output.lo[1]) * plane;
      error = ctx.library->gemm(ctx.stream, fLast - fFirst, plane, patch, 1.0f,
                                w, patches, 0.0f,
                                floatResult(out, plane, outC * plane), count);
    });
  }
  if (!error.ok())
    return annotate(error, op.kind);
  if (g.addsBias)
    addBias(ctx.stream, output.data, output.box, g.bias->data, g.bias->lo[0],
            plane);
  return absl::OkStatus();
}

absl::Status conv2dBackward(const OpDesc &op, const KernelContext &,
                            ExecContext &ctx,
                            const std::vector<KernelView> &inputs,
                            const std::vector<KernelView> &outputs,
                            const std::vector<KernelView> &outputGrads,
                            const std::vector<KernelView> &inputGrads,
                            const std::vector<KernelView> &) {
  ConvGeometry g;
  if (absl::Status status =
          backwardGeometry(op, inputs, outputs, outputGrads, inputGrads, g);
      !status.ok())
    return status;
  const KernelView &dOutput = outputGrads[0];
  const KernelView &input = inputs[0], &weight = inputs[1];
  const KernelView &dInput = inputGrads[0], &dWeight = inputGrads[1];
  const int64_t plane = g.outPlane(), patch = g.patchSize();
  const int64_t outC = dOutput.extent(1), samples = dOutput.extent(0);
  if (dOutput.box.count() == 0)
    return absl::OkStatus();
#if !defined(PPC_CUDA_EMULATION)
  bool taken = false;
  if (absl::Status status =
          cudnnBackward(ctx, g, input, weight, dOutput, inputGrads, taken);
      taken || !status.ok())
    return status;
#endif
  if (runsDirect(g)) {
    const DirectDims x{patchDims(g), g.inPerGroup, g.outPerGroup};
    if (dWeight.data)
      directWeightGrad(ctx.stream, x, input.data, input.box, dOutput.data,
                       dOutput.box, dWeight.data, dWeight.box);
    if (dInput.data)
      directInputGrad(ctx.stream, x, weight.data, weight.box, dOutput.data,
                      dOutput.box, dInput.data, dInput.box);
    addBiasGrad(ctx.stream, g, dOutput, inputGrads);
    return absl::OkStatus();
  }
  const bool pointwise = isPointwise(g);
  // Per sample: its im2col block, its dW product, its dCol block.
  const int64_t perSample = (pointwise ? 0 : 2 * patch * plane) + outC * patch;
  const int64_t chunk = samplesPerChunk(perSample, samples);
  float *col = nullptr, *dCol = nullptr, *dWParts = nullptr;
  const bool im2colNeeded = !pointwise && patch > 0;
  if ((dWeight.data && im2colNeeded &&
       !(col = ctx.workspace->floats(chunk * patch * plane))) ||
      (dInput.data && im2colNeeded &&
       !(dCol = ctx.workspace->floats(chunk * patch * plane))) ||
      (dWeight.data && patch > 0 &&
       !(dWParts = ctx.workspace->floats(chunk * outC * patch))))
    return absl::ResourceExhaustedError(
        op.kind + ": out of device memory for its im2col blocks");
  const PatchDims d = patchDims(g);
  const int64_t inPlane = input.extent(2) * input.extent(3);
  const float *dy = dOutput.data;
  absl::Status error;
  for (int64_t n0 = dOutput.lo[0]; n0 < dOutput.hi[0] && error.ok();
       n0 += chunk) {
    const int64_t count = std::min(chunk, dOutput.hi[0] - n0);
    forEachGroup(
        g, dOutput, [&](int64_t fFirst, int64_t fLast, int64_t cFirst) {
          if (!error.ok() || patch == 0)
            return;
          const int64_t fCount = fLast - fFirst;
          const GemmOperand dyGroup =
              floatOperand(dy + (n0 - dOutput.lo[0]) * outC * plane +
                               (fFirst - dOutput.lo[1]) * plane,
                           plane, false, outC * plane);
          if (dWeight.data) { // dW += sum_n dY_n col_n^T
            GemmOperand patchesT;
            if (pointwise) {
              patchesT =
                  floatOperand(input.data + offset4(input, n0, cFirst,
                                                    g.rows.outLo, g.cols.outLo),
                               plane, true, input.extent(1) * inPlane);
            } else {
              im2col(ctx.stream, d, input.data, input.box, n0, count, cFirst,
                     col);
              patchesT = floatOperand(col, plane, true, patch * plane);
            }
            error = ctx.library->gemm(
                ctx.stream, fCount, patch, plane, 1.0f, dyGroup, patchesT, 0.0f,
                floatResult(dWParts, patch, fCount * patch), count);
            if (!error.ok())
              return;
            addSampleSum(ctx.stream, dWParts, count, fCount, patch,
                         dWeight.data +
                             offset4(dWeight, fFirst, g.weightCLo, 0, 0));
          }
          if (dInput.data) { // dCol_n = W^T dY_n, gathered onto the input
            const GemmOperand wT = floatOperand(
                weight.data + offset4(weight, fFirst, g.weightCLo, 0, 0), patch,
                true, 0);
            if (pointwise) {
              error = ctx.library->gemm(
                  ctx.stream, patch, plane, fCount, 1.0f, wT, dyGroup, 1.0f,
                  floatResult(dInput.data + offset4(dInput, n0, cFirst,
                                                    g.rows.outLo, g.cols.outLo),
                              plane, dInput.extent(1) * inPlane),
                  count);
            } else {
              error = ctx.library->gemm(
                  ctx.stream, patch, plane, fCount, 1.0f, wT, dyGroup, 0.0f,
                  floatResult(dCol, plane, patch * plane), count);
              if (error.ok())
                col2imAdd(ctx.stream, d, g.channels(), dCol, dInput.data,
                          dInput.box, n0, count, cFirst);
            }
          }
        });
  }
  if (!error.ok())
    return annotate(error, op.kind);
  addBiasGrad(ctx.stream, g, dOutput, inputGrads);
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// conv_transpose2d
//===----------------------------------------------------------------------===//

// As on the cpu backend (ConvPoolGeometry.h: the roles), on conv2d's
// kernels above, cuDNN's where they take the partition: forward = the
// conv2d's backward-data into the zeroed result, input grad = its forward
// on dy, weight grad = its weight grad with dy as input and x as result
// grad.

/// out[i] += add[i] for the `n` floats of a box.
void addFloats(Stream stream, float *out, const float *add, int64_t n) {
  launch(stream, n, [=] PPC_HD(int64_t i) { out[i] += add[i]; });
}

absl::Status convTransposeForward(const OpDesc &op,
                                  const KernelContext &kernelContext,
                                  ExecContext &ctx,
                                  const std::vector<KernelView> &inputs,
                                  const std::vector<KernelView> &outputs,
                                  const std::vector<KernelView> &) {
  TransposedConvGeometry g;
  if (absl::Status status = forwardGeometry(op, inputs, outputs, g);
      !status.ok())
    return status;
  const KernelView &input = inputs[0], &weight = inputs[1];
  const KernelView &output = outputs[0];
  if (output.box.count() == 0)
    return absl::OkStatus();
  zeroFloats(ctx.stream, output.data, output.box.count());
  if (absl::Status status =
          conv2dBackward(op, kernelContext, ctx, {output, weight}, {}, {input},
                         {output, KernelView{}}, {});
      !status.ok())
    return status;
  if (const KernelView *bias = transposedBias(inputs, weight))
    addBias(ctx.stream, output.data, output.box, bias->data, bias->lo[0],
            output.extent(2) * output.extent(3));
  return absl::OkStatus();
}

absl::Status convTransposeBackward(const OpDesc &op,
                                   const KernelContext &kernelContext,
                                   ExecContext &ctx,
                                   const std::vector<KernelView> &inputs,
                                   const std::vector<KernelView> &outputs,
                                   const std::vector<KernelView> &outputGrads,
                                   const std::vector<KernelView> &inputGrads,
                                   const std::vector<KernelView> &) {
  TransposedConvGeometry g;
  if (absl::Status status =
          backwardGeometry(op, inputs, outputs, outputGrads, inputGrads, g);
      !status.ok())
    return status;
  const KernelView &input = inputs[0], &weight = inputs[1];
  const KernelView &dOutput = outputGrads[0];
  if (dOutput.box.count() == 0)
    return absl::OkStatus();
  const KernelView &dInput = inputGrads[0];
  if (dInput.data && dInput.box.count() > 0) { // dx += conv(dy, W)
    KernelView conv = dInput;
    if (!(conv.data = ctx.workspace->floats(dInput.box.count())))
      return absl::ResourceExhaustedError(
          op.kind + ": out of device memory for its input grad");
    if (absl::Status status = conv2dForward(op, kernelContext, ctx,
                                            {dOutput, weight}, {conv}, {});
        !status.ok())
      return status;
    addFloats(ctx.stream, dInput.data, conv.data, dInput.box.count());
  }
  if (inputGrads[1].data)
    if (absl::Status status =
            conv2dBackward(op, kernelContext, ctx, {dOutput, weight}, {},
                           {input}, {KernelView{}, inputGrads[1]}, {});
        !status.ok())
      return status;
  if (const KernelView *dBias = transposedBias(inputGrads, weight))
    biasGrad(ctx.stream, dOutput.data, dOutput.box, dBias->data, dBias->lo[0],
             dOutput.extent(2) * dOutput.extent(3));
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// max_pool2d, avg_pool2d
//===----------------------------------------------------------------------===//

/// Global (row, col) of the first maximum (row-major) of the window in the
/// (n, c) plane of `input`; false when the window is all padding.
PPC_HD inline bool argMax(const float *input, const DeviceBox &box, int64_t n,
                          int64_t c, const Window &rows, const Window &cols,
                          int64_t &row, int64_t &col, float &best) {
  if (rows.first >= rows.last || cols.first >= cols.last)
    return false;
  const float *plane = input + offset4(box, n, c, box.lo[2], box.lo[3]);
  const int64_t width = box.hi[3] - box.lo[3];
  row = rows.first;
  col = cols.first;
  best = plane[(row - box.lo[2]) * width + (col - box.lo[3])];
  for (int64_t ih = rows.first; ih < rows.last; ++ih) {
    const float *line = plane + (ih - box.lo[2]) * width - box.lo[3];
    for (int64_t iw = cols.first; iw < cols.last; ++iw)
      if (line[iw] > best) {
        best = line[iw];
        row = ih;
        col = iw;
      }
  }
  return true;
}

void maxPoolForwardKernel(Stream stream, PoolGeometry g, const float *input,
                          DeviceBox inBox, float *output, DeviceBox outBox) {
  launch(stream, outBox.count(), [=] PPC_HD(int64_t i) {
    int64_t index[kMaxRank];
    outBox.indexOf(i, index);
    const Window rows = windowOf(g.rows, index[2]),
                 cols = windowOf(g.cols, index[3]);
    int64_t row, col;
    float best = 0.0f;
    if (!argMax(input, inBox, index[0], index[1], rows, cols, row, col, best))
      best = 0.0f;
    output[i] = best;
  });
}

void avgPoolForwardKernel(Stream stream, PoolGeometry g, const float *input,
                          DeviceBox inBox, float *output, DeviceBox outBox) {
  launch(stream, outBox.count(), [=] PPC_HD(int64_t i) {
    int64_t index[kMaxRank];
    outBox.indexOf(i, index);
    const Window rows = windowOf(g.rows, index[2]),
                 cols = windowOf(g.cols, index[3]);
    const int64_t width = inBox.hi[3] - inBox.lo[3];
    const float *plane =
        input + offset4(inBox, index[0], index[1], inBox.lo[2], inBox.lo[3]);
    float sum = 0.0f;
    for (int64_t ih = rows.first; ih < rows.last; ++ih) {
      const float *line = plane + (ih - inBox.lo[2]) * width - inBox.lo[3];
      for (int64_t iw = cols.first; iw < cols.last; ++iw)
        sum += line[iw];
    }
    const int64_t divisor = avgDivisor(g.countIncludePad, rows, cols);
    output[i] = divisor > 0 ? sum / static_cast<float>(divisor) : 0.0f;
  });
}

/// The global (row, col) of a window's first maximum as one key; -1 for a
/// window that is all padding.
PPC_HD inline int64_t argMaxKey(int64_t row, int64_t col) {
  return (row << 32) | col;
}

/// Per element of the result box: the argMaxKey of its window's first
/// maximum, so the backward finds each window's maximum once rather than
/// once per input element under the window.
void argMaxKernel(Stream stream, PoolGeometry g, const float *input,
                  DeviceBox inBox, DeviceBox outBox, int64_t *keys) {
  launch(stream, outBox.count(), [=] PPC_HD(int64_t i) {
    int64_t index[kMaxRank];
    outBox.indexOf(i, index);
    int64_t row, col;
    float best;
    keys[i] =
        argMax(input, inBox, index[0], index[1], windowOf(g.rows, index[2]),
               windowOf(g.cols, index[3]), row, col, best)
            ? argMaxKey(row, col)
            : -1;
  });
}

/// One thread per input grad element: adds the result grads of the windows
/// covering it (max: those whose first maximum it is, by `keys`), in the
/// cpu kernel's order (output rows, then cols).
void poolBackwardKernel(Stream stream, PoolGeometry g, bool max,
                        const int64_t *keys, float *dInput, DeviceBox inBox,
                        const float *dOutput, DeviceBox outBox) {
  launch(stream, inBox.count(), [=] PPC_HD(int64_t i) {
    int64_t index[kMaxRank];
    inBox.indexOf(i, index);
    const int64_t n = index[0], c = index[1], ih = index[2], iw = index[3];
    if (n < outBox.lo[0] || n >= outBox.hi[0] || c < outBox.lo[1] ||
        c >= outBox.hi[1])
      return;
    int64_t ohFirst, ohLast, owFirst, owLast;
    g.rows.covering(ih, ohFirst, ohLast);
    g.cols.covering(iw, owFirst, owLast);
    float acc = dInput[i];
    for (int64_t oh = ohFirst; oh < ohLast; ++oh) {
      const Window rows = windowOf(g.rows, oh);
      for (int64_t ow = owFirst; ow < owLast; ++ow) {
        const Window cols = windowOf(g.cols, ow);
        const int64_t o = offset4(outBox, n, c, oh, ow);
        const float dy = dOutput[o];
        if (max) {
          if (keys[o] == argMaxKey(ih, iw))
            acc += dy;
        } else {
          const int64_t divisor = avgDivisor(g.countIncludePad, rows, cols);
          if (divisor > 0)
            acc += dy / static_cast<float>(divisor);
        }
      }
    }
    dInput[i] = acc;
  });
}

absl::Status poolForward(bool max, const OpDesc &op, ExecContext &ctx,
                         const std::vector<KernelView> &inputs,
                         const std::vector<KernelView> &outputs) {
  PoolGeometry g;
  if (absl::Status status = forwardGeometry(op, inputs, outputs, g);
      !status.ok())
    return status;
  const KernelView &output = outputs[0];
  if (max)
    maxPoolForwardKernel(ctx.stream, g, inputs[0].data, inputs[0].box,
                         output.data, output.box);
  else
    avgPoolForwardKernel(ctx.stream, g, inputs[0].data, inputs[0].box,
                         output.data, output.box);
  return absl::OkStatus();
}

absl::Status poolBackward(bool max, const OpDesc &op, ExecContext &ctx,
                          const std::vector<KernelView> &inputs,
                          const std::vector<KernelView> &outputs,
                          const std::vector<KernelView> &outputGrads,
                          const std::vector<KernelView> &inputGrads) {
  PoolGeometry g;
  if (absl::Status status =
          backwardGeometry(op, inputs, outputs, outputGrads, inputGrads, g);
      !status.ok())
    return status;
  const KernelView &dOutput = outputGrads[0];
  const KernelView &dInput = inputGrads[0];
  if (!dInput.data || dOutput.box.count() == 0)
    return absl::OkStatus();
  int64_t *keys = nullptr;
  if (max) {
    keys = ctx.workspace ? reinterpret_cast<int64_t *>(
                               ctx.workspace->floats(2 * dOutput.box.count()))
                         : nullptr;
    if (!keys)
      return absl::ResourceExhaustedError(
          op.kind + ": out of device memory for the windows' maxima");
    argMaxKernel(ctx.stream, g, inputs[0].data, dInput.box, dOutput.box, keys);
  }
  poolBackwardKernel(ctx.stream, g, max, keys, dInput.data, dInput.box,
                     dOutput.data, dOutput.box);
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// global_avg_pool
//===----------------------------------------------------------------------===//

absl::Status globalAvgPoolForward(const OpDesc &op, const KernelContext &,
                                  ExecContext &ctx,
                                  const std::vector<KernelView> &inputs,
                                  const std::vector<KernelView> &outputs,
                                  const std::vector<KernelView> &) {
  GlobalPoolShape s;
  if (absl::Status status = forwardGeometry(op, inputs, outputs, s);
      !status.ok())
    return status;
  const KernelView &output = outputs[0];
  const KernelView &input = inputs[0];
  const float *in = input.data;
  float *out = output.data;
  const int64_t inLo0 = input.lo[0], inLo1 = input.lo[1], inC = input.extent(1);
  const int64_t outLo0 = output.lo[0], outLo1 = output.lo[1],
                outC = output.extent(1);
  launch(ctx.stream, output.extent(0) * outC, [=] PPC_HD(int64_t i) {
    const int64_t n = outLo0 + i / outC, c = outLo1 + i % outC;
    const float *plane = in + ((n - inLo0) * inC + (c - inLo1)) * s.local;
    double sum = 0;
    for (int64_t k = 0; k < s.local; ++k)
      sum += plane[k];
    out[i] = static_cast<float>(sum / static_cast<double>(s.count));
  });
  return absl::OkStatus();
}

absl::Status globalAvgPoolBackward(const OpDesc &op, const KernelContext &,
                                   ExecContext &ctx,
                                   const std::vector<KernelView> &inputs,
                                   const std::vector<KernelView> &outputs,
                                   const std::vector<KernelView> &outputGrads,
                                   const std::vector<KernelView> &inputGrads,
                                   const std::vector<KernelView> &) {
  GlobalPoolShape s;
  if (absl::Status status =
          backwardGeometry(op, inputs, outputs, outputGrads, inputGrads, s);
      !status.ok())
    return status;
  const KernelView &dOutput = outputGrads[0];
  const KernelView &dInput = inputGrads[0];
  if (!dInput.data)
    return absl::OkStatus();
  float *dIn = dInput.data;
  const float *dOut = dOutput.data;
  const int64_t inLo0 = dInput.lo[0], inLo1 = dInput.lo[1],
                inC = dInput.extent(1);
  const int64_t outLo0 = dOutput.lo[0], outHi0 = dOutput.hi[0],
                outLo1 = dOutput.lo[1], outHi1 = dOutput.hi[1],
                outC = dOutput.extent(1);
  const float divisor = static_cast<float>(s.count);
  launch(ctx.stream, dInput.extent(0) * inC * s.local, [=] PPC_HD(int64_t i) {
    const int64_t plane = i / s.local;
    const int64_t n = inLo0 + plane / inC, c = inLo1 + plane % inC;
    if (n < outLo0 || n >= outHi0 || c < outLo1 || c >= outHi1)
      return;
    dIn[i] += dOut[(n - outLo0) * outC + (c - outLo1)] / divisor;
  });
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// resize
//===----------------------------------------------------------------------===//

absl::Status resizeForward(const OpDesc &op, const KernelContext &,
                           ExecContext &ctx,
                           const std::vector<KernelView> &inputs,
                           const std::vector<KernelView> &outputs,
                           const std::vector<KernelView> &) {
  ResizeGeometry g;
  if (absl::Status status = forwardGeometry(op, inputs, outputs, g);
      !status.ok())
    return status;
  const float *input = inputs[0].data;
  const DeviceBox inBox = inputs[0].box, outBox = outputs[0].box;
  float *output = outputs[0].data;
  launch(ctx.stream, outBox.count(), [=] PPC_HD(int64_t i) {
    int64_t index[kMaxRank];
    outBox.indexOf(i, index);
    const ResizeTaps tr = resizeTaps(g, g.rows, index[2]);
    const ResizeTaps tc = resizeTaps(g, g.cols, index[3]);
    const float *plane = input + offset4(inBox, index[0], index[1], 0, 0);
    output[i] = resizeValue(g, tr, tc, plane, inBox.hi[3]);
  });
  return absl::OkStatus();
}

absl::Status resizeBackward(const OpDesc &op, const KernelContext &,
                            ExecContext &ctx,
                            const std::vector<KernelView> &inputs,
                            const std::vector<KernelView> &outputs,
                            const std::vector<KernelView> &outputGrads,
                            const std::vector<KernelView> &inputGrads,
                            const std::vector<KernelView> &) {
  ResizeGeometry g;
  if (absl::Status status =
          backwardGeometry(op, inputs, outputs, outputGrads, inputGrads, g);
      !status.ok())
    return status;
  const KernelView &dOutput = outputGrads[0];
  const KernelView &dInputView = inputGrads[0];
  if (!dInputView.data || dOutput.box.count() == 0)
    return absl::OkStatus();
  float *dInput = dInputView.data;
  const float *dy = dOutput.data;
  const DeviceBox inBox = dInputView.box, outBox = dOutput.box;
  launch(ctx.stream, outBox.count(), [=] PPC_HD(int64_t i) {
    int64_t index[kMaxRank];
    outBox.indexOf(i, index);
    const ResizeTaps tr = resizeTaps(g, g.rows, index[2]);
    const ResizeTaps tc = resizeTaps(g, g.cols, index[3]);
    float *plane = dInput + offset4(inBox, index[0], index[1], 0, 0);
    resizeScatter(
        tr, tc, dy[i], plane, inBox.hi[3],
        [](float *target, float value) { atomicAddFloat(target, value); });
  });
  return absl::OkStatus();
}

} // namespace

void registerConvPoolKernels(CudaKernelTable &t) {
  t["ppc.conv2d"] = {conv2dForward, conv2dBackward};
  t["ppc.conv_transpose2d"] = {convTransposeForward, convTransposeBackward};
  t["ppc.max_pool2d"] = {
      [](const OpDesc &op, const KernelContext &, ExecContext &ctx,
         const std::vector<KernelView> &inputs,
         const std::vector<KernelView> &outputs,
         const std::vector<KernelView> &) {
        return poolForward(true, op, ctx, inputs, outputs);
      },
      [](const OpDesc &op, const KernelContext &, ExecContext &ctx,
         const std::vector<KernelView> &inputs,
         const std::vector<KernelView> &outputs,
         const std::vector<KernelView> &outputGrads,
         const std::vector<KernelView> &inputGrads,
         const std::vector<KernelView> &) {
        return poolBackward(true, op, ctx, inputs, outputs, outputGrads,
                            inputGrads);
      }};
  t["ppc.avg_pool2d"] = {
      [](const OpDesc &op, const KernelContext &, ExecContext &ctx,
         const std::vector<KernelView> &inputs,
         const std::vector<KernelView> &outputs,
         const std::vector<KernelView> &) {
        return poolForward(false, op, ctx, inputs, outputs);
      },
      [](const OpDesc &op, const KernelContext &, ExecContext &ctx,
         const std::vector<KernelView> &inputs,
         const std::vector<KernelView> &outputs,
         const std::vector<KernelView> &outputGrads,
         const std::vector<KernelView> &inputGrads,
         const std::vector<KernelView> &) {
        return poolBackward(false, op, ctx, inputs, outputs, outputGrads,
                            inputGrads);
      }};
  t["ppc.global_avg_pool"] = {globalAvgPoolForward, globalAvgPoolBackward};
  t["ppc.resize"] = {resizeForward, resizeBackward};
}

} // namespace ppc::runtime::cuda
