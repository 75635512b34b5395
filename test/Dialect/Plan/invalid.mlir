// RUN: ppc-opt %s -split-input-file -allow-unregistered-dialect -verify-diagnostics

// One case per verifier error of the plan dialect, in the order of
// dialects/Plan/PlanOps.cpp: plan.plan, plan.tensor, plan.op, plan.program,
// then the instructions.

// expected-error @+1 {{'plan.plan' op version 5 is not the supported plan format version 4}}
plan.plan version 5 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.program rank 0 {
  }
}

// -----

// expected-error @+1 {{'plan.plan' op num_ranks must be >= 1, got 0}}
plan.plan version 4 ranks 0 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
}

// -----

// expected-error @+1 {{'plan.plan' op batch_size must be >= 0, got -1}}
plan.plan version 4 ranks 1 attributes {batch_size = -1 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.program rank 0 {
  }
}

// -----

// expected-error @+1 {{'plan.plan' op optimizer needs a string 'kind'}}
plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = "", loss = @y, optimizer = {lr = 0.1}} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
  }
}

// -----

// expected-error @+1 {{'plan.plan' op optimizer kind 'rmsprop' is not one of sgd, momentum or adam}}
plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = "", loss = @y, optimizer = {kind = "rmsprop"}} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
  }
}

// -----

// expected-error @+1 {{'plan.plan' op optimizer has unknown parameter 'rate' (expected lr, momentum, beta1, beta2, epsilon, weight_decay)}}
plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = "", loss = @y, optimizer = {kind = "sgd", rate = 0.1}} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
  }
}

// -----

// expected-error @+1 {{'plan.plan' op optimizer parameter 'lr' must be a float}}
plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = "", loss = @y, optimizer = {kind = "sgd", lr = 1 : i64}} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
  }
}

// -----

// expected-error @+1 {{'plan.plan' op a training plan (with an optimizer) needs a loss}}
plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = "", optimizer = {kind = "sgd", lr = 0.1}} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
  }
}

// -----

// expected-error @+1 {{'plan.plan' op loss @mm does not name a plan.tensor}}
plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = "", loss = @mm} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
  }
}

// -----

// expected-error @+1 {{'plan.plan' op body may only hold plan.tensor, plan.op and plan.program, found 'func.func'}}
plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  func.func private @f()
  plan.program rank 0 {
  }
}

// -----

plan.plan version 4 ranks 2 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  // expected-error @+1 {{'plan.program' op rank 2 is out of range for a plan of 2 ranks}}
  plan.program rank 2 {
  }
}

// -----

plan.plan version 4 ranks 2 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.program rank 0 {
  }
  // expected-error @+1 {{'plan.program' op is a second program for rank 0}}
  plan.program rank 0 {
  }
}

// -----

plan.plan version 4 ranks 2 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  // expected-error @+1 {{'plan.program' op for rank 1 is out of order: program #0 must be for rank 0}}
  plan.program rank 1 {
  }
  plan.program rank 0 {
  }
}

// -----

// expected-error @+1 {{'plan.plan' op has no program for rank 1 (it has 2 ranks)}}
plan.plan version 4 ranks 2 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.program rank 0 {
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  // expected-error @+1 {{'plan.tensor' op shape [4, -1] has size -1 in dim 1; sizes must be >= 0}}
  plan.tensor @t input [4, -1] f32
  plan.program rank 0 {
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  // expected-error @+1 {{'plan.tensor' op element type 'complex<f32>' is not an integer or float type}}
  plan.tensor @t input [4] complex<f32>
  plan.program rank 0 {
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  // expected-error @+1 {{'plan.tensor' op init 'data' needs a 'value'}}
  plan.tensor @t weight [2] f32 {init = 4 : i32}
  plan.program rank 0 {
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  // expected-error @+1 {{'plan.tensor' op value must hold integers or floats, not 'complex<f32>'}}
  plan.tensor @t constant [1] f32 {value = dense<(1.0, 2.0)> : tensor<1xcomplex<f32>>}
  plan.program rank 0 {
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  // expected-error @+1 {{'plan.tensor' op value has 3 elements but shape [2, 2] has 4}}
  plan.tensor @t constant [2, 2] f32 {init = 4 : i32, value = dense<1.0> : tensor<3xf32>}
  plan.program rank 0 {
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  // expected-error @+1 {{'plan.tensor' op init_bound must be >= 0}}
  plan.tensor @t weight [2] f32 {init = 3 : i32, init_bound = -1.0 : f64}
  plan.program rank 0 {
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  // expected-error @+1 {{'plan.tensor' op int_max must be >= 0, got -3}}
  plan.tensor @t input [2] i64 {int_max = -3 : i64}
  plan.program rank 0 {
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  // expected-error @+1 {{'plan.tensor' op int_max is only for integer tensors, not 'f32'}}
  plan.tensor @t input [2] f32 {int_max = 3 : i64}
  plan.program rank 0 {
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  // expected-error @+1 {{'plan.op' op kind must not be empty}}
  plan.op @o "" [@x] -> [@y] needs_grad [false] attributes {}
  plan.program rank 0 {
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  // expected-error @+1 {{'plan.op' op needs_grad has 2 entries but the op has 1 operands}}
  plan.op @o "ppc.relu" [@x] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  // expected-error @+1 {{'plan.op' op a flat view has one operand and one result}}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {} {flat_view}
  plan.program rank 0 {
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  // expected-error @+1 {{'plan.op' op operand #1 @q does not name a plan.tensor}}
  plan.op @o "ppc.relu" [@x, @q] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  // expected-error @+1 {{'plan.op' op result #0 @mm does not name a plan.tensor}}
  plan.op @o "ppc.relu" [@x] -> [@mm] needs_grad [false] attributes {}
  plan.program rank 0 {
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  // expected-error @+1 {{'plan.program' op may only hold plan instructions, found 'test.op'}}
  plan.program rank 0 {
    "test.op"() : () -> ()
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %0 = plan.alloc @x [0, 0] [4, 2]
    plan.free %0
    // expected-error @+1 {{'plan.load' op operand #0 uses a buffer after its plan.free}}
    plan.load %0
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %0 = plan.alloc @x [0, 0] [4, 2]
    plan.free %0
    // expected-error @+1 {{'plan.free' op operand #0 uses a buffer after its plan.free}}
    plan.free %0
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    // expected-error @+1 {{'plan.alloc' op 'lo' has 2 entries but 'hi' has 1}}
    %0 = plan.alloc @x [0, 0] [4]
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    // expected-error @+1 {{'plan.alloc' op a scratch buffer (no tensor) cannot be a gradient}}
    %0 = plan.alloc [0] [4] grad
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    // expected-error @+1 {{'plan.alloc' op a staging buffer holds the values of a tensor}}
    %0 = plan.alloc @w [0, 0] [2, 3] grad staging
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    // expected-error @+1 {{'plan.alloc' op scratch buffer must have 'lo' all zero, got [1, 0]}}
    %0 = plan.alloc [1, 0] [4, 4]
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    // expected-error @+1 {{'plan.alloc' op scratch buffer shape [4, -2] has a negative size}}
    %0 = plan.alloc [0, 0] [4, -2]
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    // expected-error @+1 {{'plan.alloc' op @nope does not name a plan.tensor}}
    %0 = plan.alloc @nope [0] [4]
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    // expected-error @+1 {{'plan.alloc' op @mm does not name a plan.tensor}}
    %0 = plan.alloc @mm [0] [4]
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    // expected-error @+1 {{'plan.alloc' op box has rank 1 but @x has rank 2}}
    %0 = plan.alloc @x [0] [4]
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    // expected-error @+1 {{'plan.alloc' op box [0, 0]..[5, 2] is not inside @x of shape [4, 2] (dim 0)}}
    %0 = plan.alloc @x [0, 0] [5, 2]
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    // expected-error @+1 {{'plan.alloc' op box [0, 2]..[4, 1] is not inside @x of shape [4, 2] (dim 1)}}
    %0 = plan.alloc @x [0, 2] [4, 1]
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 6] f32
  plan.tensor @r activation [24] f32
  plan.tensor @h activation [24] bf16
  plan.tensor @w weight [4, 6] f32
  plan.program rank 0 {
    %0 = plan.alloc @x [0, 0] [4, 6]
    // expected-error @+1 {{'plan.alloc' op a view holds a box of a tensor}}
    %1 = plan.alloc [0] [24] view %0
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 6] f32
  plan.tensor @r activation [24] f32
  plan.tensor @h activation [24] bf16
  plan.tensor @w weight [4, 6] f32
  plan.program rank 0 {
    %0 = plan.alloc @x [0, 0] [4, 6]
    // expected-error @+1 {{'plan.alloc' op a view is neither allocated nor filled: it cannot be staging or uninitialized}}
    %1 = plan.alloc @r [0] [24] uninitialized view %0
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 6] f32
  plan.tensor @r activation [24] f32
  plan.tensor @h activation [24] bf16
  plan.tensor @w weight [4, 6] f32
  plan.program rank 0 {
    %0 = plan.alloc [0] [24]
    // expected-error @+1 {{'plan.alloc' op is a view of a scratch buffer}}
    %1 = plan.alloc @r [0] [24] view %0
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 6] f32
  plan.tensor @r activation [24] f32
  plan.tensor @h activation [24] bf16
  plan.tensor @w weight [4, 6] f32
  plan.program rank 0 {
    %0 = plan.alloc @x [0, 0] [4, 6]
    // expected-error @+1 {{'plan.alloc' op is a view holding a gradient of a buffer holding values}}
    %1 = plan.alloc @r [0] [24] grad view %0
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 6] f32
  plan.tensor @r activation [24] f32
  plan.tensor @h activation [24] bf16
  plan.tensor @w weight [4, 6] f32
  plan.program rank 0 {
    %0 = plan.alloc @x [0, 0] [2, 6]
    // expected-error @+1 {{'plan.alloc' op views 24 elements of a buffer of 12}}
    %1 = plan.alloc @r [0] [24] view %0
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 6] f32
  plan.tensor @r activation [24] f32
  plan.tensor @h activation [24] bf16
  plan.tensor @w weight [4, 6] f32
  plan.program rank 0 {
    %0 = plan.alloc @r [0] [24]
    // expected-error @+1 {{'plan.alloc' op is a view holding @w, whose buffers are kept across steps}}
    %1 = plan.alloc @w [0, 0] [4, 6] view %0
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 6] f32
  plan.tensor @r activation [24] f32
  plan.tensor @h activation [24] bf16
  plan.tensor @w weight [4, 6] f32
  plan.program rank 0 {
    %0 = plan.alloc @w [0, 0] [4, 6]
    // expected-error @+1 {{'plan.alloc' op is a view of a buffer of @w, whose buffers are kept across steps}}
    %1 = plan.alloc @r [0] [24] view %0
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 6] f32
  plan.tensor @r activation [24] f32
  plan.tensor @h activation [24] bf16
  plan.tensor @w weight [4, 6] f32
  plan.program rank 0 {
    %0 = plan.alloc @x [0, 0] [4, 6]
    // expected-error @+1 {{'plan.alloc' op is a view of 'f32' elements as 'bf16'}}
    %1 = plan.alloc @h [0] [24] view %0
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %0 = plan.alloc [0] [4]
    // expected-error @+1 {{'plan.load' op buffer is a scratch buffer; it must hold a tensor}}
    plan.load %0
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %0 = plan.alloc @x [0, 0] [4, 2] grad
    // expected-error @+1 {{'plan.load' op buffer holds the gradient of @x; it must hold its value}}
    plan.load %0
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %0 = plan.alloc @y [0, 0] [4, 3]
    // expected-error @+1 {{'plan.load' op buffer holds activation @y, which has no source to load from}}
    plan.load %0
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %0 = plan.alloc @x [0, 0] [4, 2]
    %1 = plan.alloc @x [0, 0] [2, 2]
    // expected-error @+1 {{'plan.copy' op 'lo' has 2 entries but 'hi' has 1}}
    plan.copy %0 -> %1 [0, 0] [2]
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %0 = plan.alloc @x [0, 0] [4, 2]
    %1 = plan.alloc @x [0, 0] [2, 2]
    // expected-error @+1 {{'plan.copy' op box has rank 1 but the source buffer holds a box of rank 2}}
    plan.copy %0 -> %1 [0] [2]
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %0 = plan.alloc @x [0, 0] [4, 2]
    %1 = plan.alloc @x [0, 0] [2, 2]
    // expected-error @+1 {{'plan.copy' op box [1, 0]..[3, 2] is not inside the dest buffer's box [0, 0]..[2, 2] (dim 0)}}
    plan.copy %0 -> %1 [1, 0] [3, 2]
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %0 = plan.alloc @x [2, 0] [4, 2]
    %1 = plan.alloc @x [0, 0] [4, 2]
    // expected-error @+1 {{'plan.copy' op box [0, 0]..[4, 2] is not inside the source buffer's box [2, 0]..[4, 2] (dim 0)}}
    plan.copy %0 -> %1 [0, 0] [4, 2]
  }
}

// -----

plan.plan version 4 ranks 2 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %0 = plan.alloc @x [0, 0] [2, 2]
    // expected-error @+1 {{'plan.send' op box [0, 0]..[4, 2] is not inside the sent buffer's box [0, 0]..[2, 2] (dim 0)}}
    plan.send %0 [0, 0] [4, 2] to 1 tag 0
  }
  plan.program rank 1 {
    plan.phase forward
  }
}

// -----

plan.plan version 4 ranks 2 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %0 = plan.alloc @x [0, 0] [2, 2]
    // expected-error @+1 {{'plan.recv' op box [0, 1]..[2, 3] is not inside the received buffer's box [0, 0]..[2, 2] (dim 1)}}
    plan.recv %0 [0, 1] [2, 3] from 1 tag 0
  }
  plan.program rank 1 {
    plan.phase forward
  }
}

// -----

plan.plan version 4 ranks 2 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %0 = plan.alloc @x [0, 0] [2, 2]
    // expected-error @+1 {{'plan.send' op tag must be >= 0, got -1}}
    plan.send %0 [0, 0] [2, 2] to 1 tag -1
  }
  plan.program rank 1 {
    plan.phase forward
  }
}

// -----

plan.plan version 4 ranks 2 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %0 = plan.alloc @x [0, 0] [2, 2]
    // expected-error @+1 {{'plan.recv' op tag must be >= 0, got -4}}
    plan.recv %0 [0, 0] [2, 2] from 1 tag -4
  }
  plan.program rank 1 {
    plan.phase forward
  }
}

// -----

plan.plan version 4 ranks 2 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %0 = plan.alloc @x [0, 0] [2, 2]
    // expected-error @+1 {{'plan.send' op peer 2 is out of range for a plan of 2 ranks}}
    plan.send %0 [0, 0] [2, 2] to 2 tag 0
  }
  plan.program rank 1 {
    plan.phase forward
  }
}

// -----

plan.plan version 4 ranks 2 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    plan.phase forward
  }
  plan.program rank 1 {
    %0 = plan.alloc @x [0, 0] [2, 2]
    // expected-error @+1 {{'plan.recv' op peer 1 is this program's rank}}
    plan.recv %0 [0, 0] [2, 2] from 1 tag 0
  }
}

// -----

plan.plan version 4 ranks 2 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %0 = plan.alloc @x [0, 0] [2, 2]
    // expected-error @+1 {{'plan.recv' op peer -1 is out of range for a plan of 2 ranks}}
    plan.recv %0 [0, 0] [2, 2] from -1 tag 0
  }
  plan.program rank 1 {
    plan.phase forward
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %x = plan.alloc @x [0, 0] [4, 2]
    %w = plan.alloc @w [0, 0] [2, 3]
    %y = plan.alloc @y [0, 0] [4, 3]
    %dy = plan.alloc @y [0, 0] [4, 3] grad
    %dw = plan.alloc @w [0, 0] [2, 3] grad
    %dx = plan.alloc @x [0, 0] [4, 2] grad
    // expected-error @+1 {{'plan.kernel' op stage must be >= 0, got -1}}
    plan.kernel @mm stage -1 ins(%x, %w) outs(%y)
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %x = plan.alloc @x [0, 0] [4, 2]
    %w = plan.alloc @w [0, 0] [2, 3]
    %y = plan.alloc @y [0, 0] [4, 3]
    %dy = plan.alloc @y [0, 0] [4, 3] grad
    %dw = plan.alloc @w [0, 0] [2, 3] grad
    %dx = plan.alloc @x [0, 0] [4, 2] grad
    // expected-error @+1 {{'plan.kernel' op @x does not name a plan.op}}
    plan.kernel @x stage 0 ins(%x, %w) outs(%y)
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %x = plan.alloc @x [0, 0] [4, 2]
    %w = plan.alloc @w [0, 0] [2, 3]
    %y = plan.alloc @y [0, 0] [4, 3]
    %dy = plan.alloc @y [0, 0] [4, 3] grad
    %dw = plan.alloc @w [0, 0] [2, 3] grad
    %dx = plan.alloc @x [0, 0] [4, 2] grad
    // expected-error @+1 {{'plan.kernel' op has 1 inputs but @mm has 2 operands}}
    plan.kernel @mm stage 0 ins(%x) outs(%y)
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %x = plan.alloc @x [0, 0] [4, 2]
    %w = plan.alloc @w [0, 0] [2, 3]
    %y = plan.alloc @y [0, 0] [4, 3]
    %dy = plan.alloc @y [0, 0] [4, 3] grad
    %dw = plan.alloc @w [0, 0] [2, 3] grad
    %dx = plan.alloc @x [0, 0] [4, 2] grad
    // expected-error @+1 {{'plan.kernel' op has 2 outputs but @mm has 1 results}}
    plan.kernel @mm stage 0 ins(%x, %w) outs(%y, %y)
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %x = plan.alloc @x [0, 0] [4, 2]
    %w = plan.alloc @w [0, 0] [2, 3]
    %y = plan.alloc @y [0, 0] [4, 3]
    %dy = plan.alloc @y [0, 0] [4, 3] grad
    %dw = plan.alloc @w [0, 0] [2, 3] grad
    %dx = plan.alloc @x [0, 0] [4, 2] grad
    // expected-error @+1 {{'plan.kernel' op input #0 holds @w but the op's operand #0 is @x}}
    plan.kernel @mm stage 0 ins(%w, %x) outs(%y)
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %x = plan.alloc @x [0, 0] [4, 2]
    %w = plan.alloc @w [0, 0] [2, 3]
    %y = plan.alloc @y [0, 0] [4, 3]
    %dy = plan.alloc @y [0, 0] [4, 3] grad
    %dw = plan.alloc @w [0, 0] [2, 3] grad
    %dx = plan.alloc @x [0, 0] [4, 2] grad
    // expected-error @+1 {{'plan.kernel' op output #0 must hold the value of @y, not its gradient}}
    plan.kernel @mm stage 0 ins(%x, %w) outs(%dy)
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %x = plan.alloc @x [0, 0] [4, 2]
    %w = plan.alloc @w [0, 0] [2, 3]
    %y = plan.alloc @y [0, 0] [4, 3]
    %dy = plan.alloc @y [0, 0] [4, 3] grad
    %dw = plan.alloc @w [0, 0] [2, 3] grad
    %dx = plan.alloc @x [0, 0] [4, 2] grad
    // expected-error @+1 {{'plan.kernel_backward' op stage must be >= 0, got -2}}
    plan.kernel_backward @mm stage -2 ins(%x, %w) outs(%y) output_grads(%dy) input_grads [false, true] (%dw)
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %x = plan.alloc @x [0, 0] [4, 2]
    %w = plan.alloc @w [0, 0] [2, 3]
    %y = plan.alloc @y [0, 0] [4, 3]
    %dy = plan.alloc @y [0, 0] [4, 3] grad
    %dw = plan.alloc @w [0, 0] [2, 3] grad
    %dx = plan.alloc @x [0, 0] [4, 2] grad
    // expected-error @+1 {{'plan.kernel_backward' op has 2 input_grads but grad_mask has 1 true entries}}
    plan.kernel_backward @mm stage 0 ins(%x, %w) outs(%y) output_grads(%dy) input_grads [false, true] (%dx, %dw)
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %x = plan.alloc @x [0, 0] [4, 2]
    %w = plan.alloc @w [0, 0] [2, 3]
    %y = plan.alloc @y [0, 0] [4, 3]
    %dy = plan.alloc @y [0, 0] [4, 3] grad
    %dw = plan.alloc @w [0, 0] [2, 3] grad uninitialized
    // expected-error @+1 {{'plan.kernel_backward' op has 2 overwrite entries for 1 input_grads}}
    plan.kernel_backward @mm stage 0 ins(%x, %w) outs(%y) output_grads(%dy) input_grads [false, true] (%dw) overwrite [true, false]
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %x = plan.alloc @x [0, 0] [4, 2]
    %w = plan.alloc @w [0, 0] [2, 3]
    %y = plan.alloc @y [0, 0] [4, 3]
    %dy = plan.alloc @y [0, 0] [4, 3] grad
    %dw = plan.alloc @w [0, 0] [2, 3] grad
    %dx = plan.alloc @x [0, 0] [4, 2] grad
    // expected-error @+1 {{'plan.kernel_backward' op @y does not name a plan.op}}
    plan.kernel_backward @y stage 0 ins(%x, %w) outs(%y) output_grads(%dy) input_grads [false, true] (%dw)
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %x = plan.alloc @x [0, 0] [4, 2]
    %w = plan.alloc @w [0, 0] [2, 3]
    %y = plan.alloc @y [0, 0] [4, 3]
    %dy = plan.alloc @y [0, 0] [4, 3] grad
    %dw = plan.alloc @w [0, 0] [2, 3] grad
    %dx = plan.alloc @x [0, 0] [4, 2] grad
    // expected-error @+1 {{'plan.kernel_backward' op has 1 grad_mask entries but @mm has 2 operands}}
    plan.kernel_backward @mm stage 0 ins(%x, %w) outs(%y) output_grads(%dy) input_grads [true] (%dw)
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %x = plan.alloc @x [0, 0] [4, 2]
    %w = plan.alloc @w [0, 0] [2, 3]
    %y = plan.alloc @y [0, 0] [4, 3]
    %dy = plan.alloc @y [0, 0] [4, 3] grad
    %dw = plan.alloc @w [0, 0] [2, 3] grad
    %dx = plan.alloc @x [0, 0] [4, 2] grad
    // expected-error @+1 {{'plan.kernel_backward' op has 3 inputs but @mm has 2 operands}}
    plan.kernel_backward @mm stage 0 ins(%x, %w, %w) outs(%y) output_grads(%dy) input_grads [false, true] (%dw)
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %x = plan.alloc @x [0, 0] [4, 2]
    %w = plan.alloc @w [0, 0] [2, 3]
    %y = plan.alloc @y [0, 0] [4, 3]
    %dy = plan.alloc @y [0, 0] [4, 3] grad
    %dw = plan.alloc @w [0, 0] [2, 3] grad
    %dx = plan.alloc @x [0, 0] [4, 2] grad
    // expected-error @+1 {{'plan.kernel_backward' op has 0 output_grads but @mm has 1 results}}
    plan.kernel_backward @mm stage 0 ins(%x, %w) outs(%y) output_grads() input_grads [false, true] (%dw)
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %x = plan.alloc @x [0, 0] [4, 2]
    %w = plan.alloc @w [0, 0] [2, 3]
    %y = plan.alloc @y [0, 0] [4, 3]
    %dy = plan.alloc @y [0, 0] [4, 3] grad
    %dw = plan.alloc @w [0, 0] [2, 3] grad
    %dx = plan.alloc @x [0, 0] [4, 2] grad
    // expected-error @+1 {{'plan.kernel_backward' op has 2 outputs but @mm has 1 results}}
    plan.kernel_backward @mm stage 0 ins(%x, %w) outs(%y, %y) output_grads(%dy) input_grads [false, true] (%dw)
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %x = plan.alloc @x [0, 0] [4, 2]
    %w = plan.alloc @w [0, 0] [2, 3]
    %y = plan.alloc @y [0, 0] [4, 3]
    %dy = plan.alloc @y [0, 0] [4, 3] grad
    %dw = plan.alloc @w [0, 0] [2, 3] grad
    %dx = plan.alloc @x [0, 0] [4, 2] grad
    // expected-error @+1 {{'plan.kernel_backward' op output_grad #0 must hold the gradient of @y, not its value}}
    plan.kernel_backward @mm stage 0 ins(%x, %w) outs(%y) output_grads(%y) input_grads [false, true] (%dw)
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %x = plan.alloc @x [0, 0] [4, 2]
    %w = plan.alloc @w [0, 0] [2, 3]
    %y = plan.alloc @y [0, 0] [4, 3]
    %dy = plan.alloc @y [0, 0] [4, 3] grad
    %dw = plan.alloc @w [0, 0] [2, 3] grad
    %dx = plan.alloc @x [0, 0] [4, 2] grad
    // expected-error @+1 {{'plan.kernel_backward' op input_grad #1 holds @x but the op's operand #1 is @w}}
    plan.kernel_backward @mm stage 0 ins(%x, %w) outs(%y) output_grads(%dy) input_grads [false, true] (%dx)
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %x = plan.alloc @x [0, 0] [4, 2]
    %w = plan.alloc @w [0, 0] [2, 3]
    %y = plan.alloc @y [0, 0] [4, 3]
    %dy = plan.alloc @y [0, 0] [4, 3] grad
    %dw = plan.alloc @w [0, 0] [2, 3] grad
    %dx = plan.alloc @x [0, 0] [4, 2] grad
    // expected-error @+1 {{'plan.kernel_backward' op input #1 must hold the value of @w, not its gradient}}
    plan.kernel_backward @mm stage 0 ins(%x, %dw) outs() output_grads(%dy) input_grads [false, true] (%dw)
  }
}

// -----

plan.plan version 4 ranks 2 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %w = plan.alloc @w [0, 0] [2, 3]
    %t = plan.alloc @w [0, 0] [2, 3]
    // expected-error @+1 {{'plan.collective' op group must not be empty}}
    plan.collective all_reduce %w group []
  }
  plan.program rank 1 {
    plan.phase forward
  }
}

// -----

plan.plan version 4 ranks 2 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %w = plan.alloc @w [0, 0] [2, 3]
    %t = plan.alloc @w [0, 0] [2, 3]
    // expected-error @+1 {{'plan.collective' op group [0, 2] names rank 2, out of range for a plan of 2 ranks}}
    plan.collective all_reduce %w group [0, 2]
  }
  plan.program rank 1 {
    plan.phase forward
  }
}

// -----

plan.plan version 4 ranks 2 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %w = plan.alloc @w [0, 0] [2, 3]
    %t = plan.alloc @w [0, 0] [2, 3]
    // expected-error @+1 {{'plan.collective' op group [0, 0] names rank 0 twice}}
    plan.collective all_reduce %w group [0, 0]
  }
  plan.program rank 1 {
    plan.phase forward
  }
}

// -----

plan.plan version 4 ranks 2 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %w = plan.alloc @w [0, 0] [2, 3]
    %t = plan.alloc @w [0, 0] [2, 3]
    // expected-error @+1 {{'plan.collective' op group [1] does not contain this program's rank 0}}
    plan.collective all_reduce %w group [1]
  }
  plan.program rank 1 {
    plan.phase forward
  }
}

// -----

plan.plan version 4 ranks 2 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %w = plan.alloc @w [0, 0] [2, 3]
    %t = plan.alloc @w [0, 0] [2, 3]
    // expected-error @+1 {{'plan.collective' op all_reduce works in place and takes no result buffer}}
    plan.collective all_reduce %w -> %t group [0, 1]
  }
  plan.program rank 1 {
    plan.phase forward
  }
}

// -----

plan.plan version 4 ranks 2 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %w = plan.alloc @w [0, 0] [2, 3]
    %t = plan.alloc @w [0, 0] [2, 3]
    // expected-error @+1 {{'plan.collective' op broadcast works in place and takes no result buffer}}
    plan.collective broadcast %w -> %t group [0, 1]
  }
  plan.program rank 1 {
    plan.phase forward
  }
}

// -----

plan.plan version 4 ranks 2 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %w = plan.alloc @w [0, 0] [2, 3]
    %t = plan.alloc @w [0, 0] [2, 3]
    // expected-error @+1 {{'plan.collective' op all_gather needs a result buffer}}
    plan.collective all_gather %w group [0, 1]
  }
  plan.program rank 1 {
    plan.phase forward
  }
}

// -----

plan.plan version 4 ranks 2 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %w = plan.alloc @w [0, 0] [2, 3]
    %t = plan.alloc @w [0, 0] [2, 3]
    // expected-error @+1 {{'plan.collective' op reduction 'min' is not one of sum, max}}
    plan.collective all_reduce %w group [0, 1] {reduction = "min"}
  }
  plan.program rank 1 {
    plan.phase forward
  }
}

// -----

plan.plan version 4 ranks 2 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %w = plan.alloc @w [0, 0] [2, 3]
    %t = plan.alloc @w [0, 0] [2, 3]
    // expected-error @+1 {{'plan.collective' op root 2 is not an index into group [0, 1]}}
    plan.collective broadcast %w group [0, 1] {root = 2 : i64}
  }
  plan.program rank 1 {
    plan.phase forward
  }
}

// -----

plan.plan version 4 ranks 2 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %w = plan.alloc @w [0, 0] [2, 3]
    %t = plan.alloc @w [0, 0] [2, 3]
    // expected-error @+1 {{'plan.collective' op axis must be >= 0, got -1}}
    plan.collective all_gather %w -> %t group [0, 1] {axis = -1 : i64}
  }
  plan.program rank 1 {
    plan.phase forward
  }
}

// -----

plan.plan version 4 ranks 2 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %w = plan.alloc @w [0, 0] [2, 3]
    %t = plan.alloc @w [0, 0] [2, 3]
    // expected-error @+1 {{'plan.collective' op axis 2 is out of range for a buffer of rank 2}}
    plan.collective reduce_scatter %w -> %t group [0, 1] {axis = 2 : i64}
  }
  plan.program rank 1 {
    plan.phase forward
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %w = plan.alloc @w [0, 0] [2, 3]
    %dw = plan.alloc @w [0, 0] [2, 3] grad
    %w1 = plan.alloc @w [0, 0] [1, 3]
    %dx = plan.alloc @x [0, 0] [4, 2] grad
    %x = plan.alloc @x [0, 0] [4, 2]
    %s = plan.alloc [0, 0] [2, 3]
    // expected-error @+1 {{'plan.update' op weight buffer is a scratch buffer; it must hold a tensor}}
    plan.update %s, %dw
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %w = plan.alloc @w [0, 0] [2, 3]
    %dw = plan.alloc @w [0, 0] [2, 3] grad
    %w1 = plan.alloc @w [0, 0] [1, 3]
    %dx = plan.alloc @x [0, 0] [4, 2] grad
    %x = plan.alloc @x [0, 0] [4, 2]
    %s = plan.alloc [0, 0] [2, 3]
    // expected-error @+1 {{'plan.update' op weight buffer holds the gradient of @w; it must hold its value}}
    plan.update %dw, %dw
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %w = plan.alloc @w [0, 0] [2, 3]
    %dw = plan.alloc @w [0, 0] [2, 3] grad
    %w1 = plan.alloc @w [0, 0] [1, 3]
    %dx = plan.alloc @x [0, 0] [4, 2] grad
    %x = plan.alloc @x [0, 0] [4, 2]
    %s = plan.alloc [0, 0] [2, 3]
    // expected-error @+1 {{'plan.update' op grad buffer must hold a gradient (plan.alloc ... grad)}}
    plan.update %w, %w
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %w = plan.alloc @w [0, 0] [2, 3]
    %dw = plan.alloc @w [0, 0] [2, 3] grad
    %w1 = plan.alloc @w [0, 0] [1, 3]
    %dx = plan.alloc @x [0, 0] [4, 2] grad
    %x = plan.alloc @x [0, 0] [4, 2]
    %s = plan.alloc [0, 0] [2, 3]
    // expected-error @+1 {{'plan.update' op grad buffer must hold a gradient (plan.alloc ... grad)}}
    plan.update %w, %s
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %w = plan.alloc @w [0, 0] [2, 3]
    %dw = plan.alloc @w [0, 0] [2, 3] grad
    %w1 = plan.alloc @w [0, 0] [1, 3]
    %dx = plan.alloc @x [0, 0] [4, 2] grad
    %x = plan.alloc @x [0, 0] [4, 2]
    %s = plan.alloc [0, 0] [2, 3]
    // expected-error @+1 {{'plan.update' op weight buffer holds @w but grad buffer holds the gradient of @x}}
    plan.update %w, %dx
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %w = plan.alloc @w [0, 0] [2, 3]
    %dw = plan.alloc @w [0, 0] [2, 3] grad
    %w1 = plan.alloc @w [0, 0] [1, 3]
    %dx = plan.alloc @x [0, 0] [4, 2] grad
    %x = plan.alloc @x [0, 0] [4, 2]
    %s = plan.alloc [0, 0] [2, 3]
    // expected-error @+1 {{'plan.update' op weight buffer box [0, 0]..[1, 3] differs from grad buffer box [0, 0]..[2, 3], which is neither it nor a shard of its rows}}
    plan.update %w1, %dw
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %w = plan.alloc @w [0, 0] [2, 3]
    %dw = plan.alloc @w [0, 0] [2, 3] grad
    %w1 = plan.alloc @w [0, 0] [1, 3]
    %dx = plan.alloc @x [0, 0] [4, 2] grad
    %x = plan.alloc @x [0, 0] [4, 2]
    %s = plan.alloc [0, 0] [2, 3]
    // expected-error @+1 {{'plan.update' op updates @x, a input tensor; only weights are trained}}
    plan.update %x, %dx
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %0 = plan.alloc @x [0, 0] [4, 2]
    // expected-error @+1 {{'plan.output' op buffer holds @x, which is not an output (is_output)}}
    plan.output %0
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %0 = plan.alloc @y [0, 0] [2, 3]
    // expected-error @+1 {{'plan.output' op buffer holds box [0, 0]..[2, 3] of @y, not the whole tensor [4, 3]}}
    plan.output %0
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %0 = plan.alloc @y [0, 0] [4, 3] grad
    // expected-error @+1 {{'plan.output' op buffer holds the gradient of @y; it must hold its value}}
    plan.output %0
  }
}

// -----

plan.plan version 4 ranks 1 attributes {batch_size = 0 : i64, machine = "m", machine_description = "", strategy = ""} {
  plan.tensor @x input [4, 2] f32
  plan.tensor @w weight [2, 3] f32
  plan.tensor @y activation [4, 3] f32 {is_output}
  plan.op @mm "ppc.matmul" [@x, @w] -> [@y] needs_grad [false, true] attributes {}
  plan.program rank 0 {
    %0 = plan.alloc [0, 0] [4, 3]
    // expected-error @+1 {{'plan.output' op buffer is a scratch buffer; it must hold a tensor}}
    plan.output %0
  }
}
