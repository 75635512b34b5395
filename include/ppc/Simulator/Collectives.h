//===- Collectives.h - what a collective takes and moves --------*- C++ -*-===//
//
// MLIR-free. The one model of a collective over a group of devices: how
// long NCCL's all-reduce of a buffer takes (a ring over the group's
// bottleneck link, or hierarchical across nodes when that is faster, or a
// measured bus-bandwidth curve) and the bytes its members send over each
// kind of link. The simulator times gradient syncs, partial sums and
// statistics with it; the lowering counts a plan's collectives with it
// (lib/Conversion/PlanTraffic), so that the two agree.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SIMULATOR_COLLECTIVES_H
#define PPC_SIMULATOR_COLLECTIVES_H

#include "ppc/Simulator/Machine.h"

#include <array>
#include <cstdint>
#include <vector>

namespace ppc::sim {

/// An all-reduce as NCCL would run it: its time, and the bytes all
/// participants send over each kind of link (indexed by LinkKind).
struct AllReducePlan {
  double time = 0;
  /// A reduce-scatter or all-gather of the same buffer: half the
  /// all-reduce, or slower where the group's bottleneck link caps such
  /// collectives (LinkSpec::exchangeBusBandwidth).
  double gatherTime = 0;
  std::array<double, 8> bytesByLinkKind{};
};

/// The all-reduce of `bytes` over `devices` on `machine`.
AllReducePlan planAllReduce(const Machine &machine,
                            const std::vector<int64_t> &devices, double bytes);

/// The alpha-beta time of an all-reduce of `bytes` over `devices` on
/// `machine`, as NCCL runs it: a ring over the group's bottleneck link, or,
/// when the group spans several nodes, hierarchical (reduce-scatter inside
/// nodes, all-reduce across nodes on the shards, all-gather inside nodes),
/// whichever is faster.
double allReduceTime(const Machine &machine,
                     const std::vector<int64_t> &devices, double bytes);
/// The bytes all members of that all-reduce send, by link kind (indexed by
/// LinkKind): what the simulator counts for a gradient sync or a partial
/// sum, and what a plan's all-reduce is counted as (a reduce-scatter or an
/// all-gather of the same buffer moves half of it).
std::array<double, 8>
allReduceBytesByLinkKind(const Machine &machine,
                         const std::vector<int64_t> &devices, double bytes);
/// Reduce-scatter (or all-gather) of `bytes` in total: half an all-reduce,
/// at most the link's exchange bus bandwidth (AllReducePlan::gatherTime).
double reduceScatterTime(const Machine &machine,
                         const std::vector<int64_t> &devices, double bytes);

} // namespace ppc::sim

#endif // PPC_SIMULATOR_COLLECTIVES_H
