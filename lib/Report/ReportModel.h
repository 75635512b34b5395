//===- ReportModel.h - what every report file is written from ---*- C++ -*-===//
//
// Internal to lib/Report: the found strategy and the baselines simulated
// once, and per-op rows (degrees, class, devices, times, memory) that the
// text, DOT and HTML writers all format. Keeping one model means the files
// cannot disagree with each other.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_LIB_REPORT_REPORTMODEL_H
#define PPC_LIB_REPORT_REPORTMODEL_H

#include "ppc/Report/Report.h"
#include "ppc/Search/Blocks.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ppc::report {

/// How an op is parallelized, for colouring graphs.
enum class StrategyClass : uint8_t {
  SingleDevice, ///< one partition on one device.
  Replicated,   ///< no dim split, the op whole on several devices.
  DataParallel, ///< only sample dims split.
  Tensor,       ///< only parameter and/or reduction dims split.
  Spatial,      ///< only attribute dims split.
  Mixed,        ///< dims of several of the groups above split.
};
inline constexpr int kNumStrategyClasses = 6;

const char *stringifyStrategyClass(StrategyClass c);
/// Fill colour of a class (the same in DOT and HTML).
const char *colorOf(StrategyClass c);
StrategyClass classify(const sim::Op &op, const OpConfig &config);

/// One op of the found strategy, ready to print.
struct OpRow {
  std::string name;
  std::string kind;
  std::string shape;   ///< result 0, e.g. "64x128x28x28".
  std::string degrees; ///< "S4 P2", "-" when whole; "x4" replicas,
                       ///< "rc" recomputed, "Z3" ZeRO stage.
  std::string devices; ///< "0-7", "0,4,8,12".
  StrategyClass cls = StrategyClass::SingleDevice;
  double fwdMs = 0, bwdMs = 0, commMs = 0;
  /// Bytes per device this op holds: its weight slices (with gradients and
  /// optimizer state) and its result slice kept for backward.
  int64_t memoryBytes = 0;
};

/// One producer -> consumer edge of the graph.
struct EdgeRow {
  size_t producer = 0, consumer = 0;
  /// Forward bytes moved between the two configurations (the gradient moves
  /// as much back); 0 when the consumer finds its slices locally.
  double reshardBytes = 0;
};

/// Repeated blocks after the first of a run laid out alike (the same
/// degrees on the same devices op for op), which graph.html draws as one
/// node below that first block, opened on a click.
struct FoldRow {
  size_t begin = 0, end = 0; ///< the folded ops, [begin, end).
  size_t blocks = 0;         ///< the blocks they are, of `length` ops each.
  size_t length = 0;
  size_t like = 0; ///< first op of the block drawn whole that they repeat.
  /// What the ops of a block share in their names ("layers.3"), or
  /// "ops 12-19": of the block drawn whole, the first folded, the last.
  std::string likeName, firstName, lastName;
};

/// A strategy simulated: a baseline or the found one.
struct StrategyRow {
  std::string name;
  bool found = false;
  sim::SimResult result;
  double objective = 0; ///< search::objective: +inf when out of memory.
  double throughput = 0;
  /// Model FLOPs utilization: the graph's forward and backward FLOPs at
  /// each op's peak rate, over the iteration time on every device.
  double mfu = 0;
  double speedupVsDataParallel = 0;
  bool best = false;
};

/// Predicted iteration times on the first `devices` devices of the machine.
struct ScalingPoint {
  int64_t devices = 0;
  double dataParallel = 0; ///< seconds; +inf when out of memory.
  double best = 0;         ///< the best a short search found, or the found.
};

struct ReportModel {
  const ReportInput *input = nullptr;
  sim::SimResult found;
  /// The found strategy's pipeline simulation, when it has stages: op times
  /// are then per micro-batch.
  std::optional<sim::PipelineResult> pipeline;
  std::vector<OpRow> ops;
  std::vector<EdgeRow> edges;
  /// The graph's repeated blocks (search::findRepeatedBlocks).
  std::vector<search::BlockRun> blocks;
  std::vector<FoldRow> folds;
  /// Baselines in input order, then the found strategy; exactly one best.
  std::vector<StrategyRow> strategies;
  int64_t capacity = 0; ///< bytes per device the strategy may use.
  double dataParallelMs = 0;
  double bestBaselineMs = 0;
  std::string bestBaselineName;
  /// The best baseline is data parallel itself (no second comparison).
  bool bestBaselineIsDataParallel = false;
  /// Empty unless ReportInput::scaling.
  std::vector<ScalingPoint> scaling;
  /// Why the strategy is what it is, in sentences (each a paragraph), for
  /// summary.txt and the HTML: what it changes against data parallel and
  /// what that saves, which baseline it equals, what the scaling curve
  /// says, whether the search converged.
  std::vector<std::string> why;
};

/// Formats -----------------------------------------------------------------

/// "0-7", "0,4,8,12", "0-3,8-11": sorted, runs of 3+ as ranges.
std::string compactDevices(std::vector<int64_t> devices);
std::string formatDegrees(const sim::Op &op, const OpConfig &config);
std::string formatShape(const std::vector<int64_t> &shape);
/// 1536 -> "1.5 KiB".
std::string formatBytes(double bytes);
/// Fixed-point with `digits` decimals.
std::string fixed(double value, int digits);
/// Escapes for a DOT double-quoted string and for HTML text.
std::string escapeDot(const std::string &s);

/// What the names of ops [begin, begin + length) share up to a separator
/// ("layers.3" of "layers.3.attn.q" and "layers.3.mlp.fc1"), or
/// "ops 12-19".
std::string blockName(const std::vector<OpRow> &ops, size_t begin,
                      size_t length);

/// The folds of `ops` over the runs of repeated `blocks`.
std::vector<FoldRow>
foldRepeatedBlocks(const std::vector<search::BlockRun> &blocks,
                   const std::vector<OpRow> &ops);

/// Writers (each returns the file's text) --------------------------------

std::string writeSummary(const ReportModel &model);
std::string writeDot(const ReportModel &model);
std::string writeHtml(const ReportModel &model);

} // namespace ppc::report

#endif // PPC_LIB_REPORT_REPORTMODEL_H
