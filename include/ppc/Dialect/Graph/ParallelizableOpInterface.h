//===- ParallelizableOpInterface.h - SOAP op description --------*- C++ -*-===//

#ifndef PPC_DIALECT_GRAPH_PARALLELIZABLEOPINTERFACE_H
#define PPC_DIALECT_GRAPH_PARALLELIZABLEOPINTERFACE_H

#include "mlir/IR/OpDefinition.h"
#include "ppc/Support/IterationSpace.h"

#include "ppc/Dialect/Graph/ParallelizableOpInterface.h.inc"

#endif // PPC_DIALECT_GRAPH_PARALLELIZABLEOPINTERFACE_H
