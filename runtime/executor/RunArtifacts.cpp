//===- RunArtifacts.cpp - progress, outputs, profile ----------------------===//
//
// What a run shows and leaves behind: per-step progress and the summary
// on rank 0, saved outputs, the trained weights exported into the ONNX
// model, and the merged kernel profile.
//
//===----------------------------------------------------------------------===//

#include "Run.h"

#include "ppc/Runtime/Npy.h"
#include "ppc/Runtime/OnnxExport.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>

namespace ppc::runtime {
namespace detail {

void Run::printStep(int64_t step, int64_t last, double seconds) {
  const float *loss = lossValue();
  const double samples =
      plan.batch_size() > 0 ? double(plan.batch_size()) / seconds : 0;
  if (!options.quiet) {
    out << "step " << step << "/" << last;
    if (loss)
      out << "  loss " << lossText(*loss, "%.6f");
    out << "  " << format("%.1f", seconds * 1e3) << " ms";
    if (samples > 0)
      out << "  " << format("%.1f", samples) << " samples/s";
    if (runner.lastStepSkipped())
      out << "  (gradients overflowed: update skipped, loss scale now "
          << format("%g", runner.lossScale().scale) << ")";
    out << "\n";
    out.flush();
  }
  if (log.is_open()) {
    log << "{\"step\": " << step;
    if (loss) // JSON has no NaN or infinity
      log << ", \"loss\": "
          << (std::isfinite(*loss) ? format("%.9g", *loss) : "null");
    log << ", \"time_ms\": " << format("%.6g", seconds * 1e3);
    if (samples > 0)
      log << ", \"samples_per_s\": " << format("%.6g", samples);
    log << "}\n";
    log.flush();
  }
}

void Run::printSummary(const std::vector<double> &times,
                       const std::vector<double> &phases) {
  if (options.quiet)
    return;
  // The first step of a run warms up caches and MPI connections.
  const size_t from = times.size() > 1 ? 1 : 0;
  double total = 0;
  for (size_t i = from; i < times.size(); ++i)
    total += times[i];
  const double mean = total / double(times.size() - from);
  out << "mean step " << format("%.2f", mean * 1e3) << " ms over "
      << times.size() - from << " step" << (times.size() - from == 1 ? "" : "s")
      << (from ? " (the first excluded)" : "");
  if (plan.batch_size() > 0)
    out << ", " << format("%.1f", double(plan.batch_size()) / mean)
        << " samples/s";
  out << "\n";
  if (runner.lossScale().active())
    out << "loss scale " << format("%g", runner.lossScale().scale)
        << (runner.lossScale().dynamic ? " (dynamic)" : " (static)") << ", "
        << skippedSteps << " of " << times.size()
        << " steps skipped for overflowed gradients\n";
  out << "phase breakdown, ms per step (max over ranks):\n";
  char line[128];
  for (int p = 1; p <= kNumPhases; ++p) {
    int phase = p % kNumPhases; // "other" last, and only if any
    if (phase == 0 && phases[0] == 0)
      continue;
    std::snprintf(line, sizeof(line), "  %-14s %10.3f\n", phaseName(phase),
                  phases[phase] * 1e3);
    out << line;
  }
  std::snprintf(line, sizeof(line), "  %-14s %10.3f  (part of the above)\n",
                "communication", phases[kNumPhases] * 1e3);
  out << line;
  out << "peak resident memory " << format("%.1f", peakResidentBytes / 1048576)
      << " MiB per rank (max over ranks)\n";
  if (launchesPerStep >= 0)
    out << "launches per step " << format("%.0f", launchesPerStep)
        << " per rank (kernels and library calls, max over ranks)\n";
  // Model FLOPs utilization: the model's FLOPs over the step time and the
  // devices' peak for the type the weights train in.
  if (plan.model_flops() > 0) {
    const double rate = plan.model_flops() / mean;
    out << "model FLOPs " << format("%.3g", plan.model_flops())
        << " per step: " << format("%.3g", rate / 1e12) << " TFLOP/s";
    const DType dtype = weightDType(plan);
    const double peak = backend->peakFlops(dtype);
    if (peak > 0)
      out << ", " << format("%.1f", 100 * rate / (peak * comm.size()))
          << "% of " << comm.size() << " x " << format("%.0f", peak / 1e12)
          << " TFLOP/s (the device's " << dtypeName(dtype)
          << " peak at its reported clock: model FLOPs utilization)";
    out << "\n";
  }
  out.flush();
}

/// Merges every rank's kernel times (partitions of equal shapes average) and
/// writes them in the simulator's profile format.
absl::Status Run::writeProfile(const std::vector<std::string> &perRank) const {
  KernelTimings merged;
  for (const std::string &text : perRank) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      size_t a = line.find('\t'), b = line.rfind('\t');
      if (a == std::string::npos || a == b)
        continue;
      KernelTiming &t = merged[line.substr(0, a)];
      t.seconds += std::stod(line.substr(a + 1, b - a - 1));
      t.runs += std::stoll(line.substr(b + 1));
    }
  }
  return writeKernelProfile(
      options.profileFile,
      options.profileDevice.empty() ? kCpuProfileDevice : options.profileDevice,
      merged);
}

std::string Run::packTrainedWeights() const {
  std::string bytes;
  auto put = [&bytes](int64_t v) {
    bytes.append(reinterpret_cast<const char *>(&v), sizeof v);
  };
  for (const BoxValues &box : runner.trainedWeights()) {
    put(box.tensor);
    put(static_cast<int64_t>(box.lo.size()));
    for (size_t d = 0; d < box.lo.size(); ++d) {
      put(box.lo[d]);
      put(box.hi[d]);
    }
    bytes.append(reinterpret_cast<const char *>(box.values.data()),
                 box.values.size() * sizeof(float));
  }
  return bytes;
}

absl::Status Run::exportOnnx(const std::vector<std::string> &perRank) const {
  struct Whole {
    std::vector<float> values;
    std::vector<bool> held;
  };
  std::map<int32_t, Whole> weights;
  for (const std::string &bytes : perRank) {
    size_t at = 0;
    auto get = [&](int64_t &v) {
      std::memcpy(&v, bytes.data() + at, sizeof v);
      at += sizeof v;
    };
    while (at < bytes.size()) {
      int64_t tensor, rank;
      get(tensor);
      get(rank);
      Index lo(rank), hi(rank);
      for (int64_t d = 0; d < rank; ++d) {
        get(lo[d]);
        get(hi[d]);
      }
      const Tensor &t = plan.tensors(static_cast<int>(tensor));
      const Index shape(t.shape().begin(), t.shape().end());
      const Index zero(shape.size(), 0);
      Whole &whole = weights[static_cast<int32_t>(tensor)];
      whole.values.resize(static_cast<size_t>(boxVolume(zero, shape)));
      whole.held.resize(whole.values.size());
      const float *values = reinterpret_cast<const float *>(bytes.data() + at);
      forEachRun(lo, hi, lo, hi, zero, shape,
                 [&](int64_t from, int64_t to, int64_t length) {
                   std::copy(values + from, values + from + length,
                             whole.values.begin() + to);
                   std::fill(whole.held.begin() + to,
                             whole.held.begin() + to + length, true);
                 });
      at += static_cast<size_t>(boxVolume(lo, hi)) * sizeof(float);
    }
  }
  std::map<std::string, std::vector<float>> byName;
  for (const Tensor &t : plan.tensors()) {
    if (t.role() != Tensor::WEIGHT && t.role() != Tensor::FROZEN)
      continue;
    auto it = weights.find(t.id());
    if (it == weights.end() ||
        std::find(it->second.held.begin(), it->second.held.end(), false) !=
            it->second.held.end())
      return absl::InvalidArgumentError(
          "--export-onnx: no rank holds all of weight '" + t.name() + "'");
    std::vector<float> &values = it->second.values;
    if (t.stacked_from().empty()) {
      byName[t.name()] = std::move(values);
      continue;
    }
    // Back to the initializers it was stacked from, one slice of dim 0
    // each (checkOnnxWeights checked their shapes).
    size_t slice = values.size() / static_cast<size_t>(t.stacked_from_size());
    for (int i = 0; i < t.stacked_from_size(); ++i)
      byName[t.stacked_from(i)].assign(values.begin() + i * slice,
                                       values.begin() + (i + 1) * slice);
  }
  return exportOnnxWeights(options.exportOnnxModel, options.exportOnnxOut,
                           byName);
}

absl::Status Run::saveOutputs() const {
  const std::string &dir = options.saveOutputsDir;
  // Files are numbered in the order the model returns its outputs (rank 0's
  // Output instructions) and carry the tensor's name: output_<i>_<name>.npy.
  std::map<int32_t, int32_t> tensorOfBuffer;
  std::vector<int32_t> order;
  for (const Instruction &instr : plan.programs(0).instructions()) {
    if (instr.has_alloc())
      tensorOfBuffer[instr.alloc().buffer().id()] =
          instr.alloc().buffer().tensor();
    else if (instr.has_output())
      order.push_back(tensorOfBuffer[instr.output().buffer()]);
  }
  for (size_t i = 0; i < order.size(); ++i) {
    int32_t t = order[i];
    auto it = runner.outputs().find(t);
    if (it == runner.outputs().end())
      continue;
    std::string name = plan.tensors(t).name();
    for (char &c : name)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' &&
          c != '-' && c != '.')
        c = '_';
    Index shape(plan.tensors(t).shape().begin(), plan.tensors(t).shape().end());
    std::string path =
        dir + "/output_" + std::to_string(i) + "_" + name + ".npy";
    PPC_RETURN_IF_ERROR(writeNpy(path, shape, it->second.data()));
  }
  return absl::OkStatus();
}

} // namespace detail
} // namespace ppc::runtime
