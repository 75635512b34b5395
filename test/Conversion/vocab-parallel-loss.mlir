// Megatron's vocabulary-parallel cross-entropy on two devices: the output
// head splits its classes (column parallel) and the loss reads the logits
// where they are; between its three forward stages the two halves of each
// row agree on the row's maximum (all-reduce max) and then on its sum of
// exponentials and its label's logit (all-reduce sum), and the partial
// losses are summed. The backward needs no statistics exchange.
// RUN: ppc-opt %s --ppc-attach-machine=machine=cpux2 --ppc-materialize-resharding | FileCheck %s --check-prefix=GRAPH
// RUN: ppc-opt %s --ppc-attach-machine=machine=cpux2 --ppc-lower-to-plan | FileCheck %s --check-prefix=PLAN
// RUN: ppc-opt %s --ppc-attach-machine=machine=cpux2 --ppc-simulate=optimizer=sgd | FileCheck %s --check-prefix=SIM

func.func @main(%x: tensor<4x8xf32>, %labels: tensor<4xi64>) -> tensor<f32> {
  %w = ppc.weight "head" : tensor<8x6xf32>
  %y = ppc.linear %x, %w {ppc.strategy = #ppc.strategy<degrees = [1, 2, 1]>} : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %l = ppc.softmax_cross_entropy %y, %labels {ppc.strategy = #ppc.strategy<degrees = [1, 2]>} : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// The logits stay split along the classes: only the partial losses move.
// GRAPH-NOT: ppc.combine
// GRAPH-NOT: ppc.repartition
// GRAPH: %[[L:[a-z0-9_]+]] = ppc.softmax_cross_entropy {{.*}}degrees = [1, 2]
// GRAPH-NEXT: ppc.reduce %[[L]]

// PLAN: plan.program rank 0
// PLAN: plan.phase loss
// PLAN: %[[MAX:[a-z0-9_]+]] = plan.alloc [0] [4]
// PLAN-NEXT: %[[SUMS:[a-z0-9_]+]] = plan.alloc [0, 0] [2, 4]
// PLAN-NEXT: plan.kernel @op1 stage 0 ins(%{{.*}}, %{{.*}}) outs(%{{.*}}) scratch(%[[MAX]], %[[SUMS]])
// PLAN-NEXT: plan.collective all_reduce %[[MAX]] group [0, 1] {reduction = "max"}
// PLAN-NEXT: plan.kernel @op1 stage 1
// PLAN-NEXT: plan.collective all_reduce %[[SUMS]] group [0, 1]{{$}}
// PLAN-NEXT: plan.kernel @op1 stage 2
// PLAN-NEXT: plan.collective all_reduce
// PLAN: plan.phase backward
// PLAN: plan.kernel_backward @op1 stage 0 {{.*}} scratch(%[[MAX]], %[[SUMS]])
// PLAN-NOT: plan.collective all_reduce %[[MAX]]
// PLAN: plan.program rank 1
// PLAN: plan.collective all_reduce %{{.*}} group [0, 1] {reduction = "max"}

// The simulator prices the two statistics reductions as the plan runs them:
// with the partial losses' sum, three all-reduces of 2 x 15 us latency on
// cpux2's shared memory (their bytes are negligible), 0.090 ms per device.
// SIM: device  compute ms     comm ms
// SIM-NEXT: 0       0.020       0.090
// SIM-NEXT: 1       0.020       0.090
// All three belong to the loss, one after another.
// SIM: ppc.softmax_cross_entropy#1 ppc.softmax_cross_entropy [1,2] 0.005 0.005 0.090 0.100
