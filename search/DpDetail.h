//===- DpDetail.h - the DP's additive optimum, for tests --------*- C++ -*-===//
//
// Private to search/ and its tests: the dynamic programming's own answer
// before dynamicProgramming() refines it under the simulator, and the steps
// after it (DpRefinement.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SEARCH_DPDETAIL_H
#define PPC_SEARCH_DPDETAIL_H

#include "ppc/Search/Search.h"

#include <functional>
#include <vector>

namespace ppc::search::detail {

/// The strategy minimizing the additive model (sum of Simulator::nodeCost
/// over ops plus Simulator::edgeCost over op-to-op edges) by node and edge
/// elimination, enumeration of the remaining core, and sequence splits.
/// `exact` (optional) is set to false when a segment was too large to
/// enumerate and coordinate descent decided it; `reused` (optional) to the
/// tables and eliminations shared between repeated ops instead of made
/// again.
sim::Strategy additiveOptimum(const Problem &problem, const ConfigSpace &space,
                              bool *exact = nullptr, int64_t *reused = nullptr);

/// The steps of memory saved for time the DP's space lacks (ZeRO stages 1,
/// 2, 2 with recomputation of single-reader ops, 3 with it), one at a time,
/// applied to `result`'s strategy while it does not fit, then to data
/// parallel the same way.
void fitToMemory(const Problem &problem, sim::Simulator &simulator,
                 SearchResult &result);

/// Replaces `result` with data parallel or a whole-network 2-D layout
/// (sampleByParameter within a node, where the space has it) if one
/// simulates faster: single-op moves do not get from one such layout to
/// another.
void startFromFasterLayout(const Problem &problem, const ConfigSpace &space,
                           sim::Simulator &simulator, SearchResult &result);

/// A sweep of memory moves (each op's ZeRO stage and recomputation), then
/// sweeps of single-op moves judged by the simulators in `workers` (all
/// simulating `result`'s strategy on entry and when done; the first is the
/// main one),
/// each kept when the objective drops, until none helps, the budget of
/// `options` (seconds by `elapsed`) is spent, or 20 sweeps. After the first
/// sweep only the neighbours of ops that changed are tried again. Where
/// the space is small enough, a sweep of pair moves (both ends of an edge
/// at once) follows one that found nothing.
void refineUnderSimulator(const Problem &problem, const ConfigSpace &space,
                          const std::vector<sim::Simulator *> &workers,
                          const SearchOptions &options,
                          const std::function<double()> &elapsed,
                          SearchResult &result);

} // namespace ppc::search::detail

#endif // PPC_SEARCH_DPDETAIL_H
