// Parses a ppc graph with ppc's dialects registered from the installed
// package, runs ppc's op summary pass, and prints the iteration space of the
// matmul: what an MLIR compiler embedding ppc as a library would do.
#include "ppc/Dialect/Graph/GraphOps.h"
#include "ppc/InitAll.h"
#include "ppc/Transforms/Passes.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

int main() {
  mlir::DialectRegistry registry;
  ppc::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  const char *source = R"mlir(
    func.func @main(%x: tensor<8x16xf32>) -> tensor<8x4xf32> {
      %w = ppc.weight "w" : tensor<16x4xf32>
      %y = ppc.matmul %x, %w : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
      return %y : tensor<8x4xf32>
    })mlir";
  auto module = mlir::parseSourceString<mlir::ModuleOp>(source, &context);
  if (!module)
    return 1;
  mlir::PassManager pm(&context);
  pm.addPass(ppc::createOpSummary());
  if (mlir::failed(pm.run(*module)))
    return 1;
  int status = 1;
  module->walk([&](ppc::graph::MatMulOp op) {
    ppc::IterationSpace space =
        llvm::cast<ppc::graph::ParallelizableOpInterface>(op.getOperation())
            .getIterationSpace();
    llvm::outs() << "matmul iteration dims:";
    for (const ppc::IterDim &d : space.dims)
      llvm::outs() << " " << d.size << ":" << ppc::stringifyIterKind(d.kind);
    llvm::outs() << "\n";
    status = 0;
  });
  return status;
}
