// RUN: ppc-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// Strategies that fit each op's iteration space, in the SOAP vocabulary:
// data parallel (sample), spatial (attribute, with halos), tensor parallel
// (parameter) and reduction splits (partial sums), with machine views.

// CHECK-LABEL: func.func @mlp
func.func @mlp(%x: tensor<64x784xf32>, %w1: tensor<784x256xf32>,
               %w2: tensor<256x10xf32>, %y: tensor<64xi64>) -> tensor<f32> {
  // Megatron: column-parallel then row-parallel (K split: partial sums).
  // Iteration dims of linear: [batch, N, K].
  // CHECK: ppc.linear {{.*}}ppc.strategy = #ppc.strategy<degrees = [1, 4, 1]>
  %0 = ppc.linear %x, %w1 {ppc.strategy = #ppc.strategy<degrees = [1, 4, 1]>} : (tensor<64x784xf32>, tensor<784x256xf32>) -> tensor<64x256xf32>
  // CHECK: ppc.relu {{.*}}ppc.strategy = #ppc.strategy<degrees = [1, 4]>
  %1 = ppc.relu %0 {ppc.strategy = #ppc.strategy<degrees = [1, 4]>} : tensor<64x256xf32>
  // CHECK: ppc.linear {{.*}}ppc.strategy = #ppc.strategy<degrees = [1, 1, 4]>
  %2 = ppc.linear %1, %w2 {ppc.strategy = #ppc.strategy<degrees = [1, 1, 4]>} : (tensor<64x256xf32>, tensor<256x10xf32>) -> tensor<64x10xf32>
  // The class dim cannot be split; the batch can (partial sums of the loss).
  // CHECK: ppc.softmax_cross_entropy {{.*}}ppc.strategy = #ppc.strategy<degrees = [4, 1]>
  %3 = ppc.softmax_cross_entropy %2, %y {ppc.strategy = #ppc.strategy<degrees = [4, 1]>} : (tensor<64x10xf32>, tensor<64xi64>) -> tensor<f32>
  return %3 : tensor<f32>
}

// -----

// CHECK-LABEL: func.func @cnn
func.func @cnn(%x: tensor<8x3x32x32xf32>, %w: tensor<16x3x3x3xf32>) -> tensor<8x16x16x16xf32> {
  // 2-way data parallel x 2-way on height (halo exchange), on devices 4..7.
  // Dims of conv2d: [n, f, oh, ow, c, kh, kw].
  // CHECK: ppc.conv2d {{.*}}ppc.strategy = #ppc.strategy<degrees = [2, 1, 2, 1, 1, 1, 1], start = 4>
  %0 = ppc.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>, ppc.strategy = #ppc.strategy<degrees = [2, 1, 2, 1, 1, 1, 1], start = 4>} : (tensor<8x3x32x32xf32>, tensor<16x3x3x3xf32>) -> tensor<8x16x32x32xf32>
  // Dims of max_pool2d: [n, c, oh, ow, kh, kw].
  // CHECK: ppc.max_pool2d {{.*}}ppc.strategy = #ppc.strategy<degrees = [2, 2, 1, 1, 1, 1]>
  %1 = ppc.max_pool2d %0 {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, ppc.strategy = #ppc.strategy<degrees = [2, 2, 1, 1, 1, 1]>} : tensor<8x16x32x32xf32> -> tensor<8x16x16x16xf32>
  return %1 : tensor<8x16x16x16xf32>
}

// -----

// CHECK-LABEL: func.func @views
func.func @views(%x: tensor<16x8xf32>, %table: tensor<1000x64xf32>, %ids: tensor<16x8xi64>) {
  // 4-way data parallel inside a node x 2-way across nodes of 4 devices.
  // CHECK: ppc.relu {{.*}}ppc.strategy = #ppc.strategy<degrees = [4, 2], strides = [1, 4]>
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [4, 2], strides = [1, 4]>} : tensor<16x8xf32>
  // Start and strides may come in either order; the printer normalizes.
  // CHECK: ppc.relu {{.*}}ppc.strategy = #ppc.strategy<degrees = [2, 1], start = 2, strides = [3]>
  %1 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 1], strides = [3], start = 2>} : tensor<16x8xf32>
  // Vocabulary-parallel embedding: dims [batch, seq, hidden, vocab].
  // CHECK: ppc.gather {{.*}}ppc.strategy = #ppc.strategy<degrees = [1, 1, 1, 8]>
  %2 = ppc.gather %table, %ids {ppc.strategy = #ppc.strategy<degrees = [1, 1, 1, 8]>} : (tensor<1000x64xf32>, tensor<16x8xi64>) -> tensor<16x8x64xf32>
  return
}

// -----

// A strategy must fit the machine attached to the module.
module attributes {ppc.machine = #topo.cluster<nodes = 1, devices_per_node = 2,
    device = #topo.device<"cpu", peak_flops = {f32 = 100000000000},
                          memory_bandwidth = 20000000000, memory_bytes = 1024>,
    intra = #topo.link<shared_memory, bandwidth = 1.0e10, latency = 0>,
    inter = #topo.link<shared_memory, bandwidth = 1.0e10, latency = 0>>} {
  func.func @too_many_devices(%x: tensor<16x8xf32>) {
    // Devices 0 and 1: fits (the failing split prints nothing to check).
    %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 1]>} : tensor<16x8xf32>
    // expected-error @+1 {{strategy uses device 3 but the machine has 2 devices}}
    %1 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 1], start = 2>} : tensor<16x8xf32>
    return
  }
}
