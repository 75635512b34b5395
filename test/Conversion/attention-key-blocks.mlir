// Attention split along its keys on two devices (degrees [1, 1, 2, 1, 1]
// over batch, S, T, D, Dv: each device holds half the keys and values
// (weights here, so that the backward runs), all the query rows): its three forward stages merge the blocks by log-sum-exp. Between
// them the two halves of each row agree on the row's maximum (all-reduce
// max) and then on its sum of exponentials (all-reduce sum); the third
// stage's partial results are summed like any split reduction. The
// backward's two stages sum each row's dO . O over the blocks in between.
// Unsplit along the keys (the second function), the op runs in one stage
// without statistics.
// RUN: ppc-opt %s --split-input-file --ppc-attach-machine=machine=cpux2 --ppc-lower-to-plan | FileCheck %s
// RUN: ppc-opt %s --split-input-file --ppc-attach-machine=machine=cpux2 --ppc-simulate=optimizer=sgd | FileCheck %s --check-prefix=SIM

func.func @main(%q: tensor<2x6x4xf32>, %t: tensor<2x6x3xf32>) -> tensor<f32> {
  %k = ppc.weight "k" : tensor<2x8x4xf32>
  %v = ppc.weight "v" : tensor<2x8x3xf32>
  %o = ppc.attention %q, %k, %v {causal = true, scale = 0.5 : f64, ppc.strategy = #ppc.strategy<degrees = [1, 1, 2, 1, 1]>} : (tensor<2x6x4xf32>, tensor<2x8x4xf32>, tensor<2x8x3xf32>) -> tensor<2x6x3xf32>
  %l = ppc.mse_loss %o, %t {ppc.strategy = #ppc.strategy<degrees = [1, 1, 1]>} : (tensor<2x6x3xf32>, tensor<2x6x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK: plan.program rank 0
// CHECK: %[[MAX:[a-z0-9_]+]] = plan.alloc [0, 0] [2, 6]
// CHECK-NEXT: %[[SUM:[a-z0-9_]+]] = plan.alloc [0, 0] [2, 6]
// CHECK-NEXT: %[[OWN:[a-z0-9_]+]] = plan.alloc [0, 0] [2, 6]
// CHECK-NEXT: plan.kernel @op0 stage 0 ins(%{{.*}}, %{{.*}}, %{{.*}}) outs(%[[OUT:[a-z0-9_]+]]) scratch(%[[MAX]], %[[SUM]], %[[OWN]])
// CHECK-NEXT: plan.collective all_reduce %[[MAX]] group [0, 1] {reduction = "max"}
// CHECK-NEXT: plan.kernel @op0 stage 1
// CHECK-NEXT: plan.collective all_reduce %[[SUM]] group [0, 1]{{$}}
// CHECK-NEXT: plan.kernel @op0 stage 2
// CHECK-NEXT: plan.collective all_reduce %[[OUT]] group [0, 1]{{$}}
// CHECK: plan.phase backward
// CHECK: %[[DOT:[a-z0-9_]+]] = plan.alloc [0, 0] [2, 6]
// CHECK-NEXT: plan.kernel_backward @op0 stage 0 {{.*}} scratch(%[[MAX]], %[[SUM]], %[[OWN]], %[[DOT]])
// CHECK-NEXT: plan.collective all_reduce %[[DOT]] group [0, 1]{{$}}
// CHECK-NEXT: plan.kernel_backward @op0 stage 1 {{.*}} scratch(%[[MAX]], %[[SUM]], %[[OWN]], %[[DOT]])
// CHECK: plan.program rank 1
// CHECK: plan.collective all_reduce %{{.*}} group [0, 1] {reduction = "max"}

// The simulator prices the plan's four all-reduces (row maxima, row sums,
// the partial results; the backward's dot products), each of 2 x 15 us
// latency on cpux2's shared memory (their bytes are negligible), and the
// backward's recomputation for the rows' sums (StagedKernel::backwardWork,
// 1.4 x the launch-bound 0.005 ms).
// SIM: ppc.attention#0 ppc.attention [1,1,2,1,1] 0.005 0.007 0.120 0.132

// -----

func.func @whole_keys(%q: tensor<2x6x4xf32>, %t: tensor<2x6x3xf32>) -> tensor<f32> {
  %k = ppc.weight "k" : tensor<2x8x4xf32>
  %v = ppc.weight "v" : tensor<2x8x3xf32>
  %o = ppc.attention %q, %k, %v {causal = true, scale = 0.5 : f64, ppc.strategy = #ppc.strategy<degrees = [1, 2, 1, 1, 1]>} : (tensor<2x6x4xf32>, tensor<2x8x4xf32>, tensor<2x8x3xf32>) -> tensor<2x6x3xf32>
  %l = ppc.mse_loss %o, %t {ppc.strategy = #ppc.strategy<degrees = [1, 1, 1]>} : (tensor<2x6x3xf32>, tensor<2x6x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: \22degrees\22: [1, 2, 1, 1, 1]
// CHECK: plan.program rank 0
// CHECK-NOT: stage 1
// CHECK: plan.kernel @op0 stage 0 ins(%{{.*}}, %{{.*}}, %{{.*}}) outs(%{{.*}}){{$}}
// CHECK-NOT: stage 1
// CHECK: plan.kernel_backward @op0 stage 0
// CHECK-NOT: stage 1
// CHECK: plan.program rank 1
