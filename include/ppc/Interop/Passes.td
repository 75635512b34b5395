//===- Passes.td - ppc interop with upstream MLIR ----------*- tablegen -*-===//
//
// Passes between ppc's graph dialect and upstream MLIR: importing the TOSA and
// linalg-on-tensors functions that MLIR front ends (torch-mlir and others)
// emit, and exporting a chosen strategy as upstream `shard` annotations.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_INTEROP_PASSES_TD
#define PPC_INTEROP_PASSES_TD

include "mlir/Pass/PassBase.td"

def ImportUpstream : Pass<"ppc-import-upstream", "mlir::ModuleOp"> {
  let summary = "Import TOSA and linalg-on-tensors functions into ppc graph ops";
  let description = [{
    Rewrites every function of upstream tensor ops (the `tosa`,
    `linalg`-on-tensors, `tensor`, `arith` and `math` ops that torch-mlir and
    other MLIR front ends emit) into ppc graph ops, as the ONNX importer does
    for an ONNX model: function arguments are graph inputs (named `argN`,
    batch along dim 0), floating-point constants of more than one element are
    trainable `ppc.weight`s, other constants `ppc.constant`s. NHWC TOSA
    convolutions and poolings become NCHW ppc ops between transposes; a
    `linalg` contraction whose init is not zero adds it; decomposed softmax
    (`exp(x - max(x))` divided by its sum) becomes `ppc.softmax`.

    An op that has no ppc counterpart is an error naming it at its location.
    Functions with no upstream op are left as they are, so the pass is a
    no-op on a ppc graph (the `ppc-auto-parallel` pipeline and the model
    loader run it first).
  }];
  let dependentDialects = ["::ppc::graph::PPCDialect"];
}

def ExportShard : Pass<"ppc-export-shard", "mlir::ModuleOp"> {
  let summary = "Export a chosen strategy as upstream shard annotations on linalg";
  let description = [{
    Rewrites a ppc graph whose ops carry `#ppc.strategy` into upstream ops
    (`linalg` on tensors) annotated with the `shard` dialect: one
    `shard.grid @grid` whose axes come from the devices the strategy uses
    (each axis one level of the machine views' strides), a `shard.shard` of
    every operand as the op's partitions read it (`annotate_for_users`) and
    of every result as its partitions produce it. A reduction split leaves
    the result unsplit along its grid axes, so upstream `shard-partition`
    inserts the all-reduce. A `scatter` strategy is exported the same way,
    the consumer's operand annotation slicing the summed result (LLVM 22's
    `shard-partition` crashes on a result split along the axes of its own
    reduction).

    The result is meant for upstream
    `mlir-opt --pass-pipeline='builtin.module(func.func(sharding-propagation,shard-partition))'`.
    Ops without a linalg form here, windowed accesses (halos), broadcast
    size-1 dims (upstream sharding rejects a constant in an indexing map),
    pipeline stages and views that do not start at device 0 are errors
    naming the op.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::shard::ShardDialect"];
}

#endif // PPC_INTEROP_PASSES_TD
