//===- Report.h - the report directory people read --------------*- C++ -*-===//
//
// Writes what a search found, and why, into a directory (docs/reports.md):
//   strategy.json     every op's configuration and predicted times (the
//                     file --ppc-import-strategy reads back);
//   summary.txt       a readable table per op: shape, SOAP degrees, devices,
//                     predicted forward/backward/communication time, memory;
//   timeline.json     the simulated iteration as a Chrome trace;
//   search-trace.csv  iteration, seconds, current and best objective;
//   graph.dot, graph.html  the graph coloured by strategy (HTML: one
//                     self-contained page to open in a browser);
//   baselines.txt/.json  data parallel vs expert strategies vs found:
//                     iteration time, throughput, bytes moved, peak memory;
//   scaling.csv       predicted throughput on 1, 2, 4, ... N devices.
// MLIR-free: it reads the search's and the simulator's results.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_REPORT_REPORT_H
#define PPC_REPORT_REPORT_H

#include "ppc/Search/Search.h"

#include <string>
#include <utility>
#include <vector>

namespace ppc::report {

struct ReportInput {
  const search::Problem &problem;
  /// For titles: the model's and the machine's names.
  std::string modelName;
  std::string machineName;
  /// Samples per iteration (dim 0 of the first input), for throughput.
  int64_t batchSize = 0;
  /// What the search found, with its trace.
  search::SearchResult found;
  /// Named strategies to compare with: "data parallel", "megatron (tp=8)",
  /// "one weird trick"...
  std::vector<std::pair<std::string, sim::Strategy>> baselines;
  /// Also compute scaling.csv (it runs a short search per device count).
  bool scaling = true;
  /// Budget of each scaling point's search.
  search::SearchOptions scalingSearch;
};

/// Writes the report files into `dir` (created if needed). Returns OK or
/// what went wrong (the path that could not be written, a strategy that
/// does not fit the graph).
absl::Status writeReport(const std::string &dir, const ReportInput &input);

} // namespace ppc::report

#endif // PPC_REPORT_REPORT_H
