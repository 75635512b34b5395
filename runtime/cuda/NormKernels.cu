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
//    Channel sums go in two deterministic steps: a row reduction per
//    (sample, channel) block sums its spatial elements (in double, as the
//    cpu kernel), then one thread per channel adds the blocks in sample
//    order. The per-element passes (normalizing, dx) run the same blocks,
//    each computing its channel's coefficients once. Inference uses the
//    running statistics (and takes their gradients).
//  - layer_norm (and RMS norm), softmax and log_softmax never split the
//    dims they normalize over: a block of threads per row (Reductions.h)
//    takes its statistics and writes the row in one kernel; the backward of
//    layer_norm writes each row's dx the same way and sums dscale and dbias
//    over the rows in chunks (sumColumns). Softmax along an axis that is not
//    the last runs a thread per line.
// Every kernel reads and writes its views as stored (native: bf16 in, bf16
// out, float in registers).
// Host code checks the boxes and attributes with the cpu kernels' code
// (NormShapes.h) before anything is enqueued. Not checked: batch_norm's
// "batch statistics over no elements" (the summed count is device data).
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"
#include "NormShapes.h"
#include "Reductions.h"

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

absl::Status outOfMemory(const OpDesc &op) {
  return absl::ResourceExhaustedError(
      op.kind + ": out of device memory for its workspace");
}

//===----------------------------------------------------------------------===//
// batch_norm
//===----------------------------------------------------------------------===//

/// Per held channel, 4 doubles: mean, biased variance, 1 / sqrt(variance +
/// epsilon), count.
constexpr int kStats = 4;

/// The held channels of a per-channel view (null if absent).
Elements channelElements(const KernelView &view, const BatchNormShape &shape) {
  return view.elements ? view.elements + (shape.cLo - view.lo[0]) : Elements();
}

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
void runningStats(Stream stream, Elements mean, Elements variance, int64_t held,
                  double epsilon, double *stats) {
  launch(stream, held, [=] PPC_HD(int64_t c) {
    double *s = stats + kStats * c;
    s[0] = mean[c];
    s[1] = variance[c];
    s[2] = 1.0 / sqrt(static_cast<double>(variance[c]) + epsilon);
    s[3] = 0.0;
  });
}

/// fn(threads, c, first) for every (sample, channel) block of `spatial`
/// contiguous elements from element `first`, channel c: the block's
/// threads take its elements, so a channel's coefficients are computed
/// once per block, not per element (no division by the spatial size).
template <typename Fn>
void forEachChannelBlock(Stream stream, const BatchNormShape &shape, Fn fn) {
  const int64_t held = shape.held(), spatial = shape.spatial;
  launchRows(stream, shape.samples * held, spatial,
             [=] PPC_HD(const RowThreads &t, int64_t b) {
               fn(t, b % held, b * spatial);
             });
}

/// y = (x - mean) * invStd * scale + bias over the input box.
void normalizeChannels(Stream stream, Elements x, Elements scale, Elements bias,
                       const double *stats, BatchNormShape shape, Elements y) {
  const int64_t spatial = shape.spatial;
  forEachChannelBlock(
      stream, shape, [=] PPC_HD(const RowThreads &t, int64_t c, int64_t first) {
        const double *s = stats + kStats * c;
        const float mul = static_cast<float>(s[2] * scale[c]);
        const float add = static_cast<float>(bias[c] - s[0] * mul);
        for (int64_t k = t.thread; k < spatial; k += t.threads)
          y[first + k] = x[first + k] * mul + add;
      });
}

/// Per (sample, channel) block of `spatial` contiguous elements: [sum x,
/// sum x^2] (dy null) or [sum dy, sum dy * xhat] with the statistics
/// `stats`, in double; a row reduction per block.
void blockSums(Stream stream, Elements x, Elements dy, const double *stats,
               BatchNormShape shape, double *blocks) {
  const int64_t held = shape.held(), spatial = shape.spatial;
  launchRows(stream, shape.samples * held, spatial,
             [=] PPC_HD(const RowThreads &t, int64_t b) {
               const int64_t c = b % held, first = b * spatial;
               double s = 0, q = 0;
               if (!dy) {
                 for (int64_t k = t.thread; k < spatial; k += t.threads) {
                   const double v = x[first + k];
                   s += v;
                   q += v * v;
                 }
               } else {
                 const double mean = stats[kStats * c],
                              invStd = stats[kStats * c + 2];
                 for (int64_t k = t.thread; k < spatial; k += t.threads) {
                   const double g = dy[first + k];
                   s += g;
                   q += g * (x[first + k] - mean) * invStd;
                 }
               }
               s = t.sum(s);
               q = t.sum(q);
               if (t.thread == 0) {
                 blocks[2 * b] = s;
                 blocks[2 * b + 1] = q;
               }
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
                   double momentum, Elements runningMean,
                   Elements runningVariance) {
  launch(stream, held, [=] PPC_HD(int64_t c) {
    const double *s = stats + kStats * c;
    float mean = runningMean[c], variance = runningVariance[c];
    updateRunningStats(momentum, s[0], s[1], s[3], mean, variance);
    runningMean[c] = mean;
    runningVariance[c] = variance;
  });
}

/// Backward: channel sums of the blocks [sum dy; sum dy * xhat]; written to
/// the scratch rows (training, `rows` not null), added to dscale/dbias, and
/// in inference to the running statistics' gradients.
void gradChannels(Stream stream, const double *blocks, const double *stats,
                  BatchNormShape shape, Elements scale, float *rows,
                  int64_t stride, Elements dScale, Elements dBias,
                  Elements dMean, Elements dVariance) {
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
    float gradMean = 0, gradVariance = 0;
    addRunningStatGrads(sumDy, sumDyXhat, stats[kStats * c + 2], scale[c],
                        &gradMean, &gradVariance);
    if (dMean)
      dMean[c] += gradMean;
    if (dVariance)
      dVariance[c] += gradVariance;
  });
}

/// Inference backward: dx += dy * invStd * scale.
void inferenceInputGrad(Stream stream, Elements dy, Elements scale,
                        const double *stats, BatchNormShape shape,
                        Elements dx) {
  const int64_t spatial = shape.spatial;
  forEachChannelBlock(
      stream, shape, [=] PPC_HD(const RowThreads &t, int64_t c, int64_t first) {
        const float mul = static_cast<float>(stats[kStats * c + 2] * scale[c]);
        for (int64_t k = t.thread; k < spatial; k += t.threads)
          dx[first + k] += dy[first + k] * mul;
      });
}

/// Training backward stage 1: dx = scale * invStd / n * (n * dy - sum dy -
/// xhat * sum dy * xhat), n and the sums over the whole batch.
void trainingInputGrad(Stream stream, Elements x, Elements dy, Elements scale,
                       const double *stats, const float *rows, int64_t stride,
                       BatchNormShape shape, Elements dx) {
  const int64_t spatial = shape.spatial;
  forEachChannelBlock(
      stream, shape, [=] PPC_HD(const RowThreads &t, int64_t c, int64_t first) {
        const double *s = stats + kStats * c;
        const double n = s[3], invStd = s[2];
        const float mul = static_cast<float>(scale[c] * invStd);
        const float meanDy = static_cast<float>(rows[c] / n);
        const float meanDyXhat = static_cast<float>(rows[stride + c] / n);
        const float mean = static_cast<float>(s[0]);
        const float inv = static_cast<float>(invStd);
        for (int64_t k = t.thread; k < spatial; k += t.threads) {
          const float xhat = (x[first + k] - mean) * inv;
          dx[first + k] += mul * (dy[first + k] - meanDy - xhat * meanDyXhat);
        }
      });
}

absl::Status batchNormForward(const OpDesc &op, const KernelContext &ctx,
                              ExecContext &exec, const Views &inputs,
                              const Views &outputs, const Views &scratch) {
  BatchNormShape shape;
  if (absl::Status status = normForwardShape(op, inputs, outputs, shape);
      !status.ok())
    return status;
  const double epsilon = op.getFloat("epsilon", 1e-5);
  const int64_t held = shape.held();
  const Elements x = inputs[Input].elements;
  if (!ctx.training) {
    double *stats = workspaceDoubles(exec, kStats * held);
    if (!stats)
      return outOfMemory(op);
    runningStats(exec.stream, channelElements(inputs[Mean], shape),
                 channelElements(inputs[Variance], shape), held, epsilon,
                 stats);
    normalizeChannels(exec.stream, x, channelElements(inputs[Scale], shape),
                      channelElements(inputs[Bias], shape), stats, shape,
                      outputs[0].elements);
    return absl::OkStatus();
  }
  if (scratch.size() != 1)
    return absl::InvalidArgumentError(
        op.kind + ": training expects one [3, channels] scratch buffer");
  float *rows;
  int64_t stride;
  if (absl::Status status = scratchRows(op, scratch[0], 3, shape, rows, stride);
      !status.ok())
    return status;

  if (ctx.stage == 0) {
    double *blocks = workspaceDoubles(exec, 2 * shape.samples * held);
    if (!blocks)
      return outOfMemory(op);
    // Channels this partition does not hold contribute zeros to the sum.
    zeroFloats(exec.stream, scratch[0].data, scratch[0].numElements());
    blockSums(exec.stream, x, Elements(), nullptr, shape, blocks);
    writeStatistics(exec.stream, blocks, shape, rows, stride);
    return absl::OkStatus();
  }
  if (ctx.stage != 1)
    return absl::InvalidArgumentError(op.kind + ": has stages 0 and 1 only");

  double *stats = workspaceDoubles(exec, kStats * held);
  if (!stats)
    return outOfMemory(op);
  batchStats(exec.stream, rows, stride, held, epsilon, stats);
  normalizeChannels(exec.stream, x, channelElements(inputs[Scale], shape),
                    channelElements(inputs[Bias], shape), stats, shape,
                    outputs[0].elements);
  updateRunning(exec.stream, stats, held, op.getFloat("momentum", 0.9),
                channelElements(inputs[Mean], shape),
                channelElements(inputs[Variance], shape));
  return absl::OkStatus();
}

absl::Status batchNormBackward(const OpDesc &op, const KernelContext &ctx,
                               ExecContext &exec, const Views &inputs,
                               const Views &outputs, const Views &outputGrads,
                               const Views &inputGrads, const Views &scratch) {
  BatchNormShape shape;
  if (absl::Status status = normBackwardShape(op, inputs, outputs, outputGrads,
                                              inputGrads, false, shape);
      !status.ok())
    return status;
  const double epsilon = op.getFloat("epsilon", 1e-5);
  const int64_t held = shape.held();
  const Elements x = inputs[Input].elements, dy = outputGrads[0].elements;
  const Elements scale = channelElements(inputs[Scale], shape);
  const Elements dScale = channelElements(inputGrads[Scale], shape);
  const Elements dBias = channelElements(inputGrads[Bias], shape);
  const Elements dx = inputGrads[Input].elements;
  if (!ctx.training) {
    double *stats = workspaceDoubles(exec, kStats * held);
    double *blocks = workspaceDoubles(exec, 2 * shape.samples * held);
    if (!stats || !blocks)
      return outOfMemory(op);
    runningStats(exec.stream, channelElements(inputs[Mean], shape),
                 channelElements(inputs[Variance], shape), held, epsilon,
                 stats);
    blockSums(exec.stream, x, dy, stats, shape, blocks);
    gradChannels(exec.stream, blocks, stats, shape, scale, nullptr, 0, dScale,
                 dBias, channelElements(inputGrads[Mean], shape),
                 channelElements(inputGrads[Variance], shape));
    if (dx)
      inferenceInputGrad(exec.stream, dy, scale, stats, shape, dx);
    return absl::OkStatus();
  }
  if (scratch.size() != 2)
    return absl::InvalidArgumentError(
        op.kind + ": training backward expects the forward's [3, channels] "
                  "and its own [2, channels] scratch buffers");
  float *statRows, *gradRows;
  int64_t statStride, gradStride;
  if (absl::Status status =
          scratchRows(op, scratch[0], 3, shape, statRows, statStride);
      !status.ok())
    return status;
  if (absl::Status status =
          scratchRows(op, scratch[1], 2, shape, gradRows, gradStride);
      !status.ok())
    return status;
  if (ctx.stage != 0 && ctx.stage != 1)
    return absl::InvalidArgumentError(op.kind + ": has stages 0 and 1 only");
  if (ctx.stage == 1 && !dx)
    return absl::OkStatus();
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
                 dScale, dBias, Elements(), Elements());
    return absl::OkStatus();
  }
  trainingInputGrad(exec.stream, x, dy, scale, stats, gradRows, gradStride,
                    shape, dx);
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// layer_norm
//===----------------------------------------------------------------------===//

/// The mean (0 for RMSNorm) and 1 / sqrt(variance + epsilon) of one row,
/// in double over the row's threads: the cpu kernel's two passes (rowStats).
PPC_HD inline void rowMoments(const RowThreads &t, Elements row, int64_t width,
                              double epsilon, bool rms, double &mean,
                              double &invStd) {
  double sum = 0;
  if (!rms)
    for (int64_t k = t.thread; k < width; k += t.threads)
      sum += row[k];
  mean = rms ? 0.0 : t.sum(sum) / width;
  double squares = 0;
  for (int64_t k = t.thread; k < width; k += t.threads) {
    const double d = row[k] - mean;
    squares += d * d;
  }
  invStd = 1.0 / sqrt(t.sum(squares) / width + epsilon);
}

absl::Status layerNormForward(const OpDesc &op, const KernelContext &,
                              ExecContext &exec, const Views &inputs,
                              const Views &outputs, const Views &) {
  RowShape shape;
  if (absl::Status status = normForwardShape(op, inputs, outputs, shape);
      !status.ok())
    return status;
  const double epsilon = op.getFloat("epsilon", 1e-5);
  const bool rms = op.getInt("rms", 0) != 0;
  const int64_t width = shape.width;
  const Elements x = inputs[0].elements, scale = inputs[1].elements;
  const Elements bias = inputs.size() == 3 ? inputs[2].elements : Elements();
  const Elements y = outputs[0].elements;
  // One block per row: its statistics, then the row normalized.
  launchRows(exec.stream, shape.rows, width,
             [=] PPC_HD(const RowThreads &t, int64_t r) {
               const Elements xr = x + r * width, yr = y + r * width;
               double mean, invStd;
               rowMoments(t, xr, width, epsilon, rms, mean, invStd);
               const float m = static_cast<float>(mean);
               const float s = static_cast<float>(invStd);
               for (int64_t k = t.thread; k < width; k += t.threads)
                 yr[k] = (xr[k] - m) * s * scale[k] + (bias ? bias[k] : 0.0f);
             });
  return absl::OkStatus();
}

absl::Status layerNormBackward(const OpDesc &op, const KernelContext &,
                               ExecContext &exec, const Views &inputs,
                               const Views &outputs, const Views &outputGrads,
                               const Views &inputGrads, const Views &) {
  RowShape shape;
  if (absl::Status status = normBackwardShape(op, inputs, outputs, outputGrads,
                                              inputGrads, false, shape);
      !status.ok())
    return status;
  const double epsilon = op.getFloat("epsilon", 1e-5);
  const bool rms = op.getInt("rms", 0) != 0;
  const int64_t rows = shape.rows, width = shape.width;
  const Elements x = inputs[0].elements, scale = inputs[1].elements;
  const Elements dy = outputGrads[0].elements;
  const Elements dInput = inputGrads[0].elements,
                 dScale = inputGrads[1].elements;
  const Elements dBias =
      inputGrads.size() == 3 ? inputGrads[2].elements : Elements();
  // Overwritten gradients: every element is written (the rows, and every
  // column of the whole scale and bias).
  const bool setInput = writesGradient(exec, inputGrads[0], true);
  const bool setScale = writesGradient(exec, inputGrads[1], true);
  const bool setBias =
      inputGrads.size() == 3 && writesGradient(exec, inputGrads[2], true);
  // Per row: mean and invStd, kept for the weight gradients.
  double *stats = workspaceDoubles(exec, 2 * rows);
  if (!stats)
    return outOfMemory(op);
  // One block per row: its statistics, the sums of g = dy * scale, and
  // dx = invStd * (g - mean(g) - xhat * mean(g * xhat)) (RMSNorm's dx has
  // no mean(g) term).
  launchRows(
      exec.stream, rows, width, [=] PPC_HD(const RowThreads &t, int64_t r) {
        const Elements xr = x + r * width, dyr = dy + r * width;
        double mean, invStd;
        rowMoments(t, xr, width, epsilon, rms, mean, invStd);
        if (t.thread == 0) {
          stats[2 * r] = mean;
          stats[2 * r + 1] = invStd;
        }
        if (!dInput)
          return; // every thread alike: no reduction is left
        double sumG = 0, sumGXhat = 0;
        for (int64_t k = t.thread; k < width; k += t.threads) {
          const double xhat = (xr[k] - mean) * invStd;
          const double g = static_cast<double>(dyr[k]) * scale[k];
          sumG += g;
          sumGXhat += g * xhat;
        }
        const double meanG = rms ? 0.0 : t.sum(sumG) / width;
        const double meanGXhat = t.sum(sumGXhat) / width;
        const Elements dxr = dInput + r * width;
        for (int64_t k = t.thread; k < width; k += t.threads) {
          const double xhat = (xr[k] - mean) * invStd;
          const double g = static_cast<double>(dyr[k]) * scale[k];
          addInto(dxr, k,
                  static_cast<float>(invStd * (g - meanG - xhat * meanGXhat)),
                  setInput);
        }
      });
  // dscale and dbias sum over the rows: columns summed in chunks of rows.
  if (dScale || dBias) {
    float *partials = exec.workspace->floats(columnChunks(rows, width) * width);
    if (!partials)
      return outOfMemory(op);
    if (dScale)
      sumColumns(
          exec.stream, rows, width, partials,
          [=] PPC_HD(int64_t r, int64_t k) {
            const int64_t at = r * width + k;
            const double xhat = (x[at] - stats[2 * r]) * stats[2 * r + 1];
            return static_cast<float>(dy[at] * xhat);
          },
          [=] PPC_HD(int64_t k, float total) {
            addInto(dScale, k, total, setScale);
          });
    if (dBias)
      sumColumns(
          exec.stream, rows, width, partials,
          [=] PPC_HD(int64_t r, int64_t k) { return float(dy[r * width + k]); },
          [=] PPC_HD(int64_t k, float total) {
            addInto(dBias, k, total, setBias);
          });
  }
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax
//===----------------------------------------------------------------------===//

/// The usual last axis: a block per row (max, then the sum of exponentials
/// in double, then the row); other axes: a thread per line, the lines'
/// neighbouring elements on neighbouring threads (softmaxStridedLine).
void softmaxLines(Stream stream, AxisShape shape, bool isLog, Elements x,
                  Elements y) {
  const int64_t size = shape.size, step = shape.inner;
  if (step != 1) {
    launch(stream, shape.outer * step, [=] PPC_HD(int64_t l) {
      const int64_t first = (l / step) * size * step + l % step;
      softmaxStridedLine(x + first, y + first, size, step, isLog);
    });
    return;
  }
  launchRows(stream, shape.outer, size,
             [=] PPC_HD(const RowThreads &t, int64_t l) {
               const Elements line = x + l * size, out = y + l * size;
               float max = -INFINITY;
               for (int64_t k = t.thread; k < size; k += t.threads)
                 max = max < line[k] ? line[k] : max;
               max = t.max(max);
               double sum = 0;
               for (int64_t k = t.thread; k < size; k += t.threads)
                 sum += expf(line[k] - max);
               sum = t.sum(sum);
               if (isLog) {
                 const float logSum = static_cast<float>(::log(sum));
                 for (int64_t k = t.thread; k < size; k += t.threads)
                   out[k] = (line[k] - max) - logSum;
               } else {
                 const float scale = static_cast<float>(1.0 / sum);
                 for (int64_t k = t.thread; k < size; k += t.threads)
                   out[k] = expf(line[k] - max) * scale;
               }
             });
}

/// softmax: dx += y * (dy - sum dy * y); log_softmax: dx += dy - e^y sum dy.
void softmaxGradLines(Stream stream, AxisShape shape, bool isLog, Elements y,
                      Elements dy, Elements dx, bool set) {
  const int64_t size = shape.size, step = shape.inner;
  if (step != 1) {
    launch(stream, shape.outer * step, [=] PPC_HD(int64_t l) {
      const int64_t first = (l / step) * size * step + l % step;
      softmaxGradLine(y + first, dy + first, dx + first, size, step, isLog,
                      set);
    });
    return;
  }
  launchRows(
      stream, shape.outer, size, [=] PPC_HD(const RowThreads &t, int64_t l) {
        const Elements yl = y + l * size, dyl = dy + l * size,
                       dxl = dx + l * size;
        double sum = 0;
        for (int64_t k = t.thread; k < size; k += t.threads)
          sum += isLog ? static_cast<double>(dyl[k])
                       : static_cast<double>(dyl[k]) * yl[k];
        sum = t.sum(sum);
        for (int64_t k = t.thread; k < size; k += t.threads)
          addInto(dxl, k,
                  static_cast<float>(
                      isLog ? dyl[k] - static_cast<double>(expf(yl[k])) * sum
                            : yl[k] * (dyl[k] - sum)),
                  set);
      });
}

template <bool Log>
absl::Status softmaxForward(const OpDesc &op, const KernelContext &,
                            ExecContext &exec, const Views &inputs,
                            const Views &outputs, const Views &) {
  AxisShape shape;
  if (absl::Status status = normForwardShape(op, inputs, outputs, shape);
      !status.ok())
    return status;
  softmaxLines(exec.stream, shape, Log, inputs[0].elements,
               outputs[0].elements);
  return absl::OkStatus();
}

template <bool Log>
absl::Status softmaxBackward(const OpDesc &op, const KernelContext &,
                             ExecContext &exec, const Views &inputs,
                             const Views &outputs, const Views &outputGrads,
                             const Views &inputGrads, const Views &) {
  AxisShape shape;
  if (absl::Status status = normBackwardShape(op, inputs, outputs, outputGrads,
                                              inputGrads, true, shape);
      !status.ok())
    return status;
  if (!inputGrads[0].present())
    return absl::OkStatus();
  softmaxGradLines(exec.stream, shape, Log, outputs[0].elements,
                   outputGrads[0].elements, inputGrads[0].elements,
                   writesGradient(exec, inputGrads[0], true));
  return absl::OkStatus();
}

} // namespace

void registerNormKernels(CudaKernelTable &t) {
  t["ppc.batch_norm"] = {batchNormForward, batchNormBackward, true};
  t["ppc.layer_norm"] = {layerNormForward, layerNormBackward, true, true};
  t["ppc.softmax"] = {softmaxForward<false>, softmaxBackward<false>, true,
                      true};
  t["ppc.log_softmax"] = {softmaxForward<true>, softmaxBackward<true>, true,
                          true};
}

} // namespace ppc::runtime::cuda
