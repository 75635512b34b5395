//===- KernelProfile.cpp - measuring kernels and writing profiles ---------===//

#include "ppc/Runtime/KernelProfile.h"

#include "ppc/Runtime/PlanIO.h"

#include "ppc/Runtime/Boxes.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>

namespace ppc::runtime {

using ppc::planfile::Instruction;
using ppc::planfile::Op;
using ppc::planfile::Plan;
using json = nlohmann::ordered_json;

/// The simulator charges integer ops at the f32 rate and keys them so.
static std::string profileDType(const std::string &dtype) {
  return dtype == "f64" || dtype == "f16" || dtype == "bf16" ? dtype : "f32";
}

std::string kernelProfileKey(
    const Plan &plan, const Op &op, const char *phase,
    const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>
        &operandBoxes) {
  std::string key =
      op.kind() + "|" +
      profileDType(op.results_size() > 0 ? plan.tensors(op.results(0)).dtype()
                                         : "f32") +
      "|" + phase + "|[";
  for (size_t i = 0; i < operandBoxes.size(); ++i) {
    const auto &[lo, hi] = operandBoxes[i];
    key += i ? ",[" : "[";
    for (size_t d = 0; d < lo.size(); ++d)
      key += (d ? "," : "") + std::to_string(hi[d] - lo[d]);
    key += "]";
  }
  return key + "]";
}

absl::Status writeKernelProfile(const std::string &path,
                                const std::string &device,
                                const KernelTimings &timings) {
  // An existing profile of the same device is added to: runs of other
  // plans (a search's candidates) accumulate in one file.
  std::map<std::string, json> entries; // by kind|dtype|phase|shapes
  if (std::ifstream existing(path); existing) {
    json old;
    try {
      old = json::parse(existing);
    } catch (const std::exception &e) {
      // json's parse errors, and the stream's (a directory reads as EISDIR).
      return absl::InvalidArgumentError("cannot add to profile file '" + path +
                                        "': not JSON (" + e.what() +
                                        "); remove it or name another");
    }
    if (!old.is_object() || old.value("version", 0) != 1 ||
        !old.contains("entries") || !old["entries"].is_array())
      return absl::InvalidArgumentError(
          "cannot add to profile file '" + path +
          "': not a version 1 profile; remove it or name another");
    std::string oldDevice = old.value("device", "");
    if (oldDevice != device)
      return absl::InvalidArgumentError(
          "profile file '" + path + "' measures device '" + oldDevice +
          "', not '" + device + "': name another file");
    for (const json &e : old["entries"]) {
      if (!e.is_object() || !e.contains("op") || !e.contains("dtype") ||
          !e.contains("phase") || !e.contains("operand_shapes") ||
          !e.contains("seconds"))
        return absl::InvalidArgumentError(
            "cannot add to profile file '" + path +
            "': an entry lacks op, dtype, phase, operand_shapes or "
            "seconds");
      std::string key = e["op"].get<std::string>() + "|" +
                        e["dtype"].get<std::string>() + "|" +
                        e["phase"].get<std::string>() + "|" +
                        e["operand_shapes"].dump();
      entries[key] = e;
    }
  }
  for (const auto &[key, timing] : timings) {
    if (timing.runs == 0 || timing.seconds <= 0)
      continue;
    // key: kind|dtype|phase|shapes
    size_t p1 = key.find('|'), p2 = key.find('|', p1 + 1),
           p3 = key.find('|', p2 + 1);
    json shapes = json::parse(key.substr(p3 + 1));
    std::string mergeKey = key.substr(0, p3) + "|" + shapes.dump();
    double seconds = timing.seconds;
    int64_t runs = timing.runs;
    if (auto it = entries.find(mergeKey); it != entries.end()) {
      int64_t before = it->second.value("runs", int64_t(1));
      seconds += it->second["seconds"].get<double>() * double(before);
      runs += before;
    }
    entries[mergeKey] = json{{"op", key.substr(0, p1)},
                             {"dtype", key.substr(p1 + 1, p2 - p1 - 1)},
                             {"phase", key.substr(p2 + 1, p3 - p2 - 1)},
                             {"operand_shapes", shapes},
                             {"seconds", seconds / double(runs)},
                             {"runs", runs}};
  }
  std::ofstream file(path);
  if (!file)
    return absl::InvalidArgumentError("cannot open profile file '" + path +
                                      "' for writing");
  // One entry per line (the library escapes every string).
  file << "{\n  \"version\": 1,\n  \"device\": " << json(device).dump()
       << ",\n  \"entries\": [";
  bool first = true;
  for (const auto &[key, entry] : entries) {
    file << (first ? "\n    " : ",\n    ") << entry.dump();
    first = false;
  }
  file << "\n  ]\n}\n";
  file.close();
  if (!file)
    return absl::InvalidArgumentError("cannot write profile file '" + path +
                                      "'");
  return absl::OkStatus();
}

namespace {

using Boxes = std::vector<std::pair<Index, Index>>;

/// One kernel to measure: op `op` of the plan on these operand and result
/// boxes.
struct Job {
  int32_t op;
  Boxes operands, results;
};

/// The box of buffer `id` in a program (its Alloc), or false.
bool bufferBox(const std::map<int32_t, const planfile::Buffer *> &buffers,
               int32_t id, std::pair<Index, Index> &box) {
  auto it = buffers.find(id);
  if (it == buffers.end())
    return false;
  box = {Index(it->second->box().lo().begin(), it->second->box().lo().end()),
         Index(it->second->box().hi().begin(), it->second->box().hi().end())};
  return true;
}

/// The forward kernels of every program (one job per distinct key).
absl::Status planJobs(const Plan &plan, std::map<std::string, Job> &jobs) {
  for (int r = 0; r < plan.programs_size(); ++r) {
    std::map<int32_t, const planfile::Buffer *> buffers;
    for (const Instruction &instr : plan.programs(r).instructions()) {
      if (instr.has_alloc())
        buffers[instr.alloc().buffer().id()] = &instr.alloc().buffer();
      if (!instr.has_kernel() || instr.kernel().stage() != 0)
        continue;
      const Instruction::Kernel &k = instr.kernel();
      if (k.op() < 0 || k.op() >= plan.ops_size())
        return absl::InvalidArgumentError(
            "rank " + std::to_string(r) + ": a kernel of op " +
            std::to_string(k.op()) + ", which the plan does not have");
      Job job{k.op(), {}, {}};
      for (int32_t id : k.inputs()) {
        std::pair<Index, Index> box;
        if (!bufferBox(buffers, id, box))
          return absl::InvalidArgumentError(
              "rank " + std::to_string(r) + ": a kernel reads buffer " +
              std::to_string(id) + ", which is not allocated before it");
        job.operands.push_back(box);
      }
      for (int32_t id : k.outputs()) {
        std::pair<Index, Index> box;
        if (!bufferBox(buffers, id, box))
          return absl::InvalidArgumentError(
              "rank " + std::to_string(r) + ": a kernel writes buffer " +
              std::to_string(id) + ", which is not allocated before it");
        job.results.push_back(box);
      }
      jobs.emplace(
          kernelProfileKey(plan, plan.ops(k.op()), "forward", job.operands),
          std::move(job));
    }
  }
  return absl::OkStatus();
}

/// The requests of a search (ppc/Search/ProfileRequests.h).
absl::Status requestJobs(const Plan &plan, const std::string &path,
                         std::map<std::string, Job> &jobs) {
  std::ifstream in(path);
  if (!in)
    return absl::InvalidArgumentError("cannot read the requests file '" + path +
                                      "'");
  json requests;
  try {
    requests = json::parse(in);
  } catch (const json::exception &e) {
    return absl::InvalidArgumentError(path + ": not JSON (" + e.what() + ")");
  }
  if (!requests.is_object() || requests.value("version", 0) != 1 ||
      !requests.contains("kernels") || !requests["kernels"].is_array())
    return absl::InvalidArgumentError(path +
                                      ": not a version 1 profile request file");
  auto boxes = [](const json &list, Boxes &out) {
    if (!list.is_array())
      return false;
    for (const json &b : list) {
      if (!b.is_object() || !b.contains("lo") || !b.contains("hi"))
        return false;
      out.push_back({b["lo"].get<Index>(), b["hi"].get<Index>()});
    }
    return true;
  };
  int index = 0;
  for (const json &k : requests["kernels"]) {
    const std::string where =
        path + ": kernels[" + std::to_string(index++) + "]";
    try {
      const int64_t op = k.at("op_index").get<int64_t>();
      if (op < 0 || op >= plan.ops_size())
        return absl::InvalidArgumentError(
            where + ": op_index " + std::to_string(op) +
            " is not an op of the plan (" + std::to_string(plan.ops_size()) +
            " ops): was the plan made from the same model?");
      if (plan.ops(op).kind() != k.at("op").get<std::string>())
        return absl::InvalidArgumentError(
            where + ": op " + std::to_string(op) + " of the plan is " +
            plan.ops(op).kind() + ", not " + k.at("op").get<std::string>() +
            ": was the plan made from the same model?");
      Job job{static_cast<int32_t>(op), {}, {}};
      if (!boxes(k.at("operands"), job.operands) ||
          !boxes(k.at("results"), job.results) ||
          job.operands.size() != size_t(plan.ops(op).operands_size()) ||
          job.results.size() != size_t(plan.ops(op).results_size()))
        return absl::InvalidArgumentError(
            where + ": operands and results must be one {lo, hi} box per "
                    "operand and result of the op");
      jobs.emplace(
          kernelProfileKey(plan, plan.ops(op), "forward", job.operands),
          std::move(job));
    } catch (const json::exception &e) {
      return absl::InvalidArgumentError(where + ": " + e.what());
    }
  }
  return absl::OkStatus();
}

/// Buffers of one job on the backend.
struct JobBuffers {
  std::vector<std::shared_ptr<DeviceBuffer>> owned;
  std::vector<DeviceView> inputs, outputs, scratch, backwardScratch,
      outputGrads, inputGrads;
};

DType storageOf(const planfile::Tensor &tensor) {
  DType dtype = DType::F32;
  storageDType(tensor.dtype(), dtype);
  return dtype;
}

absl::Status makeBuffers(const Plan &plan, const OpDesc &desc, const Job &job,
                         Backend &backend, const DataSource &data,
                         bool training, JobBuffers &b) {
  const Op &op = plan.ops(job.op);
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  auto make = [&](int32_t tensor, const std::pair<Index, Index> &box, bool fill,
                  DType dtype) -> DeviceView {
    const Index &lo = box.first, &hi = box.second;
    const int64_t n = boxVolume(lo, hi);
    std::shared_ptr<DeviceBuffer> buffer = backend.allocate(dtype, n);
    if (!buffer)
      return {};
    if (fill) {
      std::vector<float> values(std::max<int64_t>(n, 1));
      // Inputs, labels and weights as a run loads them (labels in range);
      // activations random, integer ones (labels or indices passed on by a
      // reshape) 0, which every class and row range holds.
      const bool integer = storageOf(plan.tensors(tensor)) == DType::I64;
      if (!data.load(tensor, lo, hi, 1, values.data()).ok())
        for (float &v : values)
          v = integer ? 0.0f : uniform(rng);
      backend.write(*buffer, 0, values.data(), n);
    }
    b.owned.push_back(buffer);
    const std::vector<int64_t> shape(plan.tensors(tensor).shape().begin(),
                                     plan.tensors(tensor).shape().end());
    return {buffer.get(), 0, shape, lo, hi};
  };
  for (int i = 0; i < op.operands_size(); ++i) {
    const planfile::Tensor &t = plan.tensors(op.operands(i));
    b.inputs.push_back(
        make(op.operands(i), job.operands[i], true, storageOf(t)));
    if (!b.inputs.back().buffer)
      return absl::ResourceExhaustedError("out of memory");
  }
  for (int i = 0; i < op.results_size(); ++i) {
    const planfile::Tensor &t = plan.tensors(op.results(i));
    b.outputs.push_back(
        make(op.results(i), job.results[i], false, storageOf(t)));
    b.outputGrads.push_back(
        make(op.results(i), job.results[i], true, storageOf(t)));
    if (!b.outputs.back().buffer || !b.outputGrads.back().buffer)
      return absl::ResourceExhaustedError("out of memory");
  }
  for (int i = 0; i < op.operands_size(); ++i) {
    const planfile::Tensor &t = plan.tensors(op.operands(i));
    const bool wanted =
        training && i < op.needs_grad_size() && op.needs_grad(i);
    if (!wanted) {
      b.inputGrads.push_back(
          {nullptr, 0, b.inputs[i].shape, b.inputs[i].lo, b.inputs[i].hi});
      continue;
    }
    b.inputGrads.push_back(
        make(op.operands(i), job.operands[i], false, storageOf(t)));
    if (!b.inputGrads.back().buffer)
      return absl::ResourceExhaustedError("out of memory");
  }
  // Scratch as the op asks for this partition (boxes only).
  const std::vector<TensorView> boxes = boxesOf(b.inputs);
  for (bool backward : {false, true})
    for (const std::vector<int64_t> &shape :
         scratchShapes(desc, boxes, backward)) {
      std::shared_ptr<DeviceBuffer> buffer = backend.allocate(
          DType::F32, boxVolume(Index(shape.size(), 0), shape));
      if (!buffer)
        return absl::ResourceExhaustedError("out of memory");
      b.owned.push_back(buffer);
      DeviceView v{buffer.get(), 0, shape, Index(shape.size(), 0), shape};
      (backward ? b.backwardScratch : b.scratch).push_back(v);
    }
  b.backwardScratch.insert(b.backwardScratch.begin(), b.scratch.begin(),
                           b.scratch.end());
  return absl::OkStatus();
}

/// Seconds per run of `run` (every stage of a pass), after warm-up.
template <typename Run>
absl::Status timeRuns(Backend &backend, const KernelProfileOptions &options,
                      Run &&run, double &seconds, int64_t &runs) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < options.warmupRuns; ++i)
    if (absl::Status err = run(); !err.ok())
      return err;
  backend.synchronize();
  const Clock::time_point start = Clock::now();
  runs = 0;
  double elapsed = 0;
  // Runs follow each other unsynchronized, as in a step; the rounds double
  // so that waiting for a queueing backend (cuda) adds little to a short
  // kernel's time.
  int64_t round = std::max(options.minRuns, 1);
  while (runs < options.minRuns || elapsed < options.minSeconds) {
    for (int64_t i = 0; i < round; ++i)
      if (absl::Status err = run(); !err.ok())
        return err;
    runs += round;
    backend.synchronize();
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    round = runs;
  }
  seconds = elapsed;
  return absl::OkStatus();
}

} // namespace

absl::Status profileKernels(const Plan &plan, const std::string &requestsPath,
                            Backend &backend, const DataSource &data,
                            const KernelProfileOptions &options,
                            KernelTimings &timings,
                            std::vector<KernelMeasurement> *measured) {
  std::map<std::string, Job> jobs;
  PPC_RETURN_IF_ERROR(planJobs(plan, jobs));
  if (!requestsPath.empty())
    PPC_RETURN_IF_ERROR(requestJobs(plan, requestsPath, jobs));
  const bool training = options.training && plan.training();
  int done = 0;
  for (const auto &[key, job] : jobs) {
    const Op &op = plan.ops(job.op);
    if (options.progress)
      *options.progress << "ppc-profile: " << ++done << "/" << jobs.size()
                        << " " << key.substr(key.rfind('|') + 1) << " "
                        << op.kind() << " (" << op.name() << ")\n"
                        << std::flush;
    const OpDesc desc = describeOp(plan, op);
    JobBuffers b;
    if (absl::Status err =
            makeBuffers(plan, desc, job, backend, data, training, b);
        !err.ok())
      return annotate(err, op.kind() + " (" + op.name() + ")");
    // Counted once, outside the timed kernels.
    const std::vector<TensorView> boxes = boxesOf(b.inputs);
    const int32_t forwardStages = numStages(desc, boxes, training, false);
    const int32_t backwardStages = numStages(desc, boxes, training, true);
    auto forward = [&]() -> absl::Status {
      KernelContext ctx{1, training, 0};
      for (int32_t s = 0; s < forwardStages; ++s) {
        ctx.stage = s;
        if (absl::Status err =
                backend.forward(desc, ctx, b.inputs, b.outputs, b.scratch);
            !err.ok())
          return err;
      }
      return absl::OkStatus();
    };
    auto backward = [&]() -> absl::Status {
      KernelContext ctx{1, training, 0};
      for (int32_t s = 0; s < backwardStages; ++s) {
        ctx.stage = s;
        if (absl::Status err =
                backend.backward(desc, ctx, b.inputs, b.outputs, b.outputGrads,
                                 b.inputGrads, b.backwardScratch);
            !err.ok())
          return err;
      }
      return absl::OkStatus();
    };
    KernelMeasurement m;
    m.op = job.op;
    for (const auto &[lo, hi] : job.operands) {
      std::vector<int64_t> extents;
      for (size_t d = 0; d < lo.size(); ++d)
        extents.push_back(hi[d] - lo[d]);
      m.operandShapes.push_back(extents);
    }
    for (const char *phase : {"forward", "backward"}) {
      const bool isForward = phase[0] == 'f';
      if (!isForward && !training)
        break;
      double seconds = 0;
      int64_t runs = 0;
      absl::Status err =
          isForward ? timeRuns(backend, options, forward, seconds, runs)
                    : timeRuns(backend, options, backward, seconds, runs);
      int64_t unused;
      if (err.ok())
        err = backend.deferredError(unused);
      if (!err.ok())
        return annotate(err, op.kind() + " (" + op.name() + ", " + phase + ")");
      KernelTiming &t =
          timings[kernelProfileKey(plan, op, phase, job.operands)];
      t.seconds += seconds;
      t.runs += runs;
      (isForward ? m.forwardSeconds : m.backwardSeconds) =
          seconds / double(runs);
    }
    if (measured)
      measured->push_back(std::move(m));
  }
  return absl::OkStatus();
}

} // namespace ppc::runtime
