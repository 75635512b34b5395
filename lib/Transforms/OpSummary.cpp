//===- OpSummary.cpp - print a summary of a ppc graph ---------------------===//

#include "ppc/Dialect/Graph/GraphOps.h"
#include "ppc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/ToolOutputFile.h"

namespace ppc {
#define GEN_PASS_DEF_OPSUMMARY
#include "ppc/Transforms/Passes.h.inc"
} // namespace ppc

using namespace mlir;
using namespace ppc;
using namespace ppc::graph;

namespace {

int64_t numElements(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.hasStaticShape() ? tensor.getNumElements() : 0;
}

/// Writes the summary of one function.
void summarize(func::FuncOp func, raw_ostream &os) {
  llvm::MapVector<StringRef, int64_t> opCounts;
  int64_t numOps = 0, numWeights = 0, numParams = 0, numFrozen = 0;
  double fwdFlops = 0, bwdFlops = 0;
  func.walk([&](Operation *op) {
    if (!isa<PPCDialect>(op->getDialect()))
      return;
    if (auto weight = dyn_cast<WeightOp>(op)) {
      ++numWeights;
      (weight.getFrozen() ? numFrozen : numParams) +=
          numElements(weight.getType());
      return;
    }
    if (isa<ConstantOp>(op))
      return;
    ++numOps;
    ++opCounts[op->getName().getStringRef()];
    if (auto par = dyn_cast<ParallelizableOpInterface>(op)) {
      OpCost cost = par.getCost();
      fwdFlops += cost.fwdFlops;
      bwdFlops += cost.bwdFlops;
    }
  });

  os << "ppc graph @" << func.getSymName() << "\n";
  for (auto [i, type] : llvm::enumerate(func.getArgumentTypes())) {
    os << "  input  " << i;
    if (auto name = func.getArgAttrOfType<StringAttr>(i, "ppc.name"))
      os << " '" << name.getValue() << "'";
    os << ": " << type << "\n";
  }
  for (auto [i, type] : llvm::enumerate(func.getResultTypes())) {
    os << "  output " << i;
    if (auto name = func.getResultAttrOfType<StringAttr>(i, "ppc.name"))
      os << " '" << name.getValue() << "'";
    os << ": " << type << "\n";
  }
  os << llvm::formatv("  weights: {0} ({1} trainable parameters", numWeights,
                      numParams);
  if (numFrozen)
    os << llvm::formatv(", {0} frozen", numFrozen);
  os << ")\n";
  os << "  ops: " << numOps << "\n";
  SmallVector<std::pair<StringRef, int64_t>> sorted(opCounts.begin(),
                                                    opCounts.end());
  llvm::stable_sort(sorted,
                    [](auto &a, auto &b) { return a.second > b.second; });
  for (auto &[name, count] : sorted)
    os << llvm::formatv("    {0,-28} {1,6}\n", name, count);
  os << llvm::formatv("  forward FLOPs: {0:e3}, backward FLOPs: {1:e3}\n",
                      fwdFlops, bwdFlops);
}

struct OpSummaryPass : public ppc::impl::OpSummaryBase<OpSummaryPass> {
  using Base::Base;
  void runOnOperation() override {
    std::string error;
    auto output = openOutputFile(outputPath, &error);
    if (!output) {
      getOperation().emitError()
          << "cannot open summary output '" << outputPath << "': " << error;
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<func::FuncOp>())
      summarize(func, output->os());
    output->keep();
    markAllAnalysesPreserved();
  }
};

} // namespace
