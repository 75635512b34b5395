//===- ConvPoolKernels.cpp - convolutions, pooling and resize on boxes ----===//
//
// NCHW. The output box gives the batch, channel, row and column ranges to
// compute; the input view holds the windows of those rows/cols (halo
// included) clipped to the tensor, and window positions outside the tensor
// are padding: zero for conv2d and avg_pool2d, skipped by max_pool2d.
// conv2d runs through oneDNN when the partition holds every channel of its
// input, weight and output (any samples, rows and columns: the rows and
// columns the view holds become the convolution's input, the padding
// outside the tensor its padding), else im2col + sgemm per sample and
// group, which is also the reference the tests hold oneDNN to; with
// groups == 1 the input channels may be split (a reduction: the weight's dim-1
// box must equal the input's channel box, and only the partition starting at
// channel 0 adds the bias). conv_transpose2d runs on conv2d's paths as the
// input gradient of the conv2d from its result to its input (the forward is
// that conv's backward-data, oneDNN's where it takes the partition). resize
// (ResizeGeometry.h) reads whole input planes: the taps of each result row
// and column are computed once per partition, and its backward adds each
// result gradient into them.
//
//===----------------------------------------------------------------------===//

#include "ConvPoolGeometry.h"
#include "DnnlConv.h"
#include "KernelHelpers.h"
#include "KernelRegistry.h"
#include "ResizeGeometry.h"

#include <algorithm>
#include <cstring>
#include <optional>

namespace ppc::runtime::cpu {

namespace {

//===----------------------------------------------------------------------===//
// conv2d
//===----------------------------------------------------------------------===//

/// Calls fn(patchRow, rowOffset, oh, owFirst, owLast, iwFirst) for every
/// (channel, tap, output row) whose input row ih lies inside the tensor:
/// output cols [owFirst, owLast) read input cols iwFirst + (ow - owFirst) *
/// stride, and input col iw of row ih is at view offset rowOffset + iw.
template <typename Fn>
void forEachPatchRow(const ConvGeometry &g, const TensorView &input, int64_t n,
                     int64_t cFirst, Fn &&fn) {
  for (int64_t c = 0; c < g.channels(); ++c)
    for (int64_t i = 0; i < g.kh; ++i) {
      auto [ohFirst, ohLast] = g.rows.validOutputs(i);
      for (int64_t j = 0; j < g.kw; ++j) {
        int64_t patchRow = (c * g.kh + i) * g.kw + j;
        auto [owFirst, owLast] = g.cols.validOutputs(j);
        if (owFirst >= owLast)
          continue;
        int64_t iwFirst = g.cols.tap(owFirst, j);
        for (int64_t oh = ohFirst; oh < ohLast; ++oh) {
          int64_t ih = g.rows.tap(oh, i);
          int64_t rowOffset =
              offset4(input, n, cFirst + c, ih, input.lo[3]) - input.lo[3];
          fn(patchRow, rowOffset, oh, owFirst, owLast, iwFirst);
        }
      }
    }
}

/// Fills `col` [patchSize, outPlane] with the input patches of sample n,
/// input channels from cFirst (zero where a tap reads padding).
void im2col(const ConvGeometry &g, const TensorView &input, int64_t n,
            int64_t cFirst, float *col) {
  int64_t outW = g.outW();
  int64_t plane = g.outPlane();
  std::fill(col, col + g.patchSize() * plane, 0.0f);
  int64_t stride = g.cols.stride;
  forEachPatchRow(g, input, n, cFirst,
                  [&](int64_t patchRow, int64_t rowOffset, int64_t oh,
                      int64_t owFirst, int64_t owLast, int64_t iwFirst) {
                    float *dst = col + patchRow * plane +
                                 (oh - g.rows.outLo) * outW +
                                 (owFirst - g.cols.outLo);
                    const float *src = input.data + rowOffset + iwFirst;
                    int64_t count = owLast - owFirst;
                    if (stride == 1)
                      std::memcpy(dst, src, count * sizeof(float));
                    else
                      for (int64_t k = 0; k < count; ++k)
                        dst[k] = src[k * stride];
                  });
}

/// Adds the patch gradients `col` back into the input grad view.
void col2imAdd(const ConvGeometry &g, const TensorView &inputGrad, int64_t n,
               int64_t cFirst, const float *col) {
  int64_t outW = g.outW();
  int64_t plane = g.outPlane();
  int64_t stride = g.cols.stride;
  forEachPatchRow(g, inputGrad, n, cFirst,
                  [&](int64_t patchRow, int64_t rowOffset, int64_t oh,
                      int64_t owFirst, int64_t owLast, int64_t iwFirst) {
                    const float *src = col + patchRow * plane +
                                       (oh - g.rows.outLo) * outW +
                                       (owFirst - g.cols.outLo);
                    float *dst = inputGrad.data + rowOffset + iwFirst;
                    for (int64_t k = 0; k < owLast - owFirst; ++k)
                      dst[k * stride] += src[k];
                  });
}

/// The partition as one oneDNN convolution, if it is one (library kernels
/// on, every channel held); `offset` is where its input starts in the
/// input view (and in the input gradient's).
std::optional<DnnlConv> asDnnlConv(const ConvGeometry &g,
                                   const TensorView &input,
                                   const TensorView &weight,
                                   const TensorView &output, int64_t &offset) {
  auto whole = [](const TensorView &v, int64_t d) {
    return v.lo[d] == 0 && v.hi[d] == v.shape[d];
  };
  if (!libraryKernels() || !whole(input, 1) || !whole(output, 1) ||
      !whole(weight, 0) || !whole(weight, 1) || output.numElements() == 0)
    return std::nullopt;
  DnnlConv c;
  c.batch = output.extent(0);
  c.inChannels = input.shape[1];
  c.outChannels = output.shape[1];
  c.groups = g.groups;
  c.kernelRows = g.kh;
  c.kernelCols = g.kw;
  c.bias = g.addsBias;
  int64_t first[2];
  const Axis *axes[2] = {&g.rows, &g.cols};
  for (int d = 0; d < 2; ++d) {
    const Axis &a = *axes[d];
    // The window of the partition's outputs, and the part the view holds;
    // checkGeometry checked that the rest lies outside the tensor.
    const int64_t start = a.start(a.outLo);
    const int64_t end = a.windowEnd();
    first[d] = std::max(start, a.viewLo);
    const int64_t last = std::min(end, a.viewHi);
    c.padLo[d] = first[d] - start;
    c.padHi[d] = end - last;
    c.strides[d] = a.stride;
    c.dilations[d] = a.dilation;
    (d == 0 ? c.inRows : c.inCols) = last - first[d];
    (d == 0 ? c.outRows : c.outCols) = a.outHi - a.outLo;
  }
  if (c.inRows <= 0 || c.inCols <= 0)
    return std::nullopt;
  c.srcStrides[3] = 1;
  c.srcStrides[2] = input.extent(3);
  c.srcStrides[1] = input.extent(2) * c.srcStrides[2];
  c.srcStrides[0] = input.extent(1) * c.srcStrides[1];
  offset = offset4(input, output.lo[0], 0, first[0], first[1]);
  return c;
}

/// sums[f] += the sum over the positions of sample n of view[n, f] for the
/// view's channels (a bias gradient; the positions summed in double).
void addChannelSums(const TensorView &view, int64_t n, const TensorView &sums) {
  const int64_t plane = view.extent(2) * view.extent(3);
  const float *data = view.data + (n - view.lo[0]) * view.extent(1) * plane;
  for (int64_t f = view.lo[1]; f < view.hi[1]; ++f, data += plane) {
    double sum = 0;
    for (int64_t k = 0; k < plane; ++k)
      sum += data[k];
    sums.data[f - sums.lo[0]] += static_cast<float>(sum);
  }
}

/// output = conv(input, weight) (+ the bias where the partition adds it)
/// on a checked partition.
absl::Status convForward(const ConvGeometry &g, const TensorView &input,
                         const TensorView &weight, TensorView &output) {
  int64_t offset = 0;
  if (std::optional<DnnlConv> c = asDnnlConv(g, input, weight, output, offset))
    return dnnlConvForward(*c, input.data + offset, weight.data,
                           c->bias ? g.bias->data - g.bias->lo[0] : nullptr,
                           output.data);
  int64_t plane = g.outPlane(), patch = g.patchSize();
  int64_t outC = output.extent(1);
  bool pointwise = isPointwise(g);
  std::vector<float> col(pointwise ? 0 : patch * plane);
  for (int64_t n = output.lo[0]; n < output.hi[0]; ++n) {
    float *out = output.data + (n - output.lo[0]) * outC * plane;
    forEachGroup(g, output, [&](int64_t fFirst, int64_t fLast, int64_t cFirst) {
      const float *patches =
          input.data + offset4(input, n, cFirst, g.rows.outLo, g.cols.outLo);
      if (!pointwise) {
        im2col(g, input, n, cFirst, col.data());
        patches = col.data();
      }
      const float *w = weight.data + offset4(weight, fFirst, g.weightCLo, 0, 0);
      gemm(false, false, fLast - fFirst, plane, patch, w, patch, patches, plane,
           false, out + (fFirst - output.lo[1]) * plane, plane);
    });
    if (g.addsBias)
      for (int64_t f = output.lo[1]; f < output.hi[1]; ++f) {
        float b = g.bias->data[f - g.bias->lo[0]];
        float *row = out + (f - output.lo[1]) * plane;
        for (int64_t k = 0; k < plane; ++k)
          row[k] += b;
      }
  }
  return absl::OkStatus();
}

absl::Status conv2dForward(const OpDesc &op, const KernelContext &,
                           const std::vector<TensorView> &inputs,
                           std::vector<TensorView> &outputs,
                           std::vector<TensorView> &) {
  ConvGeometry g;
  if (absl::Status status = forwardGeometry(op, inputs, outputs, g);
      !status.ok())
    return status;
  return convForward(g, inputs[0], inputs[1], outputs[0]);
}

/// dInput, dWeight and biasGrad += conv's gradients from dOutput on a
/// checked partition; a view without data (or a null biasGrad) is skipped.
absl::Status convBackward(const ConvGeometry &g, const TensorView &input,
                          const TensorView &weight, const TensorView &dOutput,
                          const TensorView &dInput, const TensorView &dWeight,
                          const TensorView *biasGrad) {
  int64_t offset = 0;
  if (std::optional<DnnlConv> c =
          asDnnlConv(g, input, weight, dOutput, offset)) {
    float *dBias = biasGrad ? biasGrad->data - biasGrad->lo[0] : nullptr;
    return dnnlConvBackward(*c, input.data + offset, weight.data, dOutput.data,
                            dInput.data ? dInput.data + offset : nullptr,
                            dWeight.data, dBias);
  }
  int64_t plane = g.outPlane(), patch = g.patchSize();
  int64_t outC = dOutput.extent(1);
  bool pointwise = isPointwise(g);
  std::vector<float> col(pointwise ? 0 : patch * plane);
  std::vector<float> dCol(pointwise || !dInput.data ? 0 : patch * plane);
  for (int64_t n = dOutput.lo[0]; n < dOutput.hi[0]; ++n) {
    const float *dy = dOutput.data + (n - dOutput.lo[0]) * outC * plane;
    forEachGroup(
        g, dOutput, [&](int64_t fFirst, int64_t fLast, int64_t cFirst) {
          const float *dyGroup = dy + (fFirst - dOutput.lo[1]) * plane;
          int64_t fCount = fLast - fFirst;
          if (dWeight.data) { // dW += dY col^T
            const float *patches =
                input.data +
                offset4(input, n, cFirst, g.rows.outLo, g.cols.outLo);
            if (!pointwise) {
              im2col(g, input, n, cFirst, col.data());
              patches = col.data();
            }
            gemm(false, true, fCount, patch, plane, dyGroup, plane, patches,
                 plane, true,
                 dWeight.data + offset4(dWeight, fFirst, g.weightCLo, 0, 0),
                 patch);
          }
          if (dInput.data) { // dCol = W^T dY, scattered back onto the input
            const float *w =
                weight.data + offset4(weight, fFirst, g.weightCLo, 0, 0);
            if (pointwise) {
              gemm(true, false, patch, plane, fCount, w, patch, dyGroup, plane,
                   true,
                   dInput.data +
                       offset4(dInput, n, cFirst, g.rows.outLo, g.cols.outLo),
                   plane);
            } else {
              gemm(true, false, patch, plane, fCount, w, patch, dyGroup, plane,
                   false, dCol.data(), plane);
              col2imAdd(g, dInput, n, cFirst, dCol.data());
            }
          }
        });
    if (biasGrad)
      addChannelSums(dOutput, n, *biasGrad);
  }
  return absl::OkStatus();
}

absl::Status conv2dBackward(const OpDesc &op, const KernelContext &,
                            const std::vector<TensorView> &inputs,
                            const std::vector<TensorView> &outputs,
                            const std::vector<TensorView> &outputGrads,
                            std::vector<TensorView> &inputGrads,
                            std::vector<TensorView> &) {
  ConvGeometry g;
  if (absl::Status status =
          backwardGeometry(op, inputs, outputs, outputGrads, inputGrads, g);
      !status.ok())
    return status;
  return convBackward(g, inputs[0], inputs[1], outputGrads[0], inputGrads[0],
                      inputGrads[1], biasGradOf(g, inputGrads));
}

//===----------------------------------------------------------------------===//
// conv_transpose2d
//===----------------------------------------------------------------------===//

// conv_transpose2d (ConvPoolGeometry.h: the roles): its forward is the
// conv2d's backward-data into the zeroed result, its input grad that conv's
// forward on dy, its weight grad that conv's weight grad with dy as the
// conv's input and x as its result grad.

absl::Status convTransposeForward(const OpDesc &op, const KernelContext &,
                                  const std::vector<TensorView> &inputs,
                                  std::vector<TensorView> &outputs,
                                  std::vector<TensorView> &) {
  TransposedConvGeometry g;
  if (absl::Status status = forwardGeometry(op, inputs, outputs, g);
      !status.ok())
    return status;
  const TensorView &input = inputs[0], &weight = inputs[1];
  TensorView &output = outputs[0];
  std::fill(output.data, output.data + output.numElements(), 0.0f);
  if (absl::Status status =
          convBackward(g, output, weight, input, output, TensorView{}, nullptr);
      !status.ok())
    return status;
  if (const TensorView *bias = transposedBias(inputs, weight)) {
    const int64_t plane = output.extent(2) * output.extent(3);
    float *out = output.data;
    for (int64_t n = output.lo[0]; n < output.hi[0]; ++n)
      for (int64_t f = output.lo[1]; f < output.hi[1]; ++f, out += plane)
        for (int64_t k = 0; k < plane; ++k)
          out[k] += bias->data[f - bias->lo[0]];
  }
  return absl::OkStatus();
}

absl::Status convTransposeBackward(const OpDesc &op, const KernelContext &,
                                   const std::vector<TensorView> &inputs,
                                   const std::vector<TensorView> &outputs,
                                   const std::vector<TensorView> &outputGrads,
                                   std::vector<TensorView> &inputGrads,
                                   std::vector<TensorView> &) {
  TransposedConvGeometry g;
  if (absl::Status status =
          backwardGeometry(op, inputs, outputs, outputGrads, inputGrads, g);
      !status.ok())
    return status;
  const TensorView &input = inputs[0], &weight = inputs[1];
  const TensorView &dOutput = outputGrads[0];
  const TensorView &dInput = inputGrads[0];
  if (dInput.data) { // dx += conv(dy, W)
    std::vector<float> conv(dInput.numElements());
    TensorView result = dInput;
    result.data = conv.data();
    if (absl::Status status = convForward(g, dOutput, weight, result);
        !status.ok())
      return status;
    for (size_t i = 0; i < conv.size(); ++i)
      dInput.data[i] += conv[i];
  }
  if (inputGrads[1].data)
    if (absl::Status status = convBackward(
            g, dOutput, weight, input, TensorView{}, inputGrads[1], nullptr);
        !status.ok())
      return status;
  if (const TensorView *biasGrad = transposedBias(inputGrads, weight))
    for (int64_t n = dOutput.lo[0]; n < dOutput.hi[0]; ++n)
      addChannelSums(dOutput, n, *biasGrad);
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// max_pool2d, avg_pool2d
//===----------------------------------------------------------------------===//

/// Calls fn(inPlane, outPlane) with pointers to the (n, c) planes of the
/// input (or its grad) and of the output (or its grad), for the output box.
template <typename InView, typename OutView, typename Fn>
void forEachPlane(InView &in, OutView &out, Fn &&fn) {
  int64_t inPlane = in.extent(2) * in.extent(3);
  int64_t outPlane = out.extent(2) * out.extent(3);
  for (int64_t n = out.lo[0]; n < out.hi[0]; ++n)
    for (int64_t c = out.lo[1]; c < out.hi[1]; ++c)
      fn(in.data + ((n - in.lo[0]) * in.extent(1) + (c - in.lo[1])) * inPlane,
         out.data +
             ((n - out.lo[0]) * out.extent(1) + (c - out.lo[1])) * outPlane);
}

/// The windows of the output columns of `output`'s box (the same in every
/// row and plane).
std::vector<Window> columnWindows(const PoolGeometry &g,
                                  const TensorView &output) {
  std::vector<Window> windows;
  for (int64_t ow = output.lo[3]; ow < output.hi[3]; ++ow)
    windows.push_back(windowOf(g.cols, ow));
  return windows;
}

/// Offset in an input plane of the view of the first maximum (row-major) of
/// the window rows x cols, or -1 when the window is all padding.
int64_t argMax(const TensorView &input, const float *plane, const Window &rows,
               const Window &cols) {
  if (rows.first >= rows.last || cols.first >= cols.last)
    return -1;
  const int64_t width = input.extent(3);
  const int64_t origin = -input.lo[2] * width - input.lo[3];
  int64_t found = origin + rows.first * width + cols.first;
  float bestValue = plane[found];
  for (int64_t ih = rows.first; ih < rows.last; ++ih) {
    const int64_t row = origin + ih * width;
    // Selects, not branches: on data a branch mispredicts half the time.
    for (int64_t iw = cols.first; iw < cols.last; ++iw) {
      const float value = plane[row + iw];
      const bool better = value > bestValue;
      found = better ? row + iw : found;
      bestValue = better ? value : bestValue;
    }
  }
  return found;
}

absl::Status maxPoolForward(const OpDesc &op, const KernelContext &,
                            const std::vector<TensorView> &inputs,
                            std::vector<TensorView> &outputs,
                            std::vector<TensorView> &) {
  PoolGeometry g;
  if (absl::Status status = forwardGeometry(op, inputs, outputs, g);
      !status.ok())
    return status;
  TensorView &output = outputs[0];
  const TensorView &input = inputs[0];
  int64_t outW = output.extent(3);
  const std::vector<Window> cols = columnWindows(g, output);
  forEachPlane(input, output, [&](const float *in, float *out) {
    for (int64_t oh = output.lo[2]; oh < output.hi[2]; ++oh) {
      Window rows = windowOf(g.rows, oh);
      float *line = out + (oh - output.lo[2]) * outW;
      for (int64_t ow = 0; ow < outW; ++ow) {
        int64_t at = argMax(input, in, rows, cols[ow]);
        line[ow] = at < 0 ? 0.0f : in[at];
      }
    }
  });
  return absl::OkStatus();
}

absl::Status maxPoolBackward(const OpDesc &op, const KernelContext &,
                             const std::vector<TensorView> &inputs,
                             const std::vector<TensorView> &outputs,
                             const std::vector<TensorView> &outputGrads,
                             std::vector<TensorView> &inputGrads,
                             std::vector<TensorView> &) {
  PoolGeometry g;
  if (absl::Status status =
          backwardGeometry(op, inputs, outputs, outputGrads, inputGrads, g);
      !status.ok())
    return status;
  const TensorView &dOutput = outputGrads[0];
  if (!inputGrads[0].data)
    return absl::OkStatus();
  const TensorView &input = inputs[0];
  int64_t outW = dOutput.extent(3);
  const std::vector<Window> cols = columnWindows(g, dOutput);
  forEachPlane(inputGrads[0], dOutput, [&](float *dIn, const float *dOut) {
    // The same plane of the input: grad and input views share their box.
    const float *in = input.data + (dIn - inputGrads[0].data);
    for (int64_t oh = dOutput.lo[2]; oh < dOutput.hi[2]; ++oh) {
      Window rows = windowOf(g.rows, oh);
      const float *line = dOut + (oh - dOutput.lo[2]) * outW;
      for (int64_t ow = 0; ow < outW; ++ow) {
        int64_t at = argMax(input, in, rows, cols[ow]);
        if (at >= 0)
          dIn[at] += line[ow];
      }
    }
  });
  return absl::OkStatus();
}

absl::Status avgPoolForward(const OpDesc &op, const KernelContext &,
                            const std::vector<TensorView> &inputs,
                            std::vector<TensorView> &outputs,
                            std::vector<TensorView> &) {
  PoolGeometry g;
  if (absl::Status status = forwardGeometry(op, inputs, outputs, g);
      !status.ok())
    return status;
  TensorView &output = outputs[0];
  const TensorView &input = inputs[0];
  int64_t inW = input.extent(3), outW = output.extent(3);
  forEachPlane(input, output, [&](const float *in, float *out) {
    for (int64_t oh = output.lo[2]; oh < output.hi[2]; ++oh) {
      Window rows = windowOf(g.rows, oh);
      for (int64_t ow = output.lo[3]; ow < output.hi[3]; ++ow) {
        Window cols = windowOf(g.cols, ow);
        float sum = 0.0f;
        for (int64_t ih = rows.first; ih < rows.last; ++ih) {
          const float *row = in + (ih - input.lo[2]) * inW - input.lo[3];
          for (int64_t iw = cols.first; iw < cols.last; ++iw)
            sum += row[iw];
        }
        int64_t divisor = avgDivisor(g.countIncludePad, rows, cols);
        out[(oh - output.lo[2]) * outW + (ow - output.lo[3])] =
            divisor > 0 ? sum / static_cast<float>(divisor) : 0.0f;
      }
    }
  });
  return absl::OkStatus();
}

absl::Status avgPoolBackward(const OpDesc &op, const KernelContext &,
                             const std::vector<TensorView> &inputs,
                             const std::vector<TensorView> &outputs,
                             const std::vector<TensorView> &outputGrads,
                             std::vector<TensorView> &inputGrads,
                             std::vector<TensorView> &) {
  PoolGeometry g;
  if (absl::Status status =
          backwardGeometry(op, inputs, outputs, outputGrads, inputGrads, g);
      !status.ok())
    return status;
  const TensorView &dOutput = outputGrads[0];
  TensorView &dInput = inputGrads[0];
  if (!dInput.data)
    return absl::OkStatus();
  int64_t inW = dInput.extent(3), outW = dOutput.extent(3);
  forEachPlane(dInput, dOutput, [&](float *dIn, const float *dOut) {
    for (int64_t oh = dOutput.lo[2]; oh < dOutput.hi[2]; ++oh) {
      Window rows = windowOf(g.rows, oh);
      for (int64_t ow = dOutput.lo[3]; ow < dOutput.hi[3]; ++ow) {
        Window cols = windowOf(g.cols, ow);
        int64_t divisor = avgDivisor(g.countIncludePad, rows, cols);
        if (divisor <= 0)
          continue;
        float share = dOut[(oh - dOutput.lo[2]) * outW + (ow - dOutput.lo[3])] /
                      static_cast<float>(divisor);
        for (int64_t ih = rows.first; ih < rows.last; ++ih) {
          float *row = dIn + (ih - dInput.lo[2]) * inW - dInput.lo[3];
          for (int64_t iw = cols.first; iw < cols.last; ++iw)
            row[iw] += share;
        }
      }
    }
  });
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// global_avg_pool
//===----------------------------------------------------------------------===//

absl::Status globalAvgPoolForward(const OpDesc &op, const KernelContext &,
                                  const std::vector<TensorView> &inputs,
                                  std::vector<TensorView> &outputs,
                                  std::vector<TensorView> &) {
  GlobalPoolShape s;
  if (absl::Status status = forwardGeometry(op, inputs, outputs, s);
      !status.ok())
    return status;
  TensorView &output = outputs[0];
  const TensorView &input = inputs[0];
  for (int64_t n = output.lo[0]; n < output.hi[0]; ++n)
    for (int64_t c = output.lo[1]; c < output.hi[1]; ++c) {
      const float *in =
          input.data +
          ((n - input.lo[0]) * input.extent(1) + (c - input.lo[1])) * s.local;
      double sum = 0;
      for (int64_t k = 0; k < s.local; ++k)
        sum += in[k];
      output.data[(n - output.lo[0]) * output.extent(1) + (c - output.lo[1])] =
          static_cast<float>(sum / static_cast<double>(s.count));
    }
  return absl::OkStatus();
}

absl::Status globalAvgPoolBackward(const OpDesc &op, const KernelContext &,
                                   const std::vector<TensorView> &inputs,
                                   const std::vector<TensorView> &outputs,
                                   const std::vector<TensorView> &outputGrads,
                                   std::vector<TensorView> &inputGrads,
                                   std::vector<TensorView> &) {
  GlobalPoolShape s;
  if (absl::Status status =
          backwardGeometry(op, inputs, outputs, outputGrads, inputGrads, s);
      !status.ok())
    return status;
  const TensorView &dOutput = outputGrads[0];
  TensorView &dInput = inputGrads[0];
  if (!dInput.data)
    return absl::OkStatus();
  for (int64_t n = dOutput.lo[0]; n < dOutput.hi[0]; ++n)
    for (int64_t c = dOutput.lo[1]; c < dOutput.hi[1]; ++c) {
      float share = dOutput.data[(n - dOutput.lo[0]) * dOutput.extent(1) +
                                 (c - dOutput.lo[1])] /
                    static_cast<float>(s.count);
      float *dIn = dInput.data + ((n - dInput.lo[0]) * dInput.extent(1) +
                                  (c - dInput.lo[1])) *
                                     s.local;
      for (int64_t k = 0; k < s.local; ++k)
        dIn[k] += share;
    }
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// resize
//===----------------------------------------------------------------------===//

/// The taps of every result position of the box along dim 2 (rows) or 3.
std::vector<ResizeTaps> axisTaps(const ResizeGeometry &g, const ResizeAxis &a,
                                 const TensorView &output, int64_t dim) {
  std::vector<ResizeTaps> taps;
  for (int64_t o = output.lo[dim]; o < output.hi[dim]; ++o)
    taps.push_back(resizeTaps(g, a, o));
  return taps;
}

absl::Status resizeForward(const OpDesc &op, const KernelContext &,
                           const std::vector<TensorView> &inputs,
                           std::vector<TensorView> &outputs,
                           std::vector<TensorView> &) {
  ResizeGeometry g;
  if (absl::Status status = forwardGeometry(op, inputs, outputs, g);
      !status.ok())
    return status;
  TensorView &output = outputs[0];
  const TensorView &input = inputs[0];
  const std::vector<ResizeTaps> rows = axisTaps(g, g.rows, output, 2);
  const std::vector<ResizeTaps> cols = axisTaps(g, g.cols, output, 3);
  const int64_t inW = input.extent(3), outW = output.extent(3);
  forEachPlane(input, output, [&](const float *in, float *out) {
    for (size_t r = 0; r < rows.size(); ++r)
      for (size_t c = 0; c < cols.size(); ++c)
        out[r * outW + c] = resizeValue(g, rows[r], cols[c], in, inW);
  });
  return absl::OkStatus();
}

absl::Status resizeBackward(const OpDesc &op, const KernelContext &,
                            const std::vector<TensorView> &inputs,
                            const std::vector<TensorView> &outputs,
                            const std::vector<TensorView> &outputGrads,
                            std::vector<TensorView> &inputGrads,
                            std::vector<TensorView> &) {
  ResizeGeometry g;
  if (absl::Status status =
          backwardGeometry(op, inputs, outputs, outputGrads, inputGrads, g);
      !status.ok())
    return status;
  const TensorView &dOutput = outputGrads[0];
  TensorView &dInput = inputGrads[0];
  if (!dInput.data)
    return absl::OkStatus();
  const std::vector<ResizeTaps> rows = axisTaps(g, g.rows, dOutput, 2);
  const std::vector<ResizeTaps> cols = axisTaps(g, g.cols, dOutput, 3);
  const int64_t inW = dInput.extent(3), outW = dOutput.extent(3);
  auto add = [](float *target, float value) { *target += value; };
  forEachPlane(dInput, dOutput, [&](float *dIn, const float *dOut) {
    for (size_t r = 0; r < rows.size(); ++r)
      for (size_t c = 0; c < cols.size(); ++c)
        resizeScatter(rows[r], cols[c], dOut[r * outW + c], dIn, inW, add);
  });
  return absl::OkStatus();
}

} // namespace

void registerConvPoolKernels(KernelTable &table) {
  table["ppc.conv2d"] = {conv2dForward, conv2dBackward, nullptr, 1};
  table["ppc.conv_transpose2d"] = {convTransposeForward, convTransposeBackward,
                                   nullptr, 1};
  table["ppc.max_pool2d"] = {maxPoolForward, maxPoolBackward, nullptr, 1};
  table["ppc.avg_pool2d"] = {avgPoolForward, avgPoolBackward, nullptr, 1};
  table["ppc.global_avg_pool"] = {globalAvgPoolForward, globalAvgPoolBackward,
                                  nullptr, 1};
  table["ppc.resize"] = {resizeForward, resizeBackward, nullptr, 1};
}

} // namespace ppc::runtime::cpu
