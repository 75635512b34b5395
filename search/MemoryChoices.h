//===- MemoryChoices.h - which memory-for-time choices an op has -*- C++
//-*-===//
//
// Per op, the choices that trade time for memory without moving it: the
// ZeRO stages of the weights it holds and the recomputation of its results.
// MCMC proposes them and the DP's refinement tries them. Private to the
// search library.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SEARCH_MEMORYCHOICES_H
#define PPC_SEARCH_MEMORYCHOICES_H

#include "ppc/Simulator/Graph.h"

#include <vector>

namespace ppc::search::detail {

struct MemoryChoices {
  /// Per op: whether it holds a weight (its state sharding is a choice).
  std::vector<char> holdsWeight;
  /// Per op: the highest ZeRO stage for the weights it holds (ZeRO-3 is not
  /// lowered for a weight other ops read too).
  std::vector<int> maxStage;
  /// Per op: whether something reads its results and they may be
  /// recomputed (sim::recomputeProblem).
  std::vector<char> recomputable;
};

MemoryChoices memoryChoices(const sim::Graph &graph);

} // namespace ppc::search::detail

#endif // PPC_SEARCH_MEMORYCHOICES_H
