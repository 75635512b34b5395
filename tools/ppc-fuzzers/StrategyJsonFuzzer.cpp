//===- StrategyJsonFuzzer.cpp - libFuzzer target for strategy files -------===//
//
// Feeds arbitrary bytes to readStrategyJson for a small fixed model (a
// linear layer, an activation, another linear layer) on dgx-h100x2, as
// `--ppc-import-strategy` reads a file. A strategy that is accepted must
// fit every op (checkConfig), survive a simulation, and read back the same
// after writeStrategyJson: a violation aborts, so libFuzzer reports it.
// See docs/fuzzing.md.
//
//===----------------------------------------------------------------------===//

#include "ppc/Search/StrategyJson.h"
#include "ppc/Simulator/CostModel.h"
#include "ppc/Simulator/Simulator.h"

#include "SimTestGraphs.h"

#include <cstdint>
#include <cstdlib>
#include <string>

using namespace ppc;

namespace {

sim::Graph model() {
  using namespace sim::testing;
  sim::Graph g;
  g.numInputs = 1;
  g.weights = {{"fc1.w", {64, 48}}, {"fc2.w", {48, 16}}};
  g.ops.push_back(linear("fc1", 32, 64, 48, input(), 0));
  g.ops.push_back(elementwise("act", "ppc.relu", 32, 48, {fromOp(0)}, {}));
  g.ops.push_back(linear("fc2", 32, 48, 16, fromOp(1), 1));
  return g;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const sim::Graph graph = model();
  static const Machine machine = *lookupPreset("dgx-h100x2");
  std::string text(reinterpret_cast<const char *>(data), size);
  absl::StatusOr<sim::Strategy> strategy =
      search::readStrategyJson(text, "fuzz.json", graph, machine);
  if (!strategy.ok()) {
    if (strategy.status().message().empty())
      std::abort(); // every rejection says why
    return 0;
  }
  for (size_t op = 0; op < graph.ops.size(); ++op)
    if (!checkConfig(graph.ops[op].space, (*strategy)[op], machine.numDevices())
             .ok())
      std::abort();
  sim::RooflineCostModel cost;
  sim::Simulator simulator(graph, machine, cost);
  sim::SimResult result = simulator.simulate(*strategy);
  if (!(result.iterationTime > 0))
    std::abort();
  std::string written =
      search::writeStrategyJson(graph, machine, *strategy, nullptr, &result);
  absl::StatusOr<sim::Strategy> back =
      search::readStrategyJson(written, "written.json", graph, machine);
  if (!back.ok() || *back != *strategy)
    std::abort();
  return 0;
}
