// Every parallel op MaterializeResharding inserts names the exchange the
// communication plan makes of it (geometry::classifyExchange): rows split
// over 4 devices read whole by a column-parallel linear are an all-gather,
// rows to columns an all-to-all, a move to another device point-to-point,
// and partial sums an all-reduce or (scatter) a reduce-scatter.
// RUN: ppc-opt %s --ppc-attach-machine=machine=cpux4 --ppc-materialize-resharding | FileCheck %s
// The report counts the same kinds.
// RUN: ppc-opt %s --ppc-attach-machine=machine=cpux4 --ppc-simulate | FileCheck %s --check-prefix=SIM
// The lowering moves the all-gather and the all-to-alls as one collective
// each, and their gradients as one reduce-scatter or all-to-all; the plan
// moves the bytes the simulator priced
// (e2e-transformer-megatron-sp-np4 runs such a plan against the single
// device).
// RUN: ppc-opt %s --ppc-add-loss --ppc-attach-machine=machine=cpux4 --ppc-lower-to-plan="traffic=%t.json" | FileCheck %s --check-prefix=PLAN
// RUN: FileCheck %s --check-prefix=TRAFFIC < %t.json

func.func @main(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %w1 = ppc.weight "w1" : tensor<8x8xf32>
  %w2 = ppc.weight "w2" : tensor<8x8xf32>
  %a = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [4, 1]>} : tensor<8x8xf32>
  %b = ppc.linear %a, %w1 {ppc.strategy = #ppc.strategy<degrees = [1, 4, 1]>} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %c = ppc.relu %b {ppc.strategy = #ppc.strategy<degrees = [4, 1]>} : tensor<8x8xf32>
  %d = ppc.linear %c, %w2 {ppc.strategy = #ppc.strategy<degrees = [1, 1, 4], scatter = 0>} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %e = ppc.linear %d, %w2 {ppc.strategy = #ppc.strategy<degrees = [1, 1, 4]>} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %f = ppc.gelu %e {ppc.strategy = #ppc.strategy<degrees = [1, 1], start = 1>} : tensor<8x8xf32>
  return %f : tensor<8x8xf32>
}

// CHECK:      %[[A:.*]] = ppc.relu
// CHECK-NEXT: %[[GA:.*]] = ppc.replicate %[[A]] {{.*}} as "all_gather"
// CHECK-NEXT: %[[B:.*]] = ppc.linear %[[GA]]
// CHECK-NEXT: %[[TB:.*]] = ppc.repartition %[[B]] {{.*}} as "all_to_all"
// CHECK-NEXT: %[[C:.*]] = ppc.relu %[[TB]]
// CHECK-NEXT: %[[TC:.*]] = ppc.repartition %[[C]] {{.*}} as "all_to_all"
// CHECK-NEXT: %[[D:.*]] = ppc.linear %[[TC]]
// CHECK-NEXT: %[[SD:.*]] = ppc.reduce %[[D]] {{.*}} as "reduce_scatter"
// CHECK-NEXT: %[[TD:.*]] = ppc.repartition %[[SD]] {{.*}} as "all_to_all"
// CHECK-NEXT: %[[E:.*]] = ppc.linear %[[TD]]
// CHECK-NEXT: %[[SE:.*]] = ppc.reduce %[[E]] {{.*}} as "all_reduce"
// The gelu on device 1 reads the copy of the sum there; its result goes
// to device 0 alone.
// CHECK-NEXT: %[[F:.*]] = ppc.gelu %[[SE]]
// CHECK-NEXT: ppc.repartition %[[F]] {{.*}} as "point_to_point"

// Forward: the gather, three all-to-alls. Backward: the gather's gradients
// summed by their owners (a reduce-scatter), the all-to-alls' gradients
// (two; the third's, of a reduce-scattered sum, go whole to every copy: an
// all-gather), and the gelu's gradient sent from device 1 to the other
// copies of the sum. Of the 256 B of an 8x8 float32 value, a gather over 4
// devices brings each three quarters (768 B in all), an all-to-all moves
// 16 B between each ordered pair (192 B).
// SIM:      exchanges between ops by kind:
// SIM-NEXT: point_to_point 1 768 B
// SIM-NEXT: all_gather 2 1.50 KiB
// SIM-NEXT: reduce_scatter 1 768 B
// SIM-NEXT: all_to_all 5 960 B

// PLAN-LABEL: plan.program rank 0
// PLAN:       plan.kernel @op0 stage 0 ins(%{{.*}}) outs(%[[A0:[0-9]+]])
// PLAN-NEXT:  %[[G0:[0-9]+]] = plan.alloc @{{.*}} [0, 0] [8, 8]
// PLAN:       plan.collective all_gather %[[A0]] -> %[[G0]] group [0, 1, 2, 3]
// PLAN-NEXT:  plan.kernel @op1 stage 0 ins(%[[G0]], %{{.*}}) outs(%[[B0:[0-9]+]])
// PLAN:       plan.collective all_to_all %[[B0]] -> %[[TB0:[0-9]+]] group [0, 1, 2, 3]
// PLAN-NEXT:  plan.kernel @op2 stage 0 ins(%[[TB0]])
// PLAN-NOT:   plan.send
// PLAN:       plan.phase loss
// PLAN:       plan.phase backward
// PLAN:       plan.kernel_backward @op1 stage 0 {{.*}} input_grads [true, true](%[[DG0:[0-9]+]], %{{.*}})
// PLAN:       %[[DA0:[0-9]+]] = plan.alloc @{{.*}} [0, 0] [2, 8] grad
// PLAN-NEXT:  plan.collective reduce_scatter %[[DG0]] -> %[[DA0]] group [0, 1, 2, 3]
// PLAN-NEXT:  %[[GA0:[0-9]+]] = plan.alloc @{{.*}} [0, 0] [2, 8] grad
// PLAN-NEXT:  plan.copy %[[DA0]] -> %[[GA0]] [0, 0] [2, 8]
// PLAN-LABEL: plan.program rank 3
// PLAN:       plan.collective all_gather {{.*}} group [0, 1, 2, 3]
// PLAN:       plan.phase backward
// PLAN:       plan.collective all_to_all {{.*}} -> {{.*}} group [0, 1, 2, 3]
// PLAN:       plan.collective reduce_scatter {{.*}} -> {{.*}} group [0, 1, 2, 3]

// TRAFFIC: "agree": true
// TRAFFIC: "agree": true
