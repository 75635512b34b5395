// RUN: ppc-opt %s --ppc-attach-machine=machine=dgx-h100x2 | FileCheck %s --check-prefix=H100
// RUN: ppc-opt %s --ppc-attach-machine=machine=p100x16 | FileCheck %s --check-prefix=P100
// RUN: ppc-opt %s --ppc-attach-machine=machine=k80x64 | FileCheck %s --check-prefix=K80
// RUN: ppc-opt %s --ppc-attach-machine=machine=cpux2 | FileCheck %s --check-prefix=CPU
// RUN: ppc-opt %s --ppc-attach-machine="machine=dgx-a100 explicit-graph=true" | FileCheck %s --check-prefix=GRAPH
// RUN: ppc-opt %s --ppc-attach-machine=machine=%examples/machines/two-node-custom.json | FileCheck %s --check-prefix=JSON
// RUN: ppc-opt %s --ppc-attach-machine=machine=%examples/machines/dgx-h100x2.json | FileCheck %s --check-prefix=H100
// Attaching again replaces the machine, its graph included.
// RUN: ppc-opt %s --ppc-attach-machine=machine=%examples/machines/two-node-custom.json --ppc-attach-machine=machine=cpu | FileCheck %s --check-prefix=REPLACE
// RUN: ppc-opt %s --ppc-attach-machine=machine=list | FileCheck %s --check-prefix=LIST
// RUN: not ppc-opt %s --ppc-attach-machine=machine=tpu-v4 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not ppc-opt %s --ppc-attach-machine 2>&1 | FileCheck %s --check-prefix=EMPTY
// RUN: not ppc-opt %s --ppc-attach-machine=machine=%S/missing.json 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not ppc-opt %s --ppc-attach-machine=machine=%S/Inputs/bad-machine.json 2>&1 | FileCheck %s --check-prefix=BAD

// H100: #[[DEV:.*]] = #topo.device<"H100-SXM5-80GB", peak_flops = {bf16 = 9.895e+14, f16 = 9.895e+14, f32 = 6.7e+13, f64 = 3.4e+13, f8 = 1.979e+15, i8 = 1.979e+15, tf32 = 4.945e+14}, memory_bandwidth = 3.35e+12, memory_bytes = 85899345920, launch_overhead = 3.0e-06, compute_units = 132, matmul_efficiency = 0.76, bandwidth_efficiency = 0.9, attention_forward_efficiency = 0.74, attention_backward_efficiency = 0.405, attention_half_efficiency_flops = 5.6e+10>
// NCCL's measured all-reduce bus bandwidths (per rail across nodes):
// H100: #[[IB:.*]] = #topo.link<infiniband, bandwidth = 5.0e+10, latency = 1.0e-06, collective_bandwidth_by_size = {{\[}}[1.0, {{.*}}], {{.*}}, [1073741824.0, 4.13662{{[0-9.e+]*}}]]>
// H100: #[[NV:.*]] = #topo.link<nvlink, bandwidth = 4.5e+11, latency = 1.0e-06, exchange_bus_bandwidth = 3.7e+11, collective_bandwidth_by_size = {{\[}}[8.0, {{.*}}], {{.*}}, [8589934592.0, 4.8016e+11]]>
// H100: #topo.cluster<nodes = 2, devices_per_node = 8, nics_per_node = 8, device = #[[DEV]], intra = #[[NV]], inter = #[[IB]]>
// H100: module attributes {ppc.machine = #cluster}

// P100: #infiniband = #topo.link<infiniband, bandwidth = 1.25e+10, latency = 1.0e-06>
// P100: #nvlink = #topo.link<nvlink, bandwidth = 2.0e+10, latency = 1.0e-06>
// P100: #[[DEV:.*]] = #topo.device<"P100-SXM2-16GB", peak_flops = {f16 = 2.12e+13, f32 = 1.06e+13, f64 = 5.3e+12}, memory_bandwidth = 7.32e+11, memory_bytes = 17179869184, launch_overhead = 3.0e-06>
// P100: #topo.cluster<nodes = 4, devices_per_node = 4, device = #[[DEV]], intra = #nvlink, inter = #infiniband>

// K80-DAG: #infiniband = #topo.link<infiniband, bandwidth = 7.0e+09, latency = 1.3e-06>
// K80-DAG: #pcie = #topo.link<pcie, bandwidth = 1.575e+10, latency = 2.0e-06>
// K80-DAG: #topo.device<"K80-GK210", peak_flops = {f32 = 4.37e+12, f64 = 1.46e+12}, memory_bandwidth = 2.4e+11, memory_bytes = 12884901888
// K80: #topo.cluster<nodes = 16, devices_per_node = 4, device = #{{.*}}, intra = #pcie, inter = #infiniband>

// CPU: #topo.device<"cpu-epyc-2core", peak_flops = {f32 = 2.2e+11, f64 = 1.1e+11}, memory_bandwidth = 3.1e+10, memory_bytes = 12000000000, launch_overhead = 5.0e-06, half_efficiency_flops = 5.0e+04>
// CPU: #topo.cluster<nodes = 1, devices_per_node = 2, device = #{{.*}}, intra = #shared_memory, inter = #shared_memory>

// GRAPH: module attributes {ppc.machine = @"dgx-a100"}
// GRAPH-NEXT: topo.machine @"dgx-a100" {
// GRAPH-NEXT: topo.device @n0.d0 node 0 spec #a100_sxm4_80gb
// GRAPH-COUNT-7: topo.device
// GRAPH-NEXT: topo.switch @n0.switch "nvswitch" node 0
// GRAPH-NEXT: topo.link @n0.d0 -> @n0.switch #nvlink
// GRAPH-COUNT-7: topo.link @n0.d{{[1-7]}} -> @n0.switch #nvlink
// GRAPH-NEXT: }

// JSON: module attributes {ppc.machine = @"two-node-custom"}
// JSON: topo.machine @"two-node-custom" {
// JSON: topo.device @a100.0 node 0 spec #a100_sxm4_80gb
// JSON: topo.device @v100.0 node 1 spec #v100_sxm2_32gb
// JSON: topo.switch @tor "ib-switch"{{$}}
// JSON: topo.link @a100.0 -> @a100.1 #nvlink

// REPLACE: module attributes {ppc.machine = #cluster}
// REPLACE-NOT: topo.machine

// LIST: machine presets
// LIST: p100x16
// LIST: dgx-h100xN
// LIST: cpuxN
// Listing is all ppc-opt does then: no module is printed.
// LIST-NOT: module

// UNKNOWN: error: ppc-attach-machine: unknown machine 'tpu-v4': not a preset (p100x16, k80x64, p3.16xlarge, p3.16xlargexN, dgx-a100, dgx-a100xN, dgx-h100, dgx-h100xN, cpu, cpuxN; at most 65536 devices) nor a JSON file
// EMPTY: error: ppc-attach-machine needs machine=<preset or path to a .json file>; presets: p100x16,
// MISSING: error: ppc-attach-machine: {{.*}}missing.json: cannot open the file
// BAD: error: ppc-attach-machine: {{.*}}bad-machine.json: devices[1].memory_bytes: unknown key

module {
}
