// A weight used by two ops that read it in different pieces is one parameter:
// it lives where its first user (the holder) reads it, split over both ranks;
// the second user, whole on rank 0, gathers it from the holder's pieces and
// sends its gradient back to accumulate there before the update.
// RUN: ppc-opt %s --ppc-attach-machine=machine=cpux2 --ppc-lower-to-plan | FileCheck %s

func.func @main(%x: tensor<4x8xf32>, %t: tensor<4x8xf32>) -> tensor<f32> {
  %w = ppc.weight "w" : tensor<8xf32>
  %a = ppc.add %x, %w {ppc.strategy = #ppc.strategy<degrees = [1, 2]>} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %b = ppc.mul %a, %w {ppc.strategy = #ppc.strategy<degrees = [1, 1]>} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %l = ppc.mse_loss %b, %t : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK: plan.program rank 0
// CHECK: plan.phase forward
// The holder's piece on rank 0, loaded once.
// CHECK: %[[W0:[0-9]+]] = plan.alloc @[[SYM:w[0-9]+]] [0] [4]
// CHECK-NEXT: plan.load %[[W0]]
// CHECK: plan.kernel @op0 stage 0 ins(%{{[0-9]+}}, %[[W0]])
// The second user's whole copy: one half local, one half from rank 1.
// CHECK: %[[WHOLE:[0-9]+]] = plan.alloc @[[SYM]] [0] [8]
// CHECK: plan.copy %[[W0]] -> %[[WHOLE]] [0] [4]
// CHECK-NEXT: plan.recv %[[WHOLE]] [4] [8] from 1
// CHECK: plan.kernel @op1 stage 0 ins(%{{[0-9]+}}, %[[WHOLE]])
// CHECK: plan.phase backward
// CHECK: %[[DWHOLE:[0-9]+]] = plan.alloc @[[SYM]] [0] [8] grad
// CHECK: plan.kernel_backward @op1 {{.*}}input_grads [true, true](%{{[0-9]+}}, %[[DWHOLE]])
// Its gradient goes back to the holder's pieces and accumulates: the copy
// is the first contribution, which writes (no fill), the holder's own
// backward adds.
// CHECK: %[[DW0:[0-9]+]] = plan.alloc @[[SYM]] [0] [4] grad uninitialized
// CHECK-NOT: plan.fill %[[DW0]]
// CHECK: plan.send %[[DWHOLE]] [4] [8] to 1
// CHECK: plan.copy %[[DWHOLE]] -> %[[DW0]] [0] [4]{{$}}
// CHECK: plan.kernel_backward @op0 {{.*}}input_grads [false, true](%[[DW0]]){{$}}
// Only the holder's pieces are updated; the gathered copy is step-local.
// CHECK: plan.phase update
// CHECK-NEXT: plan.update %[[W0]], %[[DW0]]
// CHECK-NOT: plan.update
// CHECK: plan.free %[[WHOLE]]

// CHECK: plan.program rank 1
// CHECK: %[[W1:[0-9]+]] = plan.alloc @[[SYM]] [4] [8]
// CHECK: plan.send %[[W1]] [4] [8] to 0
// CHECK: plan.phase backward
// CHECK: %[[DW1:[0-9]+]] = plan.alloc @[[SYM]] [4] [8] grad
// CHECK: plan.recv %[[DW1]] [4] [8] from 0 tag {{[0-9]+}}{{$}}
// CHECK: plan.kernel_backward @op0 {{.*}}input_grads [false, true](%[[DW1]])
// CHECK: plan.phase update
// CHECK-NEXT: plan.update %[[W1]], %[[DW1]]
