//===- Trace.h - Chrome traces of a measured step ---------------*- C++ -*-===//
//
// Private to runtime/executor. The format of the simulator's traces
// (ppc/Support/ChromeTrace.h): complete ("X") events, pid = rank, tid 0 compute
// and tid 1 communication, times in µs from the start of the step on each rank
// (ranks start the traced step after a barrier).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_EXECUTOR_TRACE_H
#define PPC_RUNTIME_EXECUTOR_TRACE_H

#include "ProgramRunner.h"
#include "ppc/Support/Status.h"

#include <string>
#include <vector>

namespace ppc::runtime {

/// One rank's events as comma-separated JSON objects.
std::string traceEventsJson(const std::vector<TraceEvent> &events, int rank);

/// Writes the trace of every rank's events (traceEventsJson per rank).
absl::Status writeChromeTrace(const std::string &path,
                              const std::vector<std::string> &ranks,
                              int64_t step);

} // namespace ppc::runtime

#endif // PPC_RUNTIME_EXECUTOR_TRACE_H
