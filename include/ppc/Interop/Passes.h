//===- Passes.h - ppc interop with upstream MLIR ----------------*- C++ -*-===//
//
// Import of TOSA / linalg-on-tensors functions into the ppc graph dialect and
// export of a strategy as upstream `shard` annotations (Passes.td).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_INTEROP_PASSES_H
#define PPC_INTEROP_PASSES_H

#include "ppc/Dialect/Graph/GraphDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace ppc {

#define GEN_PASS_DECL
#include "ppc/Interop/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "ppc/Interop/Passes.h.inc"

/// Registers the upstream dialects whose functions ppc imports (tosa,
/// linalg, tensor, arith, math) and the shard dialect it exports to.
void registerUpstreamDialects(mlir::DialectRegistry &registry);

} // namespace ppc

#endif // PPC_INTEROP_PASSES_H
