//===- ReportTest.cpp - the report directory's files and their contents ---===//
//
// A four-op MLP on 2 nodes x 4 devices with a hand-made "found" strategy
// that touches every strategy class: data parallel, mixed, tensor parallel
// on a strided view, single device.
//
//===----------------------------------------------------------------------===//

#include "ppc/Report/Report.h"
#include "StatusText.h"

#include "SimTestGraphs.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

using namespace ppc;
using namespace ppc::sim;
namespace fs = std::filesystem;

namespace {

using namespace ppc::sim::testing;
using ppc::test::statusText;

Machine machine(int64_t nodes, int64_t perNode, double flops = 1e13,
                double interBandwidth = 1e10) {
  ClusterSpec c;
  c.nodes = nodes;
  c.devicesPerNode = perNode;
  c.nicsPerNode = perNode;
  c.device.name = "round";
  c.device.setPeakFlops(DType::F32, flops);
  c.device.memoryBandwidth = 1e12;
  c.device.memoryBytes = 1'000'000'000;
  c.device.launchOverhead = 5e-6;
  c.intra = {LinkKind::NVLink, 1e11, 5e-6};
  c.inter = {LinkKind::InfiniBand, interBandwidth, 20e-6};
  return Machine::fromCluster(c, "round");
}

Op elementwise(std::string name, int64_t n, int64_t f, Source input) {
  return ppc::sim::testing::elementwise(
      std::move(name), "ppc.relu", n, f, {input},
      {double(n * f), double(n * f), 8.0 * n * f, 12.0 * n * f});
}

Graph mlp() {
  Graph g;
  g.numInputs = 1;
  g.weights = {{"fc1.w", {256, 512}}, {"fc2.w", {512, 16}}};
  g.ops = {linear("fc1", 64, 256, 512, {Source::Kind::Input, 0, 0}, 0),
           elementwise("relu1", 64, 512, {Source::Kind::Op, 0, 0}),
           linear("fc2", 64, 512, 16, {Source::Kind::Op, 1, 0}, 1),
           elementwise("softmax", 64, 16, {Source::Kind::Op, 2, 0})};
  return g;
}

/// A stem, six residual blocks ("blocks.N." fc, relu, add of the relu and
/// the block's input) and a head: ops 1 + 3N .. 3 + 3N are block N.
Graph residualNet() {
  Graph g;
  g.numInputs = 1;
  g.ops.push_back(ppc::sim::testing::linear(g, "stem", 64, 256, 128,
                                            {Source::Kind::Input, 0, 0}));
  for (int b = 0; b < 6; ++b) {
    auto in = static_cast<int32_t>(g.ops.size() - 1);
    std::string p = "blocks." + std::to_string(b) + ".";
    g.ops.push_back(ppc::sim::testing::linear(g, p + "fc", 64, 128, 128,
                                              {Source::Kind::Op, in, 0}));
    g.ops.push_back(
        elementwise(p + "relu", 64, 128, {Source::Kind::Op, in + 1, 0}));
    g.ops.push_back(ppc::sim::testing::elementwise(
        p + "add", "ppc.add", 64, 128,
        {{Source::Kind::Op, in + 2, 0}, {Source::Kind::Op, in, 0}},
        {8192, 8192, 3 * 32768, 3 * 32768}));
  }
  g.ops.push_back(ppc::sim::testing::linear(g, "head", 64, 128, 16,
                                            {Source::Kind::Op, 18, 0}));
  return g;
}

/// Every class once: fc1 data parallel, relu1 mixed, fc2 tensor parallel on
/// devices 0 and 4, softmax on device 3.
Strategy handMade() {
  return {{{8, 1, 1}, 0, {}},
          {{4, 2}, 0, {}},
          {{1, 2, 1}, 0, {4}},
          {{1, 1}, 3, {}}};
}

std::string read(const fs::path &p) {
  std::ifstream is(p);
  std::stringstream ss;
  ss << is.rdbuf();
  return ss.str();
}

std::vector<std::string> lines(const std::string &text) {
  std::vector<std::string> out;
  std::istringstream is(text);
  for (std::string l; std::getline(is, l);)
    out.push_back(l);
  return out;
}

/// `text` with its wrapped lines joined: each newline and the indent after
/// it become one space.
std::string unwrapped(const std::string &text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\n') {
      out += text[i];
      continue;
    }
    while (i + 1 < text.size() && text[i + 1] == ' ')
      ++i;
    out += ' ';
  }
  return out;
}

class ReportTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("ppc-report-test-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    ASSERT_EQ(statusText(graph.validate()), "");
  }
  void TearDown() override {
    if (!HasFailure())
      fs::remove_all(dir);
  }

  std::string write(const Machine &m, bool scaling = true,
                    Strategy found = handMade()) {
    search::Problem problem{graph, m, cost};
    report::ReportInput in{problem};
    in.modelName = "mlp";
    in.machineName = "round 2x4";
    in.batchSize = 64;
    in.found.algorithm = "mcmc";
    in.found.strategy = std::move(found);
    in.found.iterations = 300;
    in.found.seconds = 0.5;
    for (int i = 0; i <= 3; ++i)
      in.found.trace.push_back(
          {i * 100, i * 0.1, 2e-3 - i * 1e-4, 2e-3 - i * 2e-4});
    in.baselines = {{"data parallel", dataParallel(graph, m.numDevices())},
                    {"one weird trick", search::oneWeirdTrick(graph, m)}};
    in.scaling = scaling;
    in.scalingSearch = scalingSearch;
    return statusText(report::writeReport(dir.string(), in));
  }

  fs::path dir;
  search::SearchOptions scalingSearch = [] {
    search::SearchOptions options;
    options.iterations = 40;
    return options;
  }();
  Graph graph = mlp();
  RooflineCostModel cost;
};

TEST_F(ReportTest, WritesEveryFile) {
  ASSERT_EQ(write(machine(2, 4)), "");
  for (const char *f : {"strategy.json", "summary.txt", "timeline.json",
                        "search-trace.csv", "graph.dot", "graph.html",
                        "baselines.txt", "baselines.json", "scaling.csv"}) {
    EXPECT_TRUE(fs::exists(dir / f)) << f;
    EXPECT_GT(fs::file_size(dir / f), 0u) << f;
  }
  // The timeline is Chrome trace JSON.
  EXPECT_TRUE(nlohmann::json::accept(read(dir / "timeline.json")));
}

TEST_F(ReportTest, StrategyJsonNamesEveryOp) {
  ASSERT_EQ(write(machine(2, 4), false), "");
  nlohmann::json j = nlohmann::json::parse(read(dir / "strategy.json"));
  std::set<std::string> names;
  for (const auto &op : j.at("ops"))
    names.insert(op.at("name").get<std::string>());
  for (const Op &op : graph.ops)
    EXPECT_TRUE(names.count(op.name)) << op.name;
}

TEST_F(ReportTest, SummaryHasHeaderAndOneRowPerOp) {
  ASSERT_EQ(write(machine(2, 4), false), "");
  std::string s = read(dir / "summary.txt");
  for (const char *key :
       {"mlp", "round 2x4", "batch", "64 samples", "mcmc", "iteration time",
        "throughput", "vs data parallel", "peak memory"})
    EXPECT_NE(s.find(key), std::string::npos) << key << "\n" << s;
  // The best baseline is data parallel: not compared with twice.
  EXPECT_EQ(s.find("vs best baseline"), std::string::npos) << s;
  auto rowOf = [&](const std::string &name) {
    for (const std::string &l : lines(s))
      if (l.rfind(name + " ", 0) == 0)
        return l;
    return std::string();
  };
  // The peak broken down into its parts, on the line after it.
  std::vector<std::string> all = lines(s);
  int peaks = 0;
  for (size_t i = 0; i + 1 < all.size(); ++i)
    if (all[i].find("peak memory") != std::string::npos &&
        all[i].find(" per device") != std::string::npos) {
      ++peaks;
      EXPECT_NE(all[i + 1].find("of which"), std::string::npos) << all[i + 1];
      for (const char *part : {"weights ", "gradients ", "optimizer state ",
                               "activations ", "workspace "})
        EXPECT_NE(all[i + 1].find(part), std::string::npos) << part;
    }
  EXPECT_EQ(peaks, 1);
  // Degrees as SOAP letters, devices as compact ranges.
  EXPECT_NE(rowOf("fc1").find("S8"), std::string::npos);
  EXPECT_NE(rowOf("fc1").find("0-7"), std::string::npos);
  EXPECT_NE(rowOf("fc1").find("64x512"), std::string::npos);
  EXPECT_NE(rowOf("relu1").find("S4 P2"), std::string::npos);
  EXPECT_NE(rowOf("fc2").find("P2"), std::string::npos);
  EXPECT_NE(rowOf("fc2").find("0,4"), std::string::npos);
  EXPECT_NE(rowOf("softmax").find(" 3 "), std::string::npos)
      << rowOf("softmax");
}

TEST_F(ReportTest, WhySaysWhatChangedWhatItSavesAndWhetherItConverged) {
  ASSERT_EQ(write(machine(2, 4), false), "");
  std::string s = read(dir / "summary.txt");
  size_t why = s.find("\nwhy\n");
  ASSERT_NE(why, std::string::npos) << s;
  // fc1 stays data parallel; relu1, fc2 and softmax change.
  EXPECT_NE(s.find("Against data parallel it changes 3 of the 4 ops", why),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("-> S4 P2 on 0-7, mixed", why), std::string::npos) << s;
  EXPECT_NE(s.find("ms: S8 on 0-7 -> - on 3, single device", why),
            std::string::npos)
      << s;
  EXPECT_EQ(s.find("fc1, ", why), std::string::npos) << s;
  // The trace's best improves to the last point: still improving.
  EXPECT_NE(s.find("the best was found at iteration 300 (0.30 s)", why),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("still improving in the second half"), std::string::npos);
  // One row per device.
  size_t table = s.find("per device\ndevice  compute ms  comm ms  idle ms");
  ASSERT_NE(table, std::string::npos) << s;
  std::vector<std::string> rows = lines(s.substr(table));
  ASSERT_GT(rows.size(), 10u);
  for (int d = 0; d < 8; ++d)
    EXPECT_EQ(rows[3 + d].find_first_not_of(' '),
              rows[3 + d].find(std::to_string(d)))
        << rows[3 + d];
  // The same paragraphs in the HTML.
  std::string html = read(dir / "graph.html");
  EXPECT_NE(html.find("<h1>Why</h1>"), std::string::npos);
  EXPECT_NE(html.find("Against data parallel it changes 3 of the 4 ops"),
            std::string::npos);
}

TEST_F(ReportTest, WhySaysWhenMoreNodesBuyNothing) {
  // Over a 10 kB/s network the best layout found on all 8 devices keeps the
  // work in one node: the second node adds nothing.
  ASSERT_EQ(write(machine(2, 4, 1e9, 1e4), true, dataParallel(graph, 8)), "");
  std::string s = unwrapped(read(dir / "summary.txt"));
  EXPECT_NE(s.find("More nodes buy nothing: one node (4 devices) takes"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("does no better than one node's. Run on one node (4 "
                   "devices)."),
            std::string::npos)
      << s;
  std::ifstream csv(dir / "scaling.csv");
  std::string line, four, eight;
  while (std::getline(csv, line)) {
    if (line.rfind("4,best found,", 0) == 0)
      four = line.substr(13);
    if (line.rfind("8,best found,", 0) == 0)
      eight = line.substr(13);
  }
  ASSERT_FALSE(four.empty());
  ASSERT_FALSE(eight.empty());
  EXPECT_NEAR(std::stod(eight), std::stod(four), 1e-3 * std::stod(four));
}

TEST_F(ReportTest, WhyNamesTheBaselineTheStrategyEquals) {
  Machine m = machine(2, 4);
  ASSERT_EQ(write(m, false, search::oneWeirdTrick(graph, m)), "");
  std::string s = read(dir / "summary.txt");
  EXPECT_NE(s.find("The strategy is exactly the one weird trick baseline's "
                   "layout"),
            std::string::npos)
      << s;
  ASSERT_EQ(write(m, false, dataParallel(graph, 8)), "");
  EXPECT_NE(read(dir / "summary.txt").find("The strategy is data parallel"),
            std::string::npos);
}

TEST_F(ReportTest, WhySaysWhetherTheSecondNodePays) {
  // The words for each outcome are under test, not the search: the scaling
  // curve's searches make single-op moves only, which leave these layouts
  // where they are (a run move finds the one-node layout on all 8 devices:
  // WhySaysWhenMoreNodesBuyNothing).
  scalingSearch.runMoveProbability = 0;
  // At 1 GFLOP/s and over a 10 kB/s network, data parallel's all-reduce
  // across the nodes costs more than the second node saves.
  ASSERT_EQ(write(machine(2, 4, 1e9, 1e4), true, dataParallel(graph, 8)), "");
  std::string s = unwrapped(read(dir / "summary.txt"));
  EXPECT_NE(s.find("Fewer devices are faster: one node (4 devices) take"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("Run on one node (4 devices)"), std::string::npos) << s;
  // At 1 GFLOP/s the kernels dominate: the second node halves the step.
  ASSERT_EQ(write(machine(2, 4, 1e9), true, dataParallel(graph, 8)), "");
  s = unwrapped(read(dir / "summary.txt"));
  EXPECT_EQ(s.find("Fewer devices are faster"), std::string::npos) << s;
  size_t pays = s.find("More nodes pay: all 8 devices (2 nodes) take");
  ASSERT_NE(pays, std::string::npos) << s;
  EXPECT_NE(s.find("one node (4 devices)", pays), std::string::npos) << s;
  EXPECT_NE(s.find("x faster on 2x the devices.", pays), std::string::npos)
      << s;
  // At 20 GFLOP/s over a 15 MB/s network the second node buys less than
  // the 1.2x (60% of 2x) that pays.
  ASSERT_EQ(write(machine(2, 4, 2e10, 1.5e7), true, dataParallel(graph, 8)),
            "");
  s = unwrapped(read(dir / "summary.txt"));
  EXPECT_NE(s.find("More nodes buy little: all 8 devices (2 nodes) take"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("so one node uses its devices better."), std::string::npos)
      << s;
}

TEST_F(ReportTest, ReplicasRecomputationAndShardingAreShown) {
  // softmax whole on every device of the machine; fc1 recomputed with its
  // weights sharded ZeRO-3 style.
  Strategy s = handMade();
  s[3] = {{1, 1}, 0, {}};
  s[3].replicas = 8;
  s[0].recompute = true;
  s[0].sharding = StateSharding::Parameters;
  ASSERT_EQ(write(machine(2, 4), false, s), "");
  std::string text = read(dir / "summary.txt");
  auto rowOf = [&](const std::string &name) {
    for (const std::string &l : lines(text))
      if (l.rfind(name + " ", 0) == 0)
        return l;
    return std::string();
  };
  EXPECT_NE(rowOf("softmax").find("- x8"), std::string::npos)
      << rowOf("softmax");
  EXPECT_NE(rowOf("softmax").find("0-7"), std::string::npos);
  EXPECT_NE(rowOf("fc1").find("S8 rc Z3"), std::string::npos) << rowOf("fc1");
  EXPECT_NE(text.find("1 replicated"), std::string::npos) << text;
  EXPECT_NE(text.find("MFU"), std::string::npos);
  // The baselines carry their MFU too.
  nlohmann::json j = nlohmann::json::parse(read(dir / "baselines.json"));
  for (const auto &row : j.at("strategies")) {
    EXPECT_GT(row.at("mfu").get<double>(), 0);
    EXPECT_LT(row.at("mfu").get<double>(), 1);
  }
}

TEST_F(ReportTest, SearchTraceCsv) {
  ASSERT_EQ(write(machine(2, 4), false), "");
  std::vector<std::string> l = lines(read(dir / "search-trace.csv"));
  ASSERT_EQ(l.size(), 5u);
  EXPECT_EQ(l[0], "iteration,seconds,current_ms,best_ms");
  EXPECT_EQ(l[4].substr(0, 4), "300,");
}

TEST_F(ReportTest, DotIsPlausible) {
  ASSERT_EQ(write(machine(2, 4), false), "");
  std::string d = read(dir / "graph.dot");
  EXPECT_EQ(d.rfind("digraph ", 0), 0u);
  EXPECT_EQ(std::count(d.begin(), d.end(), '{'),
            std::count(d.begin(), d.end(), '}'));
  for (size_t i = 0; i < graph.ops.size(); ++i)
    EXPECT_NE(
        d.find("  op" + std::to_string(i) + " [label=\"" + graph.ops[i].name),
        std::string::npos);
  EXPECT_NE(d.find("op0 -> op1"), std::string::npos);
  EXPECT_NE(d.find("op2 -> op3"), std::string::npos);
  EXPECT_NE(d.find("cluster_legend"), std::string::npos);
  for (const char *cls :
       {"data parallel", "tensor", "spatial", "mixed", "single device"})
    EXPECT_NE(d.find(cls), std::string::npos) << cls;
  // fc1 (S8) -> relu1 (S4 P2) reshards: its edge carries a byte label.
  size_t edge = d.find("op0 -> op1 [label=\"");
  EXPECT_NE(edge, std::string::npos) << d;
}

TEST_F(ReportTest, HtmlIsSelfContained) {
  ASSERT_EQ(write(machine(2, 4), false), "");
  std::string h = read(dir / "graph.html");
  EXPECT_EQ(h.find("http://"), std::string::npos);
  EXPECT_EQ(h.find("https://"), std::string::npos);
  EXPECT_EQ(h.find("src="), std::string::npos);
  EXPECT_EQ(h.find("<link"), std::string::npos);
  EXPECT_EQ(h.find("@import"), std::string::npos);
  for (const Op &op : graph.ops)
    EXPECT_NE(h.find("\"" + op.name + "\""), std::string::npos) << op.name;
  for (const char *s : {"<svg", "data parallel", "one weird trick",
                        "class=\"best", "id=\"legend\"", "id=\"tip\""})
    EXPECT_NE(h.find(s), std::string::npos) << s;
}

TEST_F(ReportTest, HtmlFoldsRepeatedBlocksLaidOutAlike) {
  graph = residualNet();
  ASSERT_EQ(statusText(graph.validate()), "");
  Machine m = machine(2, 4);
  // Block 3's fc on device 0 alone: blocks 0-2 are alike, and 4-5.
  Strategy found = dataParallel(graph, 8);
  found[10] = {{1, 1, 1}, 0, {}};
  ASSERT_EQ(write(m, false, found), "");
  std::string h = read(dir / "graph.html");
  std::string open = "<script type=\"application/json\" id=\"report-data\">";
  size_t begin = h.find(open);
  ASSERT_NE(begin, std::string::npos);
  begin += open.size();
  nlohmann::json data = nlohmann::json::parse(
      h.substr(begin, h.find("</script>", begin) - begin));
  const nlohmann::json &folds = data["folds"];
  ASSERT_EQ(folds.size(), 2u) << folds.dump();
  // Blocks 1 and 2 fold under block 0, which is drawn whole.
  EXPECT_EQ(folds[0]["begin"], 4);
  EXPECT_EQ(folds[0]["end"], 10);
  EXPECT_EQ(folds[0]["blocks"], 2);
  EXPECT_EQ(folds[0]["length"], 3);
  EXPECT_EQ(folds[0]["likeOp"], 1);
  EXPECT_EQ(folds[0]["like"], "blocks.0");
  EXPECT_EQ(folds[0]["first"], "blocks.1");
  EXPECT_EQ(folds[0]["last"], "blocks.2");
  // Block 3 differs and stays whole; block 5 folds under block 4.
  EXPECT_EQ(folds[1]["begin"], 16);
  EXPECT_EQ(folds[1]["end"], 19);
  EXPECT_EQ(folds[1]["like"], "blocks.4");
  EXPECT_EQ(folds[1]["last"], "blocks.5");
  EXPECT_NE(h.find("id=\"unfold\""), std::string::npos);

  // Every block alike: one fold of five under block 0.
  ASSERT_EQ(write(m, false, dataParallel(graph, 8)), "");
  h = read(dir / "graph.html");
  begin = h.find(open) + open.size();
  data = nlohmann::json::parse(
      h.substr(begin, h.find("</script>", begin) - begin));
  ASSERT_EQ(data["folds"].size(), 1u);
  EXPECT_EQ(data["folds"][0]["blocks"], 5);
  EXPECT_EQ(data["folds"][0]["last"], "blocks.5");
}

TEST_F(ReportTest, WhyTellsCounterpartsChangedAlikeAsOne) {
  graph = residualNet();
  Machine m = machine(2, 4);
  // Every block's fc tensor parallel over the 8 devices.
  Strategy found = dataParallel(graph, 8);
  for (int b = 0; b < 6; ++b)
    found[1 + 3 * b] = {{1, 8, 1}, 0, {}};
  ASSERT_EQ(write(m, false, found), "");
  std::string s = unwrapped(read(dir / "summary.txt"));
  EXPECT_NE(s.find("it changes 6 of the 20 ops"), std::string::npos) << s;
  EXPECT_NE(s.find("blocks.0.fc and 5 alike in blocks.1 ... blocks.5, "),
            std::string::npos)
      << s;
  EXPECT_NE(s.find(" in all: S8 on 0-7 -> P8 on 0-7, tensor"),
            std::string::npos)
      << s;
  EXPECT_GT(s.find("blocks.1.fc"), s.find("per device")) << s;
}

TEST_F(ReportTest, BaselinesMarkTheBest) {
  ASSERT_EQ(write(machine(2, 4), false), "");
  nlohmann::json j = nlohmann::json::parse(read(dir / "baselines.json"));
  const auto &rows = j.at("strategies");
  ASSERT_EQ(rows.size(), 3u);
  int best = 0, found = 0;
  double bestMs = 1e300;
  for (const auto &r : rows) {
    best += r.at("best").get<bool>();
    found += r.at("found").get<bool>();
    if (!r.at("out_of_memory").get<bool>())
      bestMs = std::min(bestMs, r.at("iteration_ms").get<double>());
    EXPECT_TRUE(r.contains("bytes_by_link_kind"));
    EXPECT_TRUE(r.contains("total_bytes"));
    EXPECT_TRUE(r.contains("peak_memory_bytes"));
  }
  EXPECT_EQ(best, 1);
  EXPECT_EQ(found, 1);
  EXPECT_EQ(rows[0].at("name"), "data parallel");
  EXPECT_DOUBLE_EQ(rows[0].at("speedup_vs_data_parallel").get<double>(), 1.0);
  for (const auto &r : rows)
    if (r.at("best").get<bool>()) {
      EXPECT_DOUBLE_EQ(r.at("iteration_ms").get<double>(), bestMs);
      EXPECT_EQ(j.at("best"), r.at("name"));
    }
  std::string t = read(dir / "baselines.txt");
  int starred = 0;
  for (const std::string &l : lines(t))
    starred += l.rfind("*", 0) == 0;
  EXPECT_EQ(starred, 1) << t;
  EXPECT_NE(t.find("one weird trick"), std::string::npos);
  EXPECT_NE(t.find("(found)"), std::string::npos);
}

TEST_F(ReportTest, DataParallelIsAddedWhenMissing) {
  Machine m = machine(2, 4);
  search::Problem problem{graph, m, cost};
  report::ReportInput in{problem};
  in.found.strategy = handMade();
  in.scaling = false;
  ASSERT_EQ(statusText(report::writeReport(dir.string(), in)), "");
  nlohmann::json j = nlohmann::json::parse(read(dir / "baselines.json"));
  ASSERT_EQ(j.at("strategies").size(), 2u);
  EXPECT_EQ(j.at("strategies")[0].at("name"), "data parallel");
  // Batch inferred from the graph input.
  EXPECT_EQ(j.at("batch"), 64);
}

std::vector<int64_t> scalingCounts(const std::string &csv) {
  std::vector<std::string> l = lines(csv);
  EXPECT_EQ(l.at(0), "devices,strategy,iteration_ms,throughput");
  std::vector<int64_t> out;
  for (size_t i = 1; i < l.size(); ++i) {
    EXPECT_EQ(std::count(l[i].begin(), l[i].end(), ','), 3) << l[i];
    out.push_back(std::stoll(l[i]));
  }
  return out;
}

TEST_F(ReportTest, ScalingPowersOfTwo) {
  ASSERT_EQ(write(machine(2, 4)), "");
  std::vector<int64_t> k = scalingCounts(read(dir / "scaling.csv"));
  EXPECT_EQ(k, (std::vector<int64_t>{1, 1, 2, 2, 4, 4, 8, 8}));
}

TEST_F(ReportTest, ScalingOnExplicitMachineSkipsPartialNodes) {
  // 3 nodes x 2: 1 and 2 are in node 0, 4 is two nodes, 6 is all; 8 > 6.
  Machine m = machine(3, 2);
  m.cluster.reset();
  ASSERT_EQ(write(m, true, dataParallel(graph, 6)), "");
  std::vector<int64_t> k = scalingCounts(read(dir / "scaling.csv"));
  EXPECT_EQ(k, (std::vector<int64_t>{1, 1, 2, 2, 4, 4, 6, 6}));
}

TEST_F(ReportTest, UnwritableDirectoryNamesThePath) {
  fs::create_directories(dir);
  std::ofstream(dir / "file") << "x";
  fs::path bad = dir / "file" / "report";
  Machine m = machine(1, 2);
  search::Problem problem{graph, m, cost};
  report::ReportInput in{problem};
  in.found.strategy = dataParallel(graph, 2);
  std::string err = statusText(report::writeReport(bad.string(), in));
  EXPECT_NE(err.find(bad.string()), std::string::npos) << err;
}

} // namespace
