//===- Report.cpp - the report directory ----------------------------------===//
//
// Simulates the found strategy (with a timeline) and every baseline once,
// builds the per-op rows, and writes each file from them. The scaling curve
// re-runs a short search on machines made of the first k devices.
//
//===----------------------------------------------------------------------===//

#include "ppc/Report/Report.h"

#include "ReportModel.h"
#include "ppc/Search/StrategyJson.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>

namespace fs = std::filesystem;

namespace ppc::report {
namespace {

absl::Status writeFile(const fs::path &path, const std::string &text) {
  std::ofstream os(path, std::ios::binary | std::ios::trunc);
  if (os)
    os << text;
  if (os)
    os.close();
  if (!os)
    return absl::InternalError("cannot write '" + path.string() + "'");
  return absl::OkStatus();
}

/// Dim 0 of the first graph input an op reads, when the caller gave none.
int64_t inferBatch(const sim::Graph &g) {
  for (const sim::Op &op : g.ops)
    for (size_t i = 0; i < op.operands.size() && i < op.space.operands.size();
         ++i)
      if (op.operands[i].kind == sim::Source::Kind::Input &&
          !op.space.operands[i].shape.empty())
        return op.space.operands[i].shape[0];
  return 1;
}

std::string toLower(std::string s) {
  for (char &c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// The machine of the first `k` devices of `m`, or nullopt when they do not
/// make whole nodes (or a prefix of node 0).
std::optional<Machine> firstDevices(const Machine &m, int64_t k) {
  if (k == m.numDevices())
    return m;
  if (m.cluster) {
    ClusterSpec c = *m.cluster;
    if (k <= c.devicesPerNode) {
      c.nodes = 1;
      c.devicesPerNode = k;
      c.nicsPerNode = std::min(c.nicsPerNode, k);
    } else {
      if (k % c.devicesPerNode)
        return std::nullopt;
      c.nodes = k / c.devicesPerNode;
    }
    return Machine::fromCluster(c, m.name + "[0:" + std::to_string(k) + "]");
  }
  // Explicit graph: keep the first k devices if they are whole nodes or all
  // in node 0, the switches of those nodes (and the network when several
  // nodes remain), and the links between what is kept.
  std::map<int64_t, int64_t> perNode;
  for (const Device &d : m.devices)
    ++perNode[d.node];
  std::map<int64_t, int64_t> kept;
  for (int64_t i = 0; i < k; ++i)
    ++kept[m.devices[i].node];
  bool prefixOfOne = kept.size() == 1;
  for (auto [node, n] : kept)
    if (!prefixOfOne && n != perNode[node])
      return std::nullopt;
  Machine sub;
  sub.name = m.name + "[0:" + std::to_string(k) + "]";
  sub.specs = m.specs;
  sub.devices.assign(m.devices.begin(), m.devices.begin() + k);
  std::vector<int64_t> remap(m.numVertices(), -1);
  for (int64_t i = 0; i < k; ++i)
    remap[i] = i;
  for (int64_t s = 0; s < m.numSwitches(); ++s) {
    const Switch &sw = m.switches[s];
    bool keep = sw.node >= 0 ? kept.count(sw.node) > 0 : kept.size() > 1;
    if (!keep)
      continue;
    remap[m.numDevices() + s] = k + sub.numSwitches();
    sub.switches.push_back(sw);
  }
  for (const Link &l : m.links)
    if (remap[l.src] >= 0 && remap[l.dst] >= 0)
      sub.links.push_back({remap[l.src], remap[l.dst], l.spec});
  if (!sub.validate().ok())
    return std::nullopt;
  return sub;
}

// Ordered: keys stay in the order written (name first), for people.
using Json = nlohmann::ordered_json;

Json bytesJson(const sim::SimResult &r) {
  Json j = Json::object();
  for (int k = 0; k < 8; ++k)
    if (r.bytesByLinkKind[k] > 0)
      j[stringifyLinkKind(static_cast<LinkKind>(k))] = r.bytesByLinkKind[k];
  return j;
}

/// The edges' exchanges by kind: {"all_gather": {"count", "bytes"}, ...}.
Json exchangesJson(const sim::SimResult &r) {
  Json j = Json::object();
  for (geometry::ExchangeKind kind : geometry::kExchangeKinds) {
    const sim::SimResult::ExchangeCount &c =
        r.exchanges[static_cast<size_t>(kind)];
    if (c.count > 0)
      j[std::string(geometry::exchangeKindName(kind))] = {{"count", c.count},
                                                          {"bytes", c.bytes}};
  }
  return j;
}

std::string writeBaselinesText(const ReportModel &m) {
  // Only the link kinds some strategy uses get a column.
  std::vector<int> kinds;
  for (int k = 0; k < 8; ++k)
    for (const StrategyRow &s : m.strategies)
      if (s.result.bytesByLinkKind[k] > 0) {
        kinds.push_back(k);
        break;
      }
  std::vector<std::string> header = {"best",      "strategy", "iter ms",
                                     "samples/s", "MFU",      "vs DP"};
  for (int k : kinds)
    header.push_back(std::string(stringifyLinkKind(static_cast<LinkKind>(k))) +
                     " bytes");
  for (const char *h : {"total bytes", "peak memory", "oom"})
    header.push_back(h);
  std::vector<std::vector<std::string>> rows = {header};
  for (const StrategyRow &s : m.strategies) {
    std::vector<std::string> row = {s.best ? "*" : "",
                                    s.found ? s.name + " (found)" : s.name,
                                    fixed(s.result.iterationTime * 1e3, 3),
                                    fixed(s.throughput, 1),
                                    fixed(100 * s.mfu, 1) + "%",
                                    fixed(s.speedupVsDataParallel, 2) + "x"};
    for (int k : kinds)
      row.push_back(formatBytes(s.result.bytesByLinkKind[k]));
    row.push_back(formatBytes(s.result.totalBytes()));
    row.push_back(formatBytes(static_cast<double>(s.result.peakMemory())));
    row.push_back(s.result.outOfMemory ? "OOM" : "no");
    rows.push_back(std::move(row));
  }
  std::vector<size_t> width(header.size(), 0);
  for (const auto &r : rows)
    for (size_t c = 0; c < r.size(); ++c)
      width[c] = std::max(width[c], r[c].size());
  std::ostringstream os;
  os << "Baselines vs found on " << m.input->problem.machine.numDevices()
     << " devices (batch " << m.input->batchSize << ")\n\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    std::string line;
    for (size_t c = 0; c < rows[i].size(); ++c) {
      std::string pad(width[c] - rows[i][c].size(), ' ');
      // Names and flags left, numbers right.
      line += (c < 2 ? rows[i][c] + pad : pad + rows[i][c]) + "  ";
    }
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    os << line << "\n";
    if (i == 0)
      os << std::string(line.size(), '-') << "\n";
  }
  os << "\nbest (*): the lowest iteration time that fits in memory; vs DP: "
        "speedup over data parallel.\n";
  return os.str();
}

std::string writeBaselinesJson(const ReportModel &m) {
  Json j;
  j["model"] = m.input->modelName;
  j["machine"] = m.input->machineName;
  j["devices"] = m.input->problem.machine.numDevices();
  j["batch"] = m.input->batchSize;
  // What the search's budget stopped short, one line each (empty: nothing).
  j["cut_short"] = m.input->found.cutShort;
  // What the search compared, one line each with its answer.
  j["considered"] = m.input->found.considered;
  for (const StrategyRow &s : m.strategies)
    if (s.best)
      j["best"] = s.name;
  j["strategies"] = Json::array();
  for (const StrategyRow &s : m.strategies) {
    Json e;
    e["name"] = s.name;
    e["found"] = s.found;
    e["iteration_ms"] = s.result.iterationTime * 1e3;
    e["throughput"] = s.throughput;
    e["mfu"] = s.mfu;
    e["bytes_by_link_kind"] = bytesJson(s.result);
    e["exchanges"] = exchangesJson(s.result);
    e["total_bytes"] = s.result.totalBytes();
    e["peak_memory_bytes"] = s.result.peakMemory();
    e["out_of_memory"] = s.result.outOfMemory;
    e["speedup_vs_data_parallel"] = s.speedupVsDataParallel;
    e["best"] = s.best;
    j["strategies"].push_back(std::move(e));
  }
  return j.dump(2) + "\n";
}

std::string writeTrace(const search::SearchResult &found) {
  std::ostringstream os;
  os << "iteration,seconds,current_ms,best_ms\n";
  for (const search::TracePoint &p : found.trace)
    os << p.iteration << "," << fixed(p.seconds, 6) << ","
       << fixed(p.current * 1e3, 6) << "," << fixed(p.best * 1e3, 6) << "\n";
  return os.str();
}

std::vector<ScalingPoint> computeScaling(const ReportModel &m,
                                         double foundObjective) {
  const ReportInput &in = *m.input;
  const search::Problem &p = in.problem;
  int64_t n = p.machine.numDevices();
  std::vector<int64_t> counts;
  for (int64_t k = 1; k < n; k *= 2)
    counts.push_back(k);
  counts.push_back(n);
  sim::SimOptions opts = p.simOptions;
  opts.recordTimeline = false;
  std::vector<ScalingPoint> points;
  for (int64_t k : counts) {
    std::optional<Machine> machine = firstDevices(p.machine, k);
    if (!machine)
      continue;
    search::Problem sub{p.graph, *machine, p.costModel, opts};
    sim::Strategy dp = sim::dataParallel(p.graph, k);
    double dpObjective;
    {
      sim::Simulator s(p.graph, *machine, p.costModel, opts);
      dpObjective = search::objective(sub, s.simulate(dp));
    }
    double best = dpObjective;
    if (k > 1) {
      search::SearchOptions so = in.scalingSearch;
      if (so.iterations <= 0 && so.seconds <= 0)
        so.iterations = 500;
      so.progress = false;
      search::ConfigSpace space(p.graph, *machine);
      search::SearchResult r = search::mcmc(sub, space, {dp}, so);
      best = std::min(best, r.objective);
    }
    // On the whole machine the main search's answer counts too.
    if (k == n)
      best = std::min(best, foundObjective);
    points.push_back({k, dpObjective, best});
  }
  return points;
}

std::string writeScaling(const ReportModel &m) {
  std::ostringstream os;
  os << "devices,strategy,iteration_ms,throughput\n";
  auto row = [&](int64_t k, const char *name, double objective) {
    // The objective is +inf when out of memory: no throughput then.
    os << k << "," << name << "," << fixed(objective * 1e3, 6) << ","
       << fixed(std::isfinite(objective) && objective > 0
                    ? m.input->batchSize / objective
                    : 0,
                3)
       << "\n";
  };
  for (const ScalingPoint &point : m.scaling) {
    row(point.devices, "data parallel", point.dataParallel);
    row(point.devices, "best found", point.best);
  }
  return os.str();
}

/// Two configurations that place the same pieces on the same devices and
/// keep the same state.
bool sameLayout(const OpConfig &a, const OpConfig &b) {
  return a.degrees == b.degrees && a.devices() == b.devices() &&
         a.replicas == b.replicas && a.recompute == b.recompute &&
         a.sharding == b.sharding && a.scatterDim == b.scatterDim &&
         a.stage == b.stage && a.ring == b.ring;
}

bool sameStrategy(const sim::Strategy &a, const sim::Strategy &b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), sameLayout);
}

/// "+1.234 ms" / "-0.5 ms": a change of a time in milliseconds.
std::string signedMs(double ms) {
  return (ms >= 0 ? "+" : "-") + fixed(std::abs(ms), 3) + " ms";
}

std::string signedBytes(double bytes) {
  return (bytes >= 0 ? "+" : "-") + formatBytes(std::abs(bytes));
}

/// The "why" paragraphs (ReportModel::why).
std::vector<std::string>
explain(const ReportModel &m, const sim::Strategy &found,
        const std::vector<sim::Simulator::OpTimes> &foundTimes,
        const sim::Strategy &dataParallel,
        const std::vector<sim::Simulator::OpTimes> &dpTimes,
        const std::vector<std::pair<std::string, sim::Strategy>> &baselines) {
  const ReportInput &in = *m.input;
  const sim::Graph &g = in.problem.graph;
  std::vector<std::string> why;

  // What changes against data parallel, and what it saves.
  std::vector<size_t> changed;
  for (size_t i = 0; i < g.ops.size(); ++i)
    if (!sameLayout(found[i], dataParallel[i]))
      changed.push_back(i);
  if (changed.empty()) {
    why.push_back("The strategy is data parallel: no other layout the "
                  "search simulated was faster.");
  } else if (dpTimes.size() == g.ops.size() &&
             foundTimes.size() == g.ops.size()) {
    double compute = 0, comm = 0, memory = 0;
    auto total = [](const sim::Simulator::OpTimes &t) {
      return t.forward + t.backward + t.communication;
    };
    for (size_t i : changed) {
      compute += (foundTimes[i].forward + foundTimes[i].backward) -
                 (dpTimes[i].forward + dpTimes[i].backward);
      comm += foundTimes[i].communication - dpTimes[i].communication;
      memory += static_cast<double>(foundTimes[i].memory - dpTimes[i].memory);
    }
    // An op of a repeated block and its counterparts in the run's other
    // blocks, changed alike, make one line: a 48-layer model's largest
    // change is then a layer's op 48 times, not five layers' copies of it.
    std::vector<size_t> counterpart(g.ops.size()), blockStart(g.ops.size());
    std::vector<size_t> blockLength(g.ops.size(), 1);
    for (size_t i = 0; i < g.ops.size(); ++i)
      counterpart[i] = blockStart[i] = i;
    for (const search::BlockRun &run : m.blocks)
      for (size_t i = run.begin; i < run.end(); ++i) {
        size_t t = (i - run.begin) % run.length;
        counterpart[i] = run.begin + t;
        blockStart[i] = i - t;
        blockLength[i] = run.length;
      }
    auto layout = [&](const sim::Strategy &s, size_t i) {
      return formatDegrees(g.ops[i], s[i]) + " on " +
             compactDevices(s[i].devices());
    };
    struct Change {
      std::vector<size_t> ops;
      double seconds = 0;
    };
    std::map<std::tuple<size_t, std::string, std::string>, Change> alike;
    for (size_t i : changed) {
      Change &c =
          alike[{counterpart[i], layout(dataParallel, i), layout(found, i)}];
      c.ops.push_back(i);
      c.seconds += total(foundTimes[i]) - total(dpTimes[i]);
    }
    std::vector<const Change *> biggest;
    for (const auto &entry : alike)
      biggest.push_back(&entry.second);
    std::stable_sort(biggest.begin(), biggest.end(),
                     [](const Change *a, const Change *b) {
                       return std::abs(a->seconds) > std::abs(b->seconds) ||
                              (std::abs(a->seconds) == std::abs(b->seconds) &&
                               a->ops.front() < b->ops.front());
                     });
    std::string text =
        "Against data parallel it changes " + std::to_string(changed.size()) +
        " of the " + std::to_string(g.ops.size()) +
        " ops; on them the slowest partitions' kernels take " +
        signedMs(compute * 1e3) + ", their communication " +
        signedMs(comm * 1e3) + " and their memory " + signedBytes(memory) +
        " per device. The largest changes:";
    for (size_t k = 0; k < std::min<size_t>(5, biggest.size()); ++k) {
      const Change &c = *biggest[k];
      size_t i = c.ops.front();
      const OpRow &row = m.ops[i];
      text += "\n    " + row.name;
      if (c.ops.size() > 1) {
        size_t second = c.ops[1], last = c.ops.back();
        text += " and " + std::to_string(c.ops.size() - 1) + " alike in " +
                blockName(m.ops, blockStart[second], blockLength[second]) +
                (c.ops.size() > 2 ? " ... " + blockName(m.ops, blockStart[last],
                                                        blockLength[last])
                                  : std::string()) +
                ", " + signedMs(c.seconds * 1e3) + " in all";
      } else {
        text += ", " + signedMs(c.seconds * 1e3);
      }
      text += ": " + layout(dataParallel, i) + " -> " + row.degrees + " on " +
              row.devices + ", " + stringifyStrategyClass(row.cls);
    }
    why.push_back(text);
  }

  // A baseline the search arrived at.
  for (const auto &[name, strategy] : baselines)
    if (!changed.empty() && sameStrategy(found, strategy)) {
      why.push_back("The strategy is exactly the " + name +
                    " baseline's layout: the search found nothing faster.");
      break;
    }

  // What the scaling curve says.
  if (m.scaling.size() > 1) {
    const ScalingPoint &all = m.scaling.back();
    const ScalingPoint *fastest = &all;
    for (const ScalingPoint &point : m.scaling)
      if (point.best < fastest->best * 0.999)
        fastest = &point;
    const Machine &machine = in.problem.machine;
    int64_t perNode =
        machine.numDevices() / std::max<int64_t>(1, machine.numNodes());
    const ScalingPoint *oneNode = nullptr;
    for (const ScalingPoint &point : m.scaling)
      if (point.devices == perNode)
        oneNode = &point;
    if (fastest != &all && std::isfinite(fastest->best)) {
      std::string fewer = std::to_string(fastest->devices) + " devices";
      if (fastest->devices == 1)
        fewer = "one device";
      else if (machine.numNodes() > 1 && fastest->devices == perNode)
        fewer = "one node (" + fewer + ")";
      else if (machine.numNodes() > 1 && fastest->devices < perNode)
        fewer += " of one node";
      why.push_back("Fewer devices are faster: " + fewer + " take " +
                    fixed(fastest->best * 1e3, 3) + " ms, all " +
                    std::to_string(all.devices) + " " +
                    fixed(all.best * 1e3, 3) +
                    " ms (scaling.csv): the communication more devices "
                    "need costs more than the work they share. Run on " +
                    fewer +
                    ", or give each device more work (a larger "
                    "batch).");
    } else if (std::isfinite(m.scaling.front().best) &&
               std::isfinite(all.best) &&
               all.best > 0.8 * m.scaling.front().best) {
      why.push_back("The curve is flat: " + std::to_string(all.devices) +
                    " devices take " + fixed(all.best * 1e3, 3) +
                    " ms, one device " +
                    fixed(m.scaling.front().best * 1e3, 3) +
                    " ms (scaling.csv): the model is too small for its "
                    "work to pay for splitting (its kernels cost little "
                    "more than their launches). A larger batch or model "
                    "would scale.");
    } else if (oneNode && machine.numNodes() > 1 &&
               std::isfinite(oneNode->best) && std::isfinite(all.best) &&
               all.best > 0 && oneNode->best > all.best * 1.001) {
      double gain = oneNode->best / all.best;
      double times =
          static_cast<double>(all.devices) / static_cast<double>(perNode);
      // Under 60% of linear scaling the extra nodes are better spent on
      // another job.
      bool pays = gain >= 0.6 * times;
      why.push_back(
          std::string(pays ? "More nodes pay" : "More nodes buy little") +
          ": all " + std::to_string(all.devices) + " devices (" +
          std::to_string(machine.numNodes()) + " nodes) take " +
          fixed(all.best * 1e3, 3) + " ms, one node (" +
          std::to_string(perNode) + " devices) " +
          fixed(oneNode->best * 1e3, 3) + " ms (scaling.csv): " +
          fixed(gain, 2) + "x faster on " + fixed(times, 0) + "x the devices" +
          (pays ? std::string(".") : ", so one node uses its devices better."));
    } else if (oneNode && oneNode != &all && machine.numNodes() > 1 &&
               std::isfinite(oneNode->best) && std::isfinite(all.best)) {
      // The best layout found on all devices is one node's (the search
      // may leave devices idle): the other nodes add nothing.
      std::string node = "one node (" + std::to_string(perNode) + " devices)";
      why.push_back("More nodes buy nothing: " + node + " takes " +
                    fixed(oneNode->best * 1e3, 3) + " ms, all " +
                    std::to_string(all.devices) + " devices " +
                    fixed(all.best * 1e3, 3) +
                    " ms (scaling.csv): the fastest layout found for them "
                    "does no better than one node's. Run on " +
                    node + ".");
    }
  }

  // Whether the search converged.
  const search::SearchResult &result = in.found;
  if (!result.trace.empty() && result.iterations > 0) {
    const search::TracePoint *last = &result.trace.front();
    for (const search::TracePoint &point : result.trace)
      if (point.best < last->best * (1 - 1e-9))
        last = &point;
    double share = static_cast<double>(last->iteration) /
                   static_cast<double>(result.iterations);
    std::string spent = std::to_string(result.iterations) + " iterations (" +
                        fixed(result.seconds, 2) + " s)";
    if (last == &result.trace.front())
      why.push_back(
          "Search: nothing it tried in " + spent + " beat its best start (" +
          (result.algorithm.find("dynamic programming") != std::string::npos
               ? "the dynamic programming's answer or a baseline"
               : "a baseline") +
          "): it had converged there.");
    else
      why.push_back(
          "Search: the best was found at iteration " +
          std::to_string(last->iteration) + " (" + fixed(last->seconds, 2) +
          " s) of " + spent +
          (result.iterations > last->iteration
               ? ", none better in the " +
                     std::to_string(result.iterations - last->iteration) +
                     " after. "
               : ". ") +
          (share < 0.5 ? std::string("It had converged on this budget.")
                       : std::string("It was still improving in the second "
                                     "half of its budget: a longer budget "
                                     "may find better.")));
  }
  return why;
}

} // namespace

absl::Status writeReport(const std::string &dir, const ReportInput &input) {
  const search::Problem &p = input.problem;
  const sim::Graph &g = p.graph;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    return absl::InvalidArgumentError(
        "cannot create report directory '" + dir +
        "': " + (ec ? ec.message() : "not a directory"));
  const sim::Strategy &strategy = input.found.strategy;
  if (strategy.size() != g.ops.size())
    return absl::InvalidArgumentError(
        "found strategy has " + std::to_string(strategy.size()) +
        " configurations for " + std::to_string(g.ops.size()) + " ops");

  ReportInput in = input;
  if (in.batchSize <= 0)
    in.batchSize = inferBatch(g);
  ReportModel m;
  m.input = &in;

  // The found strategy, once, with a timeline.
  sim::SimOptions opts = p.simOptions;
  opts.recordTimeline = true;
  opts.countExchanges = true;
  sim::Simulator simulator(g, p.machine, p.costModel, opts);
  for (size_t i = 0; i < g.ops.size(); ++i) {
    PPC_RETURN_IF_ERROR(annotate(simulator.checkConfig(i, strategy[i]),
                                 "found strategy: op '" + g.ops[i].name + "'"));
  }
  m.found = simulator.simulate(strategy);
  std::vector<sim::Simulator::OpTimes> times = simulator.opTimes();
  std::ostringstream timeline;
  // A pipeline is simulated as one (per-op times per micro-batch, the
  // schedule as the timeline); the whole-batch simulation above still
  // gives the edges' bytes.
  const sim::Pipeline &pipeline = input.found.pipeline;
  if (pipeline.enabled()) {
    PPC_RETURN_IF_ERROR(annotate(
        sim::checkPipeline(g, strategy, pipeline, p.machine.numDevices()),
        "found strategy"));
    m.pipeline = sim::simulatePipeline(g, p.machine, p.costModel, opts,
                                       strategy, pipeline);
    m.found = m.pipeline->asSimResult();
    times = m.pipeline->opTimes;
    sim::writePipelineTrace(*m.pipeline, timeline);
  } else {
    simulator.writeChromeTrace(timeline);
  }
  double foundObjective = search::objective(p, m.found);
  m.capacity = m.found.devices.empty()
                   ? 0
                   : m.found.devices[m.found.tightestDevice].capacity;

  for (size_t i = 0; i < g.ops.size(); ++i) {
    const sim::Op &op = g.ops[i];
    OpRow row;
    row.name = op.name.empty() ? "op" + std::to_string(i) : op.name;
    row.kind = op.kind;
    row.shape =
        op.space.results.empty() ? "-" : formatShape(op.space.results[0].shape);
    row.degrees = formatDegrees(op, strategy[i]);
    row.devices = compactDevices(strategy[i].devices());
    row.cls = classify(op, strategy[i]);
    if (i < times.size()) {
      row.fwdMs = times[i].forward * 1e3;
      row.bwdMs = times[i].backward * 1e3;
      row.commMs = times[i].communication * 1e3;
    }
    if (i < times.size())
      row.memoryBytes = times[i].memory;
    m.ops.push_back(std::move(row));
    for (size_t o = 0; o < op.operands.size(); ++o)
      if (op.operands[o].kind == sim::Source::Kind::Op)
        m.edges.push_back({static_cast<size_t>(op.operands[o].index), i,
                           simulator.forwardBytes(i, o)});
  }

  m.blocks = search::findRepeatedBlocks(g);
  m.folds = foldRepeatedBlocks(m.blocks, m.ops);

  // Baselines; data parallel is always compared with, even if not given.
  std::vector<std::pair<std::string, sim::Strategy>> baselines =
      input.baselines;
  auto isDataParallel = [](std::string name) {
    std::replace(name.begin(), name.end(), '-', ' ');
    return toLower(name).rfind("data parallel", 0) == 0;
  };
  if (std::none_of(baselines.begin(), baselines.end(),
                   [&](const auto &b) { return isDataParallel(b.first); }))
    baselines.insert(
        baselines.begin(),
        {"data parallel", sim::dataParallel(g, p.machine.numDevices())});
  // Data parallel (the first baseline of that name) and its per-op times,
  // to say what the found strategy changes; none for a pipeline, whose op
  // times are per micro-batch.
  const sim::Strategy *dataParallel = nullptr;
  std::vector<sim::Simulator::OpTimes> dataParallelTimes;
  {
    sim::SimOptions baseOpts = p.simOptions;
    baseOpts.recordTimeline = false;
    baseOpts.countExchanges = true;
    sim::Simulator s(g, p.machine, p.costModel, baseOpts);
    for (const auto &[name, st] : baselines) {
      if (st.size() != g.ops.size())
        return absl::InvalidArgumentError(
            "baseline '" + name + "' has " + std::to_string(st.size()) +
            " configurations for " + std::to_string(g.ops.size()) + " ops");
      StrategyRow row;
      row.name = name;
      row.result = s.simulate(st);
      row.objective = search::objective(p, row.result);
      m.strategies.push_back(std::move(row));
      if (!dataParallel && isDataParallel(name)) {
        dataParallel = &st;
        if (!pipeline.enabled())
          dataParallelTimes = s.opTimes();
      }
    }
  }
  StrategyRow foundRow;
  foundRow.name = in.found.algorithm.empty() ? "found" : in.found.algorithm;
  foundRow.found = true;
  foundRow.result = m.found;
  foundRow.objective = foundObjective;
  m.strategies.push_back(std::move(foundRow));

  double peakSeconds = sim::peakComputeSeconds(g, p.machine.getSpec(0));
  double inf = std::numeric_limits<double>::infinity();
  m.bestBaselineMs = inf;
  for (StrategyRow &s : m.strategies) {
    double t = s.result.iterationTime;
    s.throughput = t > 0 ? in.batchSize / t : 0;
    s.mfu =
        t > 0 ? peakSeconds / (t * static_cast<double>(p.machine.numDevices()))
              : 0;
    if (!s.found && isDataParallel(s.name) && m.dataParallelMs == 0)
      m.dataParallelMs = t * 1e3;
    if (!s.found && s.objective * 1e3 < m.bestBaselineMs) {
      m.bestBaselineMs = s.objective * 1e3;
      m.bestBaselineName = s.name;
    }
  }
  if (!std::isfinite(m.bestBaselineMs))
    m.bestBaselineMs = 0; // every baseline is out of memory.
  // Exactly one best; the found strategy wins ties (it is what is used).
  size_t best = m.strategies.size() - 1;
  for (size_t i = 0; i < m.strategies.size(); ++i)
    if (m.strategies[i].objective < m.strategies[best].objective)
      best = i;
  m.strategies[best].best = true;
  for (StrategyRow &s : m.strategies)
    s.speedupVsDataParallel =
        s.result.iterationTime > 0 && m.dataParallelMs > 0
            ? m.dataParallelMs / (s.result.iterationTime * 1e3)
            : 0;
  m.bestBaselineIsDataParallel = isDataParallel(m.bestBaselineName);

  if (input.scaling)
    m.scaling = computeScaling(m, foundObjective);
  m.why =
      explain(m, strategy, times, *dataParallel, dataParallelTimes, baselines);

  fs::path d(dir);
  std::vector<std::pair<const char *, std::string>> files = {
      {"strategy.json", search::writeStrategyJson(g, p.machine, strategy,
                                                  &times, &m.found, pipeline)},
      {"summary.txt", writeSummary(m)},
      {"timeline.json", timeline.str()},
      {"search-trace.csv", writeTrace(in.found)},
      {"graph.dot", writeDot(m)},
      {"graph.html", writeHtml(m)},
      {"baselines.txt", writeBaselinesText(m)},
      {"baselines.json", writeBaselinesJson(m)},
  };
  for (const auto &[name, text] : files)
    PPC_RETURN_IF_ERROR(writeFile(d / name, text));
  if (input.scaling)
    PPC_RETURN_IF_ERROR(writeFile(d / "scaling.csv", writeScaling(m)));
  return absl::OkStatus();
}

} // namespace ppc::report
