//===- Passes.td - ppc graph passes ------------------------*- tablegen -*-===//

#ifndef PPC_TRANSFORMS_PASSES_TD
#define PPC_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def OpSummary : Pass<"ppc-op-summary", "mlir::ModuleOp"> {
  let summary = "Print a summary of a ppc graph: ops by kind, weights, FLOPs";
  let description = [{
    Counts the graph ops of every function by kind, the weights and their
    parameter count, the graph inputs and outputs with their shapes, and the
    forward FLOPs given by ParallelizableOpInterface. The module is unchanged.
  }];
  let options = [
    Option<"outputPath", "output", "std::string", "\"-\"",
           "Where to write the summary ('-' for stdout)">,
  ];
}

#endif // PPC_TRANSFORMS_PASSES_TD
