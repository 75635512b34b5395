// RUN: split-file %s %t
// RUN: ppc-opt %t/model.mlir --ppc-convert-dtype=dtype=bf16 | FileCheck %s --check-prefix=BF16
// RUN: ppc-opt %t/model.mlir --ppc-convert-dtype=dtype=f16 | FileCheck %s --check-prefix=F16
// f32 on an f32 model changes nothing.
// RUN: ppc-opt %t/model.mlir -o %t/plain.mlir
// RUN: ppc-opt %t/model.mlir --ppc-convert-dtype=dtype=f32 -o %t/f32.mlir
// RUN: diff %t/plain.mlir %t/f32.mlir
// The simulator sees half the bytes: weights and gradients in bf16.
// RUN: ppc-opt %t/model.mlir --ppc-convert-dtype=dtype=bf16 --ppc-attach-machine=machine=dgx-h100 --ppc-simulate=unassigned=single -o /dev/null | FileCheck %s --check-prefix=SIM
// RUN: not ppc-opt %t/model.mlir --ppc-convert-dtype=dtype=f8 2>&1 | FileCheck %s --check-prefix=BAD

// BF16-LABEL: func.func @model(
// BF16-SAME:    %{{.*}}: tensor<8x16xbf16>, %{{.*}}: tensor<8xi64>) -> (tensor<bf16>, tensor<8x4xbf16>)
// BF16:         ppc.weight "w" : tensor<16x4xbf16>
// Values are rounded to the new type: 1 + 2^-8 is a tie between two bf16
// values (7 mantissa bits) and goes to the even one; f16 keeps it.
// BF16:         ppc.weight "b" {value = dense<[1.000000e+00, 2.500000e+00, 1.000000e+00, -3.000000e+00]> : tensor<4xbf16>} : tensor<4xbf16>
// BF16:         ppc.constant dense<5.000000e-01> : tensor<8x4xbf16>
// Integer tensors keep their type.
// BF16:         ppc.constant dense<1> : tensor<8xi64>
// BF16:         ppc.linear {{.*}} : (tensor<8x16xbf16>, tensor<16x4xbf16>, tensor<4xbf16>) -> tensor<8x4xbf16>
// BF16:         ppc.mul {{.*}} : (tensor<8x4xbf16>, tensor<8x4xbf16>) -> tensor<8x4xbf16>
// BF16:         ppc.softmax_cross_entropy {{.*}} : (tensor<8x4xbf16>, tensor<8xi64>) -> tensor<bf16>
// BF16:         return {{.*}} : tensor<bf16>, tensor<8x4xbf16>

// F16: ppc.weight "b" {value = dense<[1.000000e+00, 2.500000e+00, 1.003910e+00, -3.000000e+00]> : tensor<4xf16>} : tensor<4xf16>
// F16: ppc.softmax_cross_entropy {{.*}} : (tensor<8x4xf16>, tensor<8xi64>) -> tensor<f16>

// (16 * 4 + 4) bf16 weights = 136 bytes.
// SIM: 0 {{.*}} 136 B 136 B

// BAD: error: ppc-convert-dtype: unknown dtype 'f8'; expected f32, bf16 or f16

//--- model.mlir
func.func @model(%x: tensor<8x16xf32>, %labels: tensor<8xi64>) -> (tensor<f32>, tensor<8x4xf32>) {
  %w = ppc.weight "w" : tensor<16x4xf32>
  %b = ppc.weight "b" {value = dense<[1.0, 2.5, 1.00390625, -3.0]> : tensor<4xf32>} : tensor<4xf32>
  %half = ppc.constant dense<0.5> : tensor<8x4xf32>
  %one = ppc.constant dense<1> : tensor<8xi64>
  %y = ppc.linear %x, %w, %b : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  %z = ppc.mul %y, %half : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %l = ppc.softmax_cross_entropy %z, %labels : (tensor<8x4xf32>, tensor<8xi64>) -> tensor<f32>
  return %l, %z : tensor<f32>, tensor<8x4xf32>
}
