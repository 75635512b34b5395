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

#include "ppc/Support/Alternatives.h"
#include "ppc/Support/Status.h"

#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ppc {

enum class PipelineSchedule : uint8_t { GPipe, OneFOneB, Interleaved };

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
    {PipelineSchedule::Interleaved, "interleaved-1f1b",
     "the S stages are model chunks dealt round-robin to P device groups "
     "(stage s on the devices of stage s mod P, v = S / P >= 2 chunks "
     "each; micro-batches a multiple of P); each group runs Megatron-LM's "
     "interleaved 1F1B over its chunks: a bubble v times smaller than "
     "1F1B's, for v times the messages"},
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
  std::vector<std::string> names;
  for (const PipelineScheduleInfo &info : kPipelineSchedules)
    names.push_back(info.name);
  return listAlternatives(names);
}

/// One forward or one backward of one micro-batch on one stage.
struct PipelineTask {
  int64_t stage = 0;
  int64_t microbatch = 0;
  bool forward = true;
};

/// The tasks device group `group` runs, in the order `schedule` runs them,
/// for `numStages` stages on `numGroups` groups (the distinct submeshes:
/// group g runs stages g, g + numGroups, ...; numGroups == numStages but
/// for interleaved-1f1b) and `microbatches` micro-batches: what the
/// simulator times and what the lowering emits.
std::vector<PipelineTask> pipelineOrder(PipelineSchedule schedule,
                                        int64_t numStages, int64_t numGroups,
                                        int64_t group, int64_t microbatches);

/// The most micro-batches whose activations stage `stage` keeps at once in
/// its group's order (forwards done, backwards not).
int64_t pipelineInFlight(PipelineSchedule schedule, int64_t numStages,
                         int64_t numGroups, int64_t stage,
                         int64_t microbatches);

/// The number of distinct submeshes among the stages' (stage s on devices
/// [firstDevices[s], firstDevices[s] + devices[s])).
int64_t pipelineGroups(const std::vector<int64_t> &firstDevices,
                       const std::vector<int64_t> &devices);

/// OK, or why `microbatches`, `schedule` and the stage submeshes are not a
/// pipeline (InvalidArgument): at least one micro-batch, one first device and
/// one count per stage (at least one stage), non-empty submeshes, and, given
/// `numDevices`, all of them on the machine. The submeshes are disjoint,
/// but for interleaved-1f1b, where stage s has the submesh of stage s mod P
/// for P disjoint ones, P dividing the stages (at least 2 each) and the
/// micro-batches.
absl::Status checkPipelineShape(int64_t microbatches, PipelineSchedule schedule,
                                const std::vector<int64_t> &firstDevices,
                                const std::vector<int64_t> &devices,
                                std::optional<int64_t> numDevices);

} // namespace ppc

#endif // PPC_SUPPORT_PIPELINESCHEDULE_H
