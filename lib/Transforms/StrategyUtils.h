//===- StrategyUtils.h - helpers shared by the strategy passes --*- C++ -*-===//
//
// Private to lib/Transforms: what ppc-search, ppc-export-strategy and
// ppc-import-strategy all do — find the functions to work on, name one file
// per function, write a sim::Strategy back as #ppc.strategy attributes, and
// put a model in the sequence order a strategy was written for.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_LIB_TRANSFORMS_STRATEGYUTILS_H
#define PPC_LIB_TRANSFORMS_STRATEGYUTILS_H

#include "ppc/Analysis/SimGraph.h"
#include "ppc/Dialect/Graph/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Path.h"

#include <string>

namespace ppc::transforms_detail {

/// Functions with graph ops: helpers and empty stubs have nothing to split.
inline llvm::SmallVector<mlir::func::FuncOp>
getFunctionsToSplit(mlir::ModuleOp module) {
  llvm::SmallVector<mlir::func::FuncOp> funcs;
  for (auto func : module.getOps<mlir::func::FuncOp>())
    if (!func.isExternal() && !getSimulatedOps(func).empty())
      funcs.push_back(func);
  return funcs;
}

/// `path` for one function of `numFuncs`: the path itself for a single
/// function, else `path` with `.<function>` before its extension.
inline std::string pathForFunction(llvm::StringRef path,
                                   mlir::func::FuncOp func, size_t numFuncs) {
  if (numFuncs <= 1 || path == "-")
    return path.str();
  llvm::StringRef extension = llvm::sys::path::extension(path);
  return (path.drop_back(extension.size()) + "." + func.getSymName() +
          extension)
      .str();
}

/// Sets `ppc.strategy` on every simulated op of `func` (the ops `strategy`
/// was computed for, in the same order).
inline void applyStrategy(mlir::func::FuncOp func,
                          const sim::Strategy &strategy) {
  llvm::SmallVector<mlir::Operation *> ops = getSimulatedOps(func);
  assert(ops.size() == strategy.size() && "strategy for another function");
  mlir::MLIRContext *context = func.getContext();
  for (auto [op, config] : llvm::zip_equal(ops, strategy))
    op->setAttr(graph::PPCDialect::getStrategyAttrName(),
                graph::StrategyAttr::get(context, config));
}

/// Sets `ppc.pipeline` on `func` for `pipeline`, or removes it when the
/// strategy has no pipeline.
inline void applyPipeline(mlir::func::FuncOp func,
                          const sim::Pipeline &pipeline) {
  llvm::StringLiteral name = graph::PPCDialect::getPipelineAttrName();
  if (!pipeline.enabled()) {
    func->removeAttr(name);
    return;
  }
  func->setAttr(name, graph::PipelineAttr::get(
                          func.getContext(), pipeline.microbatches,
                          pipelineScheduleInfo(pipeline.schedule).name,
                          pipeline.firstDevice, pipeline.numDevices));
}

/// Stores `func`'s causal sequences in zigzag order of `pairs` pairs, as
/// ppc-zigzag-sequence does (ZigzagSequence.cpp); a function with none, or
/// in zigzag order already, is left as it is. A strategy file written for
/// that order (its "sequence_order") is imported onto the model this way.
mlir::LogicalResult orderInZigzag(mlir::func::FuncOp func, int64_t pairs);

} // namespace ppc::transforms_detail

#endif // PPC_LIB_TRANSFORMS_STRATEGYUTILS_H
