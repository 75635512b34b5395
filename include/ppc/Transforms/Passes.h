//===- Passes.h - ppc graph passes ------------------------------*- C++ -*-===//

#ifndef PPC_TRANSFORMS_PASSES_H
#define PPC_TRANSFORMS_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
// The enums that ppc-simulate's options take.
#include "ppc/Analysis/SimGraph.h"
#include "ppc/Simulator/Simulator.h"

#include <memory>

namespace ppc {

#define GEN_PASS_DECL
#include "ppc/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "ppc/Transforms/Passes.h.inc"

} // namespace ppc

#endif // PPC_TRANSFORMS_PASSES_H
