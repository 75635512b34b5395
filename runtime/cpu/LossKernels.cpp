//===- LossKernels.cpp - losses on boxes ----------------------------------===//
//
// A loss is a mean over the whole batch: a partition holding some rows
// (softmax_cross_entropy) or some box (mse_loss) outputs its partial sum
// divided by the GLOBAL count, and the plan sums the partials. The backward
// scales by the scalar result grad. softmax_cross_entropy may also hold some
// classes (vocabulary parallel): its stages agree on each row's maximum and
// sum of exponentials through the plan's collectives between them.
//
//===----------------------------------------------------------------------===//

#include "KernelHelpers.h"
#include "KernelRegistry.h"
#include "LossShapes.h"

#include <algorithm>
#include <cmath>

namespace ppc::runtime::cpu {

namespace {

//===----------------------------------------------------------------------===//
// softmax_cross_entropy
//===----------------------------------------------------------------------===//

std::vector<std::vector<int64_t>>
crossEntropyScratchShapes(const OpDesc &, const std::vector<TensorView> &inputs,
                          bool backward) {
  if (backward || inputs.empty() || inputs[0].rank() != 2)
    return {};
  int64_t rows = inputs[0].extent(0);
  return {{rows}, {2, rows}};
}

/// Stage 0, the one pass over the logits: each row's maximum over the held
/// classes, the held log-sum-exp (in the sums' row) and the label's logit
/// where this partition holds it. Stage 1 (the maxima now the rows'): the
/// held sum of exp(x - max) from the held log-sum-exp, without the logits.
/// Stage 2: the rows' mean loss, written by the partition holding the first
/// classes (the others write 0, so the plan's sum of the partial results
/// counts each row once).
absl::Status crossEntropyForward(const OpDesc &op, const KernelContext &ctx,
                                 const std::vector<TensorView> &inputs,
                                 std::vector<TensorView> &outputs,
                                 std::vector<TensorView> &scratch) {
  CrossEntropyShape shape;
  if (absl::Status status =
          crossEntropyForwardShape(op, inputs, outputs, scratch, shape);
      !status.ok())
    return status;
  float *max = scratch[0].data;
  float *sums = scratch[1].data, *picked = scratch[1].data + shape.rows();
  const float *labels = inputs[1].data + (shape.rowLo - inputs[1].lo[0]);
  if (absl::Status status = checkLabels(op, labels, shape); !status.ok())
    return status;
  const int64_t held = shape.held();
  std::vector<float> exps(static_cast<size_t>(held));
  for (int64_t i = 0; i < shape.rows(); ++i) {
    const int64_t label = static_cast<int64_t>(labels[i]);
    const float *logits = inputs[0].data + i * held;
    if (ctx.stage == 0) {
      max[i] = *std::max_element(logits, logits + held);
      expShifted(logits, held, max[i], exps.data());
      sums[i] = heldLogSumExp(max[i], sumOf(exps.data(), held));
      picked[i] = label >= shape.classLo && label < shape.classHi
                      ? logits[label - shape.classLo]
                      : 0.0f;
    } else if (ctx.stage == 1) {
      sums[i] = heldSum(sums[i], max[i]);
    }
  }
  if (ctx.stage < 2)
    return absl::OkStatus();
  outputs[0].data[0] =
      crossEntropyMean(max, sums, picked, shape.rows(), shape.classLo == 0,
                       static_cast<double>(shape.batch));
  return absl::OkStatus();
}

absl::Status crossEntropyBackward(const OpDesc &op, const KernelContext &,
                                  const std::vector<TensorView> &inputs,
                                  const std::vector<TensorView> &,
                                  const std::vector<TensorView> &outputGrads,
                                  std::vector<TensorView> &inputGrads,
                                  std::vector<TensorView> &scratch) {
  CrossEntropyShape shape;
  if (absl::Status status = crossEntropyBackwardShape(
          op, inputs, outputGrads, inputGrads, scratch, shape);
      !status.ok())
    return status;
  if (!inputGrads[0].data)
    return absl::OkStatus();
  // d/dlogits = (softmax - onehot(label)) * dloss / N, the softmax from the
  // forward's row maxima and sums.
  double scale = outputGrads[0].data[0] / static_cast<double>(shape.batch);
  const float *max = scratch[0].data, *sums = scratch[1].data;
  const float *labels = inputs[1].data + (shape.rowLo - inputs[1].lo[0]);
  if (absl::Status status = checkLabels(op, labels, shape); !status.ok())
    return status;
  const int64_t held = shape.held();
  std::vector<float> exps(static_cast<size_t>(held));
  for (int64_t i = 0; i < shape.rows(); ++i) {
    const int64_t label = static_cast<int64_t>(labels[i]);
    const float *logits = inputs[0].data + i * held;
    float *dLogits = inputGrads[0].data + i * held;
    expShifted(logits, held, max[i], exps.data());
    const float factor = static_cast<float>(scale / sums[i]);
    for (int64_t k = 0; k < held; ++k)
      dLogits[k] += exps[k] * factor;
    if (label >= shape.classLo && label < shape.classHi)
      dLogits[label - shape.classLo] -= static_cast<float>(scale);
  }
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// mse_loss
//===----------------------------------------------------------------------===//

absl::Status mseForward(const OpDesc &op, const KernelContext &,
                        const std::vector<TensorView> &inputs,
                        std::vector<TensorView> &outputs,
                        std::vector<TensorView> &) {
  int64_t count;
  if (absl::Status status = mseForwardShape(op, inputs, outputs, count);
      !status.ok())
    return status;
  const float *prediction = inputs[0].data, *target = inputs[1].data;
  double total = 0;
  for (int64_t k = 0, n = inputs[0].numElements(); k < n; ++k) {
    double diff = static_cast<double>(prediction[k]) - target[k];
    total += diff * diff;
  }
  outputs[0].data[0] = static_cast<float>(total / count);
  return absl::OkStatus();
}

absl::Status mseBackward(const OpDesc &op, const KernelContext &,
                         const std::vector<TensorView> &inputs,
                         const std::vector<TensorView> &,
                         const std::vector<TensorView> &outputGrads,
                         std::vector<TensorView> &inputGrads,
                         std::vector<TensorView> &) {
  int64_t count;
  if (absl::Status status =
          mseBackwardShape(op, inputs, outputGrads, inputGrads, count);
      !status.ok())
    return status;
  // d/dprediction = 2 (prediction - target) * dloss / count = -d/dtarget.
  float scale = static_cast<float>(2.0 * outputGrads[0].data[0] / count);
  const float *prediction = inputs[0].data, *target = inputs[1].data;
  float *dPrediction = inputGrads[0].data, *dTarget = inputGrads[1].data;
  for (int64_t k = 0, n = inputs[0].numElements(); k < n; ++k) {
    float grad = (prediction[k] - target[k]) * scale;
    if (dPrediction)
      dPrediction[k] += grad;
    if (dTarget)
      dTarget[k] -= grad;
  }
  return absl::OkStatus();
}

} // namespace

void registerLossKernels(KernelTable &table) {
  KernelImpl crossEntropy{crossEntropyForward, crossEntropyBackward,
                          crossEntropyScratchShapes, /*trainingStages=*/3};
  crossEntropy.backwardStages = 1;
  crossEntropy.stagedInInference = true;
  table["ppc.softmax_cross_entropy"] = std::move(crossEntropy);
  table["ppc.mse_loss"] = {mseForward, mseBackward, nullptr, 1};
}

} // namespace ppc::runtime::cpu
