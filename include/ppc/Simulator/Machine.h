//===- Machine.h - MLIR-free machine model ----------------------*- C++ -*-===//
//
// The machine a model is parallelized for: devices (peak FLOP/s per dtype,
// memory bandwidth and capacity, kernel launch overhead) and the links
// between them (bandwidth, latency). Two forms:
//
//  - explicit: a graph whose vertices are the devices plus non-device
//    vertices (NICs, switches, host bridges), so irregular machines such as
//    FlexFlow's "enhanced" machine model files can be described;
//  - hierarchical (ClusterSpec): nodes x devices per node, one intra-node and
//    one inter-node link, as in FlexFlow's "simple" model. It expands into
//    the explicit graph, and a Machine built from it keeps the compact form
//    so that the common intra/inter question is answered in O(1).
//
// This header is part of the MLIR-free simulator library: no MLIR here.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SIMULATOR_MACHINE_H
#define PPC_SIMULATOR_MACHINE_H

#include "ppc/Support/MachineView.h"
#include "ppc/Support/Status.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ppc {

//===----------------------------------------------------------------------===//
// Element types and link kinds
//===----------------------------------------------------------------------===//

/// Element types a device may have a distinct peak throughput for.
enum class DType : uint8_t { F64, F32, TF32, BF16, F16, F8, I8 };
inline constexpr int kNumDTypes = 7;

/// "f64", "f32", "tf32", "bf16", "f16", "f8", "i8".
const char *stringifyDType(DType type);
std::optional<DType> symbolizeDType(std::string_view name);

/// What a link is made of. The kind does not change the cost model (bandwidth
/// and latency do); it names links in reports and lets collectives pick an
/// algorithm (NVLink rings inside a node, trees across the network).
enum class LinkKind : uint8_t {
  SharedMemory, ///< processes on one host copying through memory.
  PCIe,
  NVLink,
  InfinityFabric, ///< AMD xGMI.
  UPI,            ///< CPU socket interconnect.
  InfiniBand,
  Ethernet,
  Other,
};

/// "shared_memory", "pcie", "nvlink", "infinity_fabric", "upi",
/// "infiniband", "ethernet", "other".
const char *stringifyLinkKind(LinkKind kind);
std::optional<LinkKind> symbolizeLinkKind(std::string_view name);

//===----------------------------------------------------------------------===//
// Specs
//===----------------------------------------------------------------------===//

/// One kind of device (a GPU model, a CPU process).
struct DeviceSpec {
  /// Model name, e.g. "H100-SXM5-80GB".
  std::string name;
  /// Peak FLOP/s per element type; 0 where the device has no rate of its own
  /// for that type (getPeakFlops falls back, see there).
  std::array<double, kNumDTypes> peakFlops{};
  /// Device memory bandwidth, bytes/s.
  double memoryBandwidth = 0;
  /// Device memory capacity, bytes.
  int64_t memoryBytes = 0;
  /// Fixed cost of starting one kernel (or one op on a CPU), seconds.
  double launchOverhead = 0;
  /// FLOPs at which a kernel reaches half the peak rate (the small-kernel
  /// efficiency curve); 0: the cost model's default, tuned for GPUs. A CPU
  /// core reaches it with far smaller GEMMs.
  double halfEfficiencyFlops = 0;
  /// GPUs: streaming multiprocessors (compute units) that a matrix
  /// multiplication's output tiles are spread over, in waves; 0: no tile
  /// and wave model (the efficiency curve above instead).
  int64_t computeUnits = 0;
  /// The fraction of the peak rate large matrix multiplications reach
  /// (cuBLAS on big GEMMs); 0: all of it.
  double matmulEfficiency = 0;
  /// The fraction of the memory bandwidth streaming kernels reach; 0: all
  /// of it.
  double bandwidthEfficiency = 0;
  /// The fraction of the peak rate of the op's dtype that a fused attention
  /// kernel (FlashAttention-style, KernelKind::FusedAttention) reaches
  /// forward and backward, measured at the sizes that matter; 0: not
  /// measured (the cost model times it as any other contraction).
  double attentionForwardEfficiency = 0;
  double attentionBackwardEfficiency = 0;
  /// The FLOPs of one bf16 fused attention call filling the device at which
  /// it reaches half of the rates above: a fixed share (its causal tail and
  /// last wave) that every call pays at the bf16 rate, in proportion to the
  /// share of computeUnits its output tiles fill; 0: every size runs at
  /// those rates.
  double attentionHalfEfficiencyFlops = 0;

  /// Peak FLOP/s for `type`. A type the device does not list runs at the
  /// rate of the nearest wider type it lists (bf16 -> f32, tf32 -> f32,
  /// f8 -> f16 -> f32...): that is what the hardware does when it has no
  /// faster unit for it.
  double getPeakFlops(DType type) const;
  void setPeakFlops(DType type, double flops) {
    peakFlops[static_cast<int>(type)] = flops;
  }
  /// The bandwidth streaming kernels reach: memoryBandwidth times
  /// bandwidthEfficiency (when set).
  double streamingBandwidth() const {
    return memoryBandwidth *
           (bandwidthEfficiency > 0 ? bandwidthEfficiency : 1.0);
  }
  bool hasPeakFlops(DType type) const {
    return peakFlops[static_cast<int>(type)] > 0;
  }

  bool operator==(const DeviceSpec &other) const;
  bool operator!=(const DeviceSpec &other) const { return !(*this == other); }
};

/// A measured bandwidth as a function of message size: (bytes, bytes/s)
/// points, sizes strictly increasing, each the end-to-end rate a message of
/// that size achieved (latency included), as OSU's and nccl-tests' tables
/// give it. Between two points the time is linear in bytes (a latency and
/// a rate fitted to the two: exact at both, where interpolating the rate
/// would price a message between a tiny and a large point below the tiny
/// one's latency); a message smaller than the first point takes the first
/// point's time (the latency floor), one larger than the last moves at the
/// last point's bandwidth.
struct BandwidthCurve {
  std::vector<std::pair<double, double>> points;

  bool empty() const { return points.empty(); }
  /// Bytes/s at `bytes`: bytes / time(bytes).
  double bandwidthAt(double bytes) const;
  /// Seconds for `bytes`, at least the first point's time.
  double time(double bytes) const;
  /// OK, or what is wrong (no points is fine).
  absl::Status validate() const;
  bool operator==(const BandwidthCurve &other) const {
    return points == other.points;
  }
};

/// One link. Links are full duplex: `bandwidth` is per direction.
struct LinkSpec {
  LinkKind kind = LinkKind::Other;
  /// Bytes/s per direction.
  double bandwidth = 0;
  /// Seconds from the first byte sent to the first byte received.
  double latency = 0;
  /// Point-to-point messages measured by size; when set, a transfer takes
  /// its time instead of latency + bytes / bandwidth.
  BandwidthCurve bySize;
  /// All-reduce bus bandwidth by message size (nccl-tests' busbw: 2(k-1)/k
  /// of the buffer over the time) of a group whose bottleneck is this link:
  /// a node's devices for `intra`, a group spanning nodes for `inter`.
  /// When set, such an all-reduce takes 2(k-1)/k * bytes / busbw(bytes)
  /// instead of the ring and hierarchical alpha-beta costs.
  BandwidthCurve collectiveBySize;
  /// The highest bus bandwidth (nccl-tests' busbw: (k-1)/k of the whole
  /// buffer over the time) that an all-gather, reduce-scatter or all-to-all
  /// reaches over this link, bytes/s; 0: no ceiling. Such a collective
  /// moves at the lower of this and collectiveBySize's rate: that curve,
  /// measured for all-reduce, includes NVLink SHARP's in-switch reduction
  /// on DGX H100s (480 GB/s), which the others do not get (about 370).
  double exchangeBusBandwidth = 0;
  /// The bus bandwidth of an all-gather, reduce-scatter or all-to-all of
  /// `bytes` in total over this link: collectiveBySize's (which must be
  /// set), at most exchangeBusBandwidth.
  double exchangeBandwidthAt(double bytes) const {
    double rate = collectiveBySize.bandwidthAt(bytes);
    return exchangeBusBandwidth > 0 ? std::min(rate, exchangeBusBandwidth)
                                    : rate;
  }
  /// The sender's part of a point-to-point message by size, on a link
  /// between processes that move their own messages (`shared_memory`: CPU
  /// ranks): the time the sending rank spends packing the message and
  /// handing it over before it computes again, a part of the message's
  /// whole time (`bySize`). Empty: the sender is not held.
  BandwidthCurve sendBySize;

  /// Time to move `bytes` over this link alone: latency + bytes / bandwidth,
  /// or the measured curve's time.
  double transferTime(double bytes) const {
    if (!bySize.empty())
      return bySize.time(bytes);
    return latency + bytes / bandwidth;
  }
  /// The sender's part of transferTime(bytes) (sendBySize; never more than
  /// the whole), 0 without a measured curve.
  double sendTime(double bytes) const {
    if (sendBySize.empty())
      return 0;
    return std::min(sendBySize.time(bytes), transferTime(bytes));
  }
  bool operator==(const LinkSpec &other) const {
    return kind == other.kind && bandwidth == other.bandwidth &&
           latency == other.latency && bySize == other.bySize &&
           collectiveBySize == other.collectiveBySize &&
           exchangeBusBandwidth == other.exchangeBusBandwidth &&
           sendBySize == other.sendBySize;
  }
  bool operator!=(const LinkSpec &other) const { return !(*this == other); }
};

/// The compact hierarchical form: `nodes` identical nodes of
/// `devicesPerNode` identical devices. `intra` connects two devices of one
/// node, `inter` two devices of different nodes; both are point-to-point
/// figures per device pair and direction. A node has `nicsPerNode` network
/// adapters shared by its devices in contiguous blocks (a DGX has one per
/// GPU; FlexFlow's P100 nodes one per node), which the explicit graph keeps
/// so that a simulator sees devices contend for a shared NIC.
struct ClusterSpec {
  int64_t nodes = 1;
  int64_t devicesPerNode = 1;
  int64_t nicsPerNode = 1;
  /// How many of a node's devices can compute at once: CPU processes that
  /// share a host's cores (more ranks than cores) take turns on them; 0:
  /// all of them (each device its own, as GPUs).
  int64_t coresPerNode = 0;
  DeviceSpec device;
  LinkSpec intra;
  LinkSpec inter;

  /// nodes * devicesPerNode; overflows for specs that validate() rejects.
  int64_t numDevices() const { return nodes * devicesPerNode; }
  /// OK when the spec describes a machine ppc supports, else the first
  /// problem (InvalidArgument): counts below 1, more than kMaxDevices devices
  /// (checked without overflow), NICs out of range, an impossible device or
  /// link. Check this before Machine::fromCluster, which builds every device.
  absl::Status validate() const;
  bool operator==(const ClusterSpec &other) const {
    return nodes == other.nodes && devicesPerNode == other.devicesPerNode &&
           nicsPerNode == other.nicsPerNode &&
           coresPerNode == other.coresPerNode && device == other.device &&
           intra == other.intra && inter == other.inter;
  }
};

//===----------------------------------------------------------------------===//
// Machine
//===----------------------------------------------------------------------===//

/// A device of the machine. Its vertex id in the link graph is its index.
struct Device {
  std::string name;
  /// Host (node) the device sits in; devices of one node share a host.
  int64_t node = 0;
  /// Index into Machine::specs.
  int64_t spec = 0;
};

/// A non-device vertex of the link graph: a NIC, a switch, a host bridge.
/// Its vertex id is numDevices() + its index.
struct Switch {
  std::string name;
  /// Free-form: "nic", "nvswitch", "pcie-switch", "ib-switch"...
  std::string kind;
  /// Node the vertex belongs to, or -1 for the network between nodes.
  int64_t node = -1;
};

/// A full-duplex link between two vertices (devices or switches).
struct Link {
  int64_t src = 0;
  int64_t dst = 0;
  LinkSpec spec;
};

/// The path a transfer between two devices takes, and what it amounts to.
struct Route {
  /// Indices into Machine::links, from source to destination (empty when
  /// source and destination are the same device).
  std::vector<int64_t> links;
  /// The path as one link: the bottleneck bandwidth, the summed latency, and
  /// the kind of the bottleneck link.
  LinkSpec effective;
};

class Machine {
public:
  std::string name;
  std::vector<DeviceSpec> specs;
  std::vector<Device> devices;
  std::vector<Switch> switches;
  std::vector<Link> links;
  /// Set when the machine was built from (and is exactly) the compact form.
  std::optional<ClusterSpec> cluster;

  /// Builds the explicit graph of `spec` and keeps `spec` as the compact form.
  /// Per node: devices "n<i>.d<j>", a switch "n<i>.switch" that every device
  /// reaches over `intra` (each leg carries half the latency, so a device
  /// pair sees exactly `intra`); with more than one node, NICs "n<i>.nic<k>"
  /// and one "fabric" switch, device -> NIC -> fabric -> NIC -> device
  /// adding up to exactly `inter`. `spec` must have at most kMaxDevices
  /// devices (ClusterSpec::validate()).
  static Machine fromCluster(const ClusterSpec &spec, std::string name = "");

  /// Devices [first, first + count) as a machine of their own (a pipeline
  /// stage's submesh), renumbered from 0: the compact form when they are
  /// whole nodes or part of one node, else the explicit graph with every
  /// switch and the links among what is kept. first + count must not exceed
  /// numDevices().
  Machine subMachine(int64_t first, int64_t count) const;

  int64_t numDevices() const { return static_cast<int64_t>(devices.size()); }
  int64_t numSwitches() const { return static_cast<int64_t>(switches.size()); }
  int64_t numVertices() const { return numDevices() + numSwitches(); }
  /// Number of nodes: one more than the largest node index.
  int64_t numNodes() const;
  int64_t getNode(int64_t device) const { return devices[device].node; }
  const DeviceSpec &getSpec(int64_t device) const {
    return specs[devices[device].spec];
  }
  /// Name of a graph vertex (device or switch).
  const std::string &getVertexName(int64_t vertex) const;
  /// Vertex id of a device or switch name, or -1.
  int64_t findVertex(std::string_view name) const;

  /// For the compact form, the link between two distinct devices (`intra`
  /// within a node, `inter` across) in place, not a copy (a link's curves
  /// are vectors); null for an explicit graph or src == dst.
  const LinkSpec *clusterLink(int64_t src, int64_t dst) const;
  /// The link a transfer of `bytes` from `src` to `dst` effectively sees.
  /// For the compact form: `intra` within a node, `inter` across nodes. For
  /// an explicit graph: route(src, dst, bytes).effective. For src == dst: a
  /// copy in device memory (kind other, the memory bandwidth, no latency).
  LinkSpec effectiveLink(int64_t src, int64_t dst,
                         double bytes = kDefaultRouteBytes) const;

  /// The fastest path from device `src` to device `dst` for a message of
  /// `bytes` bytes over the explicit graph, where a path costs its summed
  /// latency plus bytes over its bottleneck bandwidth (cut-through routing).
  /// nullopt when no path exists (validate() rejects such machines).
  std::optional<Route> route(int64_t src, int64_t dst,
                             double bytes = kDefaultRouteBytes) const;

  /// OK when the machine is well formed, else what is wrong with it (the
  /// first problem found, InvalidArgument): no devices or more than
  /// kMaxDevices, non-positive FLOP/s, bandwidth or memory, duplicate or empty
  /// names, link endpoints out of range, devices that cannot reach each
  /// other...
  absl::Status validate() const;

  /// Message size routes are chosen for by default: 1 MiB, large enough that
  /// bandwidth matters, as for gradient and activation transfers.
  static constexpr double kDefaultRouteBytes = 1 << 20;
};

/// Whether `a` and `b` are one machine but for the names of their vertices
/// and their own: the same devices, nodes, switches and links (sub-machines
/// of a cluster at node boundaries of one size are).
bool sameButNames(const Machine &a, const Machine &b);

//===----------------------------------------------------------------------===//
// Presets
//===----------------------------------------------------------------------===//

struct PresetInfo {
  /// Name or pattern, e.g. "dgx-h100xN".
  std::string name;
  std::string description;
};

/// The machine named `name` ("p100x16", "dgx-h100x4", "cpux2"...), or
/// nullopt when no preset has that name.
std::optional<Machine> lookupPreset(std::string_view name);
/// Every preset (patterns with N stand for a count), for help texts.
std::vector<PresetInfo> listPresets();
/// The preset names as one line, "p100x16, k80x64, ...", for error messages.
std::string listPresetNames();
/// The presets as `machine=list` and `ppc-opt --list-machines` print them:
/// a header line, then one line per preset with its description.
std::string formatPresetList();

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

/// Parses a machine from the JSON format of docs/machine-format.md; an error
/// is InvalidArgument "<fileName>: <json path>: <problem>". The machine is
/// validated as well.
absl::StatusOr<Machine> parseMachineJson(std::string_view text,
                                         std::string_view fileName);
/// Reads and parses a JSON machine file (NotFound when it cannot be opened).
absl::StatusOr<Machine> readMachineJsonFile(const std::string &path);
/// Writes `machine` as JSON: the compact form when it has one (unless
/// `explicitGraph`), else the explicit graph.
std::string writeMachineJson(const Machine &machine,
                             bool explicitGraph = false);

/// A preset name or a path to a JSON file. An error says why and, for an
/// unknown name, which presets exist.
absl::StatusOr<Machine> loadMachine(const std::string &presetOrPath);

} // namespace ppc

#endif // PPC_SIMULATOR_MACHINE_H
