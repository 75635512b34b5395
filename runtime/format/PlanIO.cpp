//===- PlanIO.cpp - read and write plan files -----------------------------===//

#include "ppc/Runtime/PlanIO.h"

namespace ppc::runtime {

std::string writePlanFile(const ppc::planfile::Plan &, const std::string &path,
                          bool) {
  return "writePlanFile: not implemented yet (" + path + ")";
}

std::string readPlanFile(const std::string &path, ppc::planfile::Plan &) {
  return "readPlanFile: not implemented yet (" + path + ")";
}

std::string validatePlan(const ppc::planfile::Plan &) { return ""; }

} // namespace ppc::runtime
