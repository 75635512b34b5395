//===- SimBench.cpp - full vs delta simulation speed ----------------------===//
//
// ppc-sim-bench MODEL.mlir|MODEL.onnx --machines=dgx-a100x2,dgx-h100x8
//
// For each machine: starts from data parallel, then measures, on one core,
// full simulations per second (simulate() of the whole strategy) and delta
// simulations per second (update() of one random op to a random valid
// configuration), and prints their ratios side by side. Delta is measured in
// two ways:
//   - propose/revert: change one op, then change it back, as an MCMC step
//     that is rejected does (most are); the strategy stays near the start;
//   - random walk: keep every change, so the strategy drifts to a random
//     one whose resharding edges are all-to-all (the worst case).
// It also checks that each delta result equals a full simulation of the
// same strategy.
//
//===----------------------------------------------------------------------===//

#include "ppc/Import/OnnxImporter.h"
#include "ppc/ModelLoader/ModelLoader.h"
#include "ppc/Simulator/Simulator.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"

#include <chrono>
#include <random>

using namespace mlir;
namespace cl = llvm::cl;

static cl::opt<std::string> modelPath(cl::Positional, cl::Required,
                                      cl::desc("<model.mlir|model.onnx>"));
static cl::list<std::string>
    machines("machines", cl::CommaSeparated,
             cl::desc("Machine presets or JSON files (default "
                      "dgx-a100x2,dgx-h100x8: 16 and 64 devices)"));
static cl::opt<double> seconds("seconds", cl::init(1.0),
                               cl::desc("Time spent measuring each rate"));
static cl::opt<int64_t>
    callsPerRate("calls", cl::init(0),
                 cl::desc("Calls measured for each rate instead of --seconds "
                          "(a fixed count, for instruction counts)"));
static cl::opt<unsigned> seed("seed", cl::init(1), cl::desc("Random seed"));

namespace {

using Clock = std::chrono::steady_clock;

double elapsed(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// Calls `step` until `seconds` have passed (or `calls` times); returns
/// calls per second.
template <typename Step> double rate(Step step) {
  int64_t calls = 0;
  Clock::time_point start = Clock::now();
  double spent = 0;
  do {
    for (int i = 0; i < 8; ++i)
      step(calls++);
    spent = elapsed(start);
  } while (callsPerRate > 0 ? calls < callsPerRate : spent < seconds);
  return static_cast<double>(calls) / spent;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  ppc::registerOnnxImportCLOptions();
  cl::ParseCommandLineOptions(argc, argv, "ppc simulator benchmark\n");
  std::vector<std::string> machineNames(machines.begin(), machines.end());
  if (machineNames.empty())
    machineNames = {"dgx-a100x2", "dgx-h100x8"};

  std::string error;
  std::optional<ppc::sim::Graph> graph =
      ppc::loadSimGraph(modelPath, ppc::getOnnxImportOptionsFromCL(), error);
  if (!graph) {
    llvm::errs() << "ppc-sim-bench: " << error << "\n";
    return 1;
  }

  llvm::outs() << llvm::formatv(
      "{0,-24} {1,5} {2,7} {3,11} | {4,14} {5,6} | {6,14} {7,6} | {8}\n",
      "model", "ops", "devices", "full sims/s", "propose/revert", "ratio",
      "random walk", "ratio", "delta==full");
  ppc::sim::RooflineCostModel cost;
  for (const std::string &name : machineNames) {
    absl::StatusOr<ppc::Machine> machine = ppc::loadMachine(name);
    if (!machine.ok()) {
      llvm::errs() << "ppc-sim-bench: " << ppc::messageOf(machine.status())
                   << "\n";
      return 1;
    }
    int64_t numDevices = machine->numDevices();
    ppc::sim::Strategy start = ppc::sim::dataParallel(*graph, numDevices);

    ppc::sim::Simulator full(*graph, *machine, cost);
    double fullRate = rate([&](int64_t) { full.simulate(start); });

    // Random single-op changes, drawn before timing.
    std::mt19937_64 rng(seed);
    std::vector<std::pair<size_t, ppc::OpConfig>> changes;
    std::uniform_int_distribution<size_t> pickOp(0, graph->ops.size() - 1);
    for (int i = 0; i < 4096; ++i) {
      size_t op = pickOp(rng);
      changes.emplace_back(
          op, ppc::sim::randomConfig(graph->ops[op], numDevices, rng));
    }
    auto sameAsFull = [&](ppc::sim::Simulator &delta,
                          const ppc::sim::SimResult &last) {
      ppc::sim::SimResult check = full.simulate(delta.currentStrategy());
      return check.iterationTime == last.iterationTime &&
             check.peakMemory() == last.peakMemory();
    };

    // Propose/revert: two updates per step, counted as two simulations.
    ppc::sim::Simulator proposer(*graph, *machine, cost);
    proposer.simulate(start);
    ppc::sim::SimResult last;
    double proposeRate = 2 * rate([&](int64_t i) {
                           auto &[op, config] = changes[i % changes.size()];
                           proposer.update(op, config);
                           last = proposer.update(op, start[op]);
                         });
    bool same = sameAsFull(proposer, last);

    ppc::sim::Simulator walker(*graph, *machine, cost);
    walker.simulate(start);
    double walkRate = rate([&](int64_t i) {
      auto &[op, config] = changes[i % changes.size()];
      last = walker.update(op, config);
    });
    same = same && sameAsFull(walker, last);

    llvm::outs() << llvm::formatv(
        "{0,-24} {1,5} {2,7} {3,11:f1} | {4,14:f1} {5,5:f1}x | {6,14:f1} "
        "{7,5:f1}x | {8}\n",
        llvm::sys::path::filename(modelPath), graph->ops.size(), numDevices,
        fullRate, proposeRate, proposeRate / fullRate, walkRate,
        walkRate / fullRate, same ? "yes" : "NO");
    if (!same)
      return 1;
  }
  return 0;
}
