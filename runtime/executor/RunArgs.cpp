//===- RunArgs.cpp - ppc-run's command line -------------------------------===//

#include "ppc/Runtime/RunArgs.h"

#include "ppc/Runtime/Backend.h"
#include "ppc/Runtime/OutputFiles.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace ppc::runtime {

const char kRunHelp[] = R"(usage: ppc-run PLAN [options]
       mpirun -np K ppc-run PLAN [options]     (K = the plan's ranks)

Runs training (or inference) steps of a plan written by ppc-opt, one process
per rank. Rank 0 prints the loss, step time and throughput of every step and
a summary (mean step time without the first step, phase breakdown).

options:
  --steps N              steps to run (10); after --resume, N more steps
  --seed S               seed of synthetic inputs and weight init (1)
  --input NAME=FILE.npy  the input tensor NAME from a .npy file, the same every
                         step (default: a new synthetic batch every step)
  --data DIR             read every input from DIR: DIR/NAME.npy or a
                         directory DIR/NAME/ of .npy shards of records
                         ([n, ...] for an input [batch, ...]); each step
                         takes the next batch, each rank reads only its
                         part, the next step's is read ahead on a thread
                         (docs/runtime.md, "Real data")
  --no-shuffle           with --data, records in file order (default: a
                         new order every epoch, drawn from --seed)
  --init=plan|seed       weights as the plan says (plan, default: the
                         model's values), or drawn from the seed even where
                         the plan has their values
  --weights FILE         the plan's weights file (default: the one named in
                         the plan, next to it: PLAN.weights)
  --verify               after step 1 every rank also runs the step on the
                         whole model by itself and compares the loss, outputs,
                         gradients, updated weights and batch-norm statistics
                         it holds; exit 1 ("verify FAILED") if an error is
                         above the tolerance
  --verify-backend NAME  run --verify's single-device step on this backend
                         (default: the run's): cpu checks a cuda run
                         against the cpu kernels
  --verify-tolerance X   largest relative error per tensor (default: 1e-4
                         for float32 plans, 1e-2 with f16 tensors, 5e-2
                         with bf16 ones, whose 8-bit mantissa rounds each
                         op's result by up to 0.4%): max |err|
                         over max |reference value| of the tensor (at least 1%
                         of the largest among tensors of its kind, since a
                         gradient that cancels to rounding noise, like a bias
                         before batch norm, has no scale of its own).
                         Partitioned sums add float32 numbers in another
                         order, which changes them by about 1e-7 relative per
                         addition; a wrong plan errs by far more
  --checkpoint DIR       after the last step write DIR/step-S/rank-R.ckpt
                         (weights, optimizer state, step S), then
                         DIR/step-S/COMPLETE, then point DIR/LATEST at it;
                         a run killed at any moment leaves the previous
                         complete checkpoint or the new one
  --checkpoint-every N   also after every step number divisible by N
  --keep-checkpoints N   complete checkpoints kept in DIR (2); older ones are
                         deleted once LATEST names the new one
  --resume DIR           continue from DIR/LATEST's checkpoint: of this plan,
                         exactly as if the run had not been interrupted; of
                         another plan or rank count of the same model, from
                         the overlap of its weights and optimizer state
                         with this plan's (the losses go on to round-off).
                         A checkpoint directory is locked by
                         the run that writes or resumes it (DIR/LOCK): a
                         second job on it is refused
  --resume-other-run     resume a checkpoint written by another run (another
                         --seed, --data, --no-shuffle, --batches or --input
                         files), which is refused otherwise
  --allow-nonfinite      keep training when the loss is NaN or infinite, and
                         accept NaN/Inf in --input files (default: stop with
                         an error naming the step, or the input)
  --save-outputs DIR     write each output (the loss, or the model outputs of
                         a forward-only plan) as DIR/output_I_NAME.npy after
                         the last step
  --export-onnx MODEL.onnx=OUT.onnx
                         after the last step write OUT.onnx: MODEL.onnx (the
                         model the plan was made from) with its weight
                         initializers replaced by the trained values, in
                         their own float type
  --trace FILE           Chrome trace (chrome://tracing, Perfetto) of the last
                         step: pid = rank, tid 0 compute, tid 1 communication
  --timeout SECONDS      abort the job when a rank waits this long for a
                         message or collective (300); 'inf' (or 1e9 and up):
                         wait forever
  --loss-scale dynamic|none|X
                         seed the loss gradient with a scale and divide
                         the gradients by it in the update; a step whose
                         gradients overflow on any rank updates nothing.
                         dynamic (the default for plans with f16 tensors,
                         PyTorch's GradScaler's rule): from 32768, halved
                         on overflow, doubled after 2000 steps without;
                         none: the default otherwise
  --backend NAME         where buffers live and kernels run (cpu); the
                         build's backends are listed at the end of --help
  --threads N            kernel threads per rank (OpenBLAS, oneDNN) (1)
  --overlap              from the second step, start each collective as
                         soon as what it reads is final (a gradient's
                         all-reduce or reduce-scatter after its last kernel,
                         an all-gather after the update) and let it progress
                         between kernels (default: where the plan puts them;
                         on a host whose cores all compute, overlap costs
                         the backward what it saves the sync)
  --reference-kernels    only ppc's reference kernels: no oneDNN
  --allow-tf32           cuda: float32 GEMMs and convolutions on TF32 tensor
                         cores (products of 10-bit mantissas, float32
                         sums; PyTorch's default for convolutions, not for
                         matmuls); default: exact float32, which the cpu
                         backend matches to round-off; --verify's float32
                         tolerance becomes f16's
                         convolutions (which run where a partition holds
                         every channel)
  --profile FILE         write the kernels' measured times (all steps but
                         the first) as a simulator profile for --ppc-simulate,
                         added to FILE's entries when it is a profile of the
                         same device (runs of several plans accumulate);
                         a kernel's time runs from the end of the previous
                         kernel or communication: its own work and the
                         buffer work around it; with one thread on the
                         cpu backend, CPU time; on the cuda backend, the
                         device's time between events (nothing waits)
                         (a rank sharing a core with others is not charged
                         their turns: ppc-calibrate's cores_per_node models
                         that)
  --profile-device NAME  device name in that profile, as the machine
                         description names it (cpu: cpu-epyc-2core;
                         cuda: required, e.g. H100-SXM5-80GB)
  --batches N            synthetic batches repeat every N steps (default:
                         a new batch every step; 1: train on one batch)
  --log FILE             one JSON object per step: step, loss, time_ms
  --quiet                no per-step lines or summary
  --version              ppc's version
  --help                 this text
)";

namespace {

bool parseNumber(const std::string &text, double &value) {
  if (!absl::SimpleAtod(text, &value))
    return false;
  // SimpleAtod rounds an overflow ("1e999") to infinity: only a written
  // "inf" means it.
  return std::isfinite(value) ||
         absl::AsciiStrToLower(text).find("inf") != std::string::npos;
}

bool parseInt(const std::string &text, int64_t &value) {
  return absl::SimpleAtoi(text, &value);
}

} // namespace

absl::Status parseRunArgs(int argc, const char *const *argv, RunArgs &args) {
  RunOptions &o = args.options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.size() < 2 || arg.compare(0, 2, "--") != 0) {
      if (!args.plan.empty())
        return absl::InvalidArgumentError("unexpected argument '" + arg +
                                          "' (the plan is '" + args.plan +
                                          "')");
      args.plan = arg;
      continue;
    }
    std::string name = arg, value;
    bool hasValue = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      hasValue = true;
    }
    auto takeValue = [&]() -> bool {
      if (hasValue)
        return true;
      if (i + 1 >= argc)
        return false;
      value = argv[++i];
      return true;
    };
    auto bad = [&](const char *what) {
      return absl::InvalidArgumentError(
          name + " needs " + what +
          (value.empty() ? "" : ", not '" + value + "'"));
    };
    int64_t n = 0;
    double x = 0;
    if (name == "--help" || name == "-h") {
      args.help = true;
    } else if (name == "--version") {
      args.version = true;
    } else if (name == "--allow-nonfinite") {
      o.allowNonfinite = true;
    } else if (name == "--overlap") {
      o.overlap = true;
    } else if (name == "--reference-kernels") {
      o.referenceKernels = true;
    } else if (name == "--allow-tf32") {
      o.allowTf32 = true;
    } else if (name == "--no-shuffle") {
      o.shuffle = false;
    } else if (name == "--resume-other-run") {
      o.resumeOtherRun = true;
    } else if (name == "--verify") {
      o.verify = true;
    } else if (name == "--quiet") {
      o.quiet = true;
    } else if (name == "--steps" || name == "--seed" ||
               name == "--checkpoint-every" || name == "--threads" ||
               name == "--batches" || name == "--keep-checkpoints") {
      if (!takeValue() || !parseInt(value, n))
        return bad("an integer");
      if (name == "--steps")
        o.steps = n;
      else if (name == "--seed")
        o.seed = static_cast<uint64_t>(n);
      else if (name == "--checkpoint-every")
        o.checkpointEvery = n;
      else if (name == "--batches")
        o.batches = n;
      else if (name == "--keep-checkpoints")
        o.keepCheckpoints = n;
      else if (n < 1)
        return bad("a positive integer");
      else
        o.threads = kernelThreads(n, args.threadsNote);
    } else if (name == "--timeout") {
      // SimpleAtod reads "inf" and "infinity"; NaN fails x > 0.
      if (!takeValue() || !parseNumber(value, x) || !(x > 0))
        return bad("a positive number of seconds or 'inf'");
      o.timeout = std::min(x, kUnlimitedTimeout);
    } else if (name == "--verify-backend") {
      if (!takeValue() || !findBackend(value))
        return bad(backendNames().c_str());
      o.verifyBackend = value;
    } else if (name == "--backend") {
      if (!takeValue() || !findBackend(value))
        return bad(backendNames().c_str());
      o.backend = value;
    } else if (name == "--loss-scale") {
      if (!takeValue())
        return bad("'dynamic', 'none' or a positive number");
      o.lossScale = value; // checked with the other options
    } else if (name == "--verify-tolerance") {
      if (!takeValue() || !parseNumber(value, x) || !(x > 0))
        return bad("a positive number");
      o.verifyTolerance = x;
    } else if (name == "--init") {
      if (!takeValue() || (value != "plan" && value != "seed"))
        return bad("'plan' or 'seed'");
      o.init = value == "seed" ? InitMode::Seed : InitMode::Plan;
    } else if (name == "--input") {
      size_t eq = std::string::npos;
      if (!takeValue() || (eq = value.find('=')) == std::string::npos ||
          eq == 0)
        return bad("NAME=FILE.npy");
      o.inputs.emplace_back(value.substr(0, eq), value.substr(eq + 1));
    } else if (name == "--export-onnx") {
      size_t eq = std::string::npos;
      if (!takeValue() || (eq = value.find('=')) == std::string::npos ||
          eq == 0 || eq + 1 == value.size())
        return bad("MODEL.onnx=OUT.onnx");
      o.exportOnnxModel = value.substr(0, eq);
      o.exportOnnxOut = value.substr(eq + 1);
    } else if (name == "--checkpoint" || name == "--resume" ||
               name == "--save-outputs" || name == "--trace" ||
               name == "--log" || name == "--profile" ||
               name == "--profile-device" || name == "--weights" ||
               name == "--data") {
      if (!takeValue() || value.empty())
        return bad("a path");
      std::string &target = name == "--checkpoint"       ? o.checkpointDir
                            : name == "--resume"         ? o.resumeDir
                            : name == "--save-outputs"   ? o.saveOutputsDir
                            : name == "--trace"          ? o.traceFile
                            : name == "--profile"        ? o.profileFile
                            : name == "--profile-device" ? o.profileDevice
                            : name == "--weights"        ? args.weights
                            : name == "--data"           ? o.dataDir
                                                         : o.logFile;
      target = value;
    } else {
      return absl::InvalidArgumentError("unknown option '" + name +
                                        "' (see --help)");
    }
  }
  if (!args.help && !args.version && args.plan.empty())
    return absl::InvalidArgumentError(
        "no plan file given (usage: ppc-run PLAN [options]; see --help)");
  return absl::OkStatus();
}

} // namespace ppc::runtime
