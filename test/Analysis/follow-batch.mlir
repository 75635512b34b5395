// Data parallel follows the batch, not dim 0: in a sequence-first attention
// block ([S, N, E] as PyTorch's nn.MultiheadAttention exports it; the
// arguments say where the batch is with ppc.batch_dim) the batch is tensor
// dim 1, then dim 0 once the heads are transposed to the front, then dim 1
// again. Every op splits the dim that carries it, so nothing is resharded.
// RUN: ppc-opt %s --ppc-auto-parallel="machine=cpux2 search=data-parallel loss=none" | FileCheck %s
// RUN: ppc-opt %s --ppc-auto-parallel="machine=cpux2 search=data-parallel loss=none" | ppc-opt --ppc-materialize-resharding | FileCheck %s --check-prefix=RESHARD
// Positionally (the batch at dim 0 of the inputs) the sequence is split
// until the transpose, and resharding follows.
// RUN: sed 's/ppc.batch_dim = 1/ppc.batch_dim = 0/g' %s | ppc-opt --ppc-auto-parallel="machine=cpux2 search=data-parallel loss=none" | ppc-opt --ppc-materialize-resharding | FileCheck %s --check-prefix=POSITIONAL
// A batch dim beyond the argument's rank is an error.
// RUN: sed 's/ppc.batch_dim = 1/ppc.batch_dim = 3/' %s | not ppc-opt --ppc-auto-parallel="machine=cpux2 search=data-parallel loss=none" 2>&1 | FileCheck %s --check-prefix=BADDIM

func.func @main(%x: tensor<8x4x16xf32> {ppc.batch_dim = 1 : i64}, %t: tensor<8x4x16xf32> {ppc.batch_dim = 1 : i64}) -> tensor<f32> {
  %wq = ppc.weight "wq" : tensor<16x16xf32>
  %wo = ppc.weight "wo" : tensor<16x16xf32>
  %q = ppc.linear %x, %wq : (tensor<8x4x16xf32>, tensor<16x16xf32>) -> tensor<8x4x16xf32> loc("q_proj")
  %qr = ppc.reshape %q : tensor<8x4x16xf32> -> tensor<8x8x8xf32> loc("q_split_heads")
  %qt = ppc.transpose %qr {permutation = array<i64: 1, 0, 2>} : tensor<8x8x8xf32> -> tensor<8x8x8xf32> loc("q_batch_first")
  %s = ppc.matmul %qt, %qt {transpose_rhs = true} : (tensor<8x8x8xf32>, tensor<8x8x8xf32>) -> tensor<8x8x8xf32> loc("scores")
  %p = ppc.softmax %s : tensor<8x8x8xf32> loc("probs")
  %c = ppc.matmul %p, %qt : (tensor<8x8x8xf32>, tensor<8x8x8xf32>) -> tensor<8x8x8xf32> loc("context")
  %ct = ppc.transpose %c {permutation = array<i64: 1, 0, 2>} : tensor<8x8x8xf32> -> tensor<8x8x8xf32> loc("seq_first")
  %cr = ppc.reshape %ct : tensor<8x8x8xf32> -> tensor<8x4x16xf32> loc("merge_heads")
  %o = ppc.linear %cr, %wo : (tensor<8x4x16xf32>, tensor<16x16xf32>) -> tensor<8x4x16xf32> loc("out_proj")
  %l = ppc.mse_loss %o, %t : (tensor<8x4x16xf32>, tensor<8x4x16xf32>) -> tensor<f32> loc("loss")
  return %l : tensor<f32>
}

// CHECK: ppc.linear {{.*}}degrees = [1, 2, 1, 1]
// CHECK: ppc.reshape {{.*}}degrees = [1, 2, 1]
// CHECK: ppc.transpose {{.*}}degrees = [2, 1, 1]
// CHECK: ppc.matmul {{.*}}degrees = [2, 1, 1, 1]
// CHECK: ppc.softmax {{.*}}degrees = [2, 1, 1]
// CHECK: ppc.matmul {{.*}}degrees = [2, 1, 1, 1]
// CHECK: ppc.transpose {{.*}}degrees = [1, 2, 1]
// CHECK: ppc.reshape {{.*}}degrees = [1, 2, 1]
// CHECK: ppc.linear {{.*}}degrees = [1, 2, 1, 1]
// CHECK: ppc.mse_loss {{.*}}degrees = [1, 2, 1]

// RESHARD-NOT: ppc.{{repartition|combine|replicate}}
// POSITIONAL: ppc.{{repartition|combine|replicate}}
// BADDIM: error: argument #0 has ppc.batch_dim 3 but rank 3
