//===- Passes.h - ppc graph passes ------------------------------*- C++ -*-===//

#ifndef PPC_TRANSFORMS_PASSES_H
#define PPC_TRANSFORMS_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
// The enums that ppc-simulate's options take.
#include "ppc/Analysis/SimGraph.h"
#include "ppc/Simulator/Simulator.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ppc {

#define GEN_PASS_DECL
#include "ppc/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "ppc/Transforms/Passes.h.inc"

/// What ppc-search's `algorithm=` (ppc-auto-parallel's `search=`) takes: each
/// search, then each baseline of search::baselines(), with a one-line
/// description.
std::vector<std::pair<std::string, std::string>> searchAlgorithms();

} // namespace ppc

#endif // PPC_TRANSFORMS_PASSES_H
