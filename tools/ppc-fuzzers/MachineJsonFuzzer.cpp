//===- MachineJsonFuzzer.cpp - libFuzzer target for machine files ---------===//
//
// Feeds arbitrary bytes to parseMachineJson, as `--ppc-attach-machine`
// reads a file. An accepted machine must be valid, route between its
// devices, simulate a small data-parallel layer, and read back the same
// after writeMachineJson (both forms): a violation aborts, so libFuzzer
// reports it. See docs/fuzzing.md.
//
//===----------------------------------------------------------------------===//

#include "ppc/Simulator/CostModel.h"
#include "ppc/Simulator/Machine.h"
#include "ppc/Simulator/Simulator.h"

#include "SimTestGraphs.h"

#include <cstdint>
#include <cstdlib>
#include <string>

using namespace ppc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  absl::StatusOr<Machine> machine = parseMachineJson(text, "fuzz.json");
  if (!machine.ok()) {
    if (machine.status().message().empty())
      std::abort(); // every rejection says why
    return 0;
  }
  if (!machine->validate().ok())
    std::abort();
  int64_t last = machine->numDevices() - 1;
  if (!machine->route(0, last) || !machine->route(last, 0))
    std::abort();

  // One elementwise op, data parallel over the devices that divide 64.
  sim::Graph graph;
  graph.numInputs = 1;
  graph.ops.push_back(sim::testing::elementwise("act", "ppc.relu", 64, 16,
                                                {sim::testing::input()}, {}));
  sim::RooflineCostModel cost;
  sim::Simulator simulator(graph, *machine, cost);
  sim::SimResult result =
      simulator.simulate(sim::dataParallel(graph, machine->numDevices()));
  if (!(result.iterationTime >= 0))
    std::abort();

  for (bool explicitGraph : {false, true}) {
    std::string written = writeMachineJson(*machine, explicitGraph);
    absl::StatusOr<Machine> back = parseMachineJson(written, "written.json");
    if (!back.ok() || back->numDevices() != machine->numDevices() ||
        back->links.size() != machine->links.size())
      std::abort();
  }
  return 0;
}
