//===- Machine.cpp - MLIR-free machine model ------------------------------===//

#include "ppc/Simulator/Machine.h"

#include "ppc/Support/CheckedMath.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>
#include <set>
#include <sstream>
#include <unordered_map>

namespace ppc {

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

namespace {
constexpr const char *kDTypeNames[kNumDTypes] = {"f64", "f32", "tf32", "bf16",
                                                 "f16", "f8",  "i8"};
constexpr const char *kLinkKindNames[] = {
    "shared_memory", "pcie",       "nvlink",   "infinity_fabric",
    "upi",           "infiniband", "ethernet", "other"};
} // namespace

const char *stringifyDType(DType type) {
  return kDTypeNames[static_cast<int>(type)];
}

std::optional<DType> symbolizeDType(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (name == kDTypeNames[i])
      return static_cast<DType>(i);
  return std::nullopt;
}

const char *stringifyLinkKind(LinkKind kind) {
  return kLinkKindNames[static_cast<int>(kind)];
}

std::optional<LinkKind> symbolizeLinkKind(std::string_view name) {
  for (int i = 0, e = std::size(kLinkKindNames); i < e; ++i)
    if (name == kLinkKindNames[i])
      return static_cast<LinkKind>(i);
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// DeviceSpec
//===----------------------------------------------------------------------===//

double DeviceSpec::getPeakFlops(DType type) const {
  // Without a unit of its own a narrow type runs on the next wider one.
  for (std::optional<DType> t = type; t;) {
    if (hasPeakFlops(*t))
      return peakFlops[static_cast<int>(*t)];
    switch (*t) {
    case DType::F8:
    case DType::I8:
      t = DType::F16;
      break;
    case DType::F32:
      t = std::nullopt;
      break;
    default:
      t = DType::F32;
      break;
    }
  }
  return 0;
}

bool DeviceSpec::operator==(const DeviceSpec &other) const {
  return name == other.name && peakFlops == other.peakFlops &&
         memoryBandwidth == other.memoryBandwidth &&
         memoryBytes == other.memoryBytes &&
         launchOverhead == other.launchOverhead &&
         halfEfficiencyFlops == other.halfEfficiencyFlops &&
         computeUnits == other.computeUnits &&
         matmulEfficiency == other.matmulEfficiency &&
         bandwidthEfficiency == other.bandwidthEfficiency &&
         attentionForwardEfficiency == other.attentionForwardEfficiency &&
         attentionBackwardEfficiency == other.attentionBackwardEfficiency &&
         attentionHalfEfficiencyFlops == other.attentionHalfEfficiencyFlops;
}

//===----------------------------------------------------------------------===//
// Hierarchical expansion
//===----------------------------------------------------------------------===//

static std::string switchKindFor(LinkKind kind) {
  switch (kind) {
  case LinkKind::NVLink:
    return "nvswitch";
  case LinkKind::PCIe:
    return "pcie-switch";
  case LinkKind::SharedMemory:
    return "memory";
  case LinkKind::InfiniBand:
    return "ib-switch";
  case LinkKind::Ethernet:
    return "ethernet-switch";
  default:
    return "switch";
  }
}

static bool isPositive(double x) { return std::isfinite(x) && x > 0; }
static bool isNonNegative(double x) { return std::isfinite(x) && x >= 0; }

double BandwidthCurve::bandwidthAt(double bytes) const {
  return bytes / time(bytes);
}

double BandwidthCurve::time(double bytes) const {
  const auto &p = points;
  auto timeOf = [](const std::pair<double, double> &q) {
    return q.first / q.second;
  };
  if (bytes <= p.front().first)
    return timeOf(p.front());
  if (bytes >= p.back().first)
    return bytes / p.back().second;
  auto hi = std::upper_bound(
      p.begin(), p.end(), bytes,
      [](double b, const std::pair<double, double> &q) { return b < q.first; });
  auto lo = hi - 1;
  // Linear in bytes between two measured sizes: a latency plus a rate
  // (alpha-beta) fitted to the two, exact at both.
  double t = (bytes - lo->first) / (hi->first - lo->first);
  return timeOf(*lo) + t * (timeOf(*hi) - timeOf(*lo));
}

absl::Status BandwidthCurve::validate() const {
  for (size_t i = 0; i < points.size(); ++i) {
    std::string at = "point " + std::to_string(i) + ": ";
    if (!isPositive(points[i].first))
      return absl::InvalidArgumentError(at + "message size must be > 0");
    if (!isPositive(points[i].second))
      return absl::InvalidArgumentError(at + "bandwidth must be > 0");
    if (i > 0 && points[i].first <= points[i - 1].first)
      return absl::InvalidArgumentError(at + "message sizes must increase");
  }
  return absl::OkStatus();
}

Machine Machine::fromCluster(const ClusterSpec &spec, std::string name) {
  Machine m;
  m.name = std::move(name);
  m.cluster = spec;
  m.specs.push_back(spec.device);
  int64_t numDevices = spec.numDevices();
  for (int64_t n = 0; n < spec.nodes; ++n)
    for (int64_t d = 0; d < spec.devicesPerNode; ++d)
      m.devices.push_back(
          {"n" + std::to_string(n) + ".d" + std::to_string(d), n, 0});
  auto addSwitch = [&](std::string switchName, std::string kind, int64_t node) {
    m.switches.push_back({std::move(switchName), std::move(kind), node});
    return numDevices + m.numSwitches() - 1;
  };
  // Each leg to a switch carries half the latency, so that the two-leg path
  // between two devices adds up to exactly the spec.
  LinkSpec intraLeg = spec.intra;
  intraLeg.latency /= 2;
  LinkSpec interLeg = spec.inter;
  interLeg.latency /= 2;
  LinkSpec nicToFabric = spec.inter;
  nicToFabric.latency = 0;

  bool multiNode = spec.nodes > 1;
  std::vector<int64_t> nicsOfNode;
  for (int64_t n = 0; n < spec.nodes; ++n) {
    std::string prefix = "n" + std::to_string(n) + ".";
    if (spec.devicesPerNode > 1) {
      int64_t sw =
          addSwitch(prefix + "switch", switchKindFor(spec.intra.kind), n);
      for (int64_t d = 0; d < spec.devicesPerNode; ++d)
        m.links.push_back({n * spec.devicesPerNode + d, sw, intraLeg});
    }
    if (!multiNode)
      continue;
    int64_t firstNic = numDevices + m.numSwitches();
    for (int64_t k = 0; k < spec.nicsPerNode; ++k) {
      nicsOfNode.push_back(
          addSwitch(prefix + "nic" + std::to_string(k), "nic", n));
    }
    // Devices share NICs in contiguous blocks (GPU i next to NIC i*k/d).
    for (int64_t d = 0; d < spec.devicesPerNode; ++d)
      m.links.push_back({n * spec.devicesPerNode + d,
                         firstNic + d * spec.nicsPerNode / spec.devicesPerNode,
                         interLeg});
  }
  if (multiNode) {
    int64_t fabric = addSwitch("fabric", switchKindFor(spec.inter.kind), -1);
    for (int64_t nic : nicsOfNode)
      m.links.push_back({nic, fabric, nicToFabric});
  }
  return m;
}

//===----------------------------------------------------------------------===//
// Queries
//===----------------------------------------------------------------------===//

int64_t Machine::numNodes() const {
  int64_t maxNode = -1;
  for (const Device &d : devices)
    maxNode = std::max(maxNode, d.node);
  return maxNode + 1;
}

bool sameButNames(const Machine &a, const Machine &b) {
  if (a.cluster && b.cluster)
    return *a.cluster == *b.cluster;
  if (a.specs.size() != b.specs.size() ||
      a.devices.size() != b.devices.size() ||
      a.switches.size() != b.switches.size() ||
      a.links.size() != b.links.size())
    return false;
  for (size_t i = 0; i < a.specs.size(); ++i)
    if (!(a.specs[i] == b.specs[i]))
      return false;
  for (size_t i = 0; i < a.devices.size(); ++i)
    if (a.devices[i].node != b.devices[i].node ||
        a.devices[i].spec != b.devices[i].spec)
      return false;
  for (size_t i = 0; i < a.switches.size(); ++i)
    if (a.switches[i].kind != b.switches[i].kind ||
        a.switches[i].node != b.switches[i].node)
      return false;
  for (size_t i = 0; i < a.links.size(); ++i)
    if (a.links[i].src != b.links[i].src || a.links[i].dst != b.links[i].dst ||
        !(a.links[i].spec == b.links[i].spec))
      return false;
  return true;
}

Machine Machine::subMachine(int64_t first, int64_t count) const {
  std::string subName = name + "[" + std::to_string(first) + ":" +
                        std::to_string(first + count) + "]";
  if (cluster) {
    ClusterSpec spec = *cluster;
    int64_t perNode = spec.devicesPerNode;
    if (first % perNode == 0 && count % perNode == 0) {
      spec.nodes = count / perNode;
      return fromCluster(spec, subName);
    }
    if (first / perNode == (first + count - 1) / perNode) {
      spec.nicsPerNode =
          std::max<int64_t>(1, spec.nicsPerNode * count / perNode);
      spec.nodes = 1;
      spec.devicesPerNode = count;
      return fromCluster(spec, subName);
    }
  }
  Machine m;
  m.name = std::move(subName);
  m.specs = specs;
  int64_t firstNode = devices[first].node;
  for (int64_t d = first; d < first + count; ++d) {
    m.devices.push_back(devices[d]);
    m.devices.back().node -= firstNode;
  }
  m.switches = switches;
  for (Switch &sw : m.switches)
    if (sw.node >= 0)
      sw.node -= firstNode;
  // Vertex ids: kept devices first, then every switch.
  auto renumber = [&](int64_t vertex) -> int64_t {
    if (vertex >= numDevices())
      return vertex - numDevices() + count;
    return vertex >= first && vertex < first + count ? vertex - first : -1;
  };
  for (const Link &link : links) {
    int64_t src = renumber(link.src), dst = renumber(link.dst);
    if (src >= 0 && dst >= 0)
      m.links.push_back({src, dst, link.spec});
  }
  return m;
}

const std::string &Machine::getVertexName(int64_t vertex) const {
  if (vertex < numDevices())
    return devices[vertex].name;
  return switches[vertex - numDevices()].name;
}

int64_t Machine::findVertex(std::string_view vertexName) const {
  for (int64_t v = 0, e = numVertices(); v < e; ++v)
    if (getVertexName(v) == vertexName)
      return v;
  return -1;
}

const LinkSpec *Machine::clusterLink(int64_t src, int64_t dst) const {
  if (!cluster || src == dst)
    return nullptr;
  return src / cluster->devicesPerNode == dst / cluster->devicesPerNode
             ? &cluster->intra
             : &cluster->inter;
}

LinkSpec Machine::effectiveLink(int64_t src, int64_t dst, double bytes) const {
  if (src == dst)
    return {LinkKind::Other, getSpec(src).memoryBandwidth, 0};
  if (const LinkSpec *link = clusterLink(src, dst))
    return *link;
  if (std::optional<Route> r = route(src, dst, bytes))
    return r->effective;
  return {LinkKind::Other, 0, std::numeric_limits<double>::infinity()};
}

/// The link a path of `links` of `m` amounts to: summed latency, the
/// bottleneck's bandwidth and kind (the first of equal ones in `links`).
static LinkSpec pathLink(const Machine &m, const std::vector<int64_t> &links) {
  LinkSpec path;
  path.bandwidth = std::numeric_limits<double>::infinity();
  for (int64_t l : links) {
    const LinkSpec &leg = m.links[l].spec;
    path.latency += leg.latency;
    if (leg.bandwidth < path.bandwidth) {
      path.bandwidth = leg.bandwidth;
      path.kind = leg.kind;
      path.bySize = leg.bySize;
      path.collectiveBySize = leg.collectiveBySize;
      path.exchangeBusBandwidth = leg.exchangeBusBandwidth;
      path.sendBySize = leg.sendBySize;
    }
  }
  return path;
}

/// The route between two distinct devices of `m`, built by fromCluster from
/// `c`, read off fromCluster's link layout in O(1): per node, the device ->
/// node switch links (when it has several devices), then the device -> NIC
/// links (with several nodes); after every node, the NIC -> fabric links. A
/// search on a large machine asks for many routes, and a shortest-path
/// search over the whole graph per route made it quadratic in the devices.
/// The path is the one effectiveLink prices: the node switch inside a node,
/// the NICs and the fabric across nodes.
static Route clusterRoute(const Machine &m, const ClusterSpec &c, int64_t src,
                          int64_t dst) {
  bool multiNode = c.nodes > 1;
  int64_t switchLinks = c.devicesPerNode > 1 ? c.devicesPerNode : 0;
  int64_t linksPerNode = switchLinks + (multiNode ? c.devicesPerNode : 0);
  auto nodeOf = [&](int64_t d) { return d / c.devicesPerNode; };
  auto localOf = [&](int64_t d) { return d % c.devicesPerNode; };
  auto switchLink = [&](int64_t d) {
    return nodeOf(d) * linksPerNode + localOf(d);
  };
  auto nicLink = [&](int64_t d) {
    return nodeOf(d) * linksPerNode + switchLinks + localOf(d);
  };
  auto fabricLink = [&](int64_t d) {
    return c.nodes * linksPerNode + nodeOf(d) * c.nicsPerNode +
           localOf(d) * c.nicsPerNode / c.devicesPerNode;
  };
  Route r;
  if (nodeOf(src) == nodeOf(dst)) {
    r.links = {switchLink(src), switchLink(dst)};
  } else {
    r.links = {nicLink(src), fabricLink(src), fabricLink(dst), nicLink(dst)};
  }
  r.effective = pathLink(m, r.links);
  return r;
}

std::optional<Route> Machine::route(int64_t src, int64_t dst,
                                    double bytes) const {
  if (src == dst) {
    Route r;
    r.effective = effectiveLink(src, dst);
    return r;
  }
  if (cluster)
    return clusterRoute(*this, *cluster, src, dst);
  int64_t numV = numVertices();
  std::vector<std::vector<int64_t>> adjacent(numV);
  std::set<double> bandwidths;
  for (int64_t l = 0, e = links.size(); l < e; ++l) {
    adjacent[links[l].src].push_back(l);
    adjacent[links[l].dst].push_back(l);
    bandwidths.insert(links[l].spec.bandwidth);
  }

  // The time of a path is not a sum over its links (the bandwidth term is
  // its minimum), so run one latency-shortest-path search per bottleneck
  // candidate: with links below bandwidth b removed, the best path costs at
  // most latency + bytes / b. The minimum over all b is exact.
  // Devices are endpoints, not routers (a GPU does not forward another
  // pair's peer copies): a path passes through switches only, unless the
  // graph has no such path (a ring of devices wired to each other).
  std::optional<Route> best;
  double bestTime = std::numeric_limits<double>::infinity();
  using Entry = std::pair<std::pair<double, int64_t>, int64_t>;
  for (bool throughDevices : {false, true}) {
    if (best)
      break;
    for (double threshold : bandwidths) {
      // (latency, hops) per vertex; fewer hops breaks ties between equal
      // latencies so that routes stay short and deterministic.
      std::vector<std::pair<double, int64_t>> dist(
          numV, {std::numeric_limits<double>::infinity(), 0});
      std::vector<int64_t> via(numV, -1);
      std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue;
      dist[src] = {0, 0};
      queue.push({dist[src], src});
      while (!queue.empty()) {
        auto [d, v] = queue.top();
        queue.pop();
        if (d != dist[v])
          continue;
        if (v == dst)
          break;
        if (!throughDevices && v != src && v < numDevices())
          continue;
        for (int64_t l : adjacent[v]) {
          const Link &link = links[l];
          if (link.spec.bandwidth < threshold)
            continue;
          int64_t w = link.src == v ? link.dst : link.src;
          std::pair<double, int64_t> nd = {d.first + link.spec.latency,
                                           d.second + 1};
          if (nd < dist[w]) {
            dist[w] = nd;
            via[w] = l;
            queue.push({nd, w});
          }
        }
      }
      if (via[dst] < 0)
        continue;
      Route r;
      for (int64_t v = dst; v != src;) {
        const Link &link = links[via[v]];
        r.links.push_back(via[v]);
        v = link.src == v ? link.dst : link.src;
      }
      // Legs in the order found, dst to src, as ties of bandwidth always were.
      r.effective = pathLink(*this, r.links);
      std::reverse(r.links.begin(), r.links.end());
      double time = r.effective.transferTime(bytes);
      if (time < bestTime) {
        bestTime = time;
        best = std::move(r);
      }
    }
  }
  return best;
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

/// OK, or why `spec` is impossible.
static absl::Status validateDeviceSpec(const DeviceSpec &spec) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (!isNonNegative(spec.peakFlops[i]))
      return absl::InvalidArgumentError(std::string("peak ") + kDTypeNames[i] +
                                        " FLOP/s must be > 0");
  if (!spec.hasPeakFlops(DType::F32))
    return absl::InvalidArgumentError("peak f32 FLOP/s must be > 0");
  if (!isPositive(spec.memoryBandwidth))
    return absl::InvalidArgumentError("memory bandwidth must be > 0");
  if (spec.memoryBytes <= 0)
    return absl::InvalidArgumentError("memory capacity must be > 0");
  if (!isNonNegative(spec.launchOverhead))
    return absl::InvalidArgumentError("launch overhead must be >= 0");
  // 0 leaves an efficiency unset.
  for (auto [what, value] :
       {std::pair{"attention forward", spec.attentionForwardEfficiency},
        std::pair{"attention backward", spec.attentionBackwardEfficiency}})
    if (!(value >= 0 && value <= 1))
      return absl::InvalidArgumentError(std::string(what) +
                                        " efficiency must be in [0, 1]");
  if (!isNonNegative(spec.attentionHalfEfficiencyFlops))
    return absl::InvalidArgumentError(
        "attention half-efficiency FLOPs must be >= 0");
  return absl::OkStatus();
}

static absl::Status validateLinkSpec(const LinkSpec &spec) {
  if (!isPositive(spec.bandwidth))
    return absl::InvalidArgumentError("bandwidth must be > 0");
  if (!isNonNegative(spec.latency))
    return absl::InvalidArgumentError("latency must be >= 0");
  if (absl::Status e = spec.bySize.validate(); !e.ok())
    return annotate(e, "bandwidth by size");
  if (absl::Status e = spec.collectiveBySize.validate(); !e.ok())
    return annotate(e, "collective bandwidth by size");
  if (!isNonNegative(spec.exchangeBusBandwidth))
    return absl::InvalidArgumentError("exchange bus bandwidth must be >= 0");
  if (absl::Status e = spec.sendBySize.validate(); !e.ok())
    return annotate(e, "send bandwidth by size");
  return absl::OkStatus();
}

absl::Status ClusterSpec::validate() const {
  if (nodes < 1)
    return absl::InvalidArgumentError("cluster: nodes must be >= 1");
  if (devicesPerNode < 1)
    return absl::InvalidArgumentError("cluster: devices per node must be >= 1");
  std::optional<int64_t> count = checkedMul(nodes, devicesPerNode);
  if (!count || *count > kMaxDevices)
    return absl::InvalidArgumentError(
        "cluster: " + std::to_string(nodes) + " nodes x " +
        std::to_string(devicesPerNode) + " devices per node is more than " +
        "the " + std::to_string(kMaxDevices) + " devices ppc supports");
  if (nicsPerNode < 1 || nicsPerNode > devicesPerNode)
    return absl::InvalidArgumentError(
        "cluster: NICs per node must be between 1 and the devices per "
        "node (" +
        std::to_string(devicesPerNode) + ")");
  if (coresPerNode < 0)
    return absl::InvalidArgumentError(
        "cluster: cores per node must be >= 0 (0: every device computes "
        "at once)");
  if (absl::Status e = validateDeviceSpec(device); !e.ok())
    return annotate(e, "cluster: device '" + device.name + "'");
  if (absl::Status e = validateLinkSpec(intra); !e.ok())
    return annotate(e, "cluster: intra-node link");
  if (absl::Status e = validateLinkSpec(inter); !e.ok())
    return annotate(e, "cluster: inter-node link");
  return absl::OkStatus();
}

absl::Status Machine::validate() const {
  if (cluster)
    if (absl::Status e = cluster->validate(); !e.ok())
      return e;
  if (numDevices() > kMaxDevices)
    return absl::InvalidArgumentError(
        "the machine has " + std::to_string(numDevices()) +
        " devices, more than the " + std::to_string(kMaxDevices) +
        " ppc supports");
  if (devices.empty())
    return absl::InvalidArgumentError("the machine has no devices");
  for (size_t i = 0; i < specs.size(); ++i)
    if (absl::Status e = validateDeviceSpec(specs[i]); !e.ok())
      return annotate(e, "device spec " + std::to_string(i) + " '" +
                             specs[i].name + "'");

  std::unordered_map<std::string_view, int64_t> names;
  for (int64_t v = 0, e = numVertices(); v < e; ++v) {
    const std::string &vertexName = getVertexName(v);
    std::string what = v < numDevices()
                           ? "device " + std::to_string(v)
                           : "switch " + std::to_string(v - numDevices());
    if (vertexName.empty())
      return absl::InvalidArgumentError(what + " has no name");
    if (!names.emplace(vertexName, v).second)
      return absl::InvalidArgumentError(what + ": name '" + vertexName +
                                        "' is used twice");
  }
  for (int64_t i = 0, e = numDevices(); i < e; ++i) {
    const Device &d = devices[i];
    if (d.node < 0)
      return absl::InvalidArgumentError("device '" + d.name +
                                        "': node must be >= 0");
    if (d.spec < 0 || d.spec >= static_cast<int64_t>(specs.size()))
      return absl::InvalidArgumentError(
          "device '" + d.name + "': spec " + std::to_string(d.spec) +
          " out of range (" + std::to_string(specs.size()) + " specs)");
  }
  for (const Switch &s : switches)
    if (s.node < -1)
      return absl::InvalidArgumentError("switch '" + s.name +
                                        "': node must be >= 0, or -1 for none");

  std::vector<std::vector<int64_t>> adjacent(numVertices());
  for (size_t l = 0; l < links.size(); ++l) {
    const Link &link = links[l];
    std::string what = "link " + std::to_string(l);
    for (int64_t end : {link.src, link.dst})
      if (end < 0 || end >= numVertices())
        return absl::InvalidArgumentError(
            what + ": endpoint " + std::to_string(end) + " out of range (" +
            std::to_string(numVertices()) + " devices and switches)");
    if (link.src == link.dst)
      return absl::InvalidArgumentError(
          what + ": connects '" + getVertexName(link.src) + "' to itself");
    if (absl::Status e = validateLinkSpec(link.spec); !e.ok())
      return annotate(e, what + " ('" + getVertexName(link.src) + "' -> '" +
                             getVertexName(link.dst) + "')");
    adjacent[link.src].push_back(link.dst);
    adjacent[link.dst].push_back(link.src);
  }

  // Every device must reach every other one, or some transfers are
  // impossible.
  std::vector<bool> seen(numVertices(), false);
  std::vector<int64_t> stack = {0};
  seen[0] = true;
  while (!stack.empty()) {
    int64_t v = stack.back();
    stack.pop_back();
    for (int64_t w : adjacent[v])
      if (!seen[w]) {
        seen[w] = true;
        stack.push_back(w);
      }
  }
  for (int64_t d = 1, e = numDevices(); d < e; ++d)
    if (!seen[d])
      return absl::InvalidArgumentError(
          "device '" + devices[d].name + "' cannot reach device '" +
          devices[0].name + "': the link graph is disconnected");
  return absl::OkStatus();
}

} // namespace ppc
