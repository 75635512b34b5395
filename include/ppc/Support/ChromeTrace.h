//===- ChromeTrace.h - events of Chrome's trace format ----------*- C++ -*-===//
//
// Header-only, shared by the simulator's predicted timelines and ppc-run's
// measured ones, so both files read the same in chrome://tracing or
// Perfetto: {"displayTimeUnit": "ms", ..., "traceEvents": [...]} with
// metadata events naming processes and threads and complete ("X") events
// in microseconds. Every event is an nlohmann JSON object (no hand-escaped
// text), written one per line.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SUPPORT_CHROMETRACE_H
#define PPC_SUPPORT_CHROMETRACE_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace ppc::chrome_trace {

using Json = nlohmann::ordered_json;

/// Names process `pid` (a device, a rank, the links).
inline Json processName(int64_t pid, const std::string &name) {
  return Json{{"ph", "M"},
              {"name", "process_name"},
              {"pid", pid},
              {"args", Json{{"name", name}}}};
}

/// Names thread `tid` of process `pid` (compute, communication, a link).
inline Json threadName(int64_t pid, int64_t tid, const std::string &name) {
  return Json{{"ph", "M"},
              {"name", "thread_name"},
              {"pid", pid},
              {"tid", tid},
              {"args", Json{{"name", name}}}};
}

/// A complete event from `start` for `duration`, both in seconds.
inline Json complete(const std::string &name, int64_t pid, int64_t tid,
                     double start, double duration) {
  return Json{{"ph", "X"},  {"name", name},      {"pid", pid},
              {"tid", tid}, {"ts", start * 1e6}, {"dur", duration * 1e6}};
}

/// Streams a trace file: the header's fields ("displayTimeUnit" first),
/// then each event or piece of events on its own line, then the end. The
/// events are written as they come, not built into one JSON value, so that
/// a large timeline is not held twice in memory.
class Writer {
public:
  explicit Writer(std::ostream &os, const Json &header = Json::object())
      : os(os) {
    Json head{{"displayTimeUnit", "ms"}};
    head.update(header);
    std::string open = head.dump();
    open.pop_back(); // the closing brace: traceEvents follows
    os << open << ",\"traceEvents\":[\n";
  }
  void add(const Json &event) { addPiece(event.dump()); }
  /// Events already written as text (eventLines), e.g. gathered from ranks.
  void addPiece(const std::string &piece) {
    if (piece.empty())
      return;
    os << (first ? "" : ",\n") << piece;
    first = false;
  }
  void finish() { os << "\n]}\n"; }

private:
  std::ostream &os;
  bool first = true;
};

/// `events` as JSON text, one per line, comma-separated: a piece of the
/// traceEvents array for Writer::addPiece.
inline std::string eventLines(const std::vector<Json> &events) {
  std::string text;
  for (size_t i = 0; i < events.size(); ++i)
    text += (i ? ",\n" : "") + events[i].dump();
  return text;
}

} // namespace ppc::chrome_trace

#endif // PPC_SUPPORT_CHROMETRACE_H
