//===- LossKernels.cu - losses on boxes, on the GPU -----------------------===//
//
// The cpu kernels' semantics (runtime/cpu/LossKernels.cpp): a loss is a mean
// over the whole batch, so a partition outputs its partial sum divided by
// the GLOBAL count and the plan sums the partials; the backward scales by
// the scalar result grad (read on the device).
//  - softmax_cross_entropy is staged (3 forward stages, in training and
//    inference): stage 0, the one pass over the logits, writes each row's
//    maximum over the held classes ([rows] scratch, max-reduced by the
//    plan), the held log-sum-exp and the label's logit where held ([2,
//    rows] scratch, summed after stage 1), a block of threads per row
//    (Reductions.h) reading the row once (each thread's running maximum
//    and sum of exponentials, rescaled as its maximum grows, then combined
//    over the block); stage 1 turns each log-sum-exp into the held sum of exp(x
//    - max) against the row's maximum over all partitions, a thread per row;
//    stage 2 the mean loss, written by the partition holding the first
//    classes (the others write 0), one block over the rows; the backward
//    runs a block of threads per row. Labels are checked on the device
//    (DeviceChecks: the least bad row is reported with the cpu kernel's
//    message once the step's work is done) in forward stage 0 and in the
//    backward; no label is read back to the host mid-step.
//  - mse_loss: per-chunk partial sums in double, summed in chunk order by
//    one thread; the backward is per element.
// Logits and gradients are read and written as stored (native).
//
//===----------------------------------------------------------------------===//

#include "CudaKernels.h"
#include "LossShapes.h"
#include "Reductions.h"

#include <cmath>
#include <string>
#include <vector>

namespace ppc::runtime::cuda {

namespace {

using Views = std::vector<KernelView>;

//===----------------------------------------------------------------------===//
// softmax_cross_entropy
//===----------------------------------------------------------------------===//

/// The class a (checked) label value names; -1 for anything else.
PPC_HD inline int64_t labelClass(float value, int64_t classes) {
  return isClass(value, classes) ? static_cast<int64_t>(value) : -1;
}

/// A device check of the held rows' labels: the slot the rows' threads flag
/// with (global row << 32 | the label's bits), the least row winning as the
/// cpu kernel reports its first; null when out of memory.
unsigned long long *labelCheck(const OpDesc &op, const KernelContext &ctx,
                               ExecContext &exec, int64_t classes) {
  if (!exec.checks)
    return nullptr;
  return exec.checks->slot(ctx.instruction, [op,
                                             classes](unsigned long long key) {
    return labelError(op, bitsFloat(static_cast<uint32_t>(key & 0xffffffffu)),
                      static_cast<int64_t>(key >> 32), classes);
  });
}

/// Flags `slot` when `value`, the label of global row `row`, is not a class.
PPC_HD inline void checkLabel(unsigned long long *slot, float value,
                              int64_t row, int64_t classes) {
  if (!isClass(value, classes))
    flagLeast(slot,
              static_cast<unsigned long long>(row) << 32 | floatBits(value));
}

absl::Status outOfMemory(const OpDesc &op) {
  return absl::ResourceExhaustedError(
      op.kind + ": out of device memory for its workspace");
}

absl::Status crossEntropyForward(const OpDesc &op, const KernelContext &ctx,
                                 ExecContext &exec, const Views &inputs,
                                 const Views &outputs, const Views &scratch) {
  CrossEntropyShape shape;
  if (absl::Status status =
          crossEntropyForwardShape(op, inputs, outputs, scratch, shape);
      !status.ok())
    return status;
  float *max = scratch[0].data;
  float *sums = scratch[1].data, *picked = scratch[1].data + shape.rows();
  const Elements logits = inputs[0].elements;
  const Elements labels = inputs[1].elements + (shape.rowLo - inputs[1].lo[0]);
  const int64_t held = shape.held(), rows = shape.rows();
  const int64_t classLo = shape.classLo, classes = shape.classes,
                rowLo = shape.rowLo;
  if (ctx.stage == 0) {
    unsigned long long *bad = labelCheck(op, ctx, exec, classes);
    if (!bad)
      return outOfMemory(op);
    launchRows(exec.stream, rows, held,
               [=] PPC_HD(const RowThreads &t, int64_t i) {
                 const Elements row = logits + i * held;
                 // One pass: each thread's running maximum and its sum of
                 // exp(x - maximum), rescaled when the maximum grows.
                 float mine = -INFINITY, mySum = 0.0f;
                 for (int64_t k = t.thread; k < held; k += t.threads) {
                   const float x = row[k];
                   if (x > mine) {
                     mySum = mySum * expf(mine - x) + 1.0f;
                     mine = x;
                   } else {
                     mySum += expf(x - mine);
                   }
                 }
                 const float m = t.max(mine);
                 const double sum = t.sum(static_cast<double>(
                     mySum == 0.0f ? 0.0f : mySum * expf(mine - m)));
                 if (t.thread == 0) {
                   max[i] = m;
                   sums[i] = heldLogSumExp(m, sum);
                   checkLabel(bad, labels[i], rowLo + i, classes);
                   const int64_t label = labelClass(labels[i], classes);
                   picked[i] = label >= classLo && label < classLo + held
                                   ? static_cast<float>(row[label - classLo])
                                   : 0.0f;
                 }
               });
    return absl::OkStatus();
  }
  if (ctx.stage == 1) {
    launch(exec.stream, rows,
           [=] PPC_HD(int64_t i) { sums[i] = heldSum(sums[i], max[i]); });
    return absl::OkStatus();
  }
  // Stage 2: the mean over the rows, one block summing them.
  const bool first = classLo == 0;
  const double batch = static_cast<double>(shape.batch);
  const Elements loss = outputs[0].elements;
  launchRows(exec.stream, 1, rows, [=] PPC_HD(const RowThreads &t, int64_t) {
    double total = 0;
    if (first)
      for (int64_t i = t.thread; i < rows; i += t.threads)
        total += max[i] + ::log(static_cast<double>(sums[i])) - picked[i];
    total = t.sum(total);
    if (t.thread == 0)
      loss[0] = static_cast<float>(total / batch);
  });
  return absl::OkStatus();
}

absl::Status crossEntropyBackward(const OpDesc &op, const KernelContext &ctx,
                                  ExecContext &exec, const Views &inputs,
                                  const Views &, const Views &outputGrads,
                                  const Views &inputGrads,
                                  const Views &scratch) {
  CrossEntropyShape shape;
  if (absl::Status status = crossEntropyBackwardShape(
          op, inputs, outputGrads, inputGrads, scratch, shape);
      !status.ok())
    return status;
  if (inputGrads.size() > 1) // labels get no gradient: an overwrite is 0
    writesGradient(exec, inputGrads[1], false);
  if (!inputGrads[0].present())
    return absl::OkStatus();
  unsigned long long *bad = labelCheck(op, ctx, exec, shape.classes);
  if (!bad)
    return outOfMemory(op);
  // d/dlogits = (softmax - onehot(label)) * dloss / N, the softmax from the
  // forward's row maxima and sums.
  const float *max = scratch[0].data, *sums = scratch[1].data;
  const Elements logits = inputs[0].elements, dLoss = outputGrads[0].elements;
  const Elements labels = inputs[1].elements + (shape.rowLo - inputs[1].lo[0]);
  const Elements dLogits = inputGrads[0].elements;
  const bool set = writesGradient(exec, inputGrads[0], true);
  const int64_t held = shape.held(), classLo = shape.classLo,
                classes = shape.classes, rowLo = shape.rowLo;
  const double batch = static_cast<double>(shape.batch);
  // A block of threads per row: the row's factors once, then its elements.
  launchRows(exec.stream, shape.rows(), held,
             [=] PPC_HD(const RowThreads &t, int64_t i) {
               const double scale = dLoss[0] / batch;
               const float factor = static_cast<float>(scale / sums[i]);
               const float m = max[i], label = labels[i];
               if (t.thread == 0)
                 checkLabel(bad, label, rowLo + i, classes);
               const int64_t target = labelClass(label, classes) - classLo;
               const Elements row = logits + i * held,
                              dRow = dLogits + i * held;
               for (int64_t k = t.thread; k < held; k += t.threads) {
                 float grad = (set ? 0.0f : static_cast<float>(dRow[k])) +
                              expf(row[k] - m) * factor;
                 if (k == target)
                   grad -= static_cast<float>(scale);
                 dRow[k] = grad;
               }
             });
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// mse_loss
//===----------------------------------------------------------------------===//

/// Elements one thread of the forward sums.
constexpr int64_t kMseChunk = 4096;

absl::Status mseForward(const OpDesc &op, const KernelContext &,
                        ExecContext &exec, const Views &inputs,
                        const Views &outputs, const Views &) {
  int64_t count;
  if (absl::Status status = mseForwardShape(op, inputs, outputs, count);
      !status.ok())
    return status;
  const int64_t n = inputs[0].numElements();
  const int64_t chunks = (n + kMseChunk - 1) / kMseChunk;
  double *partial = exec.workspace
                        ? reinterpret_cast<double *>(exec.workspace->floats(
                              2 * std::max<int64_t>(chunks, 1)))
                        : nullptr;
  if (!partial)
    return outOfMemory(op);
  const Elements prediction = inputs[0].elements, target = inputs[1].elements;
  launch(exec.stream, chunks, [=] PPC_HD(int64_t c) {
    const int64_t end = (c + 1) * kMseChunk < n ? (c + 1) * kMseChunk : n;
    double total = 0;
    for (int64_t k = c * kMseChunk; k < end; ++k) {
      const double diff =
          static_cast<double>(prediction[k]) - static_cast<float>(target[k]);
      total += diff * diff;
    }
    partial[c] = total;
  });
  const Elements loss = outputs[0].elements;
  const double global = static_cast<double>(count);
  launch(exec.stream, 1, [=] PPC_HD(int64_t) {
    double total = 0;
    for (int64_t c = 0; c < chunks; ++c)
      total += partial[c];
    loss[0] = static_cast<float>(total / global);
  });
  return absl::OkStatus();
}

absl::Status mseBackward(const OpDesc &op, const KernelContext &,
                         ExecContext &exec, const Views &inputs, const Views &,
                         const Views &outputGrads, const Views &inputGrads,
                         const Views &) {
  int64_t count;
  if (absl::Status status =
          mseBackwardShape(op, inputs, outputGrads, inputGrads, count);
      !status.ok())
    return status;
  // d/dprediction = 2 (prediction - target) * dloss / count = -d/dtarget.
  const Elements prediction = inputs[0].elements, target = inputs[1].elements;
  const Elements dLoss = outputGrads[0].elements;
  const Elements dPrediction = inputGrads[0].elements,
                 dTarget = inputGrads[1].elements;
  if (!dPrediction && !dTarget)
    return absl::OkStatus();
  const bool setPrediction = writesGradient(exec, inputGrads[0], true);
  const bool setTarget = writesGradient(exec, inputGrads[1], true);
  const double global = static_cast<double>(count);
  launch(exec.stream, inputs[0].numElements(), [=] PPC_HD(int64_t k) {
    const float scale = static_cast<float>(2.0 * dLoss[0] / global);
    const float grad = (prediction[k] - target[k]) * scale;
    if (dPrediction)
      addInto(dPrediction, k, grad, setPrediction);
    if (dTarget)
      addInto(dTarget, k, -grad, setTarget);
  });
  return absl::OkStatus();
}

} // namespace

void registerLossKernels(CudaKernelTable &t) {
  t["ppc.softmax_cross_entropy"] = {crossEntropyForward, crossEntropyBackward,
                                    true, true};
  t["ppc.mse_loss"] = {mseForward, mseBackward, true, true};
}

} // namespace ppc::runtime::cuda
