// RUN: split-file %s %t
// Eight-way data parallel (no strategy: the default) on one DGX H100.
// RUN: ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-simulate -o /dev/null | FileCheck %s --check-prefix=DP
// Megatron-style tensor parallel: fc1 column-parallel, fc2 row-parallel.
// RUN: ppc-opt %t/megatron.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-simulate -o /dev/null | FileCheck %s --check-prefix=TP
// Ops without a strategy on device 0, with Adam and a report file.
// RUN: ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-simulate="unassigned=single optimizer=adam overlap=false grad-sync=reduce-scatter output=%t/single.txt" -o /dev/null
// RUN: FileCheck %s --check-prefix=SINGLE < %t/single.txt
// The options that model Megatron-LM's implementation are named in the report.
// RUN: ppc-opt %t/megatron.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-simulate="optimizer=adam grad-sync=reduce-scatter overlap-param-gather=true tp-comm-overlap=true regather-inputs=true fp32-gradients=true" -o /dev/null | FileCheck %s --check-prefix=MEGATRON
// A weight larger than the cpu preset's memory: a warning, not a failure.
// RUN: ppc-opt %t/huge.mlir --ppc-attach-machine=machine=cpu --ppc-simulate -o /dev/null 2>%t/huge.err | FileCheck %s --check-prefix=OOM
// RUN: FileCheck %s --check-prefix=OOMWARN < %t/huge.err
// memory-limit holds every device to a limit of its own (as ppc-search's).
// RUN: ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-simulate="memory-limit=1MiB" -o /dev/null 2>%t/limit.err | FileCheck %s --check-prefix=LIMIT
// RUN: FileCheck %s --check-prefix=LIMITWARN < %t/limit.err
// RUN: not ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-simulate="memory-limit=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADLIMIT
// A measured profile overrides the roofline for the kernels it holds.
// RUN: ppc-opt %t/megatron.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-simulate=profile=%t/profile.json -o /dev/null | FileCheck %s --check-prefix=PROFILE
// A search with a profile says how many of its strategy's kernels the
// profile lacks (the roofline prices them).
// RUN: ppc-opt %t/megatron.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-search="algorithm=data-parallel profile=%t/profile.json" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOTE
// NOTE: ppc-search @megatron: the profile measures {{[1-9][0-9]*}} of the {{[1-9][0-9]*}} kernels (forward and backward) the search may pick; it prices the others at the roofline x {{[0-9.]+}}, the measured kernels' median ratio to it (per op kind where it measures the kind)
// NOTE: ppc-search @megatron: note: {{[1-9][0-9]*}} of the {{[1-9][0-9]*}} kernels of this strategy are not in the profile (priced by the scaled roofline): measure every kernel the search may pick with profile-requests=FILE and ppc-profile PLAN --requests FILE, or run this plan with ppc-run --profile (which adds to the file), and search again
// The timeline as Chrome trace JSON.
// RUN: ppc-opt %t/megatron.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-simulate="trace=%t/trace.json output=%t/ignored.txt" -o /dev/null
// RUN: FileCheck %s --check-prefix=TRACE < %t/trace.json
// Every function with graph ops gets a report, and with a trace its own file.
// RUN: ppc-opt %t/multi.mlir --ppc-attach-machine=machine=cpux2 --ppc-simulate="trace=%t/multi.json" -o /dev/null | FileCheck %s --check-prefix=MULTI
// RUN: FileCheck %s --check-prefix=TRACE2 < %t/multi.a.json
// RUN: FileCheck %s --check-prefix=TRACE2 < %t/multi.b.json
// The module is unchanged.
// RUN: ppc-opt %t/megatron.mlir --ppc-attach-machine=machine=dgx-h100 -o %t/attached.mlir
// RUN: ppc-opt %t/megatron.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-simulate="output=%t/ignored.txt" -o %t/simulated.mlir
// RUN: diff %t/attached.mlir %t/simulated.mlir

// DP-LABEL: ppc simulation @mlp on 8 x H100-SXM5-80GB
// DP-NEXT:  ops: 3 (0 with ppc.strategy, 3 data parallel by default)
// DP-NEXT:  optimizer: sgd, gradient sync: all-reduce overlapped with backward
// DP-NEXT:  cost model: roofline
// DP-NEXT:  iteration time: {{[0-9]+\.[0-9]+}} ms
// DP-NEXT:  throughput: {{[0-9]+\.[0-9]}} samples/s (batch 64)
// DP-NEXT:  model FLOPs: {{[0-9.]+e\+[0-9]+}} per iteration (forward and backward, recomputation not counted)
// DP-NEXT:  model TFLOP/s per device: {{[0-9]+\.[0-9]}}
// DP-NEXT:  MFU: {{[0-9]+\.[0-9]}}% (the graph's FLOPs at device 0's peak rates over the time and 8 devices)
// DP-EMPTY:
// DP-NEXT:  devices:
// DP-NEXT:  device  compute ms comm ms idle ms weights gradients optimizer activations workspace total capacity
// Every device holds a full replica of the weights: 4 M + 4 K + 4 M floats.
// DP-NEXT:  0 {{.*}} 32.02 MiB 32.02 MiB 0 B {{.*}} 80.00 GiB{{$}}
// DP-NEXT:  1 {{.*}} 32.02 MiB
// DP-NEXT:  2 {{.*}} 32.02 MiB
// DP-NEXT:  3 {{.*}} 32.02 MiB
// DP-NEXT:  4 {{.*}} 32.02 MiB
// DP-NEXT:  5 {{.*}} 32.02 MiB
// DP-NEXT:  6 {{.*}} 32.02 MiB
// DP-NEXT:  7 {{.*}} 32.02 MiB
// DP-EMPTY:
// DP-NEXT:  bytes moved by link kind:
// DP-NEXT:  nvlink
// DP-EMPTY:
// DP-NEXT:  ops by time (top 3 of 3):
// DP-NEXT:  op kind degrees fwd ms bwd ms comm ms total ms
// DP-DAG:   fc1 ppc.linear [8,1,1]
// DP-DAG:   fc2 ppc.linear [8,1,1]
// DP-DAG:   ppc.relu#1 ppc.relu [8,1]

// Each device keeps an eighth of each weight; fc2's partial sums cross NVLink.
// TP-LABEL: ppc simulation @megatron on 8 x H100-SXM5-80GB
// TP-NEXT:  ops: 3 (3 with ppc.strategy, 0 data parallel by default)
// TP:       devices:
// TP-NEXT:  device
// TP-COUNT-8: {{^ +[0-7] .* 4.00 MiB +4.00 MiB +0 B }}
// TP-EMPTY:
// TP-NEXT:  bytes moved by link kind:
// TP-NEXT:  nvlink {{[0-9.]+}} MiB ({{[1-9][0-9.e+]*}} B)
// TP:       ops by time
// TP-NEXT:  op kind degrees
// TP-NEXT:  fc2 ppc.linear [1,1,8]
// TP-DAG:   fc1 ppc.linear [1,8,1]
// TP-DAG:   act ppc.gelu [1,8]

// MEGATRON: optimizer: adam, gradient sync: reduce-scatter overlapped with backward, parameter gathers overlapped with forward, tensor-parallel communication overlapped with its linear layers, received linear-layer inputs gathered again in backward, float32 gradients{{$}}

// SINGLE:      ops: 3 (0 with ppc.strategy, 3 on device 0 by default)
// SINGLE-NEXT: optimizer: adam, gradient sync: reduce-scatter after backward
// Adam keeps two states per weight: twice the weights' memory.
// SINGLE:      0 {{.*}} 32.02 MiB 32.02 MiB 64.03 MiB
// SINGLE-NEXT: 1 0.000 0.000 {{[0-9.]+}} 0 B 0 B 0 B 0 B 0 B 0 B 80.00 GiB{{$}}
// SINGLE:      bytes moved by link kind:
// SINGLE-NEXT: none

// OOM:      ppc simulation @huge on 1 x cpu-epyc-2core
// OOM:      warning: out of memory: device 0 needs 32.00 GiB of 22.35 GiB
// OOM:      0 {{.*}} 16.00 GiB 16.00 GiB 0 B {{.*}} 32.00 GiB 22.35 GiB OOM
// OOMWARN:  huge.mlir:{{[0-9]+}}:1: warning: ppc-simulate: @huge does not fit in memory: device 0 needs 32.00 GiB of 22.35 GiB
// LIMIT:      warning: out of memory: device 0 needs {{.*}} MiB of 1.00 MiB
// LIMIT:      0 {{.*}} 1.00 MiB OOM
// LIMITWARN:  warning: ppc-simulate: @mlp does not fit in memory: device 0 needs {{.*}} of 1.00 MiB
// BADLIMIT:   error: ppc-simulate: bad memory-limit '0'; expected e.g. '16GiB', '500MB' or bytes

// fc1's forward kernel, an eighth of its weight on each device, is measured
// at 1 s: every other kernel is computed.
// PROFILE:      cost model: profile '{{.*}}profile.json' (8 kernels measured, {{[1-9][0-9]*}} from the roofline model x {{[0-9.]+}}, the measured kernels' median ratio to it)
// PROFILE-NEXT: iteration time: 10{{[0-9][0-9]\.[0-9]+}} ms
// PROFILE:      fc1 ppc.linear [1,8,1] 1000.000 {{[0-9.]+ [0-9.]+}} 1000.{{[0-9]+$}}

// Constants and frozen weights have no gradient to synchronize.
// MULTI-LABEL: ppc simulation @a on 2 x cpu-epyc-2core
// MULTI:       bytes moved by link kind:
// MULTI-NEXT:  none
// MULTI:       ppc.add#0 ppc.add [2,1]
// MULTI-LABEL: ppc simulation @b on 2 x cpu-epyc-2core
// MULTI:       ppc.relu#0 ppc.relu [2,1]
// MULTI-NOT:   ppc simulation
// TRACE2: "traceEvents"

// TRACE: "traceEvents"
// TRACE: "name":"device 7 (n0.d7)"

//--- mlp.mlir
func.func @mlp(%x: tensor<64x1024xf32>) -> tensor<64x1024xf32> {
  %w1 = ppc.weight "fc1.weight" : tensor<1024x4096xf32>
  %b1 = ppc.weight "fc1.bias" : tensor<4096xf32>
  %w2 = ppc.weight "fc2.weight" : tensor<4096x1024xf32>
  %0 = ppc.linear %x, %w1, %b1 : (tensor<64x1024xf32>, tensor<1024x4096xf32>, tensor<4096xf32>) -> tensor<64x4096xf32> loc("fc1")
  %1 = ppc.relu %0 : tensor<64x4096xf32>
  %2 = ppc.linear %1, %w2 : (tensor<64x4096xf32>, tensor<4096x1024xf32>) -> tensor<64x1024xf32> loc("fc2")
  return %2 : tensor<64x1024xf32>
}

//--- megatron.mlir
func.func @megatron(%x: tensor<64x1024xf32>) -> tensor<64x1024xf32> {
  %w1 = ppc.weight "fc1.weight" : tensor<1024x4096xf32>
  %w2 = ppc.weight "fc2.weight" : tensor<4096x1024xf32>
  %0 = ppc.linear %x, %w1 {ppc.strategy = #ppc.strategy<degrees = [1, 8, 1]>} : (tensor<64x1024xf32>, tensor<1024x4096xf32>) -> tensor<64x4096xf32> loc("fc1")
  %1 = ppc.gelu %0 {ppc.strategy = #ppc.strategy<degrees = [1, 8]>} : tensor<64x4096xf32> loc("act")
  %2 = ppc.linear %1, %w2 {ppc.strategy = #ppc.strategy<degrees = [1, 1, 8]>} : (tensor<64x4096xf32>, tensor<4096x1024xf32>) -> tensor<64x1024xf32> loc("fc2")
  return %2 : tensor<64x1024xf32>
}

//--- huge.mlir
// 4 Gi parameters of f32: 16 GiB of weights and 16 GiB of gradients, more
// than the cpu preset's 24 GB.
func.func @huge(%x: tensor<4x65536xf32>) -> tensor<4x65536xf32> {
  %w = ppc.weight "big" : tensor<65536x65536xf32>
  %0 = ppc.linear %x, %w {ppc.strategy = #ppc.strategy<degrees = [1, 1, 1]>} : (tensor<4x65536xf32>, tensor<65536x65536xf32>) -> tensor<4x65536xf32>
  return %0 : tensor<4x65536xf32>
}

//--- multi.mlir
func.func @a(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %c = ppc.constant dense<1.0> : tensor<8x16xf32>
  %s = ppc.weight "s" frozen : tensor<16xf32>
  %0 = ppc.add %x, %c : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %1 = ppc.mul %0, %s : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}
func.func @b(%x: tensor<8x16xbf16>) -> tensor<8x16xbf16> {
  %0 = ppc.relu %x : tensor<8x16xbf16>
  return %0 : tensor<8x16xbf16>
}
// Nothing to simulate in these.
func.func @empty() {
  return
}
func.func private @decl(tensor<8x16xf32>)

//--- profile.json
{
  "version": 1,
  "device": "H100-SXM5-80GB",
  "entries": [
    {"op": "ppc.linear", "dtype": "f32", "phase": "forward",
     "operand_shapes": [[64, 1024], [1024, 512]], "seconds": 1.0}
  ]
}
