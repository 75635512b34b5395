//===- Executor.cpp - runs a plan's training steps ------------------------===//
//
// The step loop around ProgramRunner: setup checks that every rank agrees on
// (so that all exit cleanly together), progress and summary on rank 0,
// --verify, checkpoints, outputs and traces.
//
//===----------------------------------------------------------------------===//

#include "ppc/Runtime/Executor.h"
#include "ppc/Runtime/KernelProfile.h"

#include "ProgramRunner.h"
#include "Trace.h"
#include "ppc/Runtime/Checkpoint.h"
#include "ppc/Runtime/Npy.h"
#include "ppc/Runtime/OnnxExport.h"
#include "ppc/Runtime/OutputFiles.h"
#include "ppc/Runtime/PlanIO.h"
#include "ppc/Runtime/Reference.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <sstream>
#include <sys/resource.h>
#include <sys/stat.h>
#include <tuple>
#include <unistd.h>

namespace ppc::runtime {

using namespace ppc::planfile;

namespace {

std::string format(const char *fmt, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), fmt, value);
  return text;
}

/// A loss as printed: a NaN is "nan" whatever its sign bit (which the
/// kernels' order of operations decides, not the model).
std::string lossText(double loss, const char *fmt) {
  return std::isnan(loss) ? "nan" : format(fmt, loss);
}

std::string gib(double bytes) {
  return format("%.1f GiB", bytes / double(int64_t(1) << 30));
}

std::string hex(uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx",
                static_cast<unsigned long long>(v));
  return text;
}

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
/// element count) and then the floats, gathered over the world. "" or the
/// error.
std::string gatherKinkInputs(const Plan &plan, Communicator &comm,
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
    return "verify: the inputs of relu-like ops (" + format("%.0f", total) +
           " bytes from all ranks) are too large to gather";
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
  return "";
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

/// Bytes of the process's peak resident memory: Linux's VmHWM, which starts
/// afresh at exec (getrusage's ru_maxrss keeps the high-water mark of the
/// process that forked this one), else ru_maxrss.
double peakResidentMemory() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0)
      return std::stod(line.substr(6)) * 1024.0; // "VmHWM:   1234 kB"
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024.0;
}

class Run {
public:
  Run(const Plan &plan, const RunOptions &options, Communicator &comm,
      std::unique_ptr<Backend> backend, std::ostream &out, std::ostream &err)
      : plan(plan), options(options), comm(comm), out(out), err(err),
        rank(comm.rank()), hash(planHash(plan)),
        data(plan, options.seed, options.init, options.batches),
        backend(std::move(backend)), runner(plan, data, comm, *this->backend) {}

  int run();

private:
  /// Setup problems: every rank learns whether any rank failed; the failing
  /// ranks print (only rank 0 when all see the same problem).
  bool anyFailed(const std::string &error, bool sameOnAllRanks) {
    bool any = comm.anyRank(!error.empty(), [] { return "setup checks"; });
    if (!error.empty() && (!sameOnAllRanks || rank == 0)) {
      err << "ppc-run: ";
      if (!sameOnAllRanks && comm.size() > 1)
        err << "rank " << rank << ": ";
      err << error << "\n";
      err.flush();
    }
    return any;
  }
  /// A failure while ranks may be waiting on each other: ends the job.
  int stepFailure(const std::string &error) {
    // One write, so that lines of ranks failing together do not interleave.
    err << "ppc-run: rank " + std::to_string(rank) + ": " + error + "\n";
    err.flush();
    if (comm.size() > 1)
      comm.abort(1);
    return 1;
  }

  std::string checkOptions() const;
  /// "" or "rank R needs N GiB ..." when this rank's buffers at their peak
  /// (and --verify's whole tensors) exceed the machine's memory.
  std::string checkMemory() const;
  /// Encodes `flag` for a maximum over ranks, and decodes the maximum: the
  /// lowest rank whose flag is set, or -1.
  double rankFlag(bool flag) const { return flag ? comm.size() - rank : 0; }
  int lowestFlagged(double max) const {
    return max > 0 ? comm.size() - static_cast<int>(max) : -1;
  }
  /// What makes this run itself besides its plan, as checkpoints record
  /// it (CheckpointMarker::run).
  std::string runIdentity() const;
  /// Rank 0 takes the checkpoint and resume directories' locks; false
  /// after a failure that every rank saw and reported.
  bool lockCheckpointDirectories();
  /// Both false after a failure that every rank saw and reported.
  bool resume(int64_t &steps);
  bool writeCheckpoint(int64_t steps);
  /// `lossScale`: the scale the step ran with.
  int verify(int64_t step, double lossScale);
  /// The loss scaling the options and the plan's types ask for.
  LossScale initialLossScale() const;
  /// The loss this rank output in the last step; null if none (not a
  /// training plan, or another rank outputs it).
  const float *lossValue() const;
  void printStep(int64_t step, int64_t last, double seconds);
  void printSummary(const std::vector<double> &times,
                    const std::vector<double> &phases);
  std::string saveOutputs() const;
  /// Every rank's trained weight boxes, serialized for the gather.
  std::string packTrainedWeights() const;
  /// Rank 0: the whole weights from every rank's boxes, into the ONNX model.
  std::string exportOnnx(const std::vector<std::string> &perRank) const;
  std::string writeProfile(const std::vector<std::string> &perRank) const;

  const Plan &plan;
  const RunOptions &options;
  Communicator &comm;
  std::ostream &out, &err;
  const int rank;
  const uint64_t hash;
  DataSource data;
  /// Made by runPlan: never null.
  std::unique_ptr<Backend> backend;
  ProgramRunner runner;
  std::ofstream log;
  CheckpointLock checkpointLock, resumeLock;
  double peakResidentBytes = 0;
  /// Launches per counted step (max over ranks); -1: not counted.
  double launchesPerStep = -1;
  int64_t skippedSteps = 0;
};

/// The floating type most weight elements of `plan` are stored in: the
/// type its GEMMs run in.
DType weightDType(const Plan &plan) {
  std::map<DType, double> elements;
  for (const Tensor &t : plan.tensors()) {
    DType dtype;
    if (t.role() != Tensor::WEIGHT || !storageDType(t.dtype(), dtype) ||
        dtype == DType::I64)
      continue;
    double n = 1;
    for (int64_t d : t.shape())
      n *= double(d);
    elements[dtype] += n;
  }
  DType best = DType::F32;
  double most = -1;
  for (const auto &[dtype, n] : elements)
    if (n > most)
      most = n, best = dtype;
  return best;
}

std::string Run::checkOptions() const {
  if (options.steps < 1)
    return "--steps must be at least 1";
  if (options.checkpointEvery < 0)
    return "--checkpoint-every must not be negative";
  if (!options.profileFile.empty() && options.profileDevice.empty() &&
      options.backend != "cpu")
    return "--profile with --backend " + options.backend +
           " needs --profile-device: the device model the profile measures, "
           "as the machine description names it (e.g. H100-SXM5-80GB)";
  if (options.checkpointEvery > 0 && options.checkpointDir.empty())
    return "--checkpoint-every needs --checkpoint DIR";
  if (options.keepCheckpoints < 1)
    return "--keep-checkpoints must be at least 1";
  if (options.verify && !options.resumeDir.empty())
    return "--verify checks the first step from the initial weights and "
           "cannot be combined with --resume";
  if (options.verifyTolerance < 0)
    return "--verify-tolerance must be positive";
  if (options.threads < 1)
    return "--threads must be at least 1";
  if (!options.lossScale.empty() && options.lossScale != "dynamic" &&
      options.lossScale != "none") {
    char *end = nullptr;
    double scale = std::strtod(options.lossScale.c_str(), &end);
    if (*end != '\0' || !(scale > 0) || !std::isfinite(scale))
      return "--loss-scale needs 'dynamic', 'none' or a positive number, "
             "not '" +
             options.lossScale + "'";
  }
  if (options.batches < 0)
    return "--batches must not be negative";
  if (!options.dataDir.empty() && options.batches > 0)
    return "--batches repeats synthetic batches; --data reads real ones";
  if (!options.dataDir.empty() && !options.inputs.empty())
    return "--data and --input both give inputs; use one";
  if (!options.verifyBackend.empty() && !options.verify)
    return "--verify-backend names the backend of --verify's single-device "
           "step: add --verify";
  RunFiles files;
  files.outputs = {{"--export-onnx target", options.exportOnnxOut},
                   {"--trace", options.traceFile},
                   {"--log", options.logFile},
                   {"--profile", options.profileFile}};
  files.inputs = {{"the plan", options.planFile},
                  {"the plan's weights file", options.weightsFile},
                  {"the model --export-onnx reads", options.exportOnnxModel}};
  for (const auto &[name, path] : options.inputs)
    files.inputs.push_back({"--input " + name + "'s file", path});
  files.inputDirectories = {{"the checkpoint directory", options.checkpointDir},
                            {"the checkpoint directory", options.resumeDir},
                            {"the data directory", options.dataDir}};
  if (std::string problem = checkOutputsSpareInputs(files); !problem.empty())
    return problem;
  return "";
}

std::string Run::checkMemory() const {
  // Buffers are sized by boxes of tensors whose bytes validatePlan checked
  // to fit in int64; sums are in double, which cannot overflow.
  const int slots = numOptimizerSlots(plan.optimizer());
  // Each live buffer's memory (a view shares its base's), with its bytes and
  // the live buffers on it: it is released with the last of them.
  struct Memory {
    double bytes = 0;
    int buffers = 0;
  };
  std::map<int32_t, std::shared_ptr<Memory>> live;
  std::set<int32_t> persistent;
  double liveBytes = 0, peak = 0, persistentBytes = 0, largest = -1;
  std::string largestName;
  for (const Instruction &instr : plan.programs(rank).instructions()) {
    if (instr.has_free()) {
      auto it = live.find(instr.free().buffer());
      if (it != live.end()) {
        if (--it->second->buffers == 0)
          liveBytes -= it->second->bytes;
        live.erase(it);
      }
      continue;
    }
    if (!instr.has_alloc())
      continue;
    if (instr.alloc().has_view()) {
      auto base = live.find(instr.alloc().view());
      if (base != live.end()) {
        ++base->second->buffers;
        live[instr.alloc().buffer().id()] = base->second;
      }
      continue;
    }
    const planfile::Buffer &b = instr.alloc().buffer();
    Index lo, hi(b.shape().begin(), b.shape().end());
    if (b.tensor() >= 0) {
      lo.assign(b.box().lo().begin(), b.box().lo().end());
      hi.assign(b.box().hi().begin(), b.box().hi().end());
    } else {
      lo.assign(hi.size(), 0);
    }
    DType dtype = DType::F32;
    if (b.tensor() >= 0)
      storageDType(plan.tensors(b.tensor()).dtype(), dtype);
    const double elements = double(boxVolume(lo, hi));
    const double bytes = elements * dtypeBytes(dtype);
    if (bytes > largest) {
      largest = bytes;
      largestName = b.tensor() < 0
                        ? "scratch buffer " + std::to_string(b.id())
                        : std::string(b.grad() ? "gradient of " : "") +
                              "tensor '" + plan.tensors(b.tensor()).name() +
                              "' " + boxString(lo, hi);
    }
    const Tensor *t = b.tensor() >= 0 ? &plan.tensors(b.tensor()) : nullptr;
    if (t && !b.grad() &&
        (t->role() == Tensor::WEIGHT || t->role() == Tensor::FROZEN)) {
      // Kept across steps, with the optimizer's float32 state (and master
      // copy of a 16-bit weight) for weights.
      const bool weight = t->role() == Tensor::WEIGHT;
      if (persistent.insert(b.id()).second)
        persistentBytes +=
            bytes + (weight ? slots + (dtype == DType::F32 ? 0 : 1) : 0) *
                        elements * sizeof(float);
      continue;
    }
    liveBytes += bytes;
    live[b.id()] = std::make_shared<Memory>(Memory{bytes, 1});
    peak = std::max(peak, liveBytes);
  }
  // --verify's reference holds every tensor and its gradient whole.
  double reference = 0;
  if (options.verify)
    for (const Tensor &t : plan.tensors()) {
      DType dtype = DType::F32;
      storageDType(t.dtype(), dtype);
      reference += 2.0 * dtypeBytes(dtype) *
                   double(checkedElementCount(
                       Index(t.shape().begin(), t.shape().end())));
    }
  const double need = persistentBytes + peak;
  const double memory =
      double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  if (need + reference <= memory)
    return "";
  std::string message = "rank " + std::to_string(rank) + " needs " + gib(need) +
                        " for its buffers (the largest: " + largestName + ", " +
                        gib(largest) + ")";
  if (reference > 0)
    message += " and " + gib(reference) + " for --verify's whole tensors";
  return message + " but this machine has " + gib(memory) + " of memory";
}

std::string Run::runIdentity() const {
  auto where = [](const std::string &path) {
    if (path.empty())
      return std::string("-");
    std::error_code ec;
    std::filesystem::path p = std::filesystem::absolute(path, ec);
    return (ec ? std::filesystem::path(path) : p.lexically_normal()).string();
  };
  std::string inputs;
  for (const auto &[name, path] : options.inputs)
    inputs += (inputs.empty() ? "" : ",") + name + ":" + where(path);
  return "seed=" + std::to_string(options.seed) +
         " data=" + where(options.dataDir) +
         " shuffle=" + (options.shuffle ? "on" : "off") +
         " batches=" + std::to_string(options.batches) +
         " inputs=" + (inputs.empty() ? "-" : inputs);
}

bool Run::lockCheckpointDirectories() {
  std::string error;
  if (rank == 0) {
    if (!options.checkpointDir.empty())
      error = checkpointLock.acquire(options.checkpointDir);
    if (error.empty() && !options.resumeDir.empty() &&
        !(checkpointLock.held() &&
          samePath(options.resumeDir, options.checkpointDir))) {
      // Resuming locks too: another job must not write the checkpoint
      // being read. A missing directory is resume()'s to report.
      struct stat st;
      if (stat(options.resumeDir.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        error = resumeLock.acquire(options.resumeDir);
    }
  }
  return !anyFailed(error, false);
}

bool Run::resume(int64_t &steps) {
  std::string dir;
  std::string error = readLatest(options.resumeDir, dir);
  CheckpointMarker marker;
  if (error.empty())
    error = readCompleteMarker(dir, marker);
  if (error.empty() && marker.numRanks != comm.size())
    error = "checkpoint '" + dir + "' was written by a run of " +
            std::to_string(marker.numRanks) + " ranks; this one has " +
            std::to_string(comm.size());
  if (error.empty() && marker.planHash != hash)
    error = "checkpoint '" + dir + "' was written for another plan (plan " +
            hex(marker.planHash) + ", this plan " + hex(hash) + ")";
  if (error.empty() && !marker.run.empty() && marker.run != runIdentity() &&
      !options.resumeOtherRun)
    error = "checkpoint '" + dir + "' was written by another run (" +
            marker.run + "), not this one (" + runIdentity() +
            "): resume it anyway with --resume-other-run, or give this run "
            "its own directory";
  if (anyFailed(error, true))
    return false;

  Checkpoint checkpoint;
  const std::string path = checkpointFileName(dir, rank);
  error = readCheckpointFile(path, checkpoint);
  if (error.empty() &&
      (checkpoint.planHash != hash || checkpoint.rank != rank ||
       checkpoint.numRanks != comm.size()))
    error = "'" + path + "' is not this plan's checkpoint of rank " +
            std::to_string(rank);
  if (error.empty() && checkpoint.steps != marker.steps)
    error = "'" + path + "' is of step " + std::to_string(checkpoint.steps) +
            " but '" + dir + "/COMPLETE' says step " +
            std::to_string(marker.steps) +
            " (a run was killed while writing the checkpoint)";
  if (error.empty())
    error = runner.restoreState(checkpoint);
  if (anyFailed(error, false))
    return false;
  steps = marker.steps;
  return true;
}

bool Run::writeCheckpoint(int64_t steps) {
  // The protocol of ppc/Runtime/Checkpoint.h: a fresh step directory, every
  // rank's file, COMPLETE, then LATEST, which commits the step.
  const std::string &dir = options.checkpointDir;
  bool alternate = false;
  std::string error;
  if (rank == 0)
    error = prepareStepDirectory(dir, steps, alternate);
  if (anyFailed(error, false))
    return false;
  alternate = comm.broadcastFromRoot(
      alternate, [] { return "the checkpoint directory name broadcast"; });
  const std::string name = stepDirectoryName(steps, alternate);
  Checkpoint checkpoint;
  checkpoint.planHash = hash;
  checkpoint.rank = rank;
  checkpoint.numRanks = comm.size();
  checkpoint.steps = steps;
  runner.saveState(checkpoint);
  error = writeCheckpointFile(checkpointFileName(dir + "/" + name, rank),
                              checkpoint);
  if (anyFailed(error, false))
    return false;
  if (rank == 0) {
    error = writeCompleteMarker(dir + "/" + name,
                                {steps, comm.size(), hash, runIdentity()});
    if (error.empty())
      error = writeLatest(dir, name);
  }
  if (anyFailed(error, false))
    return false;
  // Older checkpoints go only once LATEST names the new one; failing to
  // remove one costs disk space, not the run.
  if (rank == 0)
    if (std::string e = pruneCheckpoints(dir, options.keepCheckpoints);
        !e.empty())
      err << "ppc-run: warning: cannot remove old checkpoints of '" << dir
          << "': " << e << "\n";
  return true;
}

/// The loosest DTypeInfo of the plan's tensors' types.
static const DTypeInfo &loosestDType(const Plan &plan) {
  const DTypeInfo *loosest = &dtypeInfo(DType::F32);
  for (const Tensor &t : plan.tensors()) {
    DType dtype;
    if (storageDType(t.dtype(), dtype) &&
        dtypeInfo(dtype).verifyTolerance > loosest->verifyTolerance)
      loosest = &dtypeInfo(dtype);
  }
  return *loosest;
}

int Run::verify(int64_t step, double lossScale) {
  const DTypeInfo &loosest = loosestDType(plan);
  const double tolerance = options.verifyTolerance > 0
                               ? options.verifyTolerance
                               : loosest.verifyTolerance;
  ReferenceStep ref;
  // The reference may run on another backend (--verify-backend).
  std::unique_ptr<Backend> other;
  std::string otherError;
  if (!options.verifyBackend.empty() &&
      options.verifyBackend != options.backend &&
      !(other = createBackend(options.verifyBackend,
                              {options.threads, options.referenceKernels},
                              otherError)))
    otherError =
        "--verify-backend " + options.verifyBackend + ": " + otherError;
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
std::string Run::writeProfile(const std::vector<std::string> &perRank) const {
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

std::string Run::exportOnnx(const std::vector<std::string> &perRank) const {
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
      return "--export-onnx: no rank holds all of weight '" + t.name() + "'";
    byName[t.name()] = std::move(it->second.values);
  }
  return exportOnnxWeights(options.exportOnnxModel, options.exportOnnxOut,
                           byName);
}

std::string Run::saveOutputs() const {
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
    if (std::string error = writeNpy(path, shape, it->second.data());
        !error.empty())
      return error;
  }
  return "";
}

LossScale Run::initialLossScale() const {
  LossScale lossScale;
  std::string mode = options.lossScale;
  if (mode.empty()) { // dynamic for float16, whose gradients underflow
    mode = "none";
    for (const Tensor &t : plan.tensors())
      if (t.dtype() == "f16")
        mode = "dynamic";
  }
  if (mode == "dynamic") {
    lossScale.dynamic = true;
    lossScale.scale = LossScale::kInitialScale;
  } else if (mode != "none") {
    lossScale.scale = std::stod(mode); // checked by checkOptions
  }
  return lossScale;
}

int Run::run() {
  if (anyFailed(checkOptions(), true))
    return 1;
  // Before any allocation. Ranks of one plan often need the same: the lowest
  // that does not fit speaks.
  const std::string tooBig = checkMemory();
  const int tooBigRank = lowestFlagged(comm.maxOverRanks(
      {rankFlag(!tooBig.empty())}, [] { return "the memory check"; })[0]);
  if (tooBigRank >= 0) {
    if (rank == tooBigRank)
      err << "ppc-run: " + tooBig + "\n";
    return 1;
  }
  runner.setOverlap(options.overlap);
  runner.setLossScale(initialLossScale());

  std::string error;
  for (const auto &[name, path] : options.inputs) {
    std::string nonfinite;
    if (error.empty())
      error = data.setInputFile(name, path,
                                options.allowNonfinite ? &nonfinite : nullptr);
    if (!nonfinite.empty() && rank == 0)
      err << "ppc-run: warning: " + nonfinite + "\n";
  }
  if (error.empty() && !options.dataDir.empty()) {
    Dataset::Options dataOptions;
    dataOptions.shuffle = options.shuffle;
    dataOptions.seed = options.seed;
    dataOptions.allowNonfinite = options.allowNonfinite;
    error = data.setDataDirectory(options.dataDir, dataOptions);
    if (error.empty() && rank == 0 && !options.quiet) {
      const Dataset &dataset = *data.dataset();
      std::ostringstream line;
      line << "data: " << options.dataDir << ": " << dataset.numRecords()
           << " records, batch " << dataset.batchSize() << ", an epoch every "
           << static_cast<double>(dataset.numRecords()) /
                  static_cast<double>(dataset.batchSize())
           << " steps, "
           << (options.shuffle
                   ? "shuffled by seed " + std::to_string(options.seed)
                   : std::string("in order"))
           << "\n";
      out << line.str();
    }
  }
  if (error.empty())
    error = data.setWeightsFile(options.weightsFile);
  if (anyFailed(error, true))
    return 1;
  if (anyFailed(runner.prepare(), false))
    return 1;
  int64_t done = 0;
  if (!lockCheckpointDirectories())
    return 1;
  if (!options.resumeDir.empty() && !resume(done))
    return 1;
  // Files rank 0 writes at the end: fail now rather than after the run.
  if (rank == 0) {
    for (const auto &[option, path, mode] :
         {std::tuple{"--log", options.logFile, WriteMode::InPlace},
          std::tuple{"--trace", options.traceFile, WriteMode::InPlace},
          std::tuple{"--profile", options.profileFile, WriteMode::InPlace},
          std::tuple{"--export-onnx", options.exportOnnxOut,
                     WriteMode::ViaRename}})
      if (error.empty() && !path.empty())
        if (std::string problem = checkOutputFile(path, mode); !problem.empty())
          error = std::string(option) + ": " + problem;
    if (error.empty() && !options.logFile.empty()) {
      log.open(options.logFile, std::ios::trunc);
      if (!log)
        error = "cannot open log file '" + options.logFile + "' for writing";
    }
    if (error.empty() && !options.saveOutputsDir.empty())
      error = makeDirectories(options.saveOutputsDir);
    if (error.empty() && !options.exportOnnxOut.empty()) {
      error = checkOnnxWeights(options.exportOnnxModel, plan);
      if (!error.empty())
        error = "--export-onnx: " + error;
    }
  }
  if (anyFailed(error, false))
    return 1;

  const int64_t first = done + 1, last = done + options.steps;
  std::vector<double> times;
  std::vector<double> phases(kNumPhases + 1, 0.0);
  // Launches of the steps the summary counts (the first aside).
  int64_t launchesBefore = backend->launches();
  for (int64_t step = first; step <= last; ++step) {
    const bool trace = !options.traceFile.empty() && step == last;
    // The first step warms caches and allocators: not part of a profile.
    runner.setTimeKernels(!options.profileFile.empty() &&
                              (step > first || options.steps == 1),
                          /*cpuTime=*/options.threads == 1);
    if (trace)
      comm.barrier([] { return "the barrier before the traced step"; });
    StepProfile profile;
    const double lossScale = runner.lossScale().scale;
    if (std::string e = runner.runStep(
            step, trace, options.verify && step == first, profile);
        !e.empty())
      return stepFailure(e);
    // The reduction of the step time also finds the lowest rank whose loss
    // is NaN or infinite (rankFlag), at no extra message.
    const float *loss = lossValue();
    const bool finite = !loss || std::isfinite(*loss);
    const std::vector<double> reduced =
        comm.maxOverRanks({profile.seconds, rankFlag(!finite)}, [&] {
          return "the step time reduction after step " + std::to_string(step);
        });
    const double seconds = reduced[0];
    const int nonfiniteRank = lowestFlagged(reduced[1]);
    times.push_back(seconds);
    if (step > first || options.steps == 1) {
      for (int p = 0; p < kNumPhases; ++p)
        phases[p] += profile.phaseSeconds[p];
      phases[kNumPhases] += profile.commSeconds;
    }
    if (step == first && options.steps > 1)
      launchesBefore = backend->launches();
    if (rank == 0)
      printStep(step, last, seconds);
    if (nonfiniteRank >= 0 && !options.allowNonfinite) {
      if (rank == nonfiniteRank)
        err << "ppc-run: rank " + std::to_string(rank) + ": the loss of step " +
                   std::to_string(step) + " is " + lossText(*loss, "%g") +
                   "; stopping (--allow-nonfinite trains on)\n";
      return 1;
    }
    skippedSteps += runner.lastStepSkipped() ? 1 : 0;
    if (options.verify && step == first && verify(step, lossScale) != 0)
      return 1;
    if (options.checkpointEvery > 0 && step != last &&
        step % options.checkpointEvery == 0 && !writeCheckpoint(step))
      return 1;
  }
  if (!options.checkpointDir.empty() && !writeCheckpoint(last))
    return 1;

  std::vector<std::string> profiles;
  if (!options.profileFile.empty()) {
    std::ostringstream mine;
    mine.precision(17);
    for (const auto &[key, timing] : runner.kernelTimings())
      mine << key << '\t' << timing.seconds << '\t' << timing.runs << '\n';
    profiles = comm.gatherToRoot(mine.str(),
                                 [] { return "the kernel profile gather"; });
  }
  std::vector<std::string> trained;
  if (!options.exportOnnxOut.empty())
    trained = comm.gatherToRoot(packTrainedWeights(),
                                [] { return "the trained weights gather"; });
  std::vector<std::string> traces;
  if (!options.traceFile.empty())
    traces = comm.gatherToRoot(traceEventsJson(runner.traceEvents(), rank),
                               [] { return "the trace gather"; });
  const double counted = double(options.steps > 1 ? options.steps - 1 : 1);
  for (double &p : phases)
    p /= counted;
  // The peak resident memory of the process and its launches per step ride
  // along as two more values.
  const int64_t launchesAfter = backend->launches();
  phases.push_back(peakResidentMemory());
  phases.push_back(launchesAfter < 0
                       ? -1.0
                       : double(launchesAfter - launchesBefore) / counted);
  phases = comm.maxOverRanks(phases, [] { return "the phase time reduction"; });
  launchesPerStep = phases.back();
  phases.pop_back();
  peakResidentBytes = phases.back();
  phases.pop_back();
  if (rank != 0)
    return 0;
  if (!options.traceFile.empty())
    error = writeChromeTrace(options.traceFile, traces, last);
  if (error.empty() && !options.saveOutputsDir.empty())
    error = saveOutputs();
  if (error.empty() && !options.profileFile.empty())
    error = writeProfile(profiles);
  if (error.empty() && !options.exportOnnxOut.empty()) {
    error = exportOnnx(trained);
    if (error.empty() && !options.quiet)
      out << "trained weights written into " << options.exportOnnxOut << "\n";
  }
  if (!error.empty()) {
    err << "ppc-run: " << error << "\n";
    return 1;
  }
  printSummary(times, phases);
  return 0;
}

} // namespace

/// Every rank must run the same plan (the same file, unchanged): rank 0
/// compares the others' digests with its own. "" or the first difference.
std::string comparePlanDigests(const Plan &plan, Communicator &comm) {
  std::vector<std::string> digests = comm.gatherToRoot(
      hex(planHash(plan)), [] { return "the plan digest exchange"; });
  for (size_t r = 1; r < digests.size(); ++r)
    if (digests[r] != digests[0])
      return "rank " + std::to_string(r) + " runs a different plan (hash " +
             digests[r] + ") than rank 0 (hash " + digests[0] + ")";
  return "";
}

int runPlan(const Plan &plan, const RunOptions &options, Communicator &comm,
            std::ostream &out, std::ostream &err) {
  const std::string differs = comparePlanDigests(plan, comm);
  if (comm.anyRank(!differs.empty(), [] { return "the plan digest check"; })) {
    if (comm.rank() == 0)
      err << "ppc-run: " << differs << "\n";
    return 1;
  }
  if (plan.programs_size() != comm.size()) {
    if (comm.rank() == 0)
      err << "ppc-run: this plan was made for " << plan.programs_size()
          << " ranks (machine " << plan.machine().name() << ") but runs on "
          << comm.size() << "; start it with mpirun -np "
          << plan.programs_size() << "\n";
    return 1;
  }
  if (!findBackend(options.backend)) {
    if (comm.rank() == 0)
      err << "ppc-run: unknown backend '" << options.backend << "' (this "
          << "build has " << backendNames() << ")\n";
    return 1;
  }
  // Every rank learns whether any rank's backend failed to start (a rank
  // without a GPU), so none waits on it.
  std::string error;
  std::unique_ptr<Backend> backend = createBackend(
      options.backend, {options.threads, options.referenceKernels}, error);
  if (comm.anyRank(!backend, [] { return "starting the backends"; })) {
    // One write, so that the lines of ranks failing together do not
    // interleave.
    if (!backend)
      err << "ppc-run: rank " + std::to_string(comm.rank()) + ": backend " +
                 options.backend + ": " + error + "\n";
    return 1;
  }
  std::unique_ptr<Communicator> deviceComm =
      backend->deviceCommunicator(comm, options.timeout);
  Run run(plan, options, deviceComm ? *deviceComm : comm, std::move(backend),
          out, err);
  return run.run();
}

} // namespace ppc::runtime
