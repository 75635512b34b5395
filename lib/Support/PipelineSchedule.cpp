//===- PipelineSchedule.cpp - pipeline schedules and submeshes ------------===//

#include "ppc/Support/PipelineSchedule.h"

#include <algorithm>
#include <limits>
#include <set>
#include <sstream>

namespace ppc {

int64_t pipelineGroups(const std::vector<int64_t> &firstDevices,
                       const std::vector<int64_t> &devices) {
  std::set<std::pair<int64_t, int64_t>> distinct;
  for (size_t s = 0; s < firstDevices.size() && s < devices.size(); ++s)
    distinct.insert({firstDevices[s], devices[s]});
  return static_cast<int64_t>(distinct.size());
}

absl::Status checkPipelineShape(int64_t microbatches, PipelineSchedule schedule,
                                const std::vector<int64_t> &firstDevices,
                                const std::vector<int64_t> &devices,
                                std::optional<int64_t> numDevices) {
  std::ostringstream os;
  if (microbatches < 1) {
    os << "microbatches is " << microbatches << "; it must be >= 1";
    return absl::InvalidArgumentError(os.str());
  }
  if (firstDevices.empty() || firstDevices.size() != devices.size()) {
    os << "expected one first device and one device count per stage, got "
       << firstDevices.size() << " and " << devices.size();
    return absl::InvalidArgumentError(os.str());
  }
  int64_t numStages = static_cast<int64_t>(firstDevices.size());
  bool interleaved = schedule == PipelineSchedule::Interleaved;
  int64_t groups =
      interleaved ? pipelineGroups(firstDevices, devices) : numStages;
  if (interleaved && (numStages % groups != 0 || numStages / groups < 2)) {
    os << "interleaved-1f1b deals the " << numStages << " stages to " << groups
       << " submeshes: each needs the same number of stages, at "
       << "least 2";
    return absl::InvalidArgumentError(os.str());
  }
  for (int64_t s = 0; s < numStages; ++s) {
    int64_t first = firstDevices[s], count = devices[s];
    if (first < 0 || count < 1) {
      os << "stage " << s << " has first device " << first << " and " << count
         << " devices";
      return absl::InvalidArgumentError(os.str());
    }
    // first + count may not fit in 64 bits: say it in those terms then.
    bool fits = first <= std::numeric_limits<int64_t>::max() - count;
    if (!fits || (numDevices && first > *numDevices - count)) {
      os << "stage " << s << "'s ";
      if (fits)
        os << "devices [" << first << ", " << first + count << ")";
      else
        os << count << " devices from device " << first;
      os << " are not on the machine";
      if (numDevices)
        os << " of " << *numDevices << " devices";
      return absl::InvalidArgumentError(os.str());
    }
    if (s >= groups) {
      int64_t t = s % groups;
      if (first != firstDevices[t] || count != devices[t]) {
        os << "stage " << s << " must run on the devices of stage " << t
           << " (interleaved-1f1b deals stages round-robin to " << groups
           << " submeshes)";
        return absl::InvalidArgumentError(os.str());
      }
      continue;
    }
    for (int64_t t = 0; t < s; ++t)
      if (first < firstDevices[t] + devices[t] &&
          firstDevices[t] < first + count) {
        os << "stages " << t << " and " << s << " share devices";
        return absl::InvalidArgumentError(os.str());
      }
  }
  if (interleaved && microbatches % groups != 0) {
    os << "interleaved-1f1b runs micro-batches in rounds of one per "
       << "submesh: " << microbatches << " micro-batches do not divide into "
       << groups;
    return absl::InvalidArgumentError(os.str());
  }
  return absl::OkStatus();
}

std::vector<PipelineTask> pipelineOrder(PipelineSchedule schedule,
                                        int64_t numStages, int64_t numGroups,
                                        int64_t group, int64_t microbatches) {
  std::vector<PipelineTask> tasks;
  int64_t m = microbatches;
  if (schedule == PipelineSchedule::GPipe) {
    for (int64_t j = 0; j < m; ++j)
      tasks.push_back({group, j, true});
    for (int64_t j = 0; j < m; ++j)
      tasks.push_back({group, j, false});
    return tasks;
  }
  if (schedule == PipelineSchedule::OneFOneB) {
    // Warm-up forwards, then one forward and one backward in turn.
    int64_t warmup = std::min<int64_t>(numStages - group - 1, m);
    for (int64_t j = 0; j < warmup; ++j)
      tasks.push_back({group, j, true});
    for (int64_t j = 0; j < m; ++j) {
      if (warmup + j < m)
        tasks.push_back({group, warmup + j, true});
      tasks.push_back({group, j, false});
    }
    return tasks;
  }
  // Interleaved 1F1B (Narayanan et al. 2021, as Megatron-LM runs it): the
  // group's k-th forward is chunk (k mod pv) / p of micro-batch
  // (k / pv) p + k mod p, its backwards walk the chunks the other way;
  // (p - g - 1) * 2 + (v - 1) * p warm-up forwards, all of them when there
  // are only p micro-batches.
  int64_t p = numGroups, v = numStages / numGroups, total = m * v;
  auto task = [&](int64_t k, bool forward) {
    int64_t chunk = (k % (p * v)) / p;
    if (!forward)
      chunk = v - 1 - chunk;
    return PipelineTask{chunk * p + group, (k / (p * v)) * p + k % p, forward};
  };
  int64_t warmup =
      m == p ? total
             : std::min<int64_t>((p - group - 1) * 2 + (v - 1) * p, total);
  for (int64_t k = 0; k < warmup; ++k)
    tasks.push_back(task(k, true));
  for (int64_t k = 0; k < total - warmup; ++k) {
    tasks.push_back(task(warmup + k, true));
    tasks.push_back(task(k, false));
  }
  for (int64_t k = total - warmup; k < total; ++k)
    tasks.push_back(task(k, false));
  return tasks;
}

int64_t pipelineInFlight(PipelineSchedule schedule, int64_t numStages,
                         int64_t numGroups, int64_t stage,
                         int64_t microbatches) {
  int64_t live = 0, peak = 0;
  for (const PipelineTask &task : pipelineOrder(
           schedule, numStages, numGroups, stage % numGroups, microbatches)) {
    if (task.stage != stage)
      continue;
    live += task.forward ? 1 : -1;
    peak = std::max(peak, live);
  }
  return peak;
}

} // namespace ppc
