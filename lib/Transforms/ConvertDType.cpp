//===- ConvertDType.cpp - one floating-point element type everywhere ------===//
//
// Mixed-precision training: compute, activations, weights and gradients in
// bf16/f16 halve the bytes moved and stored and run at the device's bf16/f16
// rate; ppc-run keeps float32 master weights and optimizer state beside them.
// Integer tensors (labels, indices) keep their types.
//
//===----------------------------------------------------------------------===//

#include "ppc/Dialect/Graph/GraphOps.h"
#include "ppc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringSwitch.h"

namespace ppc {
#define GEN_PASS_DEF_CONVERTDTYPE
#include "ppc/Transforms/Passes.h.inc"
} // namespace ppc

using namespace mlir;

namespace {

/// `type` with `target` as element type if it is a floating-point tensor.
Type convertType(Type type, FloatType target) {
  auto shaped = dyn_cast<TensorType>(type);
  if (!shaped || !isa<FloatType>(shaped.getElementType()))
    return type;
  return shaped.clone(target);
}

/// The attribute's values rounded to `target` (nearest, ties to even), or
/// null when `attr` holds no floats to convert.
FailureOr<Attribute> convertValue(Attribute attr, FloatType target,
                                  Operation *op) {
  auto elements = dyn_cast<ElementsAttr>(attr);
  if (!elements || !isa<FloatType>(elements.getElementType()) ||
      elements.getElementType() == target)
    return Attribute();
  auto dense = dyn_cast<DenseFPElementsAttr>(attr);
  if (!dense)
    return op->emitError() << "ppc-convert-dtype: cannot convert a "
                           << attr.getAbstractAttribute().getName()
                           << " value; only dense values are supported";
  auto type = cast<ShapedType>(convertType(dense.getType(), target));
  const llvm::fltSemantics &semantics = target.getFloatSemantics();
  auto convert = [&](APFloat value) {
    bool losesInfo = false;
    value.convert(semantics, APFloat::rmNearestTiesToEven, &losesInfo);
    return value;
  };
  if (dense.isSplat())
    return Attribute(
        DenseElementsAttr::get(type, convert(dense.getSplatValue<APFloat>())));
  SmallVector<APFloat> values;
  values.reserve(dense.getNumElements());
  for (APFloat value : dense.getValues<APFloat>())
    values.push_back(convert(value));
  return Attribute(DenseElementsAttr::get(type, values));
}

struct ConvertDTypePass : public ppc::impl::ConvertDTypeBase<ConvertDTypePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *context = &getContext();
    FloatType target = llvm::StringSwitch<FloatType>(dtype)
                           .Case("f32", Float32Type::get(context))
                           .Case("bf16", BFloat16Type::get(context))
                           .Case("f16", Float16Type::get(context))
                           .Default(nullptr);
    if (!target) {
      module.emitError() << "ppc-convert-dtype: unknown dtype '" << dtype
                         << "'; expected f32, bf16 or f16";
      return signalPassFailure();
    }

    for (auto func : module.getOps<func::FuncOp>()) {
      FunctionType type = func.getFunctionType();
      auto convertAll = [&](TypeRange types) {
        return llvm::to_vector(llvm::map_range(
            types, [&](Type t) { return convertType(t, target); }));
      };
      func.setFunctionType(FunctionType::get(context,
                                             convertAll(type.getInputs()),
                                             convertAll(type.getResults())));

      WalkResult walk = func.getBody().walk([&](Operation *op) {
        for (Region &region : op->getRegions())
          for (Block &block : region)
            for (BlockArgument arg : block.getArguments())
              arg.setType(convertType(arg.getType(), target));
        for (OpResult result : op->getResults())
          result.setType(convertType(result.getType(), target));
        // Constants' and embedded weights' values follow their types.
        for (NamedAttribute named : llvm::to_vector(op->getAttrs())) {
          FailureOr<Attribute> converted =
              convertValue(named.getValue(), target, op);
          if (failed(converted))
            return WalkResult::interrupt();
          if (*converted)
            op->setAttr(named.getName(), *converted);
        }
        return WalkResult::advance();
      });
      if (walk.wasInterrupted())
        return signalPassFailure();
      for (BlockArgument arg : func.getArguments())
        arg.setType(convertType(arg.getType(), target));
    }
  }
};

} // namespace
