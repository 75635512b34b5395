//===- MachineJson.cpp - machine descriptions as JSON ---------------------===//
//
// The format is documented in docs/machine-format.md. Reading is strict
// (unknown keys are errors: a misspelt "bandwith" must not silently become a
// default) and every error names the JSON path of the offending value.
// Quantities may be plain numbers in base units or strings with a unit
// ("300 GB/s", "100 Gb/s", "80 GiB", "1.5 us", "989 TFLOP/s").
//
//===----------------------------------------------------------------------===//

#include "ppc/Simulator/Machine.h"

#include "ppc/Support/CheckedMath.h"
#include "ppc/Support/JsonReader.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

using json = nlohmann::json;
// Written files keep their keys in a readable order.
using ojson = nlohmann::ordered_json;

namespace ppc {
namespace {

/// Thrown inside this file only, with the path and the problem.
using json_reader::JsonError;
using json_reader::ObjectReader;

enum class Dim { Bandwidth, Bytes, Time, Flops };

struct Unit {
  const char *name;
  double scale;
};

const std::vector<Unit> &unitsOf(Dim dim) {
  static const std::vector<Unit> bandwidth = {
      {"B/s", 1},         {"KB/s", 1e3},      {"MB/s", 1e6},
      {"GB/s", 1e9},      {"TB/s", 1e12},     {"KiB/s", 1024.0},
      {"MiB/s", 1 << 20}, {"GiB/s", 1 << 30}, {"Kb/s", 1e3 / 8},
      {"Mb/s", 1e6 / 8},  {"Gb/s", 1e9 / 8},  {"Tb/s", 1e12 / 8}};
  static const std::vector<Unit> bytes = {
      {"B", 1},         {"KB", 1e3},      {"MB", 1e6},
      {"GB", 1e9},      {"TB", 1e12},     {"KiB", 1024.0},
      {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1099511627776.0}};
  // Negative scales divide: 5 / 1e6 is exactly the double 5e-6, whereas
  // 5 * 1e-6 is not.
  static const std::vector<Unit> time = {
      {"s", 1}, {"ms", -1e3}, {"us", -1e6}, {"ns", -1e9}};
  static const std::vector<Unit> flops = {
      {"FLOP/s", 1}, {"GFLOP/s", 1e9}, {"TFLOP/s", 1e12}, {"PFLOP/s", 1e15},
      {"FLOPS", 1},  {"GFLOPS", 1e9},  {"TFLOPS", 1e12},  {"PFLOPS", 1e15}};
  switch (dim) {
  case Dim::Bandwidth:
    return bandwidth;
  case Dim::Bytes:
    return bytes;
  case Dim::Time:
    return time;
  case Dim::Flops:
    return flops;
  }
  return bytes;
}

const char *dimName(Dim dim) {
  switch (dim) {
  case Dim::Bandwidth:
    return "a bandwidth";
  case Dim::Bytes:
    return "a size";
  case Dim::Time:
    return "a time";
  case Dim::Flops:
    return "a FLOP rate";
  }
  return "";
}

std::string join(const std::vector<std::string> &items) {
  std::string out;
  for (const std::string &s : items)
    out += (out.empty() ? "" : ", ") + s;
  return out;
}

/// An example of a quantity with a unit, for error messages.
const char *example(Dim dim) {
  switch (dim) {
  case Dim::Bandwidth:
    return "\"300 GB/s\"";
  case Dim::Bytes:
    return "\"80 GiB\"";
  case Dim::Time:
    return "\"1.5 us\"";
  case Dim::Flops:
    return "\"989 TFLOP/s\"";
  }
  return "";
}

/// A number in base units, or a string "<number> <unit>".
double readQuantity(const json &v, const std::string &where, Dim dim) {
  if (v.is_number())
    return v.get<double>();
  if (!v.is_string())
    throw JsonError{where, std::string("must be a number or a string with "
                                       "a unit, e.g. ") +
                               example(dim)};
  std::string text = v.get<std::string>();
  const char *begin = text.c_str();
  char *end = nullptr;
  double number = std::strtod(begin, &end);
  if (end == begin)
    throw JsonError{where, "'" + text + "' does not start with a number"};
  std::string unit(end);
  unit.erase(0, unit.find_first_not_of(' '));
  std::vector<std::string> known;
  for (const Unit &u : unitsOf(dim)) {
    if (unit == u.name)
      return u.scale < 0 ? number / -u.scale : number * u.scale;
    known.push_back(u.name);
  }
  throw JsonError{where, "unknown unit '" + unit + "' for " + dimName(dim) +
                             " (use " + join(known) + ")"};
}

double getQuantity(ObjectReader &r, const std::string &key, Dim dim) {
  return readQuantity(r.get(key), r.at(key), dim);
}

void requirePositive(double x, const std::string &where) {
  if (!(std::isfinite(x) && x > 0))
    throw JsonError{where, "must be > 0"};
}
void requireNonNegative(double x, const std::string &where) {
  if (!(std::isfinite(x) && x >= 0))
    throw JsonError{where, "must be >= 0"};
}

DeviceSpec readDeviceSpec(const json &value, const std::string &path) {
  ObjectReader r(value, path);
  DeviceSpec spec;
  spec.name = r.getString("name");
  if (spec.name.empty())
    throw JsonError{r.at("name"), "must not be empty"};
  ObjectReader flops(r.get("peak_flops"), r.at("peak_flops"));
  for (auto it = value["peak_flops"].begin(); it != value["peak_flops"].end();
       ++it) {
    std::string where = flops.at(it.key());
    std::optional<DType> type = symbolizeDType(it.key());
    if (!type) {
      std::vector<std::string> names;
      for (int i = 0; i < kNumDTypes; ++i)
        names.push_back(stringifyDType(static_cast<DType>(i)));
      throw JsonError{where, "unknown element type (use " + join(names) + ")"};
    }
    double f = getQuantity(flops, it.key(), Dim::Flops);
    requirePositive(f, where);
    spec.setPeakFlops(*type, f);
  }
  if (!spec.hasPeakFlops(DType::F32))
    throw JsonError{flops.at("f32"),
                    "missing (every device needs an f32 rate)"};
  spec.memoryBandwidth = getQuantity(r, "memory_bandwidth", Dim::Bandwidth);
  requirePositive(spec.memoryBandwidth, r.at("memory_bandwidth"));
  const json &memory = r.get("memory_bytes");
  double bytes = memory.is_number_integer()
                     ? static_cast<double>(memory.get<int64_t>())
                     : readQuantity(memory, r.at("memory_bytes"), Dim::Bytes);
  requirePositive(bytes, r.at("memory_bytes"));
  // Converting a double at or beyond 2^63 to int64 is undefined.
  if (bytes >= 0x1p63)
    throw JsonError{r.at("memory_bytes"), "must be less than 2^63 bytes"};
  spec.memoryBytes = static_cast<int64_t>(bytes);
  spec.launchOverhead = r.has("launch_overhead")
                            ? getQuantity(r, "launch_overhead", Dim::Time)
                            : 0;
  requireNonNegative(spec.launchOverhead, r.at("launch_overhead"));
  // FLOP counts at which a kernel reaches half its rate.
  for (auto [key, field] :
       {std::pair{"half_efficiency_flops", &spec.halfEfficiencyFlops},
        std::pair{"attention_half_efficiency_flops",
                  &spec.attentionHalfEfficiencyFlops}}) {
    if (!r.has(key))
      continue;
    const json &half = r.get(key);
    if (!half.is_number())
      throw JsonError{r.at(key), "must be a number"};
    *field = half.get<double>();
    requireNonNegative(*field, r.at(key));
  }
  if (r.has("compute_units")) {
    const json &units = r.get("compute_units");
    if (!units.is_number_integer() || units.get<int64_t>() < 0)
      throw JsonError{r.at("compute_units"),
                      "must be a whole number >= 0"};
    spec.computeUnits = units.get<int64_t>();
  }
  for (auto [key, field] :
       {std::pair{"matmul_efficiency", &spec.matmulEfficiency},
        std::pair{"bandwidth_efficiency", &spec.bandwidthEfficiency},
        std::pair{"attention_forward_efficiency",
                  &spec.attentionForwardEfficiency},
        std::pair{"attention_backward_efficiency",
                  &spec.attentionBackwardEfficiency}}) {
    if (!r.has(key))
      continue;
    const json &value = r.get(key);
    if (!value.is_number() || !(value.get<double>() > 0) ||
        value.get<double>() > 1)
      throw JsonError{r.at(key), "must be a fraction in (0, 1]"};
    *field = value.get<double>();
  }
  r.finish();
  return spec;
}

LinkKind readLinkKind(ObjectReader &r) {
  std::string kind = r.getString("kind");
  if (std::optional<LinkKind> k = symbolizeLinkKind(kind))
    return *k;
  std::vector<std::string> names;
  for (int i = 0; i <= static_cast<int>(LinkKind::Other); ++i)
    names.push_back(stringifyLinkKind(static_cast<LinkKind>(i)));
  throw JsonError{r.at("kind"),
                  "unknown link kind '" + kind + "' (use " + join(names) + ")"};
}

/// [[size, bandwidth], ...], sizes increasing.
BandwidthCurve readCurve(ObjectReader &r, const std::string &key) {
  const json &v = r.get(key);
  std::string where = r.at(key);
  if (!v.is_array() || v.empty())
    throw JsonError{where, "must be a non-empty array of [size, bandwidth] "
                           "pairs, e.g. [[\"4 KiB\", \"1.5 GB/s\"]]"};
  BandwidthCurve curve;
  for (size_t i = 0; i < v.size(); ++i) {
    std::string at = where + "[" + std::to_string(i) + "]";
    if (!v[i].is_array() || v[i].size() != 2)
      throw JsonError{at, "must be a [size, bandwidth] pair"};
    double bytes = readQuantity(v[i][0], at + "[0]", Dim::Bytes);
    requirePositive(bytes, at + "[0]");
    if (i > 0 && bytes <= curve.points.back().first)
      throw JsonError{at + "[0]", "sizes must increase"};
    double rate = readQuantity(v[i][1], at + "[1]", Dim::Bandwidth);
    requirePositive(rate, at + "[1]");
    curve.points.push_back({bytes, rate});
  }
  return curve;
}

/// Reads kind, bandwidth and latency of `r` (which may hold other keys).
LinkSpec readLinkFields(ObjectReader &r) {
  LinkSpec spec;
  spec.kind = readLinkKind(r);
  spec.bandwidth = getQuantity(r, "bandwidth", Dim::Bandwidth);
  requirePositive(spec.bandwidth, r.at("bandwidth"));
  spec.latency = r.has("latency") ? getQuantity(r, "latency", Dim::Time) : 0;
  requireNonNegative(spec.latency, r.at("latency"));
  if (r.has("bandwidth_by_size"))
    spec.bySize = readCurve(r, "bandwidth_by_size");
  if (r.has("collective_bandwidth_by_size"))
    spec.collectiveBySize = readCurve(r, "collective_bandwidth_by_size");
  if (r.has("send_bandwidth_by_size"))
    spec.sendBySize = readCurve(r, "send_bandwidth_by_size");
  return spec;
}

LinkSpec readLinkSpec(const json &value, const std::string &path) {
  ObjectReader r(value, path);
  LinkSpec spec = readLinkFields(r);
  r.finish();
  return spec;
}

const json &readArray(ObjectReader &r, const std::string &key) {
  const json &v = r.get(key);
  if (!v.is_array())
    throw JsonError{r.at(key), "must be an array"};
  return v;
}

std::string indexed(const std::string &key, size_t i) {
  return key + "[" + std::to_string(i) + "]";
}

Machine readMachine(const json &value) {
  ObjectReader top(value, "");
  std::string name = top.getString("name", "");
  bool hasCluster = top.has("cluster");
  bool hasGraph = top.has("devices");
  if (hasCluster && hasGraph)
    throw JsonError{"cluster", "a machine has either 'cluster' or 'devices', "
                               "not both"};
  if (!hasCluster && !hasGraph)
    throw JsonError{"(top level)", "needs 'cluster' (nodes x devices) or "
                                   "'devices' and 'links' (explicit graph)"};
  if (hasCluster) {
    ObjectReader c(top.get("cluster"), "cluster");
    ClusterSpec spec;
    spec.nodes = c.getInt("nodes");
    if (spec.nodes < 1)
      throw JsonError{c.at("nodes"), "must be >= 1"};
    spec.devicesPerNode = c.getInt("devices_per_node");
    if (spec.devicesPerNode < 1)
      throw JsonError{c.at("devices_per_node"), "must be >= 1"};
    spec.nicsPerNode = c.getInt("nics_per_node", 1);
    if (spec.nicsPerNode < 1 || spec.nicsPerNode > spec.devicesPerNode)
      throw JsonError{c.at("nics_per_node"),
                      "must be between 1 and devices_per_node (" +
                          std::to_string(spec.devicesPerNode) + ")"};
    spec.coresPerNode = c.getInt("cores_per_node", 0);
    if (spec.coresPerNode < 0)
      throw JsonError{c.at("cores_per_node"),
                      "must be >= 0 (0: every device computes at once)"};
    // Checked before anything is built: fromCluster makes every device.
    std::optional<int64_t> count = checkedMul(spec.nodes, spec.devicesPerNode);
    if (!count || *count > kMaxDevices)
      throw JsonError{
          c.at("devices_per_node"),
          "nodes x devices_per_node (" + std::to_string(spec.nodes) + " x " +
              std::to_string(spec.devicesPerNode) + ") is more than the " +
              std::to_string(kMaxDevices) + " devices ppc supports"};
    spec.device = readDeviceSpec(c.get("device"), c.at("device"));
    spec.intra = readLinkSpec(c.get("intra"), c.at("intra"));
    // One node has no inter-node link: `inter` may be left out, and is then
    // `intra` (which no transfer uses, but every cluster carries one).
    if (spec.nodes == 1 && !c.has("inter"))
      spec.inter = spec.intra;
    else
      spec.inter = readLinkSpec(c.get("inter"), c.at("inter"));
    c.finish();
    top.finish();
    return Machine::fromCluster(spec, name);
  }

  Machine m;
  m.name = name;
  const json &specs = readArray(top, "device_specs");
  for (size_t i = 0; i < specs.size(); ++i) {
    m.specs.push_back(readDeviceSpec(specs[i], indexed("device_specs", i)));
    for (size_t j = 0; j < i; ++j)
      if (m.specs[j].name == m.specs[i].name)
        throw JsonError{indexed("device_specs", i) + ".name",
                        "'" + m.specs[i].name + "' is defined twice"};
  }
  if (m.specs.empty())
    throw JsonError{"device_specs", "must not be empty"};

  std::map<std::string, int64_t> vertexOf;
  auto addName = [&](const std::string &n, const std::string &where) {
    if (n.empty())
      throw JsonError{where, "must not be empty"};
    if (!vertexOf.emplace(n, static_cast<int64_t>(vertexOf.size())).second)
      throw JsonError{where, "'" + n + "' is used twice"};
  };
  const json &devices = readArray(top, "devices");
  if (devices.empty())
    throw JsonError{"devices", "must not be empty"};
  if (static_cast<int64_t>(devices.size()) > kMaxDevices)
    throw JsonError{
        "devices", std::to_string(devices.size()) + " devices, more than the " +
                       std::to_string(kMaxDevices) + " ppc supports"};
  for (size_t i = 0; i < devices.size(); ++i) {
    ObjectReader d(devices[i], indexed("devices", i));
    Device device;
    device.name = d.getString("name");
    addName(device.name, d.at("name"));
    device.node = d.getInt("node", 0);
    if (device.node < 0)
      throw JsonError{d.at("node"), "must be >= 0"};
    if (d.has("spec")) {
      std::string specName = d.getString("spec");
      device.spec = -1;
      for (size_t s = 0; s < m.specs.size(); ++s)
        if (m.specs[s].name == specName)
          device.spec = s;
      if (device.spec < 0)
        throw JsonError{d.at("spec"),
                        "no device spec named '" + specName + "'"};
    } else if (m.specs.size() > 1) {
      throw JsonError{d.at("spec"),
                      "missing (needed when there are several device specs)"};
    }
    d.finish();
    m.devices.push_back(device);
  }
  if (top.has("switches")) {
    const json &switches = readArray(top, "switches");
    for (size_t i = 0; i < switches.size(); ++i) {
      ObjectReader s(switches[i], indexed("switches", i));
      Switch sw;
      sw.name = s.getString("name");
      addName(sw.name, s.at("name"));
      sw.kind = s.getString("kind", "switch");
      sw.node = s.getInt("node", -1);
      if (sw.node < -1)
        throw JsonError{s.at("node"), "must be >= 0, or -1 for none"};
      s.finish();
      m.switches.push_back(sw);
    }
  }
  const json &links =
      top.has("links") ? readArray(top, "links") : json::array();
  for (size_t i = 0; i < links.size(); ++i) {
    ObjectReader l(links[i], indexed("links", i));
    Link link;
    for (auto [key, end] :
         {std::pair{"src", &link.src}, std::pair{"dst", &link.dst}}) {
      std::string endName = l.getString(key);
      auto it = vertexOf.find(endName);
      if (it == vertexOf.end())
        throw JsonError{l.at(key),
                        "no device or switch named '" + endName + "'"};
      *end = it->second;
    }
    if (link.src == link.dst)
      throw JsonError{indexed("links", i),
                      "connects '" + l.getString("src") + "' to itself"};
    link.spec = readLinkFields(l);
    l.finish();
    m.links.push_back(link);
  }
  top.finish();
  return m;
}

ojson writeDeviceSpec(const DeviceSpec &spec) {
  ojson flops = ojson::object();
  for (int i = 0; i < kNumDTypes; ++i)
    if (spec.peakFlops[i] > 0)
      flops[stringifyDType(static_cast<DType>(i))] = spec.peakFlops[i];
  ojson device = {{"name", spec.name},
                  {"peak_flops", flops},
                  {"memory_bandwidth", spec.memoryBandwidth},
                  {"memory_bytes", spec.memoryBytes},
                  {"launch_overhead", spec.launchOverhead},
                  {"half_efficiency_flops", spec.halfEfficiencyFlops}};
  // The GPU model's figures, where the device has them.
  if (spec.computeUnits > 0)
    device["compute_units"] = spec.computeUnits;
  if (spec.matmulEfficiency > 0)
    device["matmul_efficiency"] = spec.matmulEfficiency;
  if (spec.bandwidthEfficiency > 0)
    device["bandwidth_efficiency"] = spec.bandwidthEfficiency;
  if (spec.attentionForwardEfficiency > 0)
    device["attention_forward_efficiency"] = spec.attentionForwardEfficiency;
  if (spec.attentionBackwardEfficiency > 0)
    device["attention_backward_efficiency"] = spec.attentionBackwardEfficiency;
  if (spec.attentionHalfEfficiencyFlops > 0)
    device["attention_half_efficiency_flops"] =
        spec.attentionHalfEfficiencyFlops;
  return device;
}

ojson writeCurve(const BandwidthCurve &curve) {
  ojson points = ojson::array();
  for (auto [bytes, rate] : curve.points)
    points.push_back({bytes, rate});
  return points;
}

ojson writeLinkSpec(const LinkSpec &spec) {
  ojson link = {{"kind", stringifyLinkKind(spec.kind)},
                {"bandwidth", spec.bandwidth},
                {"latency", spec.latency}};
  if (!spec.bySize.empty())
    link["bandwidth_by_size"] = writeCurve(spec.bySize);
  if (!spec.collectiveBySize.empty())
    link["collective_bandwidth_by_size"] = writeCurve(spec.collectiveBySize);
  if (!spec.sendBySize.empty())
    link["send_bandwidth_by_size"] = writeCurve(spec.sendBySize);
  return link;
}

} // namespace

std::optional<Machine> parseMachineJson(std::string_view text,
                                        std::string_view fileName,
                                        std::string &error) {
  std::string file(fileName.empty() ? "<machine>" : fileName);
  std::optional<json> parsed = json_reader::parseJson(text, file, error);
  if (!parsed)
    return std::nullopt;
  const json &value = *parsed;
  try {
    Machine m = readMachine(value);
    if (std::string problem = m.validate(); !problem.empty()) {
      error = file + ": " + problem;
      return std::nullopt;
    }
    return m;
  } catch (const JsonError &e) {
    error = file + ": " + e.path + ": " + e.message;
  } catch (const json::exception &e) {
    error = file + ": " + e.what();
  }
  return std::nullopt;
}

std::optional<Machine> readMachineJsonFile(const std::string &path,
                                           std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = path + ": cannot open the file";
    return std::nullopt;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parseMachineJson(buffer.str(), path, error);
}

std::string writeMachineJson(const Machine &machine, bool explicitGraph) {
  ojson out = ojson::object();
  if (!machine.name.empty())
    out["name"] = machine.name;
  if (machine.cluster && !explicitGraph) {
    const ClusterSpec &c = *machine.cluster;
    ojson cluster = {{"nodes", c.nodes},
                     {"devices_per_node", c.devicesPerNode},
                     {"nics_per_node", c.nicsPerNode}};
    if (c.coresPerNode > 0)
      cluster["cores_per_node"] = c.coresPerNode;
    cluster["device"] = writeDeviceSpec(c.device);
    cluster["intra"] = writeLinkSpec(c.intra);
    cluster["inter"] = writeLinkSpec(c.inter);
    out["cluster"] = std::move(cluster);
    return out.dump(2) + "\n";
  }
  ojson specs = ojson::array();
  for (const DeviceSpec &s : machine.specs)
    specs.push_back(writeDeviceSpec(s));
  ojson devices = ojson::array();
  for (const Device &d : machine.devices)
    devices.push_back({{"name", d.name},
                       {"node", d.node},
                       {"spec", machine.specs[d.spec].name}});
  ojson switches = ojson::array();
  for (const Switch &s : machine.switches)
    switches.push_back({{"name", s.name}, {"kind", s.kind}, {"node", s.node}});
  ojson links = ojson::array();
  for (const Link &l : machine.links) {
    ojson link = writeLinkSpec(l.spec);
    link["src"] = machine.getVertexName(l.src);
    link["dst"] = machine.getVertexName(l.dst);
    links.push_back(link);
  }
  out["device_specs"] = specs;
  out["devices"] = devices;
  if (!machine.switches.empty())
    out["switches"] = switches;
  out["links"] = links;
  return out.dump(2) + "\n";
}

std::optional<Machine> loadMachine(const std::string &presetOrPath,
                                   std::string &error) {
  if (std::optional<Machine> preset = lookupPreset(presetOrPath))
    return preset;
  bool looksLikePath = presetOrPath.find('/') != std::string::npos ||
                       presetOrPath.find('.') != std::string::npos;
  if (!looksLikePath && !std::ifstream(presetOrPath)) {
    error = "unknown machine '" + presetOrPath + "': not a preset (" +
            listPresetNames() + "; at most " + std::to_string(kMaxDevices) +
            " devices) nor a JSON file";
    return std::nullopt;
  }
  return readMachineJsonFile(presetOrPath, error);
}

} // namespace ppc
