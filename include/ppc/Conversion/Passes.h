//===- Passes.h - ppc lowering passes ---------------------------*- C++ -*-===//

#ifndef PPC_CONVERSION_PASSES_H
#define PPC_CONVERSION_PASSES_H

#include "ppc/Analysis/SimGraph.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace ppc {

#define GEN_PASS_DECL
#include "ppc/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "ppc/Conversion/Passes.h.inc"

} // namespace ppc

#endif // PPC_CONVERSION_PASSES_H
