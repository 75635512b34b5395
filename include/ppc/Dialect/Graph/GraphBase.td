//===- GraphBase.td - ppc graph dialect definition ---------*- tablegen -*-===//

#ifndef PPC_DIALECT_GRAPH_GRAPHBASE_TD
#define PPC_DIALECT_GRAPH_GRAPHBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def PPC_Dialect : Dialect {
  let name = "ppc";
  let cppNamespace = "::ppc::graph";
  let summary = "Tensor-level training graphs for automatic parallelization";
  let description = [{
    The `ppc` dialect holds the computation graph that ppc parallelizes: one
    op per tensor operator (matmul, conv2d, norms, elementwise, reshapes,
    losses), weights as explicit `ppc.weight` ops, and a `#ppc.strategy`
    attribute per op that says how the op is split over the machine. Every
    compute op implements `ParallelizableOpInterface`, which describes its
    iteration space in SOAP terms.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let extraClassDeclaration = [{
    /// Name of the discardable attribute that carries an op's strategy.
    static constexpr ::llvm::StringLiteral getStrategyAttrName() {
      return ::llvm::StringLiteral("ppc.strategy");
    }
    /// Name of the discardable function attribute (a #ppc.pipeline) that
    /// makes its ops' stages a pipeline.
    static constexpr ::llvm::StringLiteral getPipelineAttrName() {
      return ::llvm::StringLiteral("ppc.pipeline");
    }
    /// Name of the module attribute (a string) holding the absolute path of
    /// the ONNX model the module was imported from: `ppc.weight` ops without
    /// a value are that model's initializers of the same name.
    static constexpr ::llvm::StringLiteral getSourceModelAttrName() {
      return ::llvm::StringLiteral("ppc.source_model");
    }
    /// Name of the module attribute (a dictionary of weight name to an
    /// array of initializer names) for weights the importer stacked from
    /// several of the source model's initializers, each along a new dim 0
    /// in that order (the experts of a fused mixture of experts).
    static constexpr ::llvm::StringLiteral getStackedWeightsAttrName() {
      return ::llvm::StringLiteral("ppc.stacked_weights");
    }
    /// Name of the discardable attribute (a string) with an op's name in the
    /// model (its ONNX node name): what strategy files and reports call it,
    /// kept when a module is printed without locations.
    static constexpr ::llvm::StringLiteral getNameAttrName() {
      return ::llvm::StringLiteral("ppc.name");
    }
    /// Name of the discardable unit attribute on a `ppc.gather` that puts a
    /// sequence in zigzag order or back (ppc-zigzag-sequence), so that
    /// ppc-restore-sequence-order can find and remove it.
    static constexpr ::llvm::StringLiteral getSequenceOrderAttrName() {
      return ::llvm::StringLiteral("ppc.sequence_order");
    }
  }];
}

class PPC_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<PPC_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

#endif // PPC_DIALECT_GRAPH_GRAPHBASE_TD
