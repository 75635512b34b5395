// Export a 2-rank plan as protobuf text and binary; the error cases of
// ppc-export-plan (no plan.plan, two, no file, an attribute the file cannot
// hold, an unwritable file).

// RUN: split-file %s %t
// RUN: ppc-opt %t/plan.mlir --ppc-export-plan="file=%t/plan.txt text=true" | FileCheck %s --check-prefix=IR
// RUN: FileCheck %s --input-file=%t/plan.txt
// RUN: ppc-opt %t/plan.mlir --ppc-export-plan="file=%t/plan.pb" -o /dev/null
// RUN: FileCheck %s --check-prefix=BIN --input-file=%t/plan.pb
// RUN: not ppc-opt %t/no-plan.mlir --ppc-export-plan="file=%t/none.pb" 2>&1 | FileCheck %s --check-prefix=NOPLAN
// RUN: not ppc-opt %t/two-plans.mlir --ppc-export-plan="file=%t/two.pb" 2>&1 | FileCheck %s --check-prefix=TWO
// RUN: not ppc-opt %t/plan.mlir --ppc-export-plan 2>&1 | FileCheck %s --check-prefix=NOFILE
// RUN: not ppc-opt %t/bad-attr.mlir --ppc-export-plan="file=%t/bad.pb" 2>&1 | FileCheck %s --check-prefix=ATTR
// RUN: not ppc-opt %t/plan.mlir --ppc-export-plan="file=%t/no-such-dir/plan.pb" 2>&1 | FileCheck %s --check-prefix=WRITE

// The pass leaves the module as it is.
// IR: plan.plan version 4 ranks 2

// CHECK:      version: 4
// CHECK-NEXT: producer: "ppc-opt {{.*}}"
// CHECK-NEXT: machine {
// CHECK-NEXT:   name: "cpux2"
// CHECK-NEXT:   num_devices: 2
// CHECK-NEXT:   description: "cpu:2"
// CHECK-NEXT: }
// CHECK-NEXT: strategy_json: "{\"mm\": \"dp\"}"
// CHECK-NEXT: training: true
// CHECK-NEXT: optimizer {
// CHECK-NEXT:   kind: ADAM
// CHECK-NEXT:   learning_rate: 0.001
// CHECK-NEXT:   beta1: 0.9
// CHECK-NEXT:   beta2: 0.999
// CHECK-NEXT:   epsilon: 1e-08
// CHECK-NEXT:   weight_decay: 0.01
// CHECK-NEXT: }
// CHECK-NEXT: batch_size: 2

// Tensors are numbered in IR order (proto3 text leaves out id 0).
// CHECK-NEXT: tensors {
// CHECK-NEXT:   name: "x"
// CHECK-NEXT:   shape: 2
// CHECK-NEXT:   shape: 4
// CHECK-NEXT:   dtype: "f32"
// CHECK-NEXT:   role: INPUT
// CHECK-NEXT: }
// CHECK-NEXT: tensors {
// CHECK-NEXT:   id: 1
// CHECK-NEXT:   name: "labels"
// CHECK-NEXT:   shape: 2
// CHECK-NEXT:   dtype: "i64"
// CHECK-NEXT:   role: INPUT
// CHECK-NEXT:   int_max: 3
// CHECK-NEXT: }
// CHECK-NEXT: tensors {
// CHECK-NEXT:   id: 2
// CHECK-NEXT:   name: "w"
// CHECK-NEXT:   shape: 4
// CHECK-NEXT:   shape: 3
// CHECK-NEXT:   dtype: "f32"
// CHECK-NEXT:   role: WEIGHT
// CHECK-NEXT:   init: UNIFORM
// CHECK-NEXT:   init_bound: 0.5
// CHECK-NEXT: }
// Integer values become floats.
// CHECK-NEXT: tensors {
// CHECK-NEXT:   id: 3
// CHECK-NEXT:   name: "c"
// CHECK-NEXT:   shape: 2
// CHECK-NEXT:   dtype: "bf16"
// CHECK-NEXT:   role: CONSTANT
// CHECK-NEXT:   init: DATA
// CHECK-NEXT:   data: 1
// CHECK-NEXT:   data: -2
// CHECK-NEXT: }
// model_name is the file's name.
// CHECK-NEXT: tensors {
// CHECK-NEXT:   id: 4
// CHECK-NEXT:   name: "logits"
// CHECK:      tensors {
// CHECK-NEXT:   id: 5
// CHECK-NEXT:   name: "loss"
// CHECK-NEXT:   dtype: "f32"
// CHECK-NEXT:   role: ACTIVATION
// CHECK-NEXT:   is_output: true
// CHECK-NEXT: }

// Op attributes, sorted by name: float, int (from an i32 enum), type, bool,
// string, dense array, float array, int array, unit.
// CHECK-NEXT: ops {
// CHECK-NEXT:   kind: "ppc.matmul"
// CHECK-NEXT:   name: "mm"
// CHECK-NEXT:   operands: 0
// CHECK-NEXT:   operands: 2
// CHECK-NEXT:   results: 4
// CHECK-NEXT:   attributes {
// CHECK-NEXT:     name: "alpha"
// CHECK-NEXT:     f: 0.5
// CHECK-NEXT:   }
// CHECK-NEXT:   attributes {
// CHECK-NEXT:     name: "approximation"
// CHECK-NEXT:     i: 1
// CHECK-NEXT:   }
// CHECK-NEXT:   attributes {
// CHECK-NEXT:     name: "dtype"
// CHECK-NEXT:     s: "f16"
// CHECK-NEXT:   }
// CHECK-NEXT:   attributes {
// CHECK-NEXT:     name: "flag"
// CHECK-NEXT:     i: 1
// CHECK-NEXT:   }
// CHECK-NEXT:   attributes {
// CHECK-NEXT:     name: "mode"
// CHECK-NEXT:     s: "fast"
// CHECK-NEXT:   }
// CHECK-NEXT:   attributes {
// CHECK-NEXT:     name: "perm"
// CHECK-NEXT:     ints {
// CHECK-NEXT:       values: 1
// CHECK-NEXT:       values: 0
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   attributes {
// CHECK-NEXT:     name: "scales"
// CHECK-NEXT:     floats {
// CHECK-NEXT:       values: 0.25
// CHECK-NEXT:       values: 4
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   attributes {
// CHECK-NEXT:     name: "sizes"
// CHECK-NEXT:     ints {
// CHECK-NEXT:       values: 2
// CHECK-NEXT:       values: 3
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   attributes {
// CHECK-NEXT:     name: "unit"
// CHECK-NEXT:   }
// CHECK-NEXT:   needs_grad: false
// CHECK-NEXT:   needs_grad: true
// CHECK-NEXT: }
// CHECK-NEXT: ops {
// CHECK-NEXT:   id: 1
// CHECK-NEXT:   kind: "ppc.cross_entropy"
// CHECK-NEXT:   name: "ce"
// CHECK-NEXT:   operands: 4
// CHECK-NEXT:   operands: 1
// CHECK-NEXT:   results: 5
// CHECK-NEXT:   needs_grad: true
// CHECK-NEXT:   needs_grad: false
// CHECK-NEXT: }
// CHECK-NEXT: loss_tensor: 5

// Rank 0 (rank 0 is left out as a default). Buffers are numbered 0, 1, ...
// in order of allocation; boxes are global coordinates.
// CHECK-NEXT: programs {
// CHECK-NEXT:   instructions {
// CHECK-NEXT:     phase {
// CHECK-NEXT:       phase: FORWARD
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   instructions {
// CHECK-NEXT:     alloc {
// CHECK-NEXT:       buffer {
// CHECK-NEXT:         box {
// CHECK-NEXT:           lo: 0
// CHECK-NEXT:           lo: 0
// CHECK-NEXT:           hi: 1
// CHECK-NEXT:           hi: 4
// CHECK-NEXT:         }
// CHECK-NEXT:       }
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK:              id: 3
// CHECK-NEXT:         tensor: 4
// CHECK-NEXT:         box {
// CHECK-NEXT:           lo: 0
// CHECK-NEXT:           lo: 0
// CHECK-NEXT:           hi: 1
// CHECK-NEXT:           hi: 3
// CHECK-NEXT:         }
// CHECK-NEXT:       }
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   instructions {
// CHECK-NEXT:     kernel {
// CHECK-NEXT:       inputs: 0
// CHECK-NEXT:       inputs: 2
// CHECK-NEXT:       outputs: 3
// CHECK-NEXT:     }
// CHECK-NEXT:   }

// An in-place collective has result -1.
// CHECK:          collective {
// CHECK-NEXT:       kind: ALL_REDUCE
// CHECK-NEXT:       group: 0
// CHECK-NEXT:       group: 1
// CHECK-NEXT:       buffer: 4
// CHECK-NEXT:       result: -1
// CHECK-NEXT:     }
// CHECK:          output {
// CHECK-NEXT:       buffer: 4
// CHECK-NEXT:     }
// CHECK:          fill {
// CHECK-NEXT:       buffer: 5
// CHECK-NEXT:       value: 0.5
// CHECK-NEXT:     }

// An alloc its first instruction writes whole, and that instruction's
// overwritten gradient: `overwrite` has one entry per input_grads entry.
// CHECK:              id: 6
// CHECK:            uninitialized: true
// grad_mask [true, false] and [false, true]: one input_grads entry per
// operand, -1 where the operand gets no gradient.
// CHECK:          kernel_backward {
// CHECK-NEXT:       op: 1
// CHECK-NEXT:       inputs: 3
// CHECK-NEXT:       inputs: 1
// CHECK-NEXT:       outputs: 4
// CHECK-NEXT:       output_grads: 5
// CHECK-NEXT:       input_grads: 6
// CHECK-NEXT:       input_grads: -1
// CHECK-NEXT:       overwrite: true
// CHECK-NEXT:       overwrite: false
// CHECK-NEXT:     }
// A scratch buffer: tensor -1, shape = hi, box [0, hi).
// CHECK:              id: 8
// CHECK-NEXT:         tensor: -1
// CHECK-NEXT:         box {
// CHECK-NEXT:           lo: 0
// CHECK-NEXT:           hi: 8
// CHECK-NEXT:         }
// CHECK-NEXT:         shape: 8
// CHECK-NEXT:       }
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   instructions {
// CHECK-NEXT:     kernel_backward {
// CHECK-NEXT:       stage: 1
// CHECK-NEXT:       inputs: 0
// CHECK-NEXT:       inputs: 2
// Results the backward does not read are -1, one per result.
// CHECK-NEXT:       outputs: -1
// CHECK-NEXT:       output_grads: 6
// CHECK-NEXT:       input_grads: -1
// CHECK-NEXT:       input_grads: 7
// CHECK-NEXT:       scratch: 8
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   instructions {
// CHECK-NEXT:     free {
// CHECK-NEXT:       buffer: 8
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK:          collective {
// CHECK-NEXT:       kind: REDUCE_SCATTER
// CHECK-NEXT:       group: 0
// CHECK-NEXT:       group: 1
// CHECK-NEXT:       buffer: 7
// CHECK-NEXT:       result: 9
// CHECK-NEXT:       reduction: MAX
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   instructions {
// CHECK-NEXT:     send {
// CHECK-NEXT:       buffer: 9
// CHECK-NEXT:       box {
// CHECK-NEXT:         lo: 0
// CHECK-NEXT:         lo: 0
// CHECK-NEXT:         hi: 2
// CHECK-NEXT:         hi: 3
// CHECK-NEXT:       }
// CHECK-NEXT:       peer: 1
// CHECK-NEXT:       tag: 5
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   instructions {
// CHECK-NEXT:     recv {
// CHECK-NEXT:       buffer: 7
// CHECK-NEXT:       box {
// CHECK-NEXT:         lo: 2
// CHECK-NEXT:         lo: 0
// CHECK-NEXT:         hi: 4
// CHECK-NEXT:         hi: 3
// CHECK-NEXT:       }
// CHECK-NEXT:       peer: 1
// CHECK-NEXT:       tag: 6
// CHECK-NEXT:       accumulate: true
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   instructions {
// CHECK-NEXT:     copy {
// CHECK-NEXT:       src: 9
// CHECK-NEXT:       dst: 7
// CHECK-NEXT:       box {
// CHECK-NEXT:         lo: 0
// CHECK-NEXT:         lo: 0
// CHECK-NEXT:         hi: 2
// CHECK-NEXT:         hi: 3
// CHECK-NEXT:       }
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK:          update {
// CHECK-NEXT:       weight: 2
// CHECK-NEXT:       grad: 7
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }

// Rank 1 numbers its buffers from 0 again.
// CHECK-NEXT: programs {
// CHECK-NEXT:   rank: 1
// CHECK-NEXT:   instructions {
// CHECK-NEXT:     phase {
// CHECK-NEXT:       phase: FORWARD
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   instructions {
// CHECK-NEXT:     alloc {
// CHECK-NEXT:       buffer {
// CHECK-NEXT:         box {
// CHECK-NEXT:           lo: 1
// CHECK-NEXT:           lo: 0
// CHECK-NEXT:           hi: 2
// CHECK-NEXT:           hi: 4
// CHECK-NEXT:         }
// CHECK-NEXT:       }
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NOT:    output {

// The binary file holds the same message, not text.
// BIN-NOT: producer:
// BIN: ppc-opt
// BIN: ppc.matmul
// BIN: ppc.cross_entropy

// NOPLAN: error: ppc-export-plan: the module has no plan.plan to export (run the lowering to the plan dialect first)

// TWO: two-plans.mlir:{{[0-9]+}}:{{[0-9]+}}: error: 'plan.plan' op is a second plan.plan in the module; ppc-export-plan writes exactly one
// TWO: note: the first plan.plan is here

// NOFILE: error: ppc-export-plan needs a file: --ppc-export-plan="file=plan.pb"

// ATTR: error: op attribute 'map' (affine_map<(d0) -> (d0)>) has no plan file form (integer, float, string, int or float list, enum keyword)

// WRITE: error: ppc-export-plan: cannot open '{{.*}}no-such-dir/plan.pb.tmp' for writing

//--- plan.mlir
plan.plan version 4 ranks 2 attributes {batch_size = 2 : i64, loss = @loss, machine = "cpux2", machine_description = "cpu:2", optimizer = {kind = "adam", lr = 1.0e-03, beta1 = 0.9, beta2 = 0.999, epsilon = 1.0e-08, weight_decay = 0.01}, strategy = "{\"mm\": \"dp\"}"} {
  plan.tensor @x input [2, 4] f32
  plan.tensor @labels input [2] i64 {int_max = 3 : i64}
  plan.tensor @w weight [4, 3] f32 {init = 3 : i32, init_bound = 0.5 : f64}
  plan.tensor @c constant [2] bf16 {init = 4 : i32, value = dense<[1, -2]> : tensor<2xi32>}
  plan.tensor @y activation [2, 3] f32 {model_name = "logits"}
  plan.tensor @loss activation [] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {alpha = 0.5 : f64, approximation = 1 : i32, dtype = f16, flag = true, mode = "fast", perm = array<i64: 1, 0>, scales = [0.25, 4.0], sizes = [2, 3], unit}
  plan.op @ce "ppc.cross_entropy" [@y, @labels] -> [@loss] needs_grad [true, false] attributes {}
  plan.program rank 0 {
    plan.phase forward
    %x = plan.alloc @x [0, 0] [1, 4]
    plan.load %x
    %l = plan.alloc @labels [0] [1]
    plan.load %l
    %w = plan.alloc @w [0, 0] [4, 3]
    plan.load %w
    %y = plan.alloc @y [0, 0] [1, 3]
    plan.kernel @mm stage 0 ins(%x, %w) outs(%y)
    %loss = plan.alloc @loss [] []
    plan.kernel @ce stage 0 ins(%y, %l) outs(%loss)
    plan.collective all_reduce %loss group [0, 1]
    plan.output %loss
    plan.phase backward
    %dl = plan.alloc @loss [] [] grad
    plan.fill %dl, 0.5
    %dy = plan.alloc @y [0, 0] [1, 3] grad uninitialized
    plan.kernel_backward @ce stage 0 ins(%y, %l) outs(%loss) output_grads(%dl) input_grads [true, false] (%dy) overwrite [true]
    %dw = plan.alloc @w [0, 0] [4, 3] grad
    %s = plan.alloc [0] [8]
    plan.kernel_backward @mm stage 1 ins(%x, %w) outs() output_grads(%dy) input_grads [false, true] (%dw) scratch(%s)
    plan.free %s
    plan.phase grad_sync
    %half = plan.alloc @w [0, 0] [2, 3] grad
    plan.collective reduce_scatter %dw -> %half group [0, 1] {reduction = "max"}
    plan.send %half [0, 0] [2, 3] to 1 tag 5
    plan.recv %dw [2, 0] [4, 3] from 1 tag 6 accumulate
    plan.copy %half -> %dw [0, 0] [2, 3]
    plan.phase update
    plan.update %w, %dw
  }
  plan.program rank 1 {
    plan.phase forward
    %x = plan.alloc @x [1, 0] [2, 4]
    plan.load %x
    %l = plan.alloc @labels [1] [2]
    plan.load %l
    %w = plan.alloc @w [0, 0] [4, 3]
    plan.load %w
    %y = plan.alloc @y [1, 0] [2, 3]
    plan.kernel @mm stage 0 ins(%x, %w) outs(%y)
    %loss = plan.alloc @loss [] []
    plan.kernel @ce stage 0 ins(%y, %l) outs(%loss)
    plan.collective all_reduce %loss group [0, 1]
    plan.phase backward
    %dl = plan.alloc @loss [] [] grad
    plan.fill %dl, 0.5
    %dy = plan.alloc @y [1, 0] [2, 3] grad
    plan.kernel_backward @ce stage 0 ins(%y, %l) outs(%loss) output_grads(%dl) input_grads [true, false] (%dy)
    %dw = plan.alloc @w [0, 0] [4, 3] grad
    %s = plan.alloc [0] [8]
    plan.kernel_backward @mm stage 1 ins(%x, %w) outs() output_grads(%dy) input_grads [false, true] (%dw) scratch(%s)
    plan.free %s
    plan.phase grad_sync
    %half = plan.alloc @w [2, 0] [4, 3] grad
    plan.collective reduce_scatter %dw -> %half group [0, 1] {reduction = "max"}
    plan.recv %dw [0, 0] [2, 3] from 0 tag 5 accumulate
    plan.send %half [2, 0] [4, 3] to 0 tag 6
    plan.copy %half -> %dw [2, 0] [4, 3]
    plan.phase update
    plan.update %w, %dw
  }
}

//--- no-plan.mlir
module {
}

//--- two-plans.mlir
plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "", machine_description = "", strategy = ""} {
  plan.program rank 0 {
  }
}
plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "", machine_description = "", strategy = ""} {
  plan.program rank 0 {
  }
}

//--- bad-attr.mlir
plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "", machine_description = "", strategy = ""} {
  plan.tensor @x input [2] f32
  plan.tensor @y activation [2] f32
  plan.op @relu "ppc.relu" [@x] -> [@y] needs_grad [false] attributes {map = affine_map<(d0) -> (d0)>}
  plan.program rank 0 {
  }
}
