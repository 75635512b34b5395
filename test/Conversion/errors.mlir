// RUN: ppc-opt %s -split-input-file -verify-diagnostics --ppc-attach-machine=machine=cpux2 --ppc-partition-to-plan

// Resharding must be explicit before partitioning.
func.func @main(%x: tensor<4x8xf32>, %t: tensor<4x8xf32>) -> tensor<f32> {
  %h = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 1]>} : tensor<4x8xf32>
  // expected-error @+1 {{operand #0 of 'ppc.mse_loss#1' needs data from other devices but no parallel op moves it: run --ppc-materialize-resharding first}}
  %l = ppc.mse_loss %h, %t {ppc.strategy = #ppc.strategy<degrees = [1, 1], start = 1>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A configuration that does not fit the machine (the strategy verifier
// checks it against the attached machine).
func.func @main(%x: tensor<4x8xf32>, %t: tensor<4x8xf32>) -> tensor<f32> {
  // expected-error @+1 {{strategy uses device 3 but the machine has 2 devices}}
  %h = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [4, 1]>} : tensor<4x8xf32>
  %l = ppc.mse_loss %h, %t : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{ppc-partition-to-plan needs exactly one function of graph ops, found 2}}
module {
  func.func @a(%x: tensor<4xf32>) -> tensor<4xf32> {
    %r = ppc.relu %x : tensor<4xf32>
    return %r : tensor<4xf32>
  }
  func.func @b(%x: tensor<4xf32>) -> tensor<4xf32> {
    %r = ppc.relu %x : tensor<4xf32>
    return %r : tensor<4xf32>
  }
}

// -----

// A returned value must be computed by a graph op.
func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %r = ppc.relu %x : tensor<4xf32>
  // expected-error @+1 {{the plan can only return results of graph ops}}
  return %r, %x : tensor<4xf32>, tensor<4xf32>
}
