//===- StrategyJson.cpp - strategies as readable, editable JSON -----------===//
//
// The layout is written by hand rather than by nlohmann's pretty printer: each
// op's editable fields (name, kind, degrees, start, strides) share one line,
// so that a strategy can be read as a table and edited with sed; what is only
// informative (iteration dims, devices, predictions) follows on the next
// lines and is ignored when the file is read back.
//
//===----------------------------------------------------------------------===//

#include "ppc/Search/StrategyJson.h"

#include "ppc/Support/JsonReader.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

namespace ppc::search {

namespace {

using json = nlohmann::json;
using json_reader::indexed;
using json_reader::jsonError;
using json_reader::ObjectReader;

constexpr const char *kFormat = "ppc-strategy";
constexpr int64_t kVersion = 1;

std::string quote(const std::string &text) { return json(text).dump(); }

/// Six significant digits: predictions are estimates, and long digit tails
/// make the file hard to read. Non-finite values are not JSON: null.
std::string number(double value) {
  if (!std::isfinite(value))
    return "null";
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.6g", value);
  return buffer;
}

std::string intList(const std::vector<int64_t> &values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i)
    text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

/// A list of integers at `path`, each at least 1 when `positive`.
absl::StatusOr<std::vector<int64_t>>
readIntList(const json &value, const std::string &path, bool positive) {
  if (!value.is_array())
    return jsonError(path, "must be an array of integers");
  std::vector<int64_t> result;
  for (size_t i = 0; i < value.size(); ++i) {
    const json &element = value[i];
    if (!element.is_number_integer())
      return jsonError(indexed(path, i), "must be an integer");
    // Above INT64_MAX nlohmann keeps it unsigned; get<int64_t> would wrap.
    if (element.is_number_unsigned() && element.get<uint64_t>() > INT64_MAX)
      return jsonError(indexed(path, i), "must be less than 2^63");
    int64_t v = element.get<int64_t>();
    if (positive && v < 1)
      return jsonError(indexed(path, i), "must be at least 1");
    result.push_back(v);
  }
  return result;
}

/// The positive integers under `key` of `entry`.
absl::StatusOr<std::vector<int64_t>> getPositiveList(ObjectReader &entry,
                                                     const std::string &key) {
  PPC_ASSIGN_OR_RETURN(const json *value, entry.get(key));
  return readIntList(*value, entry.at(key), /*positive=*/true);
}

std::string describeOp(const sim::Op &op) {
  return "op '" + op.name + "' (" + op.kind + ")";
}

/// Checks the informative "dims" of an entry against the op: a file written
/// for another model or batch size must not be applied silently.
absl::Status checkDims(const json &dims, const std::string &path,
                       const sim::Op &op) {
  if (!dims.is_array())
    return jsonError(path, "must be an array");
  if (dims.size() != op.space.dims.size())
    return jsonError(path, std::to_string(dims.size()) + " dims, but " +
                               describeOp(op) + " has " +
                               std::to_string(op.space.dims.size()));
  for (size_t i = 0; i < dims.size(); ++i) {
    PPC_ASSIGN_OR_RETURN(ObjectReader d,
                         ObjectReader::open(dims[i], indexed(path, i)));
    PPC_ASSIGN_OR_RETURN(int64_t size, d.getInt("size"));
    PPC_ASSIGN_OR_RETURN(std::string kind, d.getString("kind"));
    // Informative: the op says whether a dim splits.
    PPC_RETURN_IF_ERROR(d.getBool("splittable", true).status());
    PPC_RETURN_IF_ERROR(d.finish());
    const IterDim &dim = op.space.dims[i];
    if (size != dim.size || kind != stringifyIterKind(dim.kind))
      return jsonError(indexed(path, i),
                       "is " + std::to_string(size) + " " + kind + ", but " +
                           describeOp(op) + " has " + std::to_string(dim.size) +
                           " " + stringifyIterKind(dim.kind) +
                           " (was the file written for another model or "
                           "batch size?)");
  }
  return absl::OkStatus();
}

/// Reads the file's "pipeline" section.
absl::StatusOr<sim::Pipeline> readPipeline(ObjectReader &top) {
  PPC_ASSIGN_OR_RETURN(ObjectReader p, top.getObject("pipeline"));
  sim::Pipeline stages;
  PPC_ASSIGN_OR_RETURN(stages.microbatches, p.getInt("microbatches"));
  PPC_ASSIGN_OR_RETURN(std::string schedule, p.getString("schedule"));
  const PipelineScheduleInfo *info = findPipelineSchedule(schedule);
  if (!info)
    return jsonError(p.at("schedule"), "is '" + schedule + "': expected " +
                                           pipelineScheduleNames());
  stages.schedule = info->kind;
  PPC_ASSIGN_OR_RETURN(const json *list, p.get("stages"));
  if (!list->is_array() || list->empty())
    return jsonError(p.at("stages"), "must be a non-empty array");
  for (size_t s = 0; s < list->size(); ++s) {
    PPC_ASSIGN_OR_RETURN(
        ObjectReader stage,
        ObjectReader::open((*list)[s], indexed(p.at("stages"), s)));
    PPC_ASSIGN_OR_RETURN(int64_t first, stage.getInt("first_device"));
    PPC_ASSIGN_OR_RETURN(int64_t devices, stage.getInt("devices"));
    stages.firstDevice.push_back(first);
    stages.numDevices.push_back(devices);
    PPC_RETURN_IF_ERROR(stage.finish());
  }
  PPC_RETURN_IF_ERROR(p.finish());
  return stages;
}

/// Reads one entry of "ops" into the config of the op it names.
absl::StatusOr<OpConfig> readEntry(ObjectReader &entry, const std::string &path,
                                   const sim::Op &op, const Machine &machine) {
  if (entry.has("kind")) {
    PPC_ASSIGN_OR_RETURN(std::string kind, entry.getString("kind"));
    if (kind != op.kind)
      return jsonError(entry.at("kind"), "is '" + kind + "', but " +
                                             describeOp(op) + " is a " +
                                             op.kind);
  }
  if (entry.has("dims")) {
    PPC_ASSIGN_OR_RETURN(const json *dims, entry.get("dims"));
    PPC_RETURN_IF_ERROR(checkDims(*dims, entry.at("dims"), op));
  }
  OpConfig config;
  PPC_ASSIGN_OR_RETURN(config.degrees, getPositiveList(entry, "degrees"));
  PPC_ASSIGN_OR_RETURN(config.start, entry.getInt("start", 0));
  if (entry.has("strides")) {
    PPC_ASSIGN_OR_RETURN(config.strides, getPositiveList(entry, "strides"));
  }
  PPC_ASSIGN_OR_RETURN(config.replicas, entry.getInt("replicas", 1));
  PPC_ASSIGN_OR_RETURN(config.recompute, entry.getBool("recompute", false));
  PPC_ASSIGN_OR_RETURN(int64_t zero, entry.getInt("zero", 0));
  if (zero < 0 || zero > kMaxStateSharding)
    return jsonError(entry.at("zero"), "must be a ZeRO stage from 0 to " +
                                           std::to_string(kMaxStateSharding));
  config.sharding = static_cast<StateSharding>(zero);
  PPC_ASSIGN_OR_RETURN(int64_t scatter, entry.getInt("scatter", -1));
  PPC_ASSIGN_OR_RETURN(int64_t stage, entry.getInt("stage", 0));
  config.scatterDim = scatter;
  config.stage = stage;
  PPC_ASSIGN_OR_RETURN(config.ring, entry.getBool("ring", false));
  // Derived from degrees, start and strides when written; not read back,
  // so that editing the degrees alone is enough.
  for (const char *key : {"dtype", "devices", "predicted_ms"})
    if (entry.has(key)) {
      PPC_RETURN_IF_ERROR(entry.get(key).status());
    }
  PPC_RETURN_IF_ERROR(entry.finish());

  if (absl::Status fits = checkConfig(op.space, config, machine.numDevices());
      !fits.ok())
    return jsonError(
        path,
        "degrees " + intList(config.degrees) + " start " +
            std::to_string(config.start) +
            (config.strides.empty() ? ""
                                    : " strides " + intList(config.strides)) +
            (config.replicas == 1
                 ? ""
                 : " replicas " + std::to_string(config.replicas)) +
            " do not fit " + describeOp(op) + " on " +
            std::to_string(machine.numDevices()) +
            " devices: " + messageOf(fits));
  return config;
}

/// The zigzag order's pairs of the graph's causal sequences
/// (ppc-zigzag-sequence), 0 in natural order.
int64_t zigzagPairs(const sim::Graph &graph) {
  int64_t pairs = 0;
  for (const sim::Op &op : graph.ops)
    if (op.space.causal)
      pairs = std::max(pairs, op.space.causal->zigzag);
  return pairs;
}

/// The file's "sequence_order": its zigzag pairs, 0 where it has none.
absl::StatusOr<int64_t> sequenceOrder(ObjectReader &top) {
  if (!top.has("sequence_order"))
    return 0;
  PPC_ASSIGN_OR_RETURN(ObjectReader order, top.getObject("sequence_order"));
  PPC_ASSIGN_OR_RETURN(int64_t pairs, order.getInt("zigzag_pairs"));
  if (pairs < 1)
    return jsonError(order.at("zigzag_pairs"), "must be at least 1");
  PPC_RETURN_IF_ERROR(order.finish());
  return pairs;
}

/// Checks the file's "sequence_order" against the graph's: a strategy names
/// the gathers of the order it was written for.
absl::Status checkSequenceOrder(ObjectReader &top, const sim::Graph &graph) {
  PPC_ASSIGN_OR_RETURN(int64_t written, sequenceOrder(top));
  const int64_t model = zigzagPairs(graph);
  if (written == model)
    return absl::OkStatus();
  auto described = [](int64_t pairs) {
    return pairs == 0 ? std::string("natural order")
                      : "zigzag order of " + std::to_string(pairs) + " pairs";
  };
  return jsonError(
      "sequence_order",
      "the strategy was written for the model with its causal sequences in " +
          described(written) + ", this one has them in " + described(model) +
          (written == 0
               ? std::string(": import it without reordering the model "
                             "(ppc-auto-parallel's zigzag=off or auto)")
               : ": import it onto the model in natural order, which is "
                 "reordered for it, or in the same order (ppc-auto-parallel's "
                 "zigzag=" +
                     std::to_string(written) + ")"));
}

/// Reads the parsed file `value` (see readStrategyJson); errors carry the
/// JSON path, not the file name.
absl::StatusOr<sim::Strategy> readStrategy(const json &value,
                                           const sim::Graph &graph,
                                           const Machine &machine,
                                           sim::Pipeline *pipeline) {
  // Ops by name; ops that share a name are matched in program order.
  std::map<std::string, std::vector<size_t>> opsByName;
  for (size_t i = 0; i < graph.ops.size(); ++i)
    opsByName[graph.ops[i].name].push_back(i);
  std::map<std::string, size_t> entriesSeen;
  // Ops are named after their locations; a module printed without them has
  // only "<kind>#<index>" names, which is worth saying.
  bool anonymous = true;
  for (size_t i = 0; i < graph.ops.size(); ++i)
    anonymous &=
        graph.ops[i].name == graph.ops[i].kind + "#" + std::to_string(i);
  const std::string unnamedHint =
      " (its ops have no names: give them a ppc.name attribute, or keep "
      "their locations with --mlir-print-debuginfo)";

  PPC_ASSIGN_OR_RETURN(ObjectReader top, ObjectReader::open(value, ""));
  if (top.has("format")) {
    PPC_ASSIGN_OR_RETURN(std::string format, top.getString("format"));
    if (format != kFormat)
      return jsonError("format", "must be \"" + std::string(kFormat) + "\"");
  }
  if (top.has("version")) {
    PPC_ASSIGN_OR_RETURN(int64_t version, top.getInt("version"));
    if (version != kVersion)
      return jsonError("version", "unsupported version (this ppc reads " +
                                      std::to_string(kVersion) + ")");
  }
  // Informative only: a strategy may be applied to another machine as long
  // as every op's devices exist there (checked per op below).
  for (const char *key : {"machine", "prediction"})
    if (top.has(key)) {
      PPC_RETURN_IF_ERROR(top.get(key).status());
    }
  sim::Pipeline stages;
  if (top.has("pipeline")) {
    if (!pipeline)
      return jsonError("pipeline", "is not read here (this command takes "
                                   "strategies without pipeline stages)");
    PPC_ASSIGN_OR_RETURN(stages, readPipeline(top));
  }
  PPC_RETURN_IF_ERROR(checkSequenceOrder(top, graph));
  PPC_ASSIGN_OR_RETURN(const json *ops, top.getArray("ops"));
  PPC_RETURN_IF_ERROR(top.finish());

  std::vector<std::optional<OpConfig>> configs(graph.ops.size());
  for (size_t e = 0; e < ops->size(); ++e) {
    std::string path = indexed("ops", e);
    PPC_ASSIGN_OR_RETURN(ObjectReader entry,
                         ObjectReader::open((*ops)[e], path));
    PPC_ASSIGN_OR_RETURN(std::string name, entry.getString("name"));
    auto it = opsByName.find(name);
    if (it == opsByName.end())
      return jsonError(entry.at("name"), "no op named '" + name +
                                             "' in the model" +
                                             (anonymous ? unnamedHint : ""));
    size_t &seen = entriesSeen[name];
    if (seen >= it->second.size())
      return jsonError(entry.at("name"),
                       it->second.size() == 1
                           ? "op '" + name + "' has more than one entry"
                           : "more entries named '" + name + "' than the " +
                                 std::to_string(it->second.size()) +
                                 " ops of that name");
    size_t opIndex = it->second[seen++];
    PPC_ASSIGN_OR_RETURN(configs[opIndex],
                         readEntry(entry, path, graph.ops[opIndex], machine));
  }

  sim::Strategy strategy;
  strategy.reserve(configs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    if (!configs[i])
      return jsonError("ops", "no entry for " + describeOp(graph.ops[i]) +
                                  " (every op needs one)");
    strategy.push_back(std::move(*configs[i]));
  }
  PPC_RETURN_IF_ERROR(annotate(
      sim::checkPipeline(graph, strategy, stages, machine.numDevices()),
      "pipeline"));
  if (pipeline)
    *pipeline = std::move(stages);
  return strategy;
}

} // namespace

std::string writeStrategyJson(const sim::Graph &graph, const Machine &machine,
                              const sim::Strategy &strategy,
                              const std::vector<sim::Simulator::OpTimes> *times,
                              const sim::SimResult *result,
                              const sim::Pipeline &pipeline) {
  std::ostringstream os;
  os << "{\n";
  os << "  \"format\": " << quote(kFormat) << ",\n";
  os << "  \"version\": " << kVersion << ",\n";
  os << "  \"machine\": {";
  // A machine attached as a #topo.cluster has no name; its device does.
  if (!machine.name.empty())
    os << "\"name\": " << quote(machine.name) << ", ";
  if (!machine.specs.empty())
    os << "\"device\": " << quote(machine.specs.front().name) << ", ";
  os << "\"devices\": " << machine.numDevices()
     << ", \"nodes\": " << machine.numNodes() << "},\n";
  if (result) {
    os << "  \"prediction\": {\"iteration_ms\": "
       << number(result->iterationTime * 1e3)
       << ", \"peak_memory_bytes\": " << result->peakMemory()
       << ", \"bytes_moved\": " << number(result->totalBytes())
       << ", \"out_of_memory\": " << (result->outOfMemory ? "true" : "false")
       << "},\n";
  }
  if (pipeline.enabled()) {
    os << "  \"pipeline\": {\"microbatches\": " << pipeline.microbatches
       << ", \"schedule\": "
       << quote(pipelineScheduleInfo(pipeline.schedule).name)
       << ", \"stages\": [";
    for (int32_t s = 0; s < pipeline.numStages(); ++s)
      os << (s ? ", " : "") << "{\"first_device\": " << pipeline.firstDevice[s]
         << ", \"devices\": " << pipeline.numDevices[s] << "}";
    os << "]},\n";
  }
  if (int64_t pairs = zigzagPairs(graph))
    os << "  \"sequence_order\": {\"zigzag_pairs\": " << pairs << "},\n";
  os << "  \"ops\": [";
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    const sim::Op &op = graph.ops[i];
    const OpConfig &config = strategy[i];
    os << (i ? ",\n" : "\n");
    // The editable fields, on one line.
    os << "    {\"name\": " << quote(op.name)
       << ", \"kind\": " << quote(op.kind)
       << ", \"degrees\": " << intList(config.degrees)
       << ", \"start\": " << config.start
       << ", \"strides\": " << intList(config.strides);
    if (config.replicas != 1)
      os << ", \"replicas\": " << config.replicas;
    if (config.recompute)
      os << ", \"recompute\": true";
    if (config.sharding != StateSharding::None)
      os << ", \"zero\": " << static_cast<int>(config.sharding);
    if (config.scatterDim >= 0)
      os << ", \"scatter\": " << config.scatterDim;
    if (config.stage != 0)
      os << ", \"stage\": " << config.stage;
    if (config.ring)
      os << ", \"ring\": true";
    os << ",\n";
    // What is only informative.
    os << "     \"dims\": [";
    for (size_t d = 0; d < op.space.dims.size(); ++d) {
      const IterDim &dim = op.space.dims[d];
      os << (d ? ", " : "") << "{\"size\": " << dim.size << ", \"kind\": \""
         << stringifyIterKind(dim.kind) << "\""
         << (dim.splittable ? "" : ", \"splittable\": false") << "}";
    }
    os << "],\n";
    os << "     \"dtype\": " << quote(stringifyDType(op.dtype))
       << ", \"devices\": " << intList(config.devices());
    if (times && i < times->size()) {
      const sim::Simulator::OpTimes &t = (*times)[i];
      os << ",\n     \"predicted_ms\": {\"forward\": "
         << number(t.forward * 1e3)
         << ", \"backward\": " << number(t.backward * 1e3)
         << ", \"communication\": " << number(t.communication * 1e3) << "}";
    }
    os << "}";
  }
  os << (graph.ops.empty() ? "]\n" : "\n  ]\n");
  os << "}\n";
  return os.str();
}

absl::StatusOr<int64_t> readStrategyZigzagPairs(const std::string &text,
                                                const std::string &fileName) {
  PPC_ASSIGN_OR_RETURN(json value, json_reader::parseJson(text, fileName));
  absl::StatusOr<ObjectReader> top = ObjectReader::open(value, "");
  absl::StatusOr<int64_t> pairs =
      top.ok() ? sequenceOrder(*top) : absl::StatusOr<int64_t>(top.status());
  if (!pairs.ok())
    return annotate(pairs.status(), fileName);
  return pairs;
}

absl::StatusOr<sim::Strategy> readStrategyJson(const std::string &text,
                                               const std::string &fileName,
                                               const sim::Graph &graph,
                                               const Machine &machine,
                                               sim::Pipeline *pipeline) {
  PPC_ASSIGN_OR_RETURN(json value, json_reader::parseJson(text, fileName));
  absl::StatusOr<sim::Strategy> strategy =
      readStrategy(value, graph, machine, pipeline);
  if (!strategy.ok())
    return annotate(strategy.status(), fileName);
  return strategy;
}

} // namespace ppc::search
