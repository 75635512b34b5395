//===- TopologyBase.td - ppc machine description dialect ---*- tablegen -*-===//

#ifndef PPC_DIALECT_TOPOLOGY_TOPOLOGYBASE_TD
#define PPC_DIALECT_TOPOLOGY_TOPOLOGYBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Topology_Dialect : Dialect {
  let name = "topo";
  let cppNamespace = "::ppc::topo";
  let summary = "Machine descriptions: devices, links, clusters";
  let description = [{
    Describes the machine a model is parallelized for: devices (kind, peak
    FLOP/s per dtype, memory bandwidth and capacity) and links (kind,
    bandwidth, latency), either in a compact hierarchical form (nodes x
    devices per node, intra- and inter-node links) or as an explicit graph.

    The module attribute `ppc.machine` names the target machine: either a
    `#topo.cluster` attribute (compact form) or a symbol reference to a
    `topo.machine` op of the module (explicit graph):

    ```mlir
    module attributes {ppc.machine = #topo.cluster<nodes = 2,
        devices_per_node = 8, nics_per_node = 8, device = #h100,
        intra = #nvlink, inter = #infiniband>} { ... }

    module attributes {ppc.machine = @lab} {
      topo.machine @lab {
        topo.device @gpu0 node 0 spec #a100
        topo.device @gpu1 node 0 spec #a100
        topo.link @gpu0 -> @gpu1 #nvlink
      }
    }
    ```

    The attributes and ops mirror the MLIR-free `ppc::Machine` of the
    simulator (include/ppc/Simulator/Machine.h), and convert to and from it;
    units are SI base units throughout: FLOP/s, bytes/s, bytes, seconds.
  }];
  let useDefaultAttributePrinterParser = 1;
}

class Topo_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Topology_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

class Topo_Op<string mnemonic, list<Trait> traits = []>
    : Op<Topology_Dialect, mnemonic, traits>;

#endif // PPC_DIALECT_TOPOLOGY_TOPOLOGYBASE_TD
