// RUN: ppc-opt %s -split-input-file -verify-diagnostics

// A strategy may use every device of the machine...
module attributes {ppc.machine = #topo.cluster<nodes = 4, devices_per_node = 4,
    device = #topo.device<"P100", peak_flops = {f32 = 10.6e12}, memory_bandwidth = 732.0e9, memory_bytes = 17179869184>,
    intra = #topo.link<nvlink, bandwidth = 20.0e9, latency = 1.0e-6>,
    inter = #topo.link<infiniband, bandwidth = 12.5e9, latency = 1.0e-6>>} {
  func.func @ok(%x: tensor<32x64xf32>) -> tensor<32x64xf32> {
    %y = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [16, 1]>} : tensor<32x64xf32>
    return %y : tensor<32x64xf32>
  }
}

// -----

// ...but not device 16 of 16 (devices 1..16 with start = 1).
module attributes {ppc.machine = #topo.cluster<nodes = 4, devices_per_node = 4,
    device = #topo.device<"P100", peak_flops = {f32 = 10.6e12}, memory_bandwidth = 732.0e9, memory_bytes = 17179869184>,
    intra = #topo.link<nvlink, bandwidth = 20.0e9, latency = 1.0e-6>,
    inter = #topo.link<infiniband, bandwidth = 12.5e9, latency = 1.0e-6>>} {
  func.func @too_far(%x: tensor<32x64xf32>) -> tensor<32x64xf32> {
    // expected-error @+1 {{strategy uses device 16 but the machine has 16 devices}}
    %y = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 1], start = 15>} : tensor<32x64xf32>
    return %y : tensor<32x64xf32>
  }
}

// -----

// The same check against an explicit graph: 2 devices.
#d = #topo.device<"gpu", peak_flops = {f32 = 1.0e12}, memory_bandwidth = 1.0e11, memory_bytes = 1073741824>
#l = #topo.link<pcie, bandwidth = 1.6e10, latency = 1.0e-6>
module attributes {ppc.machine = @pair} {
  topo.machine @pair {
    topo.device @g0 node 0 spec #d
    topo.device @g1 node 0 spec #d
    topo.link @g0 -> @g1 #l
  }
  func.func @graph(%x: tensor<32x64xf32>) -> tensor<32x64xf32> {
    // expected-error @+1 {{strategy uses device 3 but the machine has 2 devices}}
    %y = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [4, 1]>} : tensor<32x64xf32>
    return %y : tensor<32x64xf32>
  }
}

// -----

// expected-error @+1 {{'ppc.machine' refers to @nowhere, which this module does not define}}
module attributes {ppc.machine = @nowhere} {
  // A ppc op loads the ppc dialect, whose attribute verifier checks ppc.machine.
  func.func @g(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = ppc.relu %x : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// expected-error @+1 {{'ppc.machine' refers to @f, which is a 'func.func', not a topo.machine}}
module attributes {ppc.machine = @f} {
  func.func private @f()
  // A ppc op loads the ppc dialect, whose attribute verifier checks ppc.machine.
  func.func @g(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = ppc.relu %x : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// expected-error @+1 {{'ppc.machine' must be a #topo.cluster attribute or a symbol reference to a topo.machine op, got 16 : i64}}
module attributes {ppc.machine = 16} {
  // A ppc op loads the ppc dialect, whose attribute verifier checks ppc.machine.
  func.func @g(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = ppc.relu %x : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

module {
  // expected-error @+1 {{'ppc.machine' belongs on a builtin.module, not on 'func.func'}}
  func.func private @f() attributes {ppc.machine = @f}
  // A ppc op loads the ppc dialect, whose attribute verifier checks ppc.machine.
  func.func @g(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = ppc.relu %x : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}
