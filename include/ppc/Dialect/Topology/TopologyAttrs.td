//===- TopologyAttrs.td - topo dialect attributes ----------*- tablegen -*-===//

#ifndef PPC_DIALECT_TOPOLOGY_TOPOLOGYATTRS_TD
#define PPC_DIALECT_TOPOLOGY_TOPOLOGYATTRS_TD

include "ppc/Dialect/Topology/TopologyBase.td"

def Topo_DeviceAttr : Topo_Attr<"Device", "device"> {
  let summary = "One kind of device: peak FLOP/s per dtype, memory, launch cost";
  let description = [{
    A device model (a GPU, a CPU process): its name, its peak FLOP/s per
    element type (`f64`, `f32`, `tf32`, `bf16`, `f16`, `f8`, `i8`; `f32` is
    required, a type left out runs at the rate of the next wider one), memory
    bandwidth in bytes/s, memory capacity in bytes, the fixed cost of
    launching one kernel in seconds (optional, 0 by default), the FLOPs at
    which a kernel reaches half the peak rate (optional, 0: the cost model's
    default), and for a GPU's matrix multiplications its compute units
    (`compute_units`, the SMs that output tiles are spread over in waves),
    the fraction of peak large ones reach (`matmul_efficiency`), the
    fraction of the memory bandwidth streaming kernels reach
    (`bandwidth_efficiency`) and the fraction of peak a fused attention
    kernel reaches forward and backward (`attention_forward_efficiency`,
    `attention_backward_efficiency`) with the FLOPs of one bf16 call filling
    the device at which it reaches half of them
    (`attention_half_efficiency_flops`), all optional
    (0: not measured).

    ```mlir
    #h100 = #topo.device<"H100-SXM5-80GB",
        peak_flops = {f32 = 6.7e13, bf16 = 9.895e14, f16 = 9.895e14},
        memory_bandwidth = 3.35e12, memory_bytes = 85899345920,
        launch_overhead = 5.0e-06>
    ```
  }];
  let parameters = (ins
      StringRefParameter<"model name">:$name,
      "::mlir::DictionaryAttr":$peakFlops,
      APFloatParameter<"bytes/s">:$memoryBandwidth,
      "int64_t":$memoryBytes,
      APFloatParameter<"seconds">:$launchOverhead,
      APFloatParameter<"flops">:$halfEfficiencyFlops,
      "int64_t":$computeUnits,
      APFloatParameter<"fraction">:$matmulEfficiency,
      APFloatParameter<"fraction">:$bandwidthEfficiency,
      APFloatParameter<"fraction">:$attentionForwardEfficiency,
      APFloatParameter<"fraction">:$attentionBackwardEfficiency,
      APFloatParameter<"flops">:$attentionHalfEfficiencyFlops);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Topo_LinkAttr : Topo_Attr<"Link", "link"> {
  let summary = "A full-duplex link: kind, bandwidth per direction, latency";
  let description = [{
    Kind is one of `shared_memory`, `pcie`, `nvlink`, `infinity_fabric`,
    `upi`, `infiniband`, `ethernet`, `other`; bandwidth is bytes/s in each
    direction; latency is in seconds. Optionally, `exchange_bus_bandwidth`
    (bytes/s): the highest bus bandwidth an all-gather, reduce-scatter or
    all-to-all reaches over the link, which then moves at the lower of it
    and the collective curve's rate (0 or absent: no ceiling). Optionally,
    measured bandwidths by
    message size, as `[bytes, bytes/s]` pairs with increasing sizes:
    `bandwidth_by_size` for point-to-point messages and
    `collective_bandwidth_by_size` for the all-reduce bus bandwidth of a
    group whose bottleneck is this link, and `send_bandwidth_by_size` for
    the sender's part of a message between processes that move their own
    (docs/machine-format.md); in that order.

    ```mlir
    #nvlink = #topo.link<nvlink, bandwidth = 4.5e11, latency = 1.0e-06,
        exchange_bus_bandwidth = 3.7e11>
    #shm = #topo.link<shared_memory, bandwidth = 5.0e9, latency = 1.5e-05,
        bandwidth_by_size = [[4096, 1.1e9], [4194304, 9.0e9]]>
    ```
  }];
  let parameters = (ins "::ppc::LinkKind":$kind,
                        APFloatParameter<"bytes/s">:$bandwidth,
                        APFloatParameter<"seconds">:$latency,
                        APFloatParameter<"bytes/s">:$exchangeBusBandwidth,
                        "::mlir::DenseF64ArrayAttr":$bandwidthBySize,
                        "::mlir::DenseF64ArrayAttr":$collectiveBandwidthBySize,
                        "::mlir::DenseF64ArrayAttr":$sendBandwidthBySize);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Topo_ClusterAttr : Topo_Attr<"Cluster", "cluster"> {
  let summary = "The compact form: nodes x identical devices, two links";
  let description = [{
    `nodes` nodes of `devices_per_node` devices each; `intra` is what two
    devices of one node see, `inter` what two devices of different nodes see
    (point to point, per direction). `nics_per_node` (default 1) network
    adapters per node are shared by the node's devices in contiguous blocks.
    `cores_per_node` (default 0: all) is how many of a node's devices can
    compute at once: CPU processes sharing fewer cores take turns.
    Device `d` is on node `d / devices_per_node`.

    ```mlir
    #topo.cluster<nodes = 2, devices_per_node = 8, nics_per_node = 8,
                  device = #h100, intra = #nvlink, inter = #ndr>
    ```
  }];
  let parameters = (ins "int64_t":$nodes, "int64_t":$devicesPerNode,
                        "int64_t":$nicsPerNode,
                        "int64_t":$coresPerNode,
                        "::ppc::topo::DeviceAttr":$device,
                        "::ppc::topo::LinkAttr":$intra,
                        "::ppc::topo::LinkAttr":$inter);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    int64_t getNumDevices() const { return getNodes() * getDevicesPerNode(); }
  }];
}

// Op arguments holding these attributes print and parse them in full
// (`#topo.link<...>`, or its alias), not in the stripped `<...>` form.
class Topo_FullAttr<Topo_Attr attrDef, string desc>
    : Attr<CPred<"::llvm::isa<" # attrDef.cppType # ">($_self)">, desc> {
  let storageType = attrDef.cppType;
  let returnType = attrDef.cppType;
  let convertFromStorage = "$_self";
}
def Topo_DeviceSpecAttr : Topo_FullAttr<Topo_DeviceAttr, "#topo.device">;
def Topo_LinkSpecAttr : Topo_FullAttr<Topo_LinkAttr, "#topo.link">;

#endif // PPC_DIALECT_TOPOLOGY_TOPOLOGYATTRS_TD
