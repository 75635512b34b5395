//===- InitAll.h - register every ppc dialect, pass and pipeline -*- C++
//-*-===//

#ifndef PPC_INITALL_H
#define PPC_INITALL_H

#include "mlir/IR/DialectRegistry.h"

namespace ppc {
/// Adds the ppc dialects (graph, topology) and the upstream ones ppc uses.
void registerAllDialects(mlir::DialectRegistry &registry);
/// Registers every ppc pass and pipeline with the global pass registry.
void registerAllPasses();
} // namespace ppc

#endif // PPC_INITALL_H
