//===- PlanOps.td - ppc plan dialect: per-rank programs ----*- tablegen -*-===//
//
// The runtime plan as IR: the model's global graph (plan.tensor, plan.op)
// and one plan.program per rank of instructions on !plan.buffer values.
// It mirrors include/ppc/Runtime/plan.proto one to one: lib/Target writes a
// plan.plan op as that protobuf file, which ppc-run executes.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_DIALECT_PLAN_PLANOPS_TD
#define PPC_DIALECT_PLAN_PLANOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/EnumAttr.td"

def Plan_Dialect : Dialect {
  let name = "plan";
  let cppNamespace = "::ppc::plan";
  let summary = "Per-rank runtime programs of a partitioned training step";
  let description = [{
    A `plan.plan` holds what the executor needs: the global tensors and ops
    of the model (so that a step can be re-run on one device to verify it),
    and one `plan.program` per rank. A program allocates buffers that hold
    boxes of global tensors, runs forward and backward kernels of graph ops on
    them, moves boxes between ranks (send/recv) and runs collectives over
    rank groups, in the phases of a training step.
  }];
  let useDefaultTypePrinterParser = 1;
}

class Plan_Op<string mnemonic, list<Trait> traits = []>
    : Op<Plan_Dialect, mnemonic, traits>;

def Plan_BufferType : TypeDef<Plan_Dialect, "Buffer"> {
  let mnemonic = "buffer";
  let summary = "A dense float32 buffer holding a box of a tensor";
}

def Plan_Phase : I32EnumAttr<"Phase", "phase of a training step", [
    I32EnumAttrCase<"forward", 1>, I32EnumAttrCase<"loss", 2>,
    I32EnumAttrCase<"backward", 3>, I32EnumAttrCase<"grad_sync", 4>,
    I32EnumAttrCase<"update", 5>]> {
  let cppNamespace = "::ppc::plan";
}

def Plan_Role : I32EnumAttr<"Role", "where a tensor's values come from", [
    I32EnumAttrCase<"activation", 1>, I32EnumAttrCase<"input", 2>,
    I32EnumAttrCase<"weight", 3>, I32EnumAttrCase<"frozen", 4>,
    I32EnumAttrCase<"constant", 5>]> {
  let cppNamespace = "::ppc::plan";
}

def Plan_Init : I32EnumAttr<"Init", "initial value of a weight", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"zeros", 1>,
    I32EnumAttrCase<"ones", 2>, I32EnumAttrCase<"uniform", 3>,
    I32EnumAttrCase<"data", 4>]> {
  let cppNamespace = "::ppc::plan";
}

def Plan_CollectiveKind : I32EnumAttr<"CollectiveKind", "collective", [
    I32EnumAttrCase<"all_reduce", 1>, I32EnumAttrCase<"all_gather", 2>,
    I32EnumAttrCase<"reduce_scatter", 3>, I32EnumAttrCase<"broadcast", 4>,
    I32EnumAttrCase<"all_to_all", 5>]> {
  let cppNamespace = "::ppc::plan";
}

//===----------------------------------------------------------------------===//
// Structure
//===----------------------------------------------------------------------===//

def Plan_PlanOp : Plan_Op<"plan", [SymbolTable, NoTerminator,
    NoRegionArguments, SingleBlock, IsolatedFromAbove]> {
  let summary = "A runtime plan: global graph plus one program per rank";
  let description = [{
    ```mlir
    plan.plan version 1 ranks 2 attributes {machine = "cpux2", ...} {
      plan.tensor @x input [8, 784] f32 ...
      plan.op @fc1 "ppc.linear" (@x, @w, @b) -> (@h) {...}
      plan.program rank 0 { ... }
      plan.program rank 1 { ... }
    }
    ```
    `optimizer` is a dictionary {kind = "sgd"|"momentum"|"adam", lr, momentum,
    beta1, beta2, epsilon, weight_decay}; absent for forward-only plans.
    `model_flops`: the model's forward and backward FLOPs of one step
    (recomputation not counted), for ppc-run's model FLOPs utilization.
  }];
  let arguments = (ins I64Attr:$version, I64Attr:$num_ranks,
                       StrAttr:$machine, StrAttr:$machine_description,
                       StrAttr:$strategy, I64Attr:$batch_size,
                       OptionalAttr<DictionaryAttr>:$optimizer,
                       OptionalAttr<FlatSymbolRefAttr>:$loss,
                       OptionalAttr<F64Attr>:$model_flops);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat =
      "`version` $version `ranks` $num_ranks attr-dict-with-keyword $body";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The plan format version the verifier accepts. It must equal
    /// ppc::runtime::kPlanVersion (lib/Target static_asserts it: the dialect
    /// cannot include the protobuf-generated PlanIO.h).
    static constexpr uint64_t kSupportedVersion = 4;
  }];
}

def Plan_TensorOp : Plan_Op<"tensor", [Symbol,
    HasParent<"::ppc::plan::PlanOp">]> {
  let summary = "A global tensor of the model";
  let description = [{
    `init` and `init_bound` say how a weight starts (`data` uses `value`);
    `int_max` bounds synthetic integer inputs (labels in [0, classes)).
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Plan_Role:$role,
                       DenseI64ArrayAttr:$shape, TypeAttr:$element_type,
                       DefaultValuedAttr<Plan_Init, "::ppc::plan::Init::none">:$init,
                       DefaultValuedAttr<F64Attr, "0.0">:$init_bound,
                       OptionalAttr<ElementsAttr>:$value,
                       DefaultValuedAttr<I64Attr, "0">:$int_max,
                       UnitAttr:$is_output, OptionalAttr<StrAttr>:$model_name);
  let assemblyFormat = "$sym_name $role $shape $element_type attr-dict";
  let hasVerifier = 1;
}

def Plan_GraphOp : Plan_Op<"op", [Symbol, HasParent<"::ppc::plan::PlanOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "An op of the global graph, with its ppc dialect attributes";
  let description = [{
    `flat_view`: the op's result holds its operand's elements in the same
    row-major order (IterationSpace::flatView, a reshape), so a partition
    whose boxes visit the same elements in the same order can share its
    operand's buffer instead of running a kernel (ppc-alias-views).
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrAttr:$kind,
                       FlatSymbolRefArrayAttr:$operands,
                       FlatSymbolRefArrayAttr:$results,
                       DictionaryAttr:$op_attributes,
                       DenseBoolArrayAttr:$needs_grad,
                       OptionalAttr<StrAttr>:$model_name,
                       UnitAttr:$flat_view);
  let assemblyFormat = "$sym_name $kind $operands `->` $results "
                       "`needs_grad` $needs_grad `attributes` $op_attributes "
                       "attr-dict";
  let hasVerifier = 1;
}

def Plan_ProgramOp : Plan_Op<"program", [NoTerminator, SingleBlock,
    NoRegionArguments, HasParent<"::ppc::plan::PlanOp">]> {
  let summary = "The instructions of one rank, in execution order";
  let arguments = (ins I64Attr:$rank);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "`rank` $rank attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Instructions
//===----------------------------------------------------------------------===//

// An instruction of a rank's program. Its plan file message is derived from
// its arguments (tools/ppc-tblgen/PlanFormatGen.cpp says how), or given in
// `protoMessage` and converted by hand in lib/Target/PlanExport.cpp.
// `protoField` numbers it in the Instruction message's `kind` oneof: never
// change or reuse one (plan files written before would read wrong).
// `protoName` names its message where the mnemonic's CamelCase would not do.
class Plan_InstrOp<string mnemonic, int number, list<Trait> traits = []>
    : Plan_Op<mnemonic, !listconcat(traits,
          [HasParent<"::ppc::plan::ProgramOp">])> {
  int protoField = number;
  string protoName = "";
  code protoMessage = "";
}

def Plan_PhaseOp : Plan_InstrOp<"phase", 1> {
  let summary = "Starts a phase of the step (for timing and traces)";
  // `Phase` is the enum's name.
  let protoName = "PhaseMarker";
  let arguments = (ins Plan_Phase:$phase);
  let assemblyFormat = "$phase attr-dict";
}

def Plan_AllocOp : Plan_InstrOp<"alloc", 2,
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "A buffer holding box [lo, hi) of a tensor (or its gradient)";
  let description = [{
    Without `tensor` the buffer is scratch of shape `hi` (lo all 0).
    `staging` marks a step-local copy of a weight's values (ZeRO-3 gathers
    the whole weight from its shards into one for each use): unlike the
    weight's own buffers it is not kept across steps nor checkpointed.
    A buffer is zero-filled when allocated, unless `uninitialized`: its
    first instruction writes every element (ppc-elide-zero-fills).
    With `view`, nothing is allocated: the buffer is the memory of the
    buffer `view` names, as many elements of the same type in the same
    order, read as this box (a reshape's result sharing its operand's
    buffer, ppc-alias-views); freeing either leaves the other, and a write
    through one is seen through both.
  }];
  let arguments = (ins OptionalAttr<FlatSymbolRefAttr>:$tensor,
                       DenseI64ArrayAttr:$lo, DenseI64ArrayAttr:$hi,
                       UnitAttr:$grad, UnitAttr:$staging,
                       UnitAttr:$uninitialized,
                       Optional<Plan_BufferType>:$view);
  let results = (outs Plan_BufferType:$buffer);
  let assemblyFormat =
      "($tensor^)? $lo $hi (`grad` $grad^)? (`staging` $staging^)? "
      "(`uninitialized` $uninitialized^)? (`view` $view^)? attr-dict";
  // The buffer is zero-filled unless `uninitialized`: its first instruction
  // writes every element. With `view`, nothing is allocated: the buffer is
  // the memory of live buffer `view`, read as this buffer's box.
  let protoMessage = [{
    message Alloc {
      Buffer buffer = 1;
      bool uninitialized = 2;
      optional int32 view = 3;
    }
  }];
  let hasVerifier = 1;
}

def Plan_FreeOp : Plan_InstrOp<"free", 3> {
  let arguments = (ins Plan_BufferType:$buffer);
  let assemblyFormat = "$buffer attr-dict";
}

def Plan_LoadOp : Plan_InstrOp<"load", 4,
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Fills a buffer from its tensor's source (data, init, value)";
  let arguments = (ins Plan_BufferType:$buffer);
  let assemblyFormat = "$buffer attr-dict";
  let hasVerifier = 1;
}

def Plan_FillOp : Plan_InstrOp<"fill", 5> {
  let arguments = (ins Plan_BufferType:$buffer, F32Attr:$value);
  let assemblyFormat = "$buffer `,` $value attr-dict";
}

def Plan_CopyOp : Plan_InstrOp<"copy", 6> {
  let summary = "Copies (or adds) box [lo, hi) from one buffer to another";
  let arguments = (ins Plan_BufferType:$src, Plan_BufferType:$dst,
                       DenseI64ArrayAttr:$lo, DenseI64ArrayAttr:$hi,
                       UnitAttr:$accumulate);
  let assemblyFormat = "$src `->` $dst $lo $hi (`accumulate` $accumulate^)? "
                       "attr-dict";
  let hasVerifier = 1;
}

def Plan_SendOp : Plan_InstrOp<"send", 7> {
  let arguments = (ins Plan_BufferType:$buffer, DenseI64ArrayAttr:$lo,
                       DenseI64ArrayAttr:$hi, I64Attr:$peer, I64Attr:$tag);
  let assemblyFormat = "$buffer $lo $hi `to` $peer `tag` $tag attr-dict";
  let hasVerifier = 1;
}

def Plan_RecvOp : Plan_InstrOp<"recv", 8> {
  let arguments = (ins Plan_BufferType:$buffer, DenseI64ArrayAttr:$lo,
                       DenseI64ArrayAttr:$hi, I64Attr:$peer, I64Attr:$tag,
                       UnitAttr:$accumulate);
  let assemblyFormat = "$buffer $lo $hi `from` $peer `tag` $tag "
                       "(`accumulate` $accumulate^)? attr-dict";
  let hasVerifier = 1;
}

def Plan_KernelOp : Plan_InstrOp<"kernel", 9, [AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Forward kernel of a graph op on one partition";
  let arguments = (ins FlatSymbolRefAttr:$op, I64Attr:$stage,
                       Variadic<Plan_BufferType>:$inputs,
                       Variadic<Plan_BufferType>:$outputs,
                       Variadic<Plan_BufferType>:$scratch);
  let assemblyFormat = "$op `stage` $stage `ins` `(` $inputs `)` "
                       "`outs` `(` $outputs `)` (`scratch` `(` $scratch^ `)`)? "
                       "attr-dict";
  let hasVerifier = 1;
}

def Plan_KernelBackwardOp : Plan_InstrOp<"kernel_backward", 10,
    [AttrSizedOperandSegments,
     DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Backward kernel: adds operand gradients of one partition";
  let description = [{
    `grad_mask` has one entry per operand of the op; `input_grads` holds a
    buffer for each true entry, in order. `overwrite`, where present, has
    one entry per input grad: true where the kernel's contribution is the
    buffer's first, which it writes instead of adding into
    (ppc-elide-zero-fills).
  }];
  let arguments = (ins FlatSymbolRefAttr:$op, I64Attr:$stage,
                       DenseBoolArrayAttr:$grad_mask,
                       Variadic<Plan_BufferType>:$inputs,
                       Variadic<Plan_BufferType>:$outputs,
                       Variadic<Plan_BufferType>:$output_grads,
                       Variadic<Plan_BufferType>:$input_grads,
                       Variadic<Plan_BufferType>:$scratch,
                       OptionalAttr<DenseBoolArrayAttr>:$overwrite);
  let assemblyFormat = "$op `stage` $stage `ins` `(` $inputs `)` "
                       "`outs` `(` $outputs `)` `output_grads` `(` $output_grads `)` "
                       "`input_grads` $grad_mask `(` $input_grads `)` "
                       "(`overwrite` $overwrite^)? "
                       "(`scratch` `(` $scratch^ `)`)? attr-dict";
  // In the file, `outputs` are -1 where the forward results were not kept,
  // and `input_grads` (and `overwrite`, empty or one per entry) have one
  // entry per operand of the op, -1 where it needs no gradient.
  let protoMessage = [{
    message KernelBackward {
      int32 op = 1;
      int32 stage = 2;
      repeated int32 inputs = 3;
      repeated int32 outputs = 4;
      repeated int32 output_grads = 5;
      repeated int32 input_grads = 6;
      repeated int32 scratch = 7;
      repeated bool overwrite = 8;
    }
  }];
  let hasVerifier = 1;
}

def Plan_CollectiveOp : Plan_InstrOp<"collective", 11> {
  let summary = "A collective over a group of ranks";
  let description = [{
    all_reduce and broadcast work in place on `buffer`; all_gather,
    reduce_scatter and all_to_all read `buffer` and write `result`.
    `reduction` is "sum" or "max"; `root` indexes `group`.
  }];
  let arguments = (ins Plan_CollectiveKind:$kind, DenseI64ArrayAttr:$group,
                       Plan_BufferType:$buffer,
                       Optional<Plan_BufferType>:$result,
                       DefaultValuedAttr<StrAttr, "\"sum\"">:$reduction,
                       DefaultValuedAttr<I64Attr, "0">:$root,
                       DefaultValuedAttr<I64Attr, "0">:$axis);
  let assemblyFormat = "$kind $buffer (`->` $result^)? `group` $group attr-dict";
  // `result` is -1 for the collectives that work in place.
  let protoMessage = [{
    message Collective {
      enum Reduction {
        SUM = 0;
        MAX = 1;
      }
      CollectiveKind kind = 1;
      repeated int32 group = 2;
      int32 buffer = 3;
      int32 result = 4;
      Reduction reduction = 5;
      int32 root = 6;
      int32 axis = 7;
    }
  }];
  let hasVerifier = 1;
}

def Plan_UpdateOp : Plan_InstrOp<"update", 12,
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Optimizer step of a weight buffer with its gradient";
  let description = [{
    The step covers the gradient's box: the weight buffer's own, or, for a
    ZeRO-sharded weight, a block of its rows (dim 0), which alone is
    updated; the optimizer state is sized to the gradient.
  }];
  let arguments = (ins Plan_BufferType:$weight, Plan_BufferType:$grad);
  let assemblyFormat = "$weight `,` $grad attr-dict";
  let hasVerifier = 1;
}

def Plan_OutputOp : Plan_InstrOp<"output", 13,
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Marks a buffer that holds a whole output tensor";
  let arguments = (ins Plan_BufferType:$buffer);
  let assemblyFormat = "$buffer attr-dict";
  let hasVerifier = 1;
}

#endif // PPC_DIALECT_PLAN_PLANOPS_TD
