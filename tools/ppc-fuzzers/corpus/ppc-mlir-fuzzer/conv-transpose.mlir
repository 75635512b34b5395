func.func @decoder(%x: tensor<2x4x4x4xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<3xf32>) -> tensor<2x3x8x8xf32> {
  %0 = ppc.conv_transpose2d %x, %w, %b {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, output_padding = array<i64: 1, 1>, ppc.strategy = #ppc.strategy<degrees = [1, 1, 1, 1, 2, 1, 1]>} : (tensor<2x4x4x4xf32>, tensor<4x3x3x3xf32>, tensor<3xf32>) -> tensor<2x3x8x8xf32>
  return %0 : tensor<2x3x8x8xf32>
}
