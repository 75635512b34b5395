//===- Simulator.cpp - one training iteration, simulated ------------------===//
//
// See Simulator.h for the model. The task graph is never materialized as
// nodes and edges: each op keeps its kernels, partial-sum reductions,
// gradient syncs and updates as arrays, each producer-consumer edge keeps its
// transfers, and the timing pass walks them in issue order. This keeps a
// delta simulation to rebuilding a few arrays plus one linear pass.
//
//===----------------------------------------------------------------------===//

#include "ppc/Simulator/Simulator.h"
#include "ppc/Support/Alternatives.h"
#include "ppc/Support/ChromeTrace.h"
#include "ppc/Support/Layout.h"

#include "absl/container/flat_hash_map.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <iomanip>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

namespace ppc::sim {

namespace {

/// Chunks an overlapped tensor-parallel exchange is cut into
/// (SimOptions::overlapTensorParallel): the first chunk's communication
/// (or the last one's) is not hidden. Transformer Engine's pipelined
/// overlap splits into 4 by default.
constexpr double kOverlapChunks = 4;

/// Whether `op` contracts a weight: a weight operand takes part in a
/// contraction (contractedOperands: linear layers, convolutions).
bool contractsWeight(const Op &op) {
  uint64_t contracted = contractedOperands(op);
  for (size_t i = 0; i < op.operands.size() && i < 64; ++i)
    if ((contracted >> i & 1) && op.operands[i].kind == Source::Kind::Weight)
      return true;
  return false;
}

} // namespace

std::string recomputeProblem(const Graph &graph, size_t op) {
  for (const Source &src : graph.ops[op].operands)
    if (src.kind == Source::Kind::Weight && !graph.weights[src.index].trainable)
      return "'" + graph.ops[op].name + "' updates state in its forward (" +
             graph.weights[src.index].name +
             "): recomputing it would update it twice";
  return "";
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

//===----------------------------------------------------------------------===//
// Simulator state
//===----------------------------------------------------------------------===//

namespace {

using Slice = std::vector<Range>;

int64_t volume(const Slice &slice) {
  int64_t v = 1;
  for (const Range &r : slice)
    v *= r.size();
  return v;
}

int64_t overlapVolume(const Slice &a, const Slice &b) {
  int64_t v = 1;
  for (size_t i = 0; i < a.size(); ++i) {
    int64_t lo = std::max(a[i].lo, b[i].lo), hi = std::min(a[i].hi, b[i].hi);
    if (hi <= lo)
      return 0;
    v *= hi - lo;
  }
  return v;
}

/// A slice as a flat key, to group partitions holding the same data.
std::vector<int64_t> sliceKey(const Slice &slice) {
  std::vector<int64_t> key;
  key.reserve(2 * slice.size());
  for (const Range &r : slice) {
    key.push_back(r.lo);
    key.push_back(r.hi);
  }
  return key;
}

/// Groups partitions whose slices are equal; returns the group of each.
std::vector<int32_t> groupBySlice(const std::vector<Slice> &slices,
                                  int32_t &numGroups) {
  std::map<std::vector<int64_t>, int32_t> ids;
  std::vector<int32_t> group(slices.size());
  for (size_t p = 0; p < slices.size(); ++p)
    group[p] =
        ids.emplace(sliceKey(slices[p]), static_cast<int32_t>(ids.size()))
            .first->second;
  numGroups = static_cast<int32_t>(ids.size());
  return group;
}

/// A point-to-point transfer between a partition of the sending op and one
/// of the receiving op.
struct Transfer {
  int32_t src = 0, dst = 0;
  int32_t route = 0; ///< index into Impl::routes.
  int64_t bytes = 0;
  double time = 0;
  /// The sender's part of `time` between ranks that move their own
  /// messages (LinkSpec::sendTime); 0 elsewhere.
  double sendTime = 0;
};

/// Data a partition reads from a partition on its own device.
struct LocalDep {
  int32_t src = 0, dst = 0;
};

/// A collective over some partitions of one op (all on distinct devices).
struct Collective {
  std::vector<int32_t> partitions;
  int64_t bytes = 0;   ///< bytes of the reduced buffer.
  double time = 0;     ///< before the consumer may go on.
  double postTime = 0; ///< all-gather after the update (sharded sync).
  /// ZeRO-3: the all-gather of the sharded weight before the forward
  /// kernels and again before the backward kernels.
  double gatherTime = 0;
  /// Bytes all participants send, by link kind (twice for a sharded sync:
  /// reduce-scatter and all-gather together move what an all-reduce does).
  std::array<double, 8> bytesByLinkKind{};
};

/// The route of transfers from one device to another, as resources.
struct RouteInfo {
  LinkSpec link;
  std::vector<int32_t> resources;
  int64_t src = 0, dst = 0; ///< devices
};

/// Producer result `result` of op `producer` feeds operand `operand` of op
/// `consumer`; or, for a weight edge (`weightOperand` >= 0), the weight that
/// operand `weightOperand` of its holder `producer` reads does.
struct Edge {
  int32_t producer = 0, result = 0, consumer = 0, operand = 0;
  int32_t weightOperand = -1;
  std::vector<Transfer> fwd, bwd;
  std::vector<LocalDep> fwdLocal, bwdLocal;
  /// Gradients summed by an all-reduce instead of transfers: the producer
  /// instances of one piece (partitions of the collective, in the
  /// producer's numbering) each get the sum of what the consumer instance
  /// on their device (`contributors`, parallel) computed for the piece.
  struct GradReduce {
    Collective reduce;
    std::vector<int32_t> contributors;
  };
  std::vector<GradReduce> bwdReduces;
  /// The box each forward transfer carries (activation edges), so that a
  /// later consumer of the same result can share the copy.
  std::vector<Slice> fwdBoxes;
  /// fwd's indices by (destination device, producer copy group), sorted:
  /// what later edges of the same value look up to share a copy.
  std::vector<std::tuple<int64_t, int32_t, int32_t>> fwdByDestination;
  /// Copies this edge shares with an earlier edge of the same result: the
  /// consumer instance `dst` reads what transfer `transfer` of edge `edge`
  /// already brought to its device (one gathered copy per device and box,
  /// not one per consumer); its gradient accumulates there and goes back
  /// with that edge's.
  struct SharedCopy {
    int32_t dst = 0, edge = 0, transfer = 0;
    std::vector<int32_t> gradTo; ///< producer instances its gradient feeds.
  };
  std::vector<SharedCopy> fwdShared;
  /// End of each forward transfer in the last timing pass.
  std::vector<double> fwdEnd;
  /// Between ranks that move their own messages, when the consumer's rank
  /// began packing each backward transfer (after its backward kernel, where
  /// the plan sends the gradient) in the last timing pass.
  std::vector<double> bwdPackedAt;
  // Totals of the transfers, kept so that a result need not walk them.
  std::vector<std::pair<int32_t, double>> commTimeByDevice;
  std::vector<std::pair<int32_t, int64_t>> receivedByDevice;
  std::array<double, 8> bytesByLinkKind{};
};

/// An op under one configuration. Its arrays have one entry per instance
/// (a partition or one of its replicas, see OpConfig::replicas).
struct OpState {
  std::vector<int64_t> devices;
  std::vector<Slice> iter;
  /// resultSlices[r][p]: slice of result r instance p computes (and needs
  /// the gradient of); heldSlices[r][p]: what it keeps after forward for
  /// readers (a piece of it when partial sums are reduce-scattered).
  std::vector<std::vector<Slice>> resultSlices, heldSlices;
  /// operandSlices[o][p]: slice of operand o instance p reads.
  std::vector<std::vector<Slice>> operandSlices;
  /// The partition and replica each instance is; replicas per partition.
  std::vector<int64_t> partition, replica;
  int64_t numReplicas = 1;
  /// Results dropped after forward and computed again in backward.
  bool recomputed = false;
  /// Instances holding the same result slices after forward (partial sums
  /// once all-reduced, copies, and replicas): any of them can serve a
  /// reader.
  std::vector<int32_t> replicaGroup;
  int32_t numReplicaGroups = 0;
  /// Instances computing the same result slices: the groups that sum
  /// partials, and that each receive a reader's gradient.
  std::vector<int32_t> computedGroup;
  /// For each weight operand this op holds (weightHolders), partition p's
  /// slice of it and its replica group; empty for other operands. Weight
  /// edges read them as an activation edge reads resultSlices.
  struct HeldWeight {
    std::vector<Slice> slices;
    std::vector<int32_t> group;
    int32_t numGroups = 0;
  };
  std::vector<HeldWeight> heldWeights;
  std::vector<double> fwdTime, bwdTime, updateTime;
  std::vector<Collective> partialSums, gradSyncs;
  /// A staged kernel's statistics reductions between its stages (forward,
  /// backward), per statistics group.
  std::vector<Collective> statSyncs[2];
  /// Gradient syncs each partition takes part in.
  std::vector<std::vector<int32_t>> syncsOf;
  std::vector<MemoryUse> memory;

  /// Tensor-parallel communication next to this op's kernel overlaps it
  /// (SimOptions::overlapTensorParallel and a contraction over a weight).
  bool overlapsComm = false;
  /// Received activation slices are not kept for backward but gathered
  /// again (SimOptions::regatherInputs and a contraction over a weight).
  bool regathers = false;

  // Timing of the last pass.
  std::vector<double> inReady, fwdEnd, gradReady, bwdEnd, updateEnd, syncEnd;
  /// When each instance's last forward and backward kernel started.
  std::vector<double> fwdStart, bwdStart;
};

/// What a timeline event is; its name is only built when a trace is written.
enum class TaskKind : uint8_t {
  Forward,
  Backward,
  Update,
  PartialSum,
  GradSync,
  WeightGather,
  Transfer,
  GradTransfer,
  GradReduce,
  Recompute,
};

struct TimelineEvent {
  int32_t op; ///< the op, or for transfers the edge.
  TaskKind kind;
  int32_t resource;
  double start, duration;
};

} // namespace

struct Simulator::Impl {
  const Graph &graph;
  const Machine &machine;
  const CostModel &costModel;
  SimOptions options;
  int64_t numDevices;

  Strategy strategy;
  std::vector<OpState> ops;
  std::vector<Edge> edges;
  std::vector<std::vector<int32_t>> inEdges, outEdges;
  /// The use that holds, synchronizes and updates each weight (see
  /// weightHolders): its first, whose op is the last to finish backward.
  std::vector<WeightUse> weightHolder;
  /// Recomputation: the ops read by each op (activations), whether anything
  /// reads an op's results, and the ops to recompute before each op's
  /// backward — those whose latest reader it is (readers follow their
  /// producers, so the first backward to need the results runs there).
  std::vector<std::vector<int32_t>> producersOf;
  std::vector<char> hasReaders;
  /// Per graph input, the (op, operand) that first reads it: the one that
  /// counts its slices as activations (a pipeline stage's input is read by
  /// a layer norm and a residual add, and is one buffer).
  std::vector<std::pair<int32_t, int32_t>> firstInputReader;
  std::vector<std::vector<int32_t>> recomputeBefore;
  /// Per op, whether it was recomputed in the current timing pass; per
  /// device, the bytes of the cascade of recomputations running now and
  /// the most any cascade needs (its results live together until their
  /// backward).
  std::vector<char> recomputedNow;
  std::vector<int64_t> cascadeBytes, recomputePeak;

  // Resources: compute stream d, communication stream numDevices + d,
  // direction k of link l at 2 * numDevices + 2 * l + k, and with shared
  // cores core c of node n at firstCore + n * coresPerNode + c.
  std::vector<double> freeAt;
  int64_t coresPerNode = 0, devicesPerNode = 1, firstCore = 0;
  /// The devices are processes of hosts (a cluster whose devices talk over
  /// shared memory): one thread per rank runs its kernels and copies its
  /// messages, so a message holds its receiver's compute stream while it
  /// moves (the rank waits in its receive, then copies the data out) and a
  /// collective holds every member's (ppc-run's ranks without --overlap).
  bool ranksCopyMessages = false;
  /// Route id per (src * numDevices + dst), filled as transfers need them:
  /// sparse, since a dense numDevices^2 table does not fit in memory for
  /// large machines and a strategy uses few device pairs.
  absl::flat_hash_map<int64_t, int32_t> routeOf;
  std::vector<RouteInfo> routes;
  std::vector<TimelineEvent> timeline;

  Impl(const Graph &graph, const Machine &machine, const CostModel &costModel,
       SimOptions options)
      : graph(graph), machine(machine), costModel(costModel), options(options),
        numDevices(machine.numDevices()) {
    ops.resize(graph.ops.size());
    inEdges.resize(graph.ops.size());
    outEdges.resize(graph.ops.size());
    weightHolder = weightHolders(graph);
    for (size_t c = 0; c < graph.ops.size(); ++c) {
      const Op &op = graph.ops[c];
      for (size_t o = 0; o < op.operands.size(); ++o) {
        const Source &src = op.operands[o];
        Edge e;
        if (src.kind == Source::Kind::Op) {
          e.producer = src.index;
          e.result = src.result;
        } else if (src.kind == Source::Kind::Weight) {
          // Another use of a shared weight reads it from its holder. A
          // second operand of the holder itself reads it locally (an
          // approximation: no op here reads one weight in two layouts).
          const WeightUse &holder = weightHolder[src.index];
          if (holder.op == static_cast<int32_t>(c))
            continue;
          e.producer = holder.op;
          e.weightOperand = holder.operand;
        } else {
          continue;
        }
        e.consumer = static_cast<int32_t>(c);
        e.operand = static_cast<int32_t>(o);
        int32_t id = static_cast<int32_t>(edges.size());
        edges.push_back(std::move(e));
        inEdges[c].push_back(id);
        outEdges[edges.back().producer].push_back(id);
      }
    }
    freeAt.assign(2 * numDevices + 2 * machine.links.size(), 0.0);
    ranksCopyMessages = machine.cluster &&
                        machine.cluster->intra.kind == LinkKind::SharedMemory;
    // Devices that share fewer cores take turns on them: a pool of cores
    // per node after the other resources.
    if (machine.cluster && machine.cluster->coresPerNode > 0 &&
        machine.cluster->coresPerNode < machine.cluster->devicesPerNode) {
      coresPerNode = machine.cluster->coresPerNode;
      devicesPerNode = machine.cluster->devicesPerNode;
      firstCore = static_cast<int64_t>(freeAt.size());
      freeAt.resize(freeAt.size() + machine.cluster->nodes * coresPerNode, 0);
    }
    size_t numOps = graph.ops.size();
    producersOf.resize(numOps);
    hasReaders.assign(numOps, 0);
    recomputeBefore.resize(numOps);
    std::vector<int32_t> lastReader(numOps);
    for (size_t c = 0; c < numOps; ++c)
      lastReader[c] = static_cast<int32_t>(c);
    for (size_t c = 0; c < numOps; ++c)
      for (const Source &src : graph.ops[c].operands)
        if (src.kind == Source::Kind::Op) {
          producersOf[c].push_back(src.index);
          hasReaders[src.index] = 1;
          lastReader[src.index] =
              std::max(lastReader[src.index], static_cast<int32_t>(c));
        }
    for (size_t x = 0; x < numOps; ++x)
      recomputeBefore[lastReader[x]].push_back(static_cast<int32_t>(x));
    firstInputReader.assign(graph.numInputs, {-1, -1});
    for (size_t c = 0; c < numOps; ++c)
      for (size_t o = 0; o < graph.ops[c].operands.size(); ++o) {
        const Source &src = graph.ops[c].operands[o];
        if (src.kind == Source::Kind::Input && src.index >= 0 &&
            src.index < graph.numInputs &&
            firstInputReader[src.index].first < 0)
          firstInputReader[src.index] = {static_cast<int32_t>(c),
                                         static_cast<int32_t>(o)};
      }
  }

  /// The id of the route from `src` to `dst` in `routes`.
  int32_t routeId(int64_t src, int64_t dst) {
    auto [it, inserted] = routeOf.try_emplace(src * numDevices + dst, -1);
    if (inserted) {
      RouteInfo info;
      info.src = src;
      info.dst = dst;
      info.link = machine.effectiveLink(src, dst);
      if (std::optional<Route> r = machine.route(src, dst)) {
        int64_t at = src;
        for (int64_t l : r->links) {
          const Link &link = machine.links[l];
          int dir = link.src == at ? 0 : 1;
          at = dir == 0 ? link.dst : link.src;
          info.resources.push_back(
              static_cast<int32_t>(2 * numDevices + 2 * l + dir));
        }
      }
      it->second = static_cast<int32_t>(routes.size());
      routes.push_back(std::move(info));
    }
    return it->second;
  }
  const RouteInfo &route(int64_t src, int64_t dst) {
    return routes[routeId(src, dst)];
  }

  /// The instances of each (group, replica) pair: for `group` numbering
  /// instances by the data they hold, the instances of one replica that
  /// hold the same data. Empty pairs are left out.
  static std::vector<std::vector<int32_t>>
  membersPerReplica(const OpState &st, const std::vector<int32_t> &group,
                    int32_t numGroups) {
    std::vector<std::vector<int32_t>> members(numGroups * st.numReplicas);
    for (size_t p = 0; p < group.size(); ++p)
      members[group[p] * st.numReplicas + st.replica[p]].push_back(
          static_cast<int32_t>(p));
    members.erase(std::remove_if(members.begin(), members.end(),
                                 [](const auto &m) { return m.empty(); }),
                  members.end());
    return members;
  }

  /// A gradient sync of `bytes` over `members` of `st`: an all-reduce, or
  /// when `sharded` a reduce-scatter of the gradients and an all-gather of
  /// `gatherBytes` of updated parameters (-1: as many as the gradients),
  /// each priced as half an all-reduce of its size, at the rate of a
  /// bucket of at least `bucketBytes`.
  Collective makeCollective(const OpState &st, std::vector<int32_t> members,
                            int64_t bytes, bool sharded,
                            int64_t bucketBytes = 0, int64_t gatherBytes = -1) {
    Collective c;
    c.partitions = std::move(members);
    c.bytes = bytes;
    std::vector<int64_t> devices;
    for (int32_t p : c.partitions)
      devices.push_back(st.devices[p]);
    // An all-reduce of `b` bytes; `weight` of its link bytes are counted.
    auto allReduce = [&](int64_t b, double weight) {
      double size = std::max<double>(static_cast<double>(b),
                                     static_cast<double>(bucketBytes));
      AllReducePlan plan = planAllReduce(machine, devices, size);
      double share = size > 0 ? static_cast<double>(b) / size : 0;
      for (size_t k = 0; k < c.bytesByLinkKind.size(); ++k)
        c.bytesByLinkKind[k] += plan.bytesByLinkKind[k] * share * weight;
      return plan.time * share;
    };
    if (!sharded) {
      c.time = allReduce(bytes, 1);
    } else if (gatherBytes < 0 || gatherBytes == bytes) {
      c.time = c.postTime = allReduce(bytes, 1) / 2;
    } else {
      c.time = allReduce(bytes, 0.5) / 2;
      c.postTime = allReduce(gatherBytes, 0.5) / 2;
    }
    return c;
  }

  /// Rebuilds everything of op `i` that depends on its own configuration.
  void buildOp(size_t i) { buildOpState(i, strategy[i], ops[i]); }

  /// Builds into `st` what op `i` is under `config`.
  void buildOpState(size_t i, const OpConfig &config, OpState &st) {
    const Op &op = graph.ops[i];
    geometry::OpLayout layout = geometry::computeLayout(op.space, config);
    // Statistics groups of a staged kernel (a group of one exchanges
    // nothing).
    std::vector<std::vector<int64_t>> statGroups;
    if (op.space.staged)
      statGroups = layout.groupsAgreeingExcept(op.space.staged->acrossDims);
    st.devices = std::move(layout.devices);
    st.iter = std::move(layout.iter);
    st.resultSlices = std::move(layout.resultBoxes);
    st.heldSlices = std::move(layout.heldBoxes);
    bool scattered = std::find(layout.scattered.begin(), layout.scattered.end(),
                               true) != layout.scattered.end();
    st.operandSlices = std::move(layout.operandBoxes);
    st.partition = std::move(layout.partition);
    st.replica = std::move(layout.replica);
    st.numReplicas = config.replicas;
    // Results nothing reads (the graph's outputs) are kept.
    st.recomputed = config.recompute && hasReaders[i];
    st.overlapsComm = options.overlapTensorParallel && contractsWeight(op);
    st.regathers = options.regatherInputs && contractsWeight(op);
    int32_t n = static_cast<int32_t>(st.devices.size());

    // Replicas run the same kernels: cost each partition once.
    st.fwdTime.resize(n);
    st.bwdTime.resize(n);
    for (int32_t p = 0; p < n; ++p) {
      if (st.replica[p] != 0) {
        st.fwdTime[p] = st.fwdTime[p - st.replica[p]];
        st.bwdTime[p] = st.bwdTime[p - st.replica[p]];
        continue;
      }
      KernelShape shape = kernelShape(op, config.degrees, st.partition[p]);
      const DeviceSpec &spec = machine.getSpec(st.devices[p]);
      st.fwdTime[p] = costModel.kernelTime(op, shape, Phase::Forward, spec);
      st.bwdTime[p] = costModel.kernelTime(op, shape, Phase::Backward, spec);
    }

    // Instances computing the same result slices hold copies of it. Within
    // one replica they are partitions that differ only in dims the result
    // does not index, so they hold partial sums: all-reduce them, or
    // reduce-scatter them (OpConfig::scatterDim, half the time and bytes),
    // each replica on its own.
    st.partialSums.clear();
    st.replicaGroup.assign(n, 0);
    st.numReplicaGroups = n;
    st.computedGroup.assign(n, 0);
    if (!op.space.results.empty()) {
      auto joinedOf = [&](const std::vector<std::vector<Slice>> &perResult) {
        std::vector<Slice> joined(n);
        for (int32_t p = 0; p < n; ++p)
          for (const auto &slices : perResult)
            joined[p].insert(joined[p].end(), slices[p].begin(),
                             slices[p].end());
        return joined;
      };
      int32_t numComputed = 0;
      st.computedGroup = groupBySlice(joinedOf(st.resultSlices), numComputed);
      st.replicaGroup =
          scattered ? groupBySlice(joinedOf(st.heldSlices), st.numReplicaGroups)
                    : st.computedGroup;
      if (!scattered)
        st.numReplicaGroups = numComputed;
      for (std::vector<int32_t> &m :
           membersPerReplica(st, st.computedGroup, numComputed)) {
        if (m.size() < 2)
          continue;
        int64_t bytes = 0;
        for (const auto &slices : st.resultSlices)
          bytes += volume(slices[m.front()]) * op.elemBytes;
        Collective sum =
            makeCollective(st, std::move(m), bytes, /*sharded=*/scattered);
        if (scattered) {
          sum.postTime = 0;
          for (double &b : sum.bytesByLinkKind)
            b /= 2;
        }
        st.partialSums.push_back(std::move(sum));
      }
    }

    // A staged kernel reduces its float32 scratch over each statistics
    // group after the stages the op names (batch norm's batch sums, a
    // vocabulary-parallel cross-entropy's row maxima and sums), as the
    // lowering emits them.
    for (int pass = 0; pass < 2; ++pass) {
      st.statSyncs[pass].clear();
      for (const std::vector<int64_t> &group : statGroups)
        for (const StageScratch &scratch :
             pass == 0 ? op.space.staged->forward : op.space.staged->backward)
          if (scratch.syncAfter >= 0 && group.size() > 1) {
            std::vector<int64_t> shape =
                op.space.staged->shapeOf(scratch, st.iter[group.front()]);
            int64_t bytes = 4;
            for (int64_t size : shape)
              bytes *= size;
            st.statSyncs[pass].push_back(makeCollective(
                st, std::vector<int32_t>(group.begin(), group.end()), bytes,
                /*sharded=*/false));
          }
    }

    // Weights: each partition keeps its slice; replicas of a slice
    // synchronize their gradients.
    // ZeRO stage of the weights this op holds; grad-sync=reduce-scatter
    // asks for at least stage 1 everywhere.
    StateSharding requested =
        options.gradSync == GradSync::ReduceScatterAllGather
            ? std::max(config.sharding, StateSharding::Optimizer)
            : config.sharding;
    int states = optimizerInfo(options.optimizer).stateTensors;
    st.gradSyncs.clear();
    st.syncsOf.assign(n, {});
    st.memory.assign(n, MemoryUse());
    std::vector<int64_t> updateElems(n, 0);
    int64_t updateElemBytes = 4;
    st.heldWeights.assign(op.operands.size(), {});
    for (size_t o = 0; o < op.operands.size(); ++o) {
      const Source &src = op.operands[o];
      if (src.kind == Source::Kind::Input &&
          firstInputReader[src.index] ==
              std::make_pair(static_cast<int32_t>(i), static_cast<int32_t>(o)))
        for (int32_t p = 0; p < n; ++p)
          st.memory[p].activations +=
              volume(st.operandSlices[o][p]) * op.elemBytes;
      // A weight is held, synchronized and updated by one use (see
      // weightHolders); other uses reach it through weight edges.
      if (src.kind != Source::Kind::Weight ||
          weightHolder[src.index].op != static_cast<int32_t>(i) ||
          weightHolder[src.index].operand != static_cast<int32_t>(o))
        continue;
      const Weight &w = graph.weights[src.index];
      OpState::HeldWeight &held = st.heldWeights[o];
      std::vector<Slice> &slices = held.slices;
      slices = st.operandSlices[o];
      held.group = groupBySlice(slices, held.numGroups);
      // Replicas compute identical gradients: each replica synchronizes
      // its copy with the instances of its own replica only. A group shards
      // its training state as ZeRO's stage says when its piece has a row
      // per member (geometry::zeroShardable, the lowering's rule too),
      // member j keeping shard j (geometry::zeroShard).
      TrainingStateBytes perElement = trainingStateBytes(
          w.elemBytes, w.trainable, options.optimizer, options.fp32Gradients);
      for (std::vector<int32_t> &m :
           membersPerReplica(st, held.group, held.numGroups)) {
        int64_t k = static_cast<int64_t>(m.size());
        const Slice &piece = slices[m.front()];
        StateSharding stage = w.trainable && geometry::zeroShardable(piece, k)
                                  ? requested
                                  : StateSharding::None;
        int64_t elements = volume(piece);
        for (int64_t j = 0; j < k; ++j) {
          int32_t p = m[j];
          int64_t mine = stage == StateSharding::None
                             ? elements
                             : volume(geometry::zeroShard(piece, k, j));
          MemoryUse &mem = st.memory[p];
          mem.weights += perElement.weight *
                         (stage == StateSharding::Parameters ? mine : elements);
          if (stage == StateSharding::Parameters)
            mem.workspace =
                std::max(mem.workspace, elements * perElement.weight);
          if (!w.trainable)
            continue;
          mem.gradients +=
              perElement.gradient *
              (stage >= StateSharding::Gradients ? mine : elements);
          int64_t updated = stage >= StateSharding::Optimizer ? mine : elements;
          mem.optimizerState += updated * perElement.optimizerState;
          updateElems[p] += updated;
          updateElemBytes = w.elemBytes;
        }
        if (!w.trainable || k < 2)
          continue;
        int64_t bytes = elements * perElement.gradient;
        int32_t id = static_cast<int32_t>(st.gradSyncs.size());
        for (int32_t p : m)
          st.syncsOf[p].push_back(id);
        Collective sync = makeCollective(
            st, std::move(m), bytes, stage >= StateSharding::Optimizer,
            options.gradBucketBytes, elements * perElement.weight);
        if (stage == StateSharding::Parameters) {
          // No gather after the update; one before each use instead (the
          // forward, the backward, and a recomputation between them):
          // each moves half of what the all-reduce's bytes are.
          sync.gatherTime = sync.postTime;
          sync.postTime = 0;
          double gathers = st.recomputed ? 3 : 2;
          for (double &b : sync.bytesByLinkKind)
            b *= (1 + gathers) / 2;
        }
        st.gradSyncs.push_back(std::move(sync));
      }
    }
    st.updateTime.assign(n, 0);
    for (int32_t p = 0; p < n; ++p) {
      if (updateElems[p] > 0)
        st.updateTime[p] =
            costModel.updateTime(updateElems[p], updateElemBytes, states,
                                 machine.getSpec(st.devices[p]));
      // Results are kept for backward (unless recomputed: then they are
      // alive only around their forward and backward use), reduce-scattered
      // ones as their pieces; the largest result (gradient) is the
      // transient buffer of the backward kernel.
      // A flat view (a reshape) whose boxes visit the same elements in the
      // same order shares its operand's buffer, and its gradient the
      // result gradient's (ppc-alias-views): it holds nothing of its own.
      if (op.space.flatView &&
          geometry::sameFlatOrder(
              op.space.operands[0].shape, st.operandSlices[0][p],
              op.space.results[0].shape, st.resultSlices[0][p]))
        continue;
      for (size_t r = 0; r < st.resultSlices.size(); ++r) {
        int64_t bytes = volume(st.resultSlices[r][p]) * op.elemBytes;
        if (!st.recomputed)
          st.memory[p].activations +=
              volume(st.heldSlices[r][p]) * op.elemBytes;
        st.memory[p].workspace = std::max(st.memory[p].workspace, bytes);
      }
    }
  }

  /// Rebuilds the transfers of edge `e` for the current configurations.
  void buildEdge(Edge &e) {
    buildTransfers(e, ops[e.producer], ops[e.consumer], /*shareCopies=*/true);
    summarizeEdge(e, ops[e.producer], ops[e.consumer]);
  }

  /// The transfer of an edge before `e` from the same result that brings a
  /// box containing `box` from copy group `group` to `device`, as (edge,
  /// transfer), or (-1, -1).
  std::pair<int32_t, int32_t> sharedCopy(const Edge &e, int32_t group,
                                         int64_t device, const Slice &box) {
    // Only readers without replicas share (as the lowering does).
    if (ops[e.consumer].numReplicas != 1)
      return {-1, -1};
    for (int32_t id : outEdges[e.producer]) {
      const Edge &earlier = edges[id];
      if (&earlier == &e)
        break;
      if (earlier.weightOperand >= 0 || earlier.result != e.result ||
          ops[earlier.consumer].numReplicas != 1)
        continue;
      // The earlier edge's transfers to `device` from copy group `group`,
      // in transfer order.
      const auto &index = earlier.fwdByDestination;
      auto it = std::lower_bound(index.begin(), index.end(),
                                 std::make_tuple(device, group, int32_t{0}));
      for (; it != index.end() && std::get<0>(*it) == device &&
             std::get<1>(*it) == group;
           ++it) {
        int32_t t = std::get<2>(*it);
        if (geometry::contains(earlier.fwdBoxes[t], box))
          return {id, t};
      }
    }
    return {-1, -1};
  }

  /// Builds the transfers of `e` between the producer and consumer states.
  /// With `shareCopies`, a region an earlier edge of the same result already
  /// brings to a consumer's device is read from there (the simulation);
  /// without, every edge fetches its own (the additive costs of the DP).
  void buildTransfers(Edge &e, const OpState &prod, const OpState &cons,
                      bool shareCopies = false) {
    // Readers fetch what the producer holds after forward; gradients go
    // back to what it computed.
    const std::vector<Slice> *produced = &prod.heldSlices[e.result];
    const std::vector<Slice> *computed = &prod.resultSlices[e.result];
    const std::vector<int32_t> *replicaGroup = &prod.replicaGroup;
    const std::vector<int32_t> *gradGroup = &prod.computedGroup;
    int32_t numReplicaGroups = prod.numReplicaGroups;
    int64_t elemBytes = graph.ops[e.producer].elemBytes;
    bool weightEdge = e.weightOperand >= 0;
    if (weightEdge) {
      // The holder's pieces of the weight, grouped into replicas.
      const OpState::HeldWeight &held = prod.heldWeights[e.weightOperand];
      produced = &held.slices;
      computed = &held.slices;
      replicaGroup = &held.group;
      gradGroup = &held.group;
      numReplicaGroups = held.numGroups;
      const Op &consumer = graph.ops[e.consumer];
      elemBytes = graph.weights[consumer.operands[e.operand].index].elemBytes;
    }
    e.fwd.clear();
    e.bwd.clear();
    e.fwdLocal.clear();
    e.bwdLocal.clear();
    e.bwdReduces.clear();
    e.fwdBoxes.clear();
    e.fwdShared.clear();
    shareCopies = shareCopies && !weightEdge;
    // (consumer instance, copy group) pairs whose region the consumer reads
    // from an earlier edge's copy (its gradient goes back with that edge's).
    std::set<std::pair<int32_t, int32_t>> sharedPairs;

    int32_t np = static_cast<int32_t>(prod.devices.size());
    int32_t nq = static_cast<int32_t>(cons.devices.size());
    // Input gradients summed by an all-reduce (see allReducedGradientGroups).
    std::vector<std::vector<int64_t>> reducedGroups;
    std::vector<char> reduced(prod.devices.size(), 0);
    if (!weightEdge)
      reducedGroups = geometry::allReducedGradientGroups(
          *computed, prod.devices, cons.operandSlices[e.operand], cons.devices,
          cons.partition);
    for (const std::vector<int64_t> &group : reducedGroups)
      for (int64_t p : group)
        reduced[p] = 1;
    auto bandwidth = [&](int64_t from, int64_t to) {
      return route(from, to).link.bandwidth;
    };
    std::vector<int64_t> overlap(np, 0);
    std::vector<int32_t> chosen(numReplicaGroups, -1);
    geometry::OverlapIndex index(*produced);
    std::vector<size_t> candidates;
    std::vector<int32_t> touched; // replica groups with a chosen instance
    for (int32_t q = 0; q < nq; ++q) {
      const Slice &needed = cons.operandSlices[e.operand][q];
      int64_t dstDevice = cons.devices[q];
      index.candidates(needed, candidates);
      for (size_t p : candidates)
        overlap[p] = overlapVolume(needed, (*produced)[p]);

      // Forward: one copy of each replicated region, from the local replica
      // if there is one, else from the replica with the fastest link.
      for (int32_t g : touched)
        chosen[g] = -1;
      touched.clear();
      for (size_t candidate : candidates) {
        int32_t p = static_cast<int32_t>(candidate);
        if (overlap[p] == 0)
          continue;
        if (chosen[(*replicaGroup)[p]] < 0)
          touched.push_back((*replicaGroup)[p]);
        int32_t &best = chosen[(*replicaGroup)[p]];
        if (best < 0 || prod.devices[p] == dstDevice) {
          best = p;
          continue;
        }
        if (prod.devices[best] == dstDevice)
          continue;
        if (route(prod.devices[p], dstDevice).link.bandwidth >
            route(prod.devices[best], dstDevice).link.bandwidth)
          best = p;
      }
      // In replica group order, as every instance was once tried.
      std::sort(touched.begin(), touched.end());
      for (int32_t g : touched) {
        int32_t p = chosen[g];
        if (p < 0)
          continue;
        if (prod.devices[p] == dstDevice) {
          e.fwdLocal.push_back({p, q});
          continue;
        }
        Slice box;
        if (!weightEdge)
          box = *geometry::intersect(needed, (*produced)[p]);
        if (shareCopies) {
          auto [edge, transfer] =
              sharedCopy(e, (*replicaGroup)[p], dstDevice, box);
          if (edge >= 0) {
            e.fwdShared.push_back({q, edge, transfer, {}});
            sharedPairs.insert({q, (*gradGroup)[p]});
            continue;
          }
        }
        e.fwd.push_back(makeTransfer(p, q, prod.devices[p], dstDevice,
                                     overlap[p] * elemBytes));
        if (!weightEdge)
          e.fwdBoxes.push_back(std::move(box));
      }
    }
    orderAsRounds(e.fwd, prod.devices, cons.devices,
                  weightEdge ? nullptr : &e.fwdBoxes);
    priceExchanges(e.fwd, prod.devices, cons.devices, e.fwdLocal);
    e.fwdByDestination.clear();
    if (!weightEdge) {
      for (size_t t = 0; t < e.fwd.size(); ++t)
        e.fwdByDestination.emplace_back(cons.devices[e.fwd[t].dst],
                                        (*replicaGroup)[e.fwd[t].src],
                                        static_cast<int32_t>(t));
      std::sort(e.fwdByDestination.begin(), e.fwdByDestination.end());
    }

    // Integer values (indices, labels) carry no gradient back.
    if (!weightEdge && !graph.ops[e.producer].differentiable)
      return;

    // Backward: each consumer partition's gradient reaches every copy of
    // the producer's result, or, for a weight, each group of holder
    // instances that synchronize it once (see gradientRoutes); a region read
    // from a shared copy is summed there and sent back by the edge that
    // brought it.
    std::vector<int64_t> producerReplicas(np);
    for (int32_t p = 0; p < np; ++p)
      producerReplicas[p] = prod.replica[p];
    // The shared copies each consumer instance reads, in order.
    std::vector<std::vector<int32_t>> sharedOf(nq);
    for (size_t c = 0; c < e.fwdShared.size(); ++c)
      sharedOf[e.fwdShared[c].dst].push_back(static_cast<int32_t>(c));
    for (const geometry::GradientRoute &route : geometry::gradientRoutes(
             *computed, prod.devices, producerReplicas,
             cons.operandSlices[e.operand], cons.devices, cons.numReplicas,
             reduced, /*everyMember=*/!weightEdge, bandwidth)) {
      int32_t q = static_cast<int32_t>(route.consumer);
      int32_t p = static_cast<int32_t>(route.producer);
      if (sharedPairs.count({q, (*gradGroup)[p]})) {
        for (int32_t c : sharedOf[q])
          e.fwdShared[c].gradTo.push_back(p);
        continue;
      }
      if (prod.devices[p] == cons.devices[q])
        e.bwdLocal.push_back({q, p});
      else
        e.bwd.push_back(makeTransfer(q, p, cons.devices[q], prod.devices[p],
                                     volume(route.box) * elemBytes));
    }

    orderAsRounds(e.bwd, cons.devices, prod.devices, nullptr);
    priceExchanges(e.bwd, cons.devices, prod.devices, e.bwdLocal);

    // Consumer instances by device, in order.
    std::map<int64_t, std::vector<int32_t>> consumersOn;
    if (!reducedGroups.empty())
      for (int32_t q = 0; q < nq; ++q)
        consumersOn[cons.devices[q]].push_back(q);
    for (const std::vector<int64_t> &group : reducedGroups) {
      Edge::GradReduce r;
      std::vector<int32_t> members(group.begin(), group.end());
      for (int32_t p : members)
        for (int32_t q : consumersOn[prod.devices[p]])
          if (overlapVolume(cons.operandSlices[e.operand][q], (*computed)[p]) >
              0)
            r.contributors.push_back(q);
      int64_t bytes = volume((*computed)[members.front()]) * elemBytes;
      r.reduce =
          makeCollective(prod, std::move(members), bytes, /*sharded=*/false);
      e.bwdReduces.push_back(std::move(r));
    }
  }

  /// Per-device communication time and received bytes, and bytes per link
  /// kind, of the transfers of `e`.
  void summarizeEdge(Edge &e, const OpState &prod, const OpState &cons) {
    e.commTimeByDevice.clear();
    e.receivedByDevice.clear();
    e.bytesByLinkKind.fill(0);
    if (e.fwd.empty() && e.bwd.empty() && e.bwdReduces.empty())
      return;
    std::map<int32_t, double> comm;
    std::map<int32_t, int64_t> received;
    for (const Transfer &t : e.fwd) {
      comm[prod.devices[t.src]] += t.time;
      comm[cons.devices[t.dst]] += t.time;
      received[cons.devices[t.dst]] += t.bytes;
      e.bytesByLinkKind[static_cast<int>(routes[t.route].link.kind)] += t.bytes;
    }
    for (const Transfer &t : e.bwd) {
      comm[cons.devices[t.src]] += t.time;
      comm[prod.devices[t.dst]] += t.time;
      e.bytesByLinkKind[static_cast<int>(routes[t.route].link.kind)] += t.bytes;
    }
    for (const Edge::GradReduce &r : e.bwdReduces) {
      for (int32_t p : r.reduce.partitions)
        comm[prod.devices[p]] += r.reduce.time;
      for (size_t k = 0; k < r.reduce.bytesByLinkKind.size(); ++k)
        e.bytesByLinkKind[k] += r.reduce.bytesByLinkKind[k];
    }
    e.commTimeByDevice.assign(comm.begin(), comm.end());
    e.receivedByDevice.assign(received.begin(), received.end());
  }

  /// Issues the transfers of an edge in rounds (SimOptions::
  /// exchangesAsCollectives), as NCCL's rings and MPI's pairwise
  /// all-to-all move an exchange: with the devices involved
  /// numbered 0..n-1, round r moves every piece from device i to device
  /// i + r (mod n), so that each round sends from and receives into every
  /// device at most once and the devices finish together. In destination
  /// order, the transfers of later destinations would queue behind the
  /// earlier ones' on the senders' links, and each destination would be
  /// ready one piece after the one before. `boxes` (one per transfer,
  /// where given) moves with its transfers. Only earlier edges' transfers are
  /// referred to by index (sharedCopy), so this edge's may still be reordered.
  void orderAsRounds(std::vector<Transfer> &transfers,
                     const std::vector<int64_t> &srcDevices,
                     const std::vector<int64_t> &dstDevices,
                     std::vector<Slice> *boxes) const {
    if (transfers.size() < 2 || !options.exchangesAsCollectives)
      return;
    std::vector<int64_t> devices;
    for (const Transfer &t : transfers) {
      devices.push_back(srcDevices[t.src]);
      devices.push_back(dstDevices[t.dst]);
    }
    std::sort(devices.begin(), devices.end());
    devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
    auto position = [&](int64_t device) {
      return std::lower_bound(devices.begin(), devices.end(), device) -
             devices.begin();
    };
    int64_t n = static_cast<int64_t>(devices.size());
    std::vector<int64_t> round(transfers.size());
    for (size_t k = 0; k < transfers.size(); ++k) {
      int64_t from = position(srcDevices[transfers[k].src]);
      int64_t to = position(dstDevices[transfers[k].dst]);
      round[k] = ((to - from) % n + n) % n;
    }
    std::vector<size_t> order(transfers.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return round[a] < round[b]; });
    auto inOrder = [&](auto &items) {
      std::remove_reference_t<decltype(items)> sorted;
      sorted.reserve(items.size());
      for (size_t k : order)
        sorted.push_back(std::move(items[k]));
      items = std::move(sorted);
    };
    if (boxes) {
      assert(boxes->size() == transfers.size() && "one box per transfer");
      inOrder(*boxes);
    }
    inOrder(transfers);
  }

  /// Transfers that bring one partition its pieces from k - 1 others of its
  /// node (k >= 2 pieces, a local one included) are an exchange that NCCL
  /// runs as one collective: an all-gather in forward (sequence
  /// parallelism's gather before a column-parallel linear), a
  /// reduce-scatter of gradients in backward. On a link priced by NCCL's
  /// measured collective curve (and no point-to-point curve: GPUs) each
  /// piece moves at the bus bandwidth of the whole, k pieces, which is the
  /// half all-reduce the simulator charges for an all-gather; the link's
  /// datasheet rate would price it faster than NCCL moves it. A
  /// destination fed by one remote piece alone (a pipeline send) keeps the
  /// link's rate. `locals` are the pieces the destinations hold already.
  void priceExchanges(std::vector<Transfer> &transfers,
                      const std::vector<int64_t> &srcDevices,
                      const std::vector<int64_t> &dstDevices,
                      const std::vector<LocalDep> &locals) {
    if (transfers.empty() || !options.exchangesAsCollectives)
      return;
    absl::flat_hash_map<int32_t, int64_t> pieces;
    for (const Transfer &t : transfers)
      ++pieces[t.dst];
    for (const LocalDep &d : locals)
      if (auto it = pieces.find(d.dst); it != pieces.end())
        ++it->second;
    for (Transfer &t : transfers) {
      int64_t k = pieces[t.dst];
      int64_t a = srcDevices[t.src], b = dstDevices[t.dst];
      const LinkSpec *link = machine.clusterLink(a, b);
      if (k < 2 || !link || !link->bySize.empty() ||
          link->collectiveBySize.empty() ||
          machine.getNode(a) != machine.getNode(b))
        continue;
      double whole = static_cast<double>(t.bytes) * k;
      t.time = link->latency + static_cast<double>(t.bytes) /
                                   link->collectiveBySize.bandwidthAt(whole);
    }
  }

  Transfer makeTransfer(int32_t src, int32_t dst, int64_t srcDevice,
                        int64_t dstDevice, int64_t bytes) {
    Transfer t;
    t.src = src;
    t.dst = dst;
    t.bytes = bytes;
    t.route = routeId(srcDevice, dstDevice);
    t.time = routes[t.route].link.transferTime(static_cast<double>(bytes));
    if (ranksCopyMessages)
      t.sendTime = routes[t.route].link.sendTime(static_cast<double>(bytes));
    return t;
  }

  //===--------------------------------------------------------------------===//
  // Additive costs for the dynamic programming search
  //===--------------------------------------------------------------------===//

  /// States of ops under configurations other than the current ones,
  /// memoized: the DP asks for each (op, config) many times.
  std::map<std::pair<size_t, std::vector<int64_t>>, OpState> stateCache;

  const OpState &stateFor(size_t op, const OpConfig &config) {
    std::vector<int64_t> key = config.degrees;
    key.push_back(config.start);
    key.push_back(config.replicas);
    key.push_back(config.recompute);
    key.push_back(static_cast<int64_t>(config.sharding));
    key.push_back(config.scatterDim);
    key.insert(key.end(), config.strides.begin(), config.strides.end());
    auto [it, inserted] = stateCache.try_emplace({op, std::move(key)});
    if (inserted)
      buildOpState(op, config, it->second);
    return it->second;
  }

  double nodeCost(size_t op, const OpConfig &config) {
    const OpState &st = stateFor(op, config);
    double kernels = 0, collectives = 0, updates = 0;
    for (size_t p = 0; p < st.devices.size(); ++p) {
      kernels = std::max(kernels, st.fwdTime[p] * (st.recomputed ? 2 : 1) +
                                      st.bwdTime[p]);
      updates = std::max(updates, st.updateTime[p]);
    }
    for (const auto *list :
         {&st.partialSums, &st.gradSyncs, &st.statSyncs[0], &st.statSyncs[1]})
      for (const Collective &c : *list)
        collectives += c.time + c.postTime + 2 * c.gatherTime;
    return kernels + collectives + updates;
  }

  double edgeCost(size_t consumer, size_t operand,
                  const OpConfig &producerConfig,
                  const OpConfig &consumerConfig) {
    for (int32_t id : inEdges[consumer]) {
      if (edges[id].operand != static_cast<int32_t>(operand))
        continue;
      Edge e = edges[id];
      buildTransfers(e, stateFor(e.producer, producerConfig),
                     stateFor(consumer, consumerConfig));
      // Transfers into one partition queue behind each other; partitions
      // receive in parallel.
      std::map<int32_t, double> fwdIn, bwdIn;
      for (const Transfer &t : e.fwd)
        fwdIn[t.dst] += t.time;
      for (const Transfer &t : e.bwd)
        bwdIn[t.dst] += t.time;
      double fwd = 0, bwd = 0;
      for (auto &[p, t] : fwdIn)
        fwd = std::max(fwd, t);
      for (auto &[p, t] : bwdIn)
        bwd = std::max(bwd, t);
      for (const Edge::GradReduce &r : e.bwdReduces)
        bwd = std::max(bwd, r.reduce.time);
      return fwd + bwd;
    }
    return 0;
  }

  //===--------------------------------------------------------------------===//
  // Timing
  //===--------------------------------------------------------------------===//

  void record(int32_t op, TaskKind kind, int32_t resource, double start,
              double end) {
    if (options.recordTimeline)
      timeline.push_back({op, kind, resource, start, end - start});
  }

  /// The sending rank's part of transfer `t` (packing it and handing it
  /// over: a kernel's worth of its time, and a core), issued now and ready
  /// at `ready`; returns when it starts.
  double packMessage(const Transfer &t, double ready, int32_t edge,
                     TaskKind kind) {
    return runKernel(routes[t.route].src, ready, t.sendTime, edge, kind) -
           t.sendTime;
  }

  /// Runs a point-to-point transfer ready at `ready`, whose sender began
  /// packing it at `packedAt` (packMessage; < 0: packs it now); returns its
  /// end.
  double runTransfer(const Transfer &t, double ready, int32_t edge,
                     TaskKind kind, double packedAt = -1) {
    const RouteInfo &r = routes[t.route];
    double start = ready, packed = ready;
    if (t.sendTime > 0) {
      start = packedAt >= 0 ? packedAt : packMessage(t, ready, edge, kind);
      packed = start + t.sendTime;
    }
    for (int32_t res : r.resources)
      start = std::max(start, freeAt[res]);
    // Between processes that share a node's cores, a message is copied by
    // them: it needs a core while it moves.
    int64_t core = sharedCore(r.src, r.dst);
    if (core >= 0)
      start = std::max(start, freeAt[core]);
    if (ranksCopyMessages)
      start = std::max(start, freeAt[r.dst]);
    // The receiver waits for the packing at most; once the message is
    // packed, the rest of its time is the receiver's.
    double end = std::max(start, packed) + std::max(0.0, t.time - t.sendTime);
    for (int32_t res : r.resources)
      freeAt[res] = end;
    if (core >= 0)
      freeAt[core] = end;
    if (ranksCopyMessages)
      freeAt[r.dst] = end;
    if (options.recordTimeline)
      for (int32_t res : r.resources)
        record(edge, kind, res, start, end);
    return end;
  }

  /// Runs a collective of op `op` ready when `ready(p)` for its members.
  template <typename ReadyFn>
  double runCollective(const OpState &st, const Collective &c, double time,
                       ReadyFn ready, int32_t op, TaskKind kind) {
    double start = 0;
    for (int32_t p : c.partitions)
      start = std::max({start, ready(p), freeAt[numDevices + st.devices[p]]});
    // Members that share a node's cores copy the data themselves (see
    // runTransfer): the collective holds a core of each such node.
    std::vector<int64_t> cores;
    if (coresPerNode > 0)
      for (int32_t p : c.partitions) {
        int64_t core = sharedCore(st.devices[p], st.devices[p]);
        if (core >= 0 &&
            std::find(cores.begin(), cores.end(), core) == cores.end())
          cores.push_back(core);
      }
    for (int64_t core : cores)
      start = std::max(start, freeAt[core]);
    if (ranksCopyMessages)
      for (int32_t p : c.partitions)
        start = std::max(start, freeAt[st.devices[p]]);
    double end = start + time;
    for (int64_t core : cores)
      freeAt[core] = end;
    for (int32_t p : c.partitions) {
      if (ranksCopyMessages)
        freeAt[st.devices[p]] = end;
      freeAt[numDevices + st.devices[p]] = end;
      record(op, kind, static_cast<int32_t>(numDevices + st.devices[p]), start,
             end);
    }
    return end;
  }

  /// With shared cores, the core of `a`'s node that frees first (issue
  /// order, as a list scheduler) when `a` and `b` share the node; else -1.
  int64_t sharedCore(int64_t a, int64_t b) const {
    if (coresPerNode == 0 || a / devicesPerNode != b / devicesPerNode)
      return -1;
    int64_t base = firstCore + a / devicesPerNode * coresPerNode;
    int64_t core = base;
    for (int64_t c = base + 1; c < base + coresPerNode; ++c)
      if (freeAt[c] < freeAt[core])
        core = c;
    return core;
  }

  double runKernel(int64_t device, double ready, double time, int32_t op,
                   TaskKind kind) {
    double start = std::max(freeAt[device], ready);
    if (int64_t core = sharedCore(device, device); core >= 0) {
      start = std::max(start, freeAt[core]);
      freeAt[core] = start + time;
    }
    double end = start + time;
    freeAt[device] = end;
    record(op, kind, static_cast<int32_t>(device), start, end);
    return end;
  }

  /// ZeRO-3: all-gathers op `i`'s sharded weights before its kernels, which
  /// wait for them (`ready`, per instance). They are issued with the op and
  /// may start as early as the communication stream allows (prefetch).
  void gatherWeights(int32_t i, std::vector<double> &ready) {
    OpState &st = ops[i];
    for (const Collective &c : st.gradSyncs) {
      if (c.gatherTime <= 0)
        continue;
      double end = runCollective(
          st, c, c.gatherTime, [](int32_t) { return 0.0; }, i,
          TaskKind::WeightGather);
      for (int32_t p : c.partitions)
        ready[p] = std::max(ready[p], end);
    }
  }

  /// Whether transfer `t` stays inside one node.
  bool withinNode(const Transfer &t) const {
    const RouteInfo &r = routes[t.route];
    return machine.getNode(r.src) == machine.getNode(r.dst);
  }

  /// Whether the members of collective `c` of `st` share one node.
  bool withinNode(const OpState &st, const Collective &c) const {
    for (int32_t p : c.partitions)
      if (machine.getNode(st.devices[p]) !=
          machine.getNode(st.devices[c.partitions.front()]))
        return false;
    return true;
  }

  /// When overlapped communication has brought each instance's data
  /// (forward and backward reuse it: no allocation per op and pass).
  std::vector<double> commReadyScratch;
  /// When regathered inputs arrive, per instance (backward).
  std::vector<double> regatherScratch;

  /// Runs instance `p`'s kernel of `time` once `ready`; with overlapped
  /// communication arriving by `commReady`, the kernel runs in chunks
  /// beside it and ends no sooner than the last chunk after it. Records
  /// the kernel's start in `start`.
  double runChunkedKernel(OpState &st, size_t p, double ready, double commReady,
                          double time, int32_t op, TaskKind kind,
                          double &start) {
    int64_t device = st.devices[p];
    double end = runKernel(device, ready, time, op, kind);
    start = end - time;
    return holdUntil(device, end, commReady + time / kOverlapChunks);
  }

  /// A kernel on `device` that would end at `end` but consumes data that
  /// arrives in chunks ends no sooner than `until`: the device stays busy.
  double holdUntil(int64_t device, double end, double until) {
    if (until <= end)
      return end;
    freeAt[device] = std::max(freeAt[device], until);
    return until;
  }

  void forward(int32_t i) {
    OpState &st = ops[i];
    size_t n = st.devices.size();
    st.inReady.assign(n, 0);
    // Overlapped tensor-parallel communication: the kernel waits for the
    // producers only, and for the data in chunks (commReady).
    std::vector<double> &commReady = commReadyScratch;
    commReady.assign(n, 0);
    for (int32_t id : inEdges[i]) {
      const Edge &e = edges[id];
      const OpState &prod = ops[e.producer];
      // A weight is there from the start; an activation once produced.
      auto produced = [&](int32_t p) {
        return e.weightOperand >= 0 ? 0.0 : prod.fwdEnd[p];
      };
      for (const LocalDep &d : e.fwdLocal)
        st.inReady[d.dst] = std::max(st.inReady[d.dst], produced(d.src));
      Edge &mutableEdge = edges[id];
      mutableEdge.fwdEnd.resize(e.fwd.size());
      for (size_t k = 0; k < e.fwd.size(); ++k) {
        const Transfer &t = e.fwd[k];
        double end = runTransfer(t, produced(t.src), id, TaskKind::Transfer);
        mutableEdge.fwdEnd[k] = end;
        bool chunked = st.overlapsComm && e.weightOperand < 0 && withinNode(t);
        st.inReady[t.dst] =
            std::max(st.inReady[t.dst], chunked ? produced(t.src) : end);
        if (chunked)
          commReady[t.dst] = std::max(commReady[t.dst], end);
      }
      for (const Edge::SharedCopy &c : e.fwdShared) {
        double end = edges[c.edge].fwdEnd[c.transfer];
        const Transfer &t = edges[c.edge].fwd[c.transfer];
        bool chunked = st.overlapsComm && withinNode(t);
        st.inReady[c.dst] =
            std::max(st.inReady[c.dst], chunked ? end - t.time : end);
        if (chunked)
          commReady[c.dst] = std::max(commReady[c.dst], end);
      }
    }
    gatherWeights(i, st.inReady);
    st.fwdEnd.resize(n);
    st.fwdStart.resize(n);
    for (size_t p = 0; p < n; ++p)
      st.fwdEnd[p] =
          runChunkedKernel(st, p, st.inReady[p], commReady[p], st.fwdTime[p], i,
                           TaskKind::Forward, st.fwdStart[p]);
    runStatSyncs(i, st.statSyncs[0], st.fwdEnd);
    for (const Collective &c : st.partialSums) {
      // Overlapped: the reduction of each chunk starts once the kernel has
      // produced it, the last one after the kernel.
      bool chunked = st.overlapsComm && withinNode(st, c);
      double end = runCollective(
          st, c, c.time,
          [&](int32_t p) {
            return chunked ? st.fwdStart[p] + st.fwdTime[p] / kOverlapChunks
                           : st.fwdEnd[p];
          },
          i, TaskKind::PartialSum);
      if (chunked)
        for (int32_t p : c.partitions)
          end = std::max(end, st.fwdEnd[p] + c.time / kOverlapChunks);
      for (int32_t p : c.partitions)
        st.fwdEnd[p] = end;
    }
  }

  void backward(int32_t i) {
    OpState &st = ops[i];
    size_t n = st.devices.size();
    st.gradReady.assign(n, 0);
    std::vector<double> &commReady = commReadyScratch;
    commReady.assign(n, 0);
    for (int32_t id : outEdges[i]) {
      const Edge &e = edges[id];
      const OpState &cons = ops[e.consumer];
      for (const LocalDep &d : e.bwdLocal)
        st.gradReady[d.dst] = std::max(st.gradReady[d.dst], cons.bwdEnd[d.src]);
      for (const Edge::SharedCopy &c : e.fwdShared)
        for (int32_t p : c.gradTo)
          st.gradReady[p] = std::max(st.gradReady[p], cons.bwdEnd[c.dst]);
      for (size_t k = 0; k < e.bwd.size(); ++k) {
        const Transfer &t = e.bwd[k];
        double end =
            runTransfer(t, cons.bwdEnd[t.src], id, TaskKind::GradTransfer,
                        k < e.bwdPackedAt.size() ? e.bwdPackedAt[k] : -1.0);
        bool chunked = st.overlapsComm && withinNode(t);
        st.gradReady[t.dst] =
            std::max(st.gradReady[t.dst], chunked ? cons.bwdEnd[t.src] : end);
        if (chunked)
          commReady[t.dst] = std::max(commReady[t.dst], end);
      }
      for (const Edge::GradReduce &r : e.bwdReduces) {
        const std::vector<int32_t> &members = r.reduce.partitions;
        // Overlapped with the consumer's backward kernel: each chunk of
        // the gradient is reduced once that kernel has produced it.
        bool chunked = cons.overlapsComm && withinNode(st, r.reduce);
        auto contributed = [&](int32_t p) {
          double ready = 0;
          for (size_t k = 0; k < members.size(); ++k)
            if (members[k] == p) {
              int32_t c = r.contributors[k];
              ready = chunked
                          ? cons.bwdStart[c] + cons.bwdTime[c] / kOverlapChunks
                          : cons.bwdEnd[c];
            }
          return ready;
        };
        double end = runCollective(st, r.reduce, r.reduce.time, contributed, i,
                                   TaskKind::GradReduce);
        if (chunked)
          for (int32_t c : r.contributors)
            end =
                std::max(end, cons.bwdEnd[c] + r.reduce.time / kOverlapChunks);
        for (int32_t p : members)
          st.gradReady[p] = std::max(st.gradReady[p], end);
      }
    }
    gatherWeights(i, st.gradReady);
    st.bwdEnd.resize(n);
    st.bwdStart.resize(n);
    for (size_t p = 0; p < n; ++p)
      st.bwdEnd[p] =
          runChunkedKernel(st, p, st.gradReady[p], commReady[p], st.bwdTime[p],
                           i, TaskKind::Backward, st.bwdStart[p]);
    runStatSyncs(i, st.statSyncs[1], st.bwdEnd);
    if (st.regathers)
      regatherInputs(i);
    // The plan sends the gradients of this op's operands right after its
    // backward; their receivers take them when the producers' backward
    // needs them.
    for (int32_t id : inEdges[i]) {
      Edge &e = edges[id];
      e.bwdPackedAt.assign(e.bwd.size(), -1);
      for (size_t k = 0; k < e.bwd.size(); ++k)
        if (e.bwd[k].sendTime > 0)
          e.bwdPackedAt[k] = packMessage(e.bwd[k], st.bwdEnd[e.bwd[k].src], id,
                                         TaskKind::GradTransfer);
    }
  }

  /// A staged kernel's statistics reductions, one after another (each
  /// waits for its stage), priced after the kernel: the stages' kernel time
  /// is the op's whole, and the reductions hold every member until done.
  void runStatSyncs(int32_t i, const std::vector<Collective> &syncs,
                    std::vector<double> &end) {
    OpState &st = ops[i];
    for (const Collective &c : syncs) {
      double done = runCollective(
          st, c, c.time, [&](int32_t p) { return end[p]; }, i,
          TaskKind::PartialSum);
      for (int32_t p : c.partitions)
        end[p] = done;
    }
  }

  /// SimOptions::regatherInputs: op `i`'s received activation slices are
  /// fetched again once its backward kernel starts, beside the
  /// input-gradient half; the weight-gradient half waits for them.
  void regatherInputs(int32_t i) {
    OpState &st = ops[i];
    std::vector<double> &arrived = regatherScratch;
    arrived.assign(st.devices.size(), 0);
    for (int32_t id : inEdges[i]) {
      const Edge &e = edges[id];
      if (e.weightOperand >= 0)
        continue;
      for (const Transfer &t : e.fwd)
        arrived[t.dst] =
            std::max(arrived[t.dst], runTransfer(t, st.bwdStart[t.dst], id,
                                                 TaskKind::Transfer));
    }
    for (size_t p = 0; p < st.devices.size(); ++p)
      if (arrived[p] > 0)
        st.bwdEnd[p] = holdUntil(st.devices[p], st.bwdEnd[p],
                                 arrived[p] + st.bwdTime[p] / 2);
  }

  /// Runs op `x`'s forward kernels (and partial sums) again if it drops its
  /// results, after the recomputed ops it reads (each once per pass).
  void recompute(int32_t x) {
    OpState &st = ops[x];
    if (!st.recomputed || recomputedNow[x])
      return;
    recomputedNow[x] = 1;
    for (int32_t y : producersOf[x])
      recompute(y);
    // ZeRO-3 weights are gathered again for it.
    std::vector<double> end(st.devices.size(), 0.0);
    gatherWeights(x, end);
    for (size_t p = 0; p < st.devices.size(); ++p) {
      end[p] = runKernel(st.devices[p], end[p], st.fwdTime[p], x,
                         TaskKind::Recompute);
      for (const auto &slices : st.heldSlices)
        cascadeBytes[st.devices[p]] +=
            volume(slices[p]) * graph.ops[x].elemBytes;
    }
    runStatSyncs(x, st.statSyncs[0], end);
    for (const Collective &c : st.partialSums)
      runCollective(
          st, c, c.time, [&](int32_t p) { return end[p]; }, x,
          TaskKind::Recompute);
  }

  /// Gradient all-reduces of op `i`, none starting before `notBefore`.
  void syncGradients(int32_t i, double notBefore) {
    OpState &st = ops[i];
    st.syncEnd.resize(st.gradSyncs.size());
    for (size_t g = 0; g < st.gradSyncs.size(); ++g)
      st.syncEnd[g] = runCollective(
          st, st.gradSyncs[g], st.gradSyncs[g].time,
          [&](int32_t p) { return std::max(st.bwdEnd[p], notBefore); }, i,
          TaskKind::GradSync);
  }

  void update(int32_t i) {
    OpState &st = ops[i];
    size_t n = st.devices.size();
    st.updateEnd.assign(n, 0);
    for (size_t p = 0; p < n; ++p) {
      double ready = st.bwdEnd[p];
      for (int32_t g : st.syncsOf[p])
        ready = std::max(ready, st.syncEnd[g]);
      st.updateEnd[p] = st.updateTime[p] > 0
                            ? runKernel(st.devices[p], ready, st.updateTime[p],
                                        i, TaskKind::Update)
                            : ready;
    }
    // Sharded sync: gather the updated shards back, now or (overlapped)
    // during the next forward.
    for (const Collective &c : st.gradSyncs) {
      if (c.postTime <= 0)
        continue;
      if (options.overlapParamGather) {
        for (int32_t p : c.partitions)
          deferredGather[st.devices[p]] += c.postTime;
        continue;
      }
      runCollective(
          st, c, c.postTime, [&](int32_t p) { return st.updateEnd[p]; }, i,
          TaskKind::WeightGather);
    }
  }

  /// Per device, the parameter all-gathers deferred to the next forward
  /// (overlapParamGather), in seconds.
  std::vector<double> deferredGather;

  /// Resource state at the start of the forward of every kCheckpointEvery-th
  /// op: the forward before the first changed op need not be re-run.
  static constexpr int32_t kCheckpointEvery = 8;
  std::vector<std::vector<double>> checkpoints;

  /// Times the whole iteration, re-using the last pass for the forward of
  /// the ops before `firstChanged` (nothing before it changed).
  double runTiming(int32_t firstChanged = 0) {
    int32_t n = static_cast<int32_t>(ops.size());
    checkpoints.resize((n + kCheckpointEvery - 1) / kCheckpointEvery);
    int32_t first = (firstChanged / kCheckpointEvery) * kCheckpointEvery;
    if (options.recordTimeline || first == 0) {
      first = 0;
      std::fill(freeAt.begin(), freeAt.end(), 0.0);
      timeline.clear();
    } else {
      freeAt = checkpoints[first / kCheckpointEvery];
    }
    for (int32_t i = first; i < n; ++i) {
      if (i % kCheckpointEvery == 0)
        checkpoints[i / kCheckpointEvery] = freeAt;
      forward(i);
    }
    recomputedNow.assign(n, 0);
    recomputePeak.assign(numDevices, 0);
    for (int32_t i = n - 1; i >= 0; --i) {
      for (int32_t x : recomputeBefore[i]) {
        cascadeBytes.assign(numDevices, 0);
        recompute(x);
        for (int64_t d = 0; d < numDevices; ++d)
          recomputePeak[d] = std::max(recomputePeak[d], cascadeBytes[d]);
      }
      backward(i);
      if (options.overlapGradSync)
        syncGradients(i, 0);
    }
    if (!options.overlapGradSync) {
      // Synchronize only once the whole backward pass is done.
      double backwardDone = 0;
      for (int64_t d = 0; d < numDevices; ++d)
        backwardDone = std::max(backwardDone, freeAt[d]);
      for (int32_t i = n - 1; i >= 0; --i)
        syncGradients(i, backwardDone);
    }
    deferredGather.assign(numDevices, 0);
    for (int32_t i = n - 1; i >= 0; --i)
      update(i);
    double end = 0;
    for (double t : freeAt)
      end = std::max(end, t);
    if (!options.overlapParamGather)
      return end;
    // Deferred gathers run beside the next forward: what they take beyond
    // it delays that iteration.
    double gathers = 0, forwardEnd = 0;
    for (double t : deferredGather)
      gathers = std::max(gathers, t);
    for (const OpState &st : ops)
      for (double t : st.fwdEnd)
        forwardEnd = std::max(forwardEnd, t);
    return end + std::max(0.0, gathers - forwardEnd);
  }

  SimResult result(double iterationTime) {
    SimResult r;
    r.iterationTime = iterationTime;
    r.devices.resize(numDevices);
    for (int64_t d = 0; d < numDevices; ++d)
      r.devices[d].capacity = options.capacityOf(machine.getSpec(d));
    for (const OpState &st : ops) {
      for (double end : st.fwdEnd)
        r.forwardTime = std::max(r.forwardTime, end);
      for (double end : st.bwdEnd)
        r.backwardTime = std::max(r.backwardTime, end);
      for (size_t p = 0; p < st.devices.size(); ++p) {
        DeviceStats &dev = r.devices[st.devices[p]];
        dev.computeTime += st.fwdTime[p] * (st.recomputed ? 2 : 1) +
                           st.bwdTime[p] + st.updateTime[p];
        MemoryUse &m = dev.memory;
        const MemoryUse &add = st.memory[p];
        m.weights += add.weights;
        m.gradients += add.gradients;
        m.optimizerState += add.optimizerState;
        m.activations += add.activations;
        m.workspace = std::max(m.workspace, add.workspace);
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
            r.devices[st.devices[p]].commTime +=
                times * c.time + c.postTime + (1 + again) * c.gatherTime;
          // A ZeRO-3 sync's bytes are its reduce-scatter's (once) and its
          // gathers' before each use (1 + again of them), alike.
          double once = list != &st.gradSyncs ? 0
                        : c.gatherTime > 0    ? 1 / (2 + again)
                                              : 1;
          for (size_t k = 0; k < c.bytesByLinkKind.size(); ++k) {
            r.bytesByLinkKind[k] += times * c.bytesByLinkKind[k];
            r.syncBytesByLinkKind[k] += once * c.bytesByLinkKind[k];
          }
        }
    }
    for (const Edge &e : edges) {
      for (auto [device, time] : e.commTimeByDevice)
        r.devices[device].commTime += time;
      // Regathered inputs live only around the consumer's kernels.
      bool regathered = ops[e.consumer].regathers && e.weightOperand < 0;
      for (auto [device, bytes] : e.receivedByDevice) {
        MemoryUse &m = r.devices[device].memory;
        if (regathered)
          m.workspace = std::max(m.workspace, bytes);
        else
          m.activations += bytes;
      }
      for (size_t k = 0; k < e.bytesByLinkKind.size(); ++k)
        r.bytesByLinkKind[k] += e.bytesByLinkKind[k];
    }
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
};

//===----------------------------------------------------------------------===//
// Simulator
//===----------------------------------------------------------------------===//

Simulator::Simulator(const Graph &graph, const Machine &machine,
                     const CostModel &costModel, SimOptions options)
    : impl(std::make_unique<Impl>(graph, machine, costModel, options)) {}

Simulator::~Simulator() = default;

std::string Simulator::checkConfig(size_t op, const OpConfig &config) const {
  if (op >= impl->graph.ops.size())
    return "op " + std::to_string(op) + " is out of range";
  if (config.recompute)
    if (std::string problem = recomputeProblem(impl->graph, op);
        !problem.empty())
      return problem;
  return ppc::checkConfig(impl->graph.ops[op].space, config, impl->numDevices);
}

SimResult Simulator::simulate(const Strategy &strategy) {
  assert(strategy.size() == impl->graph.ops.size() &&
         "one configuration per op");
  impl->strategy = strategy;
  for (size_t i = 0; i < impl->ops.size(); ++i)
    impl->buildOp(i);
  for (Edge &e : impl->edges)
    impl->buildEdge(e);
  return impl->result(impl->runTiming());
}

SimResult Simulator::update(size_t op, const OpConfig &config) {
  return update({{op, config}});
}

SimResult
Simulator::update(const std::vector<std::pair<size_t, OpConfig>> &changes) {
  Impl &s = *impl;
  size_t first = s.ops.size();
  for (const auto &[op, config] : changes) {
    s.strategy[op] = config;
    first = std::min(first, op);
  }
  // Every edge a changed op touches: its own, in and out, and the later
  // readers of the results it reads, which may share copies with the edges
  // into it. Built in id order (edges are numbered in consumer order), as
  // an edge's shared copies depend on the earlier readers' edges.
  std::set<int32_t> touched;
  for (const auto &[op, config] : changes) {
    s.buildOp(op);
    for (int32_t id : s.inEdges[op]) {
      touched.insert(id);
      for (int32_t later : s.outEdges[s.edges[id].producer])
        if (s.edges[later].consumer > static_cast<int32_t>(op))
          touched.insert(later);
    }
    for (int32_t id : s.outEdges[op])
      touched.insert(id);
  }
  for (int32_t id : touched)
    s.buildEdge(s.edges[id]);
  // The first changed op's forward block is the first one that changed:
  // its incoming transfers are part of it, its outgoing ones of later
  // blocks.
  return s.result(s.runTiming(static_cast<int32_t>(first)));
}

const Strategy &Simulator::currentStrategy() const { return impl->strategy; }

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
