//===- Trace.cpp - Chrome traces of a measured step -----------------------===//

#include "Trace.h"

#include "ppc/Support/ChromeTrace.h"

#include <fstream>

namespace ppc::runtime {

namespace ct = chrome_trace;

std::string traceEventsJson(const std::vector<TraceEvent> &events, int rank) {
  std::vector<ct::Json> json;
  json.push_back(ct::threadName(rank, 0, "compute"));
  json.push_back(ct::threadName(rank, 1, "communication"));
  json.push_back(ct::processName(rank, "rank " + std::to_string(rank)));
  for (const TraceEvent &e : events) {
    ct::Json event = ct::complete(e.name, rank, e.tid, e.start, e.duration);
    event["args"] =
        ct::Json{{"phase", phaseName(e.phase)}, {"instruction", e.instruction}};
    json.push_back(std::move(event));
  }
  return ct::eventLines(json);
}

absl::Status writeChromeTrace(const std::string &path,
                              const std::vector<std::string> &ranks,
                              int64_t step) {
  std::ofstream out(path);
  if (!out)
    return absl::InvalidArgumentError("cannot open trace file '" + path +
                                      "' for writing");
  ct::Writer writer(out, ct::Json{{"otherData", ct::Json{{"step", step}}}});
  for (const std::string &rank : ranks)
    writer.addPiece(rank);
  writer.finish();
  out.close();
  if (!out)
    return absl::InvalidArgumentError("cannot write trace file '" + path + "'");
  return absl::OkStatus();
}

} // namespace ppc::runtime
