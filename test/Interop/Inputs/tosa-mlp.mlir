// A two-layer MLP as torch-mlir's TOSA backend emits it (batch 64, 128 ->
// 256 -> 16), its parameters inlined as constants.
func.func @forward(%arg0: tensor<64x128xf32>) -> tensor<64x16xf32> {
  %w1 = "tosa.const"() <{values = dense<0.01> : tensor<1x128x256xf32>}> : () -> tensor<1x128x256xf32>
  %b1 = "tosa.const"() <{values = dense<0.1> : tensor<1x1x256xf32>}> : () -> tensor<1x1x256xf32>
  %w2 = "tosa.const"() <{values = dense<0.02> : tensor<1x256x16xf32>}> : () -> tensor<1x256x16xf32>
  %b2 = "tosa.const"() <{values = dense<0.2> : tensor<1x1x16xf32>}> : () -> tensor<1x1x16xf32>
  %zp = "tosa.const"() <{values = dense<0.0> : tensor<1xf32>}> : () -> tensor<1xf32>
  %s3 = tosa.const_shape {values = dense<[1, 64, 128]> : tensor<3xindex>} : () -> !tosa.shape<3>
  %x = tosa.reshape %arg0, %s3 : (tensor<64x128xf32>, !tosa.shape<3>) -> tensor<1x64x128xf32>
  %h = tosa.matmul %x, %w1, %zp, %zp : (tensor<1x64x128xf32>, tensor<1x128x256xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x64x256xf32>
  %hb = tosa.add %h, %b1 : (tensor<1x64x256xf32>, tensor<1x1x256xf32>) -> tensor<1x64x256xf32>
  %r = tosa.clamp %hb {min_val = 0.0 : f32, max_val = 3.40282347E+38 : f32} : (tensor<1x64x256xf32>) -> tensor<1x64x256xf32>
  %o = tosa.matmul %r, %w2, %zp, %zp : (tensor<1x64x256xf32>, tensor<1x256x16xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<1x64x16xf32>
  %ob = tosa.add %o, %b2 : (tensor<1x64x16xf32>, tensor<1x1x16xf32>) -> tensor<1x64x16xf32>
  %s2 = tosa.const_shape {values = dense<[64, 16]> : tensor<2xindex>} : () -> !tosa.shape<2>
  %y = tosa.reshape %ob, %s2 : (tensor<1x64x16xf32>, !tosa.shape<2>) -> tensor<64x16xf32>
  return %y : tensor<64x16xf32>
}
