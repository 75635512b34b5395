// ppc-zigzag-sequence stores the positions a causal attention reads in
// zigzag order: 2 * pairs chunks (here 4 chunks of 2 of 8 positions),
// stored chunk 2j holding chunk j and 2j + 1 chunk 3 - j, i.e. positions
// [0, 1, 6, 7, 2, 3, 4, 5]. A GPT's tokens (a function argument) and its
// position embedding (a weight added to every sample) are gathered into
// that order where they begin, the attention compares natural positions,
// and the logits (a function result) are gathered back ([0, 1, 4, 5, 6, 7,
// 2, 3] inverts it).
// RUN: split-file %s %t
// RUN: %python %ppc_src_root/bench/models.py gpt --layers 1 --hidden 8 --heads 2 --seq 8 --batch 2 --vocab 10 > %t/gpt.mlir
// RUN: ppc-opt %t/gpt.mlir --ppc-zigzag-sequence=pairs=2 | FileCheck %s --check-prefix=GPT
// With the loss added first the labels, reshaped with the logits to
// [16], are gathered where they begin (the [2, 8] argument), and nothing
// is returned per position.
// RUN: ppc-opt %t/gpt.mlir --ppc-add-loss --ppc-zigzag-sequence=pairs=2 | FileCheck %s --check-prefix=LOSS
// Idempotent: a model in zigzag order stays as it is.
// RUN: ppc-opt %t/gpt.mlir --ppc-zigzag-sequence=pairs=2 -o %t/once.mlir
// RUN: ppc-opt %t/once.mlir --ppc-zigzag-sequence=pairs=2 -o %t/twice.mlir
// RUN: diff %t/once.mlir %t/twice.mlir
// Through ppc-auto-parallel, and the training step simulates.
// RUN: ppc-opt %t/gpt.mlir --ppc-auto-parallel="machine=cpux2 search=data-parallel zigzag=2" | FileCheck %s --check-prefix=AUTO
// A mask of both positions (a [S, S] constant) is gathered along both.
// RUN: ppc-opt %t/mask.mlir --ppc-zigzag-sequence=pairs=2 | FileCheck %s --check-prefix=MASK
// A function without causal attention is left as it is.
// RUN: ppc-opt %t/noncausal.mlir --ppc-zigzag-sequence=pairs=2 | FileCheck %s --check-prefix=NONCAUSAL
// Errors.
// RUN: not ppc-opt %t/gpt.mlir --ppc-zigzag-sequence=pairs=3 2>&1 | FileCheck %s --check-prefix=DIVIDE
// RUN: not ppc-opt %t/gpt.mlir --ppc-zigzag-sequence=pairs=0 2>&1 | FileCheck %s --check-prefix=PAIRS
// RUN: not ppc-opt %t/gpt.mlir --ppc-zigzag-sequence=pairs=two 2>&1 | FileCheck %s --check-prefix=PAIRS-TEXT
// RUN: not ppc-opt %t/gpt.mlir --ppc-zigzag-sequence 2>&1 | FileCheck %s --check-prefix=NOMACHINE
//
// pairs=auto (the default) takes the most pairs that divide the machine's
// devices and the sequence: 4 on cpux4 (8 chunks of 1 position), 4 on
// cpux8 too (8 pairs would be 16 chunks of 8 positions); nothing on one
// device. A function it cannot reorder is left as it is, with a remark.
// RUN: ppc-opt %t/gpt.mlir --ppc-attach-machine=machine=cpux4 --ppc-zigzag-sequence | FileCheck %s --check-prefix=AUTO4
// RUN: ppc-opt %t/gpt.mlir --ppc-attach-machine=machine=cpux8 --ppc-zigzag-sequence | FileCheck %s --check-prefix=AUTO8
// RUN: ppc-opt %t/gpt.mlir --ppc-attach-machine=machine=cpu --ppc-zigzag-sequence | FileCheck %s --check-prefix=INORDER
// RUN: ppc-opt %t/sliced.mlir --ppc-attach-machine=machine=cpux2 --ppc-zigzag-sequence 2>&1 | FileCheck %s --check-prefix=AUTO-SLICED
//
// ppc-restore-sequence-order undoes it: with all=true always, the model as
// it was; by default only where no strategy splits a causal attention's
// positions. ppc-auto-parallel applies the automatic order before its
// search and restores natural order after it unless the strategy uses it:
// data parallel gets natural order, a context-parallel ring keeps zigzag.
// RUN: ppc-opt %t/gpt.mlir -o %t/natural.mlir
// RUN: ppc-opt %t/once.mlir --ppc-restore-sequence-order=all=true -o %t/restored.mlir
// RUN: diff %t/natural.mlir %t/restored.mlir
// RUN: ppc-opt %t/once.mlir --ppc-restore-sequence-order -o %t/restored2.mlir
// RUN: diff %t/natural.mlir %t/restored2.mlir
// RUN: ppc-opt %t/gpt.mlir --ppc-auto-parallel="machine=cpux2 search=data-parallel" | FileCheck %s --check-prefix=INORDER
// RUN: ppc-opt %t/gpt.mlir --ppc-auto-parallel="machine=cpux2 search=megatron tp=1 cp=2 cp-comm=ring optimizer=adam" | FileCheck %s --check-prefix=KEPT
// RUN: ppc-opt %t/gpt.mlir --ppc-auto-parallel="machine=cpux2 search=megatron tp=1 cp=2 cp-comm=ring optimizer=adam zigzag=off" | FileCheck %s --check-prefix=INORDER
// RUN: not ppc-opt %t/gpt.mlir --ppc-auto-parallel="machine=cpux2 zigzag=-3" 2>&1 | FileCheck %s --check-prefix=PIPELINE-PAIRS
//
// A strategy file records the order it was written for ("sequence_order")
// and names its gathers; importing it reorders a model in natural order to
// match, and refuses a model in another order.
// RUN: ppc-opt %t/gpt.mlir --ppc-auto-parallel="machine=cpux2 search=megatron tp=1 cp=2 cp-comm=ring optimizer=adam strategy-out=%t/ring.json" -o %t/ring.mlir
// RUN: FileCheck %s --check-prefix=RING-JSON < %t/ring.json
// RUN: ppc-opt %t/gpt.mlir --ppc-auto-parallel="machine=cpux2 strategy-in=%t/ring.json" -o %t/ring-in.mlir
// RUN: diff %t/ring.mlir %t/ring-in.mlir
// RUN: ppc-opt %t/gpt.mlir --ppc-auto-parallel="machine=cpux2 search=data-parallel strategy-out=%t/dp.json"
// RUN: not grep -q sequence_order %t/dp.json
// RUN: not ppc-opt %t/gpt.mlir --ppc-auto-parallel="machine=cpux2 strategy-in=%t/dp.json zigzag=2" 2>&1 | FileCheck %s --check-prefix=IN-NATURAL
// RUN: not ppc-opt %t/gpt.mlir --ppc-auto-parallel="machine=cpux2 strategy-in=%t/ring.json zigzag=4" 2>&1 | FileCheck %s --check-prefix=IN-OTHER
// RUN: sed -e 's/"zigzag_pairs": 2/"zigzag_pairs": 0/' %t/ring.json > %t/zero.json
// RUN: not ppc-opt %t/gpt.mlir --ppc-auto-parallel="machine=cpux2 strategy-in=%t/zero.json" 2>&1 | FileCheck %s --check-prefix=IN-ZERO
// RUN: sed -e 's/"zigzag_pairs": 2/"pairs": 2/' %t/ring.json > %t/typo.json
// RUN: not ppc-opt %t/gpt.mlir --ppc-auto-parallel="machine=cpux2 strategy-in=%t/typo.json" 2>&1 | FileCheck %s --check-prefix=IN-TYPO
// RUN: not ppc-opt %t/sliced.mlir --ppc-zigzag-sequence=pairs=1 2>&1 | FileCheck %s --check-prefix=SLICED
// RUN: not ppc-opt %t/cumsum.mlir --ppc-zigzag-sequence=pairs=1 2>&1 | FileCheck %s --check-prefix=CUMSUM
// RUN: not ppc-opt %t/table.mlir --ppc-zigzag-sequence=pairs=1 2>&1 | FileCheck %s --check-prefix=TABLE

// GPT-LABEL: func.func @main(
// GPT-SAME:    %[[TOKENS:.*]]: tensor<2x8xi64>
// GPT:         %[[ORDER:.*]] = ppc.constant dense<[0, 1, 6, 7, 2, 3, 4, 5]> : tensor<8xi64>
// GPT-NEXT:    %[[STORED:.*]] = ppc.gather %[[TOKENS]], %[[ORDER]] {axis = 1 : i64, ppc.sequence_order} : (tensor<2x8xi64>, tensor<8xi64>) -> tensor<2x8xi64>
// GPT:         %[[POS:.*]] = ppc.weight "pos_embed" : tensor<8x8xf32>
// GPT-NEXT:    %[[ORDER2:.*]] = ppc.constant dense<[0, 1, 6, 7, 2, 3, 4, 5]> : tensor<8xi64>
// GPT-NEXT:    %[[POS2:.*]] = ppc.gather %[[POS]], %[[ORDER2]] {ppc.sequence_order} : (tensor<8x8xf32>, tensor<8xi64>) -> tensor<8x8xf32>
// GPT-NEXT:    %[[EMBED:.*]] = ppc.gather %{{.*}}, %[[STORED]] : (tensor<10x8xf32>, tensor<2x8xi64>) -> tensor<2x8x8xf32>
// GPT-NEXT:    ppc.add %[[EMBED]], %[[POS2]]
// GPT:         ppc.attention {{.*}} {causal = true, layout = "bshd", scale = 5.000000e-01 : f64, zigzag = 2 : i64}
// GPT:         %[[LOGITS:.*]] = ppc.linear {{.*}} -> tensor<2x8x10xf32>
// GPT-NEXT:    %[[BACK:.*]] = ppc.constant dense<[0, 1, 4, 5, 6, 7, 2, 3]> : tensor<8xi64>
// GPT-NEXT:    %[[NATURAL:.*]] = ppc.gather %[[LOGITS]], %[[BACK]] {axis = 1 : i64, ppc.sequence_order} : (tensor<2x8x10xf32>, tensor<8xi64>) -> tensor<2x8x10xf32>
// GPT-NEXT:    return %[[NATURAL]]

// LOSS-LABEL: func.func @main(
// LOSS-SAME:    %[[TOKENS:[^:]*]]: tensor<2x8xi64>, %[[LABELS:[^:]*]]: tensor<2x8xi64>
// LOSS:         ppc.gather %[[LABELS]], %{{.*}} {axis = 1 : i64, ppc.sequence_order} : (tensor<2x8xi64>, tensor<8xi64>) -> tensor<2x8xi64>
// LOSS:         ppc.gather %[[TOKENS]], %{{.*}} {axis = 1 : i64, ppc.sequence_order} : (tensor<2x8xi64>, tensor<8xi64>) -> tensor<2x8xi64>
// LOSS:         ppc.softmax_cross_entropy
// LOSS-NOT:     ppc.gather
// LOSS:         return

// AUTO: ppc.attention {{.*}}zigzag = 2 : i64
// AUTO: return

// AUTO4: ppc.constant dense<[0, 7, 1, 6, 2, 5, 3, 4]> : tensor<8xi64>
// AUTO4: ppc.attention {{.*}}zigzag = 4 : i64
// AUTO8: ppc.constant dense<[0, 7, 1, 6, 2, 5, 3, 4]> : tensor<8xi64>
// AUTO8: ppc.attention {{.*}}zigzag = 4 : i64

// INORDER-NOT: ppc.sequence_order
// INORDER-NOT: zigzag =
// INORDER:     ppc.attention {{.*}}causal = true
// INORDER-NOT: ppc.sequence_order
// INORDER-NOT: zigzag =

// AUTO-SLICED: remark: causal sequences left in natural order (a context-parallel split of them does unequal work per part): ppc-zigzag-sequence: the op reads through a window, slice or stride each of the 4 sequence positions
// AUTO-SLICED-NOT: ppc.gather
// AUTO-SLICED: ppc.attention {{.*}}causal = true
// AUTO-SLICED-NOT: zigzag =

// KEPT: ppc.gather {{.*}}ppc.sequence_order
// KEPT: ppc.attention {{.*}}ppc.strategy = #ppc.strategy<degrees = [1, 1, 2, 1, 1, 1], ring>{{.*}}zigzag = 2 : i64

// RING-JSON: "sequence_order": {"zigzag_pairs": 2},
// RING-JSON: {"name": "zigzag.arg0.1", "kind": "ppc.gather"
// IN-NATURAL: error: ppc-import-strategy: {{.*}}dp.json: sequence_order: the strategy was written for the model with its causal sequences in natural order, this one has them in zigzag order of 2 pairs: import it without reordering the model (ppc-auto-parallel's zigzag=off or auto)
// IN-OTHER: error: ppc-import-strategy: {{.*}}ring.json: sequence_order: the strategy was written for the model with its causal sequences in zigzag order of 2 pairs, this one has them in zigzag order of 4 pairs: import it onto the model in natural order, which is reordered for it, or in the same order (ppc-auto-parallel's zigzag=2)

// IN-ZERO: error: ppc-import-strategy: {{.*}}zero.json: sequence_order.zigzag_pairs: must be at least 1
// IN-TYPO: error: ppc-import-strategy: {{.*}}typo.json: sequence_order.zigzag_pairs: missing

// PIPELINE-PAIRS: error: {{.*}}ppc-zigzag-sequence: pairs must be auto or a whole number of at least 1, got '-3'

// MASK-LABEL: func.func @mask(
// MASK:         %[[M:.*]] = ppc.constant dense<{{.*}}> : tensor<4x4xf32>
// MASK-NEXT:    %[[I:.*]] = ppc.constant dense<[0, 3, 1, 2]> : tensor<4xi64>
// MASK-NEXT:    %[[M0:.*]] = ppc.gather %[[M]], %[[I]] {ppc.sequence_order} : (tensor<4x4xf32>, tensor<4xi64>) -> tensor<4x4xf32>
// MASK-NEXT:    %[[J:.*]] = ppc.constant dense<[0, 3, 1, 2]> : tensor<4xi64>
// MASK-NEXT:    %[[M1:.*]] = ppc.gather %[[M0]], %[[J]] {axis = 1 : i64, ppc.sequence_order} : (tensor<4x4xf32>, tensor<4xi64>) -> tensor<4x4xf32>
// MASK:         %[[MASKED:.*]] = ppc.add %{{.*}}, %[[M1]]
// MASK:         %[[R0:.*]] = ppc.gather %[[MASKED]], %{{.*}} {axis = 1 : i64, ppc.sequence_order}
// MASK-NEXT:    ppc.constant dense<[0, 2, 3, 1]>
// MASK-NEXT:    %[[R1:.*]] = ppc.gather %[[R0]], %{{.*}} {axis = 2 : i64, ppc.sequence_order}
// MASK:         return %{{.*}}, %[[R1]]

// NONCAUSAL-LABEL: func.func @noncausal(
// NONCAUSAL-NOT:   ppc.gather
// NONCAUSAL-NOT:   zigzag

// DIVIDE: error: {{.*}}ppc-zigzag-sequence: 6 chunks need as many keys as queries and a sequence they divide; the attention has 8 queries and 8 keys
// PAIRS: error: {{.*}}ppc-zigzag-sequence: pairs must be auto or a whole number of at least 1, got '0'
// PAIRS-TEXT: error: {{.*}}ppc-zigzag-sequence: pairs must be auto or a whole number of at least 1, got 'two'
// NOMACHINE: error: {{.*}}ppc-zigzag-sequence: pairs=auto takes the pairs from the machine's devices; attach one first (--ppc-attach-machine=machine=NAME) or give pairs=N
// SLICED: error: {{.*}}ppc-zigzag-sequence: the op reads through a window, slice or stride each of the 4 sequence positions that a causal attention reads
// CUMSUM: error: {{.*}}ppc-zigzag-sequence: the op computes across all of the 4 sequence positions
// TABLE: error: {{.*}}ppc-zigzag-sequence: the op selects by index one of the 4 sequence positions

//--- mask.mlir
// A causal attention beside an additive [S, S] mask of the same positions.
func.func @mask(%q: tensor<1x4x2xf32>, %s: tensor<1x4x4xf32>) -> (tensor<1x4x2xf32>, tensor<1x4x4xf32>) {
  %m = ppc.constant dense<[[0.0, -1.0, -1.0, -1.0], [0.0, 0.0, -1.0, -1.0], [0.0, 0.0, 0.0, -1.0], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %o = ppc.attention %q, %q, %q {causal = true} : (tensor<1x4x2xf32>, tensor<1x4x2xf32>, tensor<1x4x2xf32>) -> tensor<1x4x2xf32>
  %scores = ppc.matmul %o, %o {transpose_rhs = true} : (tensor<1x4x2xf32>, tensor<1x4x2xf32>) -> tensor<1x4x4xf32>
  %masked = ppc.add %scores, %m : (tensor<1x4x4xf32>, tensor<4x4xf32>) -> tensor<1x4x4xf32>
  return %o, %masked : tensor<1x4x2xf32>, tensor<1x4x4xf32>
}

//--- noncausal.mlir
func.func @noncausal(%q: tensor<1x8x2xf32>) -> tensor<1x8x2xf32> {
  %o = ppc.attention %q, %q, %q : (tensor<1x8x2xf32>, tensor<1x8x2xf32>, tensor<1x8x2xf32>) -> tensor<1x8x2xf32>
  return %o : tensor<1x8x2xf32>
}

//--- sliced.mlir
// The queries are positions 1..4 of a longer sequence.
func.func @sliced(%x: tensor<1x8x2xf32>) -> tensor<1x4x2xf32> {
  %q = ppc.slice %x {starts = array<i64: 0, 1, 0>, steps = array<i64: 1, 1, 1>} : tensor<1x8x2xf32> -> tensor<1x4x2xf32>
  %o = ppc.attention %q, %q, %q {causal = true} : (tensor<1x4x2xf32>, tensor<1x4x2xf32>, tensor<1x4x2xf32>) -> tensor<1x4x2xf32>
  return %o : tensor<1x4x2xf32>
}

//--- cumsum.mlir
// A running sum over the positions depends on their order.
func.func @cumsum(%x: tensor<1x4x2xf32>) -> tensor<1x4x2xf32> {
  %q = ppc.cumsum %x {axis = 1 : i64} : tensor<1x4x2xf32>
  %o = ppc.attention %q, %q, %q {causal = true} : (tensor<1x4x2xf32>, tensor<1x4x2xf32>, tensor<1x4x2xf32>) -> tensor<1x4x2xf32>
  return %o : tensor<1x4x2xf32>
}

//--- table.mlir
// Rows of the attention's result picked by index: position i of the
// gathered tensor is whatever position idx[i] names.
func.func @table(%x: tensor<1x4x2xf32>, %idx: tensor<3xi64>) -> tensor<1x3x2xf32> {
  %o = ppc.attention %x, %x, %x {causal = true} : (tensor<1x4x2xf32>, tensor<1x4x2xf32>, tensor<1x4x2xf32>) -> tensor<1x4x2xf32>
  %g = ppc.gather %o, %idx {axis = 1 : i64} : (tensor<1x4x2xf32>, tensor<3xi64>) -> tensor<1x3x2xf32>
  return %g : tensor<1x3x2xf32>
}
