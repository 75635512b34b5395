//===- PartitionToPlan.cpp ------------------------------------------------------===//

#include "ppc/Conversion/Passes.h"

#include "ppc/Dialect/Graph/GraphDialect.h"
#include "ppc/Dialect/Plan/PlanDialect.h"

namespace ppc {
#define GEN_PASS_DEF_PARTITIONTOPLAN
#include "ppc/Conversion/Passes.h.inc"

namespace {
struct PartitionToPlanPass : impl::PartitionToPlanBase<PartitionToPlanPass> {
  using PartitionToPlanBase::PartitionToPlanBase;
  void runOnOperation() override {}
};
} // namespace
} // namespace ppc
