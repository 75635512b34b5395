// RUN: ppc-opt %s -verify-diagnostics --ppc-attach-machine=machine=cpux2 --ppc-lower-to-plan

// Two users read the same weight in overlapping but different pieces.
// expected-error @+1 {{is read in overlapping but different pieces by the ops that use it}}
func.func @main(%x: tensor<4x8xf32>, %t: tensor<4x8xf32>) -> tensor<f32> {
  %w = ppc.weight "w" : tensor<8xf32>
  %a = ppc.add %x, %w {ppc.strategy = #ppc.strategy<degrees = [1, 2]>} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %b = ppc.mul %a, %w {ppc.strategy = #ppc.strategy<degrees = [1, 1]>} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %l = ppc.mse_loss %b, %t : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

