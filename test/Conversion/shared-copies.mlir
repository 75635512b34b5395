// Readers of one value on one rank share one gathered copy: relu and
// sigmoid on rank 1 both read %a from rank 0, which crosses once; their
// gradients of it are summed on rank 1 and cross back once. The simulator
// prices the same (one transfer each way).
// RUN: ppc-opt %s --ppc-attach-machine=machine=cpux2 --ppc-lower-to-plan | FileCheck %s

func.func @main(%x: tensor<4x8xf32>, %labels: tensor<4xi64>) -> tensor<f32> {
  %a = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [1, 1]>} : tensor<4x8xf32>
  %b = ppc.relu %a {ppc.strategy = #ppc.strategy<degrees = [1, 1], start = 1>} : tensor<4x8xf32>
  %c = ppc.sigmoid %a {ppc.strategy = #ppc.strategy<degrees = [1, 1], start = 1>} : tensor<4x8xf32>
  %s = ppc.add %b, %c {ppc.strategy = #ppc.strategy<degrees = [1, 1], start = 1>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %l = ppc.softmax_cross_entropy %s, %labels {ppc.strategy = #ppc.strategy<degrees = [1, 1], start = 1>} : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK: plan.program rank 0
// CHECK: plan.kernel @op0
// CHECK-NEXT: plan.send %{{.*}} [0, 0] [4, 8] to 1
// CHECK-NOT: plan.send
// CHECK: plan.phase backward
// CHECK: plan.recv %{{.*}} [0, 0] [4, 8] from 1 tag {{[0-9]+}}{{$}}
// CHECK-NOT: plan.recv
// CHECK: plan.program rank 1
// CHECK: %[[A:[a-z0-9_]+]] = plan.alloc @t{{[0-9]+}} [0, 0] [4, 8]
// CHECK: plan.recv %[[A]] [0, 0] [4, 8] from 0
// CHECK: plan.kernel @op1 stage 0 ins(%[[A]])
// The second reader copies from the first's buffer.
// CHECK: %[[A2:[a-z0-9_]+]] = plan.alloc @t{{[0-9]+}} [0, 0] [4, 8]
// CHECK-NEXT: %{{.*}} = plan.alloc
// CHECK-NEXT: plan.copy %[[A]] -> %[[A2]] [0, 0] [4, 8]
// CHECK-NEXT: plan.kernel @op2 stage 0 ins(%[[A2]])
// CHECK-NOT: plan.recv
// CHECK: plan.phase backward
// Its gradient is the first reader's gradient's first contribution (the
// copy writes it), the first reader's backward adds; it goes back once.
// CHECK: plan.kernel_backward @op2 {{.*}} input_grads [true](%[[G2:[a-z0-9_]+]])
// CHECK: %[[G:[a-z0-9_]+]] = plan.alloc @t{{[0-9]+}} [0, 0] [4, 8] grad
// CHECK: plan.copy %[[G2]] -> %[[G]] [0, 0] [4, 8]{{$}}
// CHECK-NEXT: plan.kernel_backward @op1 {{.*}} input_grads [true](%[[G]]){{$}}
// CHECK-NEXT: plan.send %[[G]] [0, 0] [4, 8] to 0
// CHECK-NOT: plan.send
