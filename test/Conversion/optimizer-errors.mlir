// RUN: ppc-opt %s -verify-diagnostics --ppc-partition-to-plan="optimizer=lamb"
// RUN: not ppc-opt %s --ppc-partition-to-plan="unassigned=data-parallel" 2>&1 | FileCheck %s --check-prefix=NOMACHINE

// expected-error @+1 {{unknown optimizer 'lamb': expected sgd, momentum or adam}}
func.func @main(%x: tensor<4x8xf32>, %t: tensor<4x8xf32>) -> tensor<f32> {
  %l = ppc.mse_loss %x, %t : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
// NOMACHINE: data parallel for ops without a strategy needs a machine: run --ppc-attach-machine first
