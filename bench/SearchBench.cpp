//===- SearchBench.cpp - searched strategies vs baselines -----------------===//
//
// ppc-search-bench MODEL.mlir|MODEL.onnx --machines=p100x16,k80x64
//     [--seconds=30] [--iterations=0] [--search-threads=1] [--seed=1]
//
// For each machine, side by side in one run: the baselines (data parallel,
// Megatron with tensor parallelism = devices per node, Krizhevsky's "one
// weird trick"), the dynamic programming search and FlexFlow's MCMC (started
// from the best of data parallel and the expert baselines, plus random
// strategies). Prints, per machine, the simulated iteration time of each,
// the found strategy (best of MCMC and DP), its speedup over data parallel
// and over the best baseline, the search time and the time the MCMC took to
// converge (to reach within 1% of its final best, from its trace).
//
//===----------------------------------------------------------------------===//

#include "ppc/Import/OnnxImporter.h"
#include "ppc/ModelLoader/ModelLoader.h"
#include "ppc/Search/Search.h"
#include "ppc/Simulator/Simulator.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>

using namespace mlir;
namespace cl = llvm::cl;
namespace search = ppc::search;
namespace sim = ppc::sim;

static cl::opt<std::string> modelPath(cl::Positional, cl::Required,
                                      cl::desc("<model.mlir|model.onnx>"));
static cl::list<std::string>
    machines("machines", cl::CommaSeparated,
             cl::desc("Machine presets or JSON files (default "
                      "p100x16,k80x64: FlexFlow's two clusters)"));
static cl::opt<double>
    seconds("seconds", cl::init(30.0),
            cl::desc("MCMC budget in seconds per machine (0: no limit)"));
static cl::opt<int64_t>
    iterations("iterations", cl::init(0),
               cl::desc("MCMC budget in proposals per chain (0: no limit)"));
static cl::opt<int> threads("search-threads", cl::init(1),
                            cl::desc("MCMC chains, one per thread"));
static cl::opt<uint64_t> seed("seed", cl::init(1), cl::desc("Random seed"));
static cl::opt<int>
    randomStarts("random-starts", cl::init(1),
                 cl::desc("Random strategies added to the MCMC starts"));
static cl::opt<bool> runDp("dp", cl::init(true),
                           cl::desc("Run the dynamic programming search"));
static cl::opt<int64_t> dpMaxDevices(
    "dp-max-devices", cl::init(0),
    cl::desc("Run the dynamic programming only on machines with at most "
             "this many devices (0: all)"));
static cl::opt<double>
    dpSeconds("dp-seconds", cl::init(0.0),
              cl::desc("Budget of the dynamic programming (0: --seconds)"));
static cl::opt<std::string>
    optimizer("optimizer", cl::init("sgd"),
              cl::desc("Optimizer simulated: sgd, momentum or adam"));
static cl::opt<bool>
    header("header", cl::init(true),
           cl::desc("Print the table header (off to append rows)"));
static cl::opt<bool>
    describe("describe", cl::init(true),
             cl::desc("Print a line per machine on what the found strategy "
                      "splits"));
static cl::opt<std::string>
    label("label", cl::init(""),
          cl::desc("Model name in the table (default: the file name)"));

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

std::string ms(double objective) {
  if (!std::isfinite(objective))
    return "OOM";
  return llvm::formatv("{0:f2}", objective * 1e3).str();
}

std::string ratio(double num, double den) {
  if (!std::isfinite(num) || !std::isfinite(den) || den <= 0)
    return "-";
  return llvm::formatv("{0:f2}x", num / den).str();
}

/// Seconds until the best of the trace came within 1% of its final value.
double convergedAt(const search::SearchResult &r) {
  if (r.trace.empty() || !std::isfinite(r.objective))
    return r.seconds;
  double target = r.objective * 1.01;
  for (const search::TracePoint &p : r.trace)
    if (p.best <= target)
      return p.seconds;
  return r.seconds;
}

/// A strategy summary: how many ops split which kinds of dims, e.g.
/// "S16: 300, S4 P4: 12" (S sample, A attribute, P parameter, R reduction,
/// with the product of their degrees), most frequent first.
std::string splitSummary(const sim::Graph &graph,
                         const sim::Strategy &strategy) {
  static const char kinds[] = {'S', 'A', 'P', 'R'};
  std::map<std::string, int> counts;
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    int64_t byKind[4] = {1, 1, 1, 1};
    const ppc::OpConfig &c = strategy[i];
    for (size_t d = 0; d < c.degrees.size(); ++d)
      byKind[static_cast<int>(graph.ops[i].space.dims[d].kind)] *= c.degrees[d];
    std::string key;
    for (int k = 0; k < 4; ++k)
      if (byKind[k] > 1)
        key += (key.empty() ? "" : " ") + std::string(1, kinds[k]) +
               std::to_string(byKind[k]);
    if (!c.strides.empty())
      key += " strided";
    counts[key.empty() ? "1 device" : key]++;
  }
  std::vector<std::pair<std::string, int>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](auto &a, auto &b) { return a.second > b.second; });
  std::string out;
  for (size_t i = 0; i < sorted.size() && i < 6; ++i)
    out += (i ? ", " : "") + sorted[i].first + ": " +
           std::to_string(sorted[i].second);
  if (sorted.size() > 6)
    out += ", ...";
  return out;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  ppc::registerOnnxImportCLOptions();
  cl::ParseCommandLineOptions(argc, argv, "ppc search benchmark\n");
  std::vector<std::string> machineNames(machines.begin(), machines.end());
  if (machineNames.empty())
    machineNames = {"p100x16", "k80x64"};
  if (seconds <= 0 && iterations <= 0) {
    llvm::errs() << "ppc-search-bench: set --seconds or --iterations\n";
    return 1;
  }
  sim::SimOptions simOptions;
  if (optimizer == "sgd")
    simOptions.optimizer = sim::Optimizer::SGD;
  else if (optimizer == "momentum")
    simOptions.optimizer = sim::Optimizer::Momentum;
  else if (optimizer == "adam")
    simOptions.optimizer = sim::Optimizer::Adam;
  else {
    llvm::errs() << "ppc-search-bench: unknown optimizer '" << optimizer
                 << "'\n";
    return 1;
  }

  std::string error;
  std::optional<sim::Graph> graph =
      ppc::loadSimGraph(modelPath, ppc::getOnnxImportOptionsFromCL(), error);
  if (!graph) {
    llvm::errs() << "ppc-search-bench: " << error << "\n";
    return 1;
  }
  std::string model = label.empty() ? llvm::sys::path::stem(modelPath).str()
                                    : static_cast<std::string>(label);

  if (header)
    llvm::outs() << "| model | machine | ops | data parallel ms | megatron ms "
                    "| one weird trick ms | DP search ms | MCMC ms | found "
                    "ms | vs data parallel | vs best baseline | search s | "
                    "MCMC converged at s | MCMC iterations |\n"
                    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
                    "---:|---:|---:|\n";
  llvm::outs().flush();

  sim::RooflineCostModel cost;
  bool worse = false;
  for (const std::string &name : machineNames) {
    absl::StatusOr<ppc::Machine> machine = ppc::loadMachine(name);
    if (!machine.ok()) {
      llvm::errs() << "ppc-search-bench: " << ppc::messageOf(machine.status())
                   << "\n";
      return 1;
    }
    int64_t numDevices = machine->numDevices();
    int64_t perNode = numDevices / std::max<int64_t>(1, machine->numNodes());
    search::Problem problem{*graph, *machine, cost, simOptions};
    search::ConfigSpace space(*graph, *machine);

    sim::Simulator simulator(*graph, *machine, cost, simOptions);
    auto evaluate = [&](const sim::Strategy &s) {
      return search::objective(problem, simulator.simulate(s));
    };
    sim::Strategy dataParallel = sim::dataParallel(*graph, numDevices);
    sim::Strategy megatron = search::megatron(*graph, *machine, perNode);
    sim::Strategy trick = search::oneWeirdTrick(*graph, *machine);
    double dpTime = evaluate(dataParallel);
    double megatronTime = evaluate(megatron);
    double trickTime = evaluate(trick);
    double bestBaseline = std::min({dpTime, megatronTime, trickTime});

    // MCMC starts: the best of data parallel and the expert strategies
    // first, then random strategies.
    std::vector<sim::Strategy> starts;
    if (bestBaseline == dpTime)
      starts.push_back(dataParallel);
    else if (bestBaseline == megatronTime)
      starts.push_back(megatron);
    else
      starts.push_back(trick);
    std::mt19937_64 rng(seed);
    for (int r = 0; r < randomStarts; ++r) {
      sim::Strategy random;
      for (const sim::Op &op : graph->ops)
        random.push_back(sim::randomConfig(op, numDevices, rng));
      starts.push_back(std::move(random));
    }

    search::SearchOptions options;
    options.seconds = seconds;
    options.iterations = iterations;
    options.seed = seed;
    options.threads = threads;
    options.traceEvery = 10;

    search::SearchResult dp;
    bool withDp = runDp && (dpMaxDevices <= 0 || numDevices <= dpMaxDevices);
    if (withDp) {
      search::SearchOptions dpOptions = options;
      if (dpSeconds > 0)
        dpOptions.seconds = dpSeconds;
      dp = search::dynamicProgramming(problem, space, dpOptions);
    }
    search::SearchResult mc = search::mcmc(problem, space, starts, options);
    double found = std::min(dp.objective, mc.objective);
    const sim::Strategy &foundStrategy =
        dp.objective < mc.objective ? dp.strategy : mc.strategy;
    bool notWorse = found <= bestBaseline * (1 + 1e-9);
    worse = worse || !notWorse;

    llvm::outs() << llvm::formatv(
        "| {0} | {1} | {2} | {3} | {4} | {5} | {6} | {7} | {8}{9} | {10} | "
        "{11} | {12:f1} | {13:f1} | {14} |\n",
        model, name, graph->ops.size(), ms(dpTime), ms(megatronTime),
        ms(trickTime), withDp ? ms(dp.objective) : "-", ms(mc.objective),
        ms(found), notWorse ? "" : " (WORSE than a baseline)",
        ratio(dpTime, found), ratio(bestBaseline, found),
        dp.seconds + mc.seconds, convergedAt(mc), mc.iterations);
    if (describe && !foundStrategy.empty())
      llvm::errs() << "  " << model << " on " << name << ": found ("
                   << (dp.objective < mc.objective ? "DP" : "MCMC")
                   << ") splits " << splitSummary(*graph, foundStrategy)
                   << "; DP search " << llvm::formatv("{0:f1}", dp.seconds)
                   << " s\n";
    llvm::outs().flush();
  }
  return worse ? 2 : 0;
}
