//===- RunVerify.cpp - --verify against one device ------------------------===//
//
// --verify: the step's loss, outputs, gradients and updated weights
// compared with the single-device reference (Reference.h), within the
// plan's loosest type's tolerance.
//
//===----------------------------------------------------------------------===//

#include "Run.h"

#include "ppc/Runtime/Reference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <sstream>

namespace ppc::runtime {
namespace detail {

namespace {

/// One line of the --verify table: the worst error of one tensor's buffers.
struct VerifyRow {
  double maxAbs = 0;
  double maxRel = 0;
};
/// (kind, tensor id): kinds in table order.
enum VerifyKind { VLoss, VOutput, VGrad, VWeight, VFrozen };
const char *verifyKindName(int kind) {
  static const char *names[] = {"loss", "output", "grad", "weight", "frozen"};
  return names[kind];
}
using VerifyTable = std::map<std::pair<int, int32_t>, VerifyRow>;

/// Every rank's kinked-op inputs (ProgramRunner::kinkInputs) as whole
/// tensors, on every rank: records of int64 words (tensor, rank, lo, hi,
/// element count) and then the floats, gathered over the world.
absl::Status gatherKinkInputs(const Plan &plan, Communicator &comm,
                              const std::vector<BoxValues> &mine,
                              KinkInputs &whole) {
  std::string bytes;
  auto put = [&](const void *data, size_t n) {
    bytes.append(static_cast<const char *>(data), n);
  };
  for (const BoxValues &box : mine) {
    std::vector<int64_t> head = {box.tensor,
                                 static_cast<int64_t>(box.lo.size())};
    head.insert(head.end(), box.lo.begin(), box.lo.end());
    head.insert(head.end(), box.hi.begin(), box.hi.end());
    head.push_back(static_cast<int64_t>(box.values.size()));
    put(head.data(), head.size() * sizeof(int64_t));
    put(box.values.data(), box.values.size() * sizeof(float));
  }
  // MPI counts bytes in an int.
  const double total = comm.maxOverRanks({double(bytes.size())}, [] {
    return std::string("verify: sizing the inputs of kinked ops");
  })[0] * comm.size();
  if (total >= double(std::numeric_limits<int>::max()))
    return absl::InvalidArgumentError(
        "verify: the inputs of relu-like ops (" + format("%.0f", total) +
        " bytes from all ranks) are too large to gather");
  std::vector<std::string> all = comm.allGatherStrings(
      bytes, [] { return std::string("verify: gathering kinked inputs"); });
  for (const std::string &from : all) {
    const char *at = from.data(), *end = at + from.size();
    auto take = [&](void *data, size_t n) {
      std::memcpy(data, at, n);
      at += n;
    };
    while (at < end) {
      int64_t t, rank, n;
      take(&t, sizeof t);
      take(&rank, sizeof rank);
      Index lo(rank), hi(rank);
      take(lo.data(), rank * sizeof(int64_t));
      take(hi.data(), rank * sizeof(int64_t));
      take(&n, sizeof n);
      std::vector<float> values(n);
      take(values.data(), n * sizeof(float));
      const Index shape(plan.tensors(t).shape().begin(),
                        plan.tensors(t).shape().end());
      std::vector<float> &dst = whole[static_cast<int32_t>(t)];
      if (dst.empty())
        dst.assign(boxVolume(Index(shape.size(), 0), shape), NAN);
      forEachRun(lo, hi, lo, hi, Index(shape.size(), 0), shape,
                 [&](int64_t a, int64_t g, int64_t len) {
                   std::copy_n(values.begin() + a, len, dst.begin() + g);
                 });
    }
  }
  return absl::OkStatus();
}

/// Compares box [lo, hi) of a tensor against the whole reference tensor
/// `ref` of `shape` (empty `ref`: zeros). The relative error divides by the
/// largest |value| of the reference tensor, but at least by `floor`: a
/// gradient that cancels to rounding noise (a bias before batch norm) has
/// no meaningful scale of its own. NaN counts as infinite.
VerifyRow compareBox(const std::vector<float> &ref, const Index &shape,
                     const Index &lo, const Index &hi,
                     const std::vector<float> &values, double floor) {
  VerifyRow row;
  auto note = [&](double d) {
    row.maxAbs = std::max(row.maxAbs, std::isnan(d) ? INFINITY : d);
  };
  if (ref.empty()) {
    for (int64_t i = 0; i < boxVolume(lo, hi); ++i)
      note(std::fabs(double(values[i])));
  } else {
    forEachRun(lo, hi, lo, hi, Index(shape.size(), 0), shape,
               [&](int64_t a, int64_t g, int64_t n) {
                 for (int64_t i = 0; i < n; ++i)
                   note(std::fabs(double(values[a + i]) - ref[g + i]));
               });
  }
  const double scale = std::max(maxMagnitude(ref), floor);
  if (std::isnan(scale))
    row.maxAbs = INFINITY;
  row.maxRel = scale > 0 ? row.maxAbs / scale : row.maxAbs;
  return row;
}

/// The most one step of the plan's optimizer (first step, from zero state)
/// can move a weight per unit of gradient between gradients `a` and `b`:
/// lr for SGD and momentum; Adam's step lr * g / (|g| + eps) has slope
/// lr * eps / (|g| + eps)^2 <= lr / (|g| + eps), steepest at 0, which turns
/// rounding noise in a gradient that cancels to ~0 (a bias before batch
/// norm) into steps of up to lr.
double updateSensitivity(const Optimizer &opt, double a, double b) {
  double lr = opt.learning_rate();
  if (opt.kind() != Optimizer::ADAM)
    return lr;
  double eps = opt.epsilon() > 0 ? opt.epsilon() : 1e-8;
  double nearest =
      (a > 0) != (b > 0) ? 0.0 : std::min(std::fabs(a), std::fabs(b));
  return lr / (nearest + eps);
}

/// Compares an updated weight box with the reference, discounting what the
/// optimizer makes of the gradient difference (checked on its own row):
/// the error reported is what that difference does not explain.
VerifyRow compareUpdated(const Optimizer &opt, const std::vector<float> &ref,
                         const std::vector<float> &refGrad, const Index &shape,
                         const BoxValues &weight, const BoxValues &grad,
                         double floor) {
  VerifyRow row;
  forEachRun(weight.lo, weight.hi, weight.lo, weight.hi, Index(shape.size(), 0),
             shape, [&](int64_t a, int64_t g, int64_t n) {
               for (int64_t i = 0; i < n; ++i) {
                 double gref = refGrad.empty() ? 0.0 : refGrad[g + i];
                 double gmine = grad.values[a + i];
                 double explained = updateSensitivity(opt, gmine, gref) *
                                    std::fabs(gmine - gref);
                 double d =
                     std::fabs(double(weight.values[a + i]) - ref[g + i]);
                 d = std::isnan(d) ? INFINITY : std::max(0.0, d - explained);
                 row.maxAbs = std::max(row.maxAbs, d);
               }
             });
  const double scale = std::max(maxMagnitude(ref), floor);
  row.maxRel = scale > 0 ? row.maxAbs / scale : row.maxAbs;
  return row;
}

void merge(VerifyTable &table, std::pair<int, int32_t> key, VerifyRow row) {
  VerifyRow &r = table[key];
  r.maxAbs = std::max(r.maxAbs, row.maxAbs);
  r.maxRel = std::max(r.maxRel, row.maxRel);
}

/// The loosest DTypeInfo of the plan's tensors' types.
const DTypeInfo &loosestDType(const Plan &plan) {
  const DTypeInfo *loosest = &dtypeInfo(DType::F32);
  for (const Tensor &t : plan.tensors()) {
    DType dtype;
    if (storageDType(t.dtype(), dtype) &&
        dtypeInfo(dtype).verifyTolerance > loosest->verifyTolerance)
      loosest = &dtypeInfo(dtype);
  }
  return *loosest;
}

} // namespace

int Run::verify(int64_t step, double lossScale) {
  // TF32 products keep f16's 10-bit mantissas: float32 is checked as f16.
  const DTypeInfo &planLoosest = loosestDType(plan),
                  &f16 = dtypeInfo(DType::F16);
  const DTypeInfo &loosest =
      options.allowTf32 && f16.verifyTolerance > planLoosest.verifyTolerance
          ? f16
          : planLoosest;
  const double tolerance = options.verifyTolerance > 0
                               ? options.verifyTolerance
                               : loosest.verifyTolerance;
  ReferenceStep ref;
  // The reference may run on another backend (--verify-backend).
  std::unique_ptr<Backend> other;
  absl::Status otherError;
  if (!options.verifyBackend.empty() &&
      options.verifyBackend != options.backend) {
    absl::StatusOr<std::unique_ptr<Backend>> started = createBackend(
        options.verifyBackend, {options.threads, options.referenceKernels});
    if (started.ok())
      other = std::move(*started);
    else
      otherError = annotate(started.status(),
                            "--verify-backend " + options.verifyBackend);
  }
  if (anyFailed(otherError, false))
    return 1;
  // The reference follows the partitioned run's side of each kink.
  KinkInputs kinks;
  if (anyFailed(gatherKinkInputs(plan, comm, runner.kinkInputs(), kinks), true))
    return 1;
  if (anyFailed(runReferenceStep(plan, data, step, other ? *other : *backend,
                                 lossScale, &kinks, tolerance, ref),
                true))
    return 1;
  // Loss scaling skips a step whose gradients overflow: both sides must.
  const bool skipped = runner.lastStepSkipped();
  if (skipped != ref.skipped) {
    if (rank == 0)
      out << "verify FAILED: at loss scale " << format("%g", lossScale)
          << " the gradients of the " << (skipped ? "partitioned" : "reference")
          << " step overflowed and those of the "
          << (skipped ? "reference" : "partitioned") << " step did not\n";
    return 1;
  }
  auto shapeOf = [&](int32_t t) {
    return Index(plan.tensors(t).shape().begin(),
                 plan.tensors(t).shape().end());
  };
  // Floors of the relative errors: 1% (for float32; DTypeInfo::verifyFloor)
  // of the largest |value| among the reference's tensors of each kind (the
  // same on every rank).
  const double floorFraction = loosest.verifyFloor;
  double floor[VFrozen + 1] = {};
  for (int32_t t = 0; t < plan.tensors_size(); ++t) {
    const Tensor &tensor = plan.tensors(t);
    int kind = tensor.role() == Tensor::WEIGHT   ? VWeight
               : tensor.role() == Tensor::FROZEN ? VFrozen
               : tensor.is_output()              ? VOutput
                                                 : -1;
    if (kind >= 0)
      floor[kind] =
          std::max(floor[kind], floorFraction * maxMagnitude(ref.values[t]));
    if (kind == VWeight)
      floor[VGrad] =
          std::max(floor[VGrad], floorFraction * maxMagnitude(ref.grads[t]));
  }
  floor[VLoss] = floor[VOutput];
  VerifyTable table;
  for (const auto &[t, values] : runner.outputs()) {
    Index shape = shapeOf(t);
    int kind = plan.training() && t == plan.loss_tensor() ? VLoss : VOutput;
    merge(table, {kind, t},
          compareBox(ref.values[t], shape, Index(shape.size(), 0), shape,
                     values, floor[kind]));
  }
  // Overflowed gradients (both sides skipped the update) are not compared.
  for (const BoxValues &g : runner.keptGradients())
    if (!skipped)
      merge(table, {VGrad, g.tensor},
            compareBox(ref.grads[g.tensor], shapeOf(g.tensor), g.lo, g.hi,
                       g.values, floor[VGrad]));
  for (const BoxValues &w : runner.updatedWeights()) {
    const BoxValues *grad = nullptr;
    for (const BoxValues &g : runner.keptGradients())
      if (g.tensor == w.tensor && g.lo == w.lo && g.hi == w.hi)
        grad = &g;
    // A ZeRO shard: this rank updated the rows of its gradient (the other
    // rows came from their ranks, which check them).
    BoxValues rows;
    for (const BoxValues &g : runner.keptGradients())
      if (!grad && g.tensor == w.tensor && isRowBlock(g.lo, g.hi, w.lo, w.hi)) {
        auto begin = w.values.begin() + rowOffset(w.lo, w.hi, g.lo[0]);
        rows = {w.tensor, g.lo, g.hi,
                std::vector<float>(begin, begin + g.values.size())};
        grad = &g;
      }
    const BoxValues &checked = rows.values.empty() ? w : rows;
    merge(table, {VWeight, w.tensor},
          grad && !skipped
              ? compareUpdated(plan.optimizer(), ref.values[w.tensor],
                               ref.grads[w.tensor], shapeOf(w.tensor), checked,
                               *grad, floor[VWeight])
              : compareBox(ref.values[w.tensor], shapeOf(w.tensor), w.lo, w.hi,
                           w.values, floor[VWeight]));
  }
  for (const BoxValues &f : runner.frozenBuffers())
    merge(table, {VFrozen, f.tensor},
          compareBox(ref.values[f.tensor], shapeOf(f.tensor), f.lo, f.hi,
                     f.values, floor[VFrozen]));

  std::ostringstream mine;
  mine.precision(17);
  for (const auto &[key, row] : table)
    mine << key.first << ' ' << key.second << ' ' << row.maxAbs << ' '
         << row.maxRel << '\n';
  std::vector<std::string> all =
      comm.gatherToRoot(mine.str(), [] { return "verify gather"; });
  int64_t failed = 0;
  if (rank == 0) {
    VerifyTable worst;
    for (const std::string &text : all) {
      std::istringstream in(text);
      int kind;
      int32_t tensor;
      std::string a, r;
      while (in >> kind >> tensor >> a >> r)
        merge(worst, {kind, tensor}, {std::stod(a), std::stod(r)});
    }
    out << "verify: step " << step
        << " against the single-device reference (worst over ranks, "
           "tolerance "
        << format("%g", tolerance) << " relative)\n";
    if (ref.kinksFollowed > 0)
      out << "  (the reference took the partitioned run's side of "
          << ref.kinksFollowed << " kink" << (ref.kinksFollowed == 1 ? "" : "s")
          << ": inputs of relu-like ops within round-off of where the "
             "derivative jumps)\n";
    if (ref.kinksApart > 0)
      out << "  (" << ref.kinksApart
          << " inputs of relu-like ops fell on another side of a kink than "
             "in the partitioned run, further apart than round-off)\n";
    if (skipped)
      out << "  (the gradients overflowed at loss scale "
          << format("%g", lossScale)
          << " on both sides and are not compared; the update was skipped)\n";
    char line[256];
    std::snprintf(line, sizeof(line), "  %-7s %-32s %14s %14s\n", "what",
                  "tensor", "max abs err", "max rel err");
    out << line;
    for (const auto &[key, row] : worst) {
      bool bad = !(row.maxRel <= tolerance);
      failed += bad;
      std::snprintf(line, sizeof(line), "  %-7s %-32s %14.3e %14.3e%s\n",
                    verifyKindName(key.first),
                    plan.tensors(key.second).name().c_str(), row.maxAbs,
                    row.maxRel, bad ? "  FAILED" : "");
      out << line;
    }
    if (worst.empty())
      out << "  (nothing to compare: the plan has no outputs or updates)\n";
    if (failed)
      out << "verify FAILED: " << failed << " tensor"
          << (failed == 1 ? "" : "s") << " above the tolerance\n";
    else
      out << "verify passed\n";
    out.flush();
  }
  failed = comm.broadcastFromRoot(failed, [] { return "verify verdict"; });
  return failed ? 1 : 0;
}

const float *Run::lossValue() const {
  if (!plan.training())
    return nullptr;
  auto it = runner.outputs().find(plan.loss_tensor());
  return it != runner.outputs().end() && !it->second.empty() ? &it->second[0]
                                                             : nullptr;
}

} // namespace detail
} // namespace ppc::runtime
