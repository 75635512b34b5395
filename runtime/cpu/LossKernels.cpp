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

#include <algorithm>
#include <cmath>

namespace ppc::runtime::cpu {

namespace {

KernelStatus checkScalarResult(const OpDesc &op,
                               const std::vector<TensorView> &results) {
  if (results.size() != 1 || results[0].rank() != 0 || !results[0].data)
    return op.kind + ": expects one scalar result";
  return "";
}

KernelStatus checkGradViews(const OpDesc &op,
                            const std::vector<TensorView> &inputs,
                            const std::vector<TensorView> &outputGrads,
                            const std::vector<TensorView> &inputGrads) {
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

KernelStatus crossEntropyShape(const OpDesc &op,
                               const std::vector<TensorView> &inputs,
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

/// The class of row `row`, or an error if the label is not one.
KernelStatus labelOf(const OpDesc &op, const TensorView &labels, int64_t row,
                     int64_t classes, int64_t &label) {
  float value = labels.data[row - labels.lo[0]];
  label = static_cast<int64_t>(value);
  if (static_cast<float>(label) != value || label < 0 || label >= classes)
    return op.kind + ": label " + std::to_string(value) + " of row " +
           std::to_string(row) + " is not a class in [0, " +
           std::to_string(classes) + ")";
  return "";
}

/// The two scratch buffers of the staged kernel (the op's StagedKernel):
/// [rows] row maxima, max-reduced over the partitions of a row after stage
/// 0; [2, rows] sums of exp(x - max) and the label's logit, summed after
/// stage 1. The backward reads them.
KernelStatus crossEntropyScratch(const OpDesc &op,
                                 const std::vector<TensorView> &scratch,
                                 const CrossEntropyShape &shape) {
  if (scratch.size() < 2 || scratch[0].rank() != 1 ||
      scratch[0].extent(0) != shape.rows() || scratch[1].rank() != 2 ||
      scratch[1].extent(0) != 2 || scratch[1].extent(1) != shape.rows() ||
      !scratch[0].data || !scratch[1].data)
    return op.kind + ": expects [" + std::to_string(shape.rows()) +
           "] and [2, " + std::to_string(shape.rows()) + "] scratch buffers";
  return "";
}

std::vector<std::vector<int64_t>>
crossEntropyScratchShapes(const OpDesc &, const std::vector<TensorView> &inputs,
                          bool backward) {
  if (backward || inputs.empty() || inputs[0].rank() != 2)
    return {};
  int64_t rows = inputs[0].extent(0);
  return {{rows}, {2, rows}};
}

/// Stage 0: each row's maximum over the held classes. Stage 1 (the maxima
/// now the rows'): the held sum of exp(x - max), and the label's logit
/// where this partition holds it. Stage 2: the rows' mean loss, written by
/// the partition holding the first classes (the others write 0, so the
/// plan's sum of the partial results counts each row once).
KernelStatus crossEntropyForward(const OpDesc &op, const KernelContext &ctx,
                                 const std::vector<TensorView> &inputs,
                                 std::vector<TensorView> &outputs,
                                 std::vector<TensorView> &scratch) {
  if (KernelStatus status = checkScalarResult(op, outputs); !status.empty())
    return status;
  CrossEntropyShape shape;
  if (KernelStatus status = crossEntropyShape(op, inputs, shape);
      !status.empty())
    return status;
  if (KernelStatus status = crossEntropyScratch(op, scratch, shape);
      !status.empty())
    return status;
  float *max = scratch[0].data;
  float *sums = scratch[1].data, *picked = scratch[1].data + shape.rows();
  const int64_t held = shape.held();
  std::vector<float> exps(static_cast<size_t>(held));
  for (int64_t i = 0; i < shape.rows(); ++i) {
    int64_t label;
    if (KernelStatus status =
            labelOf(op, inputs[1], shape.rowLo + i, shape.classes, label);
        !status.empty())
      return status;
    const float *logits = inputs[0].data + i * held;
    if (ctx.stage == 0) {
      max[i] = *std::max_element(logits, logits + held);
    } else if (ctx.stage == 1) {
      expShifted(logits, held, max[i], exps.data());
      sums[i] = static_cast<float>(sumOf(exps.data(), held));
      picked[i] = label >= shape.classLo && label < shape.classHi
                      ? logits[label - shape.classLo]
                      : 0.0f;
    }
  }
  if (ctx.stage < 2)
    return "";
  double total = 0;
  if (shape.classLo == 0)
    for (int64_t i = 0; i < shape.rows(); ++i)
      total += max[i] + std::log(static_cast<double>(sums[i])) - picked[i];
  outputs[0].data[0] = static_cast<float>(total / shape.batch);
  return "";
}

KernelStatus crossEntropyBackward(const OpDesc &op, const KernelContext &,
                                  const std::vector<TensorView> &inputs,
                                  const std::vector<TensorView> &,
                                  const std::vector<TensorView> &outputGrads,
                                  std::vector<TensorView> &inputGrads,
                                  std::vector<TensorView> &scratch) {
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
  // d/dlogits = (softmax - onehot(label)) * dloss / N, the softmax from the
  // forward's row maxima and sums.
  double scale = outputGrads[0].data[0] / static_cast<double>(shape.batch);
  const float *max = scratch[0].data, *sums = scratch[1].data;
  const int64_t held = shape.held();
  std::vector<float> exps(static_cast<size_t>(held));
  for (int64_t i = 0; i < shape.rows(); ++i) {
    int64_t label;
    if (KernelStatus status =
            labelOf(op, inputs[1], shape.rowLo + i, shape.classes, label);
        !status.empty())
      return status;
    const float *logits = inputs[0].data + i * held;
    float *dLogits = inputGrads[0].data + i * held;
    expShifted(logits, held, max[i], exps.data());
    const float factor = static_cast<float>(scale / sums[i]);
    for (int64_t k = 0; k < held; ++k)
      dLogits[k] += exps[k] * factor;
    if (label >= shape.classLo && label < shape.classHi)
      dLogits[label - shape.classLo] -= static_cast<float>(scale);
  }
  return "";
}

//===----------------------------------------------------------------------===//
// mse_loss
//===----------------------------------------------------------------------===//

/// Checks that prediction and target hold the same box; `count` is the
/// global element count.
KernelStatus mseShape(const OpDesc &op, const std::vector<TensorView> &inputs,
                      int64_t &count) {
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
                        const std::vector<TensorView> &inputs,
                        std::vector<TensorView> &outputs,
                        std::vector<TensorView> &) {
  if (KernelStatus status = checkScalarResult(op, outputs); !status.empty())
    return status;
  int64_t count;
  if (KernelStatus status = mseShape(op, inputs, count); !status.empty())
    return status;
  const float *prediction = inputs[0].data, *target = inputs[1].data;
  double total = 0;
  for (int64_t k = 0, n = inputs[0].numElements(); k < n; ++k) {
    double diff = static_cast<double>(prediction[k]) - target[k];
    total += diff * diff;
  }
  outputs[0].data[0] = static_cast<float>(total / count);
  return "";
}

KernelStatus mseBackward(const OpDesc &op, const KernelContext &,
                         const std::vector<TensorView> &inputs,
                         const std::vector<TensorView> &,
                         const std::vector<TensorView> &outputGrads,
                         std::vector<TensorView> &inputGrads,
                         std::vector<TensorView> &) {
  if (KernelStatus status = checkGradViews(op, inputs, outputGrads, inputGrads);
      !status.empty())
    return status;
  int64_t count;
  if (KernelStatus status = mseShape(op, inputs, count); !status.empty())
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
  return "";
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
