// Data parallel on two devices: every op splits the batch, nothing moves
// between ops, the loss's partial sums are all-reduced, and so is every
// weight gradient (each rank holds a whole replica) before the update.
// RUN: ppc-opt %s --ppc-attach-machine=machine=cpux2 --ppc-lower-to-plan="unassigned=data-parallel optimizer=adam" | FileCheck %s

func.func @main(%x: tensor<4x8xf32>, %labels: tensor<4xi64>) -> tensor<f32> {
  %w = ppc.weight "w" : tensor<8x6xf32>
  %b = ppc.weight "b" : tensor<6xf32>
  %y = ppc.linear %x, %w, %b : (tensor<4x8xf32>, tensor<8x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %l = ppc.softmax_cross_entropy %y, %labels : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK: plan.plan version 4 ranks 2 attributes {{.*}}kind = "adam"
// CHECK: plan.program rank 0
// CHECK: %[[X:[0-9]+]] = plan.alloc @in0 [0, 0] [2, 8]
// CHECK-NEXT: plan.load %[[X]]
// CHECK: %[[W:[0-9]+]] = plan.alloc @w{{[0-9]+}} [0, 0] [8, 6]
// CHECK: plan.kernel @op0 stage 0 ins(%[[X]], %[[W]], %{{[0-9]+}})
// The loss runs its three stages with no statistics exchanged (each rank
// holds all classes of its rows), then the partial losses are summed.
// CHECK: plan.kernel @op1 stage 0
// CHECK-NEXT: plan.kernel @op1 stage 1
// CHECK-NEXT: plan.kernel @op1 stage 2
// CHECK-NEXT: plan.collective all_reduce %{{[0-9]+}} group [0, 1]
// CHECK-NOT: plan.send
// CHECK: plan.phase grad_sync
// CHECK-NEXT: plan.collective all_reduce %[[GW:[0-9]+]] group [0, 1]
// CHECK-NEXT: plan.collective all_reduce %[[GB:[0-9]+]] group [0, 1]
// CHECK-NEXT: plan.phase update
// CHECK-DAG: plan.update %[[W]], %[[GW]]
// CHECK-DAG: plan.update %{{[0-9]+}}, %[[GB]]
// CHECK: plan.program rank 1
// CHECK: plan.alloc @in0 [2, 0] [4, 8]
