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

#include <cstdint>
#include <cstdlib>
#include <string>

using namespace ppc;

namespace {

/// [n, k] x [k, m] -> [n, m] with the iteration dims [n, m, k].
sim::Op linear(std::string name, int64_t n, int64_t k, int64_t m,
               sim::Source in, int32_t weight) {
  sim::Op op;
  op.name = std::move(name);
  op.kind = "ppc.linear";
  op.space.dims = {{n, IterKind::Sample},
                   {m, IterKind::Parameter},
                   {k, IterKind::Reduction}};
  op.space.operands = {
      {{n, k}, {DimAccess::identity(0), DimAccess::identity(2)}},
      {{k, m}, {DimAccess::identity(2), DimAccess::identity(1)}}};
  op.space.results = {
      {{n, m}, {DimAccess::identity(0), DimAccess::identity(1)}}};
  op.cost = {2.0 * n * k * m, 4.0 * n * k * m, 4.0 * (n * k + k * m + n * m),
             8.0 * (n * k + k * m + n * m)};
  op.operands = {in, {sim::Source::Kind::Weight, weight, 0}};
  return op;
}

sim::Graph model() {
  sim::Graph g;
  g.numInputs = 1;
  g.weights = {{"fc1.w", {64, 48}}, {"fc2.w", {48, 16}}};
  g.ops.push_back(
      linear("fc1", 32, 64, 48, {sim::Source::Kind::Input, 0, 0}, 0));
  sim::Op act;
  act.name = "act";
  act.kind = "ppc.relu";
  act.space.dims = {{32, IterKind::Sample}, {48, IterKind::Parameter}};
  act.space.operands = {TensorAccess::identity({32, 48})};
  act.space.results = {TensorAccess::identity({32, 48})};
  act.cost = {32.0 * 48, 64.0 * 48, 8.0 * 32 * 48, 12.0 * 32 * 48};
  act.operands = {{sim::Source::Kind::Op, 0, 0}};
  g.ops.push_back(act);
  g.ops.push_back(linear("fc2", 32, 48, 16, {sim::Source::Kind::Op, 1, 0}, 1));
  return g;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const sim::Graph graph = model();
  static const Machine machine = *lookupPreset("dgx-h100x2");
  std::string text(reinterpret_cast<const char *>(data), size);
  std::string error;
  std::optional<sim::Strategy> strategy =
      search::readStrategyJson(text, "fuzz.json", graph, machine, error);
  if (!strategy) {
    if (error.empty())
      std::abort(); // every rejection says why
    return 0;
  }
  for (size_t op = 0; op < graph.ops.size(); ++op)
    if (!checkConfig(graph.ops[op].space, (*strategy)[op], machine.numDevices())
             .empty())
      std::abort();
  sim::RooflineCostModel cost;
  sim::Simulator simulator(graph, machine, cost);
  sim::SimResult result = simulator.simulate(*strategy);
  if (!(result.iterationTime > 0))
    std::abort();
  std::string written =
      search::writeStrategyJson(graph, machine, *strategy, nullptr, &result);
  std::optional<sim::Strategy> back =
      search::readStrategyJson(written, "written.json", graph, machine, error);
  if (!back || *back != *strategy)
    std::abort();
  return 0;
}
