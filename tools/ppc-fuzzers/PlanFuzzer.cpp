//===- PlanFuzzer.cpp - libFuzzer target for plan files -------------------===//
//
// Feeds arbitrary bytes to parsePlan (binary protobuf or text form, as
// `ppc-run` reads a plan file). An accepted plan must validate, and read
// back after serialization: a violation aborts, so libFuzzer reports it.
// See docs/fuzzing.md.
//
//===----------------------------------------------------------------------===//

#include "ppc/Runtime/PlanIO.h"

#include <google/protobuf/stubs/logging.h>

#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // Protobuf logs what it rejects; parsePlan reports it already.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  std::string bytes(reinterpret_cast<const char *>(data), size);
  ppc::planfile::Plan plan;
  absl::Status error = ppc::runtime::parsePlan(bytes, "fuzz.plan", plan);
  if (!error.empty())
    return 0;
  if (!ppc::runtime::validatePlan(plan).empty())
    std::abort();
  std::string binary;
  if (!plan.SerializeToString(&binary))
    std::abort();
  ppc::planfile::Plan back;
  if (!ppc::runtime::parsePlan(binary, "written.plan", back).empty())
    std::abort();
  return 0;
}
