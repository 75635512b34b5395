// Megatron-style tensor parallel MLP on two devices: the first linear splits
// its output columns, the second its reduction dim, so its partial sums are
// summed by a ppc.reduce that the plan lowers to an all-reduce; in backward
// every copy of the sum gets its gradient.
// RUN: ppc-opt %s --ppc-attach-machine=machine=cpux2 --ppc-materialize-resharding | FileCheck %s --check-prefix=GRAPH
// Running it twice changes nothing the second time.
// RUN: ppc-opt %s --ppc-attach-machine=machine=cpux2 --ppc-materialize-resharding --ppc-materialize-resharding | FileCheck %s --check-prefix=GRAPH
// RUN: ppc-opt %s --ppc-attach-machine=machine=cpux2 --ppc-lower-to-plan | FileCheck %s --check-prefix=PLAN

func.func @main(%x: tensor<4x8xf32>, %labels: tensor<4xi64>) -> tensor<f32> {
  %w1 = ppc.weight "w1" : tensor<8x16xf32>
  %w2 = ppc.weight "w2" : tensor<16x6xf32>
  %h = ppc.linear %x, %w1 {ppc.strategy = #ppc.strategy<degrees = [1, 2, 1]>} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %a = ppc.relu %h {ppc.strategy = #ppc.strategy<degrees = [1, 2]>} : tensor<4x16xf32>
  %y = ppc.linear %a, %w2 {ppc.strategy = #ppc.strategy<degrees = [1, 1, 2]>} : (tensor<4x16xf32>, tensor<16x6xf32>) -> tensor<4x6xf32>
  %l = ppc.softmax_cross_entropy %y, %labels {ppc.strategy = #ppc.strategy<degrees = [1, 1]>} : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// The column-parallel pair lines up; only the row-parallel output moves.
// GRAPH-NOT: ppc.repartition
// GRAPH: %[[Y:[a-z0-9_]+]] = ppc.linear {{.*}}degrees = [1, 1, 2]
// GRAPH-NEXT: %[[S:[a-z0-9_]+]] = ppc.reduce %[[Y]] from <degrees = [1, 1, 2]> to <degrees = [1, 1, 2]>
// GRAPH-NEXT: ppc.softmax_cross_entropy %[[S]]
// GRAPH-NOT: ppc.combine

// PLAN: plan.plan version 4 ranks 2
// PLAN: plan.program rank 0
// PLAN: plan.phase forward
// Each rank holds its half of w1's columns and of w2's rows.
// PLAN: %[[W1:[a-z0-9_]+]] = plan.alloc @w{{[0-9]+}} [0, 0] [8, 8]
// PLAN: plan.kernel @op0
// PLAN: plan.kernel @op1
// PLAN: %[[W2:[a-z0-9_]+]] = plan.alloc @w{{[0-9]+}} [0, 0] [8, 6]
// PLAN: %[[Y0:[a-z0-9_]+]] = plan.alloc @t{{[0-9]+}} [0, 0] [4, 6]
// PLAN: plan.kernel @op2 stage 0 ins(%{{.*}}, %[[W2]]) outs(%[[Y0]])
// PLAN-NEXT: plan.collective all_reduce %[[Y0]] group [0, 1]
// PLAN: plan.phase loss
// PLAN: plan.kernel @op3
// PLAN: plan.output
// PLAN: plan.phase backward
// The loss gradient is seeded, and the gradient of the summed partial
// result goes to both of its copies: sent to rank 1 (sends first), copied
// locally. Each is its buffer's first contribution, so no gradient buffer
// is zero-filled first (ppc-elide-zero-fills): the loss kernel writes its
// logits' gradient, the copy writes rather than adds.
// PLAN: plan.fill %{{.*}}, 1.0
// PLAN-NOT: plan.fill
// PLAN: %[[DY:[a-z0-9_]+]] = plan.alloc @t{{[0-9]+}} [0, 0] [4, 6] grad uninitialized
// PLAN: plan.kernel_backward @op3 {{.*}} overwrite [true]
// PLAN: plan.send %[[DY]] [0, 0] [4, 6] to 1
// PLAN-NEXT: plan.copy %[[DY]] -> %{{.*}} [0, 0] [4, 6]{{$}}
// PLAN: plan.kernel_backward @op2
// PLAN: plan.phase grad_sync
// No weight piece is replicated, so nothing is all-reduced in grad sync.
// PLAN-NOT: plan.collective
// PLAN: plan.phase update
// PLAN: plan.update
// PLAN: plan.update
// PLAN: plan.program rank 1
// PLAN: plan.alloc @w{{[0-9]+}} [0, 8] [8, 16]
// PLAN: plan.alloc @w{{[0-9]+}} [8, 0] [16, 6]
// PLAN: plan.collective all_reduce %{{.*}} group [0, 1]
// Rank 1 does not run the loss: it only receives the gradient of its copy.
// PLAN-NOT: plan.send
// PLAN: plan.recv %{{.*}} [0, 0] [4, 6] from 0 tag {{[0-9]+}}{{$}}
// PLAN-NOT: plan.send
// PLAN-NOT: plan.recv
