//===- DpDetail.h - the DP's additive optimum, for tests --------*- C++ -*-===//
//
// Private to search/ and its tests: the dynamic programming's own answer
// before dynamicProgramming() refines it under the simulator.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SEARCH_DPDETAIL_H
#define PPC_SEARCH_DPDETAIL_H

#include "ppc/Search/Search.h"

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

} // namespace ppc::search::detail

#endif // PPC_SEARCH_DPDETAIL_H
