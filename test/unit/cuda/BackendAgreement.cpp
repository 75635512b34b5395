//===- BackendAgreement.cpp - one partition on two backends ---------------===//

#include "BackendAgreement.h"
#include "../StatusText.h"

#include "ppc/Runtime/CpuBackend.h"
#include "ppc/Runtime/CudaBackend.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>

using ppc::test::statusText;

namespace ppc::runtime::test {

Backend *cudaBackendUnderTest(std::string &skipReason) {
  static std::string error;
  static std::unique_ptr<Backend> backend = [] {
    absl::StatusOr<std::unique_ptr<Backend>> b = createCudaBackend({});
    if (!b.ok()) {
      error = std::string(b.status().message());
      return std::unique_ptr<Backend>();
    }
    return std::move(*b);
  }();
  skipReason = "the cuda backend cannot start here: " + error;
  return backend.get();
}

namespace {

/// Gradients start here, not at 0 (see the header).
constexpr float kAgreementGradBase = 0.25f;

/// What one backend computed, in a fixed order of named tensors.
struct Computed {
  std::string error;
  std::vector<std::pair<std::string, std::vector<float>>> tensors;
};

bool isInteger(const AgreementCase &c, size_t operand) {
  return std::find(c.integerOperands.begin(), c.integerOperands.end(),
                   static_cast<int>(operand)) != c.integerOperands.end();
}

int64_t boxElements(const Box &box) {
  int64_t n = 1;
  for (size_t d = 0; d < box.lo.size(); ++d)
    n *= box.hi[d] - box.lo[d];
  return n;
}

struct Buffers {
  std::vector<std::shared_ptr<DeviceBuffer>> owned;
  std::vector<DeviceView> views;
};

std::vector<float> readAll(Backend &backend, const DeviceView &view) {
  std::vector<float> values(view.buffer ? view.numElements() : 0);
  if (view.buffer)
    backend.read(*view.buffer, view.offset, view.numElements(), values.data());
  return values;
}

/// `explicitStages`, or 0 .. count - 1 when it is empty.
std::vector<int32_t> stageSequence(const std::vector<int32_t> &explicitStages,
                                   int32_t count) {
  if (!explicitStages.empty())
    return explicitStages;
  std::vector<int32_t> stages;
  for (int32_t s = 0; s < count; ++s)
    stages.push_back(s);
  return stages;
}

/// `overwrite`: the backward's input grads are its first contributions
/// (DeviceView::overwrite, on its first stage), starting as NaN.
Computed runOn(Backend &backend, const AgreementCase &c, const Partition &p,
               const std::vector<std::vector<float>> &wholeInputs,
               const std::vector<std::vector<float>> &outputGradValues,
               const std::vector<bool> &needsGrad, bool overwrite) {
  Computed result;
  const OpDesc &op = c.op;
  auto makeBuffer = [&](Buffers &into, DType dtype,
                        const std::vector<int64_t> &shape, const Box &box,
                        const std::vector<float> *values) {
    const int64_t n = std::max<int64_t>(boxElements(box), 1);
    std::shared_ptr<DeviceBuffer> buffer = backend.allocate(dtype, n);
    if (values)
      backend.write(*buffer, 0, values->data(),
                    static_cast<int64_t>(values->size()));
    into.owned.push_back(buffer);
    into.views.push_back({buffer.get(), 0, shape, box.lo, box.hi});
  };

  // Operands: the partition's boxes of the whole values.
  Buffers inputs;
  std::vector<std::vector<float>> inputBoxes;
  for (size_t i = 0; i < op.operandShapes.size(); ++i) {
    inputBoxes.push_back(
        extractBox(wholeInputs[i], op.operandShapes[i], p.inputs[i]));
    makeBuffer(inputs, isInteger(c, i) ? DType::F32 : c.dtype,
               op.operandShapes[i], p.inputs[i], &inputBoxes.back());
  }
  Buffers outputs;
  for (size_t i = 0; i < op.resultShapes.size(); ++i) {
    const bool given =
        i < c.initialOutputs.size() && !c.initialOutputs[i].empty();
    std::vector<float> initial;
    if (given)
      initial =
          extractBox(c.initialOutputs[i], op.resultShapes[i], p.outputs[i]);
    makeBuffer(outputs, c.dtype, op.resultShapes[i], p.outputs[i],
               given ? &initial : nullptr);
  }

  // Scratch as the op asks for this partition (host views for the shapes).
  std::vector<TensorView> hostViews;
  for (size_t i = 0; i < op.operandShapes.size(); ++i)
    hostViews.push_back(
        boxView(inputBoxes[i], op.operandShapes[i], p.inputs[i]));
  Buffers scratch;
  for (const std::vector<int64_t> &shape :
       scratchShapes(op, hostViews, false)) {
    const size_t i = scratch.views.size();
    const bool given =
        i < c.initialScratch.size() && !c.initialScratch[i].empty();
    if (given && static_cast<int64_t>(c.initialScratch[i].size()) !=
                     numElementsOf(shape)) {
      result.error = "initial values of scratch " + std::to_string(i) +
                     " do not match its shape";
      return result;
    }
    makeBuffer(scratch, DType::F32, shape, wholeBox(shape),
               given ? &c.initialScratch[i] : nullptr);
  }

  KernelContext ctx = c.ctx;
  for (int32_t s : stageSequence(
           c.forwardStages, numStages(op, hostViews, ctx.training, false))) {
    ctx.stage = s;
    result.error = statusText(
        backend.forward(op, ctx, inputs.views, outputs.views, scratch.views));
    if (!result.error.empty())
      return result;
    for (size_t i = 0; i < scratch.views.size(); ++i)
      result.tensors.push_back({"forward stage " + std::to_string(s) +
                                    " scratch " + std::to_string(i),
                                readAll(backend, scratch.views[i])});
  }
  for (size_t i = 0; i < outputs.views.size(); ++i)
    result.tensors.push_back(
        {"result " + std::to_string(i), readAll(backend, outputs.views[i])});
  for (int i : updatedOperands(op, ctx.training))
    if (i < static_cast<int>(inputs.views.size()))
      result.tensors.push_back(
          {"operand " + std::to_string(i) + " after the forward",
           readAll(backend, inputs.views[i])});
  if (!c.backward) {
    backend.synchronize();
    int64_t instruction;
    result.error = statusText(backend.deferredError(instruction));
    return result;
  }

  Buffers outputGrads;
  for (size_t i = 0; i < op.resultShapes.size(); ++i)
    makeBuffer(outputGrads, c.dtype, op.resultShapes[i], p.outputs[i],
               &outputGradValues[i]);
  Buffers inputGrads;
  for (size_t i = 0; i < op.operandShapes.size(); ++i) {
    if (!needsGrad[i]) {
      inputGrads.owned.push_back(nullptr);
      inputGrads.views.push_back(
          {nullptr, 0, op.operandShapes[i], p.inputs[i].lo, p.inputs[i].hi});
      continue;
    }
    std::vector<float> base(inputBoxes[i].size(),
                            overwrite ? NAN : kAgreementGradBase);
    makeBuffer(inputGrads, c.dtype, op.operandShapes[i], p.inputs[i], &base);
  }
  Buffers backwardScratch = scratch;
  for (const std::vector<int64_t> &shape : scratchShapes(op, hostViews, true))
    makeBuffer(backwardScratch, DType::F32, shape, wholeBox(shape), nullptr);
  const std::vector<int32_t> backwardStages = stageSequence(
      c.backwardStages, numStages(op, hostViews, ctx.training, true));
  for (size_t step = 0; step < backwardStages.size(); ++step) {
    const int32_t s = backwardStages[step];
    ctx.stage = s;
    for (DeviceView &grad : inputGrads.views)
      grad.overwrite = overwrite && step == 0 && grad.buffer;
    result.error = statusText(backend.backward(
        op, ctx, inputs.views, outputs.views, outputGrads.views,
        inputGrads.views, backwardScratch.views));
    if (!result.error.empty())
      return result;
    if (!c.backwardStages.empty())
      for (size_t i = 0; i < backwardScratch.views.size(); ++i)
        result.tensors.push_back({"backward stage " + std::to_string(s) +
                                      " scratch " + std::to_string(i),
                                  readAll(backend, backwardScratch.views[i])});
  }
  for (size_t i = 0; i < inputGrads.views.size(); ++i)
    if (inputGrads.views[i].buffer)
      result.tensors.push_back({"gradient of operand " + std::to_string(i),
                                readAll(backend, inputGrads.views[i])});
  backend.synchronize();
  int64_t instruction;
  result.error = statusText(backend.deferredError(instruction));
  return result;
}

/// Every tensor of `got` agrees with `want`'s within the case's tolerance.
void expectSameTensors(const Computed &want, const Computed &got,
                       const AgreementCase &c, const std::string &name) {
  ASSERT_EQ(got.tensors.size(), want.tensors.size()) << name;
  for (size_t t = 0; t < want.tensors.size(); ++t) {
    const auto &[what, expected] = want.tensors[t];
    const std::vector<float> &actual = got.tensors[t].second;
    ASSERT_EQ(actual.size(), expected.size()) << name << ": " << what;
    int64_t bad = 0, first = -1;
    for (size_t e = 0; e < expected.size(); ++e) {
      const double a = actual[e], b = expected[e];
      const bool same = (std::isnan(a) && std::isnan(b)) || a == b ||
                        std::fabs(a - b) <= c.atol + c.rtol * std::fabs(b);
      if (!same && bad++ == 0)
        first = static_cast<int64_t>(e);
    }
    EXPECT_EQ(bad, 0) << name << ": " << what << ": " << bad << " of "
                      << expected.size() << " elements differ; first at "
                      << first << ": cuda "
                      << (first >= 0 ? actual[first] : 0.0f) << ", cpu "
                      << (first >= 0 ? expected[first] : 0.0f);
  }
}

} // namespace

void expectBackendsAgree(const AgreementCase &c, const std::string &name) {
  std::string skipReason;
  Backend *cuda = cudaBackendUnderTest(skipReason);
  ASSERT_NE(cuda, nullptr) << skipReason;
  static std::unique_ptr<Backend> cpu =
      createCpuBackend({1, /*referenceKernels=*/true});

  const OpDesc &op = c.op;
  const Partition p = c.partition ? *c.partition : wholePartition(op);
  ASSERT_EQ(p.inputs.size(), op.operandShapes.size()) << name;
  ASSERT_EQ(p.outputs.size(), op.resultShapes.size()) << name;
  std::vector<std::vector<float>> wholeInputs;
  for (size_t i = 0; i < op.operandShapes.size(); ++i) {
    if (i < c.inputs.size() && !c.inputs[i].empty()) {
      ASSERT_EQ(static_cast<int64_t>(c.inputs[i].size()),
                numElementsOf(op.operandShapes[i]))
          << name << ": operand " << i;
      wholeInputs.push_back(c.inputs[i]);
    } else {
      wholeInputs.push_back(randomValues(numElementsOf(op.operandShapes[i]),
                                         1234 + static_cast<uint32_t>(i)));
    }
  }
  for (size_t i = 0; i < c.initialOutputs.size(); ++i) {
    if (!c.initialOutputs[i].empty()) {
      ASSERT_EQ(static_cast<int64_t>(c.initialOutputs[i].size()),
                numElementsOf(op.resultShapes.at(i)))
          << name << ": initial result " << i;
    }
  }
  std::vector<std::vector<float>> outputGrads;
  for (size_t i = 0; i < op.resultShapes.size(); ++i) {
    outputGrads.push_back(randomValues(boxElements(p.outputs[i]),
                                       777 + static_cast<uint32_t>(i)));
  }
  std::vector<bool> needsGrad = c.needsGrad;
  if (needsGrad.empty())
    for (size_t i = 0; i < op.operandShapes.size(); ++i)
      needsGrad.push_back(!isInteger(c, i));

  // Gradients added into (the kernel contract), then written by a first
  // contribution.
  for (bool overwrite : {false, true}) {
    if (overwrite && !c.backward)
      break;
    const std::string mode = overwrite ? " (gradients overwritten)" : "";
    Computed want =
        runOn(*cpu, c, p, wholeInputs, outputGrads, needsGrad, overwrite);
    ASSERT_EQ(want.error, "") << name << mode << ": the cpu backend failed";
    Computed got =
        runOn(*cuda, c, p, wholeInputs, outputGrads, needsGrad, overwrite);
    ASSERT_EQ(got.error, "") << name << mode << ": the cuda backend failed";
    expectSameTensors(want, got, c, name + mode);
  }
}

} // namespace ppc::runtime::test
