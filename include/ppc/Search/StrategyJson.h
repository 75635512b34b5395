//===- StrategyJson.h - strategies as readable, editable JSON ---*- C++ -*-===//
//
// The strategy file users export, edit and feed back (docs/strategy-format.md):
// one entry per op, keyed by the op's name, with its kind, iteration dims
// (size and SOAP kind), degrees, machine view and devices, and — when a
// simulation is given — its predicted forward, backward and communication
// time. MLIR-free: the export/import passes and the report both use it.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SEARCH_STRATEGYJSON_H
#define PPC_SEARCH_STRATEGYJSON_H

#include "ppc/Simulator/Graph.h"
#include "ppc/Simulator/Machine.h"
#include "ppc/Simulator/Pipeline.h"
#include "ppc/Simulator/Simulator.h"

#include <optional>
#include <string>
#include <vector>

namespace ppc::search {

/// Writes `strategy` for `graph` on `machine` as JSON, with its pipeline
/// when it has one. `times` (from Simulator::opTimes) and `result` add
/// predictions when non-null.
std::string
writeStrategyJson(const sim::Graph &graph, const Machine &machine,
                  const sim::Strategy &strategy,
                  const std::vector<sim::Simulator::OpTimes> *times = nullptr,
                  const sim::SimResult *result = nullptr,
                  const sim::Pipeline &pipeline = {});

/// Reads a strategy file for `graph`: every op must be named exactly once
/// (by name; entries for unknown ops, missing ops, or degrees that do not
/// fit are errors naming the entry); an error is InvalidArgument
/// "<fileName>: <json path>: <problem>". The file's pipeline, if any, goes
/// to `pipeline` (checked against the strategy: sim::checkPipeline); a
/// file with a pipeline is an error when `pipeline` is null.
absl::StatusOr<sim::Strategy>
readStrategyJson(const std::string &text, const std::string &fileName,
                 const sim::Graph &graph, const Machine &machine,
                 sim::Pipeline *pipeline = nullptr);

/// The zigzag order's pairs a strategy file was written for (its
/// "sequence_order"; ppc-zigzag-sequence), 0 for natural order; what else
/// the file holds is checked by readStrategyJson, which also refuses a
/// graph in another order.
absl::StatusOr<int64_t> readStrategyZigzagPairs(const std::string &text,
                                                const std::string &fileName);

} // namespace ppc::search

#endif // PPC_SEARCH_STRATEGYJSON_H
