// RUN: ppc-opt %s -split-input-file | FileCheck %s
// Round trip: printing and parsing again gives the same text.
// RUN: ppc-opt %s -split-input-file | ppc-opt -split-input-file | FileCheck %s
// RUN: ppc-opt %s -split-input-file -mlir-print-op-generic | ppc-opt -split-input-file | FileCheck %s

// The compact form: attributes only, printed through aliases.
// CHECK-DAG: #[[H100:.*]] = #topo.device<"H100-SXM5-80GB", peak_flops = {bf16 = 9.895e+14, f32 = 6.7e+13, i8 = 1.979e+15}, memory_bandwidth = 3.35e+12, memory_bytes = 85899345920, launch_overhead = 5.0e-06, compute_units = 132, matmul_efficiency = 0.8, bandwidth_efficiency = 0.9, attention_forward_efficiency = 0.5238, attention_backward_efficiency = 0.5046, attention_half_efficiency_flops = 5.6e+10>
// CHECK-DAG: #[[NV:.*]] = #topo.link<nvlink, bandwidth = 4.5e+11, latency = 1.0e-06>
// CHECK-DAG: #[[IB:.*]] = #topo.link<infiniband, bandwidth = 5.0e+10, latency = 1.0e-06>
// CHECK-DAG: #[[CL:.*]] = #topo.cluster<nodes = 2, devices_per_node = 8, nics_per_node = 8, device = #[[H100]], intra = #[[NV]], inter = #[[IB]]>
// CHECK: module attributes {ppc.machine = #[[CL]]}
module attributes {ppc.machine = #topo.cluster<nodes = 2, devices_per_node = 8,
    nics_per_node = 8,
    device = #topo.device<"H100-SXM5-80GB",
        peak_flops = {f32 = 67.0e12, bf16 = 989.5e12, i8 = 1979.0e12},
        memory_bandwidth = 3.35e12, memory_bytes = 85899345920,
        launch_overhead = 5.0e-6, compute_units = 132,
        attention_backward_efficiency = 0.5046, bandwidth_efficiency = 0.9,
        attention_half_efficiency_flops = 56.0e9,
        matmul_efficiency = 0.8, attention_forward_efficiency = 0.5238>,
    intra = #topo.link<nvlink, bandwidth = 450.0e9, latency = 1.0e-6>,
    inter = #topo.link<infiniband, bandwidth = 50.0e9, latency = 1.0e-6>>} {
}

// -----

// Defaults: one NIC per node and no launch overhead are not printed;
// integers are accepted where numbers are expected.
// CHECK-DAG: #[[CPU:.*]] = #topo.device<"cpu", peak_flops = {f32 = 1.0e+11}, memory_bandwidth = 2.0e+10, memory_bytes = 1024>
// CHECK-DAG: #[[SHM:.*]] = #topo.link<shared_memory, bandwidth = 1.0e+10, latency = 0.0>
// CHECK: #topo.cluster<nodes = 1, devices_per_node = 2, device = #[[CPU]], intra = #[[SHM]], inter = #[[SHM]]>
module attributes {ppc.machine = #topo.cluster<nodes = 1, devices_per_node = 2,
    device = #topo.device<"cpu", peak_flops = {f32 = 100000000000},
                          memory_bandwidth = 20000000000, memory_bytes = 1024>,
    intra = #topo.link<shared_memory, bandwidth = 1.0e10, latency = 0>,
    inter = #topo.link<shared_memory, bandwidth = 1.0e10, latency = 0>>} {
}

// -----

// Measured bandwidths by message size: point to point, of collectives, and
// the sender's part of a message; the exchanges' ceiling.
// CHECK-DAG: #[[MEASURED:.*]] = #topo.link<shared_memory, bandwidth = 5.0e+09, latency = 1.5e-05, bandwidth_by_size = {{\[}}[4096.0, 1.1e+09], [4194304.0, 9.0e+09]], collective_bandwidth_by_size = {{\[}}[1024.0, 2.0e+08]], send_bandwidth_by_size = {{\[}}[4096.0, 2.5e+09]]>
// CHECK-DAG: #[[COLL:.*]] = #topo.link<shared_memory, bandwidth = 5.0e+09, latency = 0.0, exchange_bus_bandwidth = 3.0e+09, collective_bandwidth_by_size = {{\[}}[1.0e+06, 4.0e+09]]>
// CHECK: #topo.cluster<nodes = 1, devices_per_node = 2, cores_per_node = 1, device = {{.*}}, intra = #[[MEASURED]], inter = #[[COLL]]>
module attributes {ppc.machine = #topo.cluster<nodes = 1, devices_per_node = 2,
    cores_per_node = 1,
    device = #topo.device<"cpu", peak_flops = {f32 = 1.0e11},
                          memory_bandwidth = 2.0e10, memory_bytes = 1024>,
    intra = #topo.link<shared_memory, bandwidth = 5.0e9, latency = 1.5e-5,
        bandwidth_by_size = [[4096, 1.1e9], [4194304, 9.0e9]],
        collective_bandwidth_by_size = [[1024, 2.0e8]],
        send_bandwidth_by_size = [[4096, 2.5e9]]>,
    inter = #topo.link<shared_memory, bandwidth = 5.0e9, latency = 0,
        exchange_bus_bandwidth = 3.0e9,
        collective_bandwidth_by_size = [[1.0e6, 4.0e9]]>>} {
}

// -----

// The explicit graph: devices, switches and links in a topo.machine that the
// module attribute refers to.
// CHECK-DAG: #[[A100:.*]] = #topo.device<"A100", peak_flops = {f32 = 1.95e+13}, memory_bandwidth = 2.039e+12, memory_bytes = 85899345920>
// CHECK-DAG: #[[V100:.*]] = #topo.device<"V100", peak_flops = {f16 = 1.25e+14, f32 = 1.57e+13}, memory_bandwidth = 9.0e+11, memory_bytes = 34359738368>
// CHECK-DAG: #[[NVL:.*]] = #topo.link<nvlink, bandwidth = 3.0e+11, latency = 1.0e-06>
// CHECK-DAG: #[[ETH:.*]] = #topo.link<ethernet, bandwidth = 1.25e+10, latency = 5.0e-06>
// CHECK: module attributes {ppc.machine = @lab}
// CHECK-NEXT: topo.machine @lab {
// CHECK-NEXT:   topo.device @gpu0 node 0 spec #[[A100]]
// CHECK-NEXT:   topo.device @gpu1 node 0 spec #[[A100]]
// CHECK-NEXT:   topo.device @gpu2 node 1 spec #[[V100]]
// CHECK-NEXT:   topo.switch @nic0 "nic" node 0
// CHECK-NEXT:   topo.switch @tor "ethernet-switch"{{$}}
// CHECK-NEXT:   topo.link @gpu0 -> @gpu1 #[[NVL]]
// CHECK-NEXT:   topo.link @gpu0 -> @nic0 #[[ETH]]
// CHECK-NEXT:   topo.link @gpu1 -> @nic0 #[[ETH]]
// CHECK-NEXT:   topo.link @nic0 -> @tor #[[ETH]]
// CHECK-NEXT:   topo.link @gpu2 -> @tor #[[ETH]]
// CHECK-NEXT: }
#a100 = #topo.device<"A100", peak_flops = {f32 = 19.5e12},
                     memory_bandwidth = 2.039e12, memory_bytes = 85899345920>
#v100 = #topo.device<"V100", peak_flops = {f32 = 15.7e12, f16 = 125.0e12},
                     memory_bandwidth = 900.0e9, memory_bytes = 34359738368>
#eth = #topo.link<ethernet, bandwidth = 12.5e9, latency = 5.0e-6>
module attributes {ppc.machine = @lab} {
  topo.machine @lab {
    topo.device @gpu0 node 0 spec #a100
    topo.device @gpu1 node 0 spec #a100
    topo.device @gpu2 node 1 spec #v100
    topo.switch @nic0 "nic" node 0
    topo.switch @tor "ethernet-switch"
    topo.link @gpu0 -> @gpu1 #topo.link<nvlink, bandwidth = 3.0e11, latency = 1.0e-6>
    topo.link @gpu0 -> @nic0 #eth
    topo.link @gpu1 -> @nic0 #eth
    topo.link @nic0 -> @tor #eth
    topo.link @gpu2 -> @tor #eth
  }
}

// -----

// A machine on its own, with one device and no links.
// CHECK-LABEL: topo.machine @single
// CHECK-NEXT: topo.device @cpu0 node 0 spec #{{.*}}
topo.machine @single {
  topo.device @cpu0 node 0 spec #topo.device<"cpu", peak_flops = {f32 = 1.0e11}, memory_bandwidth = 2.0e10, memory_bytes = 1024>
}
