// A model keeps its own element type unless dtype= asks for another: a bf16
// model trains in bf16, an f32 one in f32.
// RUN: ppc-opt %s --ppc-auto-parallel="machine=cpu search=data-parallel" 2>/dev/null | FileCheck %s --check-prefix=KEEP
// RUN: ppc-opt %s --ppc-auto-parallel="machine=cpu search=data-parallel dtype=f32" 2>/dev/null | FileCheck %s --check-prefix=F32

// KEEP: ppc.linear {{.*}} -> tensor<8x4xbf16>
// KEEP: ppc.softmax_cross_entropy {{.*}} -> tensor<bf16>
// F32: ppc.linear {{.*}} -> tensor<8x4xf32>
// F32: ppc.softmax_cross_entropy {{.*}} -> tensor<f32>

func.func @model(%x: tensor<8x16xbf16>, %labels: tensor<8xi64>) -> tensor<bf16> {
  %w = ppc.weight "w" : tensor<16x4xbf16>
  %y = ppc.linear %x, %w : (tensor<8x16xbf16>, tensor<16x4xbf16>) -> tensor<8x4xbf16>
  %l = ppc.softmax_cross_entropy %y, %labels : (tensor<8x4xbf16>, tensor<8xi64>) -> tensor<bf16>
  return %l : tensor<bf16>
}
