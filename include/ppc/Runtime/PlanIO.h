//===- PlanIO.h - read and write plan files ---------------------*- C++ -*-===//
//
// MLIR-free. The one reader and writer of plan files: binary protobuf, or
// protobuf text format for people. Readers check the format version.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_PLANIO_H
#define PPC_RUNTIME_PLANIO_H

#include "ppc/Runtime/plan.pb.h"

#include <string>

namespace ppc::runtime {

/// The plan format version this build writes and reads.
constexpr uint32_t kPlanVersion = 1;

/// Writes `plan` to `path` (text format if `text`), atomically: a temporary
/// file renamed into place. Returns "" or the error.
std::string writePlanFile(const ppc::planfile::Plan &plan,
                          const std::string &path, bool text);

/// Reads a plan written by writePlanFile (binary or text, recognized by
/// content) and checks its version and its structure (ids in range, one
/// program per rank). Returns "" or an error naming the file and what is
/// wrong.
std::string readPlanFile(const std::string &path, ppc::planfile::Plan &plan);

/// readPlanFile on the file's contents `bytes`; `path` only names the file
/// in errors.
std::string parsePlan(const std::string &bytes, const std::string &path,
                      ppc::planfile::Plan &plan);

/// Checks a plan's internal consistency; "" or the first problem found.
std::string validatePlan(const ppc::planfile::Plan &plan);

} // namespace ppc::runtime

#endif // PPC_RUNTIME_PLANIO_H
