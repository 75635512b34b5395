//===- PipelineSchedule.cpp - pipeline schedules and submeshes ------------===//

#include "ppc/Support/PipelineSchedule.h"

#include <algorithm>
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

std::vector<PipelineTask> pipelineStageOrder(PipelineSchedule schedule,
                                             int64_t numStages, int64_t stage,
                                             int64_t microbatches) {
  std::vector<PipelineTask> tasks;
  int64_t m = microbatches;
  if (schedule == PipelineSchedule::GPipe) {
    for (int64_t j = 0; j < m; ++j)
      tasks.push_back({j, true});
    for (int64_t j = 0; j < m; ++j)
      tasks.push_back({j, false});
    return tasks;
  }
  // 1F1B: warm-up forwards, then one forward and one backward in turn.
  int64_t warmup = std::min<int64_t>(numStages - stage - 1, m);
  for (int64_t j = 0; j < warmup; ++j)
    tasks.push_back({j, true});
  for (int64_t j = 0; j < m; ++j) {
    if (warmup + j < m)
      tasks.push_back({warmup + j, true});
    tasks.push_back({j, false});
  }
  return tasks;
}

int64_t pipelineInFlight(PipelineSchedule schedule, int64_t numStages,
                         int64_t stage, int64_t microbatches) {
  int64_t live = 0, peak = 0;
  for (const PipelineTask &task :
       pipelineStageOrder(schedule, numStages, stage, microbatches)) {
    live += task.forward ? 1 : -1;
    peak = std::max(peak, live);
  }
  return peak;
}

} // namespace ppc
