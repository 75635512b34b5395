// Each optimizer's conventional learning rate unless lr= is given: 0.01 for
// SGD and momentum, 0.001 for Adam (0.01 makes Adam diverge on AlexNet).
// RUN: ppc-opt %s --ppc-partition-to-plan | FileCheck %s --check-prefix=SGD
// RUN: ppc-opt %s --ppc-partition-to-plan="optimizer=momentum" | FileCheck %s --check-prefix=MOMENTUM
// RUN: ppc-opt %s --ppc-partition-to-plan="optimizer=adam" | FileCheck %s --check-prefix=ADAM
// RUN: ppc-opt %s --ppc-partition-to-plan="optimizer=adam lr=0.05" | FileCheck %s --check-prefix=GIVEN
// RUN: not ppc-opt %s --ppc-partition-to-plan="lr=-1" 2>&1 | FileCheck %s --check-prefix=NEGATIVE

func.func @main(%x: tensor<4x8xf32>, %t: tensor<4x8xf32>) -> tensor<f32> {
  %w = ppc.weight "w" : tensor<8xf32>
  %a = ppc.add %x, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %l = ppc.mse_loss %a, %t : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
// SGD: kind = "sgd", lr = 1.000000e-02
// MOMENTUM: kind = "momentum", lr = 1.000000e-02
// ADAM: kind = "adam", lr = 1.000000e-03
// GIVEN: kind = "adam", lr = 5.000000e-02
// NEGATIVE: learning rate -1.000000e+00 is not a finite number >= 0
