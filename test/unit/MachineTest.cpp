//===- MachineTest.cpp - machine model, presets, routes, JSON -------------===//

#include "ppc/Simulator/Machine.h"
#include "StatusText.h"

#include <gtest/gtest.h>

#include <fstream>

using namespace ppc;
using ppc::test::statusText;

namespace {

std::string validJsonCluster() {
  return R"({
    "name": "tiny",
    "cluster": {
      "nodes": 2, "devices_per_node": 2,
      "device": {"name": "gpu", "peak_flops": {"f32": 1e12},
                 "memory_bandwidth": 1e11, "memory_bytes": 1000000},
      "intra": {"kind": "nvlink", "bandwidth": 1e11, "latency": 1e-6},
      "inter": {"kind": "infiniband", "bandwidth": 1e10, "latency": 2e-6}
    }
  })";
}

/// Two devices behind a switch, and a third reachable directly from the
/// first over a slow, low-latency link and via the switch over fast links.
std::string validJsonGraph() {
  return R"({
    "name": "triangle",
    "device_specs": [{"name": "gpu", "peak_flops": {"f32": "10 TFLOP/s"},
                      "memory_bandwidth": "1 TB/s", "memory_bytes": "16 GiB",
                      "launch_overhead": "5 us"}],
    "devices": [{"name": "a"}, {"name": "b"}, {"name": "c", "node": 1}],
    "switches": [{"name": "sw", "kind": "nvswitch"}],
    "links": [
      {"src": "a", "dst": "sw", "kind": "nvlink", "bandwidth": "100 GB/s",
       "latency": "1 us"},
      {"src": "b", "dst": "sw", "kind": "nvlink", "bandwidth": "100 GB/s",
       "latency": "1 us"},
      {"src": "c", "dst": "sw", "kind": "nvlink", "bandwidth": "100 GB/s",
       "latency": "1 us"},
      {"src": "a", "dst": "c", "kind": "ethernet", "bandwidth": "10 Gb/s",
       "latency": "0.5 us"}
    ]
  })";
}

/// validJsonGraph() with `fields` added to its device spec.
std::string withDeviceFields(const std::string &fields) {
  std::string text = validJsonGraph();
  const std::string anchor = "\"launch_overhead\": \"5 us\"";
  text.replace(text.find(anchor), anchor.size(), anchor + ", " + fields);
  return text;
}

std::string parseError(const std::string &text) {
  absl::StatusOr<Machine> m = parseMachineJson(text, "machine.json");
  EXPECT_FALSE(m.ok()) << text;
  return statusText(m);
}

} // namespace

TEST(MachineEnums, RoundTrip) {
  for (int i = 0; i < kNumDTypes; ++i) {
    auto t = static_cast<DType>(i);
    EXPECT_EQ(symbolizeDType(stringifyDType(t)), t);
  }
  for (int i = 0; i <= static_cast<int>(LinkKind::Other); ++i) {
    auto k = static_cast<LinkKind>(i);
    EXPECT_EQ(symbolizeLinkKind(stringifyLinkKind(k)), k);
  }
  EXPECT_FALSE(symbolizeDType("f128"));
  EXPECT_FALSE(symbolizeLinkKind("smoke-signals"));
}

TEST(MachineDeviceSpec, PeakFlopsFallBackToWiderTypes) {
  DeviceSpec s;
  s.setPeakFlops(DType::F32, 10);
  s.setPeakFlops(DType::F16, 20);
  EXPECT_EQ(s.getPeakFlops(DType::F32), 10);
  EXPECT_EQ(s.getPeakFlops(DType::BF16), 10); // no bf16 unit: f32
  EXPECT_EQ(s.getPeakFlops(DType::F8), 20);   // f8 -> f16
  EXPECT_EQ(s.getPeakFlops(DType::I8), 20);
  EXPECT_EQ(s.getPeakFlops(DType::F64), 10);
}

TEST(MachinePresets, FlexFlowClusters) {
  std::optional<Machine> p100 = lookupPreset("p100x16");
  ASSERT_TRUE(p100);
  EXPECT_EQ(statusText(p100->validate()), "");
  EXPECT_EQ(p100->numDevices(), 16);
  EXPECT_EQ(p100->numNodes(), 4);
  EXPECT_EQ(p100->getSpec(0).getPeakFlops(DType::F32), 10.6e12);
  EXPECT_EQ(p100->getSpec(0).getPeakFlops(DType::F16), 21.2e12);
  EXPECT_EQ(p100->getSpec(0).memoryBandwidth, 732e9);
  EXPECT_EQ(p100->getSpec(0).memoryBytes, int64_t(16) << 30);
  EXPECT_EQ(p100->effectiveLink(0, 1).kind, LinkKind::NVLink);
  EXPECT_EQ(p100->effectiveLink(0, 4).kind, LinkKind::InfiniBand);
  EXPECT_DOUBLE_EQ(p100->effectiveLink(0, 4).bandwidth, 12.5e9); // 100 Gb/s
  EXPECT_EQ(p100->cluster->nicsPerNode, 1);

  std::optional<Machine> k80 = lookupPreset("k80x64");
  ASSERT_TRUE(k80);
  EXPECT_EQ(statusText(k80->validate()), "");
  EXPECT_EQ(k80->numDevices(), 64);
  EXPECT_EQ(k80->numNodes(), 16);
  EXPECT_EQ(k80->getSpec(0).memoryBandwidth, 240e9);
  EXPECT_NEAR(k80->getSpec(0).getPeakFlops(DType::F32), 4.37e12, 1e10);
  EXPECT_EQ(k80->effectiveLink(0, 3).kind, LinkKind::PCIe);
  EXPECT_DOUBLE_EQ(k80->effectiveLink(0, 4).bandwidth, 7e9); // 56 Gb/s
}

TEST(MachinePresets, AlpaCluster) {
  std::optional<Machine> one = lookupPreset("p3.16xlarge");
  ASSERT_TRUE(one);
  EXPECT_EQ(statusText(one->validate()), "");
  EXPECT_EQ(one->numDevices(), 8);
  EXPECT_EQ(one->getSpec(0).getPeakFlops(DType::F16), 125e12);
  EXPECT_EQ(one->getSpec(0).getPeakFlops(DType::F32), 15.7e12);
  EXPECT_EQ(one->getSpec(0).memoryBytes, int64_t(16) << 30);
  EXPECT_DOUBLE_EQ(one->getSpec(0).matmulEfficiency, 83 / 125.0);
  EXPECT_DOUBLE_EQ(one->getSpec(0).bandwidthEfficiency, 790 / 900.0);
  // DGX-1's hybrid cube mesh: GPU 0 has one NVLink to GPUs 1 and 2, two to
  // 3 and 4, and reaches 5 to 7 over PCIe through the host (GPUs do not
  // forward: not 0 -> 3 -> 2 -> 1 at 50 GB/s either).
  EXPECT_DOUBLE_EQ(one->effectiveLink(0, 1).bandwidth, 25e9);
  EXPECT_DOUBLE_EQ(one->effectiveLink(2, 3).bandwidth, 50e9);
  EXPECT_DOUBLE_EQ(one->effectiveLink(0, 4).bandwidth, 50e9);
  EXPECT_EQ(one->effectiveLink(0, 7).kind, LinkKind::PCIe);
  EXPECT_DOUBLE_EQ(one->effectiveLink(0, 7).bandwidth, 15.75e9);
  EXPECT_DOUBLE_EQ(one->effectiveLink(0, 7).latency, 4e-6);

  std::optional<Machine> four = lookupPreset("p3.16xlargex4");
  ASSERT_TRUE(four);
  EXPECT_EQ(statusText(four->validate()), "");
  EXPECT_EQ(four->numDevices(), 32);
  EXPECT_EQ(four->numNodes(), 4);
  EXPECT_EQ(four->effectiveLink(0, 8).kind, LinkKind::Ethernet);
  EXPECT_DOUBLE_EQ(four->effectiveLink(0, 8).bandwidth, 3.125e9); // 25 Gb/s
  EXPECT_FALSE(lookupPreset("p3.16xlargex0"));
}

TEST(MachinePresets, DGX) {
  std::optional<Machine> a100 = lookupPreset("dgx-a100");
  ASSERT_TRUE(a100);
  EXPECT_EQ(a100->numDevices(), 8);
  EXPECT_EQ(a100->numNodes(), 1);
  EXPECT_EQ(a100->getSpec(0).getPeakFlops(DType::BF16), 312e12);
  EXPECT_EQ(a100->getSpec(0).getPeakFlops(DType::F32), 19.5e12);
  EXPECT_EQ(a100->getSpec(0).memoryBandwidth, 2039e9);
  EXPECT_EQ(a100->effectiveLink(0, 7).bandwidth, 300e9);

  std::optional<Machine> h100 = lookupPreset("dgx-h100x4");
  ASSERT_TRUE(h100);
  EXPECT_EQ(statusText(h100->validate()), "");
  EXPECT_EQ(h100->name, "dgx-h100x4");
  EXPECT_EQ(h100->numDevices(), 32);
  EXPECT_EQ(h100->numNodes(), 4);
  EXPECT_EQ(h100->getNode(9), 1);
  const DeviceSpec &spec = h100->getSpec(0);
  EXPECT_EQ(spec.getPeakFlops(DType::F32), 67e12);
  EXPECT_EQ(spec.getPeakFlops(DType::BF16), 989.5e12);
  EXPECT_EQ(spec.getPeakFlops(DType::F16), 989.5e12);
  EXPECT_EQ(spec.memoryBandwidth, 3350e9);
  EXPECT_EQ(spec.memoryBytes, int64_t(80) << 30);
  EXPECT_EQ(h100->effectiveLink(0, 1).bandwidth, 450e9);
  EXPECT_EQ(h100->effectiveLink(0, 8).bandwidth, 50e9); // 400 Gb/s NDR
  EXPECT_EQ(h100->cluster->nicsPerNode, 8);
  // cuDNN's fused attention as measured on an H100 (bench/results/
  // gpu-h100.json); the A100 has no measured figure.
  EXPECT_EQ(spec.attentionForwardEfficiency, 0.74);
  EXPECT_EQ(spec.attentionBackwardEfficiency, 0.405);
  EXPECT_EQ(spec.attentionHalfEfficiencyFlops, 56e9);
  EXPECT_EQ(a100->getSpec(0).attentionHalfEfficiencyFlops, 0);
  EXPECT_EQ(a100->getSpec(0).attentionForwardEfficiency, 0);
  EXPECT_EQ(a100->getSpec(0).attentionBackwardEfficiency, 0);

  EXPECT_EQ(lookupPreset("dgx-a100x3")->numDevices(), 24);
}

TEST(MachinePresets, CpuSharesTheHost) {
  std::optional<Machine> one = lookupPreset("cpu");
  std::optional<Machine> two = lookupPreset("cpux2");
  std::optional<Machine> four = lookupPreset("cpux4");
  ASSERT_TRUE(one && two && four);
  // A core per rank while the host's two last; beyond, ranks share them.
  // Memory is always split between the ranks.
  EXPECT_DOUBLE_EQ(two->getSpec(0).getPeakFlops(DType::F32),
                   one->getSpec(0).getPeakFlops(DType::F32));
  EXPECT_DOUBLE_EQ(two->getSpec(0).memoryBandwidth,
                   one->getSpec(0).memoryBandwidth);
  EXPECT_EQ(two->getSpec(0).memoryBytes * 2, one->getSpec(0).memoryBytes);
  EXPECT_EQ(statusText(one->validate()), "");
  EXPECT_EQ(statusText(four->validate()), "");
  EXPECT_EQ(one->numDevices(), 1);
  EXPECT_EQ(four->numDevices(), 4);
  EXPECT_EQ(four->numNodes(), 1);
  EXPECT_DOUBLE_EQ(four->getSpec(0).memoryBandwidth * 2,
                   one->getSpec(0).memoryBandwidth);
  EXPECT_DOUBLE_EQ(four->getSpec(0).getPeakFlops(DType::F32) * 2,
                   one->getSpec(0).getPeakFlops(DType::F32));
  EXPECT_EQ(four->effectiveLink(0, 3).kind, LinkKind::SharedMemory);
}

TEST(MachinePresets, UnknownNamesAndList) {
  EXPECT_FALSE(lookupPreset("tpu-v4"));
  EXPECT_FALSE(lookupPreset("dgx-h100x0"));
  EXPECT_FALSE(lookupPreset("dgx-h100x"));
  EXPECT_FALSE(lookupPreset("dgx-h100x2a"));
  EXPECT_FALSE(lookupPreset("cpux-1"));
  std::string names = listPresetNames();
  EXPECT_NE(names.find("p100x16"), std::string::npos);
  EXPECT_NE(names.find("dgx-h100xN"), std::string::npos);
  for (const PresetInfo &p : listPresets()) {
    std::string concrete = p.name;
    if (concrete.back() == 'N')
      concrete.back() = '2';
    std::optional<Machine> m = lookupPreset(concrete);
    ASSERT_TRUE(m) << concrete;
    EXPECT_EQ(statusText(m->validate()), "") << concrete;
  }
}

TEST(MachineCluster, ExpansionMatchesTheCompactForm) {
  ClusterSpec spec;
  spec.nodes = 3;
  spec.devicesPerNode = 4;
  spec.nicsPerNode = 2;
  spec.device.name = "dev";
  spec.device.setPeakFlops(DType::F32, 1e12);
  spec.device.memoryBandwidth = 1e11;
  spec.device.memoryBytes = 1 << 30;
  spec.intra = {LinkKind::NVLink, 1e11, 2e-6};
  spec.inter = {LinkKind::InfiniBand, 1e10, 4e-6};
  Machine m = Machine::fromCluster(spec, "c");
  EXPECT_EQ(statusText(m.validate()), "");
  EXPECT_EQ(m.numDevices(), 12);
  // Per node a switch and 2 NICs, plus the fabric.
  EXPECT_EQ(m.numSwitches(), 3 * 3 + 1);
  EXPECT_EQ(m.devices[5].name, "n1.d1");
  EXPECT_EQ(m.getNode(5), 1);
  EXPECT_EQ(m.findVertex("fabric"), m.numVertices() - 1);
  EXPECT_EQ(m.findVertex("n2.nic1"), 12 + 8);
  EXPECT_EQ(m.findVertex("nope"), -1);

  // The explicit graph, with the compact form dropped, routes every pair
  // exactly as the compact form says.
  Machine graph = m;
  graph.cluster.reset();
  for (int64_t a = 0; a < m.numDevices(); ++a)
    for (int64_t b = 0; b < m.numDevices(); ++b) {
      LinkSpec compact = m.effectiveLink(a, b);
      LinkSpec routed = graph.effectiveLink(a, b);
      EXPECT_EQ(compact.kind, routed.kind) << a << " -> " << b;
      EXPECT_DOUBLE_EQ(compact.bandwidth, routed.bandwidth);
      EXPECT_DOUBLE_EQ(compact.latency, routed.latency);
    }
  // Same node: device -> switch -> device.
  std::optional<Route> r = graph.route(0, 3);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->links.size(), 2u);
  // Across nodes: device -> NIC -> fabric -> NIC -> device.
  r = graph.route(0, 11);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->links.size(), 4u);
  // Devices 0 and 1 share NIC 0 of node 0, devices 2 and 3 share NIC 1.
  EXPECT_EQ(m.links[graph.route(0, 4)->links[0]].dst, m.findVertex("n0.nic0"));
  EXPECT_EQ(m.links[graph.route(1, 4)->links[0]].dst, m.findVertex("n0.nic0"));
  EXPECT_EQ(m.links[graph.route(2, 4)->links[0]].dst, m.findVertex("n0.nic1"));
}

TEST(MachineCluster, PresetsAgreeWithTheirGraphs) {
  for (const char *name : {"p100x16", "k80x64", "dgx-h100x2", "cpux3"}) {
    Machine m = *lookupPreset(name);
    Machine graph = m;
    graph.cluster.reset();
    for (int64_t b : {int64_t(1), m.numDevices() - 1}) {
      LinkSpec compact = m.effectiveLink(0, b);
      LinkSpec routed = graph.effectiveLink(0, b);
      EXPECT_EQ(compact.bandwidth, routed.bandwidth) << name;
      EXPECT_DOUBLE_EQ(compact.latency, routed.latency) << name;
    }
  }
}

TEST(MachineRoute, PicksTheFasterPathForTheMessageSize) {
  absl::StatusOr<Machine> m = parseMachineJson(validJsonGraph(), "t");
  ASSERT_TRUE(m.ok()) << statusText(m);
  // Small messages take the direct low-latency Ethernet link...
  std::optional<Route> small = m->route(0, 2, 8);
  ASSERT_TRUE(small);
  EXPECT_EQ(small->links.size(), 1u);
  EXPECT_EQ(small->effective.kind, LinkKind::Ethernet);
  EXPECT_DOUBLE_EQ(small->effective.latency, 0.5e-6);
  // ...large ones the NVLink path through the switch.
  std::optional<Route> large = m->route(0, 2, 1 << 20);
  ASSERT_TRUE(large);
  EXPECT_EQ(large->links.size(), 2u);
  EXPECT_EQ(large->effective.kind, LinkKind::NVLink);
  EXPECT_DOUBLE_EQ(large->effective.bandwidth, 100e9);
  EXPECT_DOUBLE_EQ(large->effective.latency, 2e-6);
  // A device to itself: its memory.
  std::optional<Route> self = m->route(1, 1);
  ASSERT_TRUE(self);
  EXPECT_TRUE(self->links.empty());
  EXPECT_DOUBLE_EQ(self->effective.bandwidth, 1e12);
  EXPECT_EQ(self->effective.latency, 0);
}

TEST(MachineRoute, DevicesDoNotForwardUnlessNothingElseConnects) {
  // Devices 0 - 1 - 2 on fast direct links, 0 and 2 also on a slow switch:
  // a GPU does not forward another pair's copies, so 0 -> 2 crosses the
  // switch, not device 1.
  Machine m;
  m.name = "line";
  m.specs = {lookupPreset("p3.16xlarge")->specs[0]};
  for (int d = 0; d < 3; ++d)
    m.devices.push_back({"d" + std::to_string(d), 0, 0});
  m.switches.push_back({"host", "host", 0});
  const LinkSpec fast = {LinkKind::NVLink, 100e9, 1e-6};
  const LinkSpec slow = {LinkKind::PCIe, 10e9, 1e-6};
  m.links = {{0, 1, fast}, {1, 2, fast}, {0, 3, slow}, {3, 2, slow}};
  ASSERT_EQ(statusText(m.validate()), "");
  std::optional<Route> r = m.route(0, 2);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->effective.kind, LinkKind::PCIe);
  EXPECT_DOUBLE_EQ(r->effective.bandwidth, 10e9);
  EXPECT_EQ(m.links[r->links[0]].dst, m.findVertex("host"));
  // Devices wired only to each other (a ring, a line): through device 1.
  m.switches.clear();
  m.links.resize(2);
  ASSERT_EQ(statusText(m.validate()), "");
  r = m.route(0, 2);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->links.size(), 2u);
  EXPECT_DOUBLE_EQ(r->effective.bandwidth, 100e9);
}

TEST(MachineJson, UnitsAndDefaults) {
  absl::StatusOr<Machine> m = parseMachineJson(validJsonGraph(), "t");
  ASSERT_TRUE(m.ok()) << statusText(m);
  EXPECT_EQ(m->specs[0].getPeakFlops(DType::F32), 10e12);
  EXPECT_EQ(m->specs[0].memoryBandwidth, 1e12);
  EXPECT_EQ(m->specs[0].memoryBytes, int64_t(16) << 30);
  EXPECT_DOUBLE_EQ(m->specs[0].launchOverhead, 5e-6);
  EXPECT_EQ(m->devices[0].node, 0);
  EXPECT_EQ(m->devices[2].node, 1);
  EXPECT_DOUBLE_EQ(m->links[3].spec.bandwidth, 1.25e9); // 10 Gb/s
  EXPECT_FALSE(m->cluster);
}

TEST(MachineJson, RoundTripBothForms) {
  for (const char *name : {"p100x16", "dgx-h100x2", "cpux2"}) {
    Machine m = *lookupPreset(name);
    // Compact form.
    absl::StatusOr<Machine> back = parseMachineJson(writeMachineJson(m), name);
    ASSERT_TRUE(back.ok()) << statusText(back);
    ASSERT_TRUE(back->cluster);
    EXPECT_EQ(*back->cluster, *m.cluster);
    EXPECT_EQ(back->name, m.name);
    EXPECT_EQ(back->numVertices(), m.numVertices());
    // Explicit form: same graph, no compact form.
    absl::StatusOr<Machine> graph =
        parseMachineJson(writeMachineJson(m, /*explicitGraph=*/true), name);
    ASSERT_TRUE(graph.ok()) << statusText(graph);
    EXPECT_FALSE(graph->cluster);
    ASSERT_EQ(graph->links.size(), m.links.size());
    for (size_t i = 0; i < m.links.size(); ++i) {
      EXPECT_EQ(graph->links[i].src, m.links[i].src);
      EXPECT_EQ(graph->links[i].dst, m.links[i].dst);
      EXPECT_EQ(graph->links[i].spec, m.links[i].spec);
    }
    EXPECT_EQ(graph->specs, m.specs);
    // Writing it again gives the same text.
    EXPECT_EQ(writeMachineJson(*graph), writeMachineJson(m, true));
  }
  absl::StatusOr<Machine> m = parseMachineJson(validJsonGraph(), "t");
  ASSERT_TRUE(m.ok()) << statusText(m);
  absl::StatusOr<Machine> back = parseMachineJson(writeMachineJson(*m), "t");
  ASSERT_TRUE(back.ok()) << statusText(back);
  EXPECT_EQ(writeMachineJson(*back), writeMachineJson(*m));
}

TEST(MachineJson, ErrorsNameThePath) {
  EXPECT_EQ(parseError("{"),
            "machine.json: invalid JSON: parse error at line 1, column 2: "
            "syntax error while parsing object key - unexpected end of "
            "input; expected string literal");
  EXPECT_EQ(parseError("[]"), "machine.json: (top level): must be an object");
  EXPECT_EQ(parseError("{}"),
            "machine.json: (top level): needs 'cluster' (nodes x devices) or "
            "'devices' and 'links' (explicit graph)");

  auto graphWith = [](std::string from, std::string to) {
    std::string text = validJsonGraph();
    size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  EXPECT_EQ(parseError(graphWith(R"("memory_bytes": "16 GiB")",
                                 R"("memory_bytes": 0)")),
            "machine.json: device_specs[0].memory_bytes: must be > 0");
  EXPECT_EQ(parseError(graphWith(R"("memory_bytes": "16 GiB")",
                                 R"("memory_bytes": "16 GB/s")")),
            "machine.json: device_specs[0].memory_bytes: unknown unit 'GB/s' "
            "for a size (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)");
  EXPECT_EQ(parseError(graphWith(R"({"f32": "10 TFLOP/s"})", R"({"f32": -1})")),
            "machine.json: device_specs[0].peak_flops.f32: must be > 0");
  EXPECT_EQ(
      parseError(graphWith(R"({"f32": "10 TFLOP/s"})", R"({"bf16": 1e12})")),
      "machine.json: device_specs[0].peak_flops.f32: missing (every "
      "device needs an f32 rate)");
  EXPECT_EQ(parseError(graphWith(R"({"f32": "10 TFLOP/s"})",
                                 R"({"f32": 1, "f4": 2})")),
            "machine.json: device_specs[0].peak_flops.f4: unknown element "
            "type (use f64, f32, tf32, bf16, f16, f8, i8)");
  EXPECT_EQ(parseError(graphWith(R"({"name": "c", "node": 1})",
                                 R"({"name": "c", "node": -1})")),
            "machine.json: devices[2].node: must be >= 0");
  EXPECT_EQ(parseError(graphWith(R"({"name": "b"})", R"({"name": "a"})")),
            "machine.json: devices[1].name: 'a' is used twice");
  EXPECT_EQ(parseError(graphWith(R"({"name": "b"})",
                                 R"({"name": "b", "spec": "tpu"})")),
            "machine.json: devices[1].spec: no device spec named 'tpu'");
  EXPECT_EQ(parseError(graphWith(R"({"name": "b"})",
                                 R"({"name": "b", "colour": "red"})")),
            "machine.json: devices[1].colour: unknown key");
  EXPECT_EQ(parseError(graphWith(R"("src": "a", "dst": "sw")",
                                 R"("src": "a", "dst": "sw2")")),
            "machine.json: links[0].dst: no device or switch named 'sw2'");
  EXPECT_EQ(parseError(graphWith(R"("src": "a", "dst": "sw")",
                                 R"("src": "a", "dst": "a")")),
            "machine.json: links[0]: connects 'a' to itself");
  EXPECT_EQ(
      parseError(graphWith(R"("kind": "ethernet")", R"("kind": "smoke")")),
      "machine.json: links[3].kind: unknown link kind 'smoke' (use "
      "shared_memory, pcie, nvlink, infinity_fabric, upi, infiniband, "
      "ethernet, other)");
  EXPECT_EQ(
      parseError(graphWith(R"("bandwidth": "10 Gb/s")", R"("bandwidth": 0)")),
      "machine.json: links[3].bandwidth: must be > 0");
  EXPECT_EQ(
      parseError(graphWith(R"("latency": "0.5 us")", R"("latency": "-1 us")")),
      "machine.json: links[3].latency: must be >= 0");
  EXPECT_EQ(
      parseError(graphWith(R"("latency": "0.5 us")", R"("latency": true)")),
      "machine.json: links[3].latency: must be a number or a string "
      "with a unit, e.g. \"1.5 us\"");

  // Structural problems come from validate(), after the file parsed.
  std::string disconnected = validJsonGraph();
  disconnected = graphWith(
      R"({"src": "c", "dst": "sw", "kind": "nvlink", "bandwidth": "100 GB/s",
       "latency": "1 us"},
      {"src": "a", "dst": "c", "kind": "ethernet", "bandwidth": "10 Gb/s",
       "latency": "0.5 us"})",
      R"({"src": "b", "dst": "sw", "kind": "pcie", "bandwidth": 1})");
  EXPECT_EQ(parseError(disconnected),
            "machine.json: device 'c' cannot reach device 'a': the link "
            "graph is disconnected");

  std::string cluster = validJsonCluster();
  EXPECT_EQ(parseError(cluster.replace(cluster.find("\"nodes\": 2"), 10,
                                       "\"nodes\": 0")),
            "machine.json: cluster.nodes: must be >= 1");
  cluster = validJsonCluster();
  EXPECT_EQ(
      parseError(cluster.replace(cluster.find("\"devices_per_node\": 2"), 21,
                                 "\"devices_per_node\": 2, "
                                 "\"nics_per_node\": 3")),
      "machine.json: cluster.nics_per_node: must be between 1 and "
      "devices_per_node (2)");
  cluster = validJsonCluster();
  EXPECT_EQ(parseError(cluster.replace(cluster.find("\"bandwidth\": 1e10"), 17,
                                       "\"bandwidth\": -5")),
            "machine.json: cluster.inter.bandwidth: must be > 0");
  cluster = validJsonCluster();
  EXPECT_EQ(parseError(cluster.replace(cluster.find("\"name\": \"tiny\""), 14,
                                       "\"name\": \"tiny\", \"devices\": []")),
            "machine.json: cluster: a machine has either 'cluster' or "
            "'devices', not both");
}

TEST(MachineJson, FilesAndLoadMachine) {
  std::string error;
  error = statusText(readMachineJsonFile("/nonexistent/m.json"));
  EXPECT_NE(error, "");
  EXPECT_EQ(error, "/nonexistent/m.json: cannot open the file");

  error = statusText(loadMachine("tpu-pod"));
  EXPECT_NE(error, "");
  EXPECT_NE(error.find("unknown machine 'tpu-pod'"), std::string::npos);
  EXPECT_NE(error.find("dgx-h100xN"), std::string::npos);
  EXPECT_TRUE(loadMachine("dgx-h100").ok());

  std::string path = ::testing::TempDir() + "/ppc-machine-test.json";
  std::ofstream(path) << validJsonCluster();
  absl::StatusOr<Machine> m = loadMachine(path);
  ASSERT_TRUE(m.ok()) << statusText(m);
  EXPECT_EQ(m->numDevices(), 4);
  EXPECT_EQ(m->name, "tiny");
}

TEST(MachineValidate, ImpossibleMachines) {
  Machine good = *lookupPreset("dgx-a100x2");
  ASSERT_EQ(statusText(good.validate()), "");
  auto broken = [&](auto edit) {
    Machine m = good;
    m.cluster.reset();
    edit(m);
    return statusText(m.validate());
  };
  EXPECT_EQ(broken([](Machine &m) { m.devices.clear(); }),
            "the machine has no devices");
  EXPECT_EQ(broken([](Machine &m) { m.specs[0].memoryBytes = 0; }),
            "device spec 0 'A100-SXM4-80GB': memory capacity must be > 0");
  EXPECT_EQ(broken([](Machine &m) { m.specs[0].memoryBandwidth = -1; }),
            "device spec 0 'A100-SXM4-80GB': memory bandwidth must be > 0");
  EXPECT_EQ(broken([](Machine &m) { m.specs[0].setPeakFlops(DType::F32, 0); }),
            "device spec 0 'A100-SXM4-80GB': peak f32 FLOP/s must be > 0");
  EXPECT_EQ(
      broken([](Machine &m) { m.specs[0].attentionForwardEfficiency = 1.5; }),
      "device spec 0 'A100-SXM4-80GB': attention forward efficiency "
      "must be in [0, 1]");
  EXPECT_EQ(
      broken([](Machine &m) { m.specs[0].attentionBackwardEfficiency = -0.1; }),
      "device spec 0 'A100-SXM4-80GB': attention backward efficiency "
      "must be in [0, 1]");
  EXPECT_EQ(broken([](Machine &m) { m.devices[3].spec = 2; }),
            "device 'n0.d3': spec 2 out of range (1 specs)");
  EXPECT_EQ(broken([](Machine &m) { m.devices[1].name = "n0.d0"; }),
            "device 1: name 'n0.d0' is used twice");
  EXPECT_EQ(broken([](Machine &m) { m.links[2].dst = 1000; }),
            "link 2: endpoint 1000 out of range (35 devices and switches)");
  EXPECT_EQ(broken([](Machine &m) { m.links[0].dst = m.links[0].src; }),
            "link 0: connects 'n0.d0' to itself");
  EXPECT_EQ(broken([](Machine &m) { m.links[0].spec.bandwidth = 0; }),
            "link 0 ('n0.d0' -> 'n0.switch'): bandwidth must be > 0");
  EXPECT_EQ(broken([](Machine &m) {
              // Cut node 1 off the fabric.
              m.links.erase(m.links.end() - 8, m.links.end());
            }),
            "device 'n1.d0' cannot reach device 'n0.d0': the link graph is "
            "disconnected");

  Machine badCluster = good;
  badCluster.cluster->nicsPerNode = 9;
  EXPECT_EQ(statusText(badCluster.validate()),
            "cluster: NICs per node must be between 1 and the devices per "
            "node (8)");
}

TEST(MachineJson, HalfEfficiencyFlops) {
  std::string text = validJsonGraph();
  std::string withHalf = text;
  withHalf.replace(withHalf.find("\"launch_overhead\": \"5 us\""),
                   std::string("\"launch_overhead\": \"5 us\"").size(),
                   "\"launch_overhead\": \"5 us\", "
                   "\"half_efficiency_flops\": 2e5");
  absl::StatusOr<Machine> m = parseMachineJson(withHalf, "t");
  ASSERT_TRUE(m.ok()) << statusText(m);
  EXPECT_DOUBLE_EQ(m->getSpec(0).halfEfficiencyFlops, 2e5);
  // Absent: 0, the cost model's own default.
  m = parseMachineJson(text, "t");
  ASSERT_TRUE(m.ok()) << statusText(m);
  EXPECT_EQ(m->getSpec(0).halfEfficiencyFlops, 0);
  std::string negative = withHalf;
  negative.replace(negative.find("2e5"), 3, "-1");
  EXPECT_NE(parseError(negative).find("half_efficiency_flops"),
            std::string::npos);
}

TEST(MachineJson, GemmModelFigures) {
  std::string text = validJsonGraph();
  auto with = withDeviceFields;
  absl::StatusOr<Machine> m = parseMachineJson(
      with("\"compute_units\": 108, \"matmul_efficiency\": 0.869, "
           "\"bandwidth_efficiency\": 0.9"),
      "t");
  ASSERT_TRUE(m.ok()) << statusText(m);
  EXPECT_EQ(m->getSpec(0).computeUnits, 108);
  EXPECT_DOUBLE_EQ(m->getSpec(0).matmulEfficiency, 0.869);
  EXPECT_DOUBLE_EQ(m->getSpec(0).bandwidthEfficiency, 0.9);
  // Absent: 0, no GEMM model and the whole peak and bandwidth.
  m = parseMachineJson(text, "t");
  ASSERT_TRUE(m.ok()) << statusText(m);
  EXPECT_EQ(m->getSpec(0).computeUnits, 0);
  EXPECT_EQ(m->getSpec(0).matmulEfficiency, 0);
  EXPECT_NE(parseError(with("\"compute_units\": 1.5"))
                .find("compute_units: must be a whole number >= 0"),
            std::string::npos);
  EXPECT_NE(parseError(with("\"matmul_efficiency\": 1.2"))
                .find("matmul_efficiency: must be a fraction in (0, 1]"),
            std::string::npos);
  EXPECT_NE(parseError(with("\"bandwidth_efficiency\": 0"))
                .find("bandwidth_efficiency: must be a fraction in (0, 1]"),
            std::string::npos);
}

TEST(MachineJson, AttentionEfficiencies) {
  std::string text = validJsonGraph();
  auto with = withDeviceFields;
  absl::StatusOr<Machine> m =
      parseMachineJson(with("\"attention_forward_efficiency\": 0.52, "
                            "\"attention_backward_efficiency\": 0.5, "
                            "\"attention_half_efficiency_flops\": 5.6e10"),
                       "t");
  ASSERT_TRUE(m.ok()) << statusText(m);
  EXPECT_DOUBLE_EQ(m->getSpec(0).attentionForwardEfficiency, 0.52);
  EXPECT_DOUBLE_EQ(m->getSpec(0).attentionBackwardEfficiency, 0.5);
  EXPECT_DOUBLE_EQ(m->getSpec(0).attentionHalfEfficiencyFlops, 5.6e10);
  // Written back and read again: the same figures, the same text.
  std::string written = writeMachineJson(*m);
  EXPECT_NE(written.find("\"attention_forward_efficiency\": 0.52"),
            std::string::npos);
  absl::StatusOr<Machine> back = parseMachineJson(written, "t");
  ASSERT_TRUE(back.ok()) << statusText(back);
  EXPECT_EQ(back->specs, m->specs);
  EXPECT_EQ(writeMachineJson(*back), written);
  // Absent: 0, not measured, and not written.
  m = parseMachineJson(text, "t");
  ASSERT_TRUE(m.ok()) << statusText(m);
  EXPECT_EQ(m->getSpec(0).attentionForwardEfficiency, 0);
  EXPECT_EQ(m->getSpec(0).attentionBackwardEfficiency, 0);
  EXPECT_EQ(writeMachineJson(*m).find("attention_"), std::string::npos);
  // Out of range, or not a number.
  EXPECT_NE(parseError(with("\"attention_half_efficiency_flops\": -1"))
                .find("attention_half_efficiency_flops"),
            std::string::npos);
  EXPECT_NE(parseError(with("\"attention_half_efficiency_flops\": \"x\""))
                .find("attention_half_efficiency_flops: must be a number"),
            std::string::npos);
  EXPECT_NE(parseError(with("\"attention_forward_efficiency\": 1.5"))
                .find("attention_forward_efficiency: must be a fraction in "
                      "(0, 1]"),
            std::string::npos);
  EXPECT_NE(parseError(with("\"attention_forward_efficiency\": 0"))
                .find("attention_forward_efficiency: must be a fraction in "
                      "(0, 1]"),
            std::string::npos);
  EXPECT_NE(parseError(with("\"attention_backward_efficiency\": -0.5"))
                .find("attention_backward_efficiency: must be a fraction in "
                      "(0, 1]"),
            std::string::npos);
  EXPECT_NE(parseError(with("\"attention_backward_efficiency\": \"half\""))
                .find("attention_backward_efficiency: must be a fraction in "
                      "(0, 1]"),
            std::string::npos);
}

TEST(MachineCluster, RoutesAreThoseOfTheGraph) {
  // Cluster routes are read off the layout of fromCluster (O(1), for large
  // machines); they must be the paths a search over the graph finds.
  ClusterSpec spec = lookupPreset("dgx-h100")->cluster.value();
  spec.nodes = 3;
  spec.devicesPerNode = 4;
  spec.nicsPerNode = 2;
  std::vector<Machine> machines = {
      Machine::fromCluster(spec), *lookupPreset("p100x16"),
      *lookupPreset("dgx-h100x2"), *lookupPreset("cpux3")};
  spec.devicesPerNode = 1;
  spec.nicsPerNode = 1;
  machines.push_back(Machine::fromCluster(spec));
  for (const Machine &m : machines) {
    Machine graph = m;
    graph.cluster.reset();
    for (int64_t a = 0; a < m.numDevices(); ++a)
      for (int64_t b = 0; b < m.numDevices(); ++b) {
        std::optional<Route> fast = m.route(a, b), slow = graph.route(a, b);
        ASSERT_TRUE(fast && slow);
        EXPECT_EQ(fast->links, slow->links) << m.name << " " << a << "->" << b;
        EXPECT_EQ(fast->effective, slow->effective) << a << "->" << b;
      }
  }
}

TEST(MachineLimits, DeviceCountsAboveTheLimitAreRejected) {
  ClusterSpec spec = lookupPreset("dgx-h100")->cluster.value();
  spec.nodes = kMaxDevices / 8;
  EXPECT_EQ(statusText(spec.validate()), "");
  spec.nodes = 12500; // 100,000 devices
  EXPECT_NE(statusText(spec.validate())
                .find("more than the 65536 devices ppc supports"),
            std::string::npos);
  // nodes x devices per node overflows int64.
  spec.nodes = spec.devicesPerNode = int64_t(1) << 32;
  EXPECT_NE(statusText(spec.validate()).find("more than the 65536"),
            std::string::npos);

  // An explicit graph with one device too many: rejected before its entries
  // are read.
  std::string devices;
  for (int64_t i = 0; i <= kMaxDevices; ++i)
    devices += i ? ",{}" : "{}";
  std::string error;
  std::optional<Machine> one = lookupPreset("cpu");
  std::string specJson = writeMachineJson(*one, /*explicitGraph=*/true);
  specJson = specJson.substr(specJson.find("\"device_specs\""));
  specJson = "{" + specJson.substr(0, specJson.find("\"devices\"")) +
             "\"devices\": [" + devices + "]}";
  error = statusText(parseMachineJson(specJson, "big.json"));
  EXPECT_NE(error, "");
  EXPECT_EQ(
      error,
      "big.json: devices: 65537 devices, more than the 65536 ppc supports");

  // Presets stop at the limit too.
  EXPECT_TRUE(lookupPreset("dgx-h100x8192"));
  EXPECT_FALSE(lookupPreset("dgx-h100x8193"));
  EXPECT_FALSE(lookupPreset("cpux65537"));
}

TEST(MachineJson, SingleNodeClusterNeedsNoInterLink) {
  std::string json = writeMachineJson(*lookupPreset("dgx-h100"));
  size_t inter = json.find(",\n    \"inter\"");
  ASSERT_NE(inter, std::string::npos);
  json = json.substr(0, inter) + json.substr(json.find('}', inter) + 1);
  std::string error;
  absl::StatusOr<Machine> m = parseMachineJson(json, "one-node.json");
  ASSERT_TRUE(m.ok()) << statusText(m);
  EXPECT_EQ(m->numDevices(), 8);
  EXPECT_EQ(m->cluster->inter, m->cluster->intra);
  // With several nodes it is required.
  size_t nodes = json.find("\"nodes\": 1");
  ASSERT_NE(nodes, std::string::npos);
  json.replace(nodes, 10, "\"nodes\": 2");
  error = statusText(parseMachineJson(json, "two-nodes.json"));
  EXPECT_NE(error, "");
  EXPECT_EQ(error, "two-nodes.json: cluster.inter: missing");
}

TEST(MachineSubMachine, WholeNodesPartOfANodeAndAcrossNodes) {
  // Whole nodes and part of one node keep the compact form.
  Machine dgx = *lookupPreset("dgx-h100x4");
  Machine two = dgx.subMachine(16, 16);
  ASSERT_TRUE(two.cluster);
  EXPECT_EQ(two.cluster->nodes, 2);
  EXPECT_EQ(two.numDevices(), 16);
  EXPECT_EQ(two.effectiveLink(0, 8).bandwidth,
            dgx.effectiveLink(0, 8).bandwidth);
  Machine half = dgx.subMachine(8, 4);
  ASSERT_TRUE(half.cluster);
  EXPECT_EQ(half.cluster->nodes, 1);
  EXPECT_EQ(half.cluster->devicesPerNode, 4);
  EXPECT_EQ(half.effectiveLink(0, 3).bandwidth,
            dgx.effectiveLink(8, 11).bandwidth);
  // Across a node boundary: the explicit graph of the kept devices, every
  // switch, and the links among them; routes are the original machine's.
  Machine across = dgx.subMachine(4, 8);
  EXPECT_FALSE(across.cluster);
  EXPECT_EQ(across.numDevices(), 8);
  EXPECT_EQ(statusText(across.validate()), "");
  EXPECT_EQ(across.getNode(0), 0);
  EXPECT_EQ(across.getNode(7), 1);
  EXPECT_EQ(across.getVertexName(0), dgx.getVertexName(4));
  EXPECT_EQ(across.effectiveLink(0, 3).bandwidth,
            dgx.effectiveLink(4, 7).bandwidth);
  EXPECT_EQ(across.effectiveLink(0, 4).bandwidth,
            dgx.effectiveLink(4, 8).bandwidth);
  EXPECT_DOUBLE_EQ(across.effectiveLink(0, 4).latency,
                   dgx.effectiveLink(4, 8).latency);
}

TEST(MachineSubMachine, SameButNamesAtNodeBoundariesOfOneSize) {
  Machine dgx = *lookupPreset("dgx-h100x4");
  EXPECT_TRUE(sameButNames(dgx.subMachine(0, 8), dgx.subMachine(24, 8)));
  EXPECT_TRUE(sameButNames(dgx.subMachine(0, 4), dgx.subMachine(12, 4)));
  EXPECT_FALSE(sameButNames(dgx.subMachine(0, 8), dgx.subMachine(0, 16)));
  EXPECT_FALSE(sameButNames(dgx.subMachine(0, 8), dgx.subMachine(8, 4)));
  // Explicit graphs (across a node boundary): the same devices and links
  // but for names, or not.
  Machine across = dgx.subMachine(4, 8), later = across;
  later.name += "'";
  for (Device &device : later.devices)
    device.name += "'";
  for (Switch &sw : later.switches)
    sw.name += "'";
  EXPECT_TRUE(sameButNames(across, later));
  EXPECT_FALSE(sameButNames(across, dgx.subMachine(6, 8)));
  Machine slower = later;
  slower.links.back().spec.bandwidth /= 2;
  EXPECT_FALSE(sameButNames(across, slower));
  Machine otherSpec = later;
  otherSpec.specs[0].memoryBytes /= 2;
  EXPECT_FALSE(sameButNames(across, otherSpec));
}

TEST(MachineCurve, InterpolatesTimeLinearlyInBytes) {
  BandwidthCurve c;
  c.points = {{1e3, 1e8}, {1e5, 3e9}, {1e7, 1e9}};
  // At the points: their own rates.
  EXPECT_DOUBLE_EQ(c.bandwidthAt(1e5), 3e9);
  EXPECT_DOUBLE_EQ(c.time(1e5), 1e5 / 3e9);
  // Between two points the time is linear in bytes (a latency plus a rate
  // through both): 1e4 bytes is 9e3 / 99e3 of the way from 1e3 to 1e5.
  const double t3 = 1e3 / 1e8, t5 = 1e5 / 3e9, t7 = 1e7 / 1e9;
  EXPECT_NEAR(c.time(1e4), t3 + 9e3 / 99e3 * (t5 - t3), 1e-18);
  EXPECT_NEAR(c.time(1e6), t5 + 9e5 / 99e5 * (t7 - t5), 1e-15);
  EXPECT_DOUBLE_EQ(c.bandwidthAt(1e4), 1e4 / c.time(1e4));
  // Never below the smaller point's latency, where interpolating the rate
  // in log size priced 1e4 bytes at 6.5 us, under the 10 us of 1e3 bytes.
  EXPECT_GT(c.time(1e4), t3);
  // Below the first point: its time (a latency floor); above the last:
  // the last rate (the rate may fall with size: caches).
  EXPECT_DOUBLE_EQ(c.time(10), 1e3 / 1e8);
  EXPECT_DOUBLE_EQ(c.time(1e3), 1e3 / 1e8);
  EXPECT_DOUBLE_EQ(c.time(1e9), 1e9 / 1e9);
  EXPECT_EQ(statusText(c.validate()), "");
  c.points.push_back({1e7, 2e9});
  EXPECT_EQ(statusText(c.validate()), "point 3: message sizes must increase");
  c.points.back() = {1e8, 0};
  EXPECT_EQ(statusText(c.validate()), "point 3: bandwidth must be > 0");
}

TEST(MachineJson, BandwidthBySize) {
  std::string text = validJsonCluster();
  auto with = [&](const std::string &fields) {
    std::string changed = text;
    std::string latency = "\"latency\": 1e-6}";
    changed.replace(changed.find(latency), latency.size(),
                    "\"latency\": 1e-6, " + fields + "}");
    return changed;
  };
  absl::StatusOr<Machine> m = parseMachineJson(
      with(R"("bandwidth_by_size": [["4 KiB", "1 GB/s"], [4194304, 9e9]],
              "exchange_bus_bandwidth": "1.5 GB/s",
              "collective_bandwidth_by_size": [["1 MB", "2 GB/s"]],
              "send_bandwidth_by_size": [["4 KiB", "4 GB/s"], [4194304, 18e9]])"),
      "t");
  ASSERT_TRUE(m.ok()) << statusText(m);
  const LinkSpec &intra = m->cluster->intra;
  ASSERT_EQ(intra.bySize.points.size(), 2u);
  EXPECT_EQ(intra.bySize.points[0], std::make_pair(4096.0, 1e9));
  EXPECT_EQ(intra.collectiveBySize.points[0], std::make_pair(1e6, 2e9));
  EXPECT_DOUBLE_EQ(intra.exchangeBusBandwidth, 1.5e9);
  EXPECT_DOUBLE_EQ(m->cluster->inter.exchangeBusBandwidth, 0);
  ASSERT_EQ(intra.sendBySize.points.size(), 2u);
  EXPECT_EQ(intra.sendBySize.points[1], std::make_pair(4194304.0, 18e9));
  // A transfer takes the curve's time, not latency + bytes / bandwidth.
  EXPECT_DOUBLE_EQ(m->effectiveLink(0, 1).transferTime(4194304), 4194304 / 9e9);
  EXPECT_DOUBLE_EQ(m->effectiveLink(0, 2).transferTime(1e6), 2e-6 + 1e6 / 1e10);
  // The sender's part by its own curve, never more than the whole message;
  // none on a link without the curve.
  EXPECT_DOUBLE_EQ(m->effectiveLink(0, 1).sendTime(4194304), 4194304 / 18e9);
  EXPECT_DOUBLE_EQ(m->effectiveLink(0, 1).sendTime(4096), 4096 / 4e9);
  EXPECT_DOUBLE_EQ(m->effectiveLink(0, 2).sendTime(1e6), 0);
  LinkSpec slowSender = intra;
  slowSender.sendBySize.points = {{4096, 1e8}};
  EXPECT_DOUBLE_EQ(slowSender.sendTime(4096), intra.transferTime(4096));
  // Written and read back: the same machine.
  absl::StatusOr<Machine> back = parseMachineJson(writeMachineJson(*m), "t");
  ASSERT_TRUE(back.ok()) << statusText(back);
  EXPECT_EQ(*back->cluster, *m->cluster);
  absl::StatusOr<Machine> graph =
      parseMachineJson(writeMachineJson(*m, true), "t");
  ASSERT_TRUE(graph.ok()) << statusText(graph);
  EXPECT_EQ(graph->effectiveLink(0, 1), m->effectiveLink(0, 1));

  EXPECT_EQ(parseError(with(R"("bandwidth_by_size": [])")),
            "machine.json: cluster.intra.bandwidth_by_size: must be a "
            "non-empty array of [size, bandwidth] pairs, e.g. [[\"4 KiB\", "
            "\"1.5 GB/s\"]]");
  EXPECT_EQ(parseError(with(R"("bandwidth_by_size": [[1, 2, 3]])")),
            "machine.json: cluster.intra.bandwidth_by_size[0]: must be a "
            "[size, bandwidth] pair");
  EXPECT_EQ(parseError(with(R"("bandwidth_by_size": [[8, 1], [4, 1]])")),
            "machine.json: cluster.intra.bandwidth_by_size[1][0]: sizes must "
            "increase");
  EXPECT_EQ(
      parseError(with(R"("collective_bandwidth_by_size": [[8, "1 GFLOP/s"]])")),
      "machine.json: cluster.intra.collective_bandwidth_by_size[0][1]: "
      "unknown unit 'GFLOP/s' for a bandwidth (use B/s, KB/s, MB/s, GB/s, "
      "TB/s, KiB/s, MiB/s, GiB/s, Kb/s, Mb/s, Gb/s, Tb/s)");
  EXPECT_EQ(parseError(with(R"("bandwidth_by_size": [[0, 1]])")),
            "machine.json: cluster.intra.bandwidth_by_size[0][0]: must be > 0");
  EXPECT_EQ(parseError(with(R"("exchange_bus_bandwidth": "-1 GB/s")")),
            "machine.json: cluster.intra.exchange_bus_bandwidth: must be >= 0");
  EXPECT_EQ(parseError(with(R"("send_bandwidth_by_size": [[8, 1], [8, 2]])")),
            "machine.json: cluster.intra.send_bandwidth_by_size[1][0]: sizes "
            "must increase");
}

TEST(MachineJson, CoresPerNode) {
  std::string text = validJsonCluster();
  std::string cores = text;
  cores.replace(cores.find("\"devices_per_node\": 2"),
                std::string("\"devices_per_node\": 2").size(),
                "\"devices_per_node\": 2, \"cores_per_node\": 1");
  absl::StatusOr<Machine> m = parseMachineJson(cores, "t");
  ASSERT_TRUE(m.ok()) << statusText(m);
  EXPECT_EQ(m->cluster->coresPerNode, 1);
  absl::StatusOr<Machine> back = parseMachineJson(writeMachineJson(*m), "t");
  ASSERT_TRUE(back.ok()) << statusText(back);
  EXPECT_EQ(*back->cluster, *m->cluster);
  // Absent: 0, every device computes at once (and not written).
  m = parseMachineJson(text, "t");
  ASSERT_TRUE(m.ok()) << statusText(m);
  EXPECT_EQ(m->cluster->coresPerNode, 0);
  EXPECT_EQ(writeMachineJson(*m).find("cores_per_node"), std::string::npos);
  std::string negative = cores;
  negative.replace(negative.find("\"cores_per_node\": 1"),
                   std::string("\"cores_per_node\": 1").size(),
                   "\"cores_per_node\": -1");
  EXPECT_EQ(parseError(negative), "machine.json: cluster.cores_per_node: must "
                                  "be >= 0 (0: every device computes at once)");
}
