// RUN: ppc-opt %s | ppc-opt | FileCheck %s
// RUN: ppc-opt %s --mlir-print-op-generic | ppc-opt | FileCheck %s

// Round trip of every ppc op, in custom and generic form.

// CHECK-LABEL: func.func @values
func.func @values() -> (tensor<256x784xf32>, tensor<64xf32>, tensor<2xf32>, tensor<2x2xf32>) {
  // CHECK: ppc.weight "fc1.weight" : tensor<256x784xf32>
  %0 = ppc.weight "fc1.weight" : tensor<256x784xf32>
  // CHECK: ppc.weight "bn1.running_mean" frozen : tensor<64xf32>
  %1 = ppc.weight "bn1.running_mean" frozen : tensor<64xf32>
  // CHECK: ppc.weight "bias" {value = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>} : tensor<2xf32>
  %2 = ppc.weight "bias" {value = dense<[1.0, 2.0]> : tensor<2xf32>} : tensor<2xf32>
  // CHECK: ppc.constant dense<0.000000e+00> : tensor<2x2xf32>
  %3 = ppc.constant dense<0.0> : tensor<2x2xf32>
  return %0, %1, %2, %3 : tensor<256x784xf32>, tensor<64xf32>, tensor<2xf32>, tensor<2x2xf32>
}

// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x32x8xf32>,
                     %v: tensor<2x4x32x6xf32>, %q2: tensor<16x8xf32>) {
  // CHECK: ppc.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true, ratio = 1.000000e-01 : f64, scale = 1.250000e-01 : f64, seed = 7 : i64} : (tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x6xf32>) -> tensor<2x4x16x6xf32>
  %0 = ppc.attention %q, %k, %v {scale = 0.125 : f64, causal = true, ratio = 0.1 : f64, seed = 7 : i64} : (tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x6xf32>) -> tensor<2x4x16x6xf32>
  // CHECK: ppc.attention %{{.*}}, %{{.*}}, %{{.*}} : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %1 = ppc.attention %q2, %q2, %q2 : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  // Positions in zigzag order of 4 pairs (8 chunks of 2).
  // CHECK: ppc.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true, zigzag = 4 : i64} : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %2 = ppc.attention %q2, %q2, %q2 {causal = true, zigzag = 4 : i64} : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  return
}

// Heads after positions: [B, S, H, D] operands read as they are.
// CHECK-LABEL: func.func @attention_bshd
func.func @attention_bshd(%q: tensor<2x16x4x8xf32>, %k: tensor<2x32x4x8xf32>,
                          %v: tensor<2x32x4x6xf32>) {
  // CHECK: ppc.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true, layout = "bshd"} : (tensor<2x16x4x8xf32>, tensor<2x32x4x8xf32>, tensor<2x32x4x6xf32>) -> tensor<2x16x4x6xf32>
  %0 = ppc.attention %q, %k, %v {causal = true, layout = "bshd"} : (tensor<2x16x4x8xf32>, tensor<2x32x4x8xf32>, tensor<2x32x4x6xf32>) -> tensor<2x16x4x6xf32>
  return
}

// CHECK-LABEL: func.func @contractions
func.func @contractions(%a: tensor<2x4x16x8xf32>, %b: tensor<1x4x32x16xf32>,
                        %x: tensor<32x784xf32>, %w: tensor<256x784xf32>,
                        %bias: tensor<256xf32>, %img: tensor<2x8x32x32xf32>,
                        %filter: tensor<16x2x3x3xf32>, %fb: tensor<16xf32>) {
  // CHECK: ppc.matmul %{{.*}}, %{{.*}} {transpose_lhs = true, transpose_rhs = true} : (tensor<2x4x16x8xf32>, tensor<1x4x32x16xf32>) -> tensor<2x4x8x32xf32>
  %0 = ppc.matmul %a, %b {transpose_lhs = true, transpose_rhs = true} : (tensor<2x4x16x8xf32>, tensor<1x4x32x16xf32>) -> tensor<2x4x8x32xf32>
  // CHECK: ppc.linear %{{.*}}, %{{.*}}, %{{.*}} {transpose_weight = true} : (tensor<32x784xf32>, tensor<256x784xf32>, tensor<256xf32>) -> tensor<32x256xf32>
  %1 = ppc.linear %x, %w, %bias {transpose_weight = true} : (tensor<32x784xf32>, tensor<256x784xf32>, tensor<256xf32>) -> tensor<32x256xf32>
  // CHECK: ppc.linear %{{.*}}, %{{.*}} : (tensor<32x784xf32>, tensor<784x784xf32>) -> tensor<32x784xf32>
  %sq = ppc.weight "sq" : tensor<784x784xf32>
  %2 = ppc.linear %x, %sq : (tensor<32x784xf32>, tensor<784x784xf32>) -> tensor<32x784xf32>
  // CHECK: ppc.conv2d %{{.*}}, %{{.*}}, %{{.*}} {dilations = array<i64: 2, 2>, groups = 4 : i64, pads = array<i64: 2, 2, 2, 2>, strides = array<i64: 2, 2>} : (tensor<2x8x32x32xf32>, tensor<16x2x3x3xf32>, tensor<16xf32>) -> tensor<2x16x16x16xf32>
  %3 = ppc.conv2d %img, %filter, %fb {strides = array<i64: 2, 2>, pads = array<i64: 2, 2, 2, 2>, dilations = array<i64: 2, 2>, groups = 4 : i64} : (tensor<2x8x32x32xf32>, tensor<16x2x3x3xf32>, tensor<16xf32>) -> tensor<2x16x16x16xf32>
  // CHECK: ppc.conv_transpose2d %{{.*}}, %{{.*}}, %{{.*}} {dilations = array<i64: 2, 1>, groups = 2 : i64, output_padding = array<i64: 1, 0>, pads = array<i64: 1, 0, 2, 1>, strides = array<i64: 2, 3>} : (tensor<2x16x16x16xf32>, tensor<16x4x3x3xf32>, tensor<8xf32>) -> tensor<2x8x33x47xf32>
  %ctw = ppc.weight "ct.weight" : tensor<16x4x3x3xf32>
  %ctb = ppc.weight "ct.bias" : tensor<8xf32>
  %4 = ppc.conv_transpose2d %3, %ctw, %ctb {strides = array<i64: 2, 3>, pads = array<i64: 1, 0, 2, 1>, dilations = array<i64: 2, 1>, output_padding = array<i64: 1, 0>, groups = 2 : i64} : (tensor<2x16x16x16xf32>, tensor<16x4x3x3xf32>, tensor<8xf32>) -> tensor<2x8x33x47xf32>
  // CHECK: ppc.conv_transpose2d %{{.*}}, %{{.*}} : (tensor<2x16x16x16xf32>, tensor<16x3x2x2xf32>) -> tensor<2x3x17x17xf32>
  %ctw2 = ppc.weight "ct2.weight" : tensor<16x3x2x2xf32>
  %5 = ppc.conv_transpose2d %3, %ctw2 : (tensor<2x16x16x16xf32>, tensor<16x3x2x2xf32>) -> tensor<2x3x17x17xf32>
  return
}

// CHECK-LABEL: func.func @pooling_and_norms
func.func @pooling_and_norms(%x: tensor<2x4x8x8xf32>, %c: tensor<4xf32>,
                             %s: tensor<2x5x16xf32>, %g: tensor<16xf32>) {
  // CHECK: ppc.max_pool2d %{{.*}} {ceil_mode = true, kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>} : tensor<2x4x8x8xf32> -> tensor<2x4x4x4xf32>
  %0 = ppc.max_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, ceil_mode = true} : tensor<2x4x8x8xf32> -> tensor<2x4x4x4xf32>
  // CHECK: ppc.avg_pool2d %{{.*}} {count_include_pad = true, kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>} : tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
  %1 = ppc.avg_pool2d %x {kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, count_include_pad = true} : tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
  // CHECK: ppc.global_avg_pool %{{.*}} : tensor<2x4x8x8xf32> -> tensor<2x4x1x1xf32>
  %2 = ppc.global_avg_pool %x : tensor<2x4x8x8xf32> -> tensor<2x4x1x1xf32>
  // CHECK: ppc.batch_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-03 : f64, momentum = 0.98999999999999999 : f64} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  %3 = ppc.batch_norm %x, %c, %c, %c, %c {epsilon = 1.0e-3 : f64, momentum = 0.99 : f64} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  // CHECK: ppc.layer_norm %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x5x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x5x16xf32>
  %4 = ppc.layer_norm %s, %g, %g : (tensor<2x5x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x5x16xf32>
  // CHECK: ppc.layer_norm %{{.*}}, %{{.*}} {axis = 2 : i64, epsilon = 9.9999999999999995E-7 : f64} : (tensor<2x5x16xf32>, tensor<16xf32>) -> tensor<2x5x16xf32>
  %5 = ppc.layer_norm %s, %g {axis = 2 : i64, epsilon = 1.0e-6 : f64} : (tensor<2x5x16xf32>, tensor<16xf32>) -> tensor<2x5x16xf32>
  // CHECK: ppc.layer_norm %{{.*}}, %{{.*}} {rms = true} : (tensor<2x5x16xf32>, tensor<16xf32>) -> tensor<2x5x16xf32>
  %rms = ppc.layer_norm %s, %g {rms = true} : (tensor<2x5x16xf32>, tensor<16xf32>) -> tensor<2x5x16xf32>
  // CHECK: ppc.softmax %{{.*}} : tensor<2x5x16xf32>
  %6 = ppc.softmax %s : tensor<2x5x16xf32>
  // CHECK: ppc.log_softmax %{{.*}} {axis = 1 : i64} : tensor<2x5x16xf32>
  %7 = ppc.log_softmax %s {axis = 1 : i64} : tensor<2x5x16xf32>
  return
}

// CHECK-LABEL: func.func @resize
func.func @resize(%x: tensor<2x4x8x8xf32>) {
  // CHECK: ppc.resize %{{.*}} {scales = array<f64: 2.000000e+00, 2.000000e+00>} : tensor<2x4x8x8xf32> -> tensor<2x4x16x16xf32>
  %0 = ppc.resize %x {scales = array<f64: 2.0, 2.0>} : tensor<2x4x8x8xf32> -> tensor<2x4x16x16xf32>
  // CHECK: ppc.resize %{{.*}} {coordinate_transformation_mode = "align_corners", mode = "linear", scales = array<f64: 5.000000e-01, 1.500000e+00>} : tensor<2x4x8x8xf32> -> tensor<2x4x4x12xf32>
  %1 = ppc.resize %x {mode = "linear", coordinate_transformation_mode = "align_corners", scales = array<f64: 0.5, 1.5>} : tensor<2x4x8x8xf32> -> tensor<2x4x4x12xf32>
  // CHECK: ppc.resize %{{.*}} {cubic_coeff_a = -5.000000e-01 : f64, exclude_outside = true, mode = "cubic", scales = array<f64: 1.000000e+00, 3.000000e+00>} : tensor<2x4x8x8xf32> -> tensor<2x4x8x24xf32>
  %2 = ppc.resize %x {mode = "cubic", cubic_coeff_a = -0.5 : f64, exclude_outside = true, scales = array<f64: 1.0, 3.0>} : tensor<2x4x8x8xf32> -> tensor<2x4x8x24xf32>
  // CHECK: ppc.resize %{{.*}} {coordinate_transformation_mode = "tf_crop_and_resize", extrapolation_value = 1.000000e+01 : f64, mode = "linear", roi = array<f64: 0.000000e+00, 2.500000e-01, 5.000000e-01, 7.500000e-01>, scales = array<f64: 1.000000e+00, 2.000000e+00>} : tensor<2x4x8x8xf32> -> tensor<2x4x4x8xf32>
  %3 = ppc.resize %x {mode = "linear", coordinate_transformation_mode = "tf_crop_and_resize", roi = array<f64: 0.0, 0.25, 0.5, 0.75>, extrapolation_value = 10.0 : f64, scales = array<f64: 1.0, 2.0>} : tensor<2x4x8x8xf32> -> tensor<2x4x4x8xf32>
  // CHECK: ppc.resize %{{.*}} {coordinate_transformation_mode = "asymmetric", nearest_mode = "floor", scales = array<f64: 3.000000e+00, 3.000000e+00>} : tensor<2x4x8x8xf32> -> tensor<2x4x24x24xf32>
  %4 = ppc.resize %x {coordinate_transformation_mode = "asymmetric", nearest_mode = "floor", scales = array<f64: 3.0, 3.0>} : tensor<2x4x8x8xf32> -> tensor<2x4x24x24xf32>
  return
}

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%x: tensor<4x8xf32>, %row: tensor<8xf32>) {
  // CHECK: ppc.relu %{{.*}} : tensor<4x8xf32>
  %0 = ppc.relu %x : tensor<4x8xf32>
  // CHECK: ppc.leaky_relu %{{.*}} {alpha = 2.000000e-01 : f64} : tensor<4x8xf32>
  %1 = ppc.leaky_relu %x {alpha = 0.2 : f64} : tensor<4x8xf32>
  // CHECK: ppc.gelu %{{.*}} {approximation = 1 : i32} : tensor<4x8xf32>
  %2 = ppc.gelu %x {approximation = 1 : i32} : tensor<4x8xf32>
  // CHECK: ppc.sigmoid
  %3 = ppc.sigmoid %x : tensor<4x8xf32>
  // CHECK: ppc.tanh
  %4 = ppc.tanh %x : tensor<4x8xf32>
  // CHECK: ppc.clip %{{.*}} {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64} : tensor<4x8xf32>
  %5 = ppc.clip %x {min = 0.0 : f64, max = 6.0 : f64} : tensor<4x8xf32>
  // CHECK: ppc.sqrt
  %6 = ppc.sqrt %x : tensor<4x8xf32>
  // CHECK: ppc.rsqrt
  %7 = ppc.rsqrt %x : tensor<4x8xf32>
  // CHECK: ppc.exp
  %8 = ppc.exp %x : tensor<4x8xf32>
  // CHECK: ppc.log
  %9 = ppc.log %x : tensor<4x8xf32>
  // CHECK: ppc.erf
  %10 = ppc.erf %x : tensor<4x8xf32>
  // CHECK: ppc.neg
  %11 = ppc.neg %x : tensor<4x8xf32>
  // CHECK: ppc.abs
  %12 = ppc.abs %x : tensor<4x8xf32>
  // CHECK: ppc.reciprocal
  %13 = ppc.reciprocal %x : tensor<4x8xf32>
  // CHECK: ppc.silu
  %14 = ppc.silu %x : tensor<4x8xf32>
  // CHECK: ppc.add %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %15 = ppc.add %x, %row : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK: ppc.sub
  %16 = ppc.sub %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: ppc.mul
  %17 = ppc.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: ppc.div
  %18 = ppc.div %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: ppc.pow
  %19 = ppc.pow %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: ppc.max
  %20 = ppc.max %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: ppc.min
  %21 = ppc.min %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: ppc.dropout %{{.*}} {ratio = 1.000000e-01 : f64, seed = 42 : i64} : tensor<4x8xf32>
  %22 = ppc.dropout %x {ratio = 0.1 : f64, seed = 42 : i64} : tensor<4x8xf32>
  // CHECK: ppc.cast %{{.*}} : tensor<4x8xf32> -> tensor<4x8xbf16>
  %23 = ppc.cast %x : tensor<4x8xf32> -> tensor<4x8xbf16>
  // CHECK: ppc.broadcast %{{.*}} : tensor<8xf32> -> tensor<2x4x8xf32>
  %24 = ppc.broadcast %row : tensor<8xf32> -> tensor<2x4x8xf32>
  // CHECK: ppc.hard_sigmoid %{{.*}} {alpha = 2.500000e-01 : f64, beta = 4.000000e-01 : f64} : tensor<4x8xf32>
  %25 = ppc.hard_sigmoid %x {alpha = 0.25 : f64, beta = 0.4 : f64} : tensor<4x8xf32>
  // CHECK: ppc.hard_swish %{{.*}} : tensor<4x8xf32>
  %26 = ppc.hard_swish %x : tensor<4x8xf32>
  // CHECK: ppc.elu %{{.*}} {alpha = 5.000000e-01 : f64} : tensor<4x8xf32>
  %27 = ppc.elu %x {alpha = 0.5 : f64} : tensor<4x8xf32>
  // CHECK: ppc.selu %{{.*}} {alpha = 2.000000e+00 : f64, gamma = 3.000000e+00 : f64} : tensor<4x8xf32>
  %28 = ppc.selu %x {alpha = 2.0 : f64, gamma = 3.0 : f64} : tensor<4x8xf32>
  // CHECK: ppc.softplus %{{.*}} : tensor<4x8xf32>
  %29 = ppc.softplus %x : tensor<4x8xf32>
  // CHECK: ppc.mish %{{.*}} : tensor<4x8xf32>
  %30 = ppc.mish %x : tensor<4x8xf32>
  // CHECK: ppc.prelu %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %31 = ppc.prelu %x, %row : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return
}

// CHECK-LABEL: func.func @reductions
func.func @reductions(%x: tensor<4x6x8xf32>) {
  // CHECK: ppc.reduce_sum %{{.*}} {axes = array<i64: 1>} : tensor<4x6x8xf32> -> tensor<4x1x8xf32>
  %0 = ppc.reduce_sum %x {axes = array<i64: 1>} : tensor<4x6x8xf32> -> tensor<4x1x8xf32>
  // CHECK: ppc.reduce_mean %{{.*}} {axes = array<i64: -1>, keep_dims = false} : tensor<4x6x8xf32> -> tensor<4x6xf32>
  %1 = ppc.reduce_mean %x {axes = array<i64: -1>, keep_dims = false} : tensor<4x6x8xf32> -> tensor<4x6xf32>
  // CHECK: ppc.reduce_max %{{.*}} {axes = array<i64: 0, 2>, keep_dims = false} : tensor<4x6x8xf32> -> tensor<6xf32>
  %2 = ppc.reduce_max %x {axes = array<i64: 0, 2>, keep_dims = false} : tensor<4x6x8xf32> -> tensor<6xf32>
  return
}

// CHECK-LABEL: func.func @data_movement
func.func @data_movement(%x: tensor<2x8xf32>, %y: tensor<2x4xf32>,
                         %table: tensor<100x16xf32>, %ids: tensor<4x10xi64>) {
  // CHECK: ppc.reshape %{{.*}} : tensor<2x8xf32> -> tensor<2x2x4xf32>
  %0 = ppc.reshape %x : tensor<2x8xf32> -> tensor<2x2x4xf32>
  // CHECK: ppc.transpose %{{.*}} {permutation = array<i64: 1, 0>} : tensor<2x8xf32> -> tensor<8x2xf32>
  %1 = ppc.transpose %x {permutation = array<i64: 1, 0>} : tensor<2x8xf32> -> tensor<8x2xf32>
  // CHECK: ppc.concat %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<2x12xf32>
  %2 = ppc.concat %x, %y {axis = 1 : i64} : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<2x12xf32>
  // CHECK: ppc.split %{{.*}} {axis = -1 : i64} : tensor<2x8xf32> -> tensor<2x3xf32>, tensor<2x5xf32>
  %3:2 = ppc.split %x {axis = -1 : i64} : tensor<2x8xf32> -> tensor<2x3xf32>, tensor<2x5xf32>
  // CHECK: ppc.slice %{{.*}} {starts = array<i64: 0, 1>, steps = array<i64: 1, 2>} : tensor<2x8xf32> -> tensor<2x4xf32>
  %4 = ppc.slice %x {starts = array<i64: 0, 1>, steps = array<i64: 1, 2>} : tensor<2x8xf32> -> tensor<2x4xf32>
  // CHECK: ppc.pad %{{.*}} {pads = array<i64: 0, 1, 0, 2>, value = -1.000000e+00 : f64} : tensor<2x8xf32> -> tensor<2x11xf32>
  %5 = ppc.pad %x {pads = array<i64: 0, 1, 0, 2>, value = -1.0 : f64} : tensor<2x8xf32> -> tensor<2x11xf32>
  // CHECK: ppc.gather %{{.*}}, %{{.*}} : (tensor<100x16xf32>, tensor<4x10xi64>) -> tensor<4x10x16xf32>
  %6 = ppc.gather %table, %ids : (tensor<100x16xf32>, tensor<4x10xi64>) -> tensor<4x10x16xf32>
  return
}

// CHECK-LABEL: func.func @moe
func.func @moe(%x: tensor<2x8x16xf32>, %p: tensor<2x8x4xf32>) -> tensor<2x8x16xf32> {
  // CHECK: ppc.moe_dispatch %{{.*}}, %{{.*}} {top_k = 2 : i64} : (tensor<2x8x16xf32>, tensor<2x8x4xf32>) -> tensor<4x2x5x16xf32>
  %0 = ppc.moe_dispatch %x, %p {top_k = 2 : i64} : (tensor<2x8x16xf32>, tensor<2x8x4xf32>) -> tensor<4x2x5x16xf32>
  // CHECK: ppc.moe_dispatch %{{.*}}, %{{.*}} {aux_loss_coef = 1.000000e-02 : f64, top_k = 2 : i64}
  %a = ppc.moe_dispatch %x, %p {top_k = 2 : i64, aux_loss_coef = 0.01} : (tensor<2x8x16xf32>, tensor<2x8x4xf32>) -> tensor<4x2x5x16xf32>
  // CHECK: ppc.moe_combine %{{.*}}, %{{.*}} {normalize = true, top_k = 2 : i64} : (tensor<4x2x5x16xf32>, tensor<2x8x4xf32>) -> tensor<2x8x16xf32>
  %1 = ppc.moe_combine %0, %p {top_k = 2 : i64, normalize = true} : (tensor<4x2x5x16xf32>, tensor<2x8x4xf32>) -> tensor<2x8x16xf32>
  // CHECK: ppc.moe_combine %{{.*}}, %{{.*}} : (tensor<4x2x5x16xf32>, tensor<2x8x4xf32>) -> tensor<2x8x16xf32>
  %2 = ppc.moe_combine %0, %p : (tensor<4x2x5x16xf32>, tensor<2x8x4xf32>) -> tensor<2x8x16xf32>
  return %1 : tensor<2x8x16xf32>
}

// CHECK-LABEL: func.func @losses
func.func @losses(%logits: tensor<8x10xf32>, %labels: tensor<8xi64>,
                  %p: tensor<4x3xf32>) -> (tensor<f32>, tensor<f32>) {
  // CHECK: ppc.softmax_cross_entropy %{{.*}}, %{{.*}} : (tensor<8x10xf32>, tensor<8xi64>) -> tensor<f32>
  %0 = ppc.softmax_cross_entropy %logits, %labels : (tensor<8x10xf32>, tensor<8xi64>) -> tensor<f32>
  // CHECK: ppc.mse_loss %{{.*}}, %{{.*}} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<f32>
  %1 = ppc.mse_loss %p, %p : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<f32>
  return %0, %1 : tensor<f32>, tensor<f32>
}

// CHECK-LABEL: func.func @strategies
func.func @strategies(%x: tensor<32x784xf32>, %w: tensor<784x256xf32>) -> tensor<32x256xf32> {
  // CHECK: ppc.linear %{{.*}}, %{{.*}} {ppc.strategy = #ppc.strategy<degrees = [4, 2, 1], strides = [1, 4]>}
  %0 = ppc.linear %x, %w {ppc.strategy = #ppc.strategy<degrees = [4, 2, 1], strides = [1, 4]>} : (tensor<32x784xf32>, tensor<784x256xf32>) -> tensor<32x256xf32>
  // CHECK: ppc.relu %{{.*}} {ppc.strategy = #ppc.strategy<degrees = [8, 1], start = 8>}
  %1 = ppc.relu %0 {ppc.strategy = #ppc.strategy<degrees = [8, 1], start = 8>} : tensor<32x256xf32>
  // CHECK: ppc.relu %{{.*}} {ppc.strategy = #ppc.strategy<degrees = [1, 1]>}
  %2 = ppc.relu %1 {ppc.strategy = #ppc.strategy<degrees = [1, 1], start = 0>} : tensor<32x256xf32>
  // Replicas, recomputation and state sharding print in a fixed order, and
  // only when not the defaults.
  // CHECK: ppc.relu %{{.*}} {ppc.strategy = #ppc.strategy<degrees = [2, 1], strides = [4, 1], replicas = 4, recompute, zero = 3>}
  %3 = ppc.relu %2 {ppc.strategy = #ppc.strategy<degrees = [2, 1], zero = 3, recompute, replicas = 4, strides = [4, 1]>} : tensor<32x256xf32>
  // CHECK: ppc.relu %{{.*}} {ppc.strategy = #ppc.strategy<degrees = [1, 1]>}
  %4 = ppc.relu %3 {ppc.strategy = #ppc.strategy<degrees = [1, 1], replicas = 1, zero = 0, scatter = -1>} : tensor<32x256xf32>
  // In stage 1 of the function's pipeline.
  // CHECK: ppc.relu %{{.*}} {ppc.strategy = #ppc.strategy<degrees = [1, 1], start = 4, stage = 1>}
  %6 = ppc.relu %4 {ppc.strategy = #ppc.strategy<degrees = [1, 1], stage = 1, start = 4>} : tensor<32x256xf32>
  // Row parallel, its partial sums reduce-scattered along the batch.
  // CHECK: ppc.linear %{{.*}}, %{{.*}} {ppc.strategy = #ppc.strategy<degrees = [1, 1, 4], zero = 1, scatter = 0>}
  %5 = ppc.linear %x, %w {ppc.strategy = #ppc.strategy<degrees = [1, 1, 4], scatter = 0, zero = 1>} : (tensor<32x784xf32>, tensor<784x256xf32>) -> tensor<32x256xf32>
  return %2 : tensor<32x256xf32>
}

// Ring attention: the query positions (dim 2) split 4 ways, the keys
// (dim 3) streamed around each group of 4; `ring` prints last.
// CHECK-LABEL: func.func @ring_strategy
// CHECK: ppc.attention %{{.*}}, %{{.*}}, %{{.*}} {ppc.strategy = #ppc.strategy<degrees = [2, 1, 4, 1, 1, 1], recompute, ring>, scale = 1.250000e-01 : f64}
func.func @ring_strategy(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32> {
  %0 = ppc.attention %q, %k, %v {scale = 0.125 : f64, ppc.strategy = #ppc.strategy<degrees = [2, 1, 4, 1, 1, 1], ring, recompute>} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32>
  return %0 : tensor<2x4x16x8xf32>
}

// CHECK-LABEL: func.func @pipelined
// CHECK-SAME: attributes {ppc.pipeline = #ppc.pipeline<microbatches = 4, schedule = "1f1b", first_devices = [0, 4], devices = [4, 4]>}
func.func @pipelined(%x: tensor<8x16xf32>) -> tensor<8x16xf32> attributes {ppc.pipeline = #ppc.pipeline<microbatches = 4, schedule = "1f1b", first_devices = [0, 4], devices = [4, 4]>} {
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 1]>} : tensor<8x16xf32>
  %1 = ppc.relu %0 {ppc.strategy = #ppc.strategy<degrees = [2, 1], start = 4, stage = 1>} : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}

// Interleaved: 4 stages dealt round-robin to 2 submeshes.
// CHECK-LABEL: func.func @interleaved
// CHECK-SAME: attributes {ppc.pipeline = #ppc.pipeline<microbatches = 2, schedule = "interleaved-1f1b", first_devices = [0, 4, 0, 4], devices = [4, 4, 4, 4]>}
func.func @interleaved(%x: tensor<8x16xf32>) -> tensor<8x16xf32> attributes {ppc.pipeline = #ppc.pipeline<microbatches = 2, schedule = "interleaved-1f1b", first_devices = [0, 4, 0, 4], devices = [4, 4, 4, 4]>} {
  %0 = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [2, 1]>} : tensor<8x16xf32>
  %1 = ppc.relu %0 {ppc.strategy = #ppc.strategy<degrees = [2, 1], start = 4, stage = 1>} : tensor<8x16xf32>
  %2 = ppc.relu %1 {ppc.strategy = #ppc.strategy<degrees = [2, 1], stage = 2>} : tensor<8x16xf32>
  %3 = ppc.relu %2 {ppc.strategy = #ppc.strategy<degrees = [2, 1], start = 4, stage = 3>} : tensor<8x16xf32>
  return %3 : tensor<8x16xf32>
}

// Comparisons, logic, select and cumsum.
// CHECK-LABEL: func.func @select_compare
func.func @select_compare(%a: tensor<3x4xf32>, %b: tensor<4xf32>, %m: tensor<3x1xi1>, %i: tensor<3x4xi64>) -> (tensor<3x4xf32>, tensor<3x4xi1>, tensor<3x4xi64>, tensor<3x4xf32>) {
  // CHECK: ppc.equal %{{.*}}, %{{.*}} : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xi1>
  %0 = ppc.equal %a, %b : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xi1>
  // CHECK: ppc.less
  %1 = ppc.less %a, %b : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xi1>
  // CHECK: ppc.less_equal
  %2 = ppc.less_equal %a, %b : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xi1>
  // CHECK: ppc.greater
  %3 = ppc.greater %a, %b : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xi1>
  // CHECK: ppc.greater_equal
  %4 = ppc.greater_equal %a, %b : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xi1>
  // CHECK: ppc.and %{{.*}}, %{{.*}} : (tensor<3x4xi1>, tensor<3x1xi1>) -> tensor<3x4xi1>
  %5 = ppc.and %0, %m : (tensor<3x4xi1>, tensor<3x1xi1>) -> tensor<3x4xi1>
  // CHECK: ppc.or
  %6 = ppc.or %5, %1 : (tensor<3x4xi1>, tensor<3x4xi1>) -> tensor<3x4xi1>
  // CHECK: ppc.not %{{.*}} : tensor<3x4xi1>
  %7 = ppc.not %6 : tensor<3x4xi1>
  // CHECK: ppc.select %{{.*}}, %{{.*}}, %{{.*}} : (tensor<3x1xi1>, tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  %8 = ppc.select %m, %a, %b : (tensor<3x1xi1>, tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
  // CHECK: ppc.select %{{.*}}, %{{.*}}, %{{.*}} : (tensor<3x4xi1>, tensor<3x4xi64>, tensor<3x4xi64>) -> tensor<3x4xi64>
  %9 = ppc.select %7, %i, %i : (tensor<3x4xi1>, tensor<3x4xi64>, tensor<3x4xi64>) -> tensor<3x4xi64>
  // CHECK: ppc.cumsum %{{.*}} {axis = 1 : i64, exclusive = true, reverse = true} : tensor<3x4xf32>
  %10 = ppc.cumsum %8 {axis = 1 : i64, exclusive = true, reverse = true} : tensor<3x4xf32>
  return %10, %7, %9, %8 : tensor<3x4xf32>, tensor<3x4xi1>, tensor<3x4xi64>, tensor<3x4xf32>
}

// Parallel ops carry the kind of exchange the communication plan makes.
// CHECK-LABEL: func.func @parallel_ops
func.func @parallel_ops(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // CHECK: ppc.reduce %{{.*}} from <degrees = [1, 2]> to <degrees = [1, 2]> as "all_reduce" : tensor<8x4xf32>
  %0 = ppc.reduce %x from <degrees = [1, 2]> to <degrees = [1, 2]> as "all_reduce" : tensor<8x4xf32>
  // CHECK: ppc.combine %{{.*}} from <degrees = [2, 1]> to <degrees = [1, 1]> as "all_gather" : tensor<8x4xf32>
  %1 = ppc.combine %0 from <degrees = [2, 1]> to <degrees = [1, 1]> as "all_gather" : tensor<8x4xf32>
  // CHECK: ppc.repartition %{{.*}} from <degrees = [2, 1]> to <degrees = [1, 2]> as "all_to_all" : tensor<8x4xf32>
  %2 = ppc.repartition %1 from <degrees = [2, 1]> to <degrees = [1, 2]> as "all_to_all" : tensor<8x4xf32>
  // CHECK: ppc.replicate %{{.*}} : tensor<8x4xf32>
  %3 = ppc.replicate %2 : tensor<8x4xf32>
  return %3 : tensor<8x4xf32>
}
