// A strategy as upstream shard annotations on linalg.generic ops.
// RUN: ppc-opt %S/Inputs/megatron-mlp.mlir --ppc-export-shard | FileCheck %s
// RUN: ppc-opt %s --ppc-export-shard --split-input-file | FileCheck %s --check-prefix=VIEW

// The views' strides 1 and 2 make a 2x2 grid, the larger stride first.
// CHECK: shard.grid @grid(shape = 2x2)
// Weights become arguments (each device is handed its shard).
// CHECK: func.func @forward(%[[X:.*]]: tensor<64x128xf32> {ppc.name = "x"}, %[[W1:.*]]: tensor<128x256xf32> {ppc.name = "fc1"}, %[[W2:.*]]: tensor<256x16xf32> {ppc.name = "fc2"})
// Column-parallel matmul: the batch (m) on axis 0, n on axis 1.
// CHECK: %[[S0:.*]] = shard.sharding @grid split_axes = {{\[\[}}0]] : !shard.sharding
// CHECK: %[[XA:.*]] = shard.shard %[[X]] to %[[S0]] annotate_for_users
// CHECK: %[[S1:.*]] = shard.sharding @grid split_axes = {{\[\[}}], [1]] : !shard.sharding
// CHECK: %[[W1A:.*]] = shard.shard %[[W1]] to %[[S1]] annotate_for_users
// CHECK: %[[FILL:.*]] = linalg.fill
// CHECK: %[[MM:.*]] = linalg.generic {indexing_maps = [#[[LHS:.*]], #[[RHS:.*]], #[[OUT:.*]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[XA]], %[[W1A]] : {{.*}}) outs(%[[FILL]] : {{.*}})
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: %[[S2:.*]] = shard.sharding @grid split_axes = {{\[\[}}0], [1]]
// CHECK: shard.shard %[[MM]] to %[[S2]] : tensor<64x256xf32>
// The relu reads and writes the same layout.
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// CHECK: arith.maximumf
// Row-parallel: k split along axis 1; the result split on axis 0 only.
// CHECK: %[[S3:.*]] = shard.sharding @grid split_axes = {{\[\[}}1]]
// CHECK: shard.shard %[[W2]] to %[[S3]] annotate_for_users
// CHECK: %[[MM2:.*]] = linalg.generic
// CHECK: %[[S4:.*]] = shard.sharding @grid split_axes = {{\[\[}}0]]
// CHECK: %[[Y:.*]] = shard.shard %[[MM2]] to %[[S4]] : tensor<64x16xf32>
// CHECK: return %[[Y]]
// CHECK-NOT: ppc.

// A strided view (the batch at stride 1, n at stride 2) and a linear layer
// with a bias, added by a second generic where the result lives.
// VIEW: shard.grid @grid(shape = 2x2)
// VIEW-LABEL: func.func @strided
// VIEW: shard.sharding @grid split_axes = {{\[\[}}1]]
// VIEW: shard.sharding @grid split_axes = {{\[\[}}0]] : !shard.sharding
// VIEW: linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction"]
// VIEW: %[[R:.*]] = shard.sharding @grid split_axes = {{\[\[}}1], [0]]
// VIEW: shard.sharding @grid split_axes = {{\[\[}}0]]
// VIEW: linalg.generic {{.*}}iterator_types = ["parallel", "parallel"]
// VIEW: arith.addf
// VIEW: shard.sharding @grid split_axes = {{\[\[}}1], [0]]
func.func @strided(%x: tensor<8x16xf32>) -> tensor<8x4xf32> {
  %w = ppc.weight "w" : tensor<4x16xf32>
  %b = ppc.weight "b" : tensor<4xf32>
  %y = ppc.linear %x, %w, %b {transpose_weight = true, ppc.strategy = #ppc.strategy<degrees = [2, 2, 1], strides = [1, 2]>} : (tensor<8x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}

// -----

// A split reduction with `scatter = 0`: exported as all-reduced, the
// consumer's annotation slicing it (upstream shard-partition of LLVM 22
// crashes on a result split along its own reduction's axes).
// VIEW: shard.grid @grid(shape = 4)
// VIEW-LABEL: func.func @scatter
// VIEW: shard.sharding @grid split_axes = {{\[\[}}], [0]]
// VIEW: shard.sharding @grid split_axes = {{\[\[}}0]]
// VIEW: %[[MM:.*]] = linalg.generic
// VIEW: %[[S:.*]] = shard.sharding @grid split_axes = {{\[\[}}]]
// VIEW: shard.shard %[[MM]] to %[[S]] : tensor<8x4xf32>
func.func @scatter(%x: tensor<8x16xf32>) -> tensor<8x4xf32> {
  %w = ppc.weight "w" : tensor<16x4xf32>
  %y = ppc.matmul %x, %w {ppc.strategy = #ppc.strategy<degrees = [1, 1, 4], scatter = 0>} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}
