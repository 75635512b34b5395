//===- Trace.cpp - Chrome traces of a measured step -----------------------===//

#include "Trace.h"

#include <cstdio>
#include <fstream>
#include <iomanip>
#include <sstream>

namespace ppc::runtime {

static std::string jsonEscape(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::string traceEventsJson(const std::vector<TraceEvent> &events, int rank) {
  std::ostringstream os;
  os << std::setprecision(12);
  for (int tid = 0; tid < 2; ++tid)
    os << (tid ? ",\n" : "")
       << "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " << rank
       << ", \"tid\": " << tid << ", \"args\": {\"name\": \""
       << (tid == 0 ? "compute" : "communication") << "\"}}";
  os << ",\n{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " << rank
     << ", \"args\": {\"name\": \"rank " << rank << "\"}}";
  for (const TraceEvent &e : events)
    os << ",\n{\"ph\": \"X\", \"name\": \"" << jsonEscape(e.name)
       << "\", \"pid\": " << rank << ", \"tid\": " << e.tid
       << ", \"ts\": " << e.start * 1e6 << ", \"dur\": " << e.duration * 1e6
       << ", \"args\": {\"phase\": \"" << phaseName(e.phase)
       << "\", \"instruction\": " << e.instruction << "}}";
  return os.str();
}

std::string writeChromeTrace(const std::string &path,
                             const std::vector<std::string> &ranks,
                             int64_t step) {
  std::ofstream out(path);
  if (!out)
    return "cannot open trace file '" + path + "' for writing";
  out << "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"step\": " << step
      << "}, \"traceEvents\": [\n";
  for (size_t r = 0; r < ranks.size(); ++r)
    out << (r ? ",\n" : "") << ranks[r];
  out << "\n]}\n";
  out.close();
  if (!out)
    return "cannot write trace file '" + path + "'";
  return "";
}

} // namespace ppc::runtime
