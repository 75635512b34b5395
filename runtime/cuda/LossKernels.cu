//===- LossKernels.cu - losses on boxes, on the GPU
//------------------------===//
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
//    synchronization) and checked as the cpu kernel does in forward stage 0
//    and in the backward; stages 1 and 2 read the same labels unchecked.
//  - mse_loss: per-chunk partial sums in double, summed in chunk order by
//    one thread; the backward is per element.
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace ppc::runtime::cuda {

namespace {

using Views = std::vector<KernelView>;

bool sameBox(const TensorView &a, const TensorView &b) {
  return a.lo == b.lo && a.hi == b.hi;
}

int64_t elementsOf(const TensorView &v) {
  int64_t n = 1;
  for (int64_t d = 0; d < v.rank(); ++d)
    n *= std::max<int64_t>(0, v.extent(d));
  return n;
}

/// Copies n floats of device memory to the host, waiting for the stream.
void copyToHost(Stream stream, float *host, const float *device, int64_t n) {
  if (n <= 0)
    return;
#if defined(PPC_CUDA_EMULATION)
  (void)stream;
  std::memcpy(host, device, size_t(n) * sizeof(float));
#else
  cudaMemcpyAsync(host, device, size_t(n) * sizeof(float),
                  cudaMemcpyDeviceToHost, stream);
  cudaStreamSynchronize(stream);
#endif
}

KernelStatus checkScalarResult(const OpDesc &op, const Views &results) {
  if (results.size() != 1 || results[0].rank() != 0 || !results[0].data)
    return op.kind + ": expects one scalar result";
  return "";
}

KernelStatus checkGradViews(const OpDesc &op, const Views &inputs,
                            const Views &outputGrads, const Views &inputGrads) {
  if (KernelStatus status = checkScalarResult(op, outputGrads); !status.empty())
    return status;
  if (inputGrads.size() != inputs.size())
    return op.kind + ": expects one grad per operand";
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputGrads[i].data && !sameBox(inputGrads[i], inputs[i]))
      return op.kind + ": operand grad box differs from the operand box";
  return "";
}

//===----------------------------------------------------------------------===//
// softmax_cross_entropy
//===----------------------------------------------------------------------===//

/// The held box of logits [N, C]: rows [rowLo, rowHi), classes [classLo,
/// classHi) of `classes`; `batch` is the global N.
struct CrossEntropyShape {
  int64_t rowLo, rowHi, classLo, classHi, classes, batch;
  int64_t rows() const { return rowHi - rowLo; }
  int64_t held() const { return classHi - classLo; }
};

KernelStatus crossEntropyShape(const OpDesc &op, const Views &inputs,
                               CrossEntropyShape &shape) {
  if (inputs.size() != 2)
    return op.kind + ": expects logits and labels";
  const TensorView &logits = inputs[0], &labels = inputs[1];
  if (logits.rank() != 2 || labels.rank() != 1)
    return op.kind + ": logits must be [N, C] and labels [N]";
  shape = {logits.lo[0], logits.hi[0],    logits.lo[1],
           logits.hi[1], logits.shape[1], logits.shape[0]};
  if (labels.lo[0] > shape.rowLo || labels.hi[0] < shape.rowHi)
    return op.kind + ": labels box does not hold the logits rows";
  return "";
}

/// Checks every held row's label as the cpu kernel's labelOf (reading the
/// labels back to the host).
KernelStatus checkLabels(const OpDesc &op, Stream stream,
                         const TensorView &labels,
                         const CrossEntropyShape &shape) {
  std::vector<float> values(static_cast<size_t>(shape.rows()));
  copyToHost(stream, values.data(), labels.data + (shape.rowLo - labels.lo[0]),
             shape.rows());
  for (int64_t i = 0; i < shape.rows(); ++i) {
    const float value = values[i];
    const int64_t label = static_cast<int64_t>(value);
    if (static_cast<float>(label) != value || label < 0 ||
        label >= shape.classes)
      return op.kind + ": label " + std::to_string(value) + " of row " +
             std::to_string(shape.rowLo + i) + " is not a class in [0, " +
             std::to_string(shape.classes) + ")";
  }
  return "";
}

/// The class a (checked) label value names; -1 for anything else.
PPC_HD inline int64_t labelClass(float value, int64_t classes) {
  return value >= 0.0f && value < static_cast<float>(classes)
             ? static_cast<int64_t>(value)
             : -1;
}

KernelStatus crossEntropyScratch(const OpDesc &op, const Views &scratch,
                                 const CrossEntropyShape &shape) {
  if (scratch.size() < 2 || scratch[0].rank() != 1 ||
      scratch[0].extent(0) != shape.rows() || scratch[1].rank() != 2 ||
      scratch[1].extent(0) != 2 || scratch[1].extent(1) != shape.rows() ||
      !scratch[0].data || !scratch[1].data)
    return op.kind + ": expects [" + std::to_string(shape.rows()) +
           "] and [2, " + std::to_string(shape.rows()) + "] scratch buffers";
  return "";
}

KernelStatus crossEntropyForward(const OpDesc &op, const KernelContext &ctx,
                                 ExecContext &exec, const Views &inputs,
                                 const Views &outputs, const Views &scratch) {
  if (KernelStatus status = checkScalarResult(op, outputs); !status.empty())
    return status;
  CrossEntropyShape shape;
  if (KernelStatus status = crossEntropyShape(op, inputs, shape);
      !status.empty())
    return status;
  if (KernelStatus status = crossEntropyScratch(op, scratch, shape);
      !status.empty())
    return status;
  if (ctx.stage == 0)
    if (KernelStatus status = checkLabels(op, exec.stream, inputs[1], shape);
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
    double total = 0;
    if (first)
      for (int64_t i = 0; i < rows; ++i)
        total += max[i] + ::log(static_cast<double>(sums[i])) - picked[i];
    loss[0] = static_cast<float>(total / batch);
  });
  return "";
}

KernelStatus crossEntropyBackward(const OpDesc &op, const KernelContext &,
                                  ExecContext &exec, const Views &inputs,
                                  const Views &, const Views &outputGrads,
                                  const Views &inputGrads,
                                  const Views &scratch) {
  if (KernelStatus status = checkGradViews(op, inputs, outputGrads, inputGrads);
      !status.empty())
    return status;
  CrossEntropyShape shape;
  if (KernelStatus status = crossEntropyShape(op, inputs, shape);
      !status.empty())
    return status;
  if (KernelStatus status = crossEntropyScratch(op, scratch, shape);
      !status.empty())
    return status;
  if (!inputGrads[0].data)
    return "";
  if (KernelStatus status = checkLabels(op, exec.stream, inputs[1], shape);
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

KernelStatus mseShape(const OpDesc &op, const Views &inputs, int64_t &count) {
  if (inputs.size() != 2)
    return op.kind + ": expects prediction and target";
  if (inputs[0].shape != inputs[1].shape || !sameBox(inputs[0], inputs[1]))
    return op.kind + ": prediction and target boxes differ";
  count = 1;
  for (int64_t size : inputs[0].shape)
    count *= size;
  return "";
}

KernelStatus mseForward(const OpDesc &op, const KernelContext &,
                        ExecContext &exec, const Views &inputs,
                        const Views &outputs, const Views &) {
  if (KernelStatus status = checkScalarResult(op, outputs); !status.empty())
    return status;
  int64_t count;
  if (KernelStatus status = mseShape(op, inputs, count); !status.empty())
    return status;
  const int64_t n = elementsOf(inputs[0]);
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
  if (KernelStatus status = checkGradViews(op, inputs, outputGrads, inputGrads);
      !status.empty())
    return status;
  int64_t count;
  if (KernelStatus status = mseShape(op, inputs, count); !status.empty())
    return status;
  // d/dprediction = 2 (prediction - target) * dloss / count = -d/dtarget.
  const float *prediction = inputs[0].data, *target = inputs[1].data;
  const float *dLoss = outputGrads[0].data;
  float *dPrediction = inputGrads[0].data, *dTarget = inputGrads[1].data;
  if (!dPrediction && !dTarget)
    return "";
  const double global = static_cast<double>(count);
  launch(exec.stream, elementsOf(inputs[0]), [=] PPC_HD(int64_t k) {
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
