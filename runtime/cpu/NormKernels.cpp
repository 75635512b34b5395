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
#include "NormShapes.h"

#include <algorithm>
#include <cmath>

namespace ppc::runtime::cpu {

namespace {

//===----------------------------------------------------------------------===//
// batch_norm
//===----------------------------------------------------------------------===//

/// Calls fn(channelIndex, blockOffset) for each (sample, channel) block,
/// where channelIndex counts from cLo.
template <typename Fn> void forEachBlock(const BatchNormShape &shape, Fn &&fn) {
  int64_t channels = shape.held();
  for (int64_t n = 0; n < shape.samples; ++n)
    for (int64_t c = 0; c < channels; ++c)
      fn(c, (n * channels + c) * shape.spatial);
}

/// Per held channel: mean and 1 / sqrt(variance + epsilon) of the batch,
/// from the summed [sum; sum of squares; count] scratch.
struct BatchStats {
  std::vector<double> mean, invStd, variance, count;
};

absl::Status batchStats(const OpDesc &op, const TensorView &scratch,
                        const BatchNormShape &shape, double epsilon,
                        BatchStats &stats) {
  float *rows;
  int64_t stride;
  if (absl::Status status = scratchRows(op, scratch, 3, shape, rows, stride);
      !status.ok())
    return status;
  int64_t held = shape.held();
  stats.mean.resize(held);
  stats.invStd.resize(held);
  stats.variance.resize(held);
  stats.count.assign(rows + 2 * stride, rows + 2 * stride + held);
  for (int64_t c = 0; c < held; ++c) {
    if (stats.count[c] <= 0)
      return absl::InvalidArgumentError(op.kind +
                                        ": batch statistics over no elements");
    batchMoments(rows[c], rows[stride + c], stats.count[c], epsilon,
                 stats.mean[c], stats.variance[c], stats.invStd[c]);
  }
  return absl::OkStatus();
}

/// Inference statistics: the running mean and variance.
BatchStats runningStats(const std::vector<TensorView> &inputs,
                        const BatchNormShape &shape, double epsilon) {
  int64_t held = shape.held();
  const float *mean = channelsOf(inputs[Mean], shape);
  const float *variance = channelsOf(inputs[Variance], shape);
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
  const float *scale = channelsOf(inputs[Scale], shape);
  const float *bias = channelsOf(inputs[Bias], shape);
  forEachBlock(shape, [&](int64_t c, int64_t offset) {
    float mul = static_cast<float>(stats.invStd[c] * scale[c]);
    float add = static_cast<float>(bias[c] - stats.mean[c] * mul);
    for (int64_t k = 0; k < shape.spatial; ++k)
      output[offset + k] = input[offset + k] * mul + add;
  });
}

absl::Status batchNormForward(const OpDesc &op, const KernelContext &ctx,
                              const std::vector<TensorView> &inputs,
                              std::vector<TensorView> &outputs,
                              std::vector<TensorView> &scratch) {
  BatchNormShape shape;
  if (absl::Status status = normForwardShape(op, inputs, outputs, shape);
      !status.ok())
    return status;
  double epsilon = op.getFloat("epsilon", 1e-5);
  if (!ctx.training) {
    normalizeChannels(inputs, shape, runningStats(inputs, shape, epsilon),
                      outputs[0].data);
    return absl::OkStatus();
  }
  if (scratch.size() != 1)
    return absl::InvalidArgumentError(
        op.kind + ": training expects one [3, channels] scratch buffer");
  int64_t held = shape.held();

  if (ctx.stage == 0) {
    float *sum;
    int64_t stride;
    if (absl::Status status =
            scratchRows(op, scratch[0], 3, shape, sum, stride);
        !status.ok())
      return status;
    float *sumSquares = sum + stride, *count = sum + 2 * stride;
    // Channels this partition does not hold contribute zeros to the sum.
    std::fill(scratch[0].data, scratch[0].data + scratch[0].numElements(),
              0.0f);
    std::vector<double> sums(held, 0.0), squares(held, 0.0);
    const float *input = inputs[Input].data;
    forEachBlock(shape, [&](int64_t c, int64_t offset) {
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
    return absl::OkStatus();
  }
  if (ctx.stage != 1)
    return absl::InvalidArgumentError(op.kind + ": has stages 0 and 1 only");

  BatchStats stats;
  if (absl::Status status = batchStats(op, scratch[0], shape, epsilon, stats);
      !status.ok())
    return status;
  normalizeChannels(inputs, shape, stats, outputs[0].data);
  double momentum = op.getFloat("momentum", 0.9);
  float *runningMean = channelsOf(inputs[Mean], shape);
  float *runningVariance = channelsOf(inputs[Variance], shape);
  for (int64_t c = 0; c < held; ++c)
    updateRunningStats(momentum, stats.mean[c], stats.variance[c],
                       stats.count[c], runningMean[c], runningVariance[c]);
  return absl::OkStatus();
}

/// Local sums over the box, per held channel: sum dy and sum dy * xhat.
void gradSums(const std::vector<TensorView> &inputs, const float *dOutput,
              const BatchNormShape &shape, const BatchStats &stats,
              std::vector<double> &sumDy, std::vector<double> &sumDyXhat) {
  int64_t held = shape.held();
  sumDy.assign(held, 0.0);
  sumDyXhat.assign(held, 0.0);
  const float *input = inputs[Input].data;
  forEachBlock(shape, [&](int64_t c, int64_t offset) {
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
  int64_t held = shape.held();
  if (float *dScale = channelsOf(inputGrads[Scale], shape)) {
    for (int64_t c = 0; c < held; ++c)
      dScale[c] += static_cast<float>(sumDyXhat[c]);
  }
  if (float *dBias = channelsOf(inputGrads[Bias], shape)) {
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
  const float *scale = channelsOf(inputs[Scale], shape);
  int64_t held = shape.held();
  float *dMean = channelsOf(inputGrads[Mean], shape);
  float *dVariance = channelsOf(inputGrads[Variance], shape);
  for (int64_t c = 0; c < held; ++c)
    addRunningStatGrads(sumDy[c], sumDyXhat[c], stats.invStd[c], scale[c],
                        dMean ? dMean + c : nullptr,
                        dVariance ? dVariance + c : nullptr);
  if (!inputGrads[Input].data)
    return;
  float *dInput = inputGrads[Input].data;
  forEachBlock(shape, [&](int64_t c, int64_t offset) {
    float mul = static_cast<float>(stats.invStd[c] * scale[c]);
    for (int64_t k = 0; k < shape.spatial; ++k)
      dInput[offset + k] += dOutput[offset + k] * mul;
  });
}

absl::Status batchNormBackward(const OpDesc &op, const KernelContext &ctx,
                               const std::vector<TensorView> &inputs,
                               const std::vector<TensorView> &outputs,
                               const std::vector<TensorView> &outputGrads,
                               std::vector<TensorView> &inputGrads,
                               std::vector<TensorView> &scratch) {
  BatchNormShape shape;
  if (absl::Status status = normBackwardShape(op, inputs, outputs, outputGrads,
                                              inputGrads, false, shape);
      !status.ok())
    return status;
  double epsilon = op.getFloat("epsilon", 1e-5);
  const float *dOutput = outputGrads[0].data;
  if (!ctx.training) {
    batchNormInferenceBackward(inputs, dOutput, inputGrads, shape, epsilon);
    return absl::OkStatus();
  }
  if (scratch.size() != 2)
    return absl::InvalidArgumentError(
        op.kind + ": training backward expects the forward's [3, channels] "
                  "and its own [2, channels] scratch buffers");
  BatchStats stats;
  if (absl::Status status = batchStats(op, scratch[0], shape, epsilon, stats);
      !status.ok())
    return status;
  float *sumDyAt;
  int64_t stride;
  if (absl::Status status =
          scratchRows(op, scratch[1], 2, shape, sumDyAt, stride);
      !status.ok())
    return status;
  float *sumDyXhatAt = sumDyAt + stride;
  int64_t held = shape.held();

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
    return absl::OkStatus();
  }
  if (ctx.stage != 1)
    return absl::InvalidArgumentError(op.kind + ": has stages 0 and 1 only");
  if (!inputGrads[Input].data)
    return absl::OkStatus();
  // dx = scale * invStd / n * (n * dy - sum dy - xhat * sum dy * xhat), with
  // n and the sums over the whole batch.
  const float *input = inputs[Input].data;
  const float *scale = channelsOf(inputs[Scale], shape);
  float *dInput = inputGrads[Input].data;
  forEachBlock(shape, [&](int64_t c, int64_t offset) {
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
  return absl::OkStatus();
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

absl::Status layerNormForward(const OpDesc &op, const KernelContext &,
                              const std::vector<TensorView> &inputs,
                              std::vector<TensorView> &outputs,
                              std::vector<TensorView> &) {
  RowShape shape;
  if (absl::Status status = normForwardShape(op, inputs, outputs, shape);
      !status.ok())
    return status;
  double epsilon = op.getFloat("epsilon", 1e-5);
  bool rms = op.getInt("rms", 0) != 0;
  const float *scale = inputs[1].data;
  const float *bias = inputs.size() == 3 ? inputs[2].data : nullptr;
  for (int64_t r = 0; r < shape.rows; ++r) {
    const float *x = inputs[0].data + r * shape.width;
    float *y = outputs[0].data + r * shape.width;
    double mean, invStd;
    rowStats(x, shape.width, epsilon, rms, mean, invStd);
    float m = static_cast<float>(mean), s = static_cast<float>(invStd);
    for (int64_t k = 0; k < shape.width; ++k)
      y[k] = (x[k] - m) * s * scale[k] + (bias ? bias[k] : 0.0f);
  }
  return absl::OkStatus();
}

absl::Status layerNormBackward(const OpDesc &op, const KernelContext &,
                               const std::vector<TensorView> &inputs,
                               const std::vector<TensorView> &outputs,
                               const std::vector<TensorView> &outputGrads,
                               std::vector<TensorView> &inputGrads,
                               std::vector<TensorView> &) {
  RowShape shape;
  if (absl::Status status = normBackwardShape(op, inputs, outputs, outputGrads,
                                              inputGrads, false, shape);
      !status.ok())
    return status;
  double epsilon = op.getFloat("epsilon", 1e-5);
  bool rms = op.getInt("rms", 0) != 0;
  const float *scale = inputs[1].data;
  float *dInput = inputGrads[0].data, *dScale = inputGrads[1].data;
  float *dBias = inputGrads.size() == 3 ? inputGrads[2].data : nullptr;
  int64_t width = shape.width;
  for (int64_t r = 0; r < shape.rows; ++r) {
    const float *x = inputs[0].data + r * width;
    const float *dy = outputGrads[0].data + r * width;
    double mean, invStd;
    rowStats(x, width, epsilon, rms, mean, invStd);
    // dx = invStd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * scale;
    // RMSNorm subtracts no mean, so its dx has no mean(g) term.
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
    double meanG = rms ? 0.0 : sumG / width, meanGXhat = sumGXhat / width;
    float *dx = dInput + r * width;
    for (int64_t k = 0; k < width; ++k) {
      double xhat = (x[k] - mean) * invStd;
      double g = static_cast<double>(dy[k]) * scale[k];
      dx[k] += static_cast<float>(invStd * (g - meanG - xhat * meanGXhat));
    }
  }
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax
//===----------------------------------------------------------------------===//

/// Calls fn(first) for the first element of every line along the axis; the
/// line's elements are first + k * inner.
template <typename Fn> void forEachLine(const AxisShape &shape, Fn &&fn) {
  for (int64_t o = 0; o < shape.outer; ++o)
    for (int64_t i = 0; i < shape.inner; ++i)
      fn(o * shape.size * shape.inner + i);
}

template <bool Log>
absl::Status softmaxForward(const OpDesc &op, const KernelContext &,
                            const std::vector<TensorView> &inputs,
                            std::vector<TensorView> &outputs,
                            std::vector<TensorView> &) {
  AxisShape shape;
  if (absl::Status status = normForwardShape(op, inputs, outputs, shape);
      !status.ok())
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
    return absl::OkStatus();
  }
  forEachLine(shape, [&](int64_t first) {
    softmaxStridedLine(x + first, y + first, shape.size, step, Log);
  });
  return absl::OkStatus();
}

template <bool Log>
absl::Status softmaxBackward(const OpDesc &op, const KernelContext &,
                             const std::vector<TensorView> &inputs,
                             const std::vector<TensorView> &outputs,
                             const std::vector<TensorView> &outputGrads,
                             std::vector<TensorView> &inputGrads,
                             std::vector<TensorView> &) {
  AxisShape shape;
  if (absl::Status status = normBackwardShape(op, inputs, outputs, outputGrads,
                                              inputGrads, true, shape);
      !status.ok())
    return status;
  float *dx = inputGrads[0].data;
  if (!dx)
    return absl::OkStatus();
  const float *y = outputs[0].data, *dy = outputGrads[0].data;
  int64_t step = shape.inner;
  forEachLine(shape, [&](int64_t first) {
    softmaxGradLine(y + first, dy + first, dx + first, shape.size, step, Log);
  });
  return absl::OkStatus();
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
