// RUN: ppc-opt %s | ppc-opt | FileCheck %s

// A tiny linear layer with a cross-entropy loss, data parallel over two
// ranks: every instruction of the plan dialect prints back as written.

// CHECK-LABEL: plan.plan version 4 ranks 2 attributes
// CHECK-SAME: batch_size = 4 : i64
// CHECK-SAME: loss = @loss
// CHECK-SAME: machine = "cpux2"
// CHECK-SAME: machine_description = "cpu:2"
// CHECK-SAME: optimizer = {kind = "sgd", lr = 1.000000e-01 : f64}
// CHECK-SAME: strategy = "{\22fc\22: \22dp\22}"
plan.plan version 4 ranks 2 attributes {batch_size = 4 : i64, loss = @loss, machine = "cpux2", machine_description = "cpu:2", optimizer = {kind = "sgd", lr = 0.1 : f64}, strategy = "{\"fc\": \"dp\"}"} {
  // CHECK-NEXT: plan.tensor @x input [4, 8] f32 {model_name = "input.x"}
  // CHECK-NEXT: plan.tensor @labels input [4] i64 {int_max = 3 : i64}
  // CHECK-NEXT: plan.tensor @w weight [8, 3] f32 {init = 3 : i32, init_bound = 3.500000e-01 : f64}
  // CHECK-NEXT: plan.tensor @b weight [3] f32 {init = 4 : i32, value = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>}
  // CHECK-NEXT: plan.tensor @y activation [4, 3] f32
  // CHECK-NEXT: plan.tensor @loss activation [] f32 {is_output}
  // CHECK-NEXT: plan.tensor @yr activation [12] f32
  plan.tensor @x input [4, 8] f32 {model_name = "input.x"}
  plan.tensor @labels input [4] i64 {int_max = 3 : i64}
  plan.tensor @w weight [8, 3] f32 {init = 3 : i32, init_bound = 0.35 : f64}
  plan.tensor @b weight [3] f32 {init = 4 : i32, value = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>}
  plan.tensor @y activation [4, 3] f32
  plan.tensor @loss activation [] f32 {is_output}
  plan.tensor @yr activation [12] f32

  // CHECK-NEXT: plan.op @fc "ppc.linear" [@x, @w, @b] -> [@y] needs_grad [false, true, true] attributes {approximation = 1 : i32, perm = array<i64: 1, 0>, scales = [5.000000e-01, 2.000000e+00], transpose_rhs = false}
  // CHECK-NEXT: plan.op @ce "ppc.cross_entropy" [@y, @labels] -> [@loss] needs_grad [true, false] attributes {reduction = "mean"} {model_name = "loss/ce"}
  // CHECK-NEXT: plan.op @flat "ppc.reshape" [@y] -> [@yr] needs_grad [true] attributes {} {flat_view}
  plan.op @fc "ppc.linear" [@x, @w, @b] -> [@y] needs_grad [false, true, true] attributes {approximation = 1 : i32, perm = array<i64: 1, 0>, scales = [0.5, 2.0], transpose_rhs = false}
  plan.op @ce "ppc.cross_entropy" [@y, @labels] -> [@loss] needs_grad [true, false] attributes {reduction = "mean"} {model_name = "loss/ce"}
  plan.op @flat "ppc.reshape" [@y] -> [@yr] needs_grad [true] attributes {} {flat_view}

  // CHECK-NEXT: plan.program rank 0 {
  // CHECK-NEXT:   plan.phase forward
  // CHECK-NEXT:   %[[X:.*]] = plan.alloc @x [0, 0] [2, 8]
  // CHECK-NEXT:   plan.load %[[X]]
  // CHECK-NEXT:   %[[L:.*]] = plan.alloc @labels [0] [2]
  // CHECK-NEXT:   plan.load %[[L]]
  // CHECK-NEXT:   %[[W:.*]] = plan.alloc @w [0, 0] [8, 3]
  // CHECK-NEXT:   plan.load %[[W]]
  // CHECK-NEXT:   %[[B:.*]] = plan.alloc @b [0] [3]
  // CHECK-NEXT:   plan.load %[[B]]
  // CHECK-NEXT:   %[[Y:.*]] = plan.alloc @y [0, 0] [2, 3]
  // CHECK-NEXT:   plan.kernel @fc stage 0 ins(%[[X]], %[[W]], %[[B]]) outs(%[[Y]])
  // CHECK-NEXT:   %[[YR:.*]] = plan.alloc @yr [0] [6] view %[[Y]]
  // CHECK-NEXT:   %[[YF:.*]] = plan.alloc @y [0, 0] [4, 3]
  // CHECK-NEXT:   plan.collective all_gather %[[Y]] -> %[[YF]] group [0, 1]
  // CHECK-NEXT:   plan.phase loss
  // CHECK-NEXT:   %[[LOSS:.*]] = plan.alloc @loss [] []
  // CHECK-NEXT:   plan.kernel @ce stage 0 ins(%[[Y]], %[[L]]) outs(%[[LOSS]])
  // CHECK-NEXT:   plan.collective all_reduce %[[LOSS]] group [0, 1]
  // CHECK-NEXT:   plan.output %[[LOSS]]
  // CHECK-NEXT:   plan.phase backward
  // CHECK-NEXT:   %[[DLOSS:.*]] = plan.alloc @loss [] [] grad
  // CHECK-NEXT:   plan.fill %[[DLOSS]], 1.000000e+00
  // CHECK-NEXT:   %[[DY:.*]] = plan.alloc @y [0, 0] [2, 3] grad uninitialized
  // CHECK-NEXT:   plan.kernel_backward @ce stage 0 ins(%[[Y]], %[[L]]) outs(%[[LOSS]]) output_grads(%[[DLOSS]]) input_grads [true, false](%[[DY]]) overwrite [true]
  // CHECK-NEXT:   %[[DW:.*]] = plan.alloc @w [0, 0] [8, 3] grad
  // CHECK-NEXT:   %[[DB:.*]] = plan.alloc @b [0] [3] grad
  // CHECK-NEXT:   %[[S:.*]] = plan.alloc [0] [16]
  // CHECK-NEXT:   plan.kernel_backward @fc stage 1 ins(%[[X]], %[[W]], %[[B]]) outs() output_grads(%[[DY]]) input_grads [false, true, true](%[[DW]], %[[DB]]) scratch(%[[S]])
  // CHECK-NEXT:   plan.free %[[S]]
  // CHECK-NEXT:   plan.phase grad_sync
  // CHECK-NEXT:   plan.collective all_reduce %[[DW]] group [0, 1] {reduction = "max"}
  // CHECK-NEXT:   plan.recv %[[DB]] [0] [3] from 1 tag 7 accumulate
  // CHECK-NEXT:   plan.send %[[DB]] [0] [3] to 1 tag 8
  // CHECK-NEXT:   plan.collective broadcast %[[DB]] group [1, 0] {root = 1 : i64}
  // CHECK-NEXT:   plan.phase update
  // CHECK-NEXT:   plan.update %[[W]], %[[DW]]
  // CHECK-NEXT:   plan.update %[[B]], %[[DB]]
  // CHECK-NEXT:   %[[WT:.*]] = plan.alloc @w [0, 0] [4, 3]
  // CHECK-NEXT:   plan.copy %[[W]] -> %[[WT]] [0, 0] [4, 3]
  // CHECK-NEXT:   plan.copy %[[W]] -> %[[WT]] [2, 0] [4, 3] accumulate
  // CHECK-NEXT:   plan.free %[[WT]]
  // CHECK-NEXT:   %[[WS:.*]] = plan.alloc @w [0, 0] [8, 3] staging
  // CHECK-NEXT:   plan.free %[[WS]]
  // CHECK-NEXT:   plan.free %[[X]]
  // CHECK-NEXT: }
  plan.program rank 0 {
    plan.phase forward
    %x = plan.alloc @x [0, 0] [2, 8]
    plan.load %x
    %l = plan.alloc @labels [0] [2]
    plan.load %l
    %w = plan.alloc @w [0, 0] [8, 3]
    plan.load %w
    %b = plan.alloc @b [0] [3]
    plan.load %b
    %y = plan.alloc @y [0, 0] [2, 3]
    plan.kernel @fc stage 0 ins(%x, %w, %b) outs(%y)
    %yr = plan.alloc @yr [0] [6] view %y
    %yf = plan.alloc @y [0, 0] [4, 3]
    plan.collective all_gather %y -> %yf group [0, 1]
    plan.phase loss
    %loss = plan.alloc @loss [] []
    plan.kernel @ce stage 0 ins(%y, %l) outs(%loss)
    plan.collective all_reduce %loss group [0, 1]
    plan.output %loss
    plan.phase backward
    %dloss = plan.alloc @loss [] [] grad
    plan.fill %dloss, 1.0
    %dy = plan.alloc @y [0, 0] [2, 3] grad uninitialized
    plan.kernel_backward @ce stage 0 ins(%y, %l) outs(%loss) output_grads(%dloss) input_grads [true, false] (%dy) overwrite [true]
    %dw = plan.alloc @w [0, 0] [8, 3] grad
    %db = plan.alloc @b [0] [3] grad
    %s = plan.alloc [0] [16]
    plan.kernel_backward @fc stage 1 ins(%x, %w, %b) outs() output_grads(%dy) input_grads [false, true, true] (%dw, %db) scratch(%s)
    plan.free %s
    plan.phase grad_sync
    plan.collective all_reduce %dw group [0, 1] {reduction = "max"}
    plan.recv %db [0] [3] from 1 tag 7 accumulate
    plan.send %db [0] [3] to 1 tag 8
    plan.collective broadcast %db group [1, 0] {root = 1 : i64}
    plan.phase update
    plan.update %w, %dw
    plan.update %b, %db
    %wt = plan.alloc @w [0, 0] [4, 3]
    plan.copy %w -> %wt [0, 0] [4, 3]
    plan.copy %w -> %wt [2, 0] [4, 3] accumulate
    plan.free %wt
    %ws = plan.alloc @w [0, 0] [8, 3] staging
    plan.free %ws
    plan.free %x
  }

  // CHECK-NEXT: plan.program rank 1 {
  // CHECK-NEXT:   plan.phase forward
  // CHECK-NEXT:   %[[X1:.*]] = plan.alloc @x [2, 0] [4, 8]
  // CHECK-NEXT:   plan.load %[[X1]]
  // CHECK-NEXT:   %[[L1:.*]] = plan.alloc @labels [2] [4]
  // CHECK-NEXT:   plan.load %[[L1]]
  // CHECK-NEXT:   %[[W1:.*]] = plan.alloc @w [0, 0] [8, 3]
  // CHECK-NEXT:   plan.load %[[W1]]
  // CHECK-NEXT:   %[[B1:.*]] = plan.alloc @b [0] [3]
  // CHECK-NEXT:   plan.load %[[B1]]
  // CHECK-NEXT:   %[[Y1:.*]] = plan.alloc @y [2, 0] [4, 3]
  // CHECK-NEXT:   plan.kernel @fc stage 0 ins(%[[X1]], %[[W1]], %[[B1]]) outs(%[[Y1]])
  // CHECK-NEXT:   %[[YF1:.*]] = plan.alloc @y [0, 0] [4, 3]
  // CHECK-NEXT:   plan.collective all_gather %[[Y1]] -> %[[YF1]] group [0, 1]
  // CHECK-NEXT:   plan.phase loss
  // CHECK-NEXT:   %[[LOSS1:.*]] = plan.alloc @loss [] []
  // CHECK-NEXT:   plan.kernel @ce stage 0 ins(%[[Y1]], %[[L1]]) outs(%[[LOSS1]])
  // CHECK-NEXT:   plan.collective all_reduce %[[LOSS1]] group [0, 1]
  // CHECK-NEXT:   plan.phase backward
  // CHECK-NEXT:   %[[DLOSS1:.*]] = plan.alloc @loss [] [] grad
  // CHECK-NEXT:   plan.fill %[[DLOSS1]], 1.000000e+00
  // CHECK-NEXT:   %[[DY1:.*]] = plan.alloc @y [2, 0] [4, 3] grad
  // CHECK-NEXT:   plan.kernel_backward @ce stage 0 ins(%[[Y1]], %[[L1]]) outs(%[[LOSS1]]) output_grads(%[[DLOSS1]]) input_grads [true, false](%[[DY1]])
  // CHECK-NEXT:   %[[DW1:.*]] = plan.alloc @w [0, 0] [8, 3] grad
  // CHECK-NEXT:   %[[DB1:.*]] = plan.alloc @b [0] [3] grad
  // CHECK-NEXT:   %[[S1:.*]] = plan.alloc [0] [16]
  // CHECK-NEXT:   plan.kernel_backward @fc stage 1 ins(%[[X1]], %[[W1]], %[[B1]]) outs() output_grads(%[[DY1]]) input_grads [false, true, true](%[[DW1]], %[[DB1]]) scratch(%[[S1]])
  // CHECK-NEXT:   plan.free %[[S1]]
  // CHECK-NEXT:   plan.phase grad_sync
  // CHECK-NEXT:   plan.collective all_reduce %[[DW1]] group [0, 1] {reduction = "max"}
  // CHECK-NEXT:   plan.send %[[DB1]] [0] [3] to 0 tag 7
  // CHECK-NEXT:   plan.recv %[[DB1]] [0] [3] from 0 tag 8
  // CHECK-NEXT:   plan.collective broadcast %[[DB1]] group [1, 0] {root = 1 : i64}
  // CHECK-NEXT:   plan.phase update
  // CHECK-NEXT:   plan.update %[[W1]], %[[DW1]]
  // CHECK-NEXT:   plan.update %[[B1]], %[[DB1]]
  // CHECK-NEXT:   %[[T1:.*]] = plan.alloc [0, 0] [2, 3]
  // CHECK-NEXT:   %[[R1:.*]] = plan.alloc [0, 0] [2, 3]
  // CHECK-NEXT:   plan.collective reduce_scatter %[[T1]] -> %[[R1]] group [1] {axis = 1 : i64}
  // CHECK-NEXT:   plan.collective all_to_all %[[T1]] -> %[[R1]] group [1, 0]
  // CHECK-NEXT:   plan.free %[[X1]]
  // CHECK-NEXT: }
  // CHECK-NEXT: }
  plan.program rank 1 {
    plan.phase forward
    %x = plan.alloc @x [2, 0] [4, 8]
    plan.load %x
    %l = plan.alloc @labels [2] [4]
    plan.load %l
    %w = plan.alloc @w [0, 0] [8, 3]
    plan.load %w
    %b = plan.alloc @b [0] [3]
    plan.load %b
    %y = plan.alloc @y [2, 0] [4, 3]
    plan.kernel @fc stage 0 ins(%x, %w, %b) outs(%y)
    %yf = plan.alloc @y [0, 0] [4, 3]
    plan.collective all_gather %y -> %yf group [0, 1]
    plan.phase loss
    %loss = plan.alloc @loss [] []
    plan.kernel @ce stage 0 ins(%y, %l) outs(%loss)
    plan.collective all_reduce %loss group [0, 1]
    plan.phase backward
    %dloss = plan.alloc @loss [] [] grad
    plan.fill %dloss, 1.0
    %dy = plan.alloc @y [2, 0] [4, 3] grad
    plan.kernel_backward @ce stage 0 ins(%y, %l) outs(%loss) output_grads(%dloss) input_grads [true, false] (%dy)
    %dw = plan.alloc @w [0, 0] [8, 3] grad
    %db = plan.alloc @b [0] [3] grad
    %s = plan.alloc [0] [16]
    plan.kernel_backward @fc stage 1 ins(%x, %w, %b) outs() output_grads(%dy) input_grads [false, true, true] (%dw, %db) scratch(%s)
    plan.free %s
    plan.phase grad_sync
    plan.collective all_reduce %dw group [0, 1] {reduction = "max"}
    plan.send %db [0] [3] to 0 tag 7
    plan.recv %db [0] [3] from 0 tag 8
    plan.collective broadcast %db group [1, 0] {root = 1 : i64}
    plan.phase update
    plan.update %w, %dw
    plan.update %b, %db
    %t = plan.alloc [0, 0] [2, 3]
    %r = plan.alloc [0, 0] [2, 3]
    plan.collective reduce_scatter %t -> %r group [1] {axis = 1 : i64}
    plan.collective all_to_all %t -> %r group [1, 0]
    plan.free %x
  }
}
