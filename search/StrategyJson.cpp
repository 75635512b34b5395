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
using json_reader::JsonError;
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

std::string indexed(const std::string &key, size_t index) {
  return key + "[" + std::to_string(index) + "]";
}

/// A list of positive integers at `path`.
std::vector<int64_t> readIntList(const json &value, const std::string &path,
                                 bool positive) {
  if (!value.is_array())
    throw JsonError{path, "must be an array of integers"};
  std::vector<int64_t> result;
  for (size_t i = 0; i < value.size(); ++i) {
    const json &element = value[i];
    if (!element.is_number_integer())
      throw JsonError{indexed(path, i), "must be an integer"};
    // Above INT64_MAX nlohmann keeps it unsigned; get<int64_t> would wrap.
    if (element.is_number_unsigned() && element.get<uint64_t>() > INT64_MAX)
      throw JsonError{indexed(path, i), "must be less than 2^63"};
    int64_t v = element.get<int64_t>();
    if (positive && v < 1)
      throw JsonError{indexed(path, i), "must be at least 1"};
    result.push_back(v);
  }
  return result;
}

std::string describeOp(const sim::Op &op) {
  return "op '" + op.name + "' (" + op.kind + ")";
}

/// Checks the informative "dims" of an entry against the op: a file written
/// for another model or batch size must not be applied silently.
void checkDims(const json &dims, const std::string &path, const sim::Op &op) {
  if (!dims.is_array())
    throw JsonError{path, "must be an array"};
  if (dims.size() != op.space.dims.size())
    throw JsonError{path, std::to_string(dims.size()) + " dims, but " +
                              describeOp(op) + " has " +
                              std::to_string(op.space.dims.size())};
  for (size_t i = 0; i < dims.size(); ++i) {
    ObjectReader d(dims[i], indexed(path, i));
    int64_t size = d.getInt("size");
    std::string kind = d.getString("kind");
    if (d.has("splittable") && !d.get("splittable").is_boolean())
      throw JsonError{d.at("splittable"), "must be true or false"};
    d.finish();
    const IterDim &dim = op.space.dims[i];
    if (size != dim.size || kind != stringifyIterKind(dim.kind))
      throw JsonError{indexed(path, i),
                      "is " + std::to_string(size) + " " + kind + ", but " +
                          describeOp(op) + " has " + std::to_string(dim.size) +
                          " " + stringifyIterKind(dim.kind) +
                          " (was the file written for another model or "
                          "batch size?)"};
  }
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

std::optional<sim::Strategy> readStrategyJson(const std::string &text,
                                              const std::string &fileName,
                                              const sim::Graph &graph,
                                              const Machine &machine,
                                              std::string &error,
                                              sim::Pipeline *pipeline) {
  std::optional<json> parsed = json_reader::parseJson(text, fileName, error);
  if (!parsed)
    return std::nullopt;

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

  std::vector<std::optional<OpConfig>> configs(graph.ops.size());
  sim::Pipeline stages;
  try {
    ObjectReader top(*parsed, "");
    if (top.has("format") && top.getString("format") != kFormat)
      throw JsonError{"format", "must be \"" + std::string(kFormat) + "\""};
    if (top.has("version") && top.getInt("version") != kVersion)
      throw JsonError{"version", "unsupported version (this ppc reads " +
                                     std::to_string(kVersion) + ")"};
    // Informative only: a strategy may be applied to another machine as long
    // as every op's devices exist there (checked per op below).
    if (top.has("machine"))
      top.get("machine");
    if (top.has("prediction"))
      top.get("prediction");
    if (top.has("pipeline")) {
      if (!pipeline)
        throw JsonError{"pipeline", "is not read here (this command takes "
                                    "strategies without pipeline stages)"};
      ObjectReader p(top.get("pipeline"), "pipeline");
      stages.microbatches = p.getInt("microbatches");
      std::string schedule = p.getString("schedule");
      const PipelineScheduleInfo *info = findPipelineSchedule(schedule);
      if (!info)
        throw JsonError{p.at("schedule"), "is '" + schedule +
                                              "': expected " +
                                              pipelineScheduleNames()};
      stages.schedule = info->kind;
      const json &list = p.get("stages");
      if (!list.is_array() || list.empty())
        throw JsonError{p.at("stages"), "must be a non-empty array"};
      for (size_t s = 0; s < list.size(); ++s) {
        ObjectReader stage(list[s], indexed(p.at("stages"), s));
        stages.firstDevice.push_back(stage.getInt("first_device"));
        stages.numDevices.push_back(stage.getInt("devices"));
        stage.finish();
      }
      p.finish();
    }
    const json &ops = top.get("ops");
    if (!ops.is_array())
      throw JsonError{"ops", "must be an array"};
    top.finish();

    for (size_t e = 0; e < ops.size(); ++e) {
      std::string path = indexed("ops", e);
      ObjectReader entry(ops[e], path);
      std::string name = entry.getString("name");
      auto it = opsByName.find(name);
      if (it == opsByName.end())
        throw JsonError{entry.at("name"), "no op named '" + name +
                                              "' in the model" +
                                              (anonymous ? unnamedHint : "")};
      size_t &seen = entriesSeen[name];
      if (seen >= it->second.size())
        throw JsonError{entry.at("name"),
                        it->second.size() == 1
                            ? "op '" + name + "' has more than one entry"
                            : "more entries named '" + name + "' than the " +
                                  std::to_string(it->second.size()) +
                                  " ops of that name"};
      size_t opIndex = it->second[seen++];
      const sim::Op &op = graph.ops[opIndex];

      if (entry.has("kind")) {
        std::string kind = entry.getString("kind");
        if (kind != op.kind)
          throw JsonError{entry.at("kind"), "is '" + kind + "', but " +
                                                describeOp(op) + " is a " +
                                                op.kind};
      }
      if (entry.has("dims"))
        checkDims(entry.get("dims"), entry.at("dims"), op);
      OpConfig config;
      config.degrees = readIntList(entry.get("degrees"), entry.at("degrees"),
                                   /*positive=*/true);
      config.start = entry.getInt("start", 0);
      if (entry.has("strides"))
        config.strides = readIntList(entry.get("strides"), entry.at("strides"),
                                     /*positive=*/true);
      config.replicas = entry.getInt("replicas", 1);
      config.recompute = entry.getBool("recompute", false);
      int64_t zero = entry.getInt("zero", 0);
      if (zero < 0 || zero > kMaxStateSharding)
        throw JsonError{entry.at("zero"),
                        "must be a ZeRO stage from 0 to " +
                            std::to_string(kMaxStateSharding)};
      config.sharding = static_cast<StateSharding>(zero);
      config.scatterDim = entry.getInt("scatter", -1);
      config.stage = entry.getInt("stage", 0);
      // Derived from degrees, start and strides when written; not read back,
      // so that editing the degrees alone is enough.
      for (const char *key : {"dtype", "devices", "predicted_ms"})
        if (entry.has(key))
          entry.get(key);
      entry.finish();

      std::string problem = checkConfig(op.space, config, machine.numDevices());
      if (!problem.empty())
        throw JsonError{
            path, "degrees " + intList(config.degrees) + " start " +
                      std::to_string(config.start) +
                      (config.strides.empty()
                           ? ""
                           : " strides " + intList(config.strides)) +
                      (config.replicas == 1
                           ? ""
                           : " replicas " + std::to_string(config.replicas)) +
                      " do not fit " + describeOp(op) + " on " +
                      std::to_string(machine.numDevices()) +
                      " devices: " + problem};
      configs[opIndex] = std::move(config);
    }

    for (size_t i = 0; i < configs.size(); ++i)
      if (!configs[i])
        throw JsonError{"ops", "no entry for " + describeOp(graph.ops[i]) +
                                   " (every op needs one)"};
  } catch (const JsonError &e) {
    error = fileName + ": " + e.path + ": " + e.message;
    return std::nullopt;
  }

  sim::Strategy strategy;
  strategy.reserve(configs.size());
  for (std::optional<OpConfig> &config : configs)
    strategy.push_back(std::move(*config));
  if (std::string problem =
          sim::checkPipeline(graph, strategy, stages, machine.numDevices());
      !problem.empty()) {
    error = fileName + ": pipeline: " + problem;
    return std::nullopt;
  }
  if (pipeline)
    *pipeline = std::move(stages);
  return strategy;
}

} // namespace ppc::search
