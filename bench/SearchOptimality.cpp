//===- SearchOptimality.cpp - DP and MCMC against the exhaustive optimum --===//
//
// ppc-search-optimality: for a 6-layer MLP (hand-built) and the example CNN
// (examples/cnn.onnx, batch 16) on one H100 node cut to 4 and 8 GPUs, the
// configuration space size, the exhaustive optimum under the simulator and
// its search time, and how far the DP and MCMC land from it. The spaces are
// kept small (maxDegreeVectors, contiguous views) so that exhaustive search
// finishes in seconds.
//
//   ppc-search-optimality [--mcmc-iterations N] [--examples DIR]
//
//===----------------------------------------------------------------------===//

#include "ppc/Import/OnnxImporter.h"
#include "ppc/ModelLoader/ModelLoader.h"
#include "ppc/Search/Search.h"

#include "SimTestGraphs.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>

using namespace ppc;
using namespace ppc::sim;
using namespace ppc::search;

namespace {

using ppc::sim::testing::mlp6;

std::optional<Graph> importExample(const std::string &path, int64_t batch) {
  OnnxImportOptions options;
  options.batchSize = batch;
  std::string error;
  std::optional<Graph> graph = loadSimGraph(path, options, error);
  if (!graph)
    std::cerr << error << "\n";
  return graph;
}

Machine h100(int64_t devices) {
  ClusterSpec c = *lookupPreset("dgx-h100")->cluster;
  c.devicesPerNode = devices;
  c.nicsPerNode = std::min(c.nicsPerNode, devices);
  return Machine::fromCluster(c, "h100x" + std::to_string(devices));
}

double gap(double value, double optimum) { return 100 * (value / optimum - 1); }

} // namespace

int main(int argc, char **argv) {
  int64_t mcmcIterations = 4000;
  std::string examples = std::string(PPC_SOURCE_DIR) + "/examples";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--mcmc-iterations") && i + 1 < argc)
      mcmcIterations = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--examples") && i + 1 < argc)
      examples = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--mcmc-iterations N] [--examples DIR]\n",
                   argv[0]);
      return 2;
    }
  }

  struct Case {
    const char *model;
    int64_t devices, maxDegreeVectors;
  };
  const Case cases[] = {
      {"mlp6", 4, 4}, {"mlp6", 8, 4}, {"cnn.onnx", 4, 3}, {"cnn.onnx", 8, 3}};
  std::printf(
      "| model | devices | ops | strategies | optimum (ms) | "
      "exhaustive (s) | DP raw gap | DP (ms) | DP gap | DP (s) | MCMC (ms) | "
      "MCMC gap | MCMC (s) |\n");
  std::printf(
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Case &c : cases) {
    std::optional<Graph> graph =
        std::string(c.model) == "mlp6"
            ? std::optional<Graph>(mlp6())
            : importExample(examples + "/" + c.model, 16);
    if (!graph) {
      std::fprintf(stderr, "cannot import %s\n", c.model);
      return 1;
    }
    Machine machine = h100(c.devices);
    RooflineCostModel cost;
    Problem problem{*graph, machine, cost, {}};
    SpaceOptions spaceOptions;
    spaceOptions.maxDegreeVectors = c.maxDegreeVectors;
    spaceOptions.stridedViews = false;
    ConfigSpace space(*graph, machine, spaceOptions);

    SearchOptions options;
    options.iterations = mcmcIterations;
    SearchResult best = exhaustive(problem, space, options, 1e9);
    SearchResult dp = dynamicProgramming(problem, space, options);
    SearchResult mc =
        mcmc(problem, space, {dataParallel(*graph, c.devices)}, options);
    std::printf("| %s | %lld | %zu | 10^%.1f | %.4f | %.2f | %+.2f%% | %.4f | "
                "%+.2f%% | "
                "%.3f | %.4f | %+.2f%% | %.2f |\n",
                c.model, static_cast<long long>(c.devices), graph->ops.size(),
                space.log10Size(), best.objective * 1e3, best.seconds,
                gap(dp.trace.front().best, best.objective), dp.objective * 1e3,
                gap(dp.objective, best.objective), dp.seconds,
                mc.objective * 1e3, gap(mc.objective, best.objective),
                mc.seconds);
    std::fflush(stdout);
  }
  return 0;
}
