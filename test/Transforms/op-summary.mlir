// RUN: ppc-opt %s --ppc-op-summary -o %t.mlir | FileCheck %s
// RUN: ppc-opt %s --ppc-op-summary=output=%t.txt -o /dev/null && FileCheck %s < %t.txt
// The module passes through unchanged.
// RUN: ppc-opt %s --ppc-op-summary -o - | FileCheck %s --check-prefix=IR
// RUN: not ppc-opt %s --ppc-op-summary=output=%t.missing/dir/x.txt 2>&1 | FileCheck %s --check-prefix=ERR

// CHECK-LABEL: ppc graph @mlp
// CHECK-NEXT:  input  0 'x': tensor<8x16xf32>
// CHECK-NEXT:  output 0: tensor<8x4xf32>
// CHECK-NEXT:  weights: 3 (68 trainable parameters, 4 frozen)
// CHECK-NEXT:  ops: 5
// CHECK-NEXT:    ppc.linear 1
// CHECK-NEXT:    ppc.relu 1
// CHECK-NEXT:    ppc.matmul 1
// CHECK-NEXT:    ppc.reshape 1
// CHECK-NEXT:    ppc.slice 1
// Forward: 2*8*16*4 (linear) + 8*4 (bias) + 8*4 (relu) + 2*8*8*4 (matmul)
// = 1600; reshape and slice are views. Backward: twice linear and matmul.
// CHECK-NEXT:  forward FLOPs: 1.600e+03, backward FLOPs: 3.136e+03
// CHECK-LABEL: ppc graph @empty
// CHECK-NEXT:  weights: 0 (0 trainable parameters)
// CHECK-NEXT:  ops: 0
// CHECK-NEXT:  forward FLOPs: 0.000e+00

// IR: func.func @mlp
// IR: ppc.linear

// ERR: cannot open summary output

func.func @mlp(%x: tensor<8x16xf32> {ppc.name = "x"}) -> tensor<8x4xf32> {
  %w = ppc.weight "w" : tensor<16x4xf32>
  %b = ppc.weight "b" : tensor<4xf32>
  %s = ppc.weight "s" frozen : tensor<4xf32>
  %0 = ppc.linear %x, %w, %b : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  %1 = ppc.relu %0 : tensor<8x4xf32>
  %2 = ppc.matmul %1, %1 {transpose_rhs = true} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x8xf32>
  %3 = ppc.reshape %2 : tensor<8x8xf32> -> tensor<16x4xf32>
  %4 = ppc.slice %3 {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : tensor<16x4xf32> -> tensor<8x4xf32>
  return %4 : tensor<8x4xf32>
}

func.func @empty() {
  return
}
