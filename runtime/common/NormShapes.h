//===- NormShapes.h - batch/layer norm and softmax partitions ---*- C++ -*-===//
//
// Private to the backends (runtime/cpu, runtime/cuda), shared by their
// batch_norm, layer_norm, softmax and log_softmax kernels: what a
// partition's views hold, checked alike on every backend (the same errors
// in the same order), as the shapes the kernels loop over:
//  - batch_norm: the held channels [cLo, cHi) and (sample, channel) blocks
//    of `spatial` elements; per-channel operands (scale, bias, mean,
//    variance) hold at least the held channels; its staged scratch is a
//    [rows, C] buffer holding every row and the held channels;
//  - layer_norm: `rows` rows of `width` elements, the normalized dims (axis
//    onwards) held whole, scale and bias whole;
//  - softmax, log_softmax: [outer, size, inner] with the axis held whole.
// Each shape has a normShape overload; normForwardShape and
// normBackwardShape add the forward's result count and the backward's
// gradient boxes (KernelChecks.h). Also the per-channel and per-row
// arithmetic that both backends run as it is (PPC_HD): batch statistics,
// the running statistics' update and gradients, layer_norm's row
// statistics and the strided lines of softmax. Views: TensorView, or a
// backend's view derived from one.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_COMMON_NORMSHAPES_H
#define PPC_RUNTIME_COMMON_NORMSHAPES_H

#include "KernelChecks.h"

#include "ppc/Runtime/HostDevice.h"
#include "ppc/Runtime/Kernels.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace ppc::runtime {

//===----------------------------------------------------------------------===//
// batch_norm
//===----------------------------------------------------------------------===//

/// batch_norm's operands, in order.
enum BatchNormOperand { Input, Scale, Bias, Mean, Variance };

/// The held channels [cLo, cHi) and the elements of one (sample, channel)
/// block of the input box (the product of the spatial extents).
struct BatchNormShape {
  int64_t cLo, cHi, samples, spatial;
  int64_t held() const { return cHi - cLo; }
};

template <typename View>
absl::Status normShape(const OpDesc &op, const std::vector<View> &inputs,
                       const TensorView &output, BatchNormShape &shape) {
  if (inputs.size() != 5)
    return absl::InvalidArgumentError(
        op.kind + ": expects input, scale, bias, mean and variance");
  const TensorView &input = inputs[Input];
  if (input.rank() < 2)
    return absl::InvalidArgumentError(op.kind + ": input must have rank >= 2");
  if (!sameBox(input, output))
    return absl::InvalidArgumentError(
        op.kind + ": result box differs from the input box");
  shape.cLo = input.lo[1];
  shape.cHi = input.hi[1];
  shape.samples = input.extent(0);
  shape.spatial = 1;
  for (int64_t d = 2; d < input.rank(); ++d)
    shape.spatial *= input.extent(d);
  for (int i = Scale; i <= Variance; ++i) {
    const TensorView &perChannel = inputs[i];
    if (perChannel.rank() != 1 || perChannel.lo[0] > shape.cLo ||
        perChannel.hi[0] < shape.cHi)
      return absl::InvalidArgumentError(
          op.kind + ": scale, bias, mean and variance boxes must hold the "
                    "input's channels");
  }
  return absl::OkStatus();
}

/// The held channels [cLo, cHi) of a per-channel view (null if absent).
inline float *channelsOf(const TensorView &view, const BatchNormShape &shape) {
  return view.data ? view.data + (shape.cLo - view.lo[0]) : nullptr;
}

/// Row 0, channel cLo, of a [rows, C] scratch view, which must hold every
/// row and the held channels; `stride` is its row length.
inline absl::Status scratchRows(const OpDesc &op, const TensorView &scratch,
                                int64_t rows, const BatchNormShape &shape,
                                float *&at, int64_t &stride) {
  if (scratch.rank() != 2 || scratch.lo[0] != 0 || scratch.hi[0] != rows ||
      scratch.lo[1] > shape.cLo || scratch.hi[1] < shape.cHi || !scratch.data)
    return absl::InvalidArgumentError(
        op.kind + ": scratch must be a [" + std::to_string(rows) +
        ", channels] buffer holding the input's channels");
  stride = scratch.extent(1);
  at = scratch.data + (shape.cLo - scratch.lo[1]);
  return absl::OkStatus();
}

/// One channel's batch statistics from its summed sum, sum of squares and
/// count: the mean, the biased variance (what normalization uses; clamped
/// at 0 against round-off) and 1 / sqrt(variance + epsilon).
PPC_HD inline void batchMoments(double sum, double sumSquares, double count,
                                double epsilon, double &mean, double &variance,
                                double &invStd) {
  mean = sum / count;
  variance = sumSquares / count - mean * mean;
  variance = variance > 0.0 ? variance : 0.0;
  invStd = 1.0 / ::sqrt(variance + epsilon);
}

/// ONNX convention: running = momentum * running + (1 - momentum) * batch.
/// Like PyTorch, the running variance takes the unbiased batch variance
/// (n / (n - 1)), while the normalization uses the biased one.
PPC_HD inline void updateRunningStats(double momentum, double mean,
                                      double variance, double count,
                                      float &runningMean,
                                      float &runningVariance) {
  const double unbiased = count > 1 ? variance * count / (count - 1) : variance;
  runningMean =
      static_cast<float>(momentum * runningMean + (1 - momentum) * mean);
  runningVariance = static_cast<float>(momentum * runningVariance +
                                       (1 - momentum) * unbiased);
}

/// Inference backward, where the statistics are the running mean m and
/// variance v: y = (x - m) * s * g + b with s = (v + eps)^-1/2 gives
/// dm = -sum dy * s * g and dv = -1/2 * sum dy * g * xhat * s^2, added to
/// the channel's dMean and dVariance where wanted (not null).
PPC_HD inline void addRunningStatGrads(double sumDy, double sumDyXhat,
                                       double invStd, float scale, float *dMean,
                                       float *dVariance) {
  if (dMean)
    *dMean += static_cast<float>(-sumDy * invStd * scale);
  if (dVariance)
    *dVariance +=
        static_cast<float>(-0.5 * sumDyXhat * scale * invStd * invStd);
}

//===----------------------------------------------------------------------===//
// layer_norm
//===----------------------------------------------------------------------===//

/// The checks layer_norm and softmax share: the result box is the input
/// box, and the "axis" attribute (from the back when negative) names a dim.
inline absl::Status normAxis(const OpDesc &op, const TensorView &input,
                             const TensorView &output, int64_t &axis) {
  if (!sameBox(input, output))
    return absl::InvalidArgumentError(
        op.kind + ": result box differs from the input box");
  axis = normalizeAxis(op.getInt("axis", -1), input.rank());
  if (axis < 0 || axis >= input.rank())
    return absl::InvalidArgumentError(op.kind + ": axis out of range");
  return absl::OkStatus();
}

/// The input box as `rows` rows of `width` normalized elements.
struct RowShape {
  int64_t rows, width;
};

template <typename View>
absl::Status normShape(const OpDesc &op, const std::vector<View> &inputs,
                       const TensorView &output, RowShape &shape) {
  if (inputs.size() < 2 || inputs.size() > 3)
    return absl::InvalidArgumentError(
        op.kind + ": expects input, scale and an optional bias");
  const TensorView &input = inputs[0];
  int64_t rank = input.rank(), axis = 0;
  if (absl::Status status = normAxis(op, input, output, axis); !status.ok())
    return status;
  shape.rows = 1;
  shape.width = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) {
      shape.rows *= input.extent(d);
      continue;
    }
    if (input.lo[d] != 0 || input.hi[d] != input.shape[d])
      return absl::InvalidArgumentError(
          op.kind + ": input box must hold the normalized dims whole");
    shape.width *= input.shape[d];
  }
  for (size_t i = 1; i < inputs.size(); ++i)
    if (!inputs[i].isWhole() || inputs[i].numElements() != shape.width)
      return absl::InvalidArgumentError(
          op.kind + ": scale and bias must hold the normalized dims whole");
  return absl::OkStatus();
}

/// Mean and 1 / sqrt(variance + epsilon) of one row (two passes, double);
/// with `rms` (RMSNorm) the mean is taken as 0 and the variance is the mean
/// square.
PPC_HD inline void rowStats(const float *row, int64_t width, double epsilon,
                            bool rms, double &mean, double &invStd) {
  double sum = 0;
  for (int64_t k = 0; k < width && !rms; ++k)
    sum += row[k];
  mean = sum / width;
  double squares = 0;
  for (int64_t k = 0; k < width; ++k)
    squares += (row[k] - mean) * (row[k] - mean);
  invStd = 1.0 / ::sqrt(squares / width + epsilon);
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax
//===----------------------------------------------------------------------===//

/// The box as [outer, axis, inner] with the axis held whole.
struct AxisShape {
  int64_t outer, size, inner;
};

template <typename View>
absl::Status normShape(const OpDesc &op, const std::vector<View> &inputs,
                       const TensorView &output, AxisShape &shape) {
  if (inputs.size() != 1)
    return absl::InvalidArgumentError(op.kind + ": expects 1 operand");
  const TensorView &input = inputs[0];
  int64_t rank = input.rank(), axis = 0;
  if (absl::Status status = normAxis(op, input, output, axis); !status.ok())
    return status;
  if (input.lo[axis] != 0 || input.hi[axis] != input.shape[axis])
    return absl::InvalidArgumentError(
        op.kind + ": input box must hold the softmax axis whole");
  shape = {1, input.shape[axis], 1};
  for (int64_t d = 0; d < axis; ++d)
    shape.outer *= input.extent(d);
  for (int64_t d = axis + 1; d < rank; ++d)
    shape.inner *= input.extent(d);
  return absl::OkStatus();
}

/// Softmax (or log_softmax) of one line of `size` elements `step` apart, in
/// double: the strided lines (an axis that is not the last). `In` and `Out`
/// index like float pointers (a backend's element accessors).
template <typename In, typename Out>
PPC_HD inline void softmaxStridedLine(In x, Out y, int64_t size, int64_t step,
                                      bool isLog) {
  float max = x[0];
  for (int64_t k = 1; k < size; ++k)
    max = max < x[k * step] ? x[k * step] : max;
  double sum = 0;
  for (int64_t k = 0; k < size; ++k)
    sum += ::exp(static_cast<double>(x[k * step]) - max);
  const double logSum = ::log(sum);
  for (int64_t k = 0; k < size; ++k) {
    const double shifted = static_cast<double>(x[k * step]) - max;
    y[k * step] =
        static_cast<float>(isLog ? shifted - logSum : ::exp(shifted - logSum));
  }
}

/// The gradient of one line (`size` elements `step` apart) from the result
/// y: softmax dx += y * (dy - sum dy * y); log_softmax dx += dy - e^y sum dy
/// (dx = ... where `overwrite`).
template <typename In, typename Out>
PPC_HD inline void softmaxGradLine(In y, In dy, Out dx, int64_t size,
                                   int64_t step, bool isLog,
                                   bool overwrite = false) {
  double sum = 0;
  for (int64_t k = 0; k < size; ++k) {
    const int64_t at = k * step;
    sum += isLog ? static_cast<double>(dy[at])
                 : static_cast<double>(dy[at]) * y[at];
  }
  for (int64_t k = 0; k < size; ++k) {
    const int64_t at = k * step;
    const float value = static_cast<float>(
        isLog ? dy[at] - static_cast<double>(::expf(y[at])) * sum
              : y[at] * (dy[at] - sum));
    if (overwrite)
      dx[at] = value;
    else
      dx[at] += value;
  }
}

//===----------------------------------------------------------------------===//
// The checks of a forward and of a backward
//===----------------------------------------------------------------------===//

/// A forward's checks: one result, whose box `shape` is.
template <typename View, typename Shape>
absl::Status normForwardShape(const OpDesc &op, const std::vector<View> &inputs,
                              const std::vector<View> &outputs, Shape &shape) {
  if (outputs.size() != 1)
    return absl::InvalidArgumentError(op.kind + ": expects 1 result");
  return normShape(op, inputs, outputs[0], shape);
}

/// A backward's checks: the gradient boxes, the forward's result where the
/// backward reads it (softmax), then `shape`.
template <typename View, typename Shape>
absl::Status normBackwardShape(const OpDesc &op,
                               const std::vector<View> &inputs,
                               const std::vector<View> &outputs,
                               const std::vector<View> &outputGrads,
                               const std::vector<View> &inputGrads,
                               bool readsResult, Shape &shape) {
  if (absl::Status status =
          checkGradBoxes(op, inputs, outputs, outputGrads, inputGrads);
      !status.ok())
    return status;
  if (readsResult && (outputs.size() != 1 || !outputs[0].present()))
    return absl::InvalidArgumentError(op.kind +
                                      ": backward needs the forward result");
  return normShape(op, inputs, outputGrads[0], shape);
}

} // namespace ppc::runtime

#endif // PPC_RUNTIME_COMMON_NORMSHAPES_H
