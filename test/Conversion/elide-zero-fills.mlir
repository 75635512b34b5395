// ppc-elide-zero-fills: an alloc whose first instruction writes the whole
// buffer is `uninitialized`; a gradient's fill with 0 goes where the next
// contribution can write it instead (a backward kernel whose only use of
// the buffer is one input grad, an accumulating copy or recv of the whole
// box), which then writes; everything else keeps its zeros.
// RUN: ppc-opt %s --ppc-elide-zero-fills | FileCheck %s
// Running it twice changes nothing more.
// RUN: ppc-opt %s --ppc-elide-zero-fills --ppc-elide-zero-fills | FileCheck %s

plan.plan version 4 ranks 2 attributes {batch_size = 4 : i64, loss = @loss, machine = "cpux2", machine_description = "cpu:2", optimizer = {kind = "sgd", lr = 0.1 : f64}, strategy = "{}"} {
  plan.tensor @x input [4, 8] f32
  plan.tensor @w weight [8, 3] f32 {init = 3 : i32, init_bound = 0.35 : f64}
  plan.tensor @y activation [4, 3] f32
  plan.tensor @z activation [4, 3] f32
  plan.tensor @loss activation [] f32 {is_output}
  plan.op @fc "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.op @sq "ppc.mul" [@y, @y] -> [@z] needs_grad [true, true] attributes {}
  plan.op @ls "ppc.reduce_sum" [@z] -> [@loss] needs_grad [true] attributes {}
  // CHECK-LABEL: plan.program rank 0
  plan.program rank 0 {
    // Loaded, and written by a forward kernel: no zeros needed.
    // CHECK: %[[X:.*]] = plan.alloc @x [0, 0] [4, 8] uninitialized
    // CHECK-NEXT: plan.load %[[X]]
    // CHECK: %[[Y:.*]] = plan.alloc @y [0, 0] [4, 3] uninitialized
    // CHECK-NEXT: plan.kernel @fc
    %x = plan.alloc @x [0, 0] [4, 8]
    plan.load %x
    %w = plan.alloc @w [0, 0] [8, 3]
    plan.load %w
    %y = plan.alloc @y [0, 0] [4, 3]
    plan.kernel @fc stage 0 ins(%x, %w) outs(%y)
    %z = plan.alloc @z [0, 0] [4, 3]
    plan.kernel @sq stage 0 ins(%y, %y) outs(%z)
    %loss = plan.alloc @loss [] []
    plan.kernel @ls stage 0 ins(%z) outs(%loss)
    // A scratch buffer keeps its zeros.
    // CHECK: plan.alloc [0] [4]{{$}}
    %s = plan.alloc [0] [4]
    plan.free %s
    // The seed's fill with 1 writes it; the fill stays.
    // CHECK: %[[DL:.*]] = plan.alloc @loss [] [] grad uninitialized
    // CHECK-NEXT: plan.fill %[[DL]], 1.0
    %dl = plan.alloc @loss [] [] grad
    plan.fill %dl, 1.0
    // The first contribution to dz writes it: the fill goes.
    // CHECK: %[[DZ:.*]] = plan.alloc @z [0, 0] [4, 3] grad uninitialized
    // CHECK-NEXT: plan.kernel_backward @ls {{.*}} input_grads [true](%[[DZ]]) overwrite [true]
    %dz = plan.alloc @z [0, 0] [4, 3] grad
    plan.fill %dz, 0.0
    plan.kernel_backward @ls stage 0 ins(%z) outs(%loss) output_grads(%dl) input_grads [true] (%dz)
    // dy is both input grads of y * y: the kernel adds twice, so it keeps
    // its fill.
    // CHECK: %[[DY:.*]] = plan.alloc @y [0, 0] [4, 3] grad uninitialized
    // CHECK-NEXT: plan.fill %[[DY]], 0.0
    // CHECK-NEXT: plan.kernel_backward @sq {{.*}} input_grads [true, true](%[[DY]], %[[DY]]){{$}}
    %dy = plan.alloc @y [0, 0] [4, 3] grad
    plan.fill %dy, 0.0
    plan.kernel_backward @sq stage 0 ins(%y, %y) outs(%z) output_grads(%dz) input_grads [true, true] (%dy, %dy)
    // An accumulating copy of the whole box writes; the second adds.
    // CHECK: %[[DW:.*]] = plan.alloc @w [0, 0] [8, 3] grad uninitialized
    // CHECK-NEXT: %[[DWP:.*]] = plan.alloc @w [0, 0] [8, 3] grad uninitialized
    // CHECK-NEXT: plan.kernel_backward @fc {{.*}} input_grads [false, true](%[[DWP]]) overwrite [true]
    // CHECK-NEXT: plan.copy %[[DWP]] -> %[[DW]] [0, 0] [8, 3]{{$}}
    // CHECK-NEXT: plan.copy %[[DWP]] -> %[[DW]] [0, 0] [8, 3] accumulate
    %dw = plan.alloc @w [0, 0] [8, 3] grad
    plan.fill %dw, 0.0
    %dwp = plan.alloc @w [0, 0] [8, 3] grad
    plan.fill %dwp, 0.0
    plan.kernel_backward @fc stage 0 ins(%x, %w) outs(%y) output_grads(%dy) input_grads [false, true] (%dwp)
    plan.copy %dwp -> %dw [0, 0] [8, 3] accumulate
    plan.copy %dwp -> %dw [0, 0] [8, 3] accumulate
    // A copy of part of the box leaves the rest at 0: the fill stays.
    // CHECK: %[[PART:.*]] = plan.alloc @w [0, 0] [8, 3] grad uninitialized
    // CHECK-NEXT: plan.fill %[[PART]], 0.0
    // CHECK-NEXT: plan.copy %[[DWP]] -> %[[PART]] [0, 0] [4, 3] accumulate
    %part = plan.alloc @w [0, 0] [8, 3] grad
    plan.fill %part, 0.0
    plan.copy %dwp -> %part [0, 0] [4, 3] accumulate
    // A receive of the whole box writes it.
    // CHECK: %[[R:.*]] = plan.alloc @w [0, 0] [8, 3] grad uninitialized
    // CHECK-NEXT: plan.recv %[[R]] [0, 0] [8, 3] from 1 tag 3{{$}}
    %r = plan.alloc @w [0, 0] [8, 3] grad
    plan.fill %r, 0.0
    plan.recv %r [0, 0] [8, 3] from 1 tag 3 accumulate
    // Read before anything writes it (an accumulating copy into a fresh
    // buffer): zeros kept.
    // CHECK: %[[FRESH:.*]] = plan.alloc @w [0, 0] [8, 3] grad{{$}}
    %fresh = plan.alloc @w [0, 0] [8, 3] grad
    plan.copy %dwp -> %fresh [0, 0] [8, 3] accumulate
    plan.update %w, %dw
  }
  plan.program rank 1 {
    %r = plan.alloc @w [0, 0] [8, 3] grad
    plan.send %r [0, 0] [8, 3] to 0 tag 3
  }
}
