// A two-layer MLP in linalg on tensors (batch 64, 128 -> 256 -> 16), as
// torch-mlir's linalg backend emits it, its parameters inlined.
func.func @forward(%x: tensor<64x128xf32>) -> tensor<64x16xf32> {
  %w1 = arith.constant dense<0.01> : tensor<128x256xf32>
  %w2 = arith.constant dense<0.02> : tensor<256x16xf32>
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<64x256xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<64x256xf32>) -> tensor<64x256xf32>
  %h = linalg.matmul ins(%x, %w1 : tensor<64x128xf32>, tensor<128x256xf32>) outs(%f1 : tensor<64x256xf32>) -> tensor<64x256xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%h : tensor<64x256xf32>) outs(%e1 : tensor<64x256xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.maximumf %in, %zero : f32
    linalg.yield %m : f32
  } -> tensor<64x256xf32>
  %e2 = tensor.empty() : tensor<64x16xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<64x16xf32>) -> tensor<64x16xf32>
  %y = linalg.matmul ins(%r, %w2 : tensor<64x256xf32>, tensor<256x16xf32>) outs(%f2 : tensor<64x16xf32>) -> tensor<64x16xf32>
  return %y : tensor<64x16xf32>
}
