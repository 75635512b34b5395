// A weight lives in the pieces its first user reads. Two slices of one
// weight read disjoint regions, so the second slice's region is held by no
// one (it would be neither loaded nor trained): the lowering refuses, and
// the ONNX importer puts a whole-weight view (a reshape to the same shape)
// in front of such slices (test/Import/weight-slices.test).
// RUN: ppc-opt %s -split-input-file -verify-diagnostics --ppc-attach-machine=machine=cpux2 --ppc-lower-to-plan

func.func @main(%x: tensor<4x8xf32>, %t: tensor<4x16xf32>) -> tensor<f32> {
  %w = ppc.weight "in_proj" : tensor<24x8xf32>
  %q = ppc.slice %w {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>, ppc.name = "w_q", ppc.strategy = #ppc.strategy<degrees = [1, 1]>} : tensor<24x8xf32> -> tensor<8x8xf32>
  // expected-error @+1 {{operand #0 of 'w_kv' reads a region of weight 'in_proj' that its first use 'w_q' does not read}}
  %kv = ppc.slice %w {starts = array<i64: 8, 0>, steps = array<i64: 1, 1>, ppc.name = "w_kv", ppc.strategy = #ppc.strategy<degrees = [1, 1]>} : tensor<24x8xf32> -> tensor<16x8xf32>
  %y = ppc.linear %x, %kv {transpose_weight = true, ppc.strategy = #ppc.strategy<degrees = [2, 1, 1]>} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %l = ppc.mse_loss %y, %t : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Through the view, both slices read an activation; the view reads the
// whole weight and holds it.
func.func @main(%x: tensor<4x8xf32>, %t: tensor<4x16xf32>) -> tensor<f32> {
  %w = ppc.weight "in_proj" : tensor<24x8xf32>
  %view = ppc.reshape %w {ppc.name = "in_proj.view", ppc.strategy = #ppc.strategy<degrees = [1, 1]>} : tensor<24x8xf32> -> tensor<24x8xf32>
  %q = ppc.slice %view {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>, ppc.name = "w_q", ppc.strategy = #ppc.strategy<degrees = [1, 1]>} : tensor<24x8xf32> -> tensor<8x8xf32>
  %kv = ppc.slice %view {starts = array<i64: 8, 0>, steps = array<i64: 1, 1>, ppc.name = "w_kv", ppc.strategy = #ppc.strategy<degrees = [1, 1]>} : tensor<24x8xf32> -> tensor<16x8xf32>
  %y = ppc.linear %x, %kv {transpose_weight = true, ppc.strategy = #ppc.strategy<degrees = [2, 1, 1]>} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %l = ppc.mse_loss %y, %t : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
