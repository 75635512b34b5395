//===- ParallelizableOpInterface.td - SOAP op description --*- tablegen -*-===//

#ifndef PPC_DIALECT_GRAPH_PARALLELIZABLEOPINTERFACE_TD
#define PPC_DIALECT_GRAPH_PARALLELIZABLEOPINTERFACE_TD

include "mlir/IR/OpBase.td"

def ParallelizableOpInterface : OpInterface<"ParallelizableOpInterface"> {
  let cppNamespace = "::ppc::graph";
  let description = [{
    Describes an op by its iteration space, as Tofu, GSPMD and linalg do: the
    iteration dimensions with their SOAP kind (sample, attribute, parameter,
    reduction), and for every operand and result the map from iteration
    dimensions to tensor dimensions, with window and stride for convolution
    and pooling. Generic code derives from it each partition's slices, halos,
    replicated weights and partial sums, so the search, the simulator and the
    lowering never special-case an op.
  }];
  let methods = [
    InterfaceMethod<
      "Returns the iteration space: dims, and the access map of every operand "
      "and result.",
      "::ppc::IterationSpace", "getIterationSpace">,
    InterfaceMethod<
      "Returns forward/backward FLOPs and bytes of the whole (unsplit) op.",
      "::ppc::OpCost", "getCost">,
  ];
}

#endif // PPC_DIALECT_GRAPH_PARALLELIZABLEOPINTERFACE_TD
