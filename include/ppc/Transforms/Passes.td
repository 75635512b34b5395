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

def Simulate : Pass<"ppc-simulate", "mlir::ModuleOp"> {
  let summary = "Simulate one training iteration of the module's strategy";
  let description = [{
    Builds the simulator's graph of every function with graph ops, reads the
    `ppc.strategy` of each op (ops without one follow `unassigned`), checks
    each configuration against the op and the machine attached to the module
    (`ppc.machine`, see `--ppc-attach-machine`), and simulates forward,
    backward, gradient synchronization and the optimizer update. Prints a
    report: iteration time and throughput, per-device compute, communication,
    idle time and memory (weights, gradients, optimizer state, activations)
    against capacity, bytes moved per link kind, and the ops that take the
    most time. Needing more memory than a device has is a warning in the
    report, not a failure. The module is unchanged.
  }];
  let options = [
    Option<"optimizer", "optimizer", "::ppc::sim::Optimizer",
           "::ppc::sim::Optimizer::SGD",
           "Optimizer whose state and update are simulated",
           [{::llvm::cl::values(
             clEnumValN(::ppc::sim::Optimizer::SGD, "sgd", "plain SGD"),
             clEnumValN(::ppc::sim::Optimizer::Momentum, "momentum",
                        "SGD with momentum (one state tensor per weight)"),
             clEnumValN(::ppc::sim::Optimizer::Adam, "adam",
                        "Adam (two state tensors per weight)"))}]>,
    Option<"overlap", "overlap", "bool", "true",
           "Overlap each weight's gradient synchronization with the rest of "
           "backward">,
    Option<"gradSync", "grad-sync", "::ppc::sim::GradSync",
           "::ppc::sim::GradSync::AllReduce",
           "How replicas of a weight synchronize their gradients",
           [{::llvm::cl::values(
             clEnumValN(::ppc::sim::GradSync::AllReduce, "all-reduce",
                        "all-reduce of the gradients"),
             clEnumValN(::ppc::sim::GradSync::ReduceScatterAllGather,
                        "reduce-scatter",
                        "reduce-scatter, sharded update, all-gather"))}]>,
    Option<"unassigned", "unassigned", "::ppc::UnassignedPolicy",
           "::ppc::UnassignedPolicy::DataParallel",
           "What ops without a ppc.strategy run as",
           [{::llvm::cl::values(
             clEnumValN(::ppc::UnassignedPolicy::SingleDevice, "single",
                        "whole on device 0"),
             clEnumValN(::ppc::UnassignedPolicy::DataParallel, "data-parallel",
                        "data parallel over all devices"))}]>,
    Option<"profilePath", "profile", "std::string", "\"\"",
           "Measured kernel times (JSON, docs/profile-format.md); kernels it "
           "lacks, and all kernels without it, use the roofline model">,
    Option<"tracePath", "trace", "std::string", "\"\"",
           "Write the simulated timeline as Chrome trace JSON to this file">,
    Option<"outputPath", "output", "std::string", "\"-\"",
           "Where to write the report ('-' for stdout)">,
  ];
}

#endif // PPC_TRANSFORMS_PASSES_TD
