// An MLP with the strategy --ppc-search="algorithm=megatron tp=2" picks on
// cpux4: 2-way data parallel x 2-way tensor parallel, the first matmul
// column-parallel, the second row-parallel (its partial sums all-reduced).
func.func @forward(%arg0: tensor<64x128xf32> {ppc.name = "x"}) -> tensor<64x16xf32> {
  %w1 = ppc.weight "fc1" : tensor<128x256xf32>
  %w2 = ppc.weight "fc2" : tensor<256x16xf32>
  %h = ppc.matmul %arg0, %w1 {ppc.strategy = #ppc.strategy<degrees = [2, 2, 1]>} : (tensor<64x128xf32>, tensor<128x256xf32>) -> tensor<64x256xf32>
  %r = ppc.relu %h {ppc.strategy = #ppc.strategy<degrees = [2, 2]>} : tensor<64x256xf32>
  %y = ppc.matmul %r, %w2 {ppc.strategy = #ppc.strategy<degrees = [2, 1, 2]>} : (tensor<64x256xf32>, tensor<256x16xf32>) -> tensor<64x16xf32>
  return %y : tensor<64x16xf32>
}
