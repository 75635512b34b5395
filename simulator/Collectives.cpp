//===- Collectives.cpp - what a collective takes and moves ----------------===//
//
// See include/ppc/Simulator/Collectives.h.
//
//===----------------------------------------------------------------------===//

#include "ppc/Simulator/Collectives.h"

#include <algorithm>
#include <limits>
#include <map>

namespace ppc::sim {

namespace {

/// The link from `a` to `b` passed to `use`: a cluster's own link, not a
/// copy (collective costs ask for every ring step), else the effective one.
template <typename Use>
void withLink(const Machine &machine, int64_t a, int64_t b, Use use) {
  if (const LinkSpec *link = machine.clusterLink(a, b))
    use(*link);
  else
    use(machine.effectiveLink(a, b));
}

/// Bottleneck bandwidth and worst latency over the ring devices[0] ->
/// devices[1] -> ... -> devices[0], with the bottleneck's collective curve.
LinkSpec ringLink(const Machine &machine, const std::vector<int64_t> &devices) {
  LinkSpec ring;
  ring.bandwidth = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < devices.size(); ++i)
    withLink(machine, devices[i], devices[(i + 1) % devices.size()],
             [&](const LinkSpec &l) {
               if (l.bandwidth < ring.bandwidth) {
                 ring.bandwidth = l.bandwidth;
                 ring.kind = l.kind;
                 ring.collectiveBySize = l.collectiveBySize;
                 ring.exchangeBusBandwidth = l.exchangeBusBandwidth;
               }
               ring.latency = std::max(ring.latency, l.latency);
             });
  return ring;
}

/// Ring all-reduce: 2(k-1) steps of bytes/k each.
double ringAllReduce(int64_t k, const LinkSpec &link, double bytes) {
  if (k <= 1)
    return 0;
  return 2.0 * (k - 1) * link.latency +
         2.0 * (k - 1) / k * bytes / link.bandwidth;
}

/// Adds the bytes of a ring all-reduce of `bytes` over `devices`: each
/// member sends 2 (k - 1) / k of the buffer to the next one.
void addRingBytes(const Machine &machine, const std::vector<int64_t> &devices,
                  double bytes, std::array<double, 8> &byKind) {
  int64_t k = static_cast<int64_t>(devices.size());
  if (k <= 1)
    return;
  for (int64_t i = 0; i < k; ++i)
    withLink(machine, devices[i], devices[(i + 1) % k], [&](const LinkSpec &l) {
      byKind[static_cast<int>(l.kind)] += 2.0 * (k - 1) / k * bytes;
    });
}

} // namespace

AllReducePlan planAllReduce(const Machine &machine,
                            const std::vector<int64_t> &members, double bytes) {
  AllReducePlan plan;
  int64_t k = static_cast<int64_t>(members.size());
  if (k <= 1 || bytes <= 0)
    return plan;
  // NCCL's rings run through each node's members together, whatever order
  // the group lists them in (a tensor-parallel group strided across nodes
  // crosses between nodes twice, not at every step).
  std::vector<int64_t> devices = members;
  std::stable_sort(devices.begin(), devices.end(), [&](int64_t a, int64_t b) {
    return machine.getNode(a) < machine.getNode(b);
  });
  LinkSpec ring = ringLink(machine, devices);
  addRingBytes(machine, devices, bytes, plan.bytesByLinkKind);
  std::map<int64_t, std::vector<int64_t>> byNode;
  for (int64_t d : devices)
    byNode[machine.getNode(d)].push_back(d);
  int64_t nodes = static_cast<int64_t>(byNode.size());
  // A measured bus bandwidth (nccl-tests', or ppc-calibrate's) is the whole
  // collective's cost, whatever algorithm the library picked. Across nodes
  // the curve is per rail (one NIC's share): a group with r devices on
  // every node, each with a NIC of its own, moves 1/r of the buffer on r
  // rails at once, as NCCL's rings spread over a node's NICs.
  if (!ring.collectiveBySize.empty()) {
    double rails = 1;
    if (nodes > 1 && machine.cluster) {
      size_t fewest = devices.size();
      for (auto &[node, members] : byNode)
        fewest = std::min(fewest, members.size());
      rails = static_cast<double>(std::min<int64_t>(
          static_cast<int64_t>(fewest), machine.cluster->nicsPerNode));
    }
    double perRail = bytes / rails;
    plan.time = 2.0 * (k - 1) / k * ring.collectiveBySize.time(perRail);
    plan.gatherTime = static_cast<double>(k - 1) / k * perRail /
                      ring.exchangeBandwidthAt(perRail);
    return plan;
  }
  plan.time = ringAllReduce(k, ring, bytes);
  plan.gatherTime = plan.time / 2;

  // Hierarchical: needs the same number of devices in each node.
  if (nodes <= 1)
    return plan;
  int64_t local = static_cast<int64_t>(byNode.begin()->second.size());
  for (auto &[node, members] : byNode)
    if (static_cast<int64_t>(members.size()) != local)
      return plan;
  // Inside each node: reduce-scatter then all-gather (one all-reduce's worth).
  double intra = 0;
  if (local > 1)
    intra =
        ringAllReduce(local, ringLink(machine, byNode.begin()->second), bytes);
  // Across nodes: `local` rails each all-reduce a 1/local shard. Devices of
  // a node share its NICs, so a rail gets nics/local of a NIC when fewer.
  std::vector<std::vector<int64_t>> rails(local);
  for (auto &[node, members] : byNode)
    for (int64_t r = 0; r < local; ++r)
      rails[r].push_back(members[r]);
  LinkSpec inter = ringLink(machine, rails.front());
  if (machine.cluster && machine.cluster->nicsPerNode < local)
    inter.bandwidth *= static_cast<double>(machine.cluster->nicsPerNode) /
                       static_cast<double>(local);
  double hierarchical = intra + ringAllReduce(nodes, inter, bytes / local);
  if (hierarchical >= plan.time)
    return plan;
  plan.time = hierarchical;
  plan.gatherTime = plan.time / 2;
  plan.bytesByLinkKind.fill(0);
  for (auto &[node, members] : byNode)
    addRingBytes(machine, members, bytes, plan.bytesByLinkKind);
  for (const std::vector<int64_t> &rail : rails)
    addRingBytes(machine, rail, bytes / local, plan.bytesByLinkKind);
  return plan;
}

double allReduceTime(const Machine &machine,
                     const std::vector<int64_t> &devices, double bytes) {
  return planAllReduce(machine, devices, bytes).time;
}

std::array<double, 8>
allReduceBytesByLinkKind(const Machine &machine,
                         const std::vector<int64_t> &devices, double bytes) {
  return planAllReduce(machine, devices, bytes).bytesByLinkKind;
}

double reduceScatterTime(const Machine &machine,
                         const std::vector<int64_t> &devices, double bytes) {
  return planAllReduce(machine, devices, bytes).gatherTime;
}

} // namespace ppc::sim
