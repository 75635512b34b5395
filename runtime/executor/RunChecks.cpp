//===- RunChecks.cpp - setup checks and checkpoints -----------------------===//
//
// What every rank checks before the first step (options, memory), the
// checkpoint directories' locks, resuming from and writing checkpoints.
//
//===----------------------------------------------------------------------===//

#include "Run.h"

#include "ppc/Runtime/OutputFiles.h"
#include "ppc/Runtime/PlanIO.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace ppc::runtime {
namespace detail {

absl::Status Run::checkOptions() const {
  if (options.steps < 1)
    return absl::InvalidArgumentError("--steps must be at least 1");
  if (options.checkpointEvery < 0)
    return absl::InvalidArgumentError(
        "--checkpoint-every must not be negative");
  if (!options.profileFile.empty() && options.profileDevice.empty() &&
      options.backend != "cpu")
    return absl::InvalidArgumentError(
        "--profile with --backend " + options.backend +
        " needs --profile-device: the device model the profile measures, "
        "as the machine description names it (e.g. H100-SXM5-80GB)");
  if (options.checkpointEvery > 0 && options.checkpointDir.empty())
    return absl::InvalidArgumentError(
        "--checkpoint-every needs --checkpoint DIR");
  if (options.keepCheckpoints < 1)
    return absl::InvalidArgumentError("--keep-checkpoints must be at least 1");
  if (options.verify && !options.resumeDir.empty())
    return absl::InvalidArgumentError(
        "--verify checks the first step from the initial weights and "
        "cannot be combined with --resume");
  if (options.verifyTolerance < 0)
    return absl::InvalidArgumentError("--verify-tolerance must be positive");
  if (options.threads < 1)
    return absl::InvalidArgumentError("--threads must be at least 1");
  if (options.allowTf32 && options.backend != "cuda")
    return absl::InvalidArgumentError(
        "--allow-tf32 is for --backend cuda: the " + options.backend +
        " backend computes float32 exactly");
  if (!options.lossScale.empty() && options.lossScale != "dynamic" &&
      options.lossScale != "none") {
    char *end = nullptr;
    double scale = std::strtod(options.lossScale.c_str(), &end);
    if (*end != '\0' || !(scale > 0) || !std::isfinite(scale))
      return absl::InvalidArgumentError(
          "--loss-scale needs 'dynamic', 'none' or a positive number, "
          "not '" +
          options.lossScale + "'");
  }
  if (options.batches < 0)
    return absl::InvalidArgumentError("--batches must not be negative");
  if (!options.dataDir.empty() && options.batches > 0)
    return absl::InvalidArgumentError(
        "--batches repeats synthetic batches; --data reads real ones");
  if (!options.dataDir.empty() && !options.inputs.empty())
    return absl::InvalidArgumentError(
        "--data and --input both give inputs; use one");
  if (!options.verifyBackend.empty() && !options.verify)
    return absl::InvalidArgumentError(
        "--verify-backend names the backend of --verify's single-device "
        "step: add --verify");
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
  PPC_RETURN_IF_ERROR(checkOutputsSpareInputs(files));
  return absl::OkStatus();
}

absl::Status Run::checkMemory() const {
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
    return absl::OkStatus();
  std::string message = "rank " + std::to_string(rank) + " needs " + gib(need) +
                        " for its buffers (the largest: " + largestName + ", " +
                        gib(largest) + ")";
  if (reference > 0)
    message += " and " + gib(reference) + " for --verify's whole tensors";
  return absl::InvalidArgumentError(message + " but this machine has " +
                                    gib(memory) + " of memory");
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
  absl::Status error;
  if (rank == 0) {
    if (!options.checkpointDir.empty())
      error = checkpointLock.acquire(options.checkpointDir);
    if (error.ok() && !options.resumeDir.empty() &&
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
  absl::Status error = readLatest(options.resumeDir, dir);
  CheckpointMarker marker;
  if (error.ok())
    error = readCompleteMarker(dir, marker);
  if (error.ok() && !marker.run.empty() && marker.run != runIdentity() &&
      !options.resumeOtherRun)
    error = absl::InvalidArgumentError(
        "checkpoint '" + dir + "' was written by another run (" + marker.run +
        "), not this one (" + runIdentity() +
        "): resume it anyway with --resume-other-run, or give this run "
        "its own directory");
  if (anyFailed(error, true))
    return false;
  if (marker.numRanks != comm.size() || marker.planHash != hash)
    return resumeResharded(dir, marker, steps);

  // This plan's own checkpoint: the rank's file alone.
  absl::StatusOr<Checkpoint> checkpoint = readCheckpointRank(dir, marker, rank);
  error = checkpoint.status();
  if (error.ok())
    error = runner.restoreState(*checkpoint);
  if (anyFailed(error, false))
    return false;
  steps = marker.steps;
  return true;
}

bool Run::resumeResharded(const std::string &dir,
                          const CheckpointMarker &marker, int64_t &steps) {
  // Another plan or rank count wrote it: every rank reads every rank's
  // file and takes the overlap of the saved pieces with its own buffers.
  absl::StatusOr<std::vector<Checkpoint>> saved =
      readCheckpointRanks(dir, marker);
  absl::Status error = saved.status();
  if (error.ok())
    error = annotate(runner.restoreResharded(*saved),
                     "cannot resume from '" + dir + "', written under plan " +
                         hashText(marker.planHash) + " by " +
                         std::to_string(marker.numRanks) +
                         (marker.numRanks == 1 ? " rank" : " ranks"));
  if (anyFailed(error, false))
    return false;
  if (rank == 0 && !options.quiet)
    out << "ppc-run: resuming step " << marker.steps << " of a run of "
        << marker.numRanks << " rank" << (marker.numRanks == 1 ? "" : "s")
        << " under another plan (" << hashText(marker.planHash)
        << "): each rank took the overlap of its weights and optimizer "
           "state with the saved ones\n";
  steps = marker.steps;
  return true;
}

bool Run::writeCheckpoint(int64_t steps) {
  // The protocol of ppc/Runtime/Checkpoint.h: a fresh step directory, every
  // rank's file, COMPLETE, then LATEST, which commits the step.
  const std::string &dir = options.checkpointDir;
  bool alternate = false;
  absl::Status error;
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
    if (error.ok())
      error = writeLatest(dir, name);
  }
  if (anyFailed(error, false))
    return false;
  // Older checkpoints go only once LATEST names the new one; failing to
  // remove one costs disk space, not the run.
  if (rank == 0)
    if (absl::Status e = pruneCheckpoints(dir, options.keepCheckpoints);
        !e.ok())
      err << "ppc-run: warning: cannot remove old checkpoints of '" << dir
          << "': " << e.message() << "\n";
  return true;
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

} // namespace detail
} // namespace ppc::runtime
