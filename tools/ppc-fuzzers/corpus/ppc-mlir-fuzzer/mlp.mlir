func.func @mlp(%x: tensor<8x16xf32>) -> tensor<8x4xf32> {
  %w1 = ppc.weight "fc1.weight" : tensor<16x32xf32>
  %w2 = ppc.weight "fc2.weight" : tensor<32x4xf32>
  %0 = ppc.linear %x, %w1 {ppc.strategy = #ppc.strategy<degrees = [1, 2, 1]>} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %1 = ppc.relu %0 {ppc.strategy = #ppc.strategy<degrees = [2, 1]>} : tensor<8x32xf32>
  %2 = ppc.linear %1, %w2 : (tensor<8x32xf32>, tensor<32x4xf32>) -> tensor<8x4xf32>
  return %2 : tensor<8x4xf32>
}
