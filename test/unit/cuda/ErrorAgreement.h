//===- ErrorAgreement.h - the same errors on both backends ------*- C++ -*-===//
//
// The error half of the cuda backend's oracle (BackendAgreement.h runs only
// the cases both backends accept): one partition of an op, forward then
// (optionally) backward through every stage, on the cpu backend (reference
// kernels) and on the cuda backend must fail with the same, nonempty,
// message. Operand, result and scratch buffers are filled with positive
// values (variances, counts); gradients are wanted for every operand.
//
// The single-stage forms run the forward and the backward of a partition
// each on its own (the backward runs even when the forward failed):
//   expectSameErrors(op, p, whole, name[, backwardFails])   the operands
//     hold `whole`'s values in their boxes (0.5 where none is given), and
//     both errors must agree, the forward's (and backward's) nonempty;
//   expectSameErrorsMentioning(op, p, mentions)   both errors agree and
//     the cpu backend's mention `mentions`.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_TEST_UNIT_CUDA_ERRORAGREEMENT_H
#define PPC_TEST_UNIT_CUDA_ERRORAGREEMENT_H

#include "../StatusText.h"
#include "BackendAgreement.h"

#include "ppc/Runtime/CpuBackend.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

using ppc::test::statusText;

namespace ppc::runtime::test {

inline KernelContext trainingCtx() { return KernelContext{0, true, 0}; }
inline KernelContext inferenceCtx() { return KernelContext{0, false, 0}; }

/// `error`, a kernel call's, or where it is "" the error the backend found
/// in device values once the call's work is done (Backend::deferredError):
/// what the call reports, sooner or later.
inline std::string withDeferred(Backend &backend, std::string error) {
  if (!error.empty())
    return error;
  backend.synchronize();
  int64_t instruction;
  return statusText(backend.deferredError(instruction));
}

/// The error the op's forward (then backward) reports on `backend` for one
/// partition, "" if none: the agreement harness only runs cases both
/// backends accept.
inline std::string errorOn(Backend &backend, const OpDesc &op,
                           const KernelContext &context, const Partition &p,
                           bool runBackward) {
  std::vector<std::shared_ptr<DeviceBuffer>> owned;
  auto view = [&](const std::vector<int64_t> &shape, const Box &box,
                  bool present) {
    int64_t n = 1;
    for (size_t d = 0; d < box.lo.size(); ++d)
      n *= std::max<int64_t>(0, box.hi[d] - box.lo[d]);
    std::vector<float> values = randomValues(std::max<int64_t>(n, 1), 3);
    for (float &v : values)
      v = std::fabs(v) + 0.5f; // positive: variances, counts
    std::shared_ptr<DeviceBuffer> buffer =
        backend.allocate(DType::F32, std::max<int64_t>(n, 1));
    backend.write(*buffer, 0, values.data(), static_cast<int64_t>(n));
    owned.push_back(buffer);
    return DeviceView{present ? buffer.get() : nullptr, 0, shape, box.lo,
                      box.hi};
  };
  std::vector<DeviceView> inputs, outputs, scratch, grads, outGrads;
  std::vector<TensorView> hostViews;
  for (size_t i = 0; i < op.operandShapes.size(); ++i) {
    inputs.push_back(view(op.operandShapes[i], p.inputs[i], true));
    TensorView v;
    v.shape = op.operandShapes[i];
    v.lo = p.inputs[i].lo;
    v.hi = p.inputs[i].hi;
    hostViews.push_back(v);
  }
  for (size_t i = 0; i < op.resultShapes.size(); ++i)
    outputs.push_back(view(op.resultShapes[i], p.outputs[i], true));
  for (const auto &shape : scratchShapes(op, hostViews, false))
    scratch.push_back(view(shape, wholeBox(shape), true));
  KernelContext ctx = context;
  for (int32_t s = 0; s < numStages(op, hostViews, ctx.training, false); ++s) {
    ctx.stage = s;
    std::string error = withDeferred(
        backend,
        statusText(backend.forward(op, ctx, inputs, outputs, scratch)));
    if (!error.empty())
      return error;
  }
  if (!runBackward)
    return "";
  for (size_t i = 0; i < op.resultShapes.size(); ++i)
    outGrads.push_back(view(op.resultShapes[i], p.outputs[i], true));
  for (size_t i = 0; i < op.operandShapes.size(); ++i)
    grads.push_back(view(op.operandShapes[i], p.inputs[i], true));
  for (const auto &shape : scratchShapes(op, hostViews, true))
    scratch.push_back(view(shape, wholeBox(shape), true));
  for (int32_t s = 0; s < numStages(op, hostViews, ctx.training, true); ++s) {
    ctx.stage = s;
    std::string error = withDeferred(
        backend, statusText(backend.backward(op, ctx, inputs, outputs, outGrads,
                                             grads, scratch)));
    if (!error.empty())
      return error;
  }
  backend.synchronize();
  return "";
}

/// Both backends report the same, nonempty, error.
inline void expectSameError(const OpDesc &op, const KernelContext &ctx,
                            const Partition &p, bool runBackward,
                            const std::string &name) {
  std::string unused;
  Backend &cuda = *cudaBackendUnderTest(unused);
  std::unique_ptr<Backend> cpu = createCpuBackend({1, true});
  std::string want = errorOn(*cpu, op, ctx, p, runBackward);
  EXPECT_NE(want, "") << name;
  EXPECT_EQ(errorOn(cuda, op, ctx, p, runBackward), want) << name;
}

/// The errors of the forward and of the backward of one partition on
/// `backend` (the backward runs even when the forward failed). Operand i
/// holds whole[i]'s values in its box where given; every other buffer 0.5.
inline std::pair<std::string, std::string>
forwardAndBackwardErrorsOn(Backend &backend, const OpDesc &op,
                           const Partition &p,
                           const std::vector<std::vector<float>> &whole) {
  std::vector<std::shared_ptr<DeviceBuffer>> owned;
  auto view = [&](const std::vector<int64_t> &shape, const Box &box,
                  const std::vector<float> *values) {
    int64_t n = 1;
    for (size_t d = 0; d < box.lo.size(); ++d)
      n *= std::max<int64_t>(0, box.hi[d] - box.lo[d]);
    std::vector<float> part =
        values ? extractBox(*values, shape, box)
               : std::vector<float>(std::max<int64_t>(n, 1), 0.5f);
    auto buffer =
        backend.allocate(DType::F32, std::max<size_t>(1, part.size()));
    backend.write(*buffer, 0, part.data(), static_cast<int64_t>(part.size()));
    owned.push_back(buffer);
    return DeviceView{buffer.get(), 0, shape, box.lo, box.hi};
  };
  std::vector<DeviceView> inputs, outputs, outputGrads, inputGrads;
  for (size_t i = 0; i < op.operandShapes.size(); ++i) {
    inputs.push_back(view(op.operandShapes[i], p.inputs[i],
                          i < whole.size() ? &whole[i] : nullptr));
    inputGrads.push_back(view(op.operandShapes[i], p.inputs[i], nullptr));
  }
  for (size_t o = 0; o < op.resultShapes.size(); ++o) {
    outputs.push_back(view(op.resultShapes[o], p.outputs[o], nullptr));
    outputGrads.push_back(view(op.resultShapes[o], p.outputs[o], nullptr));
  }
  std::pair<std::string, std::string> errors;
  errors.first = withDeferred(
      backend, statusText(backend.forward(op, {}, inputs, outputs, {})));
  errors.second = withDeferred(
      backend, statusText(backend.backward(op, {}, inputs, outputs, outputGrads,
                                           inputGrads, {})));
  return errors;
}

/// Both backends report the same forward and backward errors, and the
/// forward's (and, with `backwardFails`, the backward's) is not empty.
inline void expectSameErrors(const OpDesc &op, const Partition &p,
                             const std::vector<std::vector<float>> &whole,
                             const std::string &name,
                             bool backwardFails = true) {
  std::string skipReason;
  Backend *cuda = cudaBackendUnderTest(skipReason);
  ASSERT_NE(cuda, nullptr) << skipReason;
  std::unique_ptr<Backend> cpu = createCpuBackend({1, true});
  auto want = forwardAndBackwardErrorsOn(*cpu, op, p, whole);
  auto got = forwardAndBackwardErrorsOn(*cuda, op, p, whole);
  EXPECT_NE(want.first, "") << name;
  if (backwardFails) {
    EXPECT_NE(want.second, "") << name;
  }
  EXPECT_EQ(got.first, want.first) << name << " (forward)";
  EXPECT_EQ(got.second, want.second) << name << " (backward)";
}

/// Both backends report the same forward and backward errors, and the cpu
/// backend's both mention `mentions`.
inline void expectSameErrorsMentioning(const OpDesc &op, const Partition &p,
                                       const std::string &mentions) {
  std::string unused;
  Backend &cuda = *cudaBackendUnderTest(unused);
  std::unique_ptr<Backend> cpu =
      createCpuBackend({1, /*referenceKernels=*/true});
  auto want = forwardAndBackwardErrorsOn(*cpu, op, p, {});
  auto got = forwardAndBackwardErrorsOn(cuda, op, p, {});
  EXPECT_NE(want.first.find(mentions), std::string::npos)
      << "forward: " << want.first;
  EXPECT_EQ(got.first, want.first) << "forward";
  EXPECT_NE(want.second.find(mentions), std::string::npos)
      << "backward: " << want.second;
  EXPECT_EQ(got.second, want.second) << "backward";
}

} // namespace ppc::runtime::test

#endif // PPC_TEST_UNIT_CUDA_ERRORAGREEMENT_H
