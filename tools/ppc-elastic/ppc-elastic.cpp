//===- ppc-elastic.cpp - training that re-plans when ranks die ------------===//
//
// A launcher for one host's ranks: it searches a strategy for N ranks
// (ppc-opt --ppc-auto-parallel, machine=cpuxN), runs it under mpirun with a
// checkpoint after every step, and when the job fails (a rank died, was
// killed, or a node went away) it searches again for N - 1 ranks and
// resumes the newest checkpoint under the new plan: a checkpoint of another
// plan and rank count resumes from the overlap of its pieces
// (ppc/Runtime/Checkpoint.h). The global batch stays the model's, so the
// training continues where it was. It prints the time from each failure
// to the next completed step. SIGUSR1 says the devices are back: the job
// is stopped (its newest checkpoint at most a step old), and the training
// re-planned for all --ranks and resumed.
//
//===----------------------------------------------------------------------===//

#include "ppc/Runtime/Checkpoint.h"
#include "ppc/Simulator/Machine.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "ppc/Support/Status.h"
#include "ppc/Version.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace ppc::runtime;
using Clock = std::chrono::steady_clock;

namespace {

/// The job running now (mpirun's pid), whether it runs on fewer ranks
/// than asked for, and whether SIGUSR1 asked to grow back.
volatile sig_atomic_t jobPid = 0;
volatile sig_atomic_t shrunk = 0;
volatile sig_atomic_t growRequested = 0;

void onGrow(int) {
  if (!shrunk)
    return; // every rank is there already
  growRequested = 1;
  if (jobPid > 0)
    kill(static_cast<pid_t>(jobPid), SIGTERM);
}

const char kHelp[] =
    R"(usage: ppc-elastic MODEL --ranks N --steps S --checkpoint DIR [options]
                   [-- ppc-run options...]

Trains MODEL (ONNX or MLIR) for S steps on N ranks of this host: searches a
strategy for cpuxN, lowers it and runs it under mpirun with a checkpoint in
DIR after every step. When the job fails (a rank died), it searches again
for one rank fewer and resumes DIR's newest checkpoint under that plan,
down to --min-ranks; the model's global batch is kept. Each recovery is
reported with its time from the failure to the next completed step. Plans
go to DIR.plans/. `kill -USR1` of ppc-elastic says the devices are back:
it stops the job (losing at most the step after the newest checkpoint),
re-plans for N ranks again and resumes. Two jobs in a row that fail before
their first checkpoint stop it: that is a wrong option or file, not a lost
rank.

options:
  --batch-size B         the ONNX model's batch (required for ONNX)
  --min-ranks M          the fewest ranks to go on with (1)
  --auto-parallel OPTS   --ppc-auto-parallel options besides machine= and
                         plan= ("search=mcmc budget=200 optimizer=adam")
  --mpirun CMD           how to start a job, without its rank count
                         ("mpirun --oversubscribe"; a --hostfile for
                         several hosts)
  --machine M            the machine of all N ranks, a preset or JSON file
                         (cpuxN, this host's CPUs); on fewer ranks, its
                         first devices (the ranks that remain are the
                         first ones)
  --version, --help
)";

struct Options {
  std::string model, checkpoint;
  int64_t ranks = 0, steps = 0, batchSize = 0, minRanks = 1;
  std::string autoParallel = "search=mcmc budget=200 optimizer=adam";
  std::string mpirun = "mpirun --oversubscribe";
  /// The machine of all --ranks devices (a preset or JSON file); empty:
  /// cpuxN, this host's CPUs.
  std::string machine;
  std::vector<std::string> runArgs;
};

absl::StatusOr<Options> parseArgs(const std::vector<std::string> &args) {
  Options o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a == "--") {
      o.runArgs.assign(args.begin() + i + 1, args.end());
      break;
    }
    auto value = [&]() -> absl::StatusOr<std::string> {
      if (i + 1 == args.size())
        return absl::InvalidArgumentError(a + ": needs a value");
      return args[++i];
    };
    auto count = [&](int64_t &out, int64_t least) -> absl::Status {
      PPC_ASSIGN_OR_RETURN(std::string text, value());
      if (!absl::SimpleAtoi(text, &out) || out < least || out > (1 << 16))
        return absl::InvalidArgumentError(
            a + ": expected a whole number from " + std::to_string(least) +
            " to 65536, got '" + text + "'");
      return absl::OkStatus();
    };
    if (a == "--ranks") {
      PPC_RETURN_IF_ERROR(count(o.ranks, 1));
    } else if (a == "--steps") {
      PPC_RETURN_IF_ERROR(count(o.steps, 1));
    } else if (a == "--batch-size") {
      PPC_RETURN_IF_ERROR(count(o.batchSize, 1));
    } else if (a == "--min-ranks") {
      PPC_RETURN_IF_ERROR(count(o.minRanks, 1));
    } else if (a == "--checkpoint") {
      PPC_ASSIGN_OR_RETURN(o.checkpoint, value());
    } else if (a == "--auto-parallel") {
      PPC_ASSIGN_OR_RETURN(o.autoParallel, value());
    } else if (a == "--mpirun") {
      PPC_ASSIGN_OR_RETURN(o.mpirun, value());
    } else if (a == "--machine") {
      PPC_ASSIGN_OR_RETURN(o.machine, value());
    } else if (!a.empty() && a[0] == '-') {
      return absl::InvalidArgumentError("unknown option '" + a + "' (--help)");
    } else if (o.model.empty()) {
      o.model = a;
    } else {
      return absl::InvalidArgumentError("a second model '" + a + "' (--help)");
    }
  }
  if (o.model.empty() || o.ranks == 0 || o.steps == 0 || o.checkpoint.empty())
    return absl::InvalidArgumentError(
        "needs MODEL, --ranks, --steps and --checkpoint (--help)");
  if (o.minRanks > o.ranks)
    return absl::InvalidArgumentError(
        "--min-ranks " + std::to_string(o.minRanks) + " is more than --ranks " +
        std::to_string(o.ranks));
  for (const char *key : {"machine=", "plan="})
    if (o.autoParallel.find(key) != std::string::npos)
      return absl::InvalidArgumentError(
          std::string("--auto-parallel: ppc-elastic sets ") + key +
          " itself (one plan per rank count)");
  for (const std::string &a : o.runArgs)
    for (const char *own :
         {"--steps", "--checkpoint", "--checkpoint-every", "--resume"})
      if (a == own)
        return absl::InvalidArgumentError(
            std::string("after --: ppc-elastic sets ") + own +
            " of every job itself (--steps and --checkpoint are its own)");
  bool onnx = o.model.size() > 5 &&
              o.model.compare(o.model.size() - 5, 5, ".onnx") == 0;
  if (onnx && o.batchSize == 0)
    return absl::InvalidArgumentError("an ONNX model needs --batch-size");
  return o;
}

/// The folder of this executable, where ppc-opt and ppc-run are.
std::string toolDirectory() {
  std::vector<char> path(4096);
  ssize_t n = readlink("/proc/self/exe", path.data(), path.size() - 1);
  std::string self = n > 0 ? std::string(path.data(), n) : "";
  size_t slash = self.rfind('/');
  return slash == std::string::npos ? "." : self.substr(0, slash);
}

/// Runs `argv`, its output lines passed to `onLine` (and printed), and
/// returns its exit status (128 + the signal when killed). With `job`, it
/// is the job SIGUSR1 stops.
absl::StatusOr<int>
runCommand(const std::vector<std::string> &argv,
           const std::function<void(const std::string &)> &onLine,
           bool job = false) {
  int fds[2];
  if (pipe(fds) != 0)
    return absl::InternalError(std::string("pipe: ") + std::strerror(errno));
  pid_t pid = fork();
  if (pid < 0)
    return absl::InternalError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    std::vector<char *> args;
    for (const std::string &a : argv)
      args.push_back(const_cast<char *>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "ppc-elastic: cannot run '%s': %s\n", args[0],
                 std::strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  if (job) {
    jobPid = pid;
    if (growRequested) // asked while this job was being set up
      kill(pid, SIGTERM);
  }
  FILE *in = fdopen(fds[0], "r");
  std::string line;
  for (int c; (c = std::fgetc(in)) != EOF;) {
    if (c != '\n') {
      line += static_cast<char>(c);
      continue;
    }
    std::cout << line << "\n" << std::flush;
    onLine(line);
    line.clear();
  }
  std::fclose(in);
  int status = 0;
  pid_t waited;
  while ((waited = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
    ;
  jobPid = 0;
  if (waited < 0)
    return absl::InternalError(std::string("waitpid: ") + std::strerror(errno));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// Steps the newest complete checkpoint of `dir` holds; 0 when it has none.
int64_t stepsDone(const std::string &dir) {
  std::string step;
  CheckpointMarker marker;
  if (!readLatest(dir, step).ok() || !readCompleteMarker(step, marker).ok())
    return 0;
  return marker.steps;
}

absl::Status train(const Options &o) {
  const std::string tools = toolDirectory();
  const std::string plans = o.checkpoint + ".plans";
  if (mkdir(plans.c_str(), 0777) != 0 && errno != EEXIST)
    return absl::InternalError("cannot create '" + plans +
                               "': " + std::strerror(errno));
  std::vector<std::string> mpirun =
      absl::StrSplit(o.mpirun, ' ', absl::SkipEmpty());
  std::optional<ppc::Machine> machine;
  if (!o.machine.empty()) {
    absl::StatusOr<ppc::Machine> loaded = ppc::loadMachine(o.machine);
    if (!loaded.ok())
      return ppc::annotate(loaded.status(), "--machine");
    if (loaded->numDevices() != o.ranks)
      return absl::InvalidArgumentError("--machine '" + o.machine + "' has " +
                                        std::to_string(loaded->numDevices()) +
                                        " devices, --ranks " +
                                        std::to_string(o.ranks));
    machine = std::move(*loaded);
  }
  // The machine of `ranks` ranks, as ppc-opt's machine= takes it.
  auto machineFor = [&](int64_t ranks) -> absl::StatusOr<std::string> {
    if (!machine)
      return "cpux" + std::to_string(ranks);
    const std::string path =
        plans + "/machine-" + std::to_string(ranks) + ".json";
    std::ofstream out(path);
    out << ppc::writeMachineJson(machine->subMachine(0, ranks));
    if (!out)
      return absl::InternalError("cannot write '" + path + "'");
    return path;
  };
  int64_t ranks = o.ranks;
  std::optional<Clock::time_point> failedAt;
  const char *stopped = "the failure"; // or the stop to grow
  int failuresBeforeAStep = 0;
  while (true) {
    // A plan for this many ranks.
    auto searchStart = Clock::now();
    const std::string plan = plans + "/ranks-" + std::to_string(ranks) + ".pb";
    std::vector<std::string> search = {tools + "/ppc-opt", o.model};
    if (o.batchSize > 0)
      search.push_back("--batch-size=" + std::to_string(o.batchSize));
    PPC_ASSIGN_OR_RETURN(std::string machineName, machineFor(ranks));
    search.push_back("--ppc-auto-parallel=machine=" + machineName + " " +
                     o.autoParallel + " plan=" + plan);
    search.insert(search.end(), {"-o", "/dev/null"});
    PPC_ASSIGN_OR_RETURN(int searched, runCommand(search, [](auto &) {}));
    if (searched != 0)
      return absl::InvalidArgumentError("the search for " +
                                        std::to_string(ranks) +
                                        " ranks failed (ppc-opt exit status " +
                                        std::to_string(searched) + ")");
    const int64_t done = stepsDone(o.checkpoint);
    std::cout
        << "ppc-elastic: " << ranks << " rank" << (ranks == 1 ? "" : "s")
        << ", plan " << plan << " searched in "
        << std::chrono::duration<double>(Clock::now() - searchStart).count()
        << " s; " << (done > 0 ? "resuming after step " : "from step ") << done
        << " of " << o.steps << "\n"
        << std::flush;
    if (done >= o.steps)
      return absl::OkStatus();

    std::vector<std::string> job = mpirun;
    job.insert(job.end(),
               {"-np", std::to_string(ranks), tools + "/ppc-run", plan,
                "--steps", std::to_string(o.steps - done), "--checkpoint",
                o.checkpoint, "--checkpoint-every", "1"});
    if (done > 0)
      job.insert(job.end(), {"--resume", o.checkpoint});
    job.insert(job.end(), o.runArgs.begin(), o.runArgs.end());
    growRequested = 0;
    shrunk = ranks < o.ranks;

    PPC_ASSIGN_OR_RETURN(
        int status, runCommand(
                        job,
                        [&](const std::string &l) {
                          if (failedAt && l.rfind("step ", 0) == 0) {
                            std::cout
                                << "ppc-elastic: recovered on " << ranks
                                << " rank" << (ranks == 1 ? "" : "s") << ": "
                                << std::chrono::duration<double>(Clock::now() -
                                                                 *failedAt)
                                       .count()
                                << " s from " << stopped << " to this step\n"
                                << std::flush;
                            failedAt.reset();
                          }
                        },
                        /*job=*/true));
    // Fault injection for the tests (Checkpoint.h) fails the first job
    // only.
    unsetenv("PPC_CKPT_FAIL_AT");
    // Every step checkpointed is done, whatever ended the job after the
    // last one (a grow request or a rank lost on the way out).
    if (stepsDone(o.checkpoint) >= o.steps) {
      std::cout << "ppc-elastic: " << o.steps << " steps done on " << ranks
                << " rank" << (ranks == 1 ? "" : "s") << "\n";
      return absl::OkStatus();
    }
    // Two jobs in a row that fail before their first checkpoint have not
    // lost a rank: the plan, options or files are wrong, on any rank count.
    failuresBeforeAStep = stepsDone(o.checkpoint) > done || growRequested
                              ? 0
                              : failuresBeforeAStep + 1;
    if (failuresBeforeAStep == 2)
      return absl::FailedPreconditionError(
          "two jobs in a row failed before their first checkpoint (exit "
          "status " +
          std::to_string(status) +
          "): not a lost rank, but what ppc-run said above");
    failedAt = Clock::now();
    stopped = growRequested ? "the stop" : "the failure";
    if (growRequested) {
      std::cout << "ppc-elastic: devices returned: the job on " << ranks
                << " rank" << (ranks == 1 ? "" : "s") << " stopped after step "
                << stepsDone(o.checkpoint) << "; re-planning for " << o.ranks
                << "\n"
                << std::flush;
      ranks = o.ranks;
      continue;
    }
    if (ranks - 1 < o.minRanks)
      return absl::UnavailableError(
          "the job on " + std::to_string(ranks) +
          " ranks failed (exit status " + std::to_string(status) +
          ") and --min-ranks is " + std::to_string(o.minRanks) +
          "; the newest checkpoint is of step " +
          std::to_string(stepsDone(o.checkpoint)));
    std::cout << "ppc-elastic: the job on " << ranks << " ranks failed (exit "
              << "status " << status << ") after step "
              << stepsDone(o.checkpoint) << "; re-planning for " << ranks - 1
              << "\n"
              << std::flush;
    --ranks;
  }
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << kHelp;
    return 0;
  }
  if (!args.empty() && args[0] == "--version") {
    std::cout << "ppc-elastic " << PPC_VERSION_STRING << "\n";
    return 0;
  }
  std::signal(SIGUSR1, onGrow);
  absl::StatusOr<Options> options = parseArgs(args);
  absl::Status status = options.status();
  if (status.ok())
    status = train(*options);
  if (!status.ok()) {
    std::cerr << "ppc-elastic: " << status.message() << "\n";
    return 1;
  }
  return 0;
}
