//===- Reference.cpp - one step of the whole model on one device ----------===//

#include "ppc/Runtime/Reference.h"

#include "ProgramRunner.h"
#include "ppc/Runtime/Kernels.h"
#include "ppc/Runtime/Optimizer.h"

#include <list>

namespace ppc::runtime {

using namespace ppc::planfile;

namespace {
/// Whole-tensor views of a plan's tensors.
struct Whole {
  const Plan &plan;

  Index shapeOf(int32_t t) const {
    return Index(plan.tensors(t).shape().begin(),
                 plan.tensors(t).shape().end());
  }
  int64_t sizeOf(int32_t t) const {
    return boxVolume(Index(plan.tensors(t).shape_size(), 0), shapeOf(t));
  }
  /// A whole-tensor view of `store` (sized on first use, zero-filled).
  TensorView view(std::vector<float> &store, int32_t t) const {
    if (store.empty())
      store.assign(std::max<int64_t>(sizeOf(t), 1), 0.0f);
    Index shape = shapeOf(t);
    return {store.data(), shape, Index(shape.size(), 0), shape};
  }
};

/// A zero-filled scratch buffer of its own shape.
struct Scratch {
  explicit Scratch(Index shape)
      : shape(std::move(shape)),
        values(std::max<int64_t>(
                   boxVolume(Index(this->shape.size(), 0), this->shape), 1),
               0.0f) {}
  TensorView view() {
    return {values.data(), shape, Index(shape.size(), 0), shape};
  }
  Index shape;
  std::vector<float> values;
};

} // namespace

std::string runReferenceStep(const Plan &plan, const DataSource &data,
                             int64_t step, ReferenceStep &r) {
  const int numTensors = plan.tensors_size();
  r.values.assign(numTensors, {});
  r.grads.assign(numTensors, {});
  Whole w{plan};
  for (int32_t t = 0; t < numTensors; ++t) {
    if (plan.tensors(t).role() == Tensor::ACTIVATION ||
        plan.tensors(t).role() == Tensor::ROLE_UNSPECIFIED)
      continue;
    TensorView v = w.view(r.values[t], t);
    if (std::string err = data.load(t, v.lo, v.hi, step, v.data); !err.empty())
      return err;
  }

  std::vector<OpDesc> descs;
  // Kept for the backward (a list per op, so views stay valid).
  std::vector<std::list<Scratch>> forwardScratch(plan.ops_size());
  for (const Op &op : plan.ops()) {
    descs.push_back(describeOp(plan, op));
    const OpDesc &desc = descs.back();
    std::vector<TensorView> inputs, outputs, scratch;
    for (int32_t t : op.operands()) {
      if (r.values[t].empty())
        return "op '" + op.name() + "' reads '" + plan.tensors(t).name() +
               "' before any op computes it";
      inputs.push_back(w.view(r.values[t], t));
    }
    for (int32_t t : op.results())
      outputs.push_back(w.view(r.values[t], t));
    auto &stores = forwardScratch[op.id()];
    for (const Index &shape : scratchShapes(desc, inputs, false))
      scratch.push_back(stores.emplace_back(shape).view());
    for (int32_t s = 0; s < numStages(desc, plan.training(), false); ++s) {
      KernelContext ctx{step, plan.training(), s};
      if (KernelStatus status = forward(desc, ctx, inputs, outputs, scratch);
          !status.empty())
        return "reference: kernel error in op '" + op.name() +
               "' (forward, stage " + std::to_string(s) + "): " + status;
    }
  }
  if (!plan.training())
    return "";

  const int32_t loss = plan.loss_tensor();
  TensorView lossGrad = w.view(r.grads[loss], loss);
  std::fill(lossGrad.data, lossGrad.data + w.sizeOf(loss), 1.0f);
  for (int o = plan.ops_size() - 1; o >= 0; --o) {
    const Op &op = plan.ops(o);
    bool any = false;
    for (bool needs : op.needs_grad())
      any |= needs;
    if (!any)
      continue;
    std::vector<TensorView> inputs, outputs, outputGrads, inputGrads, scratch;
    for (int32_t t : op.operands())
      inputs.push_back(w.view(r.values[t], t));
    for (int32_t t : op.results()) {
      outputs.push_back(w.view(r.values[t], t));
      outputGrads.push_back(w.view(r.grads[t], t));
    }
    for (int i = 0; i < op.operands_size(); ++i) {
      int32_t t = op.operands(i);
      if (i < op.needs_grad_size() && op.needs_grad(i)) {
        inputGrads.push_back(w.view(r.grads[t], t));
      } else {
        Index shape = w.shapeOf(t);
        inputGrads.push_back(
            {nullptr, shape, Index(shape.size(), 0), Index(shape.size(), 0)});
      }
    }
    // The forward's scratch first, then the backward's own.
    for (Scratch &store : forwardScratch[o])
      scratch.push_back(store.view());
    std::list<Scratch> backwardScratch;
    for (const Index &shape : scratchShapes(descs[o], inputs, true))
      scratch.push_back(backwardScratch.emplace_back(shape).view());
    for (int32_t s = 0; s < numStages(descs[o], true, true); ++s) {
      KernelContext ctx{step, true, s};
      if (KernelStatus status = backward(descs[o], ctx, inputs, outputs,
                                         outputGrads, inputGrads, scratch);
          !status.empty())
        return "reference: kernel error in op '" + op.name() +
               "' (backward, stage " + std::to_string(s) + "): " + status;
    }
  }

  for (int32_t t = 0; t < numTensors; ++t) {
    if (plan.tensors(t).role() != Tensor::WEIGHT || r.grads[t].empty())
      continue;
    OptimizerState state;
    applyOptimizer(plan.optimizer(), r.values[t].data(), r.grads[t].data(),
                   w.sizeOf(t), state);
  }
  return "";
}

} // namespace ppc::runtime
