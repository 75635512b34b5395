// RUN: ppc-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{device name must not be empty}}
#d = #topo.device<"", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1>

// -----

// expected-error @+1 {{unknown element type 'f4' in peak_flops (expected one of f64, f32, tf32, bf16, f16, f8, i8)}}
#d = #topo.device<"gpu", peak_flops = {f32 = 1.0, f4 = 2.0}, memory_bandwidth = 1.0, memory_bytes = 1>

// -----

// expected-error @+1 {{peak_flops.bf16 must be > 0, got -1}}
#d = #topo.device<"gpu", peak_flops = {f32 = 1.0, bf16 = -1.0}, memory_bandwidth = 1.0, memory_bytes = 1>

// -----

// expected-error @+1 {{peak_flops must give an f32 rate}}
#d = #topo.device<"gpu", peak_flops = {bf16 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1>

// -----

// expected-error @+1 {{memory_bandwidth must be > 0, got 0}}
#d = #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 0.0, memory_bytes = 1>

// -----

// expected-error @+1 {{memory_bytes must be > 0, got -5}}
#d = #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = -5>

// -----

// expected-error @+1 {{launch_overhead must be >= 0, got -1}}
#d = #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1, launch_overhead = -1.0>

// -----

// expected-error @+1 {{half_efficiency_flops must be >= 0, got -2}}
#d = #topo.device<"cpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1, half_efficiency_flops = -2.0>

// -----

// expected-error @+1 {{compute_units must be >= 0, got -4}}
#d = #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1, compute_units = -4>

// -----

// expected-error @+1 {{matmul_efficiency must be in [0, 1], got 1.5}}
#d = #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1, matmul_efficiency = 1.5>

// -----

// expected-error @+1 {{bandwidth_efficiency must be in [0, 1], got -2}}
#d = #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1, bandwidth_efficiency = -2.0>

// -----

// expected-error @+1 {{attention_forward_efficiency must be in [0, 1], got 1.2}}
#d = #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1, attention_forward_efficiency = 1.2>

// -----

// expected-error @+1 {{attention_backward_efficiency must be in [0, 1], got -1}}
#d = #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1, attention_backward_efficiency = -1.0>

// -----

// expected-error @+1 {{attention_half_efficiency_flops must be >= 0, got -5}}
#d = #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1, attention_half_efficiency_flops = -5.0>

// -----

// expected-error @+1 {{expected 'memory_bytes'}}
#d = #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory = 1>

// -----

// expected-error @+1 {{unknown link kind 'smoke' (expected one of shared_memory, pcie, nvlink, infinity_fabric, upi, infiniband, ethernet, other)}}
#l = #topo.link<smoke, bandwidth = 1.0, latency = 0.0>

// -----

// expected-error @+1 {{link bandwidth must be > 0, got 0}}
#l = #topo.link<nvlink, bandwidth = 0.0, latency = 0.0>

// -----

// expected-error @+1 {{link latency must be >= 0, got -1}}
#l = #topo.link<nvlink, bandwidth = 1.0, latency = -1.0>

// -----

// expected-error @+1 {{bandwidth_by_size: point 1: message sizes must increase}}
#l = #topo.link<nvlink, bandwidth = 1.0, latency = 0.0, bandwidth_by_size = [[8, 1.0], [8, 2.0]]>

// -----

// expected-error @+1 {{collective_bandwidth_by_size: point 0: bandwidth must be > 0}}
#l = #topo.link<nvlink, bandwidth = 1.0, latency = 0.0, collective_bandwidth_by_size = [[8, 0.0]]>

// -----

// expected-error @+1 {{expected '['}}
#l = #topo.link<nvlink, bandwidth = 1.0, latency = 0.0, bandwidth_by_size = [8, 1.0]>

// -----

// expected-error @+1 {{expected 'exchange_bus_bandwidth', 'bandwidth_by_size', 'collective_bandwidth_by_size', 'send_bandwidth_by_size' after the link's latency, got 'by_size'}}
#l = #topo.link<nvlink, bandwidth = 1.0, latency = 0.0, by_size = [[8, 1.0]]>

// -----

// expected-error @+1 {{link exchange_bus_bandwidth must be >= 0, got -1}}
#l = #topo.link<nvlink, bandwidth = 1.0, latency = 0.0, exchange_bus_bandwidth = -1.0>

// -----

// expected-error @+1 {{expected a number}}
#l = #topo.link<nvlink, bandwidth = 1.0, latency = 0.0, exchange_bus_bandwidth = [[8, 1.0]]>

// -----

// The exchange bus bandwidth comes before the curves.
// expected-error @+1 {{expected 'send_bandwidth_by_size' after the link's collective_bandwidth_by_size, got 'exchange_bus_bandwidth'}}
#l = #topo.link<nvlink, bandwidth = 1.0, latency = 0.0, collective_bandwidth_by_size = [[8, 1.0]], exchange_bus_bandwidth = 1.0>

// -----

// The curves come in one order, each once.
// expected-error @+1 {{expected 'send_bandwidth_by_size' after the link's collective_bandwidth_by_size, got 'bandwidth_by_size'}}
#l = #topo.link<nvlink, bandwidth = 1.0, latency = 0.0, collective_bandwidth_by_size = [[8, 1.0]], bandwidth_by_size = [[8, 1.0]]>

// -----

// expected-error @+1 {{send_bandwidth_by_size: point 0: bandwidth must be > 0}}
#l = #topo.link<shared_memory, bandwidth = 1.0, latency = 0.0, send_bandwidth_by_size = [[8, -1.0]]>

// -----

#d = #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1>
#l = #topo.link<nvlink, bandwidth = 1.0, latency = 0.0>
// expected-error @+1 {{a cluster needs nodes >= 1, got 0}}
#c = #topo.cluster<nodes = 0, devices_per_node = 8, device = #d, intra = #l, inter = #l>

// -----

#d = #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1>
#l = #topo.link<nvlink, bandwidth = 1.0, latency = 0.0>
// expected-error @+1 {{a cluster needs devices_per_node >= 1, got -2}}
#c = #topo.cluster<nodes = 1, devices_per_node = -2, device = #d, intra = #l, inter = #l>

// -----

#d = #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1>
#l = #topo.link<nvlink, bandwidth = 1.0, latency = 0.0>
// expected-error @+1 {{nics_per_node must be between 1 and devices_per_node (8), got 9}}
#c = #topo.cluster<nodes = 2, devices_per_node = 8, nics_per_node = 9, device = #d, intra = #l, inter = #l>

// -----

// More devices than ppc supports (kMaxDevices = 65536); the count is
// checked before anything is built.
#d = #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1>
#l = #topo.link<nvlink, bandwidth = 1.0, latency = 0.0>
// expected-error @+1 {{a cluster of 12500 nodes x 8 devices per node is more than the 65536 devices ppc supports}}
#c = #topo.cluster<nodes = 12500, devices_per_node = 8, device = #d, intra = #l, inter = #l>

// -----

// nodes x devices_per_node overflows int64.
#d = #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1>
#l = #topo.link<nvlink, bandwidth = 1.0, latency = 0.0>
// expected-error @+1 {{a cluster of 4294967296 nodes x 4294967296 devices per node is more than the 65536 devices ppc supports}}
#c = #topo.cluster<nodes = 4294967296, devices_per_node = 4294967296, device = #d, intra = #l, inter = #l>

// -----

#l = #topo.link<nvlink, bandwidth = 1.0, latency = 0.0>
// expected-error @+1 {{invalid kind of attribute specified}}
#c = #topo.cluster<nodes = 2, devices_per_node = 8, device = #l, intra = #l, inter = #l>

// -----

#d = #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1>
// expected-error @+1 {{'topo.machine' op has no devices}}
topo.machine @empty {
}

// -----

#d = #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1>
topo.machine @m {
  // expected-error @+1 {{'topo.device' op node must be >= 0, got -1}}
  topo.device @a node -1 spec #d
}

// -----

topo.machine @m {
  topo.device @a node 0 spec #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1>
  // expected-error @+1 {{'topo.switch' op kind must not be empty}}
  topo.switch @s ""
}

// -----

topo.machine @m {
  topo.device @a node 0 spec #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1>
  // expected-error @+1 {{'topo.switch' op node must be >= 0 (leave it out for a switch between nodes), got -1}}
  topo.switch @s "nic" node -1
}

// -----

#d = #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1>
#l = #topo.link<nvlink, bandwidth = 1.0, latency = 0.0>
topo.machine @m {
  topo.device @a node 0 spec #d
  topo.device @b node 0 spec #d
  // expected-error @+1 {{'topo.link' op destination @c is not a device or switch of machine @m}}
  topo.link @a -> @c #l
}

// -----

#d = #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1>
#l = #topo.link<nvlink, bandwidth = 1.0, latency = 0.0>
topo.machine @m {
  topo.device @a node 0 spec #d
  // expected-error @+1 {{'topo.link' op source @z is not a device or switch of machine @m}}
  topo.link @z -> @a #l
}

// -----

#d = #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1>
#l = #topo.link<nvlink, bandwidth = 1.0, latency = 0.0>
topo.machine @m {
  topo.device @a node 0 spec #d
  // expected-error @+1 {{'topo.link' op connects @a to itself}}
  topo.link @a -> @a #l
}

// -----

#d = #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1>
#l = #topo.link<nvlink, bandwidth = 1.0, latency = 0.0>
topo.machine @m {
  topo.device @a node 0 spec #d
  topo.device @b node 0 spec #d
  // expected-error @+1 {{'topo.device' op cannot reach device @a: the link graph of machine @m is disconnected}}
  topo.device @c node 1 spec #d
  topo.switch @s "nvswitch" node 0
  topo.link @a -> @s #l
  topo.link @b -> @s #l
}

// -----

#d = #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1>
topo.machine @m {
  topo.device @a node 0 spec #d
  // expected-error @+2 {{redefinition of symbol named 'a'}}
  // expected-note @-2 {{see existing symbol definition here}}
  topo.device @a node 1 spec #d
}

// -----

#d = #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1>
topo.machine @m {
  topo.device @a node 0 spec #d
  // expected-error @+1 {{'func.func' op cannot be in a topo.machine, which holds only topo.device, topo.switch and topo.link ops}}
  func.func private @f()
}

// -----

#d = #topo.device<"gpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1>
func.func @f() {
  // expected-error @+1 {{'topo.device' op expects parent op 'topo.machine'}}
  topo.device @a node 0 spec #d
  return
}

// -----

// expected-error @+1 {{cores_per_node must be >= 0 (0: every device computes at once), got -2}}
#c = #topo.cluster<nodes = 1, devices_per_node = 2, cores_per_node = -2, device = #topo.device<"cpu", peak_flops = {f32 = 1.0}, memory_bandwidth = 1.0, memory_bytes = 1>, intra = #topo.link<shared_memory, bandwidth = 1.0, latency = 0.0>, inter = #topo.link<shared_memory, bandwidth = 1.0, latency = 0.0>>
