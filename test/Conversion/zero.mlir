// ZeRO stages 1 and 2 (#ppc.strategy zero) on a data-parallel MLP over two
// ranks: each weight's gradient is reduce-scattered along dim 0, each rank
// updates its half of the rows and the halves are all-gathered back; with
// stage 2 the whole gradient is freed right after the reduce-scatter.
// Stage 3 keeps each rank's rows of the weight only: the whole weight is
// all-gathered into a staging buffer before the forward and again before
// the backward, and the gradient is reduce-scattered into the rows, which
// the update changes in place.
// RUN: ppc-opt %s -split-input-file -verify-diagnostics --ppc-attach-machine=machine=cpux2 --ppc-lower-to-plan | FileCheck %s

func.func @main(%x: tensor<4x8xf32>, %labels: tensor<4xi64>) -> tensor<f32> {
  %w1 = ppc.weight "w1" : tensor<8x16xf32>
  %w2 = ppc.weight "w2" : tensor<16x6xf32>
  %h = ppc.linear %x, %w1 {ppc.strategy = #ppc.strategy<degrees = [2, 1, 1], zero = 1>} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %y = ppc.linear %h, %w2 {ppc.strategy = #ppc.strategy<degrees = [2, 1, 1], zero = 2>} : (tensor<4x16xf32>, tensor<16x6xf32>) -> tensor<4x6xf32>
  %l = ppc.softmax_cross_entropy %y, %labels {ppc.strategy = #ppc.strategy<degrees = [2, 1]>} : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// The shards are allocated beside the whole gradients, so that each
// reduce-scatter waits for its gradient's last kernel only (--overlap
// starts it there).
// CHECK: plan.program rank 0
// CHECK: %[[W1:[a-z0-9_]+]] = plan.alloc @[[T1:w[0-9]+]] [0, 0] [8, 16]
// CHECK: %[[W2:[a-z0-9_]+]] = plan.alloc @[[T2:w[0-9]+]] [0, 0] [16, 6]
// CHECK: %[[G2:[a-z0-9_]+]] = plan.alloc @[[T2]] [0, 0] [16, 6] grad
// CHECK-NEXT: %[[S2:[a-z0-9_]+]] = plan.alloc @[[T2]] [0, 0] [8, 6] grad
// CHECK-NEXT: plan.kernel_backward @op1 {{.*}}(%{{.*}}, %[[G2]])
// CHECK-NEXT: %[[G1:[a-z0-9_]+]] = plan.alloc @[[T1]] [0, 0] [8, 16] grad
// CHECK-NEXT: %[[S1:[a-z0-9_]+]] = plan.alloc @[[T1]] [0, 0] [4, 16] grad
// CHECK-NEXT: plan.kernel_backward @op0 {{.*}}(%[[G1]])
// CHECK-NEXT: plan.phase grad_sync
// CHECK-NEXT: plan.collective reduce_scatter %[[G1]] -> %[[S1]] group [0, 1]
// CHECK-NEXT: plan.collective reduce_scatter %[[G2]] -> %[[S2]] group [0, 1]
// CHECK-NEXT: plan.free %[[G2]]
// CHECK-NEXT: plan.phase update
// CHECK-NEXT: plan.update %[[W1]], %[[S1]]
// CHECK-NEXT: %[[U1:[a-z0-9_]+]] = plan.alloc @[[T1]] [0, 0] [4, 16] staging
// CHECK-NEXT: plan.copy %[[W1]] -> %[[U1]] [0, 0] [4, 16]
// CHECK-NEXT: plan.collective all_gather %[[U1]] -> %[[W1]] group [0, 1]
// CHECK-NEXT: plan.update %[[W2]], %[[S2]]
// CHECK: plan.collective all_gather %{{.*}} -> %[[W2]] group [0, 1]
// CHECK: plan.program rank 1
// Rank 1 takes the second halves of the rows.
// CHECK: plan.alloc @[[T1]] [4, 0] [8, 16] grad
// CHECK: plan.collective reduce_scatter

// -----

func.func @zero3(%x: tensor<4x8xf32>, %labels: tensor<4xi64>) -> tensor<f32> {
  %w1 = ppc.weight "w1" : tensor<8x6xf32>
  %y = ppc.linear %x, %w1 {ppc.strategy = #ppc.strategy<degrees = [2, 1, 1], zero = 3>} : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %l = ppc.softmax_cross_entropy %y, %labels {ppc.strategy = #ppc.strategy<degrees = [2, 1]>} : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// The second function's plan follows the first's.
// CHECK: plan.plan version
// CHECK: plan.program rank 0
// CHECK: %[[S:[a-z0-9_]+]] = plan.alloc @[[T:w[0-9]+]] [0, 0] [4, 6]
// CHECK-NEXT: plan.load %[[S]]
// CHECK-NEXT: %[[WF:[a-z0-9_]+]] = plan.alloc @[[T]] [0, 0] [8, 6] staging
// CHECK-NEXT: plan.collective all_gather %[[S]] -> %[[WF]] group [0, 1]
// CHECK: plan.kernel @op0 stage 0 ins(%{{.*}}, %[[WF]])
// CHECK: plan.free %[[WF]]
// The backward's gather is allocated before the op after it runs its
// backward (the loss), and the gradient's shard beside the gradient.
// CHECK: plan.phase backward
// CHECK-NEXT: %[[WB:[a-z0-9_]+]] = plan.alloc @[[T]] [0, 0] [8, 6] staging
// CHECK: plan.kernel_backward @op1
// CHECK: plan.collective all_gather %[[S]] -> %[[WB]] group [0, 1]
// CHECK-NEXT: %[[G:[a-z0-9_]+]] = plan.alloc @[[T]] [0, 0] [8, 6] grad
// CHECK-NEXT: %[[GS:[a-z0-9_]+]] = plan.alloc @[[T]] [0, 0] [4, 6] grad
// CHECK-NEXT: plan.kernel_backward @op0 stage 0 ins(%{{.*}}, %[[WB]]) {{.*}}(%[[G]])
// CHECK: plan.phase grad_sync
// CHECK-NEXT: plan.collective reduce_scatter %[[G]] -> %[[GS]] group [0, 1]
// CHECK: plan.phase update
// CHECK-NEXT: plan.update %[[S]], %[[GS]]
// CHECK-NOT: all_gather
// CHECK: plan.program rank 1
// CHECK: plan.alloc @[[T]] [4, 0] [8, 6]

// -----

// Two ZeRO-3 layers: the second layer's whole weight is allocated before the
// first layer runs and gathered right before the second (one op ahead, as
// FSDP prefetches), so that with --overlap the gather runs beside the first
// layer's kernel.
func.func @zero3_prefetch(%x: tensor<4x8xf32>, %labels: tensor<4xi64>) -> tensor<f32> {
  %w1 = ppc.weight "w1" : tensor<8x8xf32>
  %w2 = ppc.weight "w2" : tensor<8x6xf32>
  %h = ppc.linear %x, %w1 {ppc.strategy = #ppc.strategy<degrees = [2, 1, 1], zero = 3>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %y = ppc.linear %h, %w2 {ppc.strategy = #ppc.strategy<degrees = [2, 1, 1], zero = 3>} : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %l = ppc.softmax_cross_entropy %y, %labels {ppc.strategy = #ppc.strategy<degrees = [2, 1]>} : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK: plan.plan version
// CHECK: plan.program rank 0
// CHECK-NEXT: plan.phase forward
// CHECK-NEXT: %[[S2:[a-z0-9_]+]] = plan.alloc @[[T2:w[0-9]+]] [0, 0] [4, 6]
// CHECK-NEXT: plan.load %[[S2]]
// CHECK-NEXT: %[[P2:[a-z0-9_]+]] = plan.alloc @[[T2]] [0, 0] [8, 6] staging
// CHECK: plan.collective all_gather %{{.*}} -> %[[W1:[a-z0-9_]+]] group [0, 1]
// CHECK: plan.kernel @op0 stage 0 ins(%{{.*}}, %[[W1]])
// CHECK: plan.collective all_gather %[[S2]] -> %[[P2]] group [0, 1]
// CHECK: plan.kernel @op1 stage 0 ins(%{{.*}}, %[[P2]])
// CHECK: plan.free %[[P2]]
// CHECK: plan.phase backward

// -----

// A weight other ops read too cannot be kept in shards at its holder.
func.func @zero3_shared(%x: tensor<4x8xf32>, %labels: tensor<4xi64>) -> tensor<f32> {
  %w = ppc.weight "w" : tensor<8x8xf32>
  %h = ppc.matmul %x, %w {ppc.name = "first", ppc.strategy = #ppc.strategy<degrees = [2, 1, 1], zero = 3>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // expected-error @below {{weight 'w' is read by other ops too: ZeRO stage 3 of a shared weight is not lowered; use zero = 1 or 2 on 'first'}}
  %y = ppc.matmul %h, %w {ppc.strategy = #ppc.strategy<degrees = [2, 1, 1]>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = ppc.softmax_cross_entropy %y, %labels {ppc.strategy = #ppc.strategy<degrees = [2, 1]>} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}
