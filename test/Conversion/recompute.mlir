// Activation recomputation (#ppc.strategy recompute) on two ranks: relu and
// sigmoid drop their results after their last reader's forward and run
// again, relu first, right before tanh's backward (the first to read them);
// the loss is a graph output and is kept. An op whose forward updates state
// (batch norm's running statistics) cannot be recomputed.
// RUN: ppc-opt %s -split-input-file -verify-diagnostics --ppc-attach-machine=machine=cpux2 --ppc-lower-to-plan | FileCheck %s

func.func @main(%x: tensor<4x8xf32>, %labels: tensor<4xi64>) -> tensor<f32> {
  %a = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 1], recompute>} : tensor<4x8xf32>
  %b = ppc.sigmoid %a {ppc.strategy = #ppc.strategy<degrees = [2, 1], recompute>} : tensor<4x8xf32>
  %c = ppc.tanh %b {ppc.strategy = #ppc.strategy<degrees = [2, 1]>} : tensor<4x8xf32>
  %l = ppc.softmax_cross_entropy %c, %labels {ppc.strategy = #ppc.strategy<degrees = [2, 1], recompute>} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK: plan.program rank 0
// CHECK: plan.phase forward
// CHECK: %[[X:[a-z0-9_]+]] = plan.alloc @in{{[0-9]+}}
// CHECK: %[[A:[a-z0-9_]+]] = plan.alloc @t{{[0-9]+}} [0, 0] [2, 8]
// CHECK-NEXT: plan.kernel @op0 stage 0 ins(%[[X]]) outs(%[[A]])
// CHECK: plan.kernel @op1 stage 0 ins(%[[A]]) outs(%[[B:[a-z0-9_]+]])
// CHECK-NEXT: plan.free %[[A]]
// CHECK: plan.kernel @op2 stage 0 ins(%[[B]]) outs(%[[C:[a-z0-9_]+]])
// CHECK-NEXT: plan.free %[[B]]
// CHECK: plan.phase backward
// CHECK: plan.kernel_backward @op3
// CHECK: %[[A2:[a-z0-9_]+]] = plan.alloc @t{{[0-9]+}} [0, 0] [2, 8]
// CHECK-NEXT: plan.kernel @op0 stage 0 ins(%[[X]]) outs(%[[A2]])
// CHECK-NEXT: %[[B2:[a-z0-9_]+]] = plan.alloc @t{{[0-9]+}} [0, 0] [2, 8]
// CHECK-NEXT: plan.kernel @op1 stage 0 ins(%[[A2]]) outs(%[[B2]])
// CHECK: plan.kernel_backward @op2 stage 0 ins(%[[B2]]) outs(%[[C]])
// CHECK: plan.kernel_backward @op1 stage 0 ins(%[[A2]]) outs(%[[B2]])
// Nothing else runs again.
// CHECK-NOT: plan.kernel @op
// CHECK: plan.program rank 1

// -----

func.func @batch_norm(%x: tensor<2x4x8x8xf32>, %labels: tensor<2xi64>) -> tensor<f32> {
  %g = ppc.weight "g" : tensor<4xf32>
  %b = ppc.weight "b" : tensor<4xf32>
  %m = ppc.weight "m" {frozen} : tensor<4xf32>
  %v = ppc.weight "v" {frozen} : tensor<4xf32>
  // expected-error @below {{cannot recompute: 'bn' updates state in its forward}}
  %y = ppc.batch_norm %x, %g, %b, %m, %v {epsilon = 1.0e-3 : f64, momentum = 0.99 : f64, ppc.name = "bn", ppc.strategy = #ppc.strategy<degrees = [1, 1, 1, 1], recompute>} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  %r = ppc.reshape %y {ppc.strategy = #ppc.strategy<degrees = [1, 1]>} : tensor<2x4x8x8xf32> -> tensor<2x256xf32>
  %l = ppc.softmax_cross_entropy %r, %labels {ppc.strategy = #ppc.strategy<degrees = [1, 1]>} : (tensor<2x256xf32>, tensor<2xi64>) -> tensor<f32>
  return %l : tensor<f32>
}
