//===- Simulator.cpp - one training iteration, simulated ------------------===//
//
// See Simulator.h for the model. The task graph is never materialized as
// nodes and edges: each op keeps its kernels, partial-sum reductions,
// gradient syncs and updates as arrays, each producer-consumer edge keeps its
// transfers, and the timing pass walks them in issue order, in blocks of
// ops. A delta simulation rebuilds a few arrays, times the blocks a change
// touches and moves the others (SimulatorTiming.cpp), and sums the result
// per block.
//
//===----------------------------------------------------------------------===//

#include "SimulatorImpl.h"

#include <iomanip>
#include <limits>
#include <sstream>

namespace ppc::sim {

absl::Status recomputeProblem(const Graph &graph, size_t op) {
  for (const Source &src : graph.ops[op].operands)
    if (src.kind == Source::Kind::Weight && !graph.weights[src.index].trainable)
      return absl::InvalidArgumentError(
          "'" + graph.ops[op].name + "' updates state in its forward (" +
          graph.weights[src.index].name +
          "): recomputing it would update it twice");
  return absl::OkStatus();
}

int64_t SimResult::peakMemory() const {
  int64_t peak = 0;
  for (const DeviceStats &d : devices)
    peak = std::max(peak, d.memory.total());
  return peak;
}

double SimResult::totalBytes() const {
  double total = 0;
  for (double b : bytesByLinkKind)
    total += b;
  return total;
}

const OptimizerInfo &optimizerInfo(Optimizer optimizer) {
  for (const OptimizerInfo &info : kOptimizers)
    if (info.kind == optimizer)
      return info;
  return kOptimizers[0];
}

const OptimizerInfo *findOptimizer(const std::string &name) {
  for (const OptimizerInfo &info : kOptimizers)
    if (name == info.name)
      return &info;
  return nullptr;
}

TrainingStateBytes trainingStateBytes(int64_t elemBytes, bool trainable,
                                      Optimizer optimizer, bool fp32Gradients) {
  TrainingStateBytes bytes;
  bytes.weight = elemBytes;
  if (!trainable)
    return bytes;
  bytes.gradient = fp32Gradients ? std::max<int64_t>(elemBytes, 4) : elemBytes;
  int64_t states = optimizerInfo(optimizer).stateTensors;
  bool mixed = elemBytes < 4;
  bytes.optimizerState = mixed ? 4 * (1 + states) : elemBytes * states;
  return bytes;
}

std::string optimizerNames() {
  std::vector<std::string> names;
  for (const OptimizerInfo &info : kOptimizers)
    names.push_back(info.name);
  return listAlternatives(names);
}

SimResult Simulator::Impl::stoppedResult() const {
  SimResult r;
  r.stopped = true;
  r.iterationTime = std::numeric_limits<double>::infinity();
  r.devices.resize(numDevices);
  for (int64_t d = 0; d < numDevices; ++d)
    r.devices[d].capacity = options.capacityOf(machine.getSpec(d));
  return r;
}

const std::vector<std::pair<int64_t, int64_t>> &
Simulator::Impl::gatheredWithPrevious(int32_t i) {
  std::vector<std::pair<int64_t, int64_t>> &out = gatheredScratch;
  out.clear();
  const OpState &st = ops[i], &prev = ops[i - 1];
  // deviceBytes: scratch, left at 0.
  for (size_t q = 0; q < prev.devices.size(); ++q)
    deviceBytes[prev.devices[q]] += prev.gatheredBytes[q];
  for (size_t p = 0; p < st.devices.size(); ++p)
    if (st.gatheredBytes[p] > 0 && deviceBytes[st.devices[p]] > 0)
      out.push_back(
          {st.devices[p], deviceBytes[st.devices[p]] + st.gatheredBytes[p]});
  for (int64_t device : prev.devices)
    deviceBytes[device] = 0;
  return out;
}

void Simulator::Impl::addSums(BlockSums &to, const BlockSums &from) {
  for (size_t k = 0; k < to.devices.size(); ++k)
    devicePosition[to.devices[k].first] = static_cast<int32_t>(k);
  for (const auto &[device, add] : from.devices) {
    int32_t &at = devicePosition[device];
    if (at < 0) {
      at = static_cast<int32_t>(to.devices.size());
      to.devices.push_back({device, DeviceStats()});
    }
    DeviceStats &dev = to.devices[at].second;
    dev.computeTime += add.computeTime;
    dev.commTime += add.commTime;
    accumulate(dev.memory, add.memory);
  }
  for (const auto &[device, sums] : to.devices)
    devicePosition[device] = -1;
  for (size_t k = 0; k < from.bytesByLinkKind.size(); ++k) {
    to.bytesByLinkKind[k] += from.bytesByLinkKind[k];
    to.syncBytesByLinkKind[k] += from.syncBytesByLinkKind[k];
  }
  for (size_t k = 0; k < from.exchanges.size(); ++k) {
    to.exchanges[k].count += from.exchanges[k].count;
    to.exchanges[k].bytes += from.exchanges[k].bytes;
  }
}

void Simulator::Impl::sumBlock(int32_t b, BlockSums &out) {
  out.clear();
  // A device's sums (devicePosition: its entry in out.devices, reset below).
  auto stats = [&](int64_t device) -> DeviceStats & {
    int32_t &at = devicePosition[device];
    if (at < 0) {
      at = static_cast<int32_t>(out.devices.size());
      out.devices.push_back({device, DeviceStats()});
    }
    return out.devices[at].second;
  };
  for (int32_t i = blockBegin(b); i < blockEnd(b); ++i) {
    const OpState &st = ops[i];
    // ZeRO-3 weights are gathered one op ahead: while an op runs, its
    // gathered weights and the next op's live together on a device (the
    // block's first op's with the block before's last: result() sums the
    // block again when that one changes).
    if (i > 0)
      for (auto [device, bytes] : gatheredWithPrevious(i)) {
        MemoryUse &m = stats(device).memory;
        m.workspace = std::max(m.workspace, bytes);
      }
    for (size_t p = 0; p < st.devices.size(); ++p) {
      DeviceStats &dev = stats(st.devices[p]);
      dev.computeTime += st.fwdTime[p] * (st.recomputed ? 2 : 1) +
                         st.bwdTime[p] + st.updateTime[p];
      accumulate(dev.memory, st.memory[p]);
    }
    // A recomputed op runs its forward collectives (partial sums,
    // statistics, ZeRO-3 gathers) again before its backward.
    double again = st.recomputed ? 2 : 1;
    for (const auto *list :
         {&st.partialSums, &st.gradSyncs, &st.statSyncs[0], &st.statSyncs[1]})
      for (const Collective &c : *list) {
        bool forward = list == &st.partialSums || list == &st.statSyncs[0];
        double times = forward ? again : 1;
        for (int32_t p : c.partitions)
          stats(st.devices[p]).commTime +=
              times * c.time + c.postTime + (1 + again) * c.gatherTime;
        // A ZeRO-3 sync's bytes are its reduce-scatter's (once) and its
        // gathers' before each use (1 + again of them), alike.
        double once = list != &st.gradSyncs ? 0
                      : c.gatherTime > 0    ? 1 / (2 + again)
                                            : 1;
        for (size_t k = 0; k < c.bytesByLinkKind.size(); ++k) {
          out.bytesByLinkKind[k] += times * c.bytesByLinkKind[k];
          out.syncBytesByLinkKind[k] += once * c.bytesByLinkKind[k];
        }
      }
    if (st.numRings > 0) {
      // A ring runs again with a recomputed forward.
      double moved = 0;
      for (size_t k = 0; k < st.ringForwardBytes.size(); ++k) {
        double bytes = again * st.ringForwardBytes[k] + st.ringBackwardBytes[k];
        out.bytesByLinkKind[k] += bytes;
        moved += bytes;
      }
      SimResult::ExchangeCount &c =
          out.exchanges[static_cast<size_t>(geometry::ExchangeKind::Ring)];
      c.count += static_cast<int64_t>((again + 1) * st.numRings);
      c.bytes += moved;
    }
    for (int32_t id : inEdges[i]) {
      const Edge &e = edges[id];
      for (auto [device, time] : e.commTimeByDevice)
        stats(device).commTime += time;
      // Regathered inputs live only around the consumer's kernels.
      bool regathered = st.regathers && e.weightOperand < 0;
      for (auto [device, bytes] : e.receivedByDevice) {
        MemoryUse &m = stats(device).memory;
        if (regathered)
          m.workspace = std::max(m.workspace, bytes);
        else
          m.activations += bytes;
      }
      for (size_t k = 0; k < e.bytesByLinkKind.size(); ++k)
        out.bytesByLinkKind[k] += e.bytesByLinkKind[k];
      auto count = [&](geometry::ExchangeKind kind,
                       const std::vector<Transfer> &transfers) {
        if (kind == geometry::ExchangeKind::Local)
          return;
        SimResult::ExchangeCount &c = out.exchanges[static_cast<size_t>(kind)];
        ++c.count;
        for (const Transfer &t : transfers)
          c.bytes += static_cast<double>(t.bytes);
      };
      count(e.fwdKind, e.fwd);
      count(e.bwdKind, e.bwd);
    }
  }
  for (const auto &[device, sums] : out.devices)
    devicePosition[device] = -1;
}

SimResult Simulator::Impl::result(double iterationTime, bool keepUndo) {
  if (stopped)
    return stoppedResult();
  int32_t blocks = numBlocks();
  int32_t groups = (blocks + kGroupBlocks - 1) / kGroupBlocks;
  blockSums.resize(blocks);
  groupSums.resize(groups);
  sumsDirty.resize(blocks, 1);
  if (keepUndo) {
    undo.blockSums.clear();
    undo.groupSums.clear();
  }
  std::vector<char> &groupDirty = groupDirtyScratch;
  groupDirty.assign(groups, 0);
  bool previousDirty = false;
  for (int32_t b = 0; b < blocks; ++b) {
    bool dirty = sumsDirty[b] || previousDirty;
    previousDirty = sumsDirty[b];
    sumsDirty[b] = 0;
    if (!dirty)
      continue;
    if (keepUndo) {
      undo.blockSums.emplace_back(b, BlockSums());
      std::swap(undo.blockSums.back().second, blockSums[b]);
    }
    sumBlock(b, blockSums[b]);
    groupDirty[b / kGroupBlocks] = 1;
  }
  for (int32_t g = 0; g < groups; ++g) {
    if (!groupDirty[g])
      continue;
    if (keepUndo) {
      undo.groupSums.emplace_back(g, BlockSums());
      std::swap(undo.groupSums.back().second, groupSums[g]);
    }
    BlockSums &sums = groupSums[g];
    sums.clear();
    for (int32_t b = g * kGroupBlocks;
         b < std::min(blocks, (g + 1) * kGroupBlocks); ++b)
      addSums(sums, blockSums[b]);
  }
  SimResult r;
  r.iterationTime = iterationTime;
  r.devices.resize(numDevices);
  for (int64_t d = 0; d < numDevices; ++d)
    r.devices[d].capacity = options.capacityOf(machine.getSpec(d));
  BlockSums &total = totalScratch;
  total.clear();
  for (const BlockSums &sums : groupSums)
    addSums(total, sums);
  for (const auto &[device, sums] : total.devices) {
    DeviceStats &dev = r.devices[device];
    dev.computeTime = sums.computeTime;
    dev.commTime = sums.commTime;
    dev.memory = sums.memory;
  }
  r.bytesByLinkKind = total.bytesByLinkKind;
  r.syncBytesByLinkKind = total.syncBytesByLinkKind;
  r.exchanges = total.exchanges;
  r.forwardTime = latestEnd(fwdPass);
  r.backwardTime = latestEnd(bwdPass);
  // Results a cascade of recomputations brings back live together.
  for (size_t d = 0; d < recomputePeak.size(); ++d)
    r.devices[d].memory.workspace =
        std::max(r.devices[d].memory.workspace, recomputePeak[d]);
  double worst = -1;
  for (int64_t d = 0; d < numDevices; ++d) {
    DeviceStats &dev = r.devices[d];
    dev.idleTime = std::max(0.0, iterationTime - dev.computeTime);
    double need = static_cast<double>(dev.memory.total()) /
                  static_cast<double>(std::max<int64_t>(1, dev.capacity));
    if (need > worst) {
      worst = need;
      r.tightestDevice = d;
    }
    if (dev.memory.total() > dev.capacity)
      r.outOfMemory = true;
  }
  return r;
}

//===----------------------------------------------------------------------===//
// Simulator
//===----------------------------------------------------------------------===//

Simulator::Simulator(const Graph &graph, const Machine &machine,
                     const CostModel &costModel, SimOptions options)
    : impl(std::make_unique<Impl>(graph, machine, costModel, options)) {}

Simulator::~Simulator() = default;

absl::Status Simulator::checkConfig(size_t op, const OpConfig &config) const {
  if (op >= impl->graph.ops.size())
    return absl::InvalidArgumentError("op " + std::to_string(op) +
                                      " is out of range");
  if (config.recompute)
    if (absl::Status problem = recomputeProblem(impl->graph, op); !problem.ok())
      return problem;
  return ppc::checkConfig(impl->graph.ops[op].space, config, impl->numDevices);
}

SimResult Simulator::simulate(const Strategy &strategy) {
  assert(strategy.size() == impl->graph.ops.size() &&
         "one configuration per op");
  impl->strategy = strategy;
  impl->undo.valid = false;
  impl->stopped = false;
  for (size_t i = 0; i < impl->ops.size(); ++i) {
    if (impl->stopNow())
      return impl->stoppedResult();
    impl->buildOp(i);
  }
  for (Edge &e : impl->edges) {
    if (impl->stopNow())
      return impl->stoppedResult();
    impl->buildEdge(e);
  }
  for (int32_t b = 0; b < impl->numBlocks(); ++b)
    impl->countRecomputes(b);
  impl->sumsDirty.assign(impl->numBlocks(), 1);
  return impl->result(impl->runTiming());
}

SimResult Simulator::update(size_t op, const OpConfig &config) {
  return update({{op, config}});
}

SimResult
Simulator::update(const std::vector<std::pair<size_t, OpConfig>> &changes) {
  Impl &s = *impl;
  Impl::Undo &undo = s.undo;
  // A stopped simulator's states are incomplete: nothing to change or undo.
  undo.valid = !s.stopNow();
  if (!undo.valid)
    return s.stoppedResult();
  undo.configs.clear();
  undo.opIds.clear();
  undo.edgeIds.clear();
  for (const auto &[op, config] : changes) {
    undo.configs.push_back({op, s.strategy[op]});
    s.strategy[op] = config;
  }
  // Every edge a changed op touches: its own, in and out, and the later
  // readers of the results it reads, which may share copies with the edges
  // into it. Built in id order (edges are numbered in consumer order), as
  // an edge's shared copies depend on the earlier readers' edges.
  std::set<int32_t> touched;
  // Ops built so far, by build class: one built alike under the same
  // configuration (a counterpart in a structure move) copies its state.
  std::vector<std::pair<int32_t, size_t>> built;
  for (const auto &[op, config] : changes) {
    // The state goes to undo; a spare from an earlier update is built.
    if (undo.opStates.size() <= undo.opIds.size())
      undo.opStates.emplace_back();
    const OpState &before = undo.opStates[undo.opIds.size()];
    std::swap(s.ops[op], undo.opStates[undo.opIds.size()]);
    undo.opIds.push_back(op);
    if (s.stopNow())
      return s.stoppedResult();
    auto alike = std::find_if(built.begin(), built.end(), [&](const auto &b) {
      return b.first == s.buildClass[op] && b.second != op &&
             s.strategy[b.second] == s.strategy[op];
    });
    if (alike != built.end()) {
      s.ops[op] = s.ops[alike->second];
    } else {
      s.buildOp(op);
      built.push_back({s.buildClass[op], op});
    }
    // The timing stays the last pass's until the op is timed again (the
    // next pass compares with it).
    s.ops[op].copyTimingFrom(before);
    s.recountRecomputeOf(static_cast<int32_t>(op));
    s.markChanged(static_cast<int32_t>(op), /*forward=*/true,
                  /*backward=*/true);
    for (int32_t id : s.inEdges[op]) {
      touched.insert(id);
      for (int32_t later : s.outEdges[s.edges[id].producer])
        if (s.edges[later].consumer > static_cast<int32_t>(op))
          touched.insert(later);
    }
    for (int32_t id : s.outEdges[op])
      touched.insert(id);
  }
  // Edges built so far: one joining ops built alike under the same
  // configurations, in the same way, copies their transfers (a structure
  // move's edges), unless it shares copies with earlier readers.
  std::vector<int32_t> builtEdges;
  auto edgesAlike = [&](const Edge &a, const Edge &b) {
    return a.result == b.result && a.operand == b.operand &&
           a.weightOperand == b.weightOperand && a.readLater == b.readLater &&
           !a.readEarlier && !b.readEarlier &&
           s.buildClass[a.producer] == s.buildClass[b.producer] &&
           s.buildClass[a.consumer] == s.buildClass[b.consumer] &&
           s.strategy[a.producer] == s.strategy[b.producer] &&
           s.strategy[a.consumer] == s.strategy[b.consumer];
  };
  for (int32_t id : touched) {
    if (undo.edgeStates.size() <= undo.edgeIds.size())
      undo.edgeStates.emplace_back();
    Edge &e = s.edges[id], &spare = undo.edgeStates[undo.edgeIds.size()];
    spare.takeIdentity(e);
    std::swap(e, spare);
    const Edge &before = spare;
    undo.edgeIds.push_back(id);
    if (s.stopNow())
      return s.stoppedResult();
    auto alike =
        std::find_if(builtEdges.begin(), builtEdges.end(), [&](int32_t other) {
          return edgesAlike(s.edges[other], e);
        });
    if (alike != builtEdges.end()) {
      Edge identity;
      identity.takeIdentity(e);
      e = s.edges[*alike];
      e.takeIdentity(identity);
    } else {
      s.buildEdge(e);
      builtEdges.push_back(id);
    }
    // The timing stays the last pass's until it is timed again.
    e.fwdEnd = before.fwdEnd;
    e.bwdPackedAt = before.bwdPackedAt;
    // Its forward transfers are the consumer's forward tasks, its backward
    // ones the producer's backward (and the consumer's, packing them).
    s.markChanged(e.consumer, /*forward=*/true, /*backward=*/true);
    s.markChanged(e.producer, /*forward=*/false, /*backward=*/true);
  }
  return s.result(s.runTiming(/*keepUndo=*/true), /*keepUndo=*/true);
}

void Simulator::revert() {
  Impl &s = *impl;
  Impl::Undo &undo = s.undo;
  assert((undo.valid || s.stopped) && "revert() follows an update()");
  if (!undo.valid || s.stopped)
    return;
  undo.valid = false;
  // The inverse of update's steps, in reverse order.
  s.revertTiming();
  for (size_t k = undo.edgeIds.size(); k-- > 0;)
    std::swap(s.edges[undo.edgeIds[k]], undo.edgeStates[k]);
  for (size_t k = undo.opIds.size(); k-- > 0;) {
    std::swap(s.ops[undo.opIds[k]], undo.opStates[k]);
    s.recountRecomputeOf(static_cast<int32_t>(undo.opIds[k]));
  }
  for (size_t k = undo.configs.size(); k-- > 0;)
    s.strategy[undo.configs[k].first] = undo.configs[k].second;
  for (auto &[b, sums] : undo.blockSums)
    std::swap(s.blockSums[b], sums);
  undo.blockSums.clear();
  for (auto &[g, sums] : undo.groupSums)
    std::swap(s.groupSums[g], sums);
  undo.groupSums.clear();
}

const Strategy &Simulator::currentStrategy() const { return impl->strategy; }

Simulator::TimingStats Simulator::lastTimingStats() const {
  return impl->timingStats;
}

double Simulator::nodeCost(size_t op, const OpConfig &config) {
  return impl->nodeCost(op, config);
}

double Simulator::edgeCost(size_t consumer, size_t operand,
                           const OpConfig &producerConfig,
                           const OpConfig &consumerConfig) {
  return impl->edgeCost(consumer, operand, producerConfig, consumerConfig);
}

std::vector<Simulator::OpTimes> Simulator::opTimes() const {
  std::vector<OpTimes> times(impl->ops.size());
  for (size_t i = 0; i < impl->ops.size(); ++i) {
    const OpState &st = impl->ops[i];
    OpTimes &t = times[i];
    for (size_t p = 0; p < st.devices.size(); ++p) {
      t.forward = std::max(t.forward, st.fwdTime[p]);
      // Recomputation runs in backward.
      t.backward = std::max(
          t.backward, st.bwdTime[p] + (st.recomputed ? st.fwdTime[p] : 0));
      const MemoryUse &m = st.memory[p];
      t.memory = std::max(t.memory, m.weights + m.gradients + m.optimizerState +
                                        m.activations);
    }
    // Transfers into a partition run one after another on its links.
    std::vector<double> incoming(st.devices.size(), 0);
    for (int32_t id : impl->inEdges[i])
      for (const Transfer &tr : impl->edges[id].fwd)
        incoming[tr.dst] += tr.time;
    double comm = 0;
    for (double v : incoming)
      comm = std::max(comm, v);
    // Groups run their collectives side by side, a group's own one after
    // another (a staged kernel's reductions).
    for (const auto *list :
         {&st.partialSums, &st.gradSyncs, &st.statSyncs[0], &st.statSyncs[1]}) {
      std::map<std::vector<int32_t>, double> byGroup;
      double worst = 0;
      for (const Collective &c : *list)
        worst = std::max(worst, byGroup[c.partitions] +=
                                c.time + c.postTime + 2 * c.gatherTime);
      comm += worst;
    }
    t.communication = comm;
  }
  return times;
}

double Simulator::forwardBytes(size_t consumer, size_t operand) const {
  double bytes = 0;
  for (int32_t id : impl->inEdges[consumer])
    if (impl->edges[id].operand == static_cast<int32_t>(operand))
      for (const Transfer &t : impl->edges[id].fwd)
        bytes += static_cast<double>(t.bytes);
  return bytes;
}

/// The name of a timeline event: "<op> fwd", "<producer> -> <consumer>"...
static std::string eventName(const Graph &graph, const std::vector<Edge> &edges,
                             const TimelineEvent &ev) {
  if (ev.kind == TaskKind::Transfer || ev.kind == TaskKind::GradTransfer) {
    const Edge &e = edges[ev.op];
    const std::string &to = graph.ops[e.consumer].name;
    std::string from =
        e.weightOperand < 0
            ? graph.ops[e.producer].name
            : "weight " +
                  graph.weights[graph.ops[e.consumer].operands[e.operand].index]
                      .name;
    return ev.kind == TaskKind::Transfer ? from + " -> " + to
                                         : to + " -> " + from + " (grad)";
  }
  const char *what = "";
  switch (ev.kind) {
  case TaskKind::Forward:
    what = " fwd";
    break;
  case TaskKind::Backward:
    what = " bwd";
    break;
  case TaskKind::Update:
    what = " update";
    break;
  case TaskKind::PartialSum:
    what = " partial-sum all-reduce";
    break;
  case TaskKind::GradSync:
    what = " grad sync";
    break;
  case TaskKind::WeightGather:
    what = " weight all-gather";
    break;
  case TaskKind::GradReduce:
    what = " input-gradient all-reduce";
    break;
  case TaskKind::Recompute:
    what = " recompute";
    break;
  default:
    break;
  }
  return graph.ops[ev.op].name + what;
}

void Simulator::writeChromeTrace(std::ostream &os) const {
  namespace ct = chrome_trace;
  const Impl &im = *impl;
  int64_t nd = im.numDevices;
  ct::Writer trace(os);
  // Tracks: pid = device (tid 0 compute, 1 communication), pid nd = links.
  for (int64_t d = 0; d < nd; ++d) {
    trace.add(ct::processName(d, "device " + std::to_string(d) + " (" +
                                     im.machine.devices[d].name + ")"));
    trace.add(ct::threadName(d, 0, "compute"));
    trace.add(ct::threadName(d, 1, "communication"));
  }
  trace.add(ct::processName(nd, "links"));
  for (size_t l = 0; l < im.machine.links.size(); ++l)
    for (int dir = 0; dir < 2; ++dir) {
      const Link &link = im.machine.links[l];
      int64_t a = dir == 0 ? link.src : link.dst;
      int64_t b = dir == 0 ? link.dst : link.src;
      trace.add(ct::threadName(nd, 2 * l + dir,
                               im.machine.getVertexName(a) + " -> " +
                                   im.machine.getVertexName(b)));
    }
  for (const TimelineEvent &ev : im.timeline) {
    int64_t pid, tid;
    if (ev.resource < 2 * nd) {
      pid = ev.resource % nd;
      tid = ev.resource / nd;
    } else {
      pid = nd;
      tid = ev.resource - 2 * nd;
    }
    std::string name = eventName(im.graph, im.edges, ev);
    // A transfer on a compute track is its sender packing it.
    if (ev.resource < nd &&
        (ev.kind == TaskKind::Transfer || ev.kind == TaskKind::GradTransfer))
      name += " (send)";
    trace.add(ct::complete(name, pid, tid, ev.start, ev.duration));
  }
  trace.finish();
}

} // namespace ppc::sim
