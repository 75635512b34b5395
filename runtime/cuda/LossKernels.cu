//===- LossKernels.cu - losses on boxes, on the GPU -----------------------===//
//
// The cpu kernels' semantics (runtime/cpu/LossKernels.cpp): a loss is a mean
// over the whole batch, so a partition outputs its partial sum divided by
// the GLOBAL count and the plan sums the partials; the backward scales by
// the scalar result grad (read on the device).
//  - softmax_cross_entropy is staged (3 forward stages, in training and
//    inference): stage 0 writes each row's maximum over the held classes
//    ([rows] scratch, max-reduced by the plan), stage 1 the held sum of
//    exp(x - max) and the label's logit where held ([2, rows] scratch,
//    summed), stage 2 the mean loss, written by the partition holding the
//    first classes (the others write 0). One thread per row; stage 2 is one
//    thread over the rows (deterministic). The backward is per element.
//    Labels are device data: they are read back to the host (a stream
//    synchronization) and checked as the cpu kernel does (LossShapes.h) in
//    forward stage 0 and in the backward; stages 1 and 2 read the same
//    labels unchecked.
//  - mse_loss: per-chunk partial sums in double, summed in chunk order by
//    one thread; the backward is per element.
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"
#include "LossShapes.h"

#include <cmath>
#include <string>
#include <vector>

namespace ppc::runtime::cuda {

namespace {

using Views = std::vector<KernelView>;

//===----------------------------------------------------------------------===//
// softmax_cross_entropy
//===----------------------------------------------------------------------===//

/// Checks every held row's label (checkLabels), reading the labels back to
/// the host.
KernelStatus checkDeviceLabels(const OpDesc &op, Stream stream,
                               const TensorView &labels,
                               const CrossEntropyShape &shape) {
  std::vector<float> values(static_cast<size_t>(shape.rows()));
  copyToHost(stream, values.data(), labels.data + (shape.rowLo - labels.lo[0]),
             values.size() * sizeof(float));
  return checkLabels(op, values.data(), shape);
}

/// The class a (checked) label value names; -1 for anything else.
PPC_HD inline int64_t labelClass(float value, int64_t classes) {
  return value >= 0.0f && value < static_cast<float>(classes)
             ? static_cast<int64_t>(value)
             : -1;
}

KernelStatus crossEntropyForward(const OpDesc &op, const KernelContext &ctx,
                                 ExecContext &exec, const Views &inputs,
                                 const Views &outputs, const Views &scratch) {
  CrossEntropyShape shape;
  if (KernelStatus status =
          crossEntropyForwardShape(op, inputs, outputs, scratch, shape);
      !status.empty())
    return status;
  if (ctx.stage == 0)
    if (KernelStatus status =
            checkDeviceLabels(op, exec.stream, inputs[1], shape);
        !status.empty())
      return status;
  float *max = scratch[0].data;
  float *sums = scratch[1].data, *picked = scratch[1].data + shape.rows();
  const float *logits = inputs[0].data;
  const float *labels = inputs[1].data + (shape.rowLo - inputs[1].lo[0]);
  const int64_t held = shape.held(), rows = shape.rows();
  const int64_t classLo = shape.classLo, classes = shape.classes;
  if (ctx.stage == 0) {
    launch(exec.stream, rows, [=] PPC_HD(int64_t i) {
      const float *row = logits + i * held;
      float m = held > 0 ? row[0] : -INFINITY;
      for (int64_t k = 1; k < held; ++k)
        if (m < row[k])
          m = row[k];
      max[i] = m;
    });
    return "";
  }
  if (ctx.stage == 1) {
    launch(exec.stream, rows, [=] PPC_HD(int64_t i) {
      const float *row = logits + i * held;
      const float m = max[i];
      double sum = 0;
      for (int64_t k = 0; k < held; ++k)
        sum += expf(row[k] - m);
      sums[i] = static_cast<float>(sum);
      const int64_t label = labelClass(labels[i], classes);
      picked[i] = label >= classLo && label < classLo + held
                      ? row[label - classLo]
                      : 0.0f;
    });
    return "";
  }
  const bool first = classLo == 0;
  const double batch = static_cast<double>(shape.batch);
  float *loss = outputs[0].data;
  launch(exec.stream, 1, [=] PPC_HD(int64_t) {
    loss[0] = crossEntropyMean(max, sums, picked, rows, first, batch);
  });
  return "";
}

KernelStatus crossEntropyBackward(const OpDesc &op, const KernelContext &,
                                  ExecContext &exec, const Views &inputs,
                                  const Views &, const Views &outputGrads,
                                  const Views &inputGrads,
                                  const Views &scratch) {
  CrossEntropyShape shape;
  if (KernelStatus status = crossEntropyBackwardShape(
          op, inputs, outputGrads, inputGrads, scratch, shape);
      !status.empty())
    return status;
  if (!inputGrads[0].data)
    return "";
  if (KernelStatus status =
          checkDeviceLabels(op, exec.stream, inputs[1], shape);
      !status.empty())
    return status;
  // d/dlogits = (softmax - onehot(label)) * dloss / N, the softmax from the
  // forward's row maxima and sums.
  const float *max = scratch[0].data, *sums = scratch[1].data;
  const float *logits = inputs[0].data, *dLoss = outputGrads[0].data;
  const float *labels = inputs[1].data + (shape.rowLo - inputs[1].lo[0]);
  float *dLogits = inputGrads[0].data;
  const int64_t held = shape.held(), classLo = shape.classLo,
                classes = shape.classes;
  const double batch = static_cast<double>(shape.batch);
  launch(exec.stream, shape.rows() * held, [=] PPC_HD(int64_t e) {
    const int64_t i = e / held, k = e % held;
    const double scale = dLoss[0] / batch;
    const float factor = static_cast<float>(scale / sums[i]);
    float grad = dLogits[e] + expf(logits[e] - max[i]) * factor;
    if (labelClass(labels[i], classes) == classLo + k)
      grad -= static_cast<float>(scale);
    dLogits[e] = grad;
  });
  return "";
}

//===----------------------------------------------------------------------===//
// mse_loss
//===----------------------------------------------------------------------===//

/// Elements one thread of the forward sums.
constexpr int64_t kMseChunk = 4096;

KernelStatus mseForward(const OpDesc &op, const KernelContext &,
                        ExecContext &exec, const Views &inputs,
                        const Views &outputs, const Views &) {
  int64_t count;
  if (KernelStatus status = mseForwardShape(op, inputs, outputs, count);
      !status.empty())
    return status;
  const int64_t n = inputs[0].numElements();
  const int64_t chunks = (n + kMseChunk - 1) / kMseChunk;
  double *partial = exec.workspace
                        ? reinterpret_cast<double *>(exec.workspace->floats(
                              2 * std::max<int64_t>(chunks, 1)))
                        : nullptr;
  if (!partial)
    return op.kind + ": out of device memory for its workspace";
  const float *prediction = inputs[0].data, *target = inputs[1].data;
  launch(exec.stream, chunks, [=] PPC_HD(int64_t c) {
    const int64_t end = (c + 1) * kMseChunk < n ? (c + 1) * kMseChunk : n;
    double total = 0;
    for (int64_t k = c * kMseChunk; k < end; ++k) {
      const double diff = static_cast<double>(prediction[k]) - target[k];
      total += diff * diff;
    }
    partial[c] = total;
  });
  float *loss = outputs[0].data;
  const double global = static_cast<double>(count);
  launch(exec.stream, 1, [=] PPC_HD(int64_t) {
    double total = 0;
    for (int64_t c = 0; c < chunks; ++c)
      total += partial[c];
    loss[0] = static_cast<float>(total / global);
  });
  return "";
}

KernelStatus mseBackward(const OpDesc &op, const KernelContext &,
                         ExecContext &exec, const Views &inputs, const Views &,
                         const Views &outputGrads, const Views &inputGrads,
                         const Views &) {
  int64_t count;
  if (KernelStatus status =
          mseBackwardShape(op, inputs, outputGrads, inputGrads, count);
      !status.empty())
    return status;
  // d/dprediction = 2 (prediction - target) * dloss / count = -d/dtarget.
  const float *prediction = inputs[0].data, *target = inputs[1].data;
  const float *dLoss = outputGrads[0].data;
  float *dPrediction = inputGrads[0].data, *dTarget = inputGrads[1].data;
  if (!dPrediction && !dTarget)
    return "";
  const double global = static_cast<double>(count);
  launch(exec.stream, inputs[0].numElements(), [=] PPC_HD(int64_t k) {
    const float scale = static_cast<float>(2.0 * dLoss[0] / global);
    const float grad = (prediction[k] - target[k]) * scale;
    if (dPrediction)
      dPrediction[k] += grad;
    if (dTarget)
      dTarget[k] -= grad;
  });
  return "";
}

} // namespace

void registerLossKernels(CudaKernelTable &t) {
  t["ppc.softmax_cross_entropy"] = {crossEntropyForward, crossEntropyBackward};
  t["ppc.mse_loss"] = {mseForward, mseBackward};
}

} // namespace ppc::runtime::cuda
