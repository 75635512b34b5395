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

using json = nlohmann::json;
// Written files keep their keys in a readable order.
using ojson = nlohmann::ordered_json;

namespace ppc {
namespace {

using json_reader::indexed;
using json_reader::jsonError;
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
absl::StatusOr<double> readQuantity(const json &v, const std::string &where,
                                    Dim dim) {
  if (v.is_number())
    return v.get<double>();
  if (!v.is_string())
    return jsonError(where, std::string("must be a number or a string with "
                                        "a unit, e.g. ") +
                                example(dim));
  std::string text = v.get<std::string>();
  const char *begin = text.c_str();
  char *end = nullptr;
  double number = std::strtod(begin, &end);
  if (end == begin)
    return jsonError(where, "'" + text + "' does not start with a number");
  std::string unit(end);
  unit.erase(0, unit.find_first_not_of(' '));
  std::vector<std::string> known;
  for (const Unit &u : unitsOf(dim)) {
    if (unit == u.name)
      return u.scale < 0 ? number / -u.scale : number * u.scale;
    known.push_back(u.name);
  }
  return jsonError(where, "unknown unit '" + unit + "' for " + dimName(dim) +
                              " (use " + join(known) + ")");
}

absl::Status requirePositive(double x, const std::string &where) {
  if (!(std::isfinite(x) && x > 0))
    return jsonError(where, "must be > 0");
  return absl::OkStatus();
}
absl::Status requireNonNegative(double x, const std::string &where) {
  if (!(std::isfinite(x) && x >= 0))
    return jsonError(where, "must be >= 0");
  return absl::OkStatus();
}

/// The quantity under `key`, which must be > 0.
absl::StatusOr<double> getPositive(ObjectReader &r, const std::string &key,
                                   Dim dim) {
  PPC_ASSIGN_OR_RETURN(const json *v, r.get(key));
  PPC_ASSIGN_OR_RETURN(double x, readQuantity(*v, r.at(key), dim));
  PPC_RETURN_IF_ERROR(requirePositive(x, r.at(key)));
  return x;
}

/// The quantity under `key`, which must be >= 0; 0 when absent.
absl::StatusOr<double> getNonNegative(ObjectReader &r, const std::string &key,
                                      Dim dim) {
  if (!r.has(key))
    return 0.0;
  PPC_ASSIGN_OR_RETURN(const json *v, r.get(key));
  PPC_ASSIGN_OR_RETURN(double x, readQuantity(*v, r.at(key), dim));
  PPC_RETURN_IF_ERROR(requireNonNegative(x, r.at(key)));
  return x;
}

absl::StatusOr<DeviceSpec> readDeviceSpec(const json &value,
                                          const std::string &path) {
  PPC_ASSIGN_OR_RETURN(ObjectReader r, ObjectReader::open(value, path));
  DeviceSpec spec;
  PPC_ASSIGN_OR_RETURN(spec.name, r.getNonEmptyString("name"));
  PPC_ASSIGN_OR_RETURN(const json *flopsValue, r.get("peak_flops"));
  PPC_ASSIGN_OR_RETURN(ObjectReader flops,
                       ObjectReader::open(*flopsValue, r.at("peak_flops")));
  for (auto it = flopsValue->begin(); it != flopsValue->end(); ++it) {
    std::optional<DType> type = symbolizeDType(it.key());
    if (!type) {
      std::vector<std::string> names;
      for (int i = 0; i < kNumDTypes; ++i)
        names.push_back(stringifyDType(static_cast<DType>(i)));
      return jsonError(flops.at(it.key()),
                       "unknown element type (use " + join(names) + ")");
    }
    PPC_ASSIGN_OR_RETURN(double f, getPositive(flops, it.key(), Dim::Flops));
    spec.setPeakFlops(*type, f);
  }
  if (!spec.hasPeakFlops(DType::F32))
    return jsonError(flops.at("f32"),
                     "missing (every device needs an f32 rate)");
  PPC_ASSIGN_OR_RETURN(spec.memoryBandwidth,
                       getPositive(r, "memory_bandwidth", Dim::Bandwidth));
  PPC_ASSIGN_OR_RETURN(const json *memory, r.get("memory_bytes"));
  double bytes = 0;
  if (memory->is_number_integer()) {
    bytes = static_cast<double>(memory->get<int64_t>());
  } else {
    PPC_ASSIGN_OR_RETURN(
        bytes, readQuantity(*memory, r.at("memory_bytes"), Dim::Bytes));
  }
  PPC_RETURN_IF_ERROR(requirePositive(bytes, r.at("memory_bytes")));
  // Converting a double at or beyond 2^63 to int64 is undefined.
  if (bytes >= 0x1p63)
    return jsonError(r.at("memory_bytes"), "must be less than 2^63 bytes");
  spec.memoryBytes = static_cast<int64_t>(bytes);
  PPC_ASSIGN_OR_RETURN(spec.launchOverhead,
                       getNonNegative(r, "launch_overhead", Dim::Time));
  // FLOP counts at which a kernel reaches half its rate.
  for (auto [key, field] :
       {std::pair{"half_efficiency_flops", &spec.halfEfficiencyFlops},
        std::pair{"attention_half_efficiency_flops",
                  &spec.attentionHalfEfficiencyFlops}}) {
    if (!r.has(key))
      continue;
    PPC_ASSIGN_OR_RETURN(*field, r.getNumber(key));
    PPC_RETURN_IF_ERROR(requireNonNegative(*field, r.at(key)));
  }
  if (r.has("compute_units")) {
    PPC_ASSIGN_OR_RETURN(const json *units, r.get("compute_units"));
    if (!units->is_number_integer() || units->get<int64_t>() < 0)
      return jsonError(r.at("compute_units"), "must be a whole number >= 0");
    spec.computeUnits = units->get<int64_t>();
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
    PPC_ASSIGN_OR_RETURN(const json *fraction, r.get(key));
    if (!fraction->is_number() || !(fraction->get<double>() > 0) ||
        fraction->get<double>() > 1)
      return jsonError(r.at(key), "must be a fraction in (0, 1]");
    *field = fraction->get<double>();
  }
  PPC_RETURN_IF_ERROR(r.finish());
  return spec;
}

absl::StatusOr<LinkKind> readLinkKind(ObjectReader &r) {
  PPC_ASSIGN_OR_RETURN(std::string kind, r.getString("kind"));
  if (std::optional<LinkKind> k = symbolizeLinkKind(kind))
    return *k;
  std::vector<std::string> names;
  for (int i = 0; i <= static_cast<int>(LinkKind::Other); ++i)
    names.push_back(stringifyLinkKind(static_cast<LinkKind>(i)));
  return jsonError(r.at("kind"), "unknown link kind '" + kind + "' (use " +
                                     join(names) + ")");
}

/// [[size, bandwidth], ...], sizes increasing.
absl::StatusOr<BandwidthCurve> readCurve(ObjectReader &r,
                                         const std::string &key) {
  PPC_ASSIGN_OR_RETURN(const json *v, r.get(key));
  std::string where = r.at(key);
  if (!v->is_array() || v->empty())
    return jsonError(where, "must be a non-empty array of [size, bandwidth] "
                            "pairs, e.g. [[\"4 KiB\", \"1.5 GB/s\"]]");
  BandwidthCurve curve;
  for (size_t i = 0; i < v->size(); ++i) {
    const json &point = (*v)[i];
    std::string at = indexed(where, i);
    if (!point.is_array() || point.size() != 2)
      return jsonError(at, "must be a [size, bandwidth] pair");
    PPC_ASSIGN_OR_RETURN(double bytes,
                         readQuantity(point[0], at + "[0]", Dim::Bytes));
    PPC_RETURN_IF_ERROR(requirePositive(bytes, at + "[0]"));
    if (i > 0 && bytes <= curve.points.back().first)
      return jsonError(at + "[0]", "sizes must increase");
    PPC_ASSIGN_OR_RETURN(double rate,
                         readQuantity(point[1], at + "[1]", Dim::Bandwidth));
    PPC_RETURN_IF_ERROR(requirePositive(rate, at + "[1]"));
    curve.points.push_back({bytes, rate});
  }
  return curve;
}

/// Reads kind, bandwidth and latency of `r` (which may hold other keys).
absl::StatusOr<LinkSpec> readLinkFields(ObjectReader &r) {
  LinkSpec spec;
  PPC_ASSIGN_OR_RETURN(spec.kind, readLinkKind(r));
  PPC_ASSIGN_OR_RETURN(spec.bandwidth,
                       getPositive(r, "bandwidth", Dim::Bandwidth));
  PPC_ASSIGN_OR_RETURN(spec.latency, getNonNegative(r, "latency", Dim::Time));
  PPC_ASSIGN_OR_RETURN(
      spec.exchangeBusBandwidth,
      getNonNegative(r, "exchange_bus_bandwidth", Dim::Bandwidth));
  for (auto [key, curve] :
       {std::pair{"bandwidth_by_size", &spec.bySize},
        std::pair{"collective_bandwidth_by_size", &spec.collectiveBySize},
        std::pair{"send_bandwidth_by_size", &spec.sendBySize}})
    if (r.has(key)) {
      PPC_ASSIGN_OR_RETURN(*curve, readCurve(r, key));
    }
  return spec;
}

absl::StatusOr<LinkSpec> readLinkSpec(ObjectReader &parent,
                                      const std::string &key) {
  PPC_ASSIGN_OR_RETURN(ObjectReader r, parent.getObject(key));
  PPC_ASSIGN_OR_RETURN(LinkSpec spec, readLinkFields(r));
  PPC_RETURN_IF_ERROR(r.finish());
  return spec;
}

absl::StatusOr<Machine> readCluster(ObjectReader &top, std::string name) {
  PPC_ASSIGN_OR_RETURN(ObjectReader c, top.getObject("cluster"));
  ClusterSpec spec;
  PPC_ASSIGN_OR_RETURN(spec.nodes, c.getInt("nodes"));
  if (spec.nodes < 1)
    return jsonError(c.at("nodes"), "must be >= 1");
  PPC_ASSIGN_OR_RETURN(spec.devicesPerNode, c.getInt("devices_per_node"));
  if (spec.devicesPerNode < 1)
    return jsonError(c.at("devices_per_node"), "must be >= 1");
  PPC_ASSIGN_OR_RETURN(spec.nicsPerNode, c.getInt("nics_per_node", 1));
  if (spec.nicsPerNode < 1 || spec.nicsPerNode > spec.devicesPerNode)
    return jsonError(c.at("nics_per_node"),
                     "must be between 1 and devices_per_node (" +
                         std::to_string(spec.devicesPerNode) + ")");
  PPC_ASSIGN_OR_RETURN(spec.coresPerNode, c.getInt("cores_per_node", 0));
  if (spec.coresPerNode < 0)
    return jsonError(c.at("cores_per_node"),
                     "must be >= 0 (0: every device computes at once)");
  // Checked before anything is built: fromCluster makes every device.
  std::optional<int64_t> count = checkedMul(spec.nodes, spec.devicesPerNode);
  if (!count || *count > kMaxDevices)
    return jsonError(c.at("devices_per_node"),
                     "nodes x devices_per_node (" + std::to_string(spec.nodes) +
                         " x " + std::to_string(spec.devicesPerNode) +
                         ") is more than the " + std::to_string(kMaxDevices) +
                         " devices ppc supports");
  PPC_ASSIGN_OR_RETURN(const json *device, c.get("device"));
  PPC_ASSIGN_OR_RETURN(spec.device, readDeviceSpec(*device, c.at("device")));
  PPC_ASSIGN_OR_RETURN(spec.intra, readLinkSpec(c, "intra"));
  // One node has no inter-node link: `inter` may be left out, and is then
  // `intra` (which no transfer uses, but every cluster carries one).
  if (spec.nodes == 1 && !c.has("inter")) {
    spec.inter = spec.intra;
  } else {
    PPC_ASSIGN_OR_RETURN(spec.inter, readLinkSpec(c, "inter"));
  }
  PPC_RETURN_IF_ERROR(c.finish());
  PPC_RETURN_IF_ERROR(top.finish());
  return Machine::fromCluster(spec, std::move(name));
}

absl::StatusOr<Machine> readGraph(ObjectReader &top, std::string name) {
  Machine m;
  m.name = std::move(name);
  PPC_ASSIGN_OR_RETURN(const json *specs, top.getArray("device_specs"));
  for (size_t i = 0; i < specs->size(); ++i) {
    std::string where = indexed("device_specs", i);
    PPC_ASSIGN_OR_RETURN(DeviceSpec spec, readDeviceSpec((*specs)[i], where));
    for (const DeviceSpec &earlier : m.specs)
      if (earlier.name == spec.name)
        return jsonError(where + ".name",
                         "'" + spec.name + "' is defined twice");
    m.specs.push_back(std::move(spec));
  }
  if (m.specs.empty())
    return jsonError("device_specs", "must not be empty");

  std::map<std::string, int64_t> vertexOf;
  auto addName = [&](const std::string &n,
                     const std::string &where) -> absl::Status {
    if (n.empty())
      return jsonError(where, "must not be empty");
    if (!vertexOf.emplace(n, static_cast<int64_t>(vertexOf.size())).second)
      return jsonError(where, "'" + n + "' is used twice");
    return absl::OkStatus();
  };
  PPC_ASSIGN_OR_RETURN(const json *devices, top.getArray("devices"));
  if (devices->empty())
    return jsonError("devices", "must not be empty");
  if (static_cast<int64_t>(devices->size()) > kMaxDevices)
    return jsonError("devices", std::to_string(devices->size()) +
                                    " devices, more than the " +
                                    std::to_string(kMaxDevices) +
                                    " ppc supports");
  for (size_t i = 0; i < devices->size(); ++i) {
    PPC_ASSIGN_OR_RETURN(
        ObjectReader d,
        ObjectReader::open((*devices)[i], indexed("devices", i)));
    Device device;
    PPC_ASSIGN_OR_RETURN(device.name, d.getString("name"));
    PPC_RETURN_IF_ERROR(addName(device.name, d.at("name")));
    PPC_ASSIGN_OR_RETURN(device.node, d.getInt("node", 0));
    if (device.node < 0)
      return jsonError(d.at("node"), "must be >= 0");
    if (d.has("spec")) {
      PPC_ASSIGN_OR_RETURN(std::string specName, d.getString("spec"));
      device.spec = -1;
      for (size_t s = 0; s < m.specs.size(); ++s)
        if (m.specs[s].name == specName)
          device.spec = s;
      if (device.spec < 0)
        return jsonError(d.at("spec"),
                         "no device spec named '" + specName + "'");
    } else if (m.specs.size() > 1) {
      return jsonError(d.at("spec"),
                       "missing (needed when there are several device specs)");
    }
    PPC_RETURN_IF_ERROR(d.finish());
    m.devices.push_back(device);
  }
  if (top.has("switches")) {
    PPC_ASSIGN_OR_RETURN(const json *switches, top.getArray("switches"));
    for (size_t i = 0; i < switches->size(); ++i) {
      PPC_ASSIGN_OR_RETURN(
          ObjectReader s,
          ObjectReader::open((*switches)[i], indexed("switches", i)));
      Switch sw;
      PPC_ASSIGN_OR_RETURN(sw.name, s.getString("name"));
      PPC_RETURN_IF_ERROR(addName(sw.name, s.at("name")));
      PPC_ASSIGN_OR_RETURN(sw.kind, s.getString("kind", "switch"));
      PPC_ASSIGN_OR_RETURN(sw.node, s.getInt("node", -1));
      if (sw.node < -1)
        return jsonError(s.at("node"), "must be >= 0, or -1 for none");
      PPC_RETURN_IF_ERROR(s.finish());
      m.switches.push_back(sw);
    }
  }
  static const json kNoLinks = json::array();
  const json *links = &kNoLinks;
  if (top.has("links")) {
    PPC_ASSIGN_OR_RETURN(links, top.getArray("links"));
  }
  for (size_t i = 0; i < links->size(); ++i) {
    PPC_ASSIGN_OR_RETURN(ObjectReader l,
                         ObjectReader::open((*links)[i], indexed("links", i)));
    Link link;
    std::string srcName;
    for (auto [key, end] :
         {std::pair{"src", &link.src}, std::pair{"dst", &link.dst}}) {
      PPC_ASSIGN_OR_RETURN(std::string endName, l.getString(key));
      auto it = vertexOf.find(endName);
      if (it == vertexOf.end())
        return jsonError(l.at(key),
                         "no device or switch named '" + endName + "'");
      *end = it->second;
      if (end == &link.src)
        srcName = endName;
    }
    if (link.src == link.dst)
      return jsonError(indexed("links", i),
                       "connects '" + srcName + "' to itself");
    PPC_ASSIGN_OR_RETURN(link.spec, readLinkFields(l));
    PPC_RETURN_IF_ERROR(l.finish());
    m.links.push_back(link);
  }
  PPC_RETURN_IF_ERROR(top.finish());
  return m;
}

absl::StatusOr<Machine> readMachine(const json &value) {
  PPC_ASSIGN_OR_RETURN(ObjectReader top, ObjectReader::open(value, ""));
  PPC_ASSIGN_OR_RETURN(std::string name, top.getString("name", ""));
  bool hasCluster = top.has("cluster");
  bool hasGraph = top.has("devices");
  if (hasCluster && hasGraph)
    return jsonError("cluster", "a machine has either 'cluster' or "
                                "'devices', not both");
  if (!hasCluster && !hasGraph)
    return jsonError("", "needs 'cluster' (nodes x devices) or 'devices' "
                         "and 'links' (explicit graph)");
  if (hasCluster)
    return readCluster(top, std::move(name));
  return readGraph(top, std::move(name));
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
  if (spec.exchangeBusBandwidth > 0)
    link["exchange_bus_bandwidth"] = spec.exchangeBusBandwidth;
  if (!spec.sendBySize.empty())
    link["send_bandwidth_by_size"] = writeCurve(spec.sendBySize);
  return link;
}

} // namespace

absl::StatusOr<Machine> parseMachineJson(std::string_view text,
                                         std::string_view fileName) {
  std::string file(fileName.empty() ? "<machine>" : fileName);
  PPC_ASSIGN_OR_RETURN(json value, json_reader::parseJson(text, file));
  absl::StatusOr<Machine> m = readMachine(value);
  if (m.ok())
    if (absl::Status valid = m->validate(); !valid.ok())
      m = valid;
  if (!m.ok())
    return annotate(m.status(), file);
  return m;
}

absl::StatusOr<Machine> readMachineJsonFile(const std::string &path) {
  PPC_ASSIGN_OR_RETURN(std::string text, json_reader::readTextFile(path));
  return parseMachineJson(text, path);
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

absl::StatusOr<Machine> loadMachine(const std::string &presetOrPath) {
  if (std::optional<Machine> preset = lookupPreset(presetOrPath))
    return *preset;
  bool looksLikePath = presetOrPath.find('/') != std::string::npos ||
                       presetOrPath.find('.') != std::string::npos;
  if (!looksLikePath && !std::ifstream(presetOrPath))
    return absl::InvalidArgumentError(
        "unknown machine '" + presetOrPath + "': not a preset (" +
        listPresetNames() + "; at most " + std::to_string(kMaxDevices) +
        " devices) nor a JSON file");
  return readMachineJsonFile(presetOrPath);
}

} // namespace ppc
