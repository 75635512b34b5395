//===- PipelineSchedule.h - pipeline schedules and submeshes ----*- C++ -*-===//
//
// MLIR-free. The schedules a pipelined strategy may run its micro-batches
// in: the one list that #ppc.pipeline's verifier, strategy files, option
// parsers, the simulator and the docs follow; and the one check of a
// pipeline's micro-batches and stage submeshes they all apply.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SUPPORT_PIPELINESCHEDULE_H
#define PPC_SUPPORT_PIPELINESCHEDULE_H

#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ppc {

enum class PipelineSchedule : uint8_t { GPipe, OneFOneB };

struct PipelineScheduleInfo {
  PipelineSchedule kind;
  const char *name;
  const char *description;
};

inline constexpr PipelineScheduleInfo kPipelineSchedules[] = {
    {PipelineSchedule::GPipe, "gpipe",
     "every micro-batch's forward, then every backward (GPipe): all m "
     "micro-batches' activations are alive at once"},
    {PipelineSchedule::OneFOneB, "1f1b",
     "after S - s - 1 warm-up forwards, stage s alternates one forward and "
     "one backward (PipeDream-Flush, Megatron-LM): at most S - s "
     "micro-batches in flight"},
};

inline const PipelineScheduleInfo &
pipelineScheduleInfo(PipelineSchedule schedule) {
  for (const PipelineScheduleInfo &info : kPipelineSchedules)
    if (info.kind == schedule)
      return info;
  return kPipelineSchedules[0];
}

/// The schedule named `name`, or null.
inline const PipelineScheduleInfo *findPipelineSchedule(std::string_view name) {
  for (const PipelineScheduleInfo &info : kPipelineSchedules)
    if (name == info.name)
      return &info;
  return nullptr;
}

/// "gpipe or 1f1b", for messages.
inline std::string pipelineScheduleNames() {
  std::string names;
  size_t n = std::size(kPipelineSchedules);
  for (size_t i = 0; i < n; ++i)
    names += std::string(i == 0 ? "" : i + 1 == n ? " or " : ", ") +
             kPipelineSchedules[i].name;
  return names;
}

/// One forward or one backward of one micro-batch on a stage.
struct PipelineTask {
  int64_t microbatch = 0;
  bool forward = true;
};

/// The tasks of stage `stage` of `numStages` in the order `schedule` runs
/// them, for `microbatches` micro-batches: what the simulator times and
/// what the lowering emits.
std::vector<PipelineTask> pipelineStageOrder(PipelineSchedule schedule,
                                             int64_t numStages, int64_t stage,
                                             int64_t microbatches);

/// The most micro-batches whose activations stage `stage` keeps at once
/// under `schedule` (the peak of its order: forwards done, backwards not).
int64_t pipelineInFlight(PipelineSchedule schedule, int64_t numStages,
                         int64_t stage, int64_t microbatches);

/// Why `microbatches` and the stage submeshes (stage s on devices
/// [firstDevices[s], firstDevices[s] + devices[s])) are not a pipeline, or
/// "": at least one micro-batch, one first device and one count per stage
/// (at least one stage), non-empty disjoint submeshes, and, given
/// `numDevices`, all of them on the machine.
std::string checkPipelineShape(int64_t microbatches,
                               const std::vector<int64_t> &firstDevices,
                               const std::vector<int64_t> &devices,
                               std::optional<int64_t> numDevices);

} // namespace ppc

#endif // PPC_SUPPORT_PIPELINESCHEDULE_H
