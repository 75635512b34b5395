//===- ParallelizableOpInterface.h - SOAP op description --------*- C++ -*-===//

#ifndef PPC_DIALECT_GRAPH_PARALLELIZABLEOPINTERFACE_H
#define PPC_DIALECT_GRAPH_PARALLELIZABLEOPINTERFACE_H

#include "mlir/IR/OpDefinition.h"
#include "ppc/Support/IterationSpace.h"

#include <optional>

namespace ppc::graph {

/// How a weight starts when the model gives no values
/// (ParallelizableOpInterface::getOperandInit).
struct OperandInit {
  enum class Kind { Uniform, Ones, Zeros };
  Kind kind = Kind::Uniform;
  /// Uniform: the tensor dims whose sizes multiply to the fan-in; empty:
  /// every dim but the first.
  std::vector<int64_t> fanInDims;
};

} // namespace ppc::graph

#include "ppc/Dialect/Graph/ParallelizableOpInterface.h.inc"

#endif // PPC_DIALECT_GRAPH_PARALLELIZABLEOPINTERFACE_H
