//===- Reference.cpp - one step of the whole model on one device ----------===//

#include "ppc/Runtime/Reference.h"
#include "ppc/Runtime/PlanIO.h"

#include "ProgramRunner.h"

#include <cmath>
#include <functional>

namespace ppc::runtime {

using namespace ppc::planfile;

namespace {
/// Whole tensors on the backend, in their plan types.
struct Whole {
  const Plan &plan;
  Backend &backend;

  Index shapeOf(int32_t t) const {
    return Index(plan.tensors(t).shape().begin(),
                 plan.tensors(t).shape().end());
  }
  int64_t sizeOf(int32_t t) const {
    return boxVolume(Index(plan.tensors(t).shape_size(), 0), shapeOf(t));
  }
  DType dtypeOf(int32_t t) const {
    DType dtype = DType::F32;
    storageDType(plan.tensors(t).dtype(), dtype);
    return dtype;
  }
  /// A whole-tensor view of `store` (allocated on first use, zero-filled;
  /// a null buffer when the device is full).
  DeviceView view(std::shared_ptr<DeviceBuffer> &store, int32_t t) const {
    if (!store)
      store = backend.allocate(dtypeOf(t), sizeOf(t));
    Index shape = shapeOf(t);
    return {store.get(), 0, shape, Index(shape.size(), 0), shape};
  }
  std::vector<float> host(const std::shared_ptr<DeviceBuffer> &store,
                          int32_t t) const {
    if (!store)
      return {};
    std::vector<float> values(sizeOf(t));
    backend.read(*store, 0, sizeOf(t), values.data());
    return values;
  }
};

/// Zero-filled float32 scratch buffers of their own shapes.
absl::Status allocateScratch(Backend &backend,
                             const std::vector<std::vector<int64_t>> &shapes,
                             std::vector<std::shared_ptr<DeviceBuffer>> &keep,
                             std::vector<DeviceView> &views) {
  for (const Index &shape : shapes) {
    const Index zero(shape.size(), 0);
    keep.push_back(backend.allocate(DType::F32, boxVolume(zero, shape)));
    if (!keep.back())
      return absl::ResourceExhaustedError("reference: out of memory");
    views.push_back({keep.back().get(), 0, shape, zero, shape});
  }
  return absl::OkStatus();
}

/// Adds to the input gradient of kinked op `op` (run backward just now)
/// the difference its partitioned side makes: (d(p) - d(x)) dy where the
/// reference's input x and the partitioned one p fall on two sides of a
/// kink and |p - x| <= closeness * max|x|.
void followKinks(const Whole &w, const Op &op,
                 const std::function<float(float)> &derivative,
                 const std::vector<float> &partitioned, double closeness,
                 const std::vector<std::shared_ptr<DeviceBuffer>> &values,
                 const std::vector<std::shared_ptr<DeviceBuffer>> &grads,
                 ReferenceStep &r) {
  const int32_t in = op.operands(0), out = op.results(0);
  std::vector<float> x = w.host(values[in], in);
  if (x.size() != partitioned.size() || !grads[in] || !grads[out] ||
      w.sizeOf(out) != w.sizeOf(in))
    return;
  const double apart = closeness * maxMagnitude(x);
  std::vector<float> dy, dx;
  for (size_t i = 0; i < x.size(); ++i) {
    const float p = partitioned[i];
    if (std::isnan(p))
      continue;
    const float dp = derivative(p), dr = derivative(x[i]);
    if (dp == dr)
      continue;
    if (!(std::fabs(p - x[i]) <= apart)) {
      ++r.kinksApart;
      continue;
    }
    if (dy.empty()) {
      dy = w.host(grads[out], out);
      dx = w.host(grads[in], in);
    }
    dx[i] += (dp - dr) * dy[i];
    ++r.kinksFollowed;
  }
  if (!dx.empty())
    w.backend.write(*grads[in], 0, dx.data(), dx.size());
}

} // namespace

double maxMagnitude(const std::vector<float> &values) {
  double m = 0;
  for (float v : values)
    m = std::max(m, std::fabs(double(v)));
  return m;
}

absl::Status runReferenceStep(const Plan &plan, const DataSource &data,
                              int64_t step, Backend &backend, double lossScale,
                              const KinkInputs *partitioned, double closeness,
                              ReferenceStep &r) {
  r.skipped = false;
  r.kinksFollowed = r.kinksApart = 0;
  const int numTensors = plan.tensors_size();
  std::vector<std::shared_ptr<DeviceBuffer>> values(numTensors),
      grads(numTensors), masters(numTensors);
  Whole w{plan, backend};
  const absl::Status oom = absl::ResourceExhaustedError(
      "reference: out of memory for the whole tensors");
  for (int32_t t = 0; t < numTensors; ++t) {
    const Tensor &tensor = plan.tensors(t);
    if (tensor.role() == Tensor::ACTIVATION ||
        tensor.role() == Tensor::ROLE_UNSPECIFIED)
      continue;
    DeviceView v = w.view(values[t], t);
    if (!v.buffer)
      return oom;
    std::vector<float> loaded(w.sizeOf(t));
    if (absl::Status err = data.load(t, v.lo, v.hi, step, loaded.data());
        !err.ok())
      return err;
    backend.write(*v.buffer, 0, loaded.data(), w.sizeOf(t));
    // A 16-bit weight trains a float32 master copy, as ProgramRunner does.
    if (tensor.role() == Tensor::WEIGHT && w.dtypeOf(t) != DType::F32) {
      masters[t] = backend.allocate(DType::F32, w.sizeOf(t));
      if (!masters[t])
        return oom;
      backend.write(*masters[t], 0, loaded.data(), w.sizeOf(t));
    }
  }

  std::vector<OpDesc> descs;
  // Kept for the backward.
  std::vector<std::vector<std::shared_ptr<DeviceBuffer>>> forwardScratch(
      plan.ops_size());
  std::vector<std::vector<DeviceView>> forwardScratchViews(plan.ops_size());
  for (const Op &op : plan.ops()) {
    descs.push_back(describeOp(plan, op));
    const OpDesc &desc = descs.back();
    std::vector<DeviceView> inputs, outputs;
    for (int32_t t : op.operands()) {
      if (!values[t])
        return absl::InvalidArgumentError("op '" + op.name() + "' reads '" +
                                          plan.tensors(t).name() +
                                          "' before any op computes it");
      inputs.push_back(w.view(values[t], t));
    }
    for (int32_t t : op.results()) {
      outputs.push_back(w.view(values[t], t));
      if (!outputs.back().buffer)
        return oom;
    }
    std::vector<DeviceView> &scratch = forwardScratchViews[op.id()];
    const std::vector<TensorView> boxes = boxesOf(inputs);
    if (absl::Status err =
            allocateScratch(backend, scratchShapes(desc, boxes, false),
                            forwardScratch[op.id()], scratch);
        !err.ok())
      return err;
    const int32_t stages = numStages(desc, boxes, plan.training(), false);
    for (int32_t s = 0; s < stages; ++s) {
      KernelContext ctx{step, plan.training(), s, op.id()};
      if (absl::Status status =
              backend.forward(desc, ctx, inputs, outputs, scratch);
          !status.ok())
        return annotate(status, "reference: kernel error in op '" + op.name() +
                                    "' (forward, stage " + std::to_string(s) +
                                    ")");
    }
  }

  if (plan.training()) {
    const int32_t loss = plan.loss_tensor();
    DeviceView lossGrad = w.view(grads[loss], loss);
    if (!lossGrad.buffer)
      return oom;
    backend.fill(*lossGrad.buffer, lossScale);
    for (int o = plan.ops_size() - 1; o >= 0; --o) {
      const Op &op = plan.ops(o);
      bool any = false;
      for (bool needs : op.needs_grad())
        any |= needs;
      if (!any)
        continue;
      std::vector<DeviceView> inputs, outputs, outputGrads, inputGrads;
      for (int32_t t : op.operands())
        inputs.push_back(w.view(values[t], t));
      for (int32_t t : op.results()) {
        outputs.push_back(w.view(values[t], t));
        outputGrads.push_back(w.view(grads[t], t));
      }
      for (int i = 0; i < op.operands_size(); ++i) {
        int32_t t = op.operands(i);
        if (i < op.needs_grad_size() && op.needs_grad(i)) {
          inputGrads.push_back(w.view(grads[t], t));
        } else {
          Index shape = w.shapeOf(t);
          inputGrads.push_back({nullptr, 0, shape, Index(shape.size(), 0),
                                Index(shape.size(), 0)});
        }
      }
      for (const DeviceView &grad : outputGrads)
        if (!grad.buffer)
          return oom;
      // The forward's scratch first, then the backward's own.
      std::vector<DeviceView> scratch = forwardScratchViews[o];
      std::vector<std::shared_ptr<DeviceBuffer>> backwardScratch;
      const std::vector<TensorView> boxes = boxesOf(inputs);
      if (absl::Status err =
              allocateScratch(backend, scratchShapes(descs[o], boxes, true),
                              backwardScratch, scratch);
          !err.ok())
        return err;
      const int32_t stages = numStages(descs[o], boxes, true, true);
      for (int32_t s = 0; s < stages; ++s) {
        KernelContext ctx{step, true, s, plan.ops_size() + o};
        if (absl::Status status =
                backend.backward(descs[o], ctx, inputs, outputs, outputGrads,
                                 inputGrads, scratch);
            !status.ok())
          return annotate(status, "reference: kernel error in op '" +
                                      op.name() + "' (backward, stage " +
                                      std::to_string(s) + ")");
      }
      if (partitioned && op.needs_grad_size() > 0 && op.needs_grad(0))
        if (auto it = partitioned->find(op.operands(0));
            it != partitioned->end())
          if (std::function<float(float)> derivative =
                  kinkedDerivative(descs[o]))
            followKinks(w, op, derivative, it->second, closeness, values, grads,
                        r);
    }

    for (int32_t t = 0; t < numTensors; ++t)
      if (plan.tensors(t).role() == Tensor::WEIGHT && grads[t])
        r.skipped |= backend.anyNonfinite(*grads[t], w.sizeOf(t));
    for (int32_t t = 0; t < numTensors && !r.skipped; ++t) {
      if (plan.tensors(t).role() != Tensor::WEIGHT || !grads[t])
        continue;
      DeviceOptimizerState state;
      DeviceBuffer &weight = masters[t] ? *masters[t] : *values[t];
      if (!backend.update(plan.optimizer(), weight, 0, *grads[t], w.sizeOf(t),
                          state, 1.0 / lossScale))
        return oom;
    }
  }

  // Errors the kernels found in device values: `instruction` told the op
  // (forward ops by id, backward ones after them).
  int64_t at = -1;
  if (absl::Status status = backend.deferredError(at); !status.ok()) {
    const int ops = plan.ops_size();
    if (at < 0 || at >= 2 * ops)
      return annotate(status, "reference");
    return annotate(status, "reference: kernel error in op '" +
                                plan.ops(at % ops).name() + "' (" +
                                (at < ops ? "forward" : "backward") + ")");
  }

  r.values.assign(numTensors, {});
  r.grads.assign(numTensors, {});
  for (int32_t t = 0; t < numTensors; ++t) {
    r.values[t] = w.host(masters[t] ? masters[t] : values[t], t);
    r.grads[t] = w.host(grads[t], t);
    for (float &g : r.grads[t])
      g = static_cast<float>(g / lossScale);
  }
  return absl::OkStatus();
}

} // namespace ppc::runtime
