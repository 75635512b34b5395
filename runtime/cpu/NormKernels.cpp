//===- NormKernels.cpp - batch/layer norm, softmax on boxes ---------------===//
//
// batch_norm in training is staged (Kernels.h): its statistics span every
// partition that holds a channel, so
//   forward  stage 0 writes the local [sum; sum of squares; count] of each
//            held channel into a [3, C] scratch (zeros elsewhere), the plan
//            sums it over the partitions, and stage 1 normalizes with the
//            global statistics and updates the running statistics;
//   backward stage 0 writes the local [sum dy; sum dy * xhat] into its own
//            [2, C] scratch and adds the local dscale/dbias (the plan sums
//            weight grads over replicas), and stage 1 computes dx from the
//            summed sums.
// layer_norm, softmax and log_softmax never split the dims they normalize
// over, so each partition computes its rows alone.
//
//===----------------------------------------------------------------------===//

#include "KernelHelpers.h"
#include "KernelRegistry.h"

#include <algorithm>
#include <cmath>

namespace ppc::runtime::cpu {

namespace {

//===----------------------------------------------------------------------===//
// batch_norm
//===----------------------------------------------------------------------===//

enum BatchNormOperand { Input, Scale, Bias, Mean, Variance };

/// The held channels [cLo, cHi) and the elements of one (sample, channel)
/// block of the input box (the product of the spatial extents).
struct BatchNormShape {
  int64_t cLo, cHi, samples, spatial;

  /// Calls fn(channelIndex, blockOffset) for each (sample, channel) block,
  /// where channelIndex counts from cLo.
  template <typename Fn> void forEachBlock(Fn &&fn) const {
    int64_t channels = cHi - cLo;
    for (int64_t n = 0; n < samples; ++n)
      for (int64_t c = 0; c < channels; ++c)
        fn(c, (n * channels + c) * spatial);
  }
};

KernelStatus batchNormShape(const OpDesc &op,
                            const std::vector<TensorView> &inputs,
                            const TensorView &output, BatchNormShape &shape) {
  if (inputs.size() != 5)
    return op.kind + ": expects input, scale, bias, mean and variance";
  const TensorView &input = inputs[Input];
  if (input.rank() < 2)
    return op.kind + ": input must have rank >= 2";
  if (!sameBox(input, output))
    return op.kind + ": result box differs from the input box";
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
      return op.kind + ": scale, bias, mean and variance boxes must hold the "
                       "input's channels";
  }
  return "";
}

/// Pointer to the held channels [cLo, cHi) of a per-channel view.
float *channels(const TensorView &view, const BatchNormShape &shape) {
  return view.data + (shape.cLo - view.lo[0]);
}

/// Pointer to row `row`, channel cLo, of a [rows, C] scratch view, which
/// must hold every row and the held channels.
KernelStatus scratchRow(const OpDesc &op, const TensorView &scratch,
                        int64_t rows, const BatchNormShape &shape, int64_t row,
                        float *&at) {
  if (scratch.rank() != 2 || scratch.lo[0] != 0 || scratch.hi[0] != rows ||
      scratch.lo[1] > shape.cLo || scratch.hi[1] < shape.cHi || !scratch.data)
    return op.kind + ": scratch must be a [" + std::to_string(rows) +
           ", channels] buffer holding the input's channels";
  at = scratch.data + row * scratch.extent(1) + (shape.cLo - scratch.lo[1]);
  return "";
}

/// Per held channel: mean and 1 / sqrt(variance + epsilon) of the batch,
/// from the summed [sum; sum of squares; count] scratch.
struct BatchStats {
  std::vector<double> mean, invStd, variance, count;
};

KernelStatus batchStats(const OpDesc &op, const TensorView &scratch,
                        const BatchNormShape &shape, double epsilon,
                        BatchStats &stats) {
  float *sum, *sumSquares, *count;
  for (auto [row, at] :
       {std::pair{0, &sum}, std::pair{1, &sumSquares}, std::pair{2, &count}})
    if (KernelStatus status = scratchRow(op, scratch, 3, shape, row, *at);
        !status.empty())
      return status;
  int64_t held = shape.cHi - shape.cLo;
  stats.mean.resize(held);
  stats.invStd.resize(held);
  stats.variance.resize(held);
  stats.count.assign(count, count + held);
  for (int64_t c = 0; c < held; ++c) {
    if (count[c] <= 0)
      return op.kind + ": batch statistics over no elements";
    double mean = sum[c] / stats.count[c];
    // Biased variance (what normalization uses); clamped against round-off.
    double variance =
        std::max(0.0, sumSquares[c] / stats.count[c] - mean * mean);
    stats.mean[c] = mean;
    stats.variance[c] = variance;
    stats.invStd[c] = 1.0 / std::sqrt(variance + epsilon);
  }
  return "";
}

/// Inference statistics: the running mean and variance.
BatchStats runningStats(const std::vector<TensorView> &inputs,
                        const BatchNormShape &shape, double epsilon) {
  int64_t held = shape.cHi - shape.cLo;
  const float *mean = channels(inputs[Mean], shape);
  const float *variance = channels(inputs[Variance], shape);
  BatchStats stats;
  stats.mean.assign(mean, mean + held);
  stats.variance.assign(variance, variance + held);
  for (int64_t c = 0; c < held; ++c)
    stats.invStd.push_back(1.0 / std::sqrt(stats.variance[c] + epsilon));
  return stats;
}

/// y = (x - mean) * invStd * scale + bias over the input box.
void normalizeChannels(const std::vector<TensorView> &inputs,
                       const BatchNormShape &shape, const BatchStats &stats,
                       float *output) {
  const float *input = inputs[Input].data;
  const float *scale = channels(inputs[Scale], shape);
  const float *bias = channels(inputs[Bias], shape);
  shape.forEachBlock([&](int64_t c, int64_t offset) {
    float mul = static_cast<float>(stats.invStd[c] * scale[c]);
    float add = static_cast<float>(bias[c] - stats.mean[c] * mul);
    for (int64_t k = 0; k < shape.spatial; ++k)
      output[offset + k] = input[offset + k] * mul + add;
  });
}

KernelStatus batchNormForward(const OpDesc &op, const KernelContext &ctx,
                              const std::vector<TensorView> &inputs,
                              std::vector<TensorView> &outputs,
                              std::vector<TensorView> &scratch) {
  if (outputs.size() != 1)
    return op.kind + ": expects 1 result";
  BatchNormShape shape;
  if (KernelStatus status = batchNormShape(op, inputs, outputs[0], shape);
      !status.empty())
    return status;
  double epsilon = op.getFloat("epsilon", 1e-5);
  if (!ctx.training) {
    normalizeChannels(inputs, shape, runningStats(inputs, shape, epsilon),
                      outputs[0].data);
    return "";
  }
  if (scratch.size() != 1)
    return op.kind + ": training expects one [3, channels] scratch buffer";
  int64_t held = shape.cHi - shape.cLo;

  if (ctx.stage == 0) {
    float *sum, *sumSquares, *count;
    for (auto [row, at] :
         {std::pair{0, &sum}, std::pair{1, &sumSquares}, std::pair{2, &count}})
      if (KernelStatus status = scratchRow(op, scratch[0], 3, shape, row, *at);
          !status.empty())
        return status;
    // Channels this partition does not hold contribute zeros to the sum.
    std::fill(scratch[0].data, scratch[0].data + scratch[0].numElements(),
              0.0f);
    std::vector<double> sums(held, 0.0), squares(held, 0.0);
    const float *input = inputs[Input].data;
    shape.forEachBlock([&](int64_t c, int64_t offset) {
      double s = 0, q = 0;
      for (int64_t k = 0; k < shape.spatial; ++k) {
        double x = input[offset + k];
        s += x;
        q += x * x;
      }
      sums[c] += s;
      squares[c] += q;
    });
    for (int64_t c = 0; c < held; ++c) {
      sum[c] = static_cast<float>(sums[c]);
      sumSquares[c] = static_cast<float>(squares[c]);
      count[c] = static_cast<float>(shape.samples * shape.spatial);
    }
    return "";
  }
  if (ctx.stage != 1)
    return op.kind + ": has stages 0 and 1 only";

  BatchStats stats;
  if (KernelStatus status = batchStats(op, scratch[0], shape, epsilon, stats);
      !status.empty())
    return status;
  normalizeChannels(inputs, shape, stats, outputs[0].data);
  // ONNX convention: running = momentum * running + (1 - momentum) * batch.
  // Like PyTorch, the running variance takes the unbiased batch variance
  // (n / (n - 1)), while the normalization above uses the biased one.
  double momentum = op.getFloat("momentum", 0.9);
  float *runningMean = channels(inputs[Mean], shape);
  float *runningVariance = channels(inputs[Variance], shape);
  for (int64_t c = 0; c < held; ++c) {
    double n = stats.count[c];
    double unbiased =
        n > 1 ? stats.variance[c] * n / (n - 1) : stats.variance[c];
    runningMean[c] = static_cast<float>(momentum * runningMean[c] +
                                        (1 - momentum) * stats.mean[c]);
    runningVariance[c] = static_cast<float>(momentum * runningVariance[c] +
                                            (1 - momentum) * unbiased);
  }
  return "";
}

/// Local sums over the box, per held channel: sum dy and sum dy * xhat.
void gradSums(const std::vector<TensorView> &inputs, const float *dOutput,
              const BatchNormShape &shape, const BatchStats &stats,
              std::vector<double> &sumDy, std::vector<double> &sumDyXhat) {
  int64_t held = shape.cHi - shape.cLo;
  sumDy.assign(held, 0.0);
  sumDyXhat.assign(held, 0.0);
  const float *input = inputs[Input].data;
  shape.forEachBlock([&](int64_t c, int64_t offset) {
    double mean = stats.mean[c], invStd = stats.invStd[c], s = 0, sx = 0;
    for (int64_t k = 0; k < shape.spatial; ++k) {
      double dy = dOutput[offset + k];
      s += dy;
      sx += dy * (input[offset + k] - mean) * invStd;
    }
    sumDy[c] += s;
    sumDyXhat[c] += sx;
  });
}

/// Adds the local dscale (sum dy * xhat) and dbias (sum dy).
void addParameterGrads(std::vector<TensorView> &inputGrads,
                       const BatchNormShape &shape,
                       const std::vector<double> &sumDy,
                       const std::vector<double> &sumDyXhat) {
  int64_t held = shape.cHi - shape.cLo;
  if (inputGrads[Scale].data) {
    float *dScale = channels(inputGrads[Scale], shape);
    for (int64_t c = 0; c < held; ++c)
      dScale[c] += static_cast<float>(sumDyXhat[c]);
  }
  if (inputGrads[Bias].data) {
    float *dBias = channels(inputGrads[Bias], shape);
    for (int64_t c = 0; c < held; ++c)
      dBias[c] += static_cast<float>(sumDy[c]);
  }
}

/// Inference backward: the statistics are constants of the running mean and
/// variance, whose gradients are taken too where wanted.
void batchNormInferenceBackward(const std::vector<TensorView> &inputs,
                                const float *dOutput,
                                std::vector<TensorView> &inputGrads,
                                const BatchNormShape &shape, double epsilon) {
  BatchStats stats = runningStats(inputs, shape, epsilon);
  std::vector<double> sumDy, sumDyXhat;
  gradSums(inputs, dOutput, shape, stats, sumDy, sumDyXhat);
  addParameterGrads(inputGrads, shape, sumDy, sumDyXhat);
  const float *scale = channels(inputs[Scale], shape);
  int64_t held = shape.cHi - shape.cLo;
  // y = (x - m) * s * g + b with s = (v + eps)^-1/2: dm = -sum dy * s * g,
  // dv = -1/2 * sum dy * g * xhat * s^2.
  for (int64_t c = 0; c < held; ++c) {
    double invStd = stats.invStd[c];
    if (inputGrads[Mean].data)
      channels(inputGrads[Mean], shape)[c] +=
          static_cast<float>(-sumDy[c] * invStd * scale[c]);
    if (inputGrads[Variance].data)
      channels(inputGrads[Variance], shape)[c] +=
          static_cast<float>(-0.5 * sumDyXhat[c] * scale[c] * invStd * invStd);
  }
  if (!inputGrads[Input].data)
    return;
  float *dInput = inputGrads[Input].data;
  shape.forEachBlock([&](int64_t c, int64_t offset) {
    float mul = static_cast<float>(stats.invStd[c] * scale[c]);
    for (int64_t k = 0; k < shape.spatial; ++k)
      dInput[offset + k] += dOutput[offset + k] * mul;
  });
}

KernelStatus batchNormBackward(const OpDesc &op, const KernelContext &ctx,
                               const std::vector<TensorView> &inputs,
                               const std::vector<TensorView> &outputs,
                               const std::vector<TensorView> &outputGrads,
                               std::vector<TensorView> &inputGrads,
                               std::vector<TensorView> &scratch) {
  if (KernelStatus status =
          checkGradBoxes(op, inputs, outputs, outputGrads, inputGrads);
      !status.empty())
    return status;
  BatchNormShape shape;
  if (KernelStatus status = batchNormShape(op, inputs, outputGrads[0], shape);
      !status.empty())
    return status;
  double epsilon = op.getFloat("epsilon", 1e-5);
  const float *dOutput = outputGrads[0].data;
  if (!ctx.training) {
    batchNormInferenceBackward(inputs, dOutput, inputGrads, shape, epsilon);
    return "";
  }
  if (scratch.size() != 2)
    return op.kind + ": training backward expects the forward's [3, channels] "
                     "and its own [2, channels] scratch buffers";
  BatchStats stats;
  if (KernelStatus status = batchStats(op, scratch[0], shape, epsilon, stats);
      !status.empty())
    return status;
  float *sumDyAt, *sumDyXhatAt;
  for (auto [row, at] : {std::pair{0, &sumDyAt}, std::pair{1, &sumDyXhatAt}})
    if (KernelStatus status = scratchRow(op, scratch[1], 2, shape, row, *at);
        !status.empty())
      return status;
  int64_t held = shape.cHi - shape.cLo;

  if (ctx.stage == 0) {
    std::vector<double> sumDy, sumDyXhat;
    gradSums(inputs, dOutput, shape, stats, sumDy, sumDyXhat);
    std::fill(scratch[1].data, scratch[1].data + scratch[1].numElements(),
              0.0f);
    for (int64_t c = 0; c < held; ++c) {
      sumDyAt[c] = static_cast<float>(sumDy[c]);
      sumDyXhatAt[c] = static_cast<float>(sumDyXhat[c]);
    }
    // The mean and variance are batch statistics in training: the running
    // statistics get no gradient.
    addParameterGrads(inputGrads, shape, sumDy, sumDyXhat);
    return "";
  }
  if (ctx.stage != 1)
    return op.kind + ": has stages 0 and 1 only";
  if (!inputGrads[Input].data)
    return "";
  // dx = scale * invStd / n * (n * dy - sum dy - xhat * sum dy * xhat), with
  // n and the sums over the whole batch.
  const float *input = inputs[Input].data;
  const float *scale = channels(inputs[Scale], shape);
  float *dInput = inputGrads[Input].data;
  shape.forEachBlock([&](int64_t c, int64_t offset) {
    double n = stats.count[c], invStd = stats.invStd[c];
    float mul = static_cast<float>(scale[c] * invStd);
    float meanDy = static_cast<float>(sumDyAt[c] / n);
    float meanDyXhat = static_cast<float>(sumDyXhatAt[c] / n);
    float mean = static_cast<float>(stats.mean[c]);
    float inv = static_cast<float>(invStd);
    for (int64_t k = 0; k < shape.spatial; ++k) {
      float xhat = (input[offset + k] - mean) * inv;
      dInput[offset + k] +=
          mul * (dOutput[offset + k] - meanDy - xhat * meanDyXhat);
    }
  });
  return "";
}

std::vector<std::vector<int64_t>>
batchNormScratch(const OpDesc &, const std::vector<TensorView> &inputs,
                 bool backward) {
  int64_t channelCount =
      inputs.empty() || inputs[0].rank() < 2 ? 0 : inputs[0].shape[1];
  return {{backward ? 2 : 3, channelCount}};
}

//===----------------------------------------------------------------------===//
// layer_norm
//===----------------------------------------------------------------------===//

/// The input box as `rows` rows of `width` normalized elements.
struct RowShape {
  int64_t rows, width;
};

KernelStatus layerNormShape(const OpDesc &op,
                            const std::vector<TensorView> &inputs,
                            const TensorView &output, RowShape &shape) {
  if (inputs.size() < 2 || inputs.size() > 3)
    return op.kind + ": expects input, scale and an optional bias";
  const TensorView &input = inputs[0];
  if (!sameBox(input, output))
    return op.kind + ": result box differs from the input box";
  int64_t rank = input.rank();
  int64_t axis = normalizeAxis(op.getInt("axis", -1), rank);
  if (axis < 0 || axis >= rank)
    return op.kind + ": axis out of range";
  shape.rows = 1;
  shape.width = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) {
      shape.rows *= input.extent(d);
      continue;
    }
    if (input.lo[d] != 0 || input.hi[d] != input.shape[d])
      return op.kind + ": input box must hold the normalized dims whole";
    shape.width *= input.shape[d];
  }
  for (size_t i = 1; i < inputs.size(); ++i)
    if (!inputs[i].isWhole() || inputs[i].numElements() != shape.width)
      return op.kind + ": scale and bias must hold the normalized dims whole";
  return "";
}

/// Mean and 1 / sqrt(variance + epsilon) of one row (two passes, double).
std::pair<double, double> rowStats(const float *row, int64_t width,
                                   double epsilon) {
  double sum = 0;
  for (int64_t k = 0; k < width; ++k)
    sum += row[k];
  double mean = sum / width, squares = 0;
  for (int64_t k = 0; k < width; ++k)
    squares += (row[k] - mean) * (row[k] - mean);
  return {mean, 1.0 / std::sqrt(squares / width + epsilon)};
}

KernelStatus layerNormForward(const OpDesc &op, const KernelContext &,
                              const std::vector<TensorView> &inputs,
                              std::vector<TensorView> &outputs,
                              std::vector<TensorView> &) {
  if (outputs.size() != 1)
    return op.kind + ": expects 1 result";
  RowShape shape;
  if (KernelStatus status = layerNormShape(op, inputs, outputs[0], shape);
      !status.empty())
    return status;
  double epsilon = op.getFloat("epsilon", 1e-5);
  const float *scale = inputs[1].data;
  const float *bias = inputs.size() == 3 ? inputs[2].data : nullptr;
  for (int64_t r = 0; r < shape.rows; ++r) {
    const float *x = inputs[0].data + r * shape.width;
    float *y = outputs[0].data + r * shape.width;
    auto [mean, invStd] = rowStats(x, shape.width, epsilon);
    float m = static_cast<float>(mean), s = static_cast<float>(invStd);
    for (int64_t k = 0; k < shape.width; ++k)
      y[k] = (x[k] - m) * s * scale[k] + (bias ? bias[k] : 0.0f);
  }
  return "";
}

KernelStatus layerNormBackward(const OpDesc &op, const KernelContext &,
                               const std::vector<TensorView> &inputs,
                               const std::vector<TensorView> &outputs,
                               const std::vector<TensorView> &outputGrads,
                               std::vector<TensorView> &inputGrads,
                               std::vector<TensorView> &) {
  if (KernelStatus status =
          checkGradBoxes(op, inputs, outputs, outputGrads, inputGrads);
      !status.empty())
    return status;
  RowShape shape;
  if (KernelStatus status = layerNormShape(op, inputs, outputGrads[0], shape);
      !status.empty())
    return status;
  double epsilon = op.getFloat("epsilon", 1e-5);
  const float *scale = inputs[1].data;
  float *dInput = inputGrads[0].data, *dScale = inputGrads[1].data;
  float *dBias = inputGrads.size() == 3 ? inputGrads[2].data : nullptr;
  int64_t width = shape.width;
  for (int64_t r = 0; r < shape.rows; ++r) {
    const float *x = inputs[0].data + r * width;
    const float *dy = outputGrads[0].data + r * width;
    auto [mean, invStd] = rowStats(x, width, epsilon);
    // dx = invStd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * scale.
    double sumG = 0, sumGXhat = 0;
    for (int64_t k = 0; k < width; ++k) {
      double xhat = (x[k] - mean) * invStd;
      double g = static_cast<double>(dy[k]) * scale[k];
      sumG += g;
      sumGXhat += g * xhat;
      if (dScale)
        dScale[k] += static_cast<float>(dy[k] * xhat);
      if (dBias)
        dBias[k] += dy[k];
    }
    if (!dInput)
      continue;
    double meanG = sumG / width, meanGXhat = sumGXhat / width;
    float *dx = dInput + r * width;
    for (int64_t k = 0; k < width; ++k) {
      double xhat = (x[k] - mean) * invStd;
      double g = static_cast<double>(dy[k]) * scale[k];
      dx[k] += static_cast<float>(invStd * (g - meanG - xhat * meanGXhat));
    }
  }
  return "";
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax
//===----------------------------------------------------------------------===//

/// The box as [outer, axis, inner] with the axis held whole.
struct AxisShape {
  int64_t outer, size, inner;
};

KernelStatus softmaxShape(const OpDesc &op,
                          const std::vector<TensorView> &inputs,
                          const TensorView &output, AxisShape &shape) {
  if (inputs.size() != 1)
    return op.kind + ": expects 1 operand";
  const TensorView &input = inputs[0];
  if (!sameBox(input, output))
    return op.kind + ": result box differs from the input box";
  int64_t rank = input.rank();
  int64_t axis = normalizeAxis(op.getInt("axis", -1), rank);
  if (axis < 0 || axis >= rank)
    return op.kind + ": axis out of range";
  if (input.lo[axis] != 0 || input.hi[axis] != input.shape[axis])
    return op.kind + ": input box must hold the softmax axis whole";
  shape = {1, input.shape[axis], 1};
  for (int64_t d = 0; d < axis; ++d)
    shape.outer *= input.extent(d);
  for (int64_t d = axis + 1; d < rank; ++d)
    shape.inner *= input.extent(d);
  return "";
}

/// Calls fn(first) for the first element of every line along the axis; the
/// line's elements are first + k * inner.
template <typename Fn> void forEachLine(const AxisShape &shape, Fn &&fn) {
  for (int64_t o = 0; o < shape.outer; ++o)
    for (int64_t i = 0; i < shape.inner; ++i)
      fn(o * shape.size * shape.inner + i);
}

template <bool Log>
KernelStatus softmaxForward(const OpDesc &op, const KernelContext &,
                            const std::vector<TensorView> &inputs,
                            std::vector<TensorView> &outputs,
                            std::vector<TensorView> &) {
  if (outputs.size() != 1)
    return op.kind + ": expects 1 result";
  AxisShape shape;
  if (KernelStatus status = softmaxShape(op, inputs, outputs[0], shape);
      !status.empty())
    return status;
  const float *x = inputs[0].data;
  float *y = outputs[0].data;
  int64_t step = shape.inner;
  if (step == 1) { // the usual last axis: contiguous lines, vectorized
    for (int64_t o = 0; o < shape.outer; ++o) {
      const float *line = x + o * shape.size;
      float *out = y + o * shape.size;
      const float max = *std::max_element(line, line + shape.size);
      expShifted(line, shape.size, max, out);
      const double sum = sumOf(out, shape.size);
      if (Log) {
        // x - max first: exact near the max, whatever the magnitude of x.
        const float logSum = static_cast<float>(std::log(sum));
        for (int64_t k = 0; k < shape.size; ++k)
          out[k] = (line[k] - max) - logSum;
      } else {
        const float scale = static_cast<float>(1.0 / sum);
        for (int64_t k = 0; k < shape.size; ++k)
          out[k] *= scale;
      }
    }
    return "";
  }
  forEachLine(shape, [&](int64_t first) {
    float max = x[first];
    for (int64_t k = 1; k < shape.size; ++k)
      max = std::max(max, x[first + k * step]);
    double sum = 0;
    for (int64_t k = 0; k < shape.size; ++k)
      sum += std::exp(static_cast<double>(x[first + k * step]) - max);
    double logSum = std::log(sum);
    for (int64_t k = 0; k < shape.size; ++k) {
      double shifted = static_cast<double>(x[first + k * step]) - max;
      y[first + k * step] = static_cast<float>(
          Log ? shifted - logSum : std::exp(shifted - logSum));
    }
  });
  return "";
}

template <bool Log>
KernelStatus softmaxBackward(const OpDesc &op, const KernelContext &,
                             const std::vector<TensorView> &inputs,
                             const std::vector<TensorView> &outputs,
                             const std::vector<TensorView> &outputGrads,
                             std::vector<TensorView> &inputGrads,
                             std::vector<TensorView> &) {
  if (KernelStatus status =
          checkGradBoxes(op, inputs, outputs, outputGrads, inputGrads);
      !status.empty())
    return status;
  if (outputs.size() != 1 || !outputs[0].data)
    return op.kind + ": backward needs the forward result";
  AxisShape shape;
  if (KernelStatus status = softmaxShape(op, inputs, outputs[0], shape);
      !status.empty())
    return status;
  float *dx = inputGrads[0].data;
  if (!dx)
    return "";
  const float *y = outputs[0].data, *dy = outputGrads[0].data;
  int64_t step = shape.inner;
  // softmax: dx = y * (dy - sum dy * y); log_softmax: dx = dy - e^y sum dy.
  forEachLine(shape, [&](int64_t first) {
    double sum = 0;
    for (int64_t k = 0; k < shape.size; ++k) {
      int64_t at = first + k * step;
      sum += Log ? dy[at] : static_cast<double>(dy[at]) * y[at];
    }
    for (int64_t k = 0; k < shape.size; ++k) {
      int64_t at = first + k * step;
      dx[at] += static_cast<float>(Log ? dy[at] - std::exp(y[at]) * sum
                                       : y[at] * (dy[at] - sum));
    }
  });
  return "";
}

} // namespace

void registerNormKernels(KernelTable &table) {
  table["ppc.batch_norm"] = {batchNormForward,
                             batchNormBackward,
                             batchNormScratch,
                             2,
                             {Mean, Variance}};
  table["ppc.layer_norm"] = {layerNormForward, layerNormBackward, nullptr, 1};
  table["ppc.softmax"] = {softmaxForward<false>, softmaxBackward<false>,
                          nullptr, 1};
  table["ppc.log_softmax"] = {softmaxForward<true>, softmaxBackward<true>,
                              nullptr, 1};
}

} // namespace ppc::runtime::cpu
