//===- OpFootprint.h - one op's compute and memory per device ---*- C++ -*-===//
//
// Private to search/: what one op under one configuration puts on each
// device by itself — the busy time of its compute stream (forward, backward
// and update kernels) and the memory it needs apart from received
// activations. Measured by simulating the op alone (its producers replaced by
// free constants), so the numbers are exactly the simulator's own: the
// exhaustive search bounds with them, the DP rejects configurations that
// cannot fit by themselves.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SEARCH_OPFOOTPRINT_H
#define PPC_SEARCH_OPFOOTPRINT_H

#include "ppc/Search/Search.h"

#include <memory>
#include <vector>

namespace ppc::search::detail {

struct OpFootprint {
  /// Seconds of compute-stream work per device.
  std::vector<double> compute;
  /// Bytes per device that add up over ops (weights, gradients, optimizer
  /// state, kept activations) and the transient workspace (a maximum).
  std::vector<int64_t> memory, workspace;
  double totalCompute = 0;
};

/// Simulates single ops; one throwaway simulator per op.
class FootprintProfiler {
public:
  explicit FootprintProfiler(const Problem &problem) : problem(problem) {
    graphs.resize(problem.graph.ops.size());
    sims.resize(problem.graph.ops.size());
  }

  OpFootprint profile(size_t op, const OpConfig &config) {
    if (!sims[op]) {
      auto g = std::make_unique<sim::Graph>();
      g->weights = problem.graph.weights;
      g->numInputs = problem.graph.numInputs;
      sim::Op alone = problem.graph.ops[op];
      // Producers become constants: no transfers and no memory charged to
      // this op for them (in the full graph, received slices are edge memory).
      for (sim::Source &s : alone.operands)
        if (s.kind == sim::Source::Kind::Op)
          s = {sim::Source::Kind::Constant, 0, 0};
      g->ops.push_back(std::move(alone));
      graphs[op] = std::move(g);
      sims[op] = std::make_unique<sim::Simulator>(
          *graphs[op], problem.machine, problem.costModel, problem.simOptions);
    }
    sim::SimResult r = sims[op]->simulate({config});
    OpFootprint f;
    for (const sim::DeviceStats &d : r.devices) {
      f.compute.push_back(d.computeTime);
      f.totalCompute += d.computeTime;
      f.workspace.push_back(d.memory.workspace);
      f.memory.push_back(d.memory.total() - d.memory.workspace);
    }
    return f;
  }

  /// The bytes device `d` may use.
  int64_t limit(size_t d) const {
    return problem.simOptions.capacityOf(
        problem.machine.getSpec(static_cast<int64_t>(d)));
  }

private:
  const Problem &problem;
  std::vector<std::unique_ptr<sim::Graph>> graphs;
  std::vector<std::unique_ptr<sim::Simulator>> sims;
};

} // namespace ppc::search::detail

#endif // PPC_SEARCH_OPFOOTPRINT_H
