// linalg on tensors (torch-mlir's linalg backend), into ppc graph ops.
// RUN: ppc-opt %s --ppc-import-upstream --split-input-file | FileCheck %s

// linalg.fill + matmul: a matmul; a generic max(x, 0): relu; a generic add
// of a broadcast bias [N]: the bias reshaped to [1, N] then added.
// CHECK-LABEL: func.func @mlp
// CHECK-DAG: %[[W:.*]] = ppc.weight "weight0" {{.*}} : tensor<16x32xf32>
// CHECK-DAG: %[[B:.*]] = ppc.weight "weight1" {{.*}} : tensor<32xf32>
// CHECK: %[[M:.*]] = ppc.matmul %arg0, %[[W]] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
// CHECK: %[[BR:.*]] = ppc.reshape %[[B]] : tensor<32xf32> -> tensor<1x32xf32>
// CHECK: %[[A:.*]] = ppc.add %[[M]], %[[BR]] : (tensor<8x32xf32>, tensor<1x32xf32>) -> tensor<8x32xf32>
// CHECK: %[[R:.*]] = ppc.relu %[[A]] : tensor<8x32xf32>
// CHECK: return %[[R]]
// CHECK-NOT: linalg.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @mlp(%x: tensor<8x16xf32>) -> tensor<8x32xf32> {
  %w = arith.constant dense<0.5> : tensor<16x32xf32>
  %b = arith.constant dense<0.25> : tensor<32xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x32xf32>) -> tensor<8x32xf32>
  %m = linalg.matmul ins(%x, %w : tensor<8x16xf32>, tensor<16x32xf32>) outs(%f : tensor<8x32xf32>) -> tensor<8x32xf32>
  %a = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%m, %b : tensor<8x32xf32>, tensor<32xf32>) outs(%e : tensor<8x32xf32>) {
  ^bb0(%in: f32, %in1: f32, %out: f32):
    %s = arith.addf %in, %in1 : f32
    linalg.yield %s : f32
  } -> tensor<8x32xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<8x32xf32>) outs(%e : tensor<8x32xf32>) {
  ^bb0(%in: f32, %out: f32):
    %mx = arith.maximumf %in, %zero : f32
    linalg.yield %mx : f32
  } -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}

// -----

// A matmul accumulating into a tensor that is not zero adds it; batch_matmul;
// named elementwise ops; reshapes.
// CHECK-LABEL: func.func @named
// CHECK: %[[BM:.*]] = ppc.matmul %arg0, %arg1 : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
// CHECK: %[[ACC:.*]] = ppc.add %[[BM]], %arg2
// CHECK: %[[E:.*]] = ppc.exp %[[ACC]]
// CHECK: %[[T:.*]] = ppc.tanh %[[E]]
// CHECK: %[[MUL:.*]] = ppc.mul %[[T]], %[[T]]
// CHECK: %[[C:.*]] = ppc.reshape %[[MUL]] : tensor<2x4x4xf32> -> tensor<8x4xf32>
// CHECK: %[[X:.*]] = ppc.reshape %[[C]] : tensor<8x4xf32> -> tensor<8x2x2xf32>
// CHECK: return %[[X]]
func.func @named(%a: tensor<2x4x8xf32>, %b: tensor<2x8x4xf32>, %acc: tensor<2x4x4xf32>) -> tensor<8x2x2xf32> {
  %bm = linalg.batch_matmul ins(%a, %b : tensor<2x4x8xf32>, tensor<2x8x4xf32>) outs(%acc : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %e0 = tensor.empty() : tensor<2x4x4xf32>
  %e = linalg.exp ins(%bm : tensor<2x4x4xf32>) outs(%e0 : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %t = linalg.tanh ins(%e : tensor<2x4x4xf32>) outs(%e0 : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %m = linalg.mul ins(%t, %t : tensor<2x4x4xf32>, tensor<2x4x4xf32>) outs(%e0 : tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %c = tensor.collapse_shape %m [[0, 1], [2]] : tensor<2x4x4xf32> into tensor<8x4xf32>
  %x = tensor.expand_shape %c [[0], [1, 2]] output_shape [8, 2, 2] : tensor<8x4xf32> into tensor<8x2x2xf32>
  return %x : tensor<8x2x2xf32>
}

// -----

// Reductions as generics: a sum over d1 (init zero) and a max (init -inf).
// CHECK-LABEL: func.func @reductions
// CHECK: %[[S:.*]] = ppc.reduce_sum %arg0 {axes = array<i64: 1>, keep_dims = false} : tensor<8x4xf32> -> tensor<8xf32>
// CHECK: %[[M:.*]] = ppc.reduce_max %arg0 {axes = array<i64: 1>, keep_dims = false} : tensor<8x4xf32> -> tensor<8xf32>
// CHECK: %[[A:.*]] = ppc.add %[[S]], %[[M]]
// CHECK: return %[[A]]
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @reductions(%x: tensor<8x4xf32>) -> tensor<8xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %n = linalg.fill ins(%ninf : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %s = linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<8x4xf32>) outs(%z : tensor<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %m = linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<8x4xf32>) outs(%n : tensor<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.maximumf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %a = linalg.add ins(%s, %m : tensor<8xf32>, tensor<8xf32>) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  return %a : tensor<8xf32>
}

// -----

// torch-mlir's convolution: tensor.pad, then conv_2d_nchw_fchw into the bias
// broadcast over the output (a generic copy), which is added.
// CHECK-LABEL: func.func @conv
// CHECK: %[[W:.*]] = ppc.weight "weight0" {{.*}} : tensor<4x3x3x3xf32>
// CHECK: %[[B:.*]] = ppc.weight "weight1" {{.*}} : tensor<4xf32>
// CHECK: %[[P:.*]] = ppc.pad %arg0 {pads = array<i64: 0, 0, 1, 1, 0, 0, 1, 1>} : tensor<1x3x8x8xf32> -> tensor<1x3x10x10xf32>
// CHECK: %[[BR:.*]] = ppc.reshape %[[B]] : tensor<4xf32> -> tensor<1x4x1x1xf32>
// CHECK: %[[BB:.*]] = ppc.broadcast %[[BR]] : tensor<1x4x1x1xf32> -> tensor<1x4x8x8xf32>
// CHECK: %[[C:.*]] = ppc.conv2d %[[P]], %[[W]] : (tensor<1x3x10x10xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
// CHECK: %[[A:.*]] = ppc.add %[[C]], %[[BB]]
// CHECK: return %[[A]]
#nchw = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#chan = affine_map<(d0, d1, d2, d3) -> (d1)>
func.func @conv(%x: tensor<1x3x8x8xf32>) -> tensor<1x4x8x8xf32> {
  %w = arith.constant dense<0.1> : tensor<4x3x3x3xf32>
  %b = arith.constant dense<[0.1, 0.2, 0.3, 0.4]> : tensor<4xf32>
  %zero = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index, %l: index):
    tensor.yield %zero : f32
  } : tensor<1x3x8x8xf32> to tensor<1x3x10x10xf32>
  %e = tensor.empty() : tensor<1x4x8x8xf32>
  %bb = linalg.generic {indexing_maps = [#chan, #nchw], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%b : tensor<4xf32>) outs(%e : tensor<1x4x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<1x4x8x8xf32>
  %c = linalg.conv_2d_nchw_fchw {dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>} ins(%p, %w : tensor<1x3x10x10xf32>, tensor<4x3x3x3xf32>) outs(%bb : tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
  return %c : tensor<1x4x8x8xf32>
}

// -----

// A transpose as a generic copy through a permuted map, and linalg.transpose:
// a transpose and its inverse cancel.
// CHECK-LABEL: func.func @transposes
// CHECK: %[[T:.*]] = ppc.transpose %arg0 {permutation = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
// CHECK: %[[E:.*]] = ppc.exp %[[T]]
// CHECK: return %[[E]], %arg0
func.func @transposes(%x: tensor<4x8xf32>) -> (tensor<8x4xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<8x4xf32>
  %t = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xf32>) outs(%e : tensor<8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<8x4xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %u = linalg.transpose ins(%t : tensor<8x4xf32>) outs(%e2 : tensor<4x8xf32>) permutation = [1, 0]
  %ex = linalg.exp ins(%t : tensor<8x4xf32>) outs(%e : tensor<8x4xf32>) -> tensor<8x4xf32>
  return %ex, %u : tensor<8x4xf32>, tensor<4x8xf32>
}
