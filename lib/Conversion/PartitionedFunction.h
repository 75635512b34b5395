//===- PartitionedFunction.h - a function with its op layouts ---*- C++ -*-===//
//
// Private to lib/Conversion: what both lowering passes read from a function
// of graph ops: the simulator's graph (iteration spaces, operand sources),
// the strategy, the machine size, and every op's layout.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_LIB_CONVERSION_PARTITIONEDFUNCTION_H
#define PPC_LIB_CONVERSION_PARTITIONEDFUNCTION_H

#include "ppc/Support/Layout.h"

#include "ppc/Analysis/SimGraph.h"

#include "llvm/ADT/DenseMap.h"

namespace ppc::conversion {

struct PartitionedFunction {
  sim::Graph graph;
  sim::Strategy strategy;
  llvm::SmallVector<mlir::Operation *> ops; ///< parallel to graph.ops
  std::vector<geometry::OpLayout> layouts;  ///< parallel to graph.ops
  /// Stages, micro-batches and schedule (#ppc.pipeline), if any.
  sim::Pipeline pipeline;
  /// With a pipeline, [micro-batch][op]: each op's layout of its share of
  /// that micro-batch (geometry::MicroBatch).
  std::vector<std::vector<geometry::OpLayout>> microLayouts;
  llvm::DenseMap<mlir::Operation *, int64_t> indexOf;
  /// Devices of the attached machine, else one past the last device used.
  int64_t numDevices = 1;
  std::string machineName;
  std::optional<Machine> machine;

  /// The producing op index and result number of `value` (parallel ops
  /// looked through), or nullopt for arguments, weights and constants.
  std::optional<std::pair<int64_t, unsigned>> producerOf(mlir::Value value);
};

/// Reads the strategy of `func` (ops without one follow `policy`), checks
/// every configuration against its op and the machine attached to the
/// module, and computes the layouts. Emits an error at the op and fails on
/// anything that cannot be partitioned.
mlir::FailureOr<PartitionedFunction> analyzePartitions(mlir::func::FuncOp func,
                                                       UnassignedPolicy policy);

} // namespace ppc::conversion

#endif // PPC_LIB_CONVERSION_PARTITIONEDFUNCTION_H
