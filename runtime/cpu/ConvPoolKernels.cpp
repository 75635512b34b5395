//===- ConvPoolKernels.cpp - conv2d and pooling on boxes ------------------===//
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
// channel 0 adds the bias).
//
//===----------------------------------------------------------------------===//

#include "DnnlConv.h"
#include "KernelHelpers.h"
#include "KernelRegistry.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>

namespace ppc::runtime::cpu {

namespace {

/// Smallest integer >= a / b for b > 0.
int64_t ceilDiv(int64_t a, int64_t b) {
  return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

/// Smallest integer <= a / b for b > 0.
int64_t floorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/// Geometry of a 2-D window op along one spatial dim: output position o reads
/// input positions o * stride - padLo + t * dilation for t in [0, kernel).
struct Axis {
  int64_t size; ///< input size (global)
  int64_t stride, padLo, padHi, kernel, dilation;
  int64_t outLo, outHi;   ///< output range of the partition
  int64_t viewLo, viewHi; ///< input range the view holds

  int64_t start(int64_t o) const { return o * stride - padLo; }
  /// Output positions in [outLo, outHi) whose tap t lands inside the tensor.
  std::pair<int64_t, int64_t> validOutputs(int64_t t) const {
    int64_t shift = t * dilation - padLo;
    int64_t first = std::max(outLo, ceilDiv(-shift, stride));
    int64_t last = std::min(outHi, floorDiv(size - 1 - shift, stride) + 1);
    return {first, std::max(first, last)};
  }
  /// True if the view holds every in-tensor position the output range reads.
  bool viewCovers() const {
    if (outHi <= outLo)
      return true;
    int64_t first = std::max<int64_t>(0, start(outLo));
    int64_t last =
        std::min(size, start(outHi - 1) + (kernel - 1) * dilation + 1);
    return first >= last || (viewLo <= first && last <= viewHi);
  }
};

Axis makeAxis(const TensorView &input, const TensorView &output, int64_t dim,
              int64_t stride, int64_t padLo, int64_t padHi, int64_t kernel,
              int64_t dilation) {
  return {input.shape[dim], stride,       padLo,          padHi,
          kernel,           dilation,     output.lo[dim], output.hi[dim],
          input.lo[dim],    input.hi[dim]};
}

//===----------------------------------------------------------------------===//
// conv2d
//===----------------------------------------------------------------------===//

/// Everything one conv2d partition needs, checked against the views.
struct ConvGeometry {
  Axis rows, cols;
  int64_t groups;
  int64_t outPerGroup;          ///< F / groups (global)
  int64_t inPerGroup;           ///< weight dim 1 (global), C / groups
  int64_t weightCLo, weightCHi; ///< weight's dim-1 box: channels of a group
  int64_t kh, kw;
  bool addsBias;
  const TensorView *bias;

  int64_t outPlane() const {
    return (rows.outHi - rows.outLo) * (cols.outHi - cols.outLo);
  }
  /// Rows of the im2col matrix: input channels x taps of one group.
  int64_t patchSize() const { return (weightCHi - weightCLo) * kh * kw; }
};

KernelStatus convGeometry(const OpDesc &op,
                          const std::vector<TensorView> &inputs,
                          const TensorView &output, ConvGeometry &g) {
  if (inputs.size() < 2 || inputs.size() > 3)
    return op.kind + ": expects input, weight and an optional bias";
  const TensorView &input = inputs[0], &weight = inputs[1];
  if (input.rank() != 4 || weight.rank() != 4 || output.rank() != 4)
    return op.kind + ": input, weight and result must have rank 4";
  std::vector<int64_t> strides = op.getInts("strides", {1, 1});
  std::vector<int64_t> pads = op.getInts("pads", {0, 0, 0, 0});
  std::vector<int64_t> dilations = op.getInts("dilations", {1, 1});
  g.groups = op.getInt("groups", 1);
  if (strides.size() != 2 || pads.size() != 4 || dilations.size() != 2 ||
      g.groups < 1)
    return op.kind + ": bad strides, pads, dilations or groups";
  g.kh = weight.shape[2];
  g.kw = weight.shape[3];
  g.rows = makeAxis(input, output, 2, strides[0], pads[0], pads[2], g.kh,
                    dilations[0]);
  g.cols = makeAxis(input, output, 3, strides[1], pads[1], pads[3], g.kw,
                    dilations[1]);
  g.outPerGroup = output.shape[1] / g.groups;
  g.inPerGroup = weight.shape[1];
  g.weightCLo = weight.lo[1];
  g.weightCHi = weight.hi[1];
  if (output.shape[1] % g.groups != 0 ||
      input.shape[1] != g.inPerGroup * g.groups)
    return op.kind + ": channels do not divide into the groups";
  if (weight.lo[2] != 0 || weight.hi[2] != g.kh || weight.lo[3] != 0 ||
      weight.hi[3] != g.kw)
    return op.kind + ": weight box must hold the whole kernel window";
  if (weight.lo[0] > output.lo[1] || weight.hi[0] < output.hi[1])
    return op.kind + ": weight box does not hold the output channels";
  if (input.lo[0] > output.lo[0] || input.hi[0] < output.hi[0])
    return op.kind + ": input box does not hold the output samples";
  if (g.groups == 1 &&
      (input.lo[1] != g.weightCLo || input.hi[1] != g.weightCHi))
    return op.kind + ": weight box does not match the input channel range";
  if (g.groups > 1) {
    if (g.weightCLo != 0 || g.weightCHi != g.inPerGroup)
      return op.kind + ": grouped weight box must hold all channels of a group";
    int64_t firstGroup = output.lo[1] / g.outPerGroup;
    int64_t lastGroup = (output.hi[1] - 1) / g.outPerGroup;
    if (output.hi[1] > output.lo[1] &&
        (input.lo[1] > firstGroup * g.inPerGroup ||
         input.hi[1] < (lastGroup + 1) * g.inPerGroup))
      return op.kind + ": input box does not hold the groups' channels";
  }
  if (!g.rows.viewCovers() || !g.cols.viewCovers())
    return op.kind + ": input box does not hold the window (halo) of the "
                     "output rows/cols";
  g.bias = inputs.size() == 3 && inputs[2].data ? &inputs[2] : nullptr;
  if (g.bias && (g.bias->lo[0] > output.lo[1] || g.bias->hi[0] < output.hi[1]))
    return op.kind + ": bias box does not hold the output channels";
  g.addsBias = g.bias && g.weightCLo == 0;
  return "";
}

/// Offset in `input` of (n, c, row, col), global indices inside its box.
int64_t offset4(const TensorView &view, int64_t n, int64_t c, int64_t row,
                int64_t col) {
  int64_t plane = (n - view.lo[0]) * view.extent(1) + (c - view.lo[1]);
  int64_t line = plane * view.extent(2) + (row - view.lo[2]);
  return line * view.extent(3) + (col - view.lo[3]);
}

/// True when the im2col matrix of a channel block is the input itself: a
/// 1x1 kernel, stride 1, no padding, the input box equal to the output's
/// rows/cols.
bool isPointwise(const ConvGeometry &g) {
  return g.kh == 1 && g.kw == 1 && g.rows.stride == 1 && g.cols.stride == 1 &&
         g.rows.padLo == 0 && g.cols.padLo == 0 &&
         g.rows.viewLo == g.rows.outLo && g.rows.viewHi == g.rows.outHi &&
         g.cols.viewLo == g.cols.outLo && g.cols.viewHi == g.cols.outHi;
}

/// Calls fn(patchRow, rowOffset, oh, owFirst, owLast, iwFirst) for every
/// (channel, tap, output row) whose input row ih lies inside the tensor:
/// output cols [owFirst, owLast) read input cols iwFirst + (ow - owFirst) *
/// stride, and input col iw of row ih is at view offset rowOffset + iw.
template <typename Fn>
void forEachPatchRow(const ConvGeometry &g, const TensorView &input, int64_t n,
                     int64_t cFirst, Fn &&fn) {
  int64_t channels = g.weightCHi - g.weightCLo;
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t i = 0; i < g.kh; ++i) {
      auto [ohFirst, ohLast] = g.rows.validOutputs(i);
      for (int64_t j = 0; j < g.kw; ++j) {
        int64_t patchRow = (c * g.kh + i) * g.kw + j;
        auto [owFirst, owLast] = g.cols.validOutputs(j);
        if (owFirst >= owLast)
          continue;
        int64_t iwFirst = g.cols.start(owFirst) + j * g.cols.dilation;
        for (int64_t oh = ohFirst; oh < ohLast; ++oh) {
          int64_t ih = g.rows.start(oh) + i * g.rows.dilation;
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
  int64_t outW = g.cols.outHi - g.cols.outLo;
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
  int64_t outW = g.cols.outHi - g.cols.outLo;
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

/// Calls fn(fFirst, fLast, cFirst) for each group the output channel range
/// touches: output channels [fFirst, fLast) read input channels from cFirst.
template <typename Fn>
void forEachGroup(const ConvGeometry &g, const TensorView &output, Fn &&fn) {
  for (int64_t f = output.lo[1]; f < output.hi[1];) {
    int64_t group = f / g.outPerGroup;
    int64_t fLast = std::min(output.hi[1], (group + 1) * g.outPerGroup);
    fn(f, fLast, group * g.inPerGroup + g.weightCLo);
    f = fLast;
  }
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
    // convGeometry checked that the rest lies outside the tensor.
    const int64_t start = a.start(a.outLo);
    const int64_t end = a.start(a.outHi - 1) + (a.kernel - 1) * a.dilation + 1;
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

KernelStatus conv2dForward(const OpDesc &op, const KernelContext &,
                           const std::vector<TensorView> &inputs,
                           std::vector<TensorView> &outputs,
                           std::vector<TensorView> &) {
  if (outputs.size() != 1)
    return op.kind + ": expects 1 result";
  TensorView &output = outputs[0];
  ConvGeometry g;
  if (KernelStatus status = convGeometry(op, inputs, output, g);
      !status.empty())
    return status;
  const TensorView &input = inputs[0], &weight = inputs[1];
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
  return "";
}

KernelStatus conv2dBackward(const OpDesc &op, const KernelContext &,
                            const std::vector<TensorView> &inputs,
                            const std::vector<TensorView> &outputs,
                            const std::vector<TensorView> &outputGrads,
                            std::vector<TensorView> &inputGrads,
                            std::vector<TensorView> &) {
  if (KernelStatus status =
          checkGradBoxes(op, inputs, outputs, outputGrads, inputGrads);
      !status.empty())
    return status;
  const TensorView &dOutput = outputGrads[0];
  ConvGeometry g;
  if (KernelStatus status = convGeometry(op, inputs, dOutput, g);
      !status.empty())
    return status;
  const TensorView &input = inputs[0], &weight = inputs[1];
  const TensorView &dInput = inputGrads[0], &dWeight = inputGrads[1];
  int64_t offset = 0;
  if (std::optional<DnnlConv> c =
          asDnnlConv(g, input, weight, dOutput, offset)) {
    float *dBias = c->bias && inputGrads.size() == 3 && inputGrads[2].data
                       ? inputGrads[2].data - inputGrads[2].lo[0]
                       : nullptr;
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
    if (g.addsBias && inputGrads.size() == 3 && inputGrads[2].data)
      for (int64_t f = dOutput.lo[1]; f < dOutput.hi[1]; ++f) {
        const float *row = dy + (f - dOutput.lo[1]) * plane;
        double sum = 0;
        for (int64_t k = 0; k < plane; ++k)
          sum += row[k];
        inputGrads[2].data[f - inputGrads[2].lo[0]] += static_cast<float>(sum);
      }
  }
  return "";
}

//===----------------------------------------------------------------------===//
// max_pool2d, avg_pool2d
//===----------------------------------------------------------------------===//

struct PoolGeometry {
  Axis rows, cols;
  bool countIncludePad;
};

KernelStatus poolGeometry(const OpDesc &op,
                          const std::vector<TensorView> &inputs,
                          const TensorView &output, PoolGeometry &g) {
  if (inputs.size() != 1)
    return op.kind + ": expects 1 operand";
  const TensorView &input = inputs[0];
  if (input.rank() != 4 || output.rank() != 4)
    return op.kind + ": input and result must have rank 4";
  std::vector<int64_t> kernel = op.getInts("kernel", {});
  std::vector<int64_t> strides = op.getInts("strides", {1, 1});
  std::vector<int64_t> pads = op.getInts("pads", {0, 0, 0, 0});
  if (kernel.size() != 2 || strides.size() != 2 || pads.size() != 4)
    return op.kind + ": bad kernel, strides or pads";
  g.rows =
      makeAxis(input, output, 2, strides[0], pads[0], pads[2], kernel[0], 1);
  g.cols =
      makeAxis(input, output, 3, strides[1], pads[1], pads[3], kernel[1], 1);
  g.countIncludePad = op.getInt("count_include_pad", 0) != 0;
  for (int64_t d = 0; d < 2; ++d)
    if (input.lo[d] > output.lo[d] || input.hi[d] < output.hi[d])
      return op.kind + ": input box does not hold the output samples/channels";
  if (!g.rows.viewCovers() || !g.cols.viewCovers())
    return op.kind + ": input box does not hold the window (halo) of the "
                     "output rows/cols";
  return "";
}

/// The in-tensor part [first, last) of output position o's window, and its
/// extent within the padded tensor (what count_include_pad divides by; as in
/// PyTorch, a ceil_mode window is cut at the end of the padding).
struct Window {
  int64_t first, last, paddedExtent;
};

Window windowOf(const Axis &axis, int64_t o) {
  int64_t start = axis.start(o);
  int64_t end = start + axis.kernel;
  return {std::max<int64_t>(start, 0), std::min(end, axis.size),
          std::min(end, axis.size + axis.padHi) - start};
}

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

KernelStatus maxPoolForward(const OpDesc &op, const KernelContext &,
                            const std::vector<TensorView> &inputs,
                            std::vector<TensorView> &outputs,
                            std::vector<TensorView> &) {
  if (outputs.size() != 1)
    return op.kind + ": expects 1 result";
  TensorView &output = outputs[0];
  PoolGeometry g;
  if (KernelStatus status = poolGeometry(op, inputs, output, g);
      !status.empty())
    return status;
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
  return "";
}

KernelStatus maxPoolBackward(const OpDesc &op, const KernelContext &,
                             const std::vector<TensorView> &inputs,
                             const std::vector<TensorView> &outputs,
                             const std::vector<TensorView> &outputGrads,
                             std::vector<TensorView> &inputGrads,
                             std::vector<TensorView> &) {
  if (KernelStatus status =
          checkGradBoxes(op, inputs, outputs, outputGrads, inputGrads);
      !status.empty())
    return status;
  const TensorView &dOutput = outputGrads[0];
  PoolGeometry g;
  if (KernelStatus status = poolGeometry(op, inputs, dOutput, g);
      !status.empty())
    return status;
  if (!inputGrads[0].data)
    return "";
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
  return "";
}

/// What avg_pool2d divides output (oh, ow)'s window sum by.
int64_t avgDivisor(const PoolGeometry &g, const Window &rows,
                   const Window &cols) {
  if (g.countIncludePad)
    return rows.paddedExtent * cols.paddedExtent;
  return std::max<int64_t>(0, rows.last - rows.first) *
         std::max<int64_t>(0, cols.last - cols.first);
}

KernelStatus avgPoolForward(const OpDesc &op, const KernelContext &,
                            const std::vector<TensorView> &inputs,
                            std::vector<TensorView> &outputs,
                            std::vector<TensorView> &) {
  if (outputs.size() != 1)
    return op.kind + ": expects 1 result";
  TensorView &output = outputs[0];
  PoolGeometry g;
  if (KernelStatus status = poolGeometry(op, inputs, output, g);
      !status.empty())
    return status;
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
        int64_t divisor = avgDivisor(g, rows, cols);
        out[(oh - output.lo[2]) * outW + (ow - output.lo[3])] =
            divisor > 0 ? sum / static_cast<float>(divisor) : 0.0f;
      }
    }
  });
  return "";
}

KernelStatus avgPoolBackward(const OpDesc &op, const KernelContext &,
                             const std::vector<TensorView> &inputs,
                             const std::vector<TensorView> &outputs,
                             const std::vector<TensorView> &outputGrads,
                             std::vector<TensorView> &inputGrads,
                             std::vector<TensorView> &) {
  if (KernelStatus status =
          checkGradBoxes(op, inputs, outputs, outputGrads, inputGrads);
      !status.empty())
    return status;
  const TensorView &dOutput = outputGrads[0];
  PoolGeometry g;
  if (KernelStatus status = poolGeometry(op, inputs, dOutput, g);
      !status.empty())
    return status;
  TensorView &dInput = inputGrads[0];
  if (!dInput.data)
    return "";
  int64_t inW = dInput.extent(3), outW = dOutput.extent(3);
  forEachPlane(dInput, dOutput, [&](float *dIn, const float *dOut) {
    for (int64_t oh = dOutput.lo[2]; oh < dOutput.hi[2]; ++oh) {
      Window rows = windowOf(g.rows, oh);
      for (int64_t ow = dOutput.lo[3]; ow < dOutput.hi[3]; ++ow) {
        Window cols = windowOf(g.cols, ow);
        int64_t divisor = avgDivisor(g, rows, cols);
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
  return "";
}

//===----------------------------------------------------------------------===//
// global_avg_pool
//===----------------------------------------------------------------------===//

/// Checks the views; `count` is the GLOBAL number of spatial positions (a
/// split spatial dim makes partial sums of the mean), `local` the held ones.
KernelStatus globalPoolShape(const OpDesc &op,
                             const std::vector<TensorView> &inputs,
                             const TensorView &output, int64_t &count,
                             int64_t &local) {
  if (inputs.size() != 1)
    return op.kind + ": expects 1 operand";
  const TensorView &input = inputs[0];
  if (input.rank() < 2 || output.rank() != input.rank())
    return op.kind + ": result must have the input's rank";
  for (int64_t d = 0; d < 2; ++d)
    if (input.lo[d] > output.lo[d] || input.hi[d] < output.hi[d])
      return op.kind + ": input box does not hold the output samples/channels";
  count = 1;
  local = 1;
  for (int64_t d = 2; d < input.rank(); ++d) {
    count *= input.shape[d];
    local *= input.extent(d);
  }
  return "";
}

KernelStatus globalAvgPoolForward(const OpDesc &op, const KernelContext &,
                                  const std::vector<TensorView> &inputs,
                                  std::vector<TensorView> &outputs,
                                  std::vector<TensorView> &) {
  if (outputs.size() != 1)
    return op.kind + ": expects 1 result";
  TensorView &output = outputs[0];
  int64_t count, local;
  if (KernelStatus status = globalPoolShape(op, inputs, output, count, local);
      !status.empty())
    return status;
  const TensorView &input = inputs[0];
  for (int64_t n = output.lo[0]; n < output.hi[0]; ++n)
    for (int64_t c = output.lo[1]; c < output.hi[1]; ++c) {
      const float *in =
          input.data +
          ((n - input.lo[0]) * input.extent(1) + (c - input.lo[1])) * local;
      double sum = 0;
      for (int64_t k = 0; k < local; ++k)
        sum += in[k];
      output.data[(n - output.lo[0]) * output.extent(1) + (c - output.lo[1])] =
          static_cast<float>(sum / static_cast<double>(count));
    }
  return "";
}

KernelStatus globalAvgPoolBackward(const OpDesc &op, const KernelContext &,
                                   const std::vector<TensorView> &inputs,
                                   const std::vector<TensorView> &outputs,
                                   const std::vector<TensorView> &outputGrads,
                                   std::vector<TensorView> &inputGrads,
                                   std::vector<TensorView> &) {
  if (KernelStatus status =
          checkGradBoxes(op, inputs, outputs, outputGrads, inputGrads);
      !status.empty())
    return status;
  const TensorView &dOutput = outputGrads[0];
  int64_t count, local;
  if (KernelStatus status = globalPoolShape(op, inputs, dOutput, count, local);
      !status.empty())
    return status;
  TensorView &dInput = inputGrads[0];
  if (!dInput.data)
    return "";
  for (int64_t n = dOutput.lo[0]; n < dOutput.hi[0]; ++n)
    for (int64_t c = dOutput.lo[1]; c < dOutput.hi[1]; ++c) {
      float share = dOutput.data[(n - dOutput.lo[0]) * dOutput.extent(1) +
                                 (c - dOutput.lo[1])] /
                    static_cast<float>(count);
      float *dIn =
          dInput.data +
          ((n - dInput.lo[0]) * dInput.extent(1) + (c - dInput.lo[1])) * local;
      for (int64_t k = 0; k < local; ++k)
        dIn[k] += share;
    }
  return "";
}

} // namespace

void registerConvPoolKernels(KernelTable &table) {
  table["ppc.conv2d"] = {conv2dForward, conv2dBackward, nullptr, 1};
  table["ppc.max_pool2d"] = {maxPoolForward, maxPoolBackward, nullptr, 1};
  table["ppc.avg_pool2d"] = {avgPoolForward, avgPoolBackward, nullptr, 1};
  table["ppc.global_avg_pool"] = {globalAvgPoolForward, globalAvgPoolBackward,
                                  nullptr, 1};
}

} // namespace ppc::runtime::cpu
