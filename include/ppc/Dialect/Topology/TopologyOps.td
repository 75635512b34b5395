//===- TopologyOps.td - topo dialect ops -------------------*- tablegen -*-===//

#ifndef PPC_DIALECT_TOPOLOGY_TOPOLOGYOPS_TD
#define PPC_DIALECT_TOPOLOGY_TOPOLOGYOPS_TD

include "ppc/Dialect/Topology/TopologyAttrs.td"
include "mlir/IR/SymbolInterfaces.td"

def Topo_MachineOp : Topo_Op<"machine", [
    Symbol, SymbolTable, IsolatedFromAbove, NoTerminator, SingleBlock,
    NoRegionArguments]> {
  let summary = "A machine as an explicit graph of devices, switches, links";
  let description = [{
    For machines the compact `#topo.cluster` cannot describe: mixed device
    kinds, several NICs, rails, switches shared unevenly. Its body holds
    `topo.device` ops (the devices, numbered in order), `topo.switch` ops
    (non-device vertices: NICs, NVSwitches, network switches) and `topo.link`
    ops between them. Every device must reach every other one. The module
    attribute `ppc.machine = @name` selects it.

    ```mlir
    topo.machine @two_gpus {
      topo.device @gpu0 node 0 spec #a100
      topo.device @gpu1 node 0 spec #a100
      topo.switch @pcie "pcie-switch" node 0
      topo.link @gpu0 -> @gpu1 #topo.link<nvlink, bandwidth = 3.0e+11, latency = 1.0e-06>
      topo.link @gpu0 -> @pcie #topo.link<pcie, bandwidth = 3.2e+10, latency = 1.0e-06>
      topo.link @gpu1 -> @pcie #topo.link<pcie, bandwidth = 3.2e+10, latency = 1.0e-06>
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name);
  let regions = (region SizedRegion<1>:$graph);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $graph";
  let hasRegionVerifier = 1;
  let builders = [OpBuilder<(ins "::llvm::StringRef":$name)>];
  let skipDefaultBuilders = 1;
  let extraClassDeclaration = [{
    /// The devices, in device-number order.
    auto getDevices() { return getGraph().getOps<DeviceOp>(); }
    int64_t getNumDevices();
  }];
}

def Topo_DeviceOp : Topo_Op<"device", [Symbol, HasParent<"MachineOp">]> {
  let summary = "A device of a topo.machine";
  let description = [{
    A device on host `node` with the capabilities of `spec`. Devices are
    numbered in the order they appear in the machine; `#ppc.strategy` device
    numbers refer to that order.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$node,
                       Topo_DeviceSpecAttr:$spec);
  let assemblyFormat = "$sym_name `node` $node `spec` $spec attr-dict";
  let hasVerifier = 1;
}

def Topo_SwitchOp : Topo_Op<"switch", [Symbol, HasParent<"MachineOp">]> {
  let summary = "A non-device vertex of a topo.machine (NIC, switch)";
  let description = [{
    A vertex that routes traffic but runs nothing: a NIC, an NVSwitch, a PCIe
    switch, a network switch. `kind` is free-form; `node` is the host it sits
    in, absent for the network between hosts.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrAttr:$kind,
                       OptionalAttr<I64Attr>:$node);
  let assemblyFormat = "$sym_name $kind (`node` $node^)? attr-dict";
  let hasVerifier = 1;
}

def Topo_LinkOp : Topo_Op<"link", [HasParent<"MachineOp">]> {
  let summary = "A full-duplex link between two vertices of a topo.machine";
  let description = [{
    Connects two devices or switches of the enclosing machine; traffic flows
    both ways, each direction with the bandwidth of `spec`.
  }];
  let arguments = (ins FlatSymbolRefAttr:$src, FlatSymbolRefAttr:$dst,
                       Topo_LinkSpecAttr:$spec);
  let assemblyFormat = "$src `->` $dst $spec attr-dict";
}

#endif // PPC_DIALECT_TOPOLOGY_TOPOLOGYOPS_TD
