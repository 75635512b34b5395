// Partial sums reduce-scattered straight into a sharded consumer
// (`scatter = 1`, Megatron-LM's sequence parallelism after a row-parallel
// layer): the row-parallel linear's sums are not all-reduced; each rank
// keeps the half of the columns the split relu reads, the summands are freed
// at once, and the backward kernel of the linear gets no outputs. In
// backward each rank's relu gradient goes to both copies of the linear's
// result gradient, as one all_gather (the backward of the reduce-scatter).
// RUN: ppc-opt %s --ppc-attach-machine=machine=cpux2 --ppc-materialize-resharding | FileCheck %s --check-prefix=GRAPH
// RUN: ppc-opt %s --ppc-attach-machine=machine=cpux2 --ppc-lower-to-plan | FileCheck %s --check-prefix=PLAN

func.func @main(%x: tensor<4x8xf32>, %labels: tensor<4xi64>) -> tensor<f32> {
  %w1 = ppc.weight "w1" : tensor<8x16xf32>
  %w2 = ppc.weight "w2" : tensor<16x6xf32>
  %h = ppc.linear %x, %w1 {ppc.strategy = #ppc.strategy<degrees = [1, 2, 1]>} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %y = ppc.linear %h, %w2 {ppc.strategy = #ppc.strategy<degrees = [1, 1, 2], scatter = 1>} : (tensor<4x16xf32>, tensor<16x6xf32>) -> tensor<4x6xf32>
  %a = ppc.relu %y {ppc.strategy = #ppc.strategy<degrees = [1, 2]>} : tensor<4x6xf32>
  %l = ppc.softmax_cross_entropy %a, %labels {ppc.strategy = #ppc.strategy<degrees = [1, 1]>} : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// The reduced pieces line up with the relu: nothing moves between them.
// GRAPH: %[[Y:[a-z0-9_]+]] = ppc.linear {{.*}}degrees = [1, 1, 2], scatter = 1>
// GRAPH-NEXT: %[[S:[a-z0-9_]+]] = ppc.reduce %[[Y]] from <degrees = [1, 1, 2], scatter = 1>
// GRAPH-NEXT: ppc.relu %[[S]]
// GRAPH-NEXT: ppc.combine

// PLAN: plan.program rank 0
// PLAN: %[[Y0:[a-z0-9_]+]] = plan.alloc @t{{[0-9]+}} [0, 0] [4, 6]
// PLAN-NEXT: plan.kernel @op1 stage 0 ins(%{{.*}}, %{{.*}}) outs(%[[Y0]])
// PLAN-NEXT: %[[P0:[a-z0-9_]+]] = plan.alloc @t{{[0-9]+}} [0, 0] [4, 3]
// PLAN-NEXT: plan.collective reduce_scatter %[[Y0]] -> %[[P0]] group [0, 1] {axis = 1 : i64}
// PLAN-NEXT: plan.free %[[Y0]]
// PLAN-NOT: all_reduce
// PLAN: plan.kernel @op2 stage 0 ins(%[[P0]])
// PLAN: plan.phase backward
// PLAN: plan.kernel_backward @op2 stage 0 ins(%[[P0]]) {{.*}} input_grads [true](%[[DA:[a-z0-9_]+]])
// PLAN-NEXT: %[[W:[a-z0-9_]+]] = plan.alloc @t{{[0-9]+}} [0, 0] [4, 6] grad
// PLAN-NEXT: plan.collective all_gather %[[DA]] -> %[[W]] group [0, 1] {axis = 1 : i64}
// PLAN-NEXT: %[[DY:[a-z0-9_]+]] = plan.alloc @t{{[0-9]+}} [0, 0] [4, 6] grad
// PLAN-NEXT: plan.copy %[[W]] -> %[[DY]] [0, 0] [4, 6]
// PLAN: plan.kernel_backward @op1 stage 0 ins(%{{.*}}, %{{.*}}) outs() output_grads(%[[DY]])
// PLAN: plan.program rank 1
// PLAN: %[[P1:[a-z0-9_]+]] = plan.alloc @t{{[0-9]+}} [0, 3] [4, 6]
// PLAN-NEXT: plan.collective reduce_scatter %{{.*}} -> %[[P1]] group [0, 1] {axis = 1 : i64}
// PLAN: plan.kernel_backward @op1 stage 0 ins(%{{.*}}, %{{.*}}) outs()
