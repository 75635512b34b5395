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

// -----

// Batch norm normalizes by statistics over the whole batch, which a pipeline
// never has at once.
func.func @main(%x: tensor<4x4x2x2xf32>, %labels: tensor<4xi64>) -> tensor<f32> attributes {ppc.pipeline = #ppc.pipeline<microbatches = 2, schedule = "1f1b", first_devices = [0, 1], devices = [1, 1]>} {
  %g = ppc.weight "g" : tensor<4xf32>
  %b = ppc.weight "b" : tensor<4xf32>
  %m = ppc.weight "m" {frozen} : tensor<4xf32>
  %v = ppc.weight "v" {frozen} : tensor<4xf32>
  // expected-error @below {{'bn' normalizes by statistics of the whole batch, which a pipeline of 2 micro-batches never has at once: train this model with microbatches = 1}}
  %y = ppc.batch_norm %x, %g, %b, %m, %v {epsilon = 1.0e-3 : f64, momentum = 0.99 : f64, ppc.name = "bn", ppc.strategy = #ppc.strategy<degrees = [1, 1, 1, 1]>} : (tensor<4x4x2x2xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4x4x2x2xf32>
  %r = ppc.reshape %y {ppc.strategy = #ppc.strategy<degrees = [1, 1], start = 1, stage = 1>} : tensor<4x4x2x2xf32> -> tensor<4x16xf32>
  %l = ppc.softmax_cross_entropy %r, %labels {ppc.strategy = #ppc.strategy<degrees = [1, 1], start = 1, stage = 1>} : (tensor<4x16xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Every op must run on its stage's devices.
// expected-error @+1 {{cannot partition @main: op 'ppc.relu#1' runs on device 0, outside its stage 1's devices [1, 2)}}
func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {ppc.pipeline = #ppc.pipeline<microbatches = 2, schedule = "1f1b", first_devices = [0, 1], devices = [1, 1]>} {
  %a = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [1, 1]>} : tensor<4x8xf32>
  %b = ppc.relu %a {ppc.strategy = #ppc.strategy<degrees = [1, 1], stage = 1>} : tensor<4x8xf32>
  return %b : tensor<4x8xf32>
}
