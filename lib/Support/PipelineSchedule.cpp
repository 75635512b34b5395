//===- PipelineSchedule.cpp - pipeline schedules and submeshes ------------===//

#include "ppc/Support/PipelineSchedule.h"

#include <sstream>

namespace ppc {

std::string checkPipelineShape(int64_t microbatches,
                               const std::vector<int64_t> &firstDevices,
                               const std::vector<int64_t> &devices,
                               std::optional<int64_t> numDevices) {
  std::ostringstream os;
  if (microbatches < 1) {
    os << "microbatches is " << microbatches << "; it must be >= 1";
    return os.str();
  }
  if (firstDevices.empty() || firstDevices.size() != devices.size()) {
    os << "expected one first device and one device count per stage, got "
       << firstDevices.size() << " and " << devices.size();
    return os.str();
  }
  for (size_t s = 0; s < firstDevices.size(); ++s) {
    int64_t first = firstDevices[s], count = devices[s];
    if (first < 0 || count < 1) {
      os << "stage " << s << " has first device " << first << " and "
         << count << " devices";
      return os.str();
    }
    if (numDevices && first > *numDevices - count) {
      os << "stage " << s << "'s devices [" << first << ", " << first + count
         << ") are not on the machine of " << *numDevices << " devices";
      return os.str();
    }
    for (size_t t = 0; t < s; ++t)
      if (first < firstDevices[t] + devices[t] &&
          firstDevices[t] < first + count) {
        os << "stages " << t << " and " << s << " share devices";
        return os.str();
      }
  }
  return "";
}

} // namespace ppc
