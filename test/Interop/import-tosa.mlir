// TOSA as torch-mlir emits it, into ppc graph ops.
// RUN: ppc-opt %s --ppc-import-upstream --split-input-file | FileCheck %s

// Arguments are inputs; float constants of more than one element weights,
// zero points and shifts disappear.
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: %[[X:.*]]: tensor<8x16xf32> {ppc.name = "arg0"}
// CHECK-DAG: %[[W:.*]] = ppc.weight "weight0" {value = dense<5.000000e-01> : tensor<1x16x32xf32>}
// CHECK-DAG: %[[B:.*]] = ppc.weight "weight1" {value = {{.*}}} : tensor<1x1x32xf32>
// CHECK: %[[R:.*]] = ppc.reshape %[[X]] : tensor<8x16xf32> -> tensor<1x8x16xf32>
// CHECK: %[[M:.*]] = ppc.matmul %[[R]], %[[W]]
// CHECK: %[[A:.*]] = ppc.add %[[M]], %[[B]]
// CHECK: %[[RELU:.*]] = ppc.relu %[[A]] : tensor<1x8x32xf32>
// CHECK: %[[CLIP:.*]] = ppc.clip %[[RELU]] {max = 6.000000e+00 : f64, min = -1.000000e+00 : f64}
// CHECK: return %[[CLIP]]
// CHECK-NOT: tosa.
func.func @mlp(%arg0: tensor<8x16xf32>) -> tensor<1x8x32xf32> {
  %w = "tosa.const"() <{values = dense<0.5> : tensor<1x16x32xf32>}> : () -> tensor<1x16x32xf32>
  %b = "tosa.const"() <{values = dense<[[[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]]]> : tensor<1x1x32xf32>}> : () -> tensor<1x1x32xf32>
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %s = tosa.const_shape {values = dense<[1, 8, 16]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %x = tosa.reshape %arg0, %s : (tensor<8x16xf32>, !tosa.shape<3>) -> tensor<1x8x16xf32>
  %h = tosa.matmul %x, %w, %zp, %zp : (tensor<1x8x16xf32>, tensor<1x16x32xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x8x32xf32>
  %hb = tosa.add %h, %b : (tensor<1x8x32xf32>, tensor<1x1x32xf32>) -> tensor<1x8x32xf32>
  %r = tosa.clamp %hb {min_val = 0.0 : f32, max_val = 3.40282347E+38 : f32} : (tensor<1x8x32xf32>) -> tensor<1x8x32xf32>
  %c = tosa.clamp %r {min_val = -1.0 : f32, max_val = 6.0 : f32} : (tensor<1x8x32xf32>) -> tensor<1x8x32xf32>
  return %c : tensor<1x8x32xf32>
}

// -----

// Decomposed softmax: exp(x - max(x)) * reciprocal(sum(...)).
// CHECK-LABEL: func.func @softmax
// CHECK: %[[S:.*]] = ppc.softmax %arg0 {axis = 1 : i64} : tensor<8x4xf32>
// CHECK-NEXT: return %[[S]]
func.func @softmax(%y: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %m = tosa.reduce_max %y {axis = 1 : i32} : (tensor<8x4xf32>) -> tensor<8x1xf32>
  %d = tosa.sub %y, %m : (tensor<8x4xf32>, tensor<8x1xf32>) -> tensor<8x4xf32>
  %e = tosa.exp %d : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %s = tosa.reduce_sum %e {axis = 1 : i32} : (tensor<8x4xf32>) -> tensor<8x1xf32>
  %rc = tosa.reciprocal %s : (tensor<8x1xf32>) -> tensor<8x1xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %p = tosa.mul %e, %rc, %shift : (tensor<8x4xf32>, tensor<8x1xf32>, tensor<1xi8>) -> tensor<8x4xf32>
  return %p : tensor<8x4xf32>
}

// -----

// The reductions and unary ops on their own.
// CHECK-LABEL: func.func @unary
// CHECK: %[[MAX:.*]] = ppc.reduce_max %arg0 {axes = array<i64: 1>} : tensor<8x4xf32> -> tensor<8x1xf32>
// CHECK: %[[SUM:.*]] = ppc.reduce_sum %arg0 {axes = array<i64: 0>} : tensor<8x4xf32> -> tensor<1x4xf32>
// CHECK: %[[SUB:.*]] = ppc.sub %arg0, %[[MAX]]
// CHECK: %[[MUL:.*]] = ppc.mul %[[SUB]], %[[SUM]]
// CHECK: %[[E:.*]] = ppc.exp %[[MUL]]
// CHECK: %[[T:.*]] = ppc.tanh %[[E]]
// CHECK: %[[SG:.*]] = ppc.sigmoid %[[T]]
// CHECK: %[[ERF:.*]] = ppc.erf %[[SG]]
// CHECK: %[[RS:.*]] = ppc.rsqrt %[[ERF]]
// CHECK: %[[RC:.*]] = ppc.reciprocal %[[RS]]
// CHECK: %[[CAST:.*]] = ppc.cast %[[RC]] : tensor<8x4xf32> -> tensor<8x4xbf16>
// CHECK: return %[[CAST]]
func.func @unary(%x: tensor<8x4xf32>) -> tensor<8x4xbf16> {
  %m = tosa.reduce_max %x {axis = 1 : i32} : (tensor<8x4xf32>) -> tensor<8x1xf32>
  %s = tosa.reduce_sum %x {axis = 0 : i32} : (tensor<8x4xf32>) -> tensor<1x4xf32>
  %d = tosa.sub %x, %m : (tensor<8x4xf32>, tensor<8x1xf32>) -> tensor<8x4xf32>
  %shift = "tosa.const"() <{values = dense<0> : tensor<1xi8>}> : () -> tensor<1xi8>
  %p = tosa.mul %d, %s, %shift : (tensor<8x4xf32>, tensor<1x4xf32>, tensor<1xi8>) -> tensor<8x4xf32>
  %e = tosa.exp %p : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %t = tosa.tanh %e : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %sg = tosa.sigmoid %t : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %erf = tosa.erf %sg : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %rs = tosa.rsqrt %erf : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %rc = tosa.reciprocal %rs : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %c = tosa.cast %rc : (tensor<8x4xf32>) -> tensor<8x4xbf16>
  return %c : tensor<8x4xbf16>
}

// -----

// Data movement: transpose, concat, slice.
// CHECK-LABEL: func.func @movement
// CHECK: %[[T:.*]] = ppc.transpose %arg0 {permutation = array<i64: 1, 0>} : tensor<8x4xf32> -> tensor<4x8xf32>
// CHECK: %[[C:.*]] = ppc.concat %[[T]], %arg1 {axis = 1 : i64} : (tensor<4x8xf32>, tensor<4x2xf32>) -> tensor<4x10xf32>
// CHECK: %[[S:.*]] = ppc.slice %[[C]] {starts = array<i64: 1, 2>, steps = array<i64: 1, 1>} : tensor<4x10xf32> -> tensor<2x5xf32>
// CHECK: return %[[S]]
func.func @movement(%x: tensor<8x4xf32>, %y: tensor<4x2xf32>) -> tensor<2x5xf32> {
  %t = tosa.transpose %x {perms = array<i32: 1, 0>} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %c = tosa.concat %t, %y {axis = 1 : i32} : (tensor<4x8xf32>, tensor<4x2xf32>) -> tensor<4x10xf32>
  %start = tosa.const_shape {values = dense<[1, 2]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %size = tosa.const_shape {values = dense<[2, 5]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %s = tosa.slice %c, %start, %size : (tensor<4x10xf32>, !tosa.shape<2>, !tosa.shape<2>) -> tensor<2x5xf32>
  return %s : tensor<2x5xf32>
}

// -----

// NHWC convolution and pooling: NCHW ppc ops between transposes; TOSA's pad
// [top, bottom, left, right] becomes ppc's [top, left, bottom, right].
// CHECK-LABEL: func.func @cnn
// CHECK: %[[W:.*]] = ppc.weight "weight0"
// CHECK: %[[B:.*]] = ppc.weight "weight1"
// CHECK: %[[XT:.*]] = ppc.transpose %arg0 {permutation = array<i64: 0, 3, 1, 2>} : tensor<2x8x8x3xf32> -> tensor<2x3x8x8xf32>
// CHECK: %[[WT:.*]] = ppc.transpose %[[W]] {permutation = array<i64: 0, 3, 1, 2>} : tensor<4x3x3x3xf32> -> tensor<4x3x3x3xf32>
// CHECK: %[[CONV:.*]] = ppc.conv2d %[[XT]], %[[WT]], %[[B]] {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
// Back-to-back transposes between NHWC ops cancel.
// CHECK: %[[MAX:.*]] = ppc.max_pool2d %[[CONV]] {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : tensor<2x4x8x8xf32> -> tensor<2x4x4x4xf32>
// CHECK: %[[AVG:.*]] = ppc.avg_pool2d %[[MAX]] {kernel = array<i64: 3, 3>, pads = array<i64: 1, 0, 1, 0>} : tensor<2x4x4x4xf32> -> tensor<2x4x4x2xf32>
// CHECK: %[[OUT:.*]] = ppc.transpose %[[AVG]] {permutation = array<i64: 0, 2, 3, 1>} : tensor<2x4x4x2xf32> -> tensor<2x4x2x4xf32>
// CHECK: return %[[OUT]]
func.func @cnn(%x: tensor<2x8x8x3xf32>) -> tensor<2x4x2x4xf32> {
  %w = "tosa.const"() <{values = dense<0.1> : tensor<4x3x3x3xf32>}> : () -> tensor<4x3x3x3xf32>
  %b = "tosa.const"() <{values = dense<[0.1, 0.2, 0.3, 0.4]> : tensor<4xf32>}> : () -> tensor<4xf32>
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %c = tosa.conv2d %x, %w, %b, %zp, %zp {acc_type = f32, dilation = array<i64: 1, 1>, pad = array<i64: 1, 1, 1, 1>, stride = array<i64: 1, 1>} : (tensor<2x8x8x3xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x8x8x4xf32>
  %m = tosa.max_pool2d %c {kernel = array<i64: 2, 2>, pad = array<i64: 0, 0, 0, 0>, stride = array<i64: 2, 2>} : (tensor<2x8x8x4xf32>) -> tensor<2x4x4x4xf32>
  %a = tosa.avg_pool2d %m, %zp, %zp {acc_type = f32, kernel = array<i64: 3, 3>, pad = array<i64: 1, 1, 0, 0>, stride = array<i64: 1, 1>} : (tensor<2x4x4x4xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<2x4x2x4xf32>
  return %a : tensor<2x4x2x4xf32>
}
