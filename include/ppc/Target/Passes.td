//===- Passes.td - ppc plan serialization ------------------*- tablegen -*-===//

#ifndef PPC_TARGET_PASSES_TD
#define PPC_TARGET_PASSES_TD

include "mlir/Pass/PassBase.td"

def ExportPlan : Pass<"ppc-export-plan", "mlir::ModuleOp"> {
  let summary = "Write the module's plan.plan as a plan file for ppc-run";
  let description = [{
    Serializes the `plan.plan` op of the module to the versioned protobuf
    plan file of include/ppc/Runtime/plan.proto: binary by default, protobuf
    text format with `text=true` (for people and diffs). The file is written
    atomically. The module is unchanged.
  }];
  let options = [
    Option<"file", "file", "std::string", "\"\"", "Plan file to write">,
    Option<"text", "text", "bool", "false", "Write protobuf text format">,
  ];
}

#endif // PPC_TARGET_PASSES_TD
