func.func @cnn(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<2x4x4x4xf32> {
  %0 = ppc.conv2d %x, %w {pads = array<i64: 1, 1, 1, 1>, ppc.strategy = #ppc.strategy<degrees = [1, 1, 2, 1, 1, 1, 1]>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %1 = ppc.max_pool2d %0 {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>} : tensor<2x4x8x8xf32> -> tensor<2x4x4x4xf32>
  return %1 : tensor<2x4x4x4xf32>
}
