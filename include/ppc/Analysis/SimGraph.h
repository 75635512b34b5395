//===- SimGraph.h - a ppc function as the simulator's Graph -----*- C++ -*-===//
//
// The bridge from the graph dialect to the MLIR-free simulator: a function of
// ppc ops becomes a ppc::sim::Graph (iteration spaces, costs, operand
// sources, weights), and the ops' #ppc.strategy attributes a sim::Strategy.
// The simulator, the search and the reports only ever see these two values.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_ANALYSIS_SIMGRAPH_H
#define PPC_ANALYSIS_SIMGRAPH_H

#include "ppc/Simulator/Graph.h"
#include "ppc/Simulator/Pipeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"

namespace ppc {

/// What an op without a `ppc.strategy` attribute runs as.
enum class UnassignedPolicy : uint8_t {
  /// Whole on device 0 (degrees all 1).
  SingleDevice,
  /// sim::dataParallel over every device of the machine.
  DataParallel,
};

/// The ops of `func` that become sim::Ops, in order: sim::Graph::ops[i] is
/// built from the i-th of them. Lets callers point diagnostics at an op.
llvm::SmallVector<mlir::Operation *> getSimulatedOps(mlir::func::FuncOp func);

/// The simulator's graph of `func`: arguments become inputs, ppc.weight
/// weights, ppc.constant constants, and every ParallelizableOpInterface op a
/// sim::Op. Emits an error naming the op and fails on anything the simulator
/// cannot cost: ops of other dialects (func.return aside), operands that are
/// not defined in the function's body, functions of several blocks.
mlir::FailureOr<sim::Graph> buildSimGraph(mlir::func::FuncOp func);

/// The configuration of every op of `graph` (built from `func`): its
/// `ppc.strategy` attribute, or for an op without one what `policy` says
/// (data parallel over `numDevices`). Fails, with an error at the op, on a
/// `ppc.strategy` that is not a #ppc.strategy.
mlir::FailureOr<sim::Strategy> readStrategy(mlir::func::FuncOp func,
                                            const sim::Graph &graph,
                                            UnassignedPolicy policy,
                                            int64_t numDevices);

/// Warns at each op of `func` whose configuration in `strategy` asks for a
/// ZeRO stage though the op reads no weight: there is nothing to shard, and
/// the stage changes nothing. For the passes that take a strategy a user
/// wrote (ppc-simulate, ppc-import-strategy).
void warnIneffectiveSharding(mlir::func::FuncOp func, const sim::Graph &graph,
                             const sim::Strategy &strategy);

/// The pipeline of `func`: its `ppc.pipeline` #ppc.pipeline attribute, or
/// none (one stage, one micro-batch). Fails, with an error at the function,
/// on an attribute of another kind.
mlir::FailureOr<sim::Pipeline> readPipeline(mlir::func::FuncOp func);

} // namespace ppc

#endif // PPC_ANALYSIS_SIMGRAPH_H
