//===- KernelChecks.h - what the backends' kernels check alike --*- C++ -*-===//
//
// Private to the backends (runtime/cpu, runtime/cuda). The host-side checks
// and view geometry every backend's kernels share, so that each reports
// the same errors for the same views: view counts (forward and backward),
// gradient boxes, axes, and strided accesses of views from an iteration box.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_COMMON_KERNELCHECKS_H
#define PPC_RUNTIME_COMMON_KERNELCHECKS_H

#include "ppc/Runtime/Kernels.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ppc::runtime {

/// How one view dim is indexed by an iteration point p:
/// index = p[iterDim] * scale + offset, or just `offset` when iterDim < 0.
struct DimMap {
  int64_t iterDim = -1;
  int64_t scale = 1;
  int64_t offset = 0;

  static DimMap identity(int64_t d, int64_t offset = 0) {
    return {d, 1, offset};
  }
  static DimMap fixed(int64_t index) { return {-1, 1, index}; }
};

/// A view's buffer offset as a linear function of the iteration point:
/// offset = base + sum_d (p[d] - lo[d]) * strides[d].
struct StridedAccess {
  int64_t base = 0;
  std::vector<int64_t> strides;
};

/// The access of `view` from the iteration box [lo, hi) through `dims` (one
/// per view dim); nullopt if the box reaches an element the view does not
/// hold (or its rank is not that of `dims`). `scale` must be positive.
inline std::optional<StridedAccess>
stridedAccess(const TensorView &view, const std::vector<int64_t> &lo,
              const std::vector<int64_t> &hi, const std::vector<DimMap> &dims) {
  if (dims.size() != view.lo.size() || view.hi.size() != view.lo.size())
    return std::nullopt;
  StridedAccess access{0, std::vector<int64_t>(lo.size(), 0)};
  bool empty = false;
  for (size_t d = 0; d < lo.size(); ++d)
    empty |= hi[d] <= lo[d];
  std::vector<int64_t> viewStrides = view.strides();
  for (size_t i = 0; i < dims.size(); ++i) {
    const DimMap &map = dims[i];
    int64_t first = map.offset, last = map.offset;
    if (map.iterDim >= 0) {
      first += lo[map.iterDim] * map.scale;
      last += (hi[map.iterDim] - 1) * map.scale;
      access.strides[map.iterDim] += viewStrides[i] * map.scale;
    }
    if (!empty && (first < view.lo[i] || last >= view.hi[i]))
      return std::nullopt;
    access.base += (first - view.lo[i]) * viewStrides[i];
  }
  return access;
}

/// The access of a view whose dims are the iteration dims, in order.
inline std::optional<StridedAccess>
identityAccess(const TensorView &view, const std::vector<int64_t> &lo,
               const std::vector<int64_t> &hi) {
  std::vector<DimMap> dims;
  for (size_t d = 0; d < lo.size(); ++d)
    dims.push_back(DimMap::identity(static_cast<int64_t>(d)));
  return stridedAccess(view, lo, hi, dims);
}

/// Extents of the box [lo, hi).
inline std::vector<int64_t> extentsOf(const std::vector<int64_t> &lo,
                                      const std::vector<int64_t> &hi) {
  std::vector<int64_t> extents(lo.size());
  for (size_t d = 0; d < lo.size(); ++d)
    extents[d] = hi[d] - lo[d];
  return extents;
}

/// Checks the numbers of views a kernel got (`what`: "views" of operands and
/// results, or "gradient views").
inline absl::Status expectArity(const OpDesc &op, const char *what,
                                size_t operands, size_t expectedOperands,
                                size_t results, size_t expectedResults) {
  if (operands == expectedOperands && results == expectedResults)
    return {};
  return absl::InvalidArgumentError(
      op.kind + ": expects " + std::to_string(expectedOperands) +
      " operand and " + std::to_string(expectedResults) + " result " + what +
      ", got " + std::to_string(operands) + " and " + std::to_string(results));
}

template <typename View> bool sameBox(const View &a, const View &b) {
  return a.lo == b.lo && a.hi == b.hi;
}

/// The result grad must match the result box and each wanted operand grad
/// its operand's box: the kernels index them alike. Results may be absent
/// (a backward that does not read them): then only the operands are checked.
/// `View`: a TensorView, or a backend's view derived from one.
template <typename View>
absl::Status checkGradBoxes(const OpDesc &op, const std::vector<View> &inputs,
                            const std::vector<View> &outputs,
                            const std::vector<View> &outputGrads,
                            const std::vector<View> &inputGrads) {
  if ((!outputs.empty() && outputGrads.size() != outputs.size()) ||
      inputGrads.size() != inputs.size())
    return absl::InvalidArgumentError(
        op.kind + ": expects one grad per result and per operand");
  for (size_t i = 0; i < outputs.size(); ++i)
    if (!sameBox(outputGrads[i], outputs[i]))
      return absl::InvalidArgumentError(
          op.kind + ": result grad box differs from the result box");
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputGrads[i].present() && !sameBox(inputGrads[i], inputs[i]))
      return absl::InvalidArgumentError(
          op.kind + ": operand grad box differs from the operand box");
  return absl::OkStatus();
}

/// An axis attribute counted from the back when negative.
inline int64_t normalizeAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

/// The forward's views: `numInputs` operands and `numOutputs` results.
template <typename View>
absl::Status
checkForwardArity(const OpDesc &op, const std::vector<View> &inputs,
                  size_t numInputs, const std::vector<View> &outputs,
                  size_t numOutputs) {
  return expectArity(op, "views", inputs.size(), numInputs, outputs.size(),
                     numOutputs);
}

/// The forward views' counts, and one gradient view per operand and result.
template <typename View>
absl::Status
checkBackwardArity(const OpDesc &op, const std::vector<View> &inputs,
                   size_t numInputs, const std::vector<View> &outputs,
                   size_t numOutputs, const std::vector<View> &outputGrads,
                   const std::vector<View> &inputGrads) {
  if (absl::Status s =
          checkForwardArity(op, inputs, numInputs, outputs, numOutputs);
      !s.ok())
    return s;
  if (inputGrads.size() != inputs.size() ||
      outputGrads.size() != outputs.size())
    return expectArity(op, "gradient views", inputGrads.size(), inputs.size(),
                       outputGrads.size(), outputs.size());
  return {};
}

/// An axis attribute (as given, before normalizeAxis) outside the rank.
inline absl::Status axisOutOfRange(const OpDesc &op, int64_t axis,
                                   int64_t rank) {
  return absl::InvalidArgumentError(op.kind + ": axis " + std::to_string(axis) +
                                    " is out of range for rank " +
                                    std::to_string(rank));
}

} // namespace ppc::runtime

#endif // PPC_RUNTIME_COMMON_KERNELCHECKS_H
