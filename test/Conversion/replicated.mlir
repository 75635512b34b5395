// Replicated ops (#ppc.strategy replicas) on four ranks: fc1 is data
// parallel over 2 with each half on two replicas, the relu and the loss run
// whole on every rank, fc2 is column parallel over all four.
// RUN: ppc-opt %s --ppc-attach-machine=machine=cpux4 --ppc-lower-to-plan | FileCheck %s

func.func @main(%x: tensor<4x8xf32>, %labels: tensor<4xi64>) -> tensor<f32> {
  %w1 = ppc.weight "w1" : tensor<8x16xf32>
  %w2 = ppc.weight "w2" : tensor<16x8xf32>
  %h = ppc.linear %x, %w1 {ppc.strategy = #ppc.strategy<degrees = [2, 1, 1], replicas = 2>} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %a = ppc.relu %h {ppc.strategy = #ppc.strategy<degrees = [1, 1], replicas = 4>} : tensor<4x16xf32>
  %y = ppc.linear %a, %w2 {ppc.strategy = #ppc.strategy<degrees = [1, 4, 1]>} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %l = ppc.softmax_cross_entropy %y, %labels {ppc.strategy = #ppc.strategy<degrees = [1, 1], replicas = 4>} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK: plan.program rank 0
// CHECK: plan.phase forward
// Rank 0 holds half 0 of fc1 and all of w1; the relu gathers the other half
// from rank 2, and half 0 goes to the relu's replicas on ranks 2 and 3.
// CHECK: %[[W1:[a-z0-9_]+]] = plan.alloc @w{{[0-9]+}} [0, 0] [8, 16]
// Every rank sends its pieces of an exchange before it receives any.
// CHECK: plan.kernel @op0
// CHECK: plan.send %{{.*}} [0, 0] [2, 16] to 2
// CHECK: plan.send %{{.*}} [0, 0] [2, 16] to 3
// CHECK: plan.recv %{{.*}} [2, 0] [4, 16] from 2
// CHECK: plan.kernel @op1
// CHECK: plan.kernel @op2
// CHECK: plan.phase backward
// Each loss replica sends its gradient only to the fc2 piece on its own
// rank: no gradient crosses ranks.
// CHECK: plan.kernel_backward @op3
// CHECK-NOT: plan.send
// CHECK: plan.kernel_backward @op2
// The four partial gradients of the relu's output, one per column block
// of fc2, are summed by one all-reduce and written to every copy (their
// first contribution).
// CHECK-NEXT: %[[PART:[a-z0-9_]+]] = plan.alloc @t{{[0-9]+}} [0, 0] [4, 16] grad
// CHECK: plan.collective all_reduce %[[PART]] group [0, 1, 2, 3]
// CHECK: plan.copy %[[PART]] -> %{{.*}} [0, 0] [4, 16]{{$}}
// CHECK-NOT: plan.send
// CHECK: plan.kernel_backward @op1
// CHECK-NOT: plan.send
// CHECK: plan.kernel_backward @op0
// Replicas compute identical gradients of w1: each replica synchronizes
// with the other half of its own replica only.
// CHECK: plan.phase grad_sync
// CHECK-NEXT: plan.collective all_reduce %{{.*}} group [0, 2]
// CHECK-NEXT: plan.phase update
// CHECK: plan.program rank 1
// CHECK: plan.collective all_reduce %{{.*}} group [0, 1, 2, 3]
// CHECK: plan.phase grad_sync
// CHECK-NEXT: plan.collective all_reduce %{{.*}} group [1, 3]
// CHECK-NEXT: plan.phase update
