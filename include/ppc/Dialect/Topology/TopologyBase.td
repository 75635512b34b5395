//===- TopologyBase.td - ppc machine description dialect ---*- tablegen -*-===//

#ifndef PPC_DIALECT_TOPOLOGY_TOPOLOGYBASE_TD
#define PPC_DIALECT_TOPOLOGY_TOPOLOGYBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Topo_Dialect : Dialect {
  let name = "topo";
  let cppNamespace = "::ppc::topo";
  let summary = "Machine descriptions: devices, links, clusters";
  let description = [{
    Describes the machine a model is parallelized for: devices (kind, peak
    FLOP/s per dtype, memory bandwidth and capacity) and links (kind,
    bandwidth, latency), either in a compact hierarchical form (nodes x
    devices per node, intra- and inter-node links) or as an explicit graph.
  }];
}

#endif // PPC_DIALECT_TOPOLOGY_TOPOLOGYBASE_TD
