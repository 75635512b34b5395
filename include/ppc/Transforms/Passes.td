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

def AttachMachine : Pass<"ppc-attach-machine", "mlir::ModuleOp"> {
  let summary = "Attach a machine description (preset or JSON file) to the module";
  let description = [{
    Sets the module attribute `ppc.machine` to the machine named by `machine`:
    a preset (`p100x16`, `k80x64`, `dgx-a100`, `dgx-a100xN`, `dgx-h100`,
    `dgx-h100xN`, `cpu`, `cpuxN`) or a JSON file in the format of
    docs/machine-format.md. A hierarchical machine becomes a `#topo.cluster`
    attribute; an explicit graph (or any machine with `explicit-graph=true`)
    a `topo.machine` op that the attribute refers to. A machine attached
    before is replaced. `machine=list` prints the presets and changes nothing.
  }];
  let options = [
    Option<"machine", "machine", "std::string", "\"\"",
           "Preset name, path to a machine JSON file, or 'list'">,
    Option<"explicitGraph", "explicit-graph", "bool", "false",
           "Attach the explicit device/link graph even for a cluster">,
  ];
  let dependentDialects = ["::ppc::topo::TopologyDialect"];
}

#endif // PPC_TRANSFORMS_PASSES_TD
