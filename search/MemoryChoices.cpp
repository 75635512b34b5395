//===- MemoryChoices.cpp - which memory-for-time choices an op has --------===//
//
// Part of the search library; see MemoryChoices.h.
//
//===----------------------------------------------------------------------===//

#include "MemoryChoices.h"

#include "ppc/Simulator/Simulator.h"

namespace ppc::search::detail {

MemoryChoices memoryChoices(const sim::Graph &graph) {
  const size_t n = graph.ops.size();
  MemoryChoices choices;
  choices.holdsWeight.assign(n, 0);
  std::vector<sim::WeightUse> holders = sim::weightHolders(graph);
  for (const sim::WeightUse &use : holders)
    if (use.op >= 0)
      choices.holdsWeight[use.op] = 1;
  choices.maxStage.assign(n, kMaxStateSharding);
  for (size_t c = 0; c < n; ++c)
    for (const sim::Source &src : graph.ops[c].operands)
      if (src.kind == sim::Source::Kind::Weight &&
          holders[src.index].op != static_cast<int32_t>(c))
        choices.maxStage[holders[src.index].op] =
            static_cast<int>(StateSharding::Gradients);
  choices.recomputable.assign(n, 0);
  for (size_t c = 0; c < n; ++c)
    for (const sim::Source &src : graph.ops[c].operands)
      if (src.kind == sim::Source::Kind::Op &&
          sim::recomputeProblem(graph, src.index).ok())
        choices.recomputable[src.index] = 1;
  return choices;
}

} // namespace ppc::search::detail
