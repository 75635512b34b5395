// RUN: split-file %s %t
// MCMC with a fixed seed and an iteration budget: every op gets a strategy,
// a one-line summary goes to stderr, and nothing else in the module changes.
// RUN: ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-search="budget=200 seed=7 threads=2" -o %t/mcmc.mlir 2>%t/mcmc.err
// RUN: FileCheck %s --check-prefix=MCMC < %t/mcmc.mlir
// RUN: FileCheck %s --check-prefix=SUMMARY < %t/mcmc.err
// RUN: ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=dgx-h100 -o %t/attached.mlir
// RUN: sed -E -e 's/ppc\.strategy = #ppc\.strategy<[^>]*>(, )?//' -e 's/ \{\}//' %t/mcmc.mlir > %t/stripped.mlir
// RUN: diff %t/attached.mlir %t/stripped.mlir
// Deterministic for a seed and a thread count.
// RUN: ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-search="budget=200it seed=7 threads=2" -o %t/mcmc2.mlir 2>/dev/null
// RUN: diff %t/mcmc.mlir %t/mcmc2.mlir
// Without the DP's start, chains start from the baselines only; with it,
// the result is never slower than the DP's own answer.
// RUN: ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-search="budget=200 seed=7 threads=2 dp-start=false" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NODP
// RUN: ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-search="algorithm=dp" -o /dev/null 2>%t/dp.err
// RUN: sed -nE 's/.*: ([0-9.]+) ms per iteration.*/\1/p' %t/dp.err %t/mcmc.err | awk 'NR == 1 { dp = $1 } NR == 2 { found = $1 } END { exit !(NR == 2 && found <= dp) }'
// The found strategy simulates to what the search predicted (or better than
// data parallel, which is one of its starts).
// RUN: ppc-opt %t/mcmc.mlir --ppc-simulate -o /dev/null | FileCheck %s --check-prefix=RESIM
//
// The baselines, taken as they are.
// RUN: ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-search=algorithm=data-parallel 2>/dev/null | FileCheck %s --check-prefix=DP
// RUN: ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-search=algorithm=megatron 2>&1 | FileCheck %s --check-prefix=MEGATRON
// RUN: ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-search=algorithm=one-weird-trick 2>/dev/null | FileCheck %s --check-prefix=OWT
// Dynamic programming and exhaustive search (small enough on 2 devices).
// RUN: ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=cpux2 --ppc-search="algorithm=dp budget=100" 2>&1 | FileCheck %s --check-prefix=DPSEARCH
// RUN: ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=cpux2 --ppc-search="algorithm=exhaustive budget=100" 2>&1 | FileCheck %s --check-prefix=EXHAUSTIVE
// Options of the simulation and a report directory.
// RUN: rm -rf %t/report
// RUN: ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=dgx-h100x2 --ppc-search="budget=100 seed=3 threads=1 optimizer=adam overlap=false grad-sync=reduce-scatter progress=off report-dir=%t/report" -o /dev/null 2>&1 | FileCheck %s --check-prefix=REPORT
// RUN: ls %t/report | FileCheck %s --check-prefix=FILES
// RUN: FileCheck %s --check-prefix=REPORTSTRATEGY < %t/report/strategy.json
// A memory limit nothing fits in: a warning, and still a strategy.
// RUN: ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-search="budget=50 threads=1 memory-limit=1KiB report-dir=%t/nofit" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOFIT
// The report holds every device to the limit: the summary, the baselines
// and strategy.json say out of memory.
// RUN: FileCheck %s --check-prefix=NOFITSUMMARY < %t/nofit/summary.txt
// RUN: FileCheck %s --check-prefix=NOFITBASELINES < %t/nofit/baselines.txt
// RUN: FileCheck %s --check-prefix=NOFITJSON < %t/nofit/strategy.json
// A time budget spent before any simulation ends (a model whose one
// simulation outlasts the phases' shares): every phase says so, the
// comparison too, and the strategy written is said to be unjudged.
// RUN: ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-search="budget=0.000001s" -o %t/stopped.mlir 2>&1 | FileCheck %s --check-prefix=STOPPED
// RUN: FileCheck %s --check-prefix=MCMC < %t/stopped.mlir
//
// Errors.
// RUN: not ppc-opt %t/mlp.mlir --ppc-search 2>&1 | FileCheck %s --check-prefix=NOMACHINE
// RUN: not ppc-opt %t/attached.mlir --ppc-search=algorithm=annealing 2>&1 | FileCheck %s --check-prefix=ALGO
// RUN: not ppc-opt %t/attached.mlir --ppc-search=budget=fast 2>&1 | FileCheck %s --check-prefix=BUDGET
// RUN: not ppc-opt %t/attached.mlir --ppc-search=budget=10x 2>&1 | FileCheck %s --check-prefix=BUDGET
// RUN: not ppc-opt %t/attached.mlir --ppc-search=memory-limit=lots 2>&1 | FileCheck %s --check-prefix=MEMORY
// RUN: not ppc-opt %t/attached.mlir --ppc-search=progress=maybe 2>&1 | FileCheck %s --check-prefix=PROGRESS
// RUN: not ppc-opt %t/big.mlir --ppc-attach-machine=machine=dgx-h100x4 --ppc-search=algorithm=exhaustive 2>&1 | FileCheck %s --check-prefix=TOOBIG

// MCMC:       ppc.linear {{.*}}ppc.strategy = #ppc.strategy<degrees = [{{[0-9, ]+}}]
// MCMC-NEXT:  ppc.gelu {{.*}}ppc.strategy = #ppc.strategy<degrees = [{{[0-9, ]+}}]
// MCMC-NEXT:  ppc.linear {{.*}}ppc.strategy = #ppc.strategy<degrees = [{{[0-9, ]+}}]
// NODP: ppc-search @mlp: MCMC, {{[0-9]+}} iterations
// SUMMARY: ppc-search @mlp: MCMC from the dynamic programming's answer, {{[0-9]+}} iterations in {{[0-9.]+}} s on 2 threads (after the dynamic programming's {{[0-9]+}} evaluations in {{[0-9.]+}} s): {{[0-9.]+}} ms per iteration predicted, data parallel {{[0-9.]+}} ms ({{[0-9.]+}}x)
// STOPPED: ppc-search @mlp: MCMC from the dynamic programming's answer, 0 iterations in {{[0-9.]+}} s on {{[0-9]+}} threads{{.*}}: no time predicted (not simulated within the budget), data parallel not simulated within the budget
// STOPPED-NEXT: considered: dynamic programming: not simulated within the budget; {{MCMC}}: not simulated within the budget; pipeline search: {{.*}}: not simulated within the budget
// STOPPED-NEXT: cut short by the budget: dp: its cost tables outlasted its share of the budget; it answered data parallel
// STOPPED-NEXT: cut short by the budget: mcmc: 0 of its {{[0-9]+}} starts simulated before the budget ran out
// STOPPED: warning: ppc-search: the budget ran out before any strategy for @mlp was simulated whole; the strategy written was not judged (give a larger budget)
// RESIM: ops: 3 (3 with ppc.strategy, 0 data parallel by default)

// DP:       ppc.linear {{.*}}ppc.strategy = #ppc.strategy<degrees = [8, 1, 1]>
// DP-NEXT:  ppc.gelu {{.*}}ppc.strategy = #ppc.strategy<degrees = [8, 1]>
// DP-NEXT:  ppc.linear {{.*}}ppc.strategy = #ppc.strategy<degrees = [8, 1, 1]>
// MEGATRON:  ppc-search @mlp: megatron tp 8 x pp 1 x dp 1, 1 iterations in {{.*}}: {{.*}} ms per iteration predicted, data parallel {{.*}} ms
// MEGATRON:  ppc.linear {{.*}}ppc.strategy = #ppc.strategy<degrees = [1, 8, 1]>
// MEGATRON-NEXT:  ppc.gelu {{.*}}ppc.strategy = #ppc.strategy<degrees = [1, 8]>
// MEGATRON-NEXT:  ppc.linear {{.*}}ppc.strategy = #ppc.strategy<degrees = [1, 1, 8]>
// OWT:      ppc.linear {{.*}}ppc.strategy = #ppc.strategy<degrees = [1, 8, 1]>
// DPSEARCH: ppc-search @mlp: {{.*}} per iteration predicted
// DPSEARCH-COUNT-3: ppc.strategy = #ppc.strategy
// EXHAUSTIVE: ppc-search @mlp: {{.*}} per iteration predicted
// EXHAUSTIVE-COUNT-3: ppc.strategy = #ppc.strategy
// REPORT: ppc-search @mlp: MCMC from the dynamic programming's answer, {{[0-9]+}} iterations in {{[0-9.]+}} s on 1 thread (after the dynamic programming's {{[0-9]+}} evaluations in {{[0-9.]+}} s): {{.*}} per iteration predicted
// FILES-DAG: baselines.json
// FILES-DAG: baselines.txt
// FILES-DAG: graph.dot
// FILES-DAG: graph.html
// FILES-DAG: scaling.csv
// FILES-DAG: search-trace.csv
// FILES-DAG: strategy.json
// FILES-DAG: summary.txt
// FILES-DAG: timeline.json
// REPORTSTRATEGY: "format": "ppc-strategy"
// REPORTSTRATEGY: {"name": "fc1", "kind": "ppc.linear", "degrees": [
// NOFIT: ppc-search @mlp: MCMC from the dynamic programming's answer, {{.*}}: out of memory per iteration predicted, data parallel out of memory
// NOFIT: warning: ppc-search: no strategy found for @mlp fits in memory
// NOFITSUMMARY: peak memory {{.*}} MiB of 1.0 KiB per device {{.*}}OUT OF MEMORY
// NOFITBASELINES: data-parallel {{.*}} OOM
// NOFITBASELINES-NOT: {{ no$}}
// NOFITJSON: "out_of_memory": true

// NOMACHINE: error: ppc-search: no machine attached; use --ppc-attach-machine=machine=NAME
// ALGO: error: ppc-search: unknown algorithm 'annealing'; expected mcmc, dp, exhaustive, pipeline, data-parallel, zero1, zero2, fsdp, megatron, megatron-sp, megatron-distopt, megatron-sp-distopt, megatron-sp-distopt-selective, megatron-sp-distopt-recompute, megatron-sp-fsdp-recompute, ulysses-zero3, deepspeed-moe or one-weird-trick
// BUDGET: error: ppc-search: bad budget '{{.*}}'; expected seconds ('30s', '2m', '1h') or iterations ('5000', '5000it')
// MEMORY: error: ppc-search: bad memory-limit 'lots'
// PROGRESS: error: ppc-search: progress must be auto, on or off, not 'maybe'
// TOOBIG: error: ppc-search: exhaustive search of @big is out of reach: 10^{{[0-9.]+}} strategies; use algorithm=mcmc or algorithm=dp

//--- mlp.mlir
func.func @mlp(%x: tensor<64x1024xf32>) -> tensor<64x1024xf32> {
  %w1 = ppc.weight "fc1.weight" : tensor<1024x1024xf32>
  %w2 = ppc.weight "fc2.weight" : tensor<1024x1024xf32>
  %h = ppc.linear %x, %w1 : (tensor<64x1024xf32>, tensor<1024x1024xf32>) -> tensor<64x1024xf32> loc("fc1")
  %a = ppc.gelu %h : tensor<64x1024xf32> loc("act")
  %y = ppc.linear %a, %w2 : (tensor<64x1024xf32>, tensor<1024x1024xf32>) -> tensor<64x1024xf32> loc("fc2")
  return %y : tensor<64x1024xf32>
}

//--- big.mlir
func.func @big(%x: tensor<64x1024xf32>) -> tensor<64x1024xf32> {
  %w = ppc.weight "w" : tensor<1024x1024xf32>
  %0 = ppc.linear %x, %w : (tensor<64x1024xf32>, tensor<1024x1024xf32>) -> tensor<64x1024xf32>
  %1 = ppc.linear %0, %w : (tensor<64x1024xf32>, tensor<1024x1024xf32>) -> tensor<64x1024xf32>
  %2 = ppc.linear %1, %w : (tensor<64x1024xf32>, tensor<1024x1024xf32>) -> tensor<64x1024xf32>
  %3 = ppc.linear %2, %w : (tensor<64x1024xf32>, tensor<1024x1024xf32>) -> tensor<64x1024xf32>
  %4 = ppc.linear %3, %w : (tensor<64x1024xf32>, tensor<1024x1024xf32>) -> tensor<64x1024xf32>
  %5 = ppc.linear %4, %w : (tensor<64x1024xf32>, tensor<1024x1024xf32>) -> tensor<64x1024xf32>
  return %5 : tensor<64x1024xf32>
}
