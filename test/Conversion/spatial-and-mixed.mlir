// Spatial (height) split of two convolutions with a halo exchange between
// them, and an op placed on another device (mixed placement).
// RUN: ppc-opt %s -split-input-file --ppc-attach-machine=machine=cpux2 --ppc-materialize-resharding | FileCheck %s --check-prefix=GRAPH
// RUN: ppc-opt %s -split-input-file --ppc-attach-machine=machine=cpux2 --ppc-lower-to-plan | FileCheck %s --check-prefix=PLAN

func.func @main(%x: tensor<2x1x8x8xf32>, %labels: tensor<2xi64>) -> tensor<f32> {
  %w1 = ppc.weight "w1" : tensor<2x1x3x3xf32>
  %w2 = ppc.weight "w2" : tensor<2x2x3x3xf32>
  %c1 = ppc.conv2d %x, %w1 {pads = array<i64: 1, 1, 1, 1>, ppc.strategy = #ppc.strategy<degrees = [1, 1, 2, 1, 1, 1, 1]>} : (tensor<2x1x8x8xf32>, tensor<2x1x3x3xf32>) -> tensor<2x2x8x8xf32>
  %r = ppc.relu %c1 {ppc.strategy = #ppc.strategy<degrees = [1, 1, 2, 1]>} : tensor<2x2x8x8xf32>
  %c2 = ppc.conv2d %r, %w2 {pads = array<i64: 1, 1, 1, 1>, ppc.strategy = #ppc.strategy<degrees = [1, 1, 2, 1, 1, 1, 1]>} : (tensor<2x2x8x8xf32>, tensor<2x2x3x3xf32>) -> tensor<2x2x8x8xf32>
  %g = ppc.global_avg_pool %c2 : tensor<2x2x8x8xf32> -> tensor<2x2x1x1xf32>
  %f = ppc.reshape %g : tensor<2x2x1x1xf32> -> tensor<2x2xf32>
  %l = ppc.softmax_cross_entropy %f, %labels : (tensor<2x2xf32>, tensor<2xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// The second convolution reads one row beyond each half: a repartition.
// The unassigned pooling runs whole on device 0: a combine.
// GRAPH-LABEL: func.func @main
// GRAPH: %[[R:[a-z0-9_]+]] = ppc.relu
// GRAPH-NEXT: %[[H:[a-z0-9_]+]] = ppc.repartition %[[R]] from <degrees = [1, 1, 2, 1]> to <degrees = [1, 1, 2, 1, 1, 1, 1]>
// GRAPH-NEXT: ppc.conv2d %[[H]]
// GRAPH-NEXT: ppc.combine
// GRAPH-NEXT: ppc.global_avg_pool

// Rank 0 holds rows [0, 4) and needs [0, 5): row 4 comes from rank 1, and
// in backward its gradient goes back to be added there.
// PLAN-LABEL: plan.program rank 0
// PLAN: plan.kernel @op1
// Each rank sends its boundary row before it receives the other's.
// PLAN: %[[IN:[a-z0-9_]+]] = plan.alloc @t{{[0-9]+}} [0, 0, 0, 0] [2, 2, 5, 8]
// PLAN: plan.send %{{.*}} [0, 0, 3, 0] [2, 2, 4, 8] to 1
// PLAN-NEXT: plan.copy %{{.*}} -> %[[IN]] [0, 0, 0, 0] [2, 2, 4, 8]
// PLAN-NEXT: plan.recv %[[IN]] [0, 0, 4, 0] [2, 2, 5, 8] from 1 tag [[TAG:[0-9]+]]
// PLAN: plan.kernel @op2 stage 0 ins(%[[IN]], %{{.*}})
// PLAN: plan.phase backward
// PLAN: plan.kernel_backward @op2 stage 0 ins(%[[IN]], %{{.*}}) {{.*}} input_grads [true, true](%[[DIN:[a-z0-9_]+]],
// PLAN: plan.send %[[DIN]] [0, 0, 4, 0] [2, 2, 5, 8] to 1
// The local rows are the producer gradient's first contribution, which
// the copy writes (ppc-elide-zero-fills).
// PLAN-NEXT: plan.copy %[[DIN]] -> %{{.*}} [0, 0, 0, 0] [2, 2, 4, 8]{{$}}
// PLAN-LABEL: plan.program rank 1
// PLAN: plan.send %{{.*}} [0, 0, 4, 0] [2, 2, 5, 8] to 0 tag [[TAG]]
// PLAN: plan.recv %{{.*}} [0, 0, 3, 0] [2, 2, 4, 8] from 0
// PLAN: plan.phase backward
// PLAN: plan.recv %{{.*}} [0, 0, 4, 0] [2, 2, 5, 8] from 0 tag {{[0-9]+}} accumulate

// -----

// Mixed placement: the linear runs on device 0, the relu on device 1.
func.func @main(%x: tensor<4x8xf32>, %t: tensor<4x8xf32>) -> tensor<f32> {
  %w = ppc.weight "w" : tensor<8x8xf32>
  %h = ppc.linear %x, %w {ppc.strategy = #ppc.strategy<degrees = [1, 1, 1]>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a = ppc.relu %h {ppc.strategy = #ppc.strategy<degrees = [1, 1], start = 1>} : tensor<4x8xf32>
  %l = ppc.mse_loss %a, %t {ppc.strategy = #ppc.strategy<degrees = [1, 1], start = 1>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// GRAPH-LABEL: func.func @main
// GRAPH: ppc.repartition %{{.*}} from <degrees = [1, 1, 1]> to <degrees = [1, 1], start = 1>
// GRAPH: %[[L:[a-z0-9_]+]] = ppc.mse_loss
// GRAPH-NEXT: %[[B:[a-z0-9_]+]] = ppc.repartition %[[L]] from <degrees = [1, 1], start = 1>
// GRAPH-NEXT: return %[[B]]

// PLAN-LABEL: plan.program rank 0
// PLAN: plan.kernel @op0
// PLAN: plan.send %{{.*}} [0, 0] [4, 8] to 1
// The loss comes back to rank 0, which reports it.
// PLAN: plan.recv %[[LOSS:[a-z0-9_]+]] [] [] from 1
// PLAN-NEXT: plan.output %[[LOSS]]
// PLAN: plan.recv %{{.*}} [0, 0] [4, 8] from 1 tag {{[0-9]+}}{{$}}
// PLAN: plan.kernel_backward @op0
// PLAN: plan.update
// PLAN-LABEL: plan.program rank 1
// PLAN: plan.recv %{{.*}} [0, 0] [4, 8] from 0
// PLAN: plan.kernel @op1
// PLAN: plan.kernel @op2
// PLAN: plan.send %{{.*}} [] [] to 0
// PLAN: plan.kernel_backward @op2
// PLAN: plan.kernel_backward @op1
// PLAN: plan.send %{{.*}} [0, 0] [4, 8] to 0
// PLAN-NOT: plan.update
