//===- NormKernels.cu - batch/layer norm, softmax on boxes, on the GPU ----===//
//
// The cpu kernels' semantics (runtime/cpu/NormKernels.cpp), per element or
// per row on the device:
//  - batch_norm in training is staged (Kernels.h):
//      forward  stage 0 writes the local [sum; sum of squares; count] of each
//               held channel into the [3, C] scratch (zeros elsewhere);
//               stage 1 normalizes with the summed statistics and updates
//               the running mean/variance in place;
//      backward stage 0 writes the local [sum dy; sum dy * xhat] into its
//               own [2, C] scratch and adds the local dscale/dbias; stage 1
//               computes dx from the summed sums.
//    Channel sums go in two deterministic steps: one thread per (sample,
//    channel) block sums its spatial elements (in double, as the cpu
//    kernel), then one thread per channel adds the blocks in sample order.
//    Inference uses the running statistics (and takes their gradients).
//  - layer_norm, softmax and log_softmax never split the dims they
//    normalize over: one thread per row (line) computes its statistics, and
//    elementwise passes use them.
// Host code checks the boxes and attributes with the cpu kernels' code
// (NormShapes.h) before anything is enqueued. Not checked: batch_norm's
// "batch statistics over no elements" (the summed count is device data).
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"
#include "NormShapes.h"

#include <cmath>
#include <string>
#include <vector>

namespace ppc::runtime::cuda {

namespace {

using Views = std::vector<KernelView>;

/// `n` doubles of the kernel's workspace, or null.
double *workspaceDoubles(ExecContext &exec, int64_t n) {
  if (!exec.workspace)
    return nullptr;
  return reinterpret_cast<double *>(
      exec.workspace->floats(2 * std::max<int64_t>(n, 1)));
}

KernelStatus outOfMemory(const OpDesc &op) {
  return op.kind + ": out of device memory for its workspace";
}

//===----------------------------------------------------------------------===//
// batch_norm
//===----------------------------------------------------------------------===//

/// Per held channel, 4 doubles: mean, biased variance, 1 / sqrt(variance +
/// epsilon), count.
constexpr int kStats = 4;

/// Batch statistics from the summed [sum; sum of squares; count] rows.
void batchStats(Stream stream, const float *rows, int64_t stride, int64_t held,
                double epsilon, double *stats) {
  launch(stream, held, [=] PPC_HD(int64_t c) {
    double *s = stats + kStats * c;
    s[3] = rows[2 * stride + c];
    batchMoments(rows[c], rows[stride + c], s[3], epsilon, s[0], s[1], s[2]);
  });
}

/// Inference statistics: the running mean and variance.
void runningStats(Stream stream, const float *mean, const float *variance,
                  int64_t held, double epsilon, double *stats) {
  launch(stream, held, [=] PPC_HD(int64_t c) {
    double *s = stats + kStats * c;
    s[0] = mean[c];
    s[1] = variance[c];
    s[2] = 1.0 / sqrt(static_cast<double>(variance[c]) + epsilon);
    s[3] = 0.0;
  });
}

/// y = (x - mean) * invStd * scale + bias over the input box.
void normalizeChannels(Stream stream, const float *x, const float *scale,
                       const float *bias, const double *stats,
                       BatchNormShape shape, float *y) {
  const int64_t held = shape.held(), spatial = shape.spatial;
  launch(stream, shape.samples * held * spatial, [=] PPC_HD(int64_t i) {
    const int64_t c = (i / spatial) % held;
    const double *s = stats + kStats * c;
    const float mul = static_cast<float>(s[2] * scale[c]);
    const float add = static_cast<float>(bias[c] - s[0] * mul);
    y[i] = x[i] * mul + add;
  });
}

/// Per (sample, channel) block: [sum x, sum x^2] (dy == null) or [sum dy,
/// sum dy * xhat] with the statistics `stats`, in double.
void blockSums(Stream stream, const float *x, const float *dy,
               const double *stats, BatchNormShape shape, double *blocks) {
  const int64_t held = shape.held(), spatial = shape.spatial;
  launch(stream, shape.samples * held, [=] PPC_HD(int64_t b) {
    const int64_t c = b % held;
    const float *xb = x + b * spatial;
    double s = 0, q = 0;
    if (!dy) {
      for (int64_t k = 0; k < spatial; ++k) {
        const double v = xb[k];
        s += v;
        q += v * v;
      }
    } else {
      const float *dyb = dy + b * spatial;
      const double mean = stats[kStats * c], invStd = stats[kStats * c + 2];
      for (int64_t k = 0; k < spatial; ++k) {
        const double g = dyb[k];
        s += g;
        q += g * (xb[k] - mean) * invStd;
      }
    }
    blocks[2 * b] = s;
    blocks[2 * b + 1] = q;
  });
}

/// Forward stage 0: the channel sums of the blocks into the scratch rows.
void writeStatistics(Stream stream, const double *blocks, BatchNormShape shape,
                     float *rows, int64_t stride) {
  const int64_t held = shape.held(), samples = shape.samples;
  const float count = static_cast<float>(shape.samples * shape.spatial);
  launch(stream, held, [=] PPC_HD(int64_t c) {
    double s = 0, q = 0;
    for (int64_t n = 0; n < samples; ++n) {
      s += blocks[2 * (n * held + c)];
      q += blocks[2 * (n * held + c) + 1];
    }
    rows[c] = static_cast<float>(s);
    rows[stride + c] = static_cast<float>(q);
    rows[2 * stride + c] = count;
  });
}

/// Forward stage 1: the running statistics' update.
void updateRunning(Stream stream, const double *stats, int64_t held,
                   double momentum, float *runningMean,
                   float *runningVariance) {
  launch(stream, held, [=] PPC_HD(int64_t c) {
    const double *s = stats + kStats * c;
    updateRunningStats(momentum, s[0], s[1], s[3], runningMean[c],
                       runningVariance[c]);
  });
}

/// Backward: channel sums of the blocks [sum dy; sum dy * xhat]; written to
/// the scratch rows (training, `rows` not null), added to dscale/dbias, and
/// in inference to the running statistics' gradients.
void gradChannels(Stream stream, const double *blocks, const double *stats,
                  BatchNormShape shape, const float *scale, float *rows,
                  int64_t stride, float *dScale, float *dBias, float *dMean,
                  float *dVariance) {
  const int64_t held = shape.held(), samples = shape.samples;
  launch(stream, held, [=] PPC_HD(int64_t c) {
    double sumDy = 0, sumDyXhat = 0;
    for (int64_t n = 0; n < samples; ++n) {
      sumDy += blocks[2 * (n * held + c)];
      sumDyXhat += blocks[2 * (n * held + c) + 1];
    }
    if (rows) {
      rows[c] = static_cast<float>(sumDy);
      rows[stride + c] = static_cast<float>(sumDyXhat);
    }
    if (dScale)
      dScale[c] += static_cast<float>(sumDyXhat);
    if (dBias)
      dBias[c] += static_cast<float>(sumDy);
    addRunningStatGrads(sumDy, sumDyXhat, stats[kStats * c + 2], scale[c],
                        dMean ? dMean + c : nullptr,
                        dVariance ? dVariance + c : nullptr);
  });
}

/// Inference backward: dx += dy * invStd * scale.
void inferenceInputGrad(Stream stream, const float *dy, const float *scale,
                        const double *stats, BatchNormShape shape, float *dx) {
  const int64_t held = shape.held(), spatial = shape.spatial;
  launch(stream, shape.samples * held * spatial, [=] PPC_HD(int64_t i) {
    const int64_t c = (i / spatial) % held;
    const float mul = static_cast<float>(stats[kStats * c + 2] * scale[c]);
    dx[i] += dy[i] * mul;
  });
}

/// Training backward stage 1: dx = scale * invStd / n * (n * dy - sum dy -
/// xhat * sum dy * xhat), n and the sums over the whole batch.
void trainingInputGrad(Stream stream, const float *x, const float *dy,
                       const float *scale, const double *stats,
                       const float *rows, int64_t stride, BatchNormShape shape,
                       float *dx) {
  const int64_t held = shape.held(), spatial = shape.spatial;
  launch(stream, shape.samples * held * spatial, [=] PPC_HD(int64_t i) {
    const int64_t c = (i / spatial) % held;
    const double *s = stats + kStats * c;
    const double n = s[3], invStd = s[2];
    const float mul = static_cast<float>(scale[c] * invStd);
    const float meanDy = static_cast<float>(rows[c] / n);
    const float meanDyXhat = static_cast<float>(rows[stride + c] / n);
    const float mean = static_cast<float>(s[0]);
    const float inv = static_cast<float>(invStd);
    const float xhat = (x[i] - mean) * inv;
    dx[i] += mul * (dy[i] - meanDy - xhat * meanDyXhat);
  });
}

KernelStatus batchNormForward(const OpDesc &op, const KernelContext &ctx,
                              ExecContext &exec, const Views &inputs,
                              const Views &outputs, const Views &scratch) {
  BatchNormShape shape;
  if (KernelStatus status = normForwardShape(op, inputs, outputs, shape);
      !status.empty())
    return status;
  const double epsilon = op.getFloat("epsilon", 1e-5);
  const int64_t held = shape.held();
  const float *x = inputs[Input].data;
  if (!ctx.training) {
    double *stats = workspaceDoubles(exec, kStats * held);
    if (!stats)
      return outOfMemory(op);
    runningStats(exec.stream, channelsOf(inputs[Mean], shape),
                 channelsOf(inputs[Variance], shape), held, epsilon, stats);
    normalizeChannels(exec.stream, x, channelsOf(inputs[Scale], shape),
                      channelsOf(inputs[Bias], shape), stats, shape,
                      outputs[0].data);
    return "";
  }
  if (scratch.size() != 1)
    return op.kind + ": training expects one [3, channels] scratch buffer";
  float *rows;
  int64_t stride;
  if (KernelStatus status = scratchRows(op, scratch[0], 3, shape, rows, stride);
      !status.empty())
    return status;

  if (ctx.stage == 0) {
    double *blocks = workspaceDoubles(exec, 2 * shape.samples * held);
    if (!blocks)
      return outOfMemory(op);
    // Channels this partition does not hold contribute zeros to the sum.
    zeroFloats(exec.stream, scratch[0].data, scratch[0].numElements());
    blockSums(exec.stream, x, nullptr, nullptr, shape, blocks);
    writeStatistics(exec.stream, blocks, shape, rows, stride);
    return "";
  }
  if (ctx.stage != 1)
    return op.kind + ": has stages 0 and 1 only";

  double *stats = workspaceDoubles(exec, kStats * held);
  if (!stats)
    return outOfMemory(op);
  batchStats(exec.stream, rows, stride, held, epsilon, stats);
  normalizeChannels(exec.stream, x, channelsOf(inputs[Scale], shape),
                    channelsOf(inputs[Bias], shape), stats, shape,
                    outputs[0].data);
  updateRunning(exec.stream, stats, held, op.getFloat("momentum", 0.9),
                channelsOf(inputs[Mean], shape),
                channelsOf(inputs[Variance], shape));
  return "";
}

KernelStatus batchNormBackward(const OpDesc &op, const KernelContext &ctx,
                               ExecContext &exec, const Views &inputs,
                               const Views &outputs, const Views &outputGrads,
                               const Views &inputGrads, const Views &scratch) {
  BatchNormShape shape;
  if (KernelStatus status = normBackwardShape(op, inputs, outputs, outputGrads,
                                              inputGrads, false, shape);
      !status.empty())
    return status;
  const double epsilon = op.getFloat("epsilon", 1e-5);
  const int64_t held = shape.held();
  const float *x = inputs[Input].data, *dy = outputGrads[0].data;
  const float *scale = channelsOf(inputs[Scale], shape);
  float *dScale = channelsOf(inputGrads[Scale], shape);
  float *dBias = channelsOf(inputGrads[Bias], shape);
  if (!ctx.training) {
    double *stats = workspaceDoubles(exec, kStats * held);
    double *blocks = workspaceDoubles(exec, 2 * shape.samples * held);
    if (!stats || !blocks)
      return outOfMemory(op);
    runningStats(exec.stream, channelsOf(inputs[Mean], shape),
                 channelsOf(inputs[Variance], shape), held, epsilon, stats);
    blockSums(exec.stream, x, dy, stats, shape, blocks);
    gradChannels(exec.stream, blocks, stats, shape, scale, nullptr, 0, dScale,
                 dBias, channelsOf(inputGrads[Mean], shape),
                 channelsOf(inputGrads[Variance], shape));
    if (inputGrads[Input].data)
      inferenceInputGrad(exec.stream, dy, scale, stats, shape,
                         inputGrads[Input].data);
    return "";
  }
  if (scratch.size() != 2)
    return op.kind + ": training backward expects the forward's [3, channels] "
                     "and its own [2, channels] scratch buffers";
  float *statRows, *gradRows;
  int64_t statStride, gradStride;
  if (KernelStatus status =
          scratchRows(op, scratch[0], 3, shape, statRows, statStride);
      !status.empty())
    return status;
  if (KernelStatus status =
          scratchRows(op, scratch[1], 2, shape, gradRows, gradStride);
      !status.empty())
    return status;
  if (ctx.stage != 0 && ctx.stage != 1)
    return op.kind + ": has stages 0 and 1 only";
  if (ctx.stage == 1 && !inputGrads[Input].data)
    return "";
  double *stats = workspaceDoubles(exec, kStats * held);
  if (!stats)
    return outOfMemory(op);
  batchStats(exec.stream, statRows, statStride, held, epsilon, stats);

  if (ctx.stage == 0) {
    double *blocks = workspaceDoubles(exec, 2 * shape.samples * held);
    if (!blocks)
      return outOfMemory(op);
    blockSums(exec.stream, x, dy, stats, shape, blocks);
    zeroFloats(exec.stream, scratch[1].data, scratch[1].numElements());
    // The mean and variance are batch statistics in training: the running
    // statistics get no gradient.
    gradChannels(exec.stream, blocks, stats, shape, scale, gradRows, gradStride,
                 dScale, dBias, nullptr, nullptr);
    return "";
  }
  trainingInputGrad(exec.stream, x, dy, scale, stats, gradRows, gradStride,
                    shape, inputGrads[Input].data);
  return "";
}

//===----------------------------------------------------------------------===//
// layer_norm
//===----------------------------------------------------------------------===//

KernelStatus layerNormForward(const OpDesc &op, const KernelContext &,
                              ExecContext &exec, const Views &inputs,
                              const Views &outputs, const Views &) {
  RowShape shape;
  if (KernelStatus status = normForwardShape(op, inputs, outputs, shape);
      !status.empty())
    return status;
  const double epsilon = op.getFloat("epsilon", 1e-5);
  const bool rms = op.getInt("rms", 0) != 0;
  const int64_t rows = shape.rows, width = shape.width;
  double *stats = workspaceDoubles(exec, 2 * rows);
  if (!stats)
    return outOfMemory(op);
  const float *x = inputs[0].data, *scale = inputs[1].data;
  const float *bias = inputs.size() == 3 ? inputs[2].data : nullptr;
  float *y = outputs[0].data;
  launch(exec.stream, rows, [=] PPC_HD(int64_t r) {
    rowStats(x + r * width, width, epsilon, rms, stats[2 * r],
             stats[2 * r + 1]);
  });
  launch(exec.stream, rows * width, [=] PPC_HD(int64_t i) {
    const int64_t r = i / width, k = i % width;
    const float m = static_cast<float>(stats[2 * r]);
    const float s = static_cast<float>(stats[2 * r + 1]);
    y[i] = (x[i] - m) * s * scale[k] + (bias ? bias[k] : 0.0f);
  });
  return "";
}

KernelStatus layerNormBackward(const OpDesc &op, const KernelContext &,
                               ExecContext &exec, const Views &inputs,
                               const Views &outputs, const Views &outputGrads,
                               const Views &inputGrads, const Views &) {
  RowShape shape;
  if (KernelStatus status = normBackwardShape(op, inputs, outputs, outputGrads,
                                              inputGrads, false, shape);
      !status.empty())
    return status;
  const double epsilon = op.getFloat("epsilon", 1e-5);
  const bool rms = op.getInt("rms", 0) != 0;
  const int64_t rows = shape.rows, width = shape.width;
  const float *x = inputs[0].data, *scale = inputs[1].data;
  const float *dy = outputGrads[0].data;
  float *dInput = inputGrads[0].data, *dScale = inputGrads[1].data;
  float *dBias = inputGrads.size() == 3 ? inputGrads[2].data : nullptr;
  // Per row: mean, invStd, mean(g), mean(g * xhat) with g = dy * scale.
  double *stats = workspaceDoubles(exec, 4 * rows);
  if (!stats)
    return outOfMemory(op);
  launch(exec.stream, rows, [=] PPC_HD(int64_t r) {
    const float *xr = x + r * width, *dyr = dy + r * width;
    double mean, invStd;
    rowStats(xr, width, epsilon, rms, mean, invStd);
    double sumG = 0, sumGXhat = 0;
    for (int64_t k = 0; k < width; ++k) {
      const double xhat = (xr[k] - mean) * invStd;
      const double g = static_cast<double>(dyr[k]) * scale[k];
      sumG += g;
      sumGXhat += g * xhat;
    }
    double *s = stats + 4 * r;
    s[0] = mean;
    s[1] = invStd;
    s[2] = rms ? 0.0 : sumG / width; // RMSNorm's dx has no mean(g) term
    s[3] = sumGXhat / width;
  });
  // dscale and dbias sum over the rows: one thread per column, rows in
  // order, as the cpu kernel adds them.
  if (dScale || dBias)
    launch(exec.stream, width, [=] PPC_HD(int64_t k) {
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t at = r * width + k;
        const double xhat = (x[at] - stats[4 * r]) * stats[4 * r + 1];
        if (dScale)
          dScale[k] += static_cast<float>(dy[at] * xhat);
        if (dBias)
          dBias[k] += dy[at];
      }
    });
  // dx = invStd * (g - mean(g) - xhat * mean(g * xhat)).
  if (dInput)
    launch(exec.stream, rows * width, [=] PPC_HD(int64_t i) {
      const int64_t r = i / width, k = i % width;
      const double *s = stats + 4 * r;
      const double xhat = (x[i] - s[0]) * s[1];
      const double g = static_cast<double>(dy[i]) * scale[k];
      dInput[i] += static_cast<float>(s[1] * (g - s[2] - xhat * s[3]));
    });
  return "";
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax
//===----------------------------------------------------------------------===//

/// One thread per line along the axis (line l: outer l / inner, inner
/// l % inner; elements first + k * inner).
void softmaxLines(Stream stream, AxisShape shape, bool isLog, const float *x,
                  float *y) {
  const int64_t size = shape.size, step = shape.inner;
  launch(stream, shape.outer * shape.inner, [=] PPC_HD(int64_t l) {
    const int64_t first = (l / step) * size * step + l % step;
    const float *line = x + first;
    float *out = y + first;
    if (step != 1) {
      softmaxStridedLine(line, out, size, step, isLog);
      return;
    }
    // The usual last axis: float exponentials.
    float max = line[0];
    for (int64_t k = 1; k < size; ++k)
      if (max < line[k])
        max = line[k];
    double sum = 0;
    for (int64_t k = 0; k < size; ++k) {
      out[k] = expf(line[k] - max);
      sum += out[k];
    }
    if (isLog) {
      const float logSum = static_cast<float>(::log(sum));
      for (int64_t k = 0; k < size; ++k)
        out[k] = (line[k] - max) - logSum;
    } else {
      const float scale = static_cast<float>(1.0 / sum);
      for (int64_t k = 0; k < size; ++k)
        out[k] *= scale;
    }
  });
}

/// softmax: dx += y * (dy - sum dy * y); log_softmax: dx += dy - e^y sum dy.
void softmaxGradLines(Stream stream, AxisShape shape, bool isLog,
                      const float *y, const float *dy, float *dx) {
  const int64_t size = shape.size, step = shape.inner;
  launch(stream, shape.outer * shape.inner, [=] PPC_HD(int64_t l) {
    const int64_t first = (l / step) * size * step + l % step;
    softmaxGradLine(y + first, dy + first, dx + first, size, step, isLog);
  });
}

template <bool Log>
KernelStatus softmaxForward(const OpDesc &op, const KernelContext &,
                            ExecContext &exec, const Views &inputs,
                            const Views &outputs, const Views &) {
  AxisShape shape;
  if (KernelStatus status = normForwardShape(op, inputs, outputs, shape);
      !status.empty())
    return status;
  softmaxLines(exec.stream, shape, Log, inputs[0].data, outputs[0].data);
  return "";
}

template <bool Log>
KernelStatus softmaxBackward(const OpDesc &op, const KernelContext &,
                             ExecContext &exec, const Views &inputs,
                             const Views &outputs, const Views &outputGrads,
                             const Views &inputGrads, const Views &) {
  AxisShape shape;
  if (KernelStatus status = normBackwardShape(op, inputs, outputs, outputGrads,
                                              inputGrads, true, shape);
      !status.empty())
    return status;
  if (!inputGrads[0].data)
    return "";
  softmaxGradLines(exec.stream, shape, Log, outputs[0].data,
                   outputGrads[0].data, inputGrads[0].data);
  return "";
}

} // namespace

void registerNormKernels(CudaKernelTable &t) {
  t["ppc.batch_norm"] = {batchNormForward, batchNormBackward};
  t["ppc.layer_norm"] = {layerNormForward, layerNormBackward};
  t["ppc.softmax"] = {softmaxForward<false>, softmaxBackward<false>};
  t["ppc.log_softmax"] = {softmaxForward<true>, softmaxBackward<true>};
}

} // namespace ppc::runtime::cuda
