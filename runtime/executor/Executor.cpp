//===- Executor.cpp - runs a plan's training steps ------------------------===//
//
// The step loop around ProgramRunner (Run::run) and its entry, runPlan:
// every rank runs the same plan on its backend; Run.h lists the files of
// the run's other parts.
//
//===----------------------------------------------------------------------===//

#include "Run.h"

#include "Trace.h"
#include "ppc/Runtime/OnnxExport.h"
#include "ppc/Runtime/OutputFiles.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <ostream>
#include <sstream>
#include <sys/resource.h>
#include <tuple>

namespace ppc::runtime {
namespace detail {

std::string format(const char *fmt, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), fmt, value);
  return text;
}

std::string lossText(double loss, const char *fmt) {
  return std::isnan(loss) ? "nan" : format(fmt, loss);
}

std::string gib(double bytes) {
  return format("%.1f GiB", bytes / double(int64_t(1) << 30));
}

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

// Linux's VmHWM, which starts afresh at exec (getrusage's ru_maxrss keeps
// the high-water mark of the process that forked this one), else ru_maxrss.
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

int Run::run() {
  if (anyFailed(checkOptions(), true))
    return 1;
  // Before any allocation. Ranks of one plan often need the same: the lowest
  // that does not fit speaks.
  const absl::Status tooBig = checkMemory();
  const int tooBigRank = lowestFlagged(comm.maxOverRanks(
      {rankFlag(!tooBig.ok())}, [] { return "the memory check"; })[0]);
  if (tooBigRank >= 0) {
    if (rank == tooBigRank)
      err << "ppc-run: " + messageOf(tooBig) + "\n";
    return 1;
  }
  runner.setOverlap(options.overlap);
  runner.setLossScale(initialLossScale());

  absl::Status error;
  for (const auto &[name, path] : options.inputs) {
    std::string nonfinite;
    if (error.ok())
      error = data.setInputFile(name, path,
                                options.allowNonfinite ? &nonfinite : nullptr);
    if (!nonfinite.empty() && rank == 0)
      err << "ppc-run: warning: " + nonfinite + "\n";
  }
  if (error.ok() && !options.dataDir.empty()) {
    Dataset::Options dataOptions;
    dataOptions.shuffle = options.shuffle;
    dataOptions.seed = options.seed;
    dataOptions.allowNonfinite = options.allowNonfinite;
    error = data.setDataDirectory(options.dataDir, dataOptions);
    if (error.ok() && rank == 0 && !options.quiet) {
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
  if (error.ok())
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
      if (error.ok() && !path.empty())
        if (absl::Status problem = checkOutputFile(path, mode); !problem.ok())
          error = annotate(problem, option);
    if (error.ok() && !options.logFile.empty()) {
      log.open(options.logFile, std::ios::trunc);
      if (!log)
        error = absl::InvalidArgumentError("cannot open log file '" +
                                           options.logFile + "' for writing");
    }
    if (error.ok() && !options.saveOutputsDir.empty())
      error = makeDirectories(options.saveOutputsDir);
    if (error.ok() && !options.exportOnnxOut.empty()) {
      error = annotate(checkOnnxWeights(options.exportOnnxModel, plan),
                       "--export-onnx");
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
    // CPU time only where the kernels run on this thread: a backend that
    // queues its work (cuda) waits for it, and the wait is the kernel's time.
    runner.setTimeKernels(!options.profileFile.empty() &&
                              (step > first || options.steps == 1),
                          /*cpuTime=*/options.threads == 1 &&
                              !backend->queuesWork());
    if (trace)
      comm.barrier([] { return "the barrier before the traced step"; });
    StepProfile profile;
    const double lossScale = runner.lossScale().scale;
    if (absl::Status e = runner.runStep(
            step, trace, options.verify && step == first, profile);
        !e.ok())
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
  if (error.ok() && !options.saveOutputsDir.empty())
    error = saveOutputs();
  if (error.ok() && !options.profileFile.empty())
    error = writeProfile(profiles);
  if (error.ok() && !options.exportOnnxOut.empty()) {
    error = exportOnnx(trained);
    if (error.ok() && !options.quiet)
      out << "trained weights written into " << options.exportOnnxOut << "\n";
  }
  if (!error.ok()) {
    err << "ppc-run: " << error.message() << "\n";
    return 1;
  }
  printSummary(times, phases);
  return 0;
}

} // namespace detail

using namespace ppc::planfile;

/// Every rank must run the same plan (the same file, unchanged): rank 0
/// compares the others' digests with its own; the first difference if any.
absl::Status comparePlanDigests(const Plan &plan, Communicator &comm) {
  std::vector<std::string> digests = comm.gatherToRoot(
      hashText(planHash(plan)), [] { return "the plan digest exchange"; });
  for (size_t r = 1; r < digests.size(); ++r)
    if (digests[r] != digests[0])
      return absl::InvalidArgumentError(
          "rank " + std::to_string(r) + " runs a different plan (hash " +
          digests[r] + ") than rank 0 (hash " + digests[0] + ")");
  return absl::OkStatus();
}

int runPlan(const Plan &plan, const RunOptions &options, Communicator &comm,
            std::ostream &out, std::ostream &err) {
  const absl::Status differs = comparePlanDigests(plan, comm);
  if (comm.anyRank(!differs.ok(), [] { return "the plan digest check"; })) {
    if (comm.rank() == 0)
      err << "ppc-run: " << differs.message() << "\n";
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
  absl::StatusOr<std::unique_ptr<Backend>> started = createBackend(
      options.backend, {options.threads, options.referenceKernels,
                        /*poisonUninitialized=*/false, options.allowTf32});
  if (comm.anyRank(!started.ok(), [] { return "starting the backends"; })) {
    // One write, so that the lines of ranks failing together do not
    // interleave.
    if (!started.ok())
      err << "ppc-run: rank " + std::to_string(comm.rank()) + ": backend " +
                 options.backend + ": " + messageOf(started.status()) + "\n";
    return 1;
  }
  std::unique_ptr<Backend> backend = std::move(*started);
  std::unique_ptr<Communicator> deviceComm =
      backend->deviceCommunicator(comm, options.timeout);
  detail::Run run(plan, options, deviceComm ? *deviceComm : comm,
                  std::move(backend), out, err);
  return run.run();
}

} // namespace ppc::runtime
