// RUN: split-file %s %t
// RUN: ppc-opt %t/classifier.mlir --ppc-add-loss | FileCheck %s --check-prefix=CE
// RUN: ppc-opt %t/tokens.mlir --ppc-add-loss | FileCheck %s --check-prefix=TOKENS
// RUN: ppc-opt %t/regression.mlir --ppc-add-loss | FileCheck %s --check-prefix=MSE
// An explicit choice overrides the shape's hint.
// RUN: ppc-opt %t/classifier.mlir --ppc-add-loss=loss=mse | FileCheck %s --check-prefix=FORCEDMSE
// Idempotent: a function that has a loss keeps it.
// RUN: ppc-opt %t/classifier.mlir --ppc-add-loss -o %t/once.mlir
// RUN: ppc-opt %t/once.mlir --ppc-add-loss -o %t/twice.mlir
// RUN: diff %t/once.mlir %t/twice.mlir
// loss=none changes nothing.
// RUN: ppc-opt %t/classifier.mlir -o %t/plain.mlir
// RUN: ppc-opt %t/classifier.mlir --ppc-add-loss=loss=none -o %t/none.mlir
// RUN: diff %t/plain.mlir %t/none.mlir
// The training graph simulates (the loss is one more op).
// RUN: ppc-opt %t/tokens.mlir --ppc-add-loss --ppc-attach-machine=machine=cpux2 --ppc-simulate -o /dev/null | FileCheck %s --check-prefix=SIM
// Errors.
// RUN: not ppc-opt %t/classifier.mlir --ppc-add-loss=loss=hinge 2>&1 | FileCheck %s --check-prefix=BADLOSS
// RUN: not ppc-opt %t/image.mlir --ppc-add-loss=loss=softmax-ce 2>&1 | FileCheck %s --check-prefix=BADRANK
// RUN: not ppc-opt %t/intresult.mlir --ppc-add-loss 2>&1 | FileCheck %s --check-prefix=NOTFLOAT

// CE-LABEL: func.func @classifier(
// CE-SAME:    %[[X:.*]]: tensor<32x16xf32>, %[[LABELS:.*]]: tensor<32xi64> {ppc.name = "labels"}) -> (tensor<f32> {ppc.name = "loss"})
// CE:         %[[LOGITS:.*]] = ppc.linear %[[X]]
// CE-NEXT:    %[[LOSS:.*]] = ppc.softmax_cross_entropy %[[LOGITS]], %[[LABELS]] {ppc.name = "loss"} : (tensor<32x10xf32>, tensor<32xi64>) -> tensor<f32>
// CE-NEXT:    return %[[LOSS]] : tensor<f32>

// TOKENS-LABEL: func.func @lm(
// TOKENS-SAME:    %{{.*}}: tensor<4x8x16xf32>, %[[LABELS:.*]]: tensor<4x8xi64> {ppc.name = "labels"}) -> (tensor<f32> {ppc.name = "loss"})
// TOKENS:         %[[LOGITS:.*]] = ppc.linear
// TOKENS-NEXT:    %[[FLAT:.*]] = ppc.reshape %[[LOGITS]] {ppc.name = "loss.logits"} : tensor<4x8x100xf32> -> tensor<32x100xf32>
// TOKENS-NEXT:    %[[FLATLABELS:.*]] = ppc.reshape %[[LABELS]] {ppc.name = "loss.labels"} : tensor<4x8xi64> -> tensor<32xi64>
// TOKENS-NEXT:    %[[LOSS:.*]] = ppc.softmax_cross_entropy %[[FLAT]], %[[FLATLABELS]]
// TOKENS-NEXT:    return %[[LOSS]] : tensor<f32>

// MSE-LABEL: func.func @regression(
// MSE-SAME:    %{{.*}}: tensor<32x16xf32>, %[[TARGETS:.*]]: tensor<32x1xf32> {ppc.name = "targets"}) -> (tensor<f32> {ppc.name = "loss"})
// MSE:         %[[LOSS:.*]] = ppc.mse_loss %{{.*}}, %[[TARGETS]] {ppc.name = "loss"} : (tensor<32x1xf32>, tensor<32x1xf32>) -> tensor<f32>
// MSE-NEXT:    return %[[LOSS]]

// FORCEDMSE: ppc.mse_loss %{{.*}}, %{{.*}} : (tensor<32x10xf32>, tensor<32x10xf32>) -> tensor<f32>

// SIM: ops: 4 (0 with ppc.strategy, 4 data parallel by default)
// SIM-DAG: loss.logits ppc.reshape
// SIM-DAG: loss.labels ppc.reshape
// SIM-DAG: loss ppc.softmax_cross_entropy

// BADLOSS: error: ppc-add-loss: unknown loss 'hinge'; expected auto, softmax-ce, mse or none
// BADRANK: error: ppc-add-loss: softmax-ce needs class logits [N, C] or [N, S, C], not 'tensor<2x3x4x4xf32>'
// NOTFLOAT: error: ppc-add-loss: the first result of @argmax must be a static floating-point tensor, not 'tensor<32xi64>'

//--- classifier.mlir
func.func @classifier(%x: tensor<32x16xf32>) -> tensor<32x10xf32> {
  %w = ppc.weight "fc.weight" : tensor<16x10xf32>
  %y = ppc.linear %x, %w : (tensor<32x16xf32>, tensor<16x10xf32>) -> tensor<32x10xf32>
  return %y : tensor<32x10xf32>
}

//--- tokens.mlir
func.func @lm(%x: tensor<4x8x16xf32>) -> tensor<4x8x100xf32> {
  %w = ppc.weight "head.weight" : tensor<16x100xf32>
  %y = ppc.linear %x, %w : (tensor<4x8x16xf32>, tensor<16x100xf32>) -> tensor<4x8x100xf32> loc("head")
  return %y : tensor<4x8x100xf32>
}

//--- regression.mlir
func.func @regression(%x: tensor<32x16xf32>) -> tensor<32x1xf32> {
  %w = ppc.weight "fc.weight" : tensor<16x1xf32>
  %y = ppc.linear %x, %w : (tensor<32x16xf32>, tensor<16x1xf32>) -> tensor<32x1xf32>
  return %y : tensor<32x1xf32>
}

//--- intresult.mlir
func.func @argmax(%x: tensor<32x16xf32>) -> tensor<32xi64> {
  %c = ppc.constant dense<0> : tensor<32xi64>
  %y = ppc.relu %x : tensor<32x16xf32>
  return %c : tensor<32xi64>
}

//--- image.mlir
func.func @image(%x: tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32> {
  %y = ppc.relu %x : tensor<2x3x4x4xf32>
  return %y : tensor<2x3x4x4xf32>
}
