// A forward-only plan's traffic: its bytes and its outputs' gathers, and no
// comparison (the simulator prices training steps), so no warning.
// RUN: rm -rf %t && ppc-opt %s --ppc-attach-machine=machine=cpux2 --ppc-lower-to-plan="traffic=%t/traffic.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=QUIET --allow-empty
// RUN: FileCheck %s --input-file=%t/traffic.json
// A traffic file that cannot be written is an error naming it.
// RUN: not ppc-opt %s --ppc-attach-machine=machine=cpux2 --ppc-lower-to-plan="traffic=%s/x.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ERR

// QUIET-NOT: warning
// CHECK: "shared_memory": {
// CHECK-NEXT: "plan_bytes": 0.0,
// CHECK-NEXT: "output_bytes": 64.0
// CHECK: "note": "a forward-only plan: the simulator prices training steps"
// ERR: error: cannot open the traffic file '{{.*}}traffic-forward.mlir/x.json'

func.func @main(%x: tensor<8x16xf32>) -> tensor<8x4xf32> {
  %w = ppc.weight "w" : tensor<16x4xf32>
  %y = ppc.linear %x, %w {ppc.strategy = #ppc.strategy<degrees = [2, 1, 1]>} : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}
