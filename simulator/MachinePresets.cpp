//===- MachinePresets.cpp - built-in machine descriptions -----------------===//
//
// Figures are vendor datasheet peaks (dense, no sparsity); latencies are the
// usual order of a small-message transfer, which no datasheet gives.
// Capacities are the GiB that the devices report (an "80 GB" A100 shows
// 81920 MiB). Only the H100 has measured fused attention efficiencies;
// every other device leaves them at 0 (not measured: the cost model times
// attention as GEMMs there).
//
//===----------------------------------------------------------------------===//

#include "ppc/Simulator/Machine.h"

#include <algorithm>
#include <charconv>
#include <functional>

namespace ppc {
namespace {

constexpr double kTera = 1e12;
constexpr double kGiga = 1e9;
constexpr int64_t kGiB = int64_t(1) << 30;

/// Gb/s of a network datasheet to bytes/s.
constexpr double gbit(double gbps) { return gbps * kGiga / 8; }

// Written as literals, not n * 1e-6, so that they print back exactly.
// The gap a kernel adds on the GPU's timeline when the host issues work ahead
// of it (the host-side cudaLaunchKernel cost, ~5 us, overlaps execution):
// scheduling and ramp-up of a dependent kernel, 2-4 us on recent GPUs.
constexpr double kGpuLaunch = 3e-6;

DeviceSpec makeDevice(std::string name,
                      std::initializer_list<std::pair<DType, double>> flops,
                      double memoryBandwidth, int64_t memoryBytes,
                      double launchOverhead) {
  DeviceSpec spec;
  spec.name = std::move(name);
  for (auto [type, f] : flops)
    spec.setPeakFlops(type, f);
  spec.memoryBandwidth = memoryBandwidth;
  spec.memoryBytes = memoryBytes;
  spec.launchOverhead = launchOverhead;
  return spec;
}

/// Tesla P100 SXM2 datasheet: 5.3 TFLOP/s f64, 10.6 f32, 21.2 f16;
/// 732 GB/s CoWoS HBM2, 16 GB.
DeviceSpec p100() {
  return makeDevice("P100-SXM2-16GB",
                    {{DType::F64, 5.3 * kTera},
                     {DType::F32, 10.6 * kTera},
                     {DType::F16, 21.2 * kTera}},
                    732 * kGiga, 16 * kGiB, kGpuLaunch);
}

/// Tesla K80 datasheet, per GK210 die (a board has two, and CUDA sees two
/// devices): 8.73 TFLOP/s f32 and 2.91 f64 at boost clock per board, i.e.
/// 4.37 and 1.46 per die; 480 GB/s and 24 GB GDDR5 per board, i.e. 240 GB/s
/// and 12 GB per die. Kepler has no faster f16 path.
DeviceSpec k80() {
  return makeDevice("K80-GK210",
                    {{DType::F64, 1.46 * kTera}, {DType::F32, 4.37 * kTera}},
                    240 * kGiga, 12 * kGiB, kGpuLaunch);
}

/// Tesla V100 SXM2 16GB datasheet: 7.8 TFLOP/s f64, 15.7 f32, 125 f16
/// tensor core; 900 GB/s HBM2, 16 GB; 80 SMs (NVIDIA Tesla V100 GPU
/// Architecture whitepaper). cuBLAS mixed-precision GEMMs reach 83
/// TFLOP/s, 66.4% of peak (Markidis et al., "NVIDIA Tensor Core
/// Programmability, Performance & Precision", IPDPSW 2018, CUDA 9).
/// Streaming reaches 790 of the 900 GB/s, 88% (a device-to-device
/// cudaMemcpy on a V100 16GB, whose HBM2 is the SXM2 card's 900 GB/s:
/// paranumal, "Rough-n-Ready Roofline: NVIDIA V100 edition", 2018-02-08).
/// No fused attention efficiencies (0: not measured).
DeviceSpec v100() {
  DeviceSpec spec = makeDevice("V100-SXM2-16GB",
                               {{DType::F64, 7.8 * kTera},
                                {DType::F32, 15.7 * kTera},
                                {DType::F16, 125 * kTera}},
                               900 * kGiga, 16 * kGiB, kGpuLaunch);
  spec.computeUnits = 80;
  spec.matmulEfficiency = 83 / 125.0;
  spec.bandwidthEfficiency = 790 / 900.0;
  return spec;
}

/// A100 SXM4 80GB datasheet: 9.7 TFLOP/s f64, 19.5 f32, 156 tf32 tensor
/// core, 312 bf16/f16 tensor core, 624 TOPS int8 (dense); HBM2e 2039 GB/s.
/// 108 SMs (NVIDIA A100 Tensor Core GPU Architecture whitepaper). Large
/// bf16 GEMMs reach 271.2 TFLOP/s, 86.9% of peak (S. Bekman, "Machine
/// Learning Engineering", Maximum Achievable Matmul FLOPS table, torch
/// 2.6 / CUDA 12.6). Streaming kernels reach 1.80 of the 2.04 TB/s, 88%
/// (NVIDIA Developer Forums, "Trouble to Reach Peak Bandwidth of A100",
/// measured and confirmed by Nsight Compute on an A100 80GB SXM; the
/// thread cites about 90% as the best any kernel reaches). No fused
/// attention efficiencies (0: not measured).
DeviceSpec a100() {
  DeviceSpec spec = makeDevice("A100-SXM4-80GB",
                               {{DType::F64, 9.7 * kTera},
                                {DType::F32, 19.5 * kTera},
                                {DType::TF32, 156 * kTera},
                                {DType::BF16, 312 * kTera},
                                {DType::F16, 312 * kTera},
                                {DType::I8, 624 * kTera}},
                               2039 * kGiga, 80 * kGiB, kGpuLaunch);
  spec.computeUnits = 108;
  spec.matmulEfficiency = 0.869;
  spec.bandwidthEfficiency = 0.88;
  return spec;
}

/// H100 SXM5 80GB datasheet: 34 TFLOP/s f64, 67 f32, 494.5 tf32, 989.5
/// bf16/f16, 1979 fp8 and 1979 TOPS int8 tensor core (dense, half the
/// "with sparsity" figures); HBM3 3.35 TB/s. 132 SMs (NVIDIA H100 Tensor
/// Core GPU Architecture whitepaper). The efficiencies are measured on an
/// H100 80GB HBM3 (bench/gpu_microbench.py, PyTorch 2.11 / CUDA 13.0 /
/// cuDNN 9.19, 2026-11-26; bench/results/gpu-h100.json, docs/simulator.md):
/// bf16 GEMMs fitted over 463 shapes by the tile, wave and split-K model at
/// 76% of peak; elementwise kernels at 3.0 TB/s of 3.35 (90%); cuDNN's
/// causal fused attention, head dim 128, at 74% of peak forward and 40.5%
/// backward in the limit, half of that at 56 GFLOPs per call (390 TFLOP/s
/// forward for 16 heads x 4096 tokens, 485 for 32).
DeviceSpec h100() {
  DeviceSpec spec = makeDevice("H100-SXM5-80GB",
                               {{DType::F64, 34 * kTera},
                                {DType::F32, 67 * kTera},
                                {DType::TF32, 494.5 * kTera},
                                {DType::BF16, 989.5 * kTera},
                                {DType::F16, 989.5 * kTera},
                                {DType::F8, 1979 * kTera},
                                {DType::I8, 1979 * kTera}},
                               3350 * kGiga, 80 * kGiB, kGpuLaunch);
  spec.computeUnits = 132;
  spec.matmulEfficiency = 0.76;
  spec.bandwidthEfficiency = 0.9;
  spec.attentionForwardEfficiency = 0.74;
  spec.attentionBackwardEfficiency = 0.405;
  spec.attentionHalfEfficiencyFlops = 56e9;
  return spec;
}

// NVLink 1.0: 20 GB/s per direction per link (P100 has four links).
const LinkSpec kNVLink1 = {LinkKind::NVLink, 20 * kGiga, 1e-6};
// NVLink 2: six links of 25 GB/s per direction per V100 (its datasheet's
// 300 GB/s is both directions); a pair of V100s has one or two of them.
const LinkSpec kNVLink2 = {LinkKind::NVLink, 25 * kGiga, 1e-6};
const LinkSpec kNVLink2Double = {LinkKind::NVLink, 50 * kGiga, 1e-6};
// NVLink 3 through NVSwitch: 600 GB/s total per A100 = 300 GB/s each way.
const LinkSpec kNVLink3 = {LinkKind::NVLink, 300 * kGiga, 1e-6};
// NVLink 4 through NVSwitch: 900 GB/s total per H100 = 450 GB/s each way.
const LinkSpec kNVLink4 = {LinkKind::NVLink, 450 * kGiga, 1e-6};
// PCIe 3.0 x16: 8 GT/s x 16 lanes x 128/130 = 15.75 GB/s each way.
const LinkSpec kPCIe3 = {LinkKind::PCIe, 15.75 * kGiga, 2e-6};
// InfiniBand FDR 56 Gb/s, EDR 100, HDR 200, NDR 400 (per port).
const LinkSpec kFDR = {LinkKind::InfiniBand, gbit(56), 1.3e-6};
const LinkSpec kEDR = {LinkKind::InfiniBand, gbit(100), 1e-6};
const LinkSpec kHDR = {LinkKind::InfiniBand, gbit(200), 1e-6};
const LinkSpec kNDR = {LinkKind::InfiniBand, gbit(400), 1e-6};
// AWS p3.16xlarge: "up to 25 Gigabit" Ethernet (ENA), one per instance;
// TCP latency is tens of microseconds.
const LinkSpec kEthernet25 = {LinkKind::Ethernet, gbit(25), 30e-6};

// NCCL all-reduce bus bandwidth by message size, from published
// nccl-tests (all_reduce_perf) tables (docs/simulator.md, "Collectives").
// A table's smallest size is given by its time (busbw rounds to 0.00
// there): 2 (k - 1) / k * bytes / seconds over its k GPUs.
constexpr double kKiB = 1024, kMiB = kKiB * 1024, kGiBf = kMiB * 1024;

double busBandwidth(double bytes, double seconds, int64_t k) {
  return 2.0 * (k - 1) / k * bytes / seconds;
}

/// `rails` > 1: the table is of whole nodes, each GPU on its own NIC; the
/// inter-node curve is per rail (docs/machine-format.md), so sizes and
/// rates are divided by the rails.
BandwidthCurve busCurve(std::initializer_list<std::pair<double, double>> gbps,
                        double rails = 1) {
  BandwidthCurve curve;
  for (auto [bytes, rate] : gbps)
    curve.points.push_back({bytes / rails, rate * kGiga / rails});
  return curve;
}

/// One DGX A100 (8 A100-SXM4-80GB on NVSwitch): Azure ND A100 v4, NCCL
/// 2.18.5, in-place busbw (Azure/AI-benchmarking-guide,
/// Azure_Results/ND_A100_v4_results.md); 1 KiB in 16.96 us on NDm A100 v4,
/// NCCL 2.17.1 (microsoft/mscclpp, docs/performance-ndmv4.md).
BandwidthCurve dgxA100AllReduce() {
  return busCurve({{kKiB, busBandwidth(kKiB, 16.96e-6, 8) / kGiga},
                   {64 * kKiB, 2.70},
                   {kMiB, 36.22},
                   {8 * kMiB, 89.99},
                   {64 * kMiB, 166.63},
                   {256 * kMiB, 213.87},
                   {kGiBf, 228.10},
                   {8 * kGiBf, 231.58}});
}

/// Two DGX-class A100 nodes, 8 HDR NICs each (16 GPUs): NDm A100 v4, NCCL
/// 2.17.1 (microsoft/mscclpp, docs/performance-ndmv4.md): 1 KiB in 35.85
/// us, 183.82 GB/s at 1 GiB, 188.18 at 4 GiB. NVIDIA quotes 192 GB/s
/// (NVIDIA/nccl#812).
BandwidthCurve dgxA100InterAllReduce() {
  return busCurve({{kKiB, busBandwidth(kKiB, 35.85e-6, 16) / kGiga},
                   {kGiBf, 183.82},
                   {4 * kGiBf, 188.18}},
                  8);
}

/// One DGX H100 (8 H100-SXM5-80GB on NVSwitch, NCCL's default algorithm,
/// NVLS for large messages): NVIDIA's sample output in
/// NVIDIA/dgxc-benchmarking, nccl/README.md; 8 B in 13.67 us.
BandwidthCurve dgxH100AllReduce() {
  return busCurve({{8, busBandwidth(8, 13.67e-6, 8) / kGiga},
                   {64 * kKiB, 5.87},
                   {kMiB, 67.04},
                   {8 * kMiB, 176.77},
                   {64 * kMiB, 361.67},
                   {256 * kMiB, 422.25},
                   {kGiBf, 466.33},
                   {8 * kGiBf, 480.16}});
}

/// Four HGX H100 nodes, 8 NDR NICs each (32 GPUs), NCCL 2.24.3: Voltage
/// Park's run (ZiyanIshani/vpbenchmarking, results/nccl/nccl_multinode/
/// nccl_allreduce_20260224_225706.txt); 8 B in 38.37 us. NVIDIA staff
/// quote 46-49 GB/s per NDR NIC (NVIDIA/nccl-tests#290, #267), i.e. up
/// to ~390 GB/s; this table peaks at 331.
BandwidthCurve dgxH100InterAllReduce() {
  return busCurve({{8, busBandwidth(8, 38.37e-6, 32) / kGiga},
                   {64 * kKiB, 2.11},
                   {kMiB, 21.97},
                   {8 * kMiB, 70.61},
                   {64 * kMiB, 224.38},
                   {256 * kMiB, 239.78},
                   {kGiBf, 324.48},
                   {8 * kGiBf, 330.93}},
                  8);
}

Machine cluster(std::string name, int64_t nodes, int64_t perNode, int64_t nics,
                DeviceSpec device, LinkSpec intra, LinkSpec inter) {
  ClusterSpec spec;
  spec.nodes = nodes;
  spec.devicesPerNode = perNode;
  spec.nicsPerNode = nics;
  spec.device = std::move(device);
  spec.intra = intra;
  spec.inter = inter;
  return Machine::fromCluster(spec, std::move(name));
}

/// FlexFlow's P100 cluster: 4 nodes x 4 P100, NVLink in a node, one
/// 100 Gb/s EDR InfiniBand adapter per node.
Machine p100x16() {
  return cluster("p100x16", 4, 4, 1, p100(), kNVLink1, kEDR);
}

/// FlexFlow's K80 cluster: 16 nodes x 4 K80 dies, PCIe in a node, one
/// 56 Gb/s FDR InfiniBand adapter per node.
Machine k80x64() { return cluster("k80x64", 16, 4, 1, k80(), kPCIe3, kFDR); }

/// AWS p3.16xlarge (Alpa's cluster), DGX-1's board: 8 V100-SXM2-16GB in
/// NVLink 2's hybrid cube mesh, each GPU's six 25 GB/s links (per
/// direction) going to four others, two of them doubled; the other three
/// are reached through a GPU in between (NCCL's rings forward so; CUDA's
/// peer copies would cross PCIe and the host). The pairs are DGX-1's
/// `nvidia-smi topo -m` (NV1: one link, NV2: two), as printed in
/// Microway's "nvidia-smi: Control Your GPUs". Every GPU reaches its
/// instance's host over PCIe 3.0 x16, the host the network over one 25
/// Gb/s Ethernet. No published nccl-tests table: collectives follow the
/// link rates.
Machine p3x16large(int64_t nodes, std::string name) {
  constexpr int kSingle[8][2] = {{0, 1}, {0, 2}, {1, 3}, {2, 6},
                                 {3, 7}, {4, 5}, {4, 6}, {5, 7}};
  constexpr int kDouble[8][2] = {{0, 3}, {0, 4}, {1, 2}, {1, 5},
                                 {2, 3}, {4, 7}, {5, 6}, {6, 7}};
  Machine m;
  m.name = std::move(name);
  m.specs = {v100()};
  const int64_t numDevices = nodes * 8;
  for (int64_t n = 0; n < nodes; ++n)
    for (int64_t d = 0; d < 8; ++d)
      m.devices.push_back(
          {"n" + std::to_string(n) + ".d" + std::to_string(d), n, 0});
  // Ethernet's latency split over the two legs host -> fabric -> host.
  LinkSpec ethernetLeg = kEthernet25;
  ethernetLeg.latency /= 2;
  const int64_t fabric = nodes > 1 ? numDevices + nodes : -1;
  for (int64_t n = 0; n < nodes; ++n) {
    m.switches.push_back({"n" + std::to_string(n) + ".host", "host", n});
    const int64_t host = numDevices + n;
    const int64_t first = n * 8;
    for (auto [a, b] : kSingle)
      m.links.push_back({first + a, first + b, kNVLink2});
    for (auto [a, b] : kDouble)
      m.links.push_back({first + a, first + b, kNVLink2Double});
    for (int64_t d = 0; d < 8; ++d)
      m.links.push_back({first + d, host, kPCIe3});
    if (fabric >= 0)
      m.links.push_back({host, fabric, ethernetLeg});
  }
  if (fabric >= 0)
    m.switches.push_back({"fabric", "ethernet-switch", -1});
  return m;
}

/// DGX A100: 8 GPUs on NVSwitch, 8 single-port HDR ConnectX-6 for the
/// compute fabric (one per GPU).
Machine dgxA100(int64_t nodes, std::string name) {
  LinkSpec intra = kNVLink3, inter = kHDR;
  intra.collectiveBySize = dgxA100AllReduce();
  inter.collectiveBySize = dgxA100InterAllReduce();
  return cluster(std::move(name), nodes, 8, 8, a100(), intra, inter);
}

/// DGX H100: 8 GPUs on NVSwitch, 8 NDR ConnectX-7 (one 400 Gb/s per GPU).
/// Inside a node, NCCL's all-gather, reduce-scatter and all-to-all reach
/// about 370 GB/s bus bandwidth, not all-reduce's 480 with NVLink SHARP
/// (the NCCL maintainers on NVIDIA/nccl-tests#212: NVLink's 450 GB/s less
/// ~20% protocol overhead).
Machine dgxH100(int64_t nodes, std::string name) {
  LinkSpec intra = kNVLink4, inter = kNDR;
  intra.collectiveBySize = dgxH100AllReduce();
  intra.exchangeBusBandwidth = 370 * kGiga;
  inter.collectiveBySize = dgxH100InterAllReduce();
  return cluster(std::move(name), nodes, 8, 8, h100(), intra, inter);
}

/// The build/CI machines (2 cores of an AMD EPYC, 24 GB), fixed figures
/// measured there once (ppc-calibrate measures any host and writes a
/// machine with its curves: docs/runtime.md): every ppc-run rank is one
/// process with one
/// OpenBLAS thread, so each rank is one core while there are cores for all
/// of them, and ranks share the cores beyond that.
///  - f32: single-core sgemm as the kernels call it (oneDNN's), 220 GFLOP/s
///    (at 512^3; 218 at 64^3, 129 at 32^3, hence half efficiency at ~5e4
///    FLOPs);
///  - memory: 31 GB/s, the rate of Adam's vectorized update with 2 ranks (7
///    floats moved per weight);
///  - shared memory between ranks: 5 GB/s and 15 us a message (Open MPI
///    plus ppc-run staging each message and polling its deadline).
/// Kernel times are best taken from a profile measured by
/// `ppc-run --profile` (what the bench does); the roofline then only prices
/// what the profile lacks.
Machine cpuHost(int64_t processes, std::string name) {
  constexpr double cores = 2;
  constexpr double coreF32 = 220 * kGiga;
  constexpr double coreBandwidth = 31 * kGiga;
  constexpr int64_t hostMemory = 24 * kGiga;
  double share = std::min(1.0, cores / static_cast<double>(processes));
  DeviceSpec cpu = makeDevice(
      "cpu-epyc-2core",
      {{DType::F64, coreF32 / 2 * share}, {DType::F32, coreF32 * share}},
      coreBandwidth * share, hostMemory / std::max<int64_t>(1, processes),
      5e-6);
  cpu.halfEfficiencyFlops = 5e4;
  LinkSpec shm = {LinkKind::SharedMemory, 5 * kGiga, 15e-6};
  return cluster(std::move(name), 1, processes, 1, cpu, shm, shm);
}

/// Parses "<prefix><N>" with 1 <= N <= maxCount.
std::optional<int64_t> countAfter(std::string_view name,
                                  std::string_view prefix, int64_t maxCount) {
  if (name.size() <= prefix.size() || name.substr(0, prefix.size()) != prefix)
    return std::nullopt;
  std::string_view digits = name.substr(prefix.size());
  int64_t n = 0;
  auto [end, ec] =
      std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || end != digits.data() + digits.size() || n < 1 ||
      n > maxCount)
    return std::nullopt;
  return n;
}

} // namespace

std::optional<Machine> lookupPreset(std::string_view name) {
  if (name == "p100x16")
    return p100x16();
  if (name == "k80x64")
    return k80x64();
  if (name == "p3.16xlarge")
    return p3x16large(1, "p3.16xlarge");
  if (name == "dgx-a100")
    return dgxA100(1, "dgx-a100");
  if (name == "dgx-h100")
    return dgxH100(1, "dgx-h100");
  if (name == "cpu")
    return cpuHost(1, "cpu");
  std::string owned(name);
  // No more than kMaxDevices devices (8 per node).
  if (std::optional<int64_t> n =
          countAfter(name, "p3.16xlargex", kMaxDevices / 8))
    return p3x16large(*n, owned);
  if (std::optional<int64_t> n = countAfter(name, "dgx-a100x", kMaxDevices / 8))
    return dgxA100(*n, owned);
  if (std::optional<int64_t> n = countAfter(name, "dgx-h100x", kMaxDevices / 8))
    return dgxH100(*n, owned);
  if (std::optional<int64_t> n = countAfter(name, "cpux", kMaxDevices))
    return cpuHost(*n, owned);
  return std::nullopt;
}

std::vector<PresetInfo> listPresets() {
  return {
      {"p100x16", "FlexFlow's P100 cluster: 4 nodes x 4 P100, NVLink, "
                  "100 Gb/s InfiniBand"},
      {"k80x64", "FlexFlow's K80 cluster: 16 nodes x 4 K80, PCIe, "
                 "56 Gb/s InfiniBand"},
      {"p3.16xlarge", "one AWS p3.16xlarge (Alpa's): 8 V100-16GB in "
                      "NVLink 2's hybrid cube mesh (25-50 GB/s a pair)"},
      {"p3.16xlargexN",
       "N p3.16xlarge instances (N <= " + std::to_string(kMaxDevices / 8) +
           "), 25 Gb/s Ethernet each"},
      {"dgx-a100", "one DGX A100: 8 A100-80GB on NVSwitch (300 GB/s)"},
      {"dgx-a100xN",
       "N DGX A100 nodes (N <= " + std::to_string(kMaxDevices / 8) +
           "), 8 x 200 Gb/s HDR InfiniBand each"},
      {"dgx-h100", "one DGX H100: 8 H100-SXM-80GB on NVSwitch (450 GB/s)"},
      {"dgx-h100xN",
       "N DGX H100 nodes (N <= " + std::to_string(kMaxDevices / 8) +
           "), 8 x 400 Gb/s NDR InfiniBand each"},
      {"cpu", "one ppc-run process on this host: one core, 24 GB"},
      {"cpuxN",
       "N ppc-run processes on this host (N <= " + std::to_string(kMaxDevices) +
           "): a core each while the 2 cores last, then sharing them"},
  };
}

std::string listPresetNames() {
  std::string names;
  for (const PresetInfo &p : listPresets())
    names += (names.empty() ? "" : ", ") + p.name;
  return names;
}

std::string formatPresetList() {
  std::string text = "machine presets (or give a path to a machine JSON file, "
                     "see docs/machine-format.md):\n";
  for (const PresetInfo &preset : listPresets()) {
    std::string name = "  " + preset.name;
    name.resize(std::max<size_t>(name.size() + 1, 15), ' ');
    text += name + preset.description + "\n";
  }
  return text;
}

} // namespace ppc
