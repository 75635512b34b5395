//===- LossKernels.cpp - losses on boxes ----------------------------------===//
//
// A loss is a mean over the whole batch: a partition holding some rows
// (softmax_cross_entropy) or some box (mse_loss) outputs its partial sum
// divided by the GLOBAL count, and the plan sums the partials. The backward
// scales by the scalar result grad.
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

/// The held rows [rowLo, rowHi) of logits [N, C] (all classes held).
struct CrossEntropyShape {
  int64_t rowLo, rowHi, classes, batch;
};

KernelStatus crossEntropyShape(const OpDesc &op,
                               const std::vector<TensorView> &inputs,
                               CrossEntropyShape &shape) {
  if (inputs.size() != 2)
    return op.kind + ": expects logits and labels";
  const TensorView &logits = inputs[0], &labels = inputs[1];
  if (logits.rank() != 2 || labels.rank() != 1)
    return op.kind + ": logits must be [N, C] and labels [N]";
  shape = {logits.lo[0], logits.hi[0], logits.shape[1], logits.shape[0]};
  if (logits.lo[1] != 0 || logits.hi[1] != shape.classes)
    return op.kind + ": logits box must hold every class";
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

/// max and log(sum(exp(x - max))) of one row of logits; `exps` (classes
/// floats) gets exp(x - max).
std::pair<double, double> logSumExp(const float *row, int64_t classes,
                                    float *exps) {
  const float max = *std::max_element(row, row + classes);
  expShifted(row, classes, max, exps);
  return {max, std::log(sumOf(exps, classes))};
}

KernelStatus crossEntropyForward(const OpDesc &op, const KernelContext &,
                                 const std::vector<TensorView> &inputs,
                                 std::vector<TensorView> &outputs,
                                 std::vector<TensorView> &) {
  if (KernelStatus status = checkScalarResult(op, outputs); !status.empty())
    return status;
  CrossEntropyShape shape;
  if (KernelStatus status = crossEntropyShape(op, inputs, shape);
      !status.empty())
    return status;
  double total = 0;
  std::vector<float> exps(static_cast<size_t>(shape.classes));
  for (int64_t row = shape.rowLo; row < shape.rowHi; ++row) {
    int64_t label;
    if (KernelStatus status = labelOf(op, inputs[1], row, shape.classes, label);
        !status.empty())
      return status;
    const float *logits = inputs[0].data + (row - shape.rowLo) * shape.classes;
    auto [max, logSum] = logSumExp(logits, shape.classes, exps.data());
    total += max + logSum - logits[label];
  }
  outputs[0].data[0] = static_cast<float>(total / shape.batch);
  return "";
}

KernelStatus crossEntropyBackward(const OpDesc &op, const KernelContext &,
                                  const std::vector<TensorView> &inputs,
                                  const std::vector<TensorView> &,
                                  const std::vector<TensorView> &outputGrads,
                                  std::vector<TensorView> &inputGrads,
                                  std::vector<TensorView> &) {
  if (KernelStatus status = checkGradViews(op, inputs, outputGrads, inputGrads);
      !status.empty())
    return status;
  CrossEntropyShape shape;
  if (KernelStatus status = crossEntropyShape(op, inputs, shape);
      !status.empty())
    return status;
  if (!inputGrads[0].data)
    return "";
  // d/dlogits = (softmax - onehot(label)) * dloss / N.
  double scale = outputGrads[0].data[0] / static_cast<double>(shape.batch);
  std::vector<float> exps(static_cast<size_t>(shape.classes));
  for (int64_t row = shape.rowLo; row < shape.rowHi; ++row) {
    int64_t label;
    if (KernelStatus status = labelOf(op, inputs[1], row, shape.classes, label);
        !status.empty())
      return status;
    int64_t offset = (row - shape.rowLo) * shape.classes;
    const float *logits = inputs[0].data + offset;
    float *dLogits = inputGrads[0].data + offset;
    auto [max, logSum] = logSumExp(logits, shape.classes, exps.data());
    // softmax = exp(x - max) / sum; its scaled difference from the one-hot.
    const float factor = static_cast<float>(std::exp(-logSum) * scale);
    for (int64_t k = 0; k < shape.classes; ++k)
      dLogits[k] += exps[k] * factor;
    dLogits[label] -= static_cast<float>(scale);
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
  table["ppc.softmax_cross_entropy"] = {crossEntropyForward,
                                        crossEntropyBackward, nullptr, 1};
  table["ppc.mse_loss"] = {mseForward, mseBackward, nullptr, 1};
}

} // namespace ppc::runtime::cpu
