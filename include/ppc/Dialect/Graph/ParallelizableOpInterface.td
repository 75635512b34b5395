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
    InterfaceMethod<
      "How a weight read as operand `operand` starts when the model gives "
      "no values (normalization scales at one, shifts at zero; the fan-in "
      "of a uniform start), or nullopt: the lowering's default (a vector at "
      "zero, else uniform over the fan-in of every dim but the first).",
      "std::optional<::ppc::graph::OperandInit>", "getOperandInit",
      (ins "unsigned":$operand), [{}], [{ return std::nullopt; }]>,
    InterfaceMethod<
      "The exclusive bound of the values an integer operand `operand` may "
      "hold (a label's classes, a gather's indexed dim), or nullopt: what "
      "synthetic integer inputs must respect.",
      "std::optional<int64_t>", "getIndexBound",
      (ins "unsigned":$operand), [{}], [{ return std::nullopt; }]>,
    InterfaceMethod<
      "Whether every result holds values of the operands, moved or "
      "converted but not computed (reshape, transpose, slice, concat, "
      "split, cast): what reads a result reads the operands' values.",
      "bool", "forwardsValues", (ins), [{}], [{ return false; }]>,
    InterfaceMethod<
      "Whether the op is a training loss: its scalar result is the value a "
      "training step minimizes.",
      "bool", "isLoss", (ins), [{}], [{ return false; }]>,
    InterfaceMethod<
      "Adds to `attrs` what the runtime's kernel reads beyond the op's "
      "inherent attributes (a cast's target type).",
      "void", "addKernelAttributes", (ins "::mlir::NamedAttrList &":$attrs),
      [{}], [{ (void)attrs; }]>,
  ];
}

#endif // PPC_DIALECT_GRAPH_PARALLELIZABLEOPINTERFACE_TD
