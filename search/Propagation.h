//===- Propagation.h - a layout carried along the graph's edges -*- C++ -*-===//
//
// Sharding propagation, as GSPMD and Shardy do it, for MCMC's run moves: the
// configuration of an op that holds or reads the tensor it shares with a
// neighbour exactly as the neighbour does, so that the edge between them
// needs no resharding. A move changes one op, then carries its layout to
// its neighbours, theirs, and so on (search/Mcmc.cpp), changing a run of
// ops together where single-op moves would each pay a resharding first.
// Private to the search library.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SEARCH_PROPAGATION_H
#define PPC_SEARCH_PROPAGATION_H

#include "ppc/Simulator/Graph.h"
#include "ppc/Support/MachineView.h"

#include <cstddef>
#include <cstdint>
#include <optional>

namespace ppc::search::detail {

/// A configuration of op `op` under which each of its instances holds (as
/// the producer) or reads (as a consumer) the tensor of an edge between it
/// and `from` on the device where `from`, configured `fromConfig`, reads or
/// holds that piece: the tensor's dims split alike, on the same devices,
/// and `op` replicated where `from`'s instances share one piece (a split
/// that does not index the tensor, or `from`'s replicas). The first edge
/// between the two ops that allows one is used. `op` keeps `keep`'s
/// recomputation, state sharding and stage. None when no configuration
/// does: a split dim `op` reads whole or cannot split evenly, a
/// reduce-scattered partial sum, more than one group of copies, or a
/// configuration checkConfig refuses on `numDevices` devices.
std::optional<OpConfig> alignedConfig(const sim::Graph &graph, size_t op,
                                      size_t from, const OpConfig &fromConfig,
                                      const OpConfig &keep, int64_t numDevices);

} // namespace ppc::search::detail

#endif // PPC_SEARCH_PROPAGATION_H
