// RUN: split-file %s %t
// Export the default (data parallel) strategy of a two-layer MLP.
// Names come from locations: keep them in the printed module.
// RUN: ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=dgx-h100 --ppc-export-strategy=file=%t/dp.json --mlir-print-debuginfo -o %t/attached.mlir
// RUN: FileCheck %s --check-prefix=EXPORT < %t/dp.json
// Export leaves the module unchanged.
// RUN: ppc-opt %t/mlp.mlir --ppc-attach-machine=machine=dgx-h100 --mlir-print-debuginfo -o %t/plain.mlir
// RUN: diff %t/plain.mlir %t/attached.mlir
//
// Edit it with sed: fc1 column-parallel, fc2 row-parallel (Megatron) with
// its sums reduce-scattered along the batch, act on devices 4..7 only; then
// import and simulate exactly that strategy.
// RUN: sed -e '/"name": "fc1"/s/"degrees": \[8, 1, 1\]/"degrees": [1, 8, 1]/' \
// RUN:     -e '/"name": "act"/s/"degrees": \[8, 1\], "start": 0/"degrees": [1, 4], "start": 4/' \
// RUN:     -e '/"name": "fc2"/s/"degrees": \[8, 1, 1\], "start": 0, "strides": \[\]/"degrees": [1, 1, 8], "start": 0, "strides": [], "scatter": 0/' %t/dp.json > %t/tp.json
// RUN: ppc-opt %t/attached.mlir --ppc-import-strategy=file=%t/tp.json | FileCheck %s --check-prefix=IMPORT
// RUN: ppc-opt %t/attached.mlir --ppc-import-strategy=file=%t/tp.json --ppc-simulate -o /dev/null | FileCheck %s --check-prefix=SIM
// Round trip: exporting the imported strategy gives the edited file back.
// RUN: ppc-opt %t/attached.mlir --ppc-import-strategy=file=%t/tp.json --ppc-export-strategy="file=%t/tp2.json predict=false" -o /dev/null
// RUN: FileCheck %s --check-prefix=ROUND < %t/tp2.json
//
// Errors name the entry, and the module is not changed.
// RUN: sed -e 's/"name": "act"/"name": "gelu"/' %t/dp.json > %t/unknown.json
// RUN: not ppc-opt %t/attached.mlir --ppc-import-strategy=file=%t/unknown.json 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: sed -e '/"name": "fc2"/,/"devices"/d' -e 's/"devices": \[4, 5, 6, 7\]},$/"devices": [4, 5, 6, 7]}/' %t/tp2.json > %t/missing.json
// RUN: not ppc-opt %t/attached.mlir --ppc-import-strategy=file=%t/missing.json 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: sed -e '/"name": "fc2"/s/"degrees": \[8, 1, 1\]/"degrees": [3, 1, 1]/' %t/dp.json > %t/degrees.json
// RUN: not ppc-opt %t/attached.mlir --ppc-import-strategy=file=%t/degrees.json 2>&1 | FileCheck %s --check-prefix=DEGREES
// RUN: sed -e '/"name": "fc2"/s/"start": 0/"start": 4/' %t/dp.json > %t/devices.json
// RUN: not ppc-opt %t/attached.mlir --ppc-import-strategy=file=%t/devices.json 2>&1 | FileCheck %s --check-prefix=DEVICES
// RUN: sed -e '/"name": "act"/s/"degrees": \[8, 1\]/"degrees": [8, 1, 1]/' %t/dp.json > %t/rank.json
// RUN: not ppc-opt %t/attached.mlir --ppc-import-strategy=file=%t/rank.json 2>&1 | FileCheck %s --check-prefix=RANK
// RUN: sed -e '/"name": "act"/s/"strides": \[\]/"strides": [], "scatter": 0/' %t/dp.json > %t/scatter.json
// RUN: not ppc-opt %t/attached.mlir --ppc-import-strategy=file=%t/scatter.json 2>&1 | FileCheck %s --check-prefix=SCATTER
// RUN: head -c 300 %t/dp.json > %t/truncated.json
// RUN: not ppc-opt %t/attached.mlir --ppc-import-strategy=file=%t/truncated.json 2>&1 | FileCheck %s --check-prefix=MALFORMED
// RUN: sed -e 's/"strides": \[\],/"stride": [],/' %t/dp.json > %t/typo.json
// RUN: not ppc-opt %t/attached.mlir --ppc-import-strategy=file=%t/typo.json 2>&1 | FileCheck %s --check-prefix=TYPO
// RUN: not ppc-opt %t/attached.mlir --ppc-import-strategy=file=%t/nonexistent.json 2>&1 | FileCheck %s --check-prefix=NOFILE
// A file written for another batch size.
// RUN: sed -e 's/"size": 64, "kind": "sample"/"size": 32, "kind": "sample"/' %t/dp.json > %t/batch.json
// RUN: not ppc-opt %t/attached.mlir --ppc-import-strategy=file=%t/batch.json 2>&1 | FileCheck %s --check-prefix=BATCH
// RUN: not ppc-opt %t/mlp.mlir --ppc-import-strategy=file=%t/dp.json 2>&1 | FileCheck %s --check-prefix=NOMACHINE
// A module printed without locations has lost its op names: say so.
// RUN: ppc-opt %t/attached.mlir -o %t/nameless.mlir
// RUN: not ppc-opt %t/nameless.mlir --ppc-import-strategy=file=%t/dp.json 2>&1 | FileCheck %s --check-prefix=NAMELESS

// EXPORT:      "format": "ppc-strategy",
// EXPORT-NEXT: "version": 1,
// EXPORT-NEXT: "machine": {"device": "H100-SXM5-80GB", "devices": 8, "nodes": 1},
// EXPORT-NEXT: "prediction": {"iteration_ms": {{[0-9.e-]+}}, "peak_memory_bytes": {{[0-9]+}}, "bytes_moved": {{[0-9.e+]+}}, "out_of_memory": false},
// EXPORT-NEXT: "ops": [
// EXPORT-NEXT: {"name": "fc1", "kind": "ppc.linear", "degrees": [8, 1, 1], "start": 0, "strides": [],
// EXPORT-NEXT:  "dims": [{"size": 64, "kind": "sample"}, {"size": 1024, "kind": "parameter"}, {"size": 1024, "kind": "reduction"}],
// EXPORT-NEXT:  "dtype": "f32", "devices": [0, 1, 2, 3, 4, 5, 6, 7],
// EXPORT-NEXT:  "predicted_ms": {"forward": {{[0-9.e-]+}}, "backward": {{[0-9.e-]+}}, "communication": {{[0-9.e-]+}}}},
// EXPORT-NEXT: {"name": "act", "kind": "ppc.gelu", "degrees": [8, 1], "start": 0, "strides": [],
// EXPORT:      {"name": "fc2", "kind": "ppc.linear", "degrees": [8, 1, 1], "start": 0, "strides": [],
// EXPORT:      {{^ +\]$}}
// EXPORT-NEXT: {{^}$}}

// IMPORT: ppc.linear {{.*}}ppc.strategy = #ppc.strategy<degrees = [1, 8, 1]>
// IMPORT: ppc.gelu {{.*}}ppc.strategy = #ppc.strategy<degrees = [1, 4], start = 4>
// IMPORT: ppc.linear {{.*}}ppc.strategy = #ppc.strategy<degrees = [1, 1, 8], scatter = 0>

// SIM:      ops: 3 (3 with ppc.strategy, 0 data parallel by default)
// SIM:      ops by time
// SIM-DAG:  fc1 ppc.linear [1,8,1]
// SIM-DAG:  act ppc.gelu [1,4] @4
// SIM-DAG:  fc2 ppc.linear [1,1,8]

// ROUND-NOT:   "prediction"
// ROUND:       {"name": "fc1", "kind": "ppc.linear", "degrees": [1, 8, 1], "start": 0, "strides": [],
// ROUND:       "devices": [0, 1, 2, 3, 4, 5, 6, 7]}
// ROUND:       {"name": "act", "kind": "ppc.gelu", "degrees": [1, 4], "start": 4, "strides": [],
// ROUND:       "devices": [4, 5, 6, 7]}
// ROUND:       {"name": "fc2", "kind": "ppc.linear", "degrees": [1, 1, 8], "start": 0, "strides": [], "scatter": 0,
// ROUND-NOT:   predicted_ms

// UNKNOWN: error: ppc-import-strategy: {{.*}}unknown.json: ops[1].name: no op named 'gelu' in the model
// MISSING: error: ppc-import-strategy: {{.*}}missing.json: ops: no entry for op 'fc2' (ppc.linear) (every op needs one)
// DEGREES: error: ppc-import-strategy: {{.*}}degrees.json: ops[2]: degrees [3, 1, 1] start 0 do not fit op 'fc2' (ppc.linear) on 8 devices:
// DEVICES: error: ppc-import-strategy: {{.*}}devices.json: ops[2]: degrees [8, 1, 1] start 4 do not fit op 'fc2' (ppc.linear) on 8 devices:
// SCATTER: error: ppc-import-strategy: {{.*}}scatter.json: ops[1]: degrees [8, 1] start 0 do not fit op 'act' (ppc.gelu) on 8 devices: scatter dim 0 is set but result 0 is not a partial sum
// RANK: error: ppc-import-strategy: {{.*}}rank.json: ops[1]: degrees [8, 1, 1] start 0 do not fit op 'act' (ppc.gelu) on 8 devices:
// MALFORMED: error: ppc-import-strategy: {{.*}}truncated.json: invalid JSON: {{.*}}
// TYPO: error: ppc-import-strategy: {{.*}}typo.json: ops[0].stride: unknown key
// NOFILE: error: ppc-import-strategy: cannot read '{{.*}}nonexistent.json'
// BATCH: error: ppc-import-strategy: {{.*}}batch.json: ops[0].dims[0]: is 32 sample, but op 'fc1' (ppc.linear) has 64 sample (was the file written for another model or batch size?)
// NOMACHINE: error: ppc-import-strategy: no machine attached
// NAMELESS: ops[0].name: no op named 'fc1' in the model (its ops have no names: give them a ppc.name attribute, or keep their locations with --mlir-print-debuginfo)

//--- mlp.mlir
func.func @mlp(%x: tensor<64x1024xf32>) -> tensor<64x1024xf32> {
  %w1 = ppc.weight "fc1.weight" : tensor<1024x1024xf32>
  %w2 = ppc.weight "fc2.weight" : tensor<1024x1024xf32>
  %h = ppc.linear %x, %w1 : (tensor<64x1024xf32>, tensor<1024x1024xf32>) -> tensor<64x1024xf32> loc("fc1")
  %a = ppc.gelu %h : tensor<64x1024xf32> loc("act")
  %y = ppc.linear %a, %w2 : (tensor<64x1024xf32>, tensor<1024x1024xf32>) -> tensor<64x1024xf32> loc("fc2")
  return %y : tensor<64x1024xf32>
}
