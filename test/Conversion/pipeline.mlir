// A 2-stage pipeline of 2 micro-batches (1F1B): the first linear on rank 0,
// the second and the loss on rank 1. Each micro-batch is half the batch
// (rows [0, 2) and [2, 4)); rank 0 runs its warm-up forward of micro-batch 0
// and sends it on at once, then the forward of micro-batch 1, then the
// backwards, each after receiving its gradient; weight gradients accumulate
// over the micro-batches into one buffer, updated once; each micro-batch's
// buffers go after its backward on the stage. The loss is summed over the
// micro-batches on rank 1 and sent to rank 0's output.
// RUN: ppc-opt %s --ppc-attach-machine=machine=cpux2 --ppc-lower-to-plan | FileCheck %s
// GPipe: every forward, then every backward.
// RUN: sed 's/"1f1b"/"gpipe"/' %s | ppc-opt --ppc-attach-machine=machine=cpux2 --ppc-lower-to-plan | FileCheck %s --check-prefix=GPIPE

func.func @main(%x: tensor<4x8xf32>, %labels: tensor<4xi64>) -> tensor<f32> attributes {ppc.pipeline = #ppc.pipeline<microbatches = 2, schedule = "1f1b", first_devices = [0, 1], devices = [1, 1]>} {
  %w1 = ppc.weight "w1" : tensor<8x16xf32>
  %w2 = ppc.weight "w2" : tensor<16x6xf32>
  %h = ppc.linear %x, %w1 {ppc.strategy = #ppc.strategy<degrees = [1, 1, 1]>} : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %y = ppc.linear %h, %w2 {ppc.strategy = #ppc.strategy<degrees = [1, 1, 1], start = 1, stage = 1>} : (tensor<4x16xf32>, tensor<16x6xf32>) -> tensor<4x6xf32>
  %l = ppc.softmax_cross_entropy %y, %labels {ppc.strategy = #ppc.strategy<degrees = [1, 1], start = 1, stage = 1>} : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK: plan.program rank 0
// CHECK-NEXT: plan.phase forward
// CHECK: %[[X0:[0-9]+]] = plan.alloc @in0 [0, 0] [2, 8]
// CHECK: %[[H0:[0-9]+]] = plan.alloc @t{{[0-9]+}} [0, 0] [2, 16]
// CHECK-NEXT: plan.kernel @op0 stage 0 ins(%[[X0]], %[[W1:[0-9]+]]) outs(%[[H0]])
// CHECK-NEXT: plan.send %[[H0]] [0, 0] [2, 16] to 1
// CHECK-NEXT: plan.phase forward
// CHECK: %[[H1:[0-9]+]] = plan.alloc @t{{[0-9]+}} [2, 0] [4, 16]
// CHECK-NEXT: plan.kernel @op0 stage 0 ins(%{{[0-9]+}}, %[[W1]]) outs(%[[H1]])
// CHECK-NEXT: plan.send %[[H1]] [2, 0] [4, 16] to 1
// CHECK-NEXT: plan.phase backward
// The first contribution to a gradient writes it: no fills
// (ppc-elide-zero-fills); micro-batch 1's backward adds into dW1.
// CHECK-NEXT: %[[DH0:[0-9]+]] = plan.alloc @t{{[0-9]+}} [0, 0] [2, 16] grad uninitialized
// CHECK-NEXT: plan.recv %[[DH0]] [0, 0] [2, 16] from 1 tag {{[0-9]+}}{{$}}
// CHECK-NEXT: %[[DW1:[0-9]+]] = plan.alloc @w{{[0-9]+}} [0, 0] [8, 16] grad uninitialized
// CHECK-NEXT: plan.kernel_backward @op0 stage 0 {{.*}} outs(%[[H0]]) output_grads(%[[DH0]]) input_grads [false, true](%[[DW1]]) overwrite [true]
// CHECK-NEXT: plan.free %[[H0]]
// CHECK-NEXT: plan.free %[[DH0]]
// CHECK-NEXT: plan.phase backward
// CHECK: plan.recv %{{[0-9]+}} [2, 0] [4, 16] from 1 tag {{[0-9]+}}{{$}}
// CHECK-NEXT: plan.kernel_backward @op0 stage 0 {{.*}} outs(%[[H1]]) {{.*}} input_grads [false, true](%[[DW1]]){{$}}
// CHECK: %[[LOSS:[0-9]+]] = plan.alloc @t{{[0-9]+}} [] []
// CHECK-NEXT: plan.recv %[[LOSS]] [] [] from 1
// CHECK-NEXT: plan.output %[[LOSS]]
// CHECK: plan.update %[[W1]], %[[DW1]]
// CHECK-NOT: plan.update

// Rank 1: forward and backward of micro-batch 0, then of micro-batch 1.
// CHECK: plan.program rank 1
// CHECK-NEXT: %[[TOTAL:[0-9]+]] = plan.alloc @t{{[0-9]+}} [] [] uninitialized
// CHECK-NEXT: plan.phase forward
// CHECK-NEXT: %[[A0:[0-9]+]] = plan.alloc @t{{[0-9]+}} [0, 0] [2, 16]
// CHECK: plan.recv %[[A0]] [0, 0] [2, 16] from 0
// CHECK: plan.phase loss
// CHECK: %[[L0:[0-9]+]] = plan.alloc @t{{[0-9]+}} [] []
// CHECK-NEXT: %[[MAX0:[0-9]+]] = plan.alloc [0] [2]
// CHECK-NEXT: %[[SUMS0:[0-9]+]] = plan.alloc [0, 0] [2, 2]
// CHECK-NEXT: plan.kernel @op2 stage 0 ins(%{{[0-9]+}}, %{{[0-9]+}}) outs(%[[L0]]) scratch(%[[MAX0]], %[[SUMS0]])
// CHECK-NEXT: plan.kernel @op2 stage 1
// CHECK-NEXT: plan.kernel @op2 stage 2
// The first micro-batch's loss writes the total, the second adds to it.
// CHECK-NEXT: plan.copy %[[L0]] -> %[[TOTAL]] [] []{{$}}
// CHECK-NEXT: plan.phase backward
// CHECK-NEXT: %[[SEED:[0-9]+]] = plan.alloc @t{{[0-9]+}} [] [] grad
// CHECK-NEXT: plan.fill %[[SEED]], 1.0
// CHECK: plan.kernel_backward @op1 stage 0 ins(%[[A0]], %[[W2:[0-9]+]]) {{.*}} input_grads [true, true](%[[DA0:[0-9]+]], %[[DW2:[0-9]+]])
// CHECK-NEXT: plan.send %[[DA0]] [0, 0] [2, 16] to 0
// CHECK-NEXT: plan.free %[[A0]]
// CHECK: plan.phase forward
// CHECK-NEXT: %[[A1:[0-9]+]] = plan.alloc @t{{[0-9]+}} [2, 0] [4, 16]
// CHECK: plan.recv %[[A1]] [2, 0] [4, 16] from 0
// CHECK: plan.kernel_backward @op1 stage 0 ins(%[[A1]], %[[W2]]) {{.*}} input_grads [true, true](%{{[0-9]+}}, %[[DW2]])
// CHECK: plan.send %[[TOTAL]] [] [] to 0
// CHECK: plan.update %[[W2]], %[[DW2]]

// GPIPE: plan.program rank 1
// GPIPE: plan.phase forward
// GPIPE: plan.kernel @op2 stage 0
// GPIPE-NOT: plan.phase backward
// GPIPE: plan.phase forward
// GPIPE-NOT: plan.phase backward
// GPIPE: plan.kernel @op2 stage 2
// GPIPE-NEXT: plan.copy
// GPIPE-NEXT: plan.phase backward
// GPIPE: plan.phase backward
// GPIPE: plan.phase grad_sync
