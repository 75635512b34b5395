//===- LossShapes.h - softmax_cross_entropy and mse_loss boxes --*- C++ -*-===//
//
// Private to the backends (runtime/cpu, runtime/cuda), shared by their loss
// kernels: what a partition's views hold, checked alike on every backend
// (the same errors in the same order). A loss has one scalar result, a
// partial sum over the partition divided by the GLOBAL count; its backward
// reads the scalar result grad and gives each operand grad its operand's
// box.
//  - softmax_cross_entropy: logits [N, C] holding rows [rowLo, rowHi) and
//    classes [classLo, classHi), labels [N] holding at least those rows,
//    every label a class (checkLabels: the backend reads the values where
//    they lie); its staged scratch is a [rows] buffer of row maxima and a
//    [2, rows] one of sums of exp(x - max) and the label's logits; stage 2
//    sums max + log(sum) - picked over the rows (crossEntropyMean).
//  - mse_loss: prediction and target of one shape holding the same box.
// Views: TensorView, or a backend's view derived from one.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_COMMON_LOSSSHAPES_H
#define PPC_RUNTIME_COMMON_LOSSSHAPES_H

#include "KernelChecks.h"

#include "ppc/Runtime/HostDevice.h"
#include "ppc/Runtime/Kernels.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace ppc::runtime {

/// One scalar result (the loss, or its grad) with data.
template <typename View>
absl::Status checkScalarResult(const OpDesc &op,
                               const std::vector<View> &results) {
  if (results.size() != 1 || results[0].rank() != 0 || !results[0].present())
    return absl::InvalidArgumentError(op.kind + ": expects one scalar result");
  return absl::OkStatus();
}

/// A loss backward's views: the scalar result grad, one grad per operand,
/// each wanted one on its operand's box.
template <typename View>
absl::Status checkLossGradViews(const OpDesc &op,
                                const std::vector<View> &inputs,
                                const std::vector<View> &outputGrads,
                                const std::vector<View> &inputGrads) {
  if (absl::Status status = checkScalarResult(op, outputGrads); !status.ok())
    return status;
  if (inputGrads.size() != inputs.size())
    return absl::InvalidArgumentError(op.kind +
                                      ": expects one grad per operand");
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputGrads[i].present() && !sameBox(inputGrads[i], inputs[i]))
      return absl::InvalidArgumentError(
          op.kind + ": operand grad box differs from the operand box");
  return absl::OkStatus();
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

/// The logits and labels boxes, then the staged kernel's two scratch
/// buffers: [rows] row maxima (max-reduced over the partitions of a row
/// after stage 0) and [2, rows] sums of exp(x - max) and the label's logit
/// (summed after stage 1), which the backward reads.
template <typename View>
absl::Status
crossEntropyShape(const OpDesc &op, const std::vector<View> &inputs,
                  const std::vector<View> &scratch, CrossEntropyShape &shape) {
  if (inputs.size() != 2)
    return absl::InvalidArgumentError(op.kind + ": expects logits and labels");
  const TensorView &logits = inputs[0], &labels = inputs[1];
  if (logits.rank() != 2 || labels.rank() != 1)
    return absl::InvalidArgumentError(op.kind +
                                      ": logits must be [N, C] and labels [N]");
  shape = {logits.lo[0], logits.hi[0],    logits.lo[1],
           logits.hi[1], logits.shape[1], logits.shape[0]};
  if (labels.lo[0] > shape.rowLo || labels.hi[0] < shape.rowHi)
    return absl::InvalidArgumentError(
        op.kind + ": labels box does not hold the logits rows");
  if (scratch.size() < 2 || scratch[0].rank() != 1 ||
      scratch[0].extent(0) != shape.rows() || scratch[1].rank() != 2 ||
      scratch[1].extent(0) != 2 || scratch[1].extent(1) != shape.rows() ||
      !scratch[0].present() || !scratch[1].present())
    return absl::InvalidArgumentError(
        op.kind + ": expects [" + std::to_string(shape.rows()) + "] and [2, " +
        std::to_string(shape.rows()) + "] scratch buffers");
  return absl::OkStatus();
}

/// A forward's checks: the scalar result, then the shape.
template <typename View>
absl::Status crossEntropyForwardShape(const OpDesc &op,
                                      const std::vector<View> &inputs,
                                      const std::vector<View> &outputs,
                                      const std::vector<View> &scratch,
                                      CrossEntropyShape &shape) {
  if (absl::Status status = checkScalarResult(op, outputs); !status.ok())
    return status;
  return crossEntropyShape(op, inputs, scratch, shape);
}

/// A backward's checks: the grad views, then the shape.
template <typename View>
absl::Status crossEntropyBackwardShape(const OpDesc &op,
                                       const std::vector<View> &inputs,
                                       const std::vector<View> &outputGrads,
                                       const std::vector<View> &inputGrads,
                                       const std::vector<View> &scratch,
                                       CrossEntropyShape &shape) {
  if (absl::Status status =
          checkLossGradViews(op, inputs, outputGrads, inputGrads);
      !status.ok())
    return status;
  return crossEntropyShape(op, inputs, scratch, shape);
}

/// Whether a label value names one of `classes` classes.
PPC_HD inline bool isClass(float value, int64_t classes) {
  const int64_t label = static_cast<int64_t>(value);
  return value >= 0.0f && value < static_cast<float>(classes) &&
         static_cast<float>(label) == value && label < classes;
}

/// The error of a label that is not a class.
inline absl::Status labelError(const OpDesc &op, float value, int64_t row,
                               int64_t classes) {
  return absl::InvalidArgumentError(
      op.kind + ": label " + std::to_string(value) + " of row " +
      std::to_string(row) + " is not a class in [0, " +
      std::to_string(classes) + ")");
}

/// Checks that every held row's label is a class (`labels`: the values of
/// rows [rowLo, rowHi), where the backend reads them); the first that is
/// not is the error.
inline absl::Status checkLabels(const OpDesc &op, const float *labels,
                                const CrossEntropyShape &shape) {
  for (int64_t i = 0; i < shape.rows(); ++i)
    if (!isClass(labels[i], shape.classes))
      return labelError(op, labels[i], shape.rowLo + i, shape.classes);
  return absl::OkStatus();
}

/// Stage 2: the rows' mean loss, sum of max + log(sum) - picked over the
/// rows divided by the global batch, written by the partition holding the
/// first classes (`writes`; the others write 0, so the plan's sum of the
/// partial results counts each row once).
/// What forward stage 0 keeps of a row's held classes in place of their
/// sum of exponentials: their log-sum-exp, max + log(sum of exp(x - max)),
/// which needs no maximum of the other partitions.
PPC_HD inline float heldLogSumExp(float max, double sumExpShifted) {
  return static_cast<float>(max + ::log(sumExpShifted));
}
/// Stage 1: the held sum of exp(x - rowMax) from the held log-sum-exp, once
/// the row's maximum over all partitions is known (0 for classes whose
/// exponentials all vanish).
PPC_HD inline float heldSum(float logSumExp, float rowMax) {
  return static_cast<float>(::exp(static_cast<double>(logSumExp) - rowMax));
}

PPC_HD inline float crossEntropyMean(const float *max, const float *sums,
                                     const float *picked, int64_t rows,
                                     bool writes, double batch) {
  double total = 0;
  if (writes)
    for (int64_t i = 0; i < rows; ++i)
      total += max[i] + ::log(static_cast<double>(sums[i])) - picked[i];
  return static_cast<float>(total / batch);
}

//===----------------------------------------------------------------------===//
// mse_loss
//===----------------------------------------------------------------------===//

/// Checks that prediction and target hold the same box; `count` is the
/// global element count.
template <typename View>
absl::Status mseShape(const OpDesc &op, const std::vector<View> &inputs,
                      int64_t &count) {
  if (inputs.size() != 2)
    return absl::InvalidArgumentError(op.kind +
                                      ": expects prediction and target");
  if (inputs[0].shape != inputs[1].shape || !sameBox(inputs[0], inputs[1]))
    return absl::InvalidArgumentError(op.kind +
                                      ": prediction and target boxes differ");
  count = 1;
  for (int64_t size : inputs[0].shape)
    count *= size;
  return absl::OkStatus();
}

/// A forward's checks: the scalar result, then the shape.
template <typename View>
absl::Status mseForwardShape(const OpDesc &op, const std::vector<View> &inputs,
                             const std::vector<View> &outputs, int64_t &count) {
  if (absl::Status status = checkScalarResult(op, outputs); !status.ok())
    return status;
  return mseShape(op, inputs, count);
}

/// A backward's checks: the grad views, then the shape.
template <typename View>
absl::Status mseBackwardShape(const OpDesc &op, const std::vector<View> &inputs,
                              const std::vector<View> &outputGrads,
                              const std::vector<View> &inputGrads,
                              int64_t &count) {
  if (absl::Status status =
          checkLossGradViews(op, inputs, outputGrads, inputGrads);
      !status.ok())
    return status;
  return mseShape(op, inputs, count);
}

} // namespace ppc::runtime

#endif // PPC_RUNTIME_COMMON_LOSSSHAPES_H
