//===- Search.cpp - search a strategy and attach it as #ppc.strategy ------===//
//
// The glue between the module and the MLIR-free search: the function becomes
// a sim::Graph, the machine comes from `ppc.machine`, the search runs, and
// the winner is written back as one #ppc.strategy per op. Following the
// auto-partitioner contract, nothing else in the module changes, so a
// searched, imported or hand-written strategy lowers the same way.
//
//===----------------------------------------------------------------------===//

#include "SimulationOptions.h"
#include "StrategyUtils.h"

#include "ppc/Analysis/SimGraph.h"
#include "ppc/Dialect/Graph/GraphDialect.h"
#include "ppc/Dialect/Topology/MachineConversion.h"
#include "ppc/Report/Report.h"
#include "ppc/Search/ProfileRequests.h"
#include "ppc/Search/Search.h"
#include "ppc/Simulator/CostModel.h"
#include "ppc/Simulator/Simulator.h"
#include "ppc/Support/Alternatives.h"
#include "ppc/Transforms/Passes.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <thread>
#include <unistd.h>

namespace ppc {
#define GEN_PASS_DEF_SEARCHSTRATEGY
#include "ppc/Transforms/Passes.h.inc"
} // namespace ppc

using namespace mlir;
using namespace ppc;

namespace {

/// A search, or a baseline of search::baselines() taken as it is.
enum class Algorithm {
  MCMC,
  DynamicProgramming,
  Exhaustive,
  Pipeline,
  Megatron,
  Baseline
};

/// The searches `algorithm=` names; the baselines follow them.
struct SearchInfo {
  const char *name;
  Algorithm algorithm;
  const char *description;
};
constexpr SearchInfo kSearches[] = {
    {"mcmc", Algorithm::MCMC,
     "FlexFlow's MCMC over delta simulation, started from the dp's answer "
     "and every baseline"},
    {"dp", Algorithm::DynamicProgramming,
     "dynamic programming over a series-parallel decomposition"},
    {"exhaustive", Algorithm::Exhaustive, "every strategy (small graphs)"},
    {"pipeline", Algorithm::Pipeline,
     "pipeline stages x micro-batches x the baseline inside each stage"},
};

std::optional<Algorithm> parseAlgorithm(StringRef name) {
  // Megatron-LM's layout takes options (tp, pp, ...); its default is the
  // "megatron" baseline.
  if (name == "megatron")
    return Algorithm::Megatron;
  if (search::findBaseline(name.str()))
    return Algorithm::Baseline;
  for (const SearchInfo &info : kSearches)
    if (name == info.name)
      return info.algorithm;
  return std::nullopt;
}

/// "mcmc, dp, exhaustive, data-parallel, ... or one-weird-trick".
std::string algorithmNames() {
  std::vector<std::pair<std::string, std::string>> list =
      ppc::searchAlgorithms();
  std::vector<std::string> names;
  for (const auto &[name, description] : list)
    names.push_back(name);
  return listAlternatives(names);
}

struct Budget {
  int64_t iterations = 0;
  double seconds = 0;
};

/// "30s", "1.5m", "2h", "500ms": seconds; "5000" or "5000it": iterations.
std::optional<Budget> parseBudget(StringRef text) {
  std::optional<transforms_detail::Quantity> q =
      transforms_detail::splitQuantity(text);
  if (!q)
    return std::nullopt;
  StringRef number = q->number, unit = q->unit;
  double value = q->value;
  Budget budget;
  if (unit.empty() || unit == "it" || unit == "iterations") {
    if (number.contains('.'))
      return std::nullopt;
    budget.iterations = static_cast<int64_t>(value);
    return budget;
  }
  double scale = llvm::StringSwitch<double>(unit)
                     .Case("ms", 1e-3)
                     .Cases({"s", "sec"}, 1)
                     .Cases({"m", "min"}, 60)
                     .Case("h", 3600)
                     .Default(0);
  if (scale == 0)
    return std::nullopt;
  budget.seconds = value * scale;
  return budget;
}

std::string formatMs(double seconds) {
  if (!std::isfinite(seconds))
    return "out of memory";
  return llvm::formatv("{0:f3} ms", seconds * 1e3).str();
}

/// Whether `answer`'s simulation stopped at the end of its budget (or was
/// never run): it has no time.
bool stoppedShort(const search::SearchResult &answer) {
  return answer.pipeline.enabled() ? answer.pipelineResult.stopped
                                   : answer.result.stopped;
}

/// A search's answer as the messages give it: its time, "out of memory", or
/// why it has none.
std::string formatAnswer(const search::SearchResult &answer) {
  return stoppedShort(answer) ? "not simulated within the budget"
                              : formatMs(answer.objective);
}

/// The dynamic programming's time limit when algorithm=mcmc starts a chain
/// from its answer under an iteration budget.
constexpr double kDpStartSeconds = 50;
/// The pipeline search's time limit in algorithm=mcmc on more than one
/// device under an iteration budget.
constexpr double kPipelineSearchSeconds = 50;
/// The Megatron layouts' time limit in algorithm=mcmc under an iteration
/// budget.
constexpr double kMegatronLayoutSeconds = 30;

/// Set by SIGINT while a search runs: the search stops with its best so far.
std::atomic<bool> cancelRequested{false};

extern "C" void onInterrupt(int) {
  cancelRequested.store(true);
  // A second Ctrl-C ends the process as usual.
  std::signal(SIGINT, SIG_DFL);
}

/// Routes SIGINT to the cancel flag for its lifetime, then puts the previous
/// handler back.
class InterruptScope {
public:
  InterruptScope() {
    cancelRequested.store(false);
    struct sigaction action = {};
    action.sa_handler = onInterrupt;
    sigemptyset(&action.sa_mask);
    installed = sigaction(SIGINT, &action, &previous) == 0;
  }
  ~InterruptScope() {
    if (installed)
      sigaction(SIGINT, &previous, nullptr);
  }
  InterruptScope(const InterruptScope &) = delete;
  InterruptScope &operator=(const InterruptScope &) = delete;

private:
  struct sigaction previous = {};
  bool installed = false;
};

/// Dim 0 of the first input when static: the samples of one iteration.
int64_t getBatchSize(func::FuncOp func) {
  if (func.getNumArguments() == 0)
    return 0;
  auto type = dyn_cast<RankedTensorType>(func.getArgumentTypes()[0]);
  if (!type || type.getRank() == 0 || type.isDynamicDim(0))
    return 0;
  return type.getDimSize(0);
}

/// The model's name for report titles: the input file's stem when the
/// module knows it, else the function's name.
std::string getModelName(ModuleOp module, func::FuncOp func, size_t numFuncs) {
  std::string name;
  if (auto loc = dyn_cast<FileLineColLoc>(module.getLoc()))
    name = llvm::sys::path::stem(loc.getFilename().getValue()).str();
  if (name.empty())
    return func.getSymName().str();
  if (numFuncs > 1)
    name += ":" + func.getSymName().str();
  return name;
}

/// "dgx-h100x2" when the machine has a name, else "16 x H100-SXM5-80GB".
std::string describeMachine(const Machine &machine) {
  if (!machine.name.empty())
    return machine.name;
  std::string spec = machine.specs.empty() ? "device" : machine.specs[0].name;
  return std::to_string(machine.numDevices()) + " x " + spec;
}

struct SearchStrategyPass
    : public ppc::impl::SearchStrategyBase<SearchStrategyPass> {
  using Base::Base;

  void runOnOperation() override;

private:
  LogicalResult searchFunction(func::FuncOp func, const Machine &machine,
                               const sim::CostModel &costModel,
                               size_t numFuncs);

  template <typename Pass>
  friend FailureOr<sim::SimOptions>
  transforms_detail::readSimulationOptions(const Pass &, Location, StringRef);

  Algorithm algo = Algorithm::MCMC;
  Budget parsedBudget;
  sim::SimOptions simOptions;
  bool showProgress = false;
  /// The measured profile (profile=), calibrated per function.
  std::optional<sim::ProfiledCostModel> profile;
};

void SearchStrategyPass::runOnOperation() {
  ModuleOp module = getOperation();

  // Options first: a typo must not cost a search.
  std::optional<Algorithm> parsedAlgorithm = parseAlgorithm(algorithm);
  if (!parsedAlgorithm) {
    module.emitError() << "ppc-search: unknown algorithm '" << algorithm
                       << "'; expected " << algorithmNames();
    return signalPassFailure();
  }
  algo = *parsedAlgorithm;
  std::optional<Budget> budgetValue = parseBudget(budget);
  if (!budgetValue) {
    module.emitError() << "ppc-search: bad budget '" << budget
                       << "'; expected seconds ('30s', '2m', '1h') or "
                          "iterations ('5000', '5000it')";
    return signalPassFailure();
  }
  parsedBudget = *budgetValue;
  if (!stageBaseline.empty() && !search::findBaseline(stageBaseline)) {
    module.emitError() << "ppc-search: unknown stage-baseline '"
                       << stageBaseline << "'";
    return signalPassFailure();
  }
  if (!schedule.empty() && !findPipelineSchedule(schedule.getValue())) {
    module.emitError() << "ppc-search: unknown schedule '" << schedule
                       << "': expected " << pipelineScheduleNames();
    return signalPassFailure();
  }
  if (!search::findRecompute(recompute)) {
    module.emitError() << "ppc-search: unknown recompute '" << recompute
                       << "': expected " << listNames(search::recomputeModes());
    return signalPassFailure();
  }
  if (algo != Algorithm::Megatron &&
      (tp != 0 || pp != 1 || dp != 0 || virtualStages != 1 ||
       recompute != "none" || sequenceParallel || distributedOptimizer ||
       fsdp || cp != 1 || cpComm != "all-gather" || ep != 1 || etp != 0)) {
    module.emitError()
        << "ppc-search: tp, pp, dp, cp, cp-comm, ep, etp, virtual-stages, "
           "recompute, "
           "sequence-parallel, distributed-optimizer and fsdp apply to "
           "algorithm=megatron, not '"
        << algorithm << "'";
    return signalPassFailure();
  }
  if (!search::findContextExchange(cpComm)) {
    module.emitError() << "ppc-search: unknown cp-comm '" << cpComm
                       << "': expected "
                       << listNames(search::contextExchanges());
    return signalPassFailure();
  }
  if (stages < 0 || microbatches < 0) {
    module.emitError() << "ppc-search: stages and microbatches must be >= 0 "
                          "(0: searched)";
    return signalPassFailure();
  }
  FailureOr<sim::SimOptions> simOptionsValue =
      transforms_detail::readSimulationOptions(*this, module.getLoc(),
                                               "ppc-search");
  if (failed(simOptionsValue))
    return signalPassFailure();
  simOptions = *simOptionsValue;
  if (progress != "auto" && progress != "on" && progress != "off") {
    module.emitError() << "ppc-search: progress must be auto, on or off, not '"
                       << progress << "'";
    return signalPassFailure();
  }
  showProgress =
      progress == "on" || (progress == "auto" && isatty(STDERR_FILENO));
  // Each thread runs a chain with its own simulator: beyond the limit a
  // request is clamped (said once), not a failure to start threads.
  if (threads > static_cast<unsigned>(search::kMaxSearchThreads))
    llvm::errs() << "ppc-search: note: threads=" << threads
                 << " is more than the " << search::kMaxSearchThreads
                 << " a search runs; using " << search::kMaxSearchThreads
                 << "\n";

  std::optional<Machine> machine = topo::lookupMachine(module);
  if (!machine) {
    module.emitError() << "ppc-search: no machine attached; use "
                          "--ppc-attach-machine=machine=NAME";
    return signalPassFailure();
  }

  sim::RooflineCostModel roofline;
  profile.reset();
  const sim::CostModel *costModel = &roofline;
  if (!profilePath.empty()) {
    absl::StatusOr<sim::ProfiledCostModel> read =
        sim::ProfiledCostModel::readFile(profilePath);
    if (!read.ok()) {
      module.emitError() << "ppc-search: cannot read the profile: "
                         << ppc::messageOf(read.status());
      return signalPassFailure();
    }
    profile = std::move(*read);
    costModel = &*profile;
  }

  SmallVector<func::FuncOp> funcs =
      transforms_detail::getFunctionsToSplit(module);
  for (func::FuncOp func : funcs)
    if (failed(searchFunction(func, *machine, *costModel, funcs.size())))
      return signalPassFailure();
}

LogicalResult
SearchStrategyPass::searchFunction(func::FuncOp func, const Machine &machine,
                                   const sim::CostModel &costModel,
                                   size_t numFuncs) {
  // A time budget counts from here: building the graph and the
  // configuration space of a model on thousands of devices takes seconds.
  auto searchBegin = std::chrono::steady_clock::now();
  FailureOr<sim::Graph> graph = buildSimGraph(func);
  if (failed(graph))
    return failure();
  int64_t numDevices = machine.numDevices();
  if (!profileRequests.empty()) {
    if (numFuncs > 1)
      return emitError(func.getLoc())
             << "ppc-search: profile-requests lists one function's kernels; "
                "this module has "
             << numFuncs;
    int64_t count = 0;
    std::string error = search::writeProfileRequests(
        *graph, search::ConfigSpace(*graph, machine), profileRequests, count);
    if (!error.empty())
      return emitError(func.getLoc())
             << "ppc-search: profile-requests: " << error;
    llvm::errs() << "ppc-search: wrote " << count << " kernels to measure to "
                 << profileRequests << " (ppc-profile PLAN --requests "
                 << profileRequests << ")\n";
  }

  // Kernels the profile lacks cost what the measured ones say the roofline
  // misses by: otherwise the search favours exactly the unmeasured ones
  // wherever the roofline is optimistic, and each plan run with
  // ppc-run --profile leads it to other unmeasured kernels.
  if (profile) {
    size_t total = 0;
    size_t measured =
        search::calibrateProfileMisses(*profile, *graph, machine, total);
    llvm::errs() << llvm::formatv(
        "ppc-search @{0}: the profile measures {1} of the {2} kernels "
        "(forward and backward) the search may pick; it prices the others "
        "at the roofline x {3:f2}, the measured kernels' median ratio to it "
        "(per op kind where it measures the kind)\n",
        func.getSymName(), measured, total, profile->missScale(""));
  }

  search::Problem problem{*graph, machine, costModel, simOptions};
  // Ctrl-C stops a simulation part way, as does the end of a phase's share
  // of a time budget (one simulation of a large model on thousands of
  // devices takes tens of seconds): a phase's answer is what it finished.
  problem.simOptions.stop = &cancelRequested;
  // `seconds` from now (past already when negative).
  auto secondsFromNow = [](double seconds) {
    return std::chrono::steady_clock::now() +
           std::chrono::duration_cast<std::chrono::steady_clock::duration>(
               std::chrono::duration<double>(seconds));
  };
  auto stopSimulationsAfter = [&](double seconds) {
    problem.simOptions.deadline =
        seconds > 0 ? secondsFromNow(seconds)
                    : std::chrono::steady_clock::time_point::max();
  };
  // The phases share the budget but for its last 3%: applying the answer,
  // the comparison with data parallel and writing the module follow them.
  const double searchSeconds = parsedBudget.seconds * 0.97;
  auto secondsLeft = [&] {
    return searchSeconds - std::chrono::duration<double>(
                               std::chrono::steady_clock::now() - searchBegin)
                               .count();
  };
  // What is left as a phase's budget: never 0, which would mean none.
  auto budgetLeft = [&] { return std::max(secondsLeft(), 1e-9); };
  if (parsedBudget.seconds > 0)
    stopSimulationsAfter(budgetLeft());

  // The baselines: MCMC starts from them and the report compares with them.
  std::vector<std::pair<std::string, sim::Strategy>> baselines;
  for (const search::BaselineInfo &info : search::baselines())
    baselines.emplace_back(info.name, info.build(*graph, machine));

  // A strategy already on the module (imported, hand-written, an earlier
  // search) is one more start: the search can only improve on it.
  std::optional<sim::Strategy> existing;
  SmallVector<Operation *> ops = getSimulatedOps(func);
  if (llvm::any_of(ops, [](Operation *op) {
        return op->hasAttr(graph::PPCDialect::getStrategyAttrName());
      })) {
    FailureOr<sim::Strategy> read =
        readStrategy(func, *graph, UnassignedPolicy::DataParallel, numDevices);
    if (failed(read))
      return failure();
    sim::Simulator checker(*graph, machine, costModel, simOptions);
    for (auto [index, op] : llvm::enumerate(ops)) {
      absl::Status problemText = checker.checkConfig(index, (*read)[index]);
      if (!problemText.ok())
        return op->emitError()
               << "ppc-search: the op's strategy does not fit it or the "
                  "machine: "
               << ppc::messageOf(problemText);
    }
    existing = std::move(*read);
  }

  search::SearchOptions options;
  options.iterations = parsedBudget.iterations;
  options.seconds = parsedBudget.seconds > 0 ? budgetLeft() : 0;
  options.seed = seed;
  options.threads = static_cast<int>(std::min<unsigned>(
      threads ? threads : std::max(1u, std::thread::hardware_concurrency()),
      search::kMaxSearchThreads));
  options.progress = showProgress;
  options.cancel = &cancelRequested;

  auto evaluate = [&](std::string name, const sim::Strategy &strategy,
                      const sim::SimOptions &how) {
    auto begin = std::chrono::steady_clock::now();
    sim::Simulator simulator(*graph, machine, costModel, how);
    search::SearchResult result;
    result.algorithm = std::move(name);
    result.strategy = strategy;
    result.result = simulator.simulate(strategy);
    result.objective = search::objective(problem, result.result);
    result.iterations = 1;
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
            .count();
    return result;
  };

  search::SearchResult found;
  // With a DP start: what the DP evaluated, and its seconds.
  int64_t dpEvaluations = 0;
  double dpSeconds = 0;
  // Data parallel's objective when the search simulated it already.
  std::optional<double> dataParallelObjective;
  {
    InterruptScope interrupt;
    switch (algo) {
    case Algorithm::MCMC: {
      search::ConfigSpace space(*graph, machine);
      std::vector<sim::Strategy> starts;
      // The DP's answer first: the first chain starts from it, and MCMC
      // takes its simulation as it is.
      search::SearchResult dp;
      const sim::SimResult *dpResult = nullptr; // the first start's
      bool dpAnsweredDataParallel = false;
      search::SearchOptions chains = options;
      if (dpStart) {
        search::SearchOptions dpOptions = options;
        dpOptions.seconds =
            options.seconds > 0 ? budgetLeft() / 2 : kDpStartSeconds;
        // Placements beyond the views anchored at device 0 (where the DP's
        // tables are anchored) are MCMC's to try.
        dpOptions.refineWholeSpace = false;
        stopSimulationsAfter(dpOptions.seconds);
        dp = search::dynamicProgramming(problem, space, dpOptions);
        // A DP out of budget answers data parallel: it starts nothing the
        // baselines do not, and its simulation is data parallel's.
        dpAnsweredDataParallel =
            !dp.cutShort.empty() && dp.strategy == baselines.front().second;
        if (dp.strategy.size() == graph->ops.size()) {
          if (!dpAnsweredDataParallel)
            starts.push_back(dp.strategy);
          dpResult = &dp.result;
        }
        if (options.seconds > 0)
          chains.seconds = budgetLeft();
      }
      // A baseline equal to an earlier one (deepspeed-moe on a model
      // without experts is zero2) is one start.
      for (auto it = baselines.begin(); it != baselines.end(); ++it)
        if (std::none_of(baselines.begin(), it, [&](const auto &earlier) {
              return earlier.second == it->second;
            }))
          starts.push_back(it->second);
      if (existing)
        starts.push_back(*existing);
      // Where ops mix sequence positions, Megatron-LM's and Megatron-Core's
      // layouts and Ulysses x ZeRO-3, which no single-op move reaches from
      // the other starts: the fastest is a start when unpipelined, and
      // competes with MCMC's answer as the pipeline search's does.
      search::SearchResult megatron;
      if (megatronLayouts && machine.numDevices() > 1 &&
          !cancelRequested.load()) {
        search::SearchOptions layoutOptions = options;
        layoutOptions.seconds =
            options.seconds > 0 ? budgetLeft() / 3 : kMegatronLayoutSeconds;
        stopSimulationsAfter(layoutOptions.seconds);
        megatron = search::megatronLayouts(problem, layoutOptions);
        if (!megatron.strategy.empty() && !megatron.pipeline.enabled())
          starts.push_back(megatron.strategy);
        if (options.seconds > 0)
          chains.seconds = budgetLeft();
      }
      // On more than one device pipelines are searched too, before MCMC
      // (which cannot pipeline): with a time budget, half of what is left,
      // or two thirds when the DP's answer does not fit in memory (then
      // pipelines, whose stages hold a share of the weights, are the likely
      // answer, and on a model that large MCMC would spend any time given
      // on its starts); under an iteration budget at most
      // kPipelineSearchSeconds. The pipeline search does not run the DP on
      // the whole graph: the DP start did (or was not asked for), and its
      // unpipelined candidates are MCMC's starts.
      search::SearchResult piped;
      bool searchPipelines =
          pipelines && machine.numDevices() > 1 && !cancelRequested.load();
      if (searchPipelines) {
        bool dpUnfit =
            dpResult && !std::isfinite(search::objective(problem, *dpResult));
        search::SearchOptions pipelineOptions = options;
        pipelineOptions.seconds = options.seconds > 0
                                      ? budgetLeft() * (dpUnfit ? 2.0 / 3 : 0.5)
                                      : kPipelineSearchSeconds;
        search::PipelineSearchOptions what;
        what.refineUnpipelined = false;
        stopSimulationsAfter(pipelineOptions.seconds);
        piped = search::pipelineSearch(problem, pipelineOptions, what);
        if (options.seconds > 0)
          chains.seconds = budgetLeft();
      }
      // When a pipeline fits, a search that finds nothing fitting in memory
      // by half its time stops there.
      if (chains.seconds > 0 && std::isfinite(piped.objective))
        chains.stopUnfitAfter = chains.seconds / 2;
      stopSimulationsAfter(chains.seconds);
      found = search::mcmc(problem, space, starts, chains, dpResult);
      size_t dataParallelStart = dpResult && !dpAnsweredDataParallel ? 1 : 0;
      if (dataParallelStart < found.startObjectives.size() &&
          !std::isnan(found.startObjectives[dataParallelStart]))
        dataParallelObjective = found.startObjectives[dataParallelStart];
      if (dpStart) {
        // The iterations stay MCMC's, as its trace counts them (the
        // report's convergence reads one against the other); the DP's
        // evaluations are said apart.
        found.considered.push_back("dynamic programming: " + formatAnswer(dp));
        found.algorithm = "MCMC from the dynamic programming's answer";
        found.seconds += dp.seconds;
        dpEvaluations = dp.iterations;
        dpSeconds = dp.seconds;
        found.cutShort.insert(found.cutShort.begin(), dp.cutShort.begin(),
                              dp.cutShort.end());
      }
      found.considered.push_back("MCMC: " + formatAnswer(found));
      if (!megatron.strategy.empty()) {
        found.considered.push_back("Megatron layouts: " + megatron.algorithm +
                                   ": " + formatAnswer(megatron));
        found.cutShort.insert(found.cutShort.end(), megatron.cutShort.begin(),
                              megatron.cutShort.end());
        if (std::isfinite(megatron.objective) &&
            !(found.objective <= megatron.objective)) {
          megatron.algorithm =
              (std::isfinite(found.objective) ? "faster than MCMC's answer, "
                                              : "no other strategy fits, ") +
              megatron.algorithm;
          megatron.iterations += found.iterations;
          megatron.seconds += found.seconds;
          megatron.cutShort = std::move(found.cutShort);
          megatron.startObjectives = std::move(found.startObjectives);
          megatron.considered = std::move(found.considered);
          found = std::move(megatron);
        }
      }
      // The pipeline search's answer, counted with what ran before it, wins
      // when it fits and MCMC's does not do better.
      if (searchPipelines) {
        // "pipeline search: <its answer>: <time>", or why it has none.
        llvm::StringRef answer = piped.algorithm;
        answer.consume_front("pipeline search: ");
        found.considered.push_back(
            "pipeline search: " + answer.str() +
            (piped.strategy.empty() ? "" : ": " + formatAnswer(piped)));
        piped.iterations += found.iterations;
        piped.seconds += found.seconds;
        piped.cutShort.insert(piped.cutShort.begin(), found.cutShort.begin(),
                              found.cutShort.end());
        if (std::isfinite(piped.objective) &&
            !(found.objective <= piped.objective)) {
          piped.algorithm = (std::isfinite(found.objective)
                                 ? "faster than MCMC's answer, "
                                 : "no unpipelined strategy fits, ") +
                            piped.algorithm;
          piped.startObjectives = std::move(found.startObjectives);
          piped.considered = std::move(found.considered);
          found = std::move(piped);
        } else {
          found.cutShort = std::move(piped.cutShort);
        }
      }
      break;
    }
    case Algorithm::DynamicProgramming: {
      search::ConfigSpace space(*graph, machine);
      found = search::dynamicProgramming(problem, space, options);
      break;
    }
    case Algorithm::Exhaustive: {
      search::ConfigSpace space(*graph, machine);
      found = search::exhaustive(problem, space, options);
      if (found.strategy.empty())
        return emitError(func.getLoc())
               << "ppc-search: exhaustive search of @" << func.getSymName()
               << " is out of reach: 10^"
               << llvm::formatv("{0:f1}", space.log10Size())
               << " strategies; use algorithm=mcmc or algorithm=dp";
      break;
    }
    case Algorithm::Pipeline: {
      search::PipelineSearchOptions pipelineOptions;
      pipelineOptions.stages = stages;
      pipelineOptions.microbatches = microbatches;
      pipelineOptions.stageBaseline = stageBaseline;
      pipelineOptions.stageDp = stageDp;
      if (!schedule.empty())
        pipelineOptions.schedule =
            findPipelineSchedule(schedule.getValue())->kind;
      found = search::pipelineSearch(problem, options, pipelineOptions);
      break;
    }
    case Algorithm::Megatron: {
      search::MegatronLayout layout;
      layout.tensorParallel = tp;
      layout.pipelineParallel = pp;
      layout.dataParallel = dp;
      layout.virtualStages = virtualStages;
      layout.microbatches = microbatches;
      layout.recompute = search::findRecompute(recompute)->mode;
      layout.sequenceParallel = sequenceParallel;
      layout.distributedOptimizer = distributedOptimizer;
      layout.shardWeights = fsdp;
      layout.contextParallel = cp;
      layout.expertParallel = ep;
      layout.expertTensorParallel = etp;
      layout.contextExchange = search::findContextExchange(cpComm)->kind;
      absl::StatusOr<search::SearchResult> built =
          search::megatronLayout(problem, layout);
      if (!built.ok())
        return emitError(func.getLoc())
               << "ppc-search: megatron layout for @" << func.getSymName()
               << ": " << ppc::messageOf(built.status());
      found = std::move(*built);
      break;
    }
    case Algorithm::Baseline:
      for (auto &[name, strategy] : baselines)
        if (name == algorithm)
          found = evaluate(name, strategy, simOptions);
      break;
    }
  }
  bool interrupted = cancelRequested.load();
  // What follows (the comparison, the report) is not the search's.
  problem.simOptions.stop = nullptr;
  stopSimulationsAfter(0);
  if (found.strategy.size() != graph->ops.size())
    return emitError(func.getLoc())
           << "ppc-search: the search of @" << func.getSymName()
           << " returned no strategy"
           << (found.algorithm.empty() ? "" : ": " + found.algorithm);
  if (found.algorithm.empty())
    found.algorithm = algorithm;

  // grad-sync=reduce-scatter is ZeRO stage 1 everywhere (as the simulator
  // priced it): say so on every op, so that the lowering does the same.
  sim::Strategy applied = found.strategy;
  if (gradSync == sim::GradSync::ReduceScatterAllGather)
    for (OpConfig &config : applied)
      config.sharding = std::max(config.sharding, StateSharding::Optimizer);
  transforms_detail::applyStrategy(func, applied);
  transforms_detail::applyPipeline(func, found.pipeline);

  // Data parallel as MCMC simulated it among its starts, else now: under a
  // time budget by its end, or at most a second past it after another
  // algorithm that used all of its budget (on a small model a comparison
  // takes milliseconds; MCMC, whose first start it is, did not simulate it
  // only when it would not finish).
  search::SearchResult dataParallel;
  if (dataParallelObjective) {
    dataParallel.objective = *dataParallelObjective;
  } else if (!found.pipeline.enabled() &&
             found.strategy == baselines.front().second) {
    dataParallel = found; // the answer is data parallel
  } else {
    sim::SimOptions bounded = simOptions;
    bounded.stop = &cancelRequested;
    double grace =
        algo == Algorithm::MCMC ? 0 : std::min(1.0, parsedBudget.seconds / 20);
    if (parsedBudget.seconds > 0)
      bounded.deadline = secondsFromNow(std::max(secondsLeft(), grace));
    dataParallel = evaluate("data-parallel", baselines.front().second, bounded);
  }
  std::string comparison;
  if (std::isfinite(found.objective) && std::isfinite(dataParallel.objective))
    comparison =
        llvm::formatv(" ({0:f2}x)", dataParallel.objective / found.objective)
            .str();
  // Only MCMC runs chains on several threads.
  std::string threadsText =
      algo == Algorithm::MCMC
          ? llvm::formatv(" on {0} thread{1}", options.threads,
                          options.threads == 1 ? "" : "s")
                .str()
          : "";
  std::string dpText =
      dpEvaluations > 0
          ? llvm::formatv(" (after the dynamic programming's {0} evaluations "
                          "in {1:f2} s)",
                          dpEvaluations, dpSeconds)
                .str()
          : "";
  llvm::errs() << llvm::formatv(
      "ppc-search @{0}: {1}, {2} iterations in {3:f2} s{4}{5}{6}: "
      "{7}, data parallel {8}{9}\n",
      func.getSymName(), found.algorithm, found.iterations, found.seconds,
      threadsText, dpText, interrupted ? " (interrupted)" : "",
      stoppedShort(found)
          ? "no time predicted (not simulated within the budget)"
          : formatMs(found.objective) + " per iteration predicted",
      formatAnswer(dataParallel), comparison);
  if (found.considered.size() > 1)
    llvm::errs() << "ppc-search @" << func.getSymName()
                 << ": considered: " << llvm::join(found.considered, "; ")
                 << "\n";
  for (const std::string &line : found.cutShort)
    llvm::errs() << "ppc-search @" << func.getSymName() << ": cut short by "
                 << "the budget: " << line << "\n";
  if (stoppedShort(found))
    emitWarning(func.getLoc())
        << "ppc-search: the budget ran out before any strategy for @"
        << func.getSymName()
        << " was simulated whole; the strategy written was not judged "
           "(give a larger budget)";
  else if (!std::isfinite(found.objective))
    emitWarning(func.getLoc())
        << "ppc-search: no strategy found for @" << func.getSymName()
        << " fits in memory; the strategy written does not fit";
  // A profile's misses fall back to the roofline, which the search may
  // favour where it is optimistic: say how much of the answer is measured
  // (FlexFlow measures every configuration it considers).
  if (auto *profiled = dynamic_cast<const sim::ProfiledCostModel *>(&costModel);
      profiled && !found.pipeline.enabled()) {
    profiled->hits = 0;
    profiled->misses = 0;
    sim::Simulator(*graph, machine, costModel, simOptions)
        .simulate(found.strategy);
    int64_t misses = profiled->misses.load();
    if (misses > 0)
      llvm::errs() << llvm::formatv(
          "ppc-search @{0}: note: {1} of the {2} kernels of this strategy are "
          "not in the profile (priced by the scaled roofline): measure every "
          "kernel the search may pick with profile-requests=FILE and "
          "ppc-profile PLAN --requests FILE, or run this plan with ppc-run "
          "--profile (which adds to the file), and search again\n",
          func.getSymName(), misses, misses + profiled->hits.load());
  }

  if (!reportDir.empty()) {
    report::ReportInput input{problem,
                              getModelName(getOperation(), func, numFuncs),
                              describeMachine(machine),
                              getBatchSize(func),
                              found,
                              baselines};
    // The scaling curve runs one short search per device count, at most
    // 5 s each: on a large model even 50 proposals take minutes.
    input.scalingSearch = options;
    input.scalingSearch.progress = false;
    if (options.iterations > 0)
      input.scalingSearch.iterations =
          std::max<int64_t>(50, options.iterations / 4);
    input.scalingSearch.seconds =
        options.seconds > 0 ? std::min(5.0, options.seconds / 8) : 5.0;
    std::string dir = numFuncs > 1 ? (reportDir + "/" + func.getSymName()).str()
                                   : reportDir.getValue();
    absl::Status error = report::writeReport(dir, input);
    if (!error.ok())
      return emitError(func.getLoc())
             << "ppc-search: " << ppc::messageOf(error);
  }
  return success();
}

} // namespace

std::vector<std::pair<std::string, std::string>> ppc::searchAlgorithms() {
  std::vector<std::pair<std::string, std::string>> list;
  for (const SearchInfo &info : kSearches)
    list.emplace_back(info.name, info.description);
  for (const search::BaselineInfo &info : search::baselines())
    list.emplace_back(info.name, info.description);
  return list;
}
