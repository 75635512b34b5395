//===- PlanTraffic.h - bytes a plan moves, bytes the simulator prices -*- C++
//-*-===//
//
// Private to lib/Conversion. The bytes one step of a plan moves between
// ranks, by the kind of link they cross, counted from its instructions as the
// simulator counts a strategy's: a send crosses the link between its two
// devices; a collective moves what sim::allReduceBytesByLinkKind says NCCL's
// all-reduce of its buffer moves (a reduce-scatter or an all-gather half of
// it). Beside it, the same bytes as the simulator prices them for the
// strategy the plan was lowered from: the two must agree, or the predicted
// time does not describe the plan.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_LIB_CONVERSION_PLANTRAFFIC_H
#define PPC_LIB_CONVERSION_PLANTRAFFIC_H

#include "PartitionedFunction.h"

#include "ppc/Dialect/Plan/PlanOps.h"

#include <array>

namespace ppc::conversion {

/// Bytes by sim::LinkKind.
using BytesByLinkKind = std::array<double, 8>;

/// What one step of a plan moves between ranks.
struct PlanTraffic {
  /// The step's exchanges, which the simulator prices.
  BytesByLinkKind step{};
  /// The gathers of the plan's outputs (the loss, a forward plan's results)
  /// on rank 0, which it does not: they report the step, they are no part
  /// of training.
  BytesByLinkKind outputs{};
};

/// The bytes one step of `plan` moves between ranks (rank r on device r of
/// `machine`), by link kind.
PlanTraffic countPlanTraffic(plan::PlanOp plan, const Machine &machine);

/// The bytes the simulator prices for one iteration of `parts`' strategy
/// (its pipeline, if any) with `optimizer`.
BytesByLinkKind simulatedTraffic(const PartitionedFunction &parts,
                                 sim::Optimizer optimizer);

/// Writes both counts of `plan`, lowered from `parts`, to `path` as JSON
/// (per link kind the plan's bytes and the simulator's, and whether they
/// agree) and warns at `loc` where they do not. Fails, with an error at
/// `loc`, if the file cannot be written.
mlir::LogicalResult reportTraffic(plan::PlanOp plan,
                                  const PartitionedFunction &parts,
                                  sim::Optimizer optimizer,
                                  llvm::StringRef path, mlir::Location loc);

} // namespace ppc::conversion

#endif // PPC_LIB_CONVERSION_PLANTRAFFIC_H
