// ppc-alias-views: a flat-view op's kernel whose boxes visit the same
// elements in the same order goes; its result buffer becomes a view of its
// operand buffer (forward), its operand's gradient a view of its result's
// gradient (backward, where the kernel wrote that gradient first). Every
// condition that keeps a copy has a case below.
// RUN: ppc-opt %s --split-input-file --ppc-alias-views | FileCheck %s
// Running it twice changes nothing more.
// RUN: ppc-opt %s --split-input-file --ppc-alias-views --ppc-alias-views | FileCheck %s

// A batch-split reshape [2, 3, 4] -> [6, 4] on rank 1 (samples 1..2).
plan.plan version 4 ranks 2 attributes {batch_size = 2 : i64, machine = "cpux2", machine_description = "cpu:2", strategy = "{}"} {
  plan.tensor @x activation [2, 3, 4] f32
  plan.tensor @r activation [6, 4] f32
  plan.tensor @z activation [6, 4] f32
  plan.op @flat "ppc.reshape" [@x] -> [@r] needs_grad [true] attributes {} {flat_view}
  plan.op @act "ppc.relu" [@r] -> [@z] needs_grad [true] attributes {}
  plan.program rank 0 {
  }
  // CHECK-LABEL: plan.program rank 1
  plan.program rank 1 {
    // CHECK: %[[X:.*]] = plan.alloc @x [1, 0, 0] [2, 3, 4] uninitialized
    // CHECK-NEXT: plan.fill %[[X]]
    // CHECK-NEXT: %[[R:.*]] = plan.alloc @r [3, 0] [6, 4] view %[[X]]
    // CHECK-NEXT: %[[Z:.*]] = plan.alloc @z
    // CHECK-NEXT: plan.kernel @act stage 0 ins(%[[R]]) outs(%[[Z]])
    %x = plan.alloc @x [1, 0, 0] [2, 3, 4] uninitialized
    plan.fill %x, 1.0
    %r = plan.alloc @r [3, 0] [6, 4] uninitialized
    plan.kernel @flat stage 0 ins(%x) outs(%r)
    %z = plan.alloc @z [3, 0] [6, 4] uninitialized
    plan.kernel @act stage 0 ins(%r) outs(%z)
    // CHECK: %[[DZ:.*]] = plan.alloc @z [3, 0] [6, 4] grad
    // CHECK-NEXT: plan.fill %[[DZ]]
    // CHECK-NEXT: %[[DR:.*]] = plan.alloc @r [3, 0] [6, 4] grad uninitialized
    // CHECK-NEXT: plan.kernel_backward @act
    // CHECK-NEXT: %[[DX:.*]] = plan.alloc @x [1, 0, 0] [2, 3, 4] grad view %[[DR]]
    // CHECK-NEXT: plan.fill %[[DX]], 2.0
    // CHECK-NOT: plan.kernel_backward @flat
    %dz = plan.alloc @z [3, 0] [6, 4] grad
    plan.fill %dz, 1.0
    %dr = plan.alloc @r [3, 0] [6, 4] grad uninitialized
    plan.kernel_backward @act stage 0 ins(%r) outs(%z) output_grads(%dz) input_grads [true](%dr) overwrite [true]
    %dx = plan.alloc @x [1, 0, 0] [2, 3, 4] grad uninitialized
    plan.kernel_backward @flat stage 0 ins(%x) outs(%r) output_grads(%dr) input_grads [true](%dx) overwrite [true]
    // A later contribution to the operand's gradient writes its memory.
    plan.fill %dx, 2.0
    plan.free %dr
    plan.free %dx
  }
}

// -----

// The vocabulary split [2, 3, 8] -> [6, 8] keeps its innermost dim: a view.
// Splitting the sequence with the batch whole interleaves: a copy.
plan.plan version 4 ranks 1 attributes {batch_size = 2 : i64, machine = "cpu", machine_description = "cpu:1", strategy = "{}"} {
  plan.tensor @x activation [2, 3, 8] f32
  plan.tensor @r activation [6, 8] f32
  plan.op @flat "ppc.reshape" [@x] -> [@r] needs_grad [true] attributes {} {flat_view}
  // CHECK-LABEL: plan.program rank 0
  plan.program rank 0 {
    // CHECK: %[[X:.*]] = plan.alloc @x [0, 0, 4] [2, 3, 8]
    // CHECK-NEXT: plan.alloc @r [0, 4] [6, 8] view %[[X]]
    %x = plan.alloc @x [0, 0, 4] [2, 3, 8]
    %r = plan.alloc @r [0, 4] [6, 8]
    plan.kernel @flat stage 0 ins(%x) outs(%r)
    // CHECK: %[[X2:.*]] = plan.alloc @x [0, 0, 0] [2, 2, 8]
    // CHECK-NEXT: %[[R2:.*]] = plan.alloc @r [0, 0] [4, 8]{{$}}
    // CHECK-NEXT: plan.kernel @flat stage 0 ins(%[[X2]]) outs(%[[R2]])
    %x2 = plan.alloc @x [0, 0, 0] [2, 2, 8]
    %r2 = plan.alloc @r [0, 0] [4, 8]
    plan.kernel @flat stage 0 ins(%x2) outs(%r2)
  }
}

// -----

// Copies stay where sharing would change what the program computes.
plan.plan version 4 ranks 1 attributes {batch_size = 2 : i64, machine = "cpu", machine_description = "cpu:1", strategy = "{}"} {
  plan.tensor @x activation [4, 6] f32
  plan.tensor @r activation [24] f32
  plan.tensor @w weight [4, 6] f32
  plan.tensor @rw activation [24] f32
  plan.tensor @z activation [24] f32
  plan.op @flat "ppc.reshape" [@x] -> [@r] needs_grad [true] attributes {} {flat_view}
  plan.op @flatw "ppc.reshape" [@w] -> [@rw] needs_grad [true] attributes {} {flat_view}
  plan.op @copy "ppc.relu" [@x] -> [@r] needs_grad [true] attributes {}
  plan.op @act "ppc.relu" [@r] -> [@z] needs_grad [true] attributes {}
  // CHECK-LABEL: plan.program rank 0
  plan.program rank 0 {
    // The operand is written after the kernel.
    // CHECK: plan.kernel @flat stage 0 ins(%[[X:.*]]) outs
    // CHECK-NEXT: plan.fill %[[X]]
    %x = plan.alloc @x [0, 0] [4, 6]
    %r = plan.alloc @r [0] [24]
    plan.kernel @flat stage 0 ins(%x) outs(%r)
    plan.fill %x, 3.0
    // The result is written after the kernel.
    // CHECK: plan.kernel @flat stage 0 ins(%{{.*}}) outs(%[[R1:.*]])
    // CHECK-NEXT: plan.fill %[[R1]]
    %r1 = plan.alloc @r [0] [24]
    plan.kernel @flat stage 0 ins(%x) outs(%r1)
    plan.fill %r1, 3.0
    // The result was used before the kernel.
    // CHECK: plan.fill %[[R2:.*]], 4.0
    // CHECK-NEXT: plan.kernel @flat stage 0 ins(%{{.*}}) outs(%[[R2]])
    %r2 = plan.alloc @r [0] [24]
    plan.fill %r2, 4.0
    plan.kernel @flat stage 0 ins(%x) outs(%r2)
    // A weight's buffer is kept across steps.
    // CHECK: plan.kernel @flatw stage 0
    %w = plan.alloc @w [0, 0] [4, 6]
    %rw = plan.alloc @rw [0] [24]
    plan.kernel @flatw stage 0 ins(%w) outs(%rw)
    // An op that is no flat view.
    // CHECK: plan.kernel @copy stage 0
    %r3 = plan.alloc @r [0] [24]
    plan.kernel @copy stage 0 ins(%x) outs(%r3)
    // The backward kernel is not the gradient's first contribution.
    // CHECK: plan.kernel_backward @flat stage 0 ins(%{{.*}}) outs(%{{.*}}) output_grads(%{{.*}}) input_grads [true](%{{.*}}){{$}}
    %dr = plan.alloc @r [0] [24] grad
    %dx = plan.alloc @x [0, 0] [4, 6] grad
    plan.kernel_backward @flat stage 0 ins(%x) outs(%r) output_grads(%dr) input_grads [true](%dx)
    // The result's gradient is used after the kernel (another contribution).
    // CHECK: plan.kernel_backward @flat stage 0 ins(%{{.*}}) outs(%{{.*}}) output_grads(%[[DR2:.*]]) input_grads [true](%{{.*}}) overwrite [true]
    // CHECK: plan.kernel_backward @act stage 0 ins(%{{.*}}) outs(%{{.*}}) output_grads(%{{.*}}) input_grads [true](%[[DR2]])
    %dr2 = plan.alloc @r [0] [24] grad
    %dx2 = plan.alloc @x [0, 0] [4, 6] grad
    plan.kernel_backward @flat stage 0 ins(%x) outs(%r) output_grads(%dr2) input_grads [true](%dx2) overwrite [true]
    %z = plan.alloc @z [0] [24]
    %dz = plan.alloc @z [0] [24] grad
    plan.kernel_backward @act stage 0 ins(%r) outs(%z) output_grads(%dz) input_grads [true](%dr2)
    // The operand's gradient was used before the kernel.
    // CHECK: plan.fill %[[DX3:.*]], 5.0
    // CHECK-NEXT: plan.kernel_backward @flat stage 0 ins(%{{.*}}) outs(%{{.*}}) output_grads(%{{.*}}) input_grads [true](%[[DX3]]) overwrite [true]
    %dr3 = plan.alloc @r [0] [24] grad
    %dx3 = plan.alloc @x [0, 0] [4, 6] grad
    plan.fill %dx3, 5.0
    plan.kernel_backward @flat stage 0 ins(%x) outs(%r) output_grads(%dr3) input_grads [true](%dx3) overwrite [true]
    // CHECK-NOT: view
  }
}
