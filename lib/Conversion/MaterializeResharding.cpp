//===- MaterializeResharding.cpp ------------------------------------------------------===//

#include "ppc/Conversion/Passes.h"

#include "ppc/Dialect/Graph/GraphDialect.h"
#include "ppc/Dialect/Plan/PlanDialect.h"

namespace ppc {
#define GEN_PASS_DEF_MATERIALIZERESHARDING
#include "ppc/Conversion/Passes.h.inc"

namespace {
struct MaterializeReshardingPass : impl::MaterializeReshardingBase<MaterializeReshardingPass> {
  using MaterializeReshardingBase::MaterializeReshardingBase;
  void runOnOperation() override {}
};
} // namespace
} // namespace ppc
