//===- ConvPoolGeometry.h - a conv2d or pooling partition -------*- C++ -*-===//
//
// Private to the backends (runtime/cpu, runtime/cuda), shared by their
// conv2d, conv_transpose2d, max/avg pool and global avg pool kernels: the
// geometry of one partition (NCHW; the output box gives the batch, channel, row
// and column ranges, the input view holds the windows of those rows/cols
// clipped to the tensor), read from the op's attributes and checked against the
// views with the same errors on every backend, and the per-position window
// arithmetic (PPC_HD) both backends' loops use. A geometry is checked
// against the result box in the forward and the result grad box in the
// backward (forwardGeometry, backwardGeometry); `View` is a TensorView or a
// backend's view derived from one.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_COMMON_CONVPOOLGEOMETRY_H
#define PPC_RUNTIME_COMMON_CONVPOOLGEOMETRY_H

#include "KernelChecks.h"

#include "ppc/Runtime/HostDevice.h"
#include "ppc/Runtime/Kernels.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace ppc::runtime {

/// Smallest integer >= a / b for b > 0.
PPC_HD inline int64_t ceilDiv(int64_t a, int64_t b) {
  return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

/// Smallest integer <= a / b for b > 0.
PPC_HD inline int64_t floorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/// Geometry of a 2-D window op along one spatial dim: output position o reads
/// input positions o * stride - padLo + t * dilation for t in [0, kernel).
struct Axis {
  int64_t size; ///< input size (global)
  int64_t stride, padLo, padHi, kernel, dilation;
  int64_t outLo, outHi;   ///< output range of the partition
  int64_t viewLo, viewHi; ///< input range the view holds

  PPC_HD int64_t start(int64_t o) const { return o * stride - padLo; }
  /// The input position tap t of output position o reads.
  PPC_HD int64_t tap(int64_t o, int64_t t) const {
    return start(o) + t * dilation;
  }
  /// True if input position i lies inside the tensor (not padding).
  PPC_HD bool inside(int64_t i) const { return i >= 0 && i < size; }
  /// The output position `o` of the partition whose tap t reads input
  /// position i; false if there is none.
  PPC_HD bool tapOutput(int64_t i, int64_t t, int64_t &o) const {
    const int64_t shifted = i + padLo - t * dilation;
    if (shifted < 0 || shifted % stride != 0)
      return false;
    o = shifted / stride;
    return o >= outLo && o < outHi;
  }
  /// Output positions [first, last) of the partition whose window (with
  /// dilation 1) covers input position i.
  PPC_HD void covering(int64_t i, int64_t &first, int64_t &last) const {
    first = ceilDiv(i + padLo - kernel + 1, stride);
    first = first > outLo ? first : outLo;
    last = floorDiv(i + padLo, stride) + 1;
    last = last < outHi ? last : outHi;
  }
  /// Output positions in [outLo, outHi) whose tap t lands inside the tensor.
  std::pair<int64_t, int64_t> validOutputs(int64_t t) const {
    int64_t shift = t * dilation - padLo;
    int64_t first = std::max(outLo, ceilDiv(-shift, stride));
    int64_t last = std::min(outHi, floorDiv(size - 1 - shift, stride) + 1);
    return {first, std::max(first, last)};
  }
  /// One past the last input position (padding included) the output range
  /// reads; the first is start(outLo).
  int64_t windowEnd() const { return tap(outHi - 1, kernel - 1) + 1; }
  /// True if the view holds every in-tensor position the output range reads.
  bool viewCovers() const {
    if (outHi <= outLo)
      return true;
    int64_t first = std::max<int64_t>(0, start(outLo));
    int64_t last = std::min(size, windowEnd());
    return first >= last || (viewLo <= first && last <= viewHi);
  }
};

inline Axis makeAxis(const TensorView &input, const TensorView &output,
                     int64_t dim, int64_t stride, int64_t padLo, int64_t padHi,
                     int64_t kernel, int64_t dilation) {
  return {input.shape[dim], stride,       padLo,          padHi,
          kernel,           dilation,     output.lo[dim], output.hi[dim],
          input.lo[dim],    input.hi[dim]};
}

/// Offset in `view` of (n, c, row, col), global indices inside its box.
inline int64_t offset4(const TensorView &view, int64_t n, int64_t c,
                       int64_t row, int64_t col) {
  int64_t plane = (n - view.lo[0]) * view.extent(1) + (c - view.lo[1]);
  int64_t line = plane * view.extent(2) + (row - view.lo[2]);
  return line * view.extent(3) + (col - view.lo[3]);
}

//===----------------------------------------------------------------------===//
// conv2d
//===----------------------------------------------------------------------===//

/// Everything one conv2d partition needs, checked against the views. With
/// groups == 1 the input channels may be split (a reduction: the weight's
/// dim-1 box equals the input's channel box, and only the partition
/// starting at channel 0 adds the bias and takes its gradient).
struct ConvGeometry {
  Axis rows, cols;
  int64_t groups;
  int64_t outPerGroup;          ///< F / groups (global)
  int64_t inPerGroup;           ///< weight dim 1 (global), C / groups
  int64_t weightCLo, weightCHi; ///< weight's dim-1 box: channels of a group
  int64_t kh, kw;
  bool addsBias;
  const TensorView *bias;

  int64_t outW() const { return cols.outHi - cols.outLo; }
  int64_t outPlane() const { return (rows.outHi - rows.outLo) * outW(); }
  int64_t channels() const { return weightCHi - weightCLo; }
  /// Rows of the im2col matrix: input channels x taps of one group.
  int64_t patchSize() const { return channels() * kh * kw; }
};

template <typename View>
absl::Status checkGeometry(const OpDesc &op, const std::vector<View> &inputs,
                           const TensorView &output, ConvGeometry &g) {
  if (inputs.size() < 2 || inputs.size() > 3)
    return absl::InvalidArgumentError(
        op.kind + ": expects input, weight and an optional bias");
  const TensorView &input = inputs[0], &weight = inputs[1];
  if (input.rank() != 4 || weight.rank() != 4 || output.rank() != 4)
    return absl::InvalidArgumentError(
        op.kind + ": input, weight and result must have rank 4");
  std::vector<int64_t> strides = op.getInts("strides", {1, 1});
  std::vector<int64_t> pads = op.getInts("pads", {0, 0, 0, 0});
  std::vector<int64_t> dilations = op.getInts("dilations", {1, 1});
  g.groups = op.getInt("groups", 1);
  if (strides.size() != 2 || pads.size() != 4 || dilations.size() != 2 ||
      g.groups < 1)
    return absl::InvalidArgumentError(
        op.kind + ": bad strides, pads, dilations or groups");
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
    return absl::InvalidArgumentError(
        op.kind + ": channels do not divide into the groups");
  if (weight.lo[2] != 0 || weight.hi[2] != g.kh || weight.lo[3] != 0 ||
      weight.hi[3] != g.kw)
    return absl::InvalidArgumentError(
        op.kind + ": weight box must hold the whole kernel window");
  if (weight.lo[0] > output.lo[1] || weight.hi[0] < output.hi[1])
    return absl::InvalidArgumentError(
        op.kind + ": weight box does not hold the output channels");
  if (input.lo[0] > output.lo[0] || input.hi[0] < output.hi[0])
    return absl::InvalidArgumentError(
        op.kind + ": input box does not hold the output samples");
  if (g.groups == 1 &&
      (input.lo[1] != g.weightCLo || input.hi[1] != g.weightCHi))
    return absl::InvalidArgumentError(
        op.kind + ": weight box does not match the input channel range");
  if (g.groups > 1) {
    if (g.weightCLo != 0 || g.weightCHi != g.inPerGroup)
      return absl::InvalidArgumentError(
          op.kind + ": grouped weight box must hold all channels of a group");
    int64_t firstGroup = output.lo[1] / g.outPerGroup;
    int64_t lastGroup = (output.hi[1] - 1) / g.outPerGroup;
    if (output.hi[1] > output.lo[1] &&
        (input.lo[1] > firstGroup * g.inPerGroup ||
         input.hi[1] < (lastGroup + 1) * g.inPerGroup))
      return absl::InvalidArgumentError(
          op.kind + ": input box does not hold the groups' channels");
  }
  if (!g.rows.viewCovers() || !g.cols.viewCovers())
    return absl::InvalidArgumentError(
        op.kind + ": input box does not hold the window (halo) of the "
                  "output rows/cols");
  g.bias = inputs.size() == 3 && inputs[2].present() ? &inputs[2] : nullptr;
  if (g.bias && (g.bias->lo[0] > output.lo[1] || g.bias->hi[0] < output.hi[1]))
    return absl::InvalidArgumentError(
        op.kind + ": bias box does not hold the output channels");
  g.addsBias = g.bias && g.weightCLo == 0;
  return absl::OkStatus();
}

/// The bias grad a conv2d backward adds into: null unless the partition
/// adds the bias and the grad is wanted.
template <typename View>
const View *biasGradOf(const ConvGeometry &g,
                       const std::vector<View> &inputGrads) {
  return g.addsBias && inputGrads.size() == 3 && inputGrads[2].present()
             ? &inputGrads[2]
             : nullptr;
}

/// True when the im2col matrix of a channel block is the input itself: a
/// 1x1 kernel, stride 1, no padding, the input box equal to the output's
/// rows/cols.
inline bool isPointwise(const ConvGeometry &g) {
  return g.kh == 1 && g.kw == 1 && g.rows.stride == 1 && g.cols.stride == 1 &&
         g.rows.padLo == 0 && g.cols.padLo == 0 &&
         g.rows.viewLo == g.rows.outLo && g.rows.viewHi == g.rows.outHi &&
         g.cols.viewLo == g.cols.outLo && g.cols.viewHi == g.cols.outHi;
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

//===----------------------------------------------------------------------===//
// conv_transpose2d
//===----------------------------------------------------------------------===//

// conv_transpose2d(x, W) is the input gradient of the conv2d that reads the
// result y through W into x; the backends run it on their conv2d paths with
// the roles swapped. A partition's geometry is that conv's: y (dy in the
// backward) is its input, x its output, so the errors name the conv's
// roles. The bias (indexed by y's channels) and its gradient belong to the
// partition holding input channel 0, the reduction's first part.

/// A conv_transpose2d partition's geometry: its conv2d's.
struct TransposedConvGeometry : ConvGeometry {};

/// Checked with the roles swapped; `inputs` are x, W and the optional bias,
/// `output` the box of y (or dy).
template <typename View>
absl::Status checkGeometry(const OpDesc &op, const std::vector<View> &inputs,
                           const TensorView &output,
                           TransposedConvGeometry &g) {
  if (inputs.size() < 2 || inputs.size() > 3)
    return absl::InvalidArgumentError(
        op.kind + ": expects input, weight and an optional bias");
  const TensorView &input = inputs[0], &weight = inputs[1];
  if (input.rank() != 4 || weight.rank() != 4 || output.rank() != 4)
    return absl::InvalidArgumentError(
        op.kind + ": input, weight and result must have rank 4");
  return checkGeometry(op, std::vector<TensorView>{output, weight}, input,
                       static_cast<ConvGeometry &>(g));
}

/// The bias (or its grad) in `views`, when the partition adds it: when its
/// weight box holds input channel 0.
template <typename View>
const View *transposedBias(const std::vector<View> &views, const View &weight) {
  return views.size() == 3 && views[2].present() && weight.lo[0] == 0
             ? &views[2]
             : nullptr;
}

//===----------------------------------------------------------------------===//
// max_pool2d, avg_pool2d
//===----------------------------------------------------------------------===//

struct PoolGeometry {
  Axis rows, cols;
  bool countIncludePad;
};

template <typename View>
absl::Status checkGeometry(const OpDesc &op, const std::vector<View> &inputs,
                           const TensorView &output, PoolGeometry &g) {
  if (inputs.size() != 1)
    return absl::InvalidArgumentError(op.kind + ": expects 1 operand");
  const TensorView &input = inputs[0];
  if (input.rank() != 4 || output.rank() != 4)
    return absl::InvalidArgumentError(op.kind +
                                      ": input and result must have rank 4");
  std::vector<int64_t> kernel = op.getInts("kernel", {});
  std::vector<int64_t> strides = op.getInts("strides", {1, 1});
  std::vector<int64_t> pads = op.getInts("pads", {0, 0, 0, 0});
  if (kernel.size() != 2 || strides.size() != 2 || pads.size() != 4)
    return absl::InvalidArgumentError(op.kind +
                                      ": bad kernel, strides or pads");
  g.rows =
      makeAxis(input, output, 2, strides[0], pads[0], pads[2], kernel[0], 1);
  g.cols =
      makeAxis(input, output, 3, strides[1], pads[1], pads[3], kernel[1], 1);
  g.countIncludePad = op.getInt("count_include_pad", 0) != 0;
  for (int64_t d = 0; d < 2; ++d)
    if (input.lo[d] > output.lo[d] || input.hi[d] < output.hi[d])
      return absl::InvalidArgumentError(
          op.kind + ": input box does not hold the output samples/channels");
  if (!g.rows.viewCovers() || !g.cols.viewCovers())
    return absl::InvalidArgumentError(
        op.kind + ": input box does not hold the window (halo) of the "
                  "output rows/cols");
  return absl::OkStatus();
}

/// The in-tensor part [first, last) of output position o's window, and its
/// extent within the padded tensor (what count_include_pad divides by; as in
/// PyTorch, a ceil_mode window is cut at the end of the padding).
struct Window {
  int64_t first, last, paddedExtent;
};

PPC_HD inline Window windowOf(const Axis &axis, int64_t o) {
  const int64_t start = axis.start(o);
  const int64_t end = start + axis.kernel;
  const int64_t padded = axis.size + axis.padHi;
  return {start > 0 ? start : 0, end < axis.size ? end : axis.size,
          (end < padded ? end : padded) - start};
}

/// What avg_pool2d divides a window's sum by.
PPC_HD inline int64_t avgDivisor(bool countIncludePad, const Window &rows,
                                 const Window &cols) {
  if (countIncludePad)
    return rows.paddedExtent * cols.paddedExtent;
  const int64_t h = rows.last > rows.first ? rows.last - rows.first : 0;
  const int64_t w = cols.last > cols.first ? cols.last - cols.first : 0;
  return h * w;
}

//===----------------------------------------------------------------------===//
// global_avg_pool
//===----------------------------------------------------------------------===//

/// `count` is the GLOBAL number of spatial positions (a split spatial dim
/// makes partial sums of the mean), `local` the held ones.
struct GlobalPoolShape {
  int64_t count, local;
};

template <typename View>
absl::Status checkGeometry(const OpDesc &op, const std::vector<View> &inputs,
                           const TensorView &output, GlobalPoolShape &s) {
  if (inputs.size() != 1)
    return absl::InvalidArgumentError(op.kind + ": expects 1 operand");
  const TensorView &input = inputs[0];
  if (input.rank() < 2 || output.rank() != input.rank())
    return absl::InvalidArgumentError(op.kind +
                                      ": result must have the input's rank");
  for (int64_t d = 0; d < 2; ++d)
    if (input.lo[d] > output.lo[d] || input.hi[d] < output.hi[d])
      return absl::InvalidArgumentError(
          op.kind + ": input box does not hold the output samples/channels");
  s.count = 1;
  s.local = 1;
  for (int64_t d = 2; d < input.rank(); ++d) {
    s.count *= input.shape[d];
    s.local *= input.extent(d);
  }
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// The views of a forward and a backward
//===----------------------------------------------------------------------===//

/// A forward's checks: one result, and the geometry (ConvGeometry,
/// TransposedConvGeometry, PoolGeometry or GlobalPoolShape) of its box.
template <typename View, typename Geometry>
absl::Status forwardGeometry(const OpDesc &op, const std::vector<View> &inputs,
                             const std::vector<View> &outputs, Geometry &g) {
  if (outputs.size() != 1)
    return absl::InvalidArgumentError(op.kind + ": expects 1 result");
  return checkGeometry(op, inputs, outputs[0], g);
}

/// A backward's checks: the grad boxes (checkGradBoxes), then the geometry
/// of the result grad's box.
template <typename View, typename Geometry>
absl::Status backwardGeometry(const OpDesc &op, const std::vector<View> &inputs,
                              const std::vector<View> &outputs,
                              const std::vector<View> &outputGrads,
                              const std::vector<View> &inputGrads,
                              Geometry &g) {
  if (absl::Status status =
          checkGradBoxes(op, inputs, outputs, outputGrads, inputGrads);
      !status.ok())
    return status;
  return checkGeometry(op, inputs, outputGrads[0], g);
}

} // namespace ppc::runtime

#endif // PPC_RUNTIME_COMMON_CONVPOOLGEOMETRY_H
