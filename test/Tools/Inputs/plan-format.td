// A plan dialect in miniature for ppc-tblgen's plan format backends: one
// instruction op per derived field kind, one with a hand-written message,
// and (under -D) the mistakes the backends refuse.

include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"

def Plan_Dialect : Dialect {
  let name = "plan";
  let cppNamespace = "::ppc::plan";
}

def Plan_BufferType : TypeDef<Plan_Dialect, "Buffer"> {
  let mnemonic = "buffer";
}

def Plan_Colour : I32EnumAttr<"Colour", "a colour", [
    I32EnumAttrCase<"red", 1>, I32EnumAttrCase<"dark_blue", 2>]> {
  let cppNamespace = "::ppc::plan";
}

def Plan_ProgramOp : Op<Plan_Dialect, "program">;

class Plan_InstrOp<string mnemonic, int number, list<Trait> traits = []>
    : Op<Plan_Dialect, mnemonic, traits> {
  int protoField = number;
  string protoName = "";
  code protoMessage = "";
}

// Declared out of field order: the oneof is sorted by number.
def Plan_MoveOp : Plan_InstrOp<"move_box", 3, [AttrSizedOperandSegments]> {
  let summary = "Every derived field kind";
  let arguments = (ins FlatSymbolRefAttr:$op, Plan_BufferType:$from,
                       Variadic<Plan_BufferType>:$extra,
                       Variadic<Plan_BufferType>:$more,
                       DenseI64ArrayAttr:$lo, DenseI64ArrayAttr:$hi,
                       I64Attr:$peer, F32Attr:$scale, UnitAttr:$accumulate,
                       Plan_Colour:$colour);
}

def Plan_MarkOp : Plan_InstrOp<"mark", 1> {
  let arguments = (ins Plan_Colour:$colour);
  let protoName = "MarkMessage";
}

def Plan_HandOp : Plan_InstrOp<"hand", 2> {
  let arguments = (ins OptionalAttr<StrAttr>:$note);
  let protoMessage = [{
    message Hand {
      // kept as written, re-indented
      string note = 1;
    }
  }];
}

#ifdef DUPLICATE
def Plan_TwinOp : Plan_InstrOp<"twin", 3>;
#endif

#ifdef UNNUMBERED
def Plan_LostOp : Plan_InstrOp<"lost", 0>;
#endif

#ifdef UNSUPPORTED
def Plan_OddOp : Plan_InstrOp<"odd", 4> {
  let arguments = (ins StrAttr:$label);
}
#endif

#ifdef RESULT
def Plan_MakeOp : Plan_InstrOp<"make", 4> {
  let results = (outs Plan_BufferType:$made);
}
#endif
