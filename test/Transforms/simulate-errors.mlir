// RUN: split-file %s %t
// RUN: not ppc-opt %t/mlp.mlir --ppc-simulate 2>&1 | FileCheck %s --check-prefix=NOMACHINE
// The verifier rejects a strategy that does not fit the attached machine...
// RUN: not ppc-opt %t/too-wide.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-simulate 2>&1 | FileCheck %s --check-prefix=VERIFIER
// ...and so does the pass, for IR that was not verified against it.
// RUN: not ppc-opt %t/too-wide.mlir --verify-each=false --ppc-attach-machine=machine=dgx-h100 --ppc-simulate 2>&1 | FileCheck %s --check-prefix=CONFIG
// RUN: not ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-simulate=profile=%t/missing.json 2>&1 | FileCheck %s --check-prefix=PROFILE
// RUN: not ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-simulate=grad-bucket-bytes=-1 2>&1 | FileCheck %s --check-prefix=BUCKET
// RUN: not ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-search=grad-bucket-bytes=-5 2>&1 | FileCheck %s --check-prefix=SEARCHBUCKET
// RUN: not ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-simulate=profile=%t/bad-profile.json 2>&1 | FileCheck %s --check-prefix=BADPROFILE
// RUN: not ppc-opt %t/call.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-simulate 2>&1 | FileCheck %s --check-prefix=DIALECT
// RUN: not ppc-opt %t/unregistered.mlir --allow-unregistered-dialect --ppc-attach-machine=machine=dgx-h100 --ppc-simulate 2>&1 | FileCheck %s --check-prefix=UNREGISTERED
// RUN: not ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-simulate=output=%t/no/such/dir/report.txt 2>&1 | FileCheck %s --check-prefix=OUTPUT
// RUN: not ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-simulate=optimizer=lamb 2>&1 | FileCheck %s --check-prefix=OPTION

// A pipelined strategy whose op runs outside its stage's devices, one with a
// batch that does not divide into the micro-batches, and one that fits.
// RUN: not ppc-opt %t/outside.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-simulate 2>&1 | FileCheck %s --check-prefix=OUTSIDE
// RUN: not ppc-opt %t/uneven.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-simulate 2>&1 | FileCheck %s --check-prefix=UNEVEN
// RUN: ppc-opt %t/pipelined.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-simulate=trace=%t/pipeline-trace.json -o /dev/null | FileCheck %s --check-prefix=PIPELINED
// RUN: FileCheck %s --check-prefix=TRACE < %t/pipeline-trace.json

// NOMACHINE: error: ppc-simulate: no machine attached; use --ppc-attach-machine=machine=NAME
// OUTSIDE: error: ppc-simulate: op 'act' runs on device 0, outside its stage 1's devices [4, 8)
// UNEVEN: error: ppc-simulate: op 'fc1' has 16 samples per partition along dim 0, which do not divide into 32 micro-batches
// PIPELINED: pipeline: 2 stages x 4 micro-batches, schedule gpipe, bubble {{[0-9.]+}}%
// PIPELINED: 0 0..3 1
// PIPELINED-NEXT: 1 4..7 1
// TRACE: "name":"stage 0 (devices 0..3)"
// TRACE: "name":"F 0"
// VERIFIER: too-wide.mlir:3:8: error: strategy uses device 15 but the machine has 8 devices
// CONFIG: too-wide.mlir:3:8: error: ppc-simulate: invalid configuration [16,1,1] for op 'ppc.linear#0': {{.+}}
// PROFILE: error: ppc-simulate: cannot read the profile: {{.*}}missing.json
// BUCKET: error: ppc-simulate: grad-bucket-bytes must be >= 0, got -1
// SEARCHBUCKET: error: ppc-search: grad-bucket-bytes must be >= 0, got -5
// BADPROFILE: error: ppc-simulate: cannot read the profile: {{.*}}bad-profile.json: {{.+}}
// DIALECT: call.mlir:3:8: error: cannot simulate 'func.call': only ppc graph ops, weights and constants can be costed
// UNREGISTERED: unregistered.mlir:2:8: error: cannot simulate 'test.custom': only ppc graph ops, weights and constants can be costed
// OUTPUT: error: ppc-simulate: cannot open the report output '{{.*}}report.txt'
// OPTION: ppc-opt: --ppc-simulate: 'lamb' is not a value of optimizer; expected sgd, momentum or adam

//--- mlp.mlir
func.func @mlp(%x: tensor<64x1024xf32>) -> tensor<64x4096xf32> {
  %w1 = ppc.weight "fc1.weight" : tensor<1024x4096xf32>
  %0 = ppc.linear %x, %w1 : (tensor<64x1024xf32>, tensor<1024x4096xf32>) -> tensor<64x4096xf32> loc("fc1")
  return %0 : tensor<64x4096xf32>
}

//--- outside.mlir
func.func @mlp(%x: tensor<64x1024xf32>) -> tensor<64x4096xf32> attributes {ppc.pipeline = #ppc.pipeline<microbatches = 2, schedule = "1f1b", first_devices = [0, 4], devices = [4, 4]>} {
  %w1 = ppc.weight "fc1.weight" : tensor<1024x4096xf32>
  %0 = ppc.linear %x, %w1 {ppc.strategy = #ppc.strategy<degrees = [4, 1, 1]>} : (tensor<64x1024xf32>, tensor<1024x4096xf32>) -> tensor<64x4096xf32> loc("fc1")
  %1 = ppc.relu %0 {ppc.strategy = #ppc.strategy<degrees = [4, 1], stage = 1>} : tensor<64x4096xf32> loc("act")
  return %1 : tensor<64x4096xf32>
}

//--- uneven.mlir
func.func @mlp(%x: tensor<64x1024xf32>) -> tensor<64x4096xf32> attributes {ppc.pipeline = #ppc.pipeline<microbatches = 32, schedule = "1f1b", first_devices = [0, 4], devices = [4, 4]>} {
  %w1 = ppc.weight "fc1.weight" : tensor<1024x4096xf32>
  %0 = ppc.linear %x, %w1 {ppc.strategy = #ppc.strategy<degrees = [4, 1, 1]>} : (tensor<64x1024xf32>, tensor<1024x4096xf32>) -> tensor<64x4096xf32> loc("fc1")
  %1 = ppc.relu %0 {ppc.strategy = #ppc.strategy<degrees = [4, 1], start = 4, stage = 1>} : tensor<64x4096xf32> loc("act")
  return %1 : tensor<64x4096xf32>
}

//--- pipelined.mlir
func.func @mlp(%x: tensor<64x1024xf32>) -> tensor<64x4096xf32> attributes {ppc.pipeline = #ppc.pipeline<microbatches = 4, schedule = "gpipe", first_devices = [0, 4], devices = [4, 4]>} {
  %w1 = ppc.weight "fc1.weight" : tensor<1024x4096xf32>
  %0 = ppc.linear %x, %w1 {ppc.strategy = #ppc.strategy<degrees = [4, 1, 1]>} : (tensor<64x1024xf32>, tensor<1024x4096xf32>) -> tensor<64x4096xf32> loc("fc1")
  %1 = ppc.relu %0 {ppc.strategy = #ppc.strategy<degrees = [4, 1], start = 4, stage = 1>} : tensor<64x4096xf32> loc("act")
  return %1 : tensor<64x4096xf32>
}

//--- too-wide.mlir
func.func @mlp(%x: tensor<64x1024xf32>) -> tensor<64x4096xf32> {
  %w1 = ppc.weight "fc1.weight" : tensor<1024x4096xf32>
  %0 = ppc.linear %x, %w1 {ppc.strategy = #ppc.strategy<degrees = [16, 1, 1]>} : (tensor<64x1024xf32>, tensor<1024x4096xf32>) -> tensor<64x4096xf32>
  return %0 : tensor<64x4096xf32>
}

//--- call.mlir
func.func @mlp(%x: tensor<64x1024xf32>) -> tensor<64x1024xf32> {
  %0 = ppc.relu %x : tensor<64x1024xf32>
  %1 = func.call @helper(%0) : (tensor<64x1024xf32>) -> tensor<64x1024xf32>
  return %1 : tensor<64x1024xf32>
}
func.func private @helper(tensor<64x1024xf32>) -> tensor<64x1024xf32>

//--- unregistered.mlir
func.func @mlp(%x: tensor<64x1024xf32>) -> tensor<64x1024xf32> {
  %0 = "test.custom"(%x) : (tensor<64x1024xf32>) -> tensor<64x1024xf32>
  %1 = ppc.relu %0 : tensor<64x1024xf32>
  return %1 : tensor<64x1024xf32>
}

//--- bad-profile.json
{"not a profile": true
