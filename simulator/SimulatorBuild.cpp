//===- SimulatorBuild.cpp - the tasks of a configuration
//--------------------===//
//
// Builds what an op is under its configuration (instances, kernels, partial
// sums, statistics, gradient syncs, memory) and the transfers of every edge
// between two configurations, and the DP's additive node and edge costs.
//
//===----------------------------------------------------------------------===//

#include "SimulatorImpl.h"

namespace ppc::sim {

Simulator::Impl::Impl(const Graph &graph, const Machine &machine,
                      const CostModel &costModel, SimOptions options)
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
  for (const std::vector<int32_t> &out : outEdges) {
    std::vector<int32_t> earlier, later; // results read by such edges
    auto mark = [](std::vector<int32_t> &read, int32_t result) {
      bool seen = std::find(read.begin(), read.end(), result) != read.end();
      if (!seen)
        read.push_back(result);
      return seen;
    };
    for (int32_t id : out)
      if (edges[id].weightOperand < 0)
        edges[id].readEarlier = mark(earlier, edges[id].result);
    for (auto it = out.rbegin(); it != out.rend(); ++it)
      if (edges[*it].weightOperand < 0)
        edges[*it].readLater = mark(later, edges[*it].result);
  }
  // The edges crossing each block boundary, where few enough to check.
  int32_t blocks = numBlocks();
  crossing.assign(blocks, {});
  crossingChecked.assign(blocks, 1);
  std::vector<int64_t> crossingCount(blocks + 1, 0);
  for (const Edge &e : edges) {
    int32_t from = blockOf(e.producer) + 1;
    int32_t to = blockOf(e.consumer);
    if (from <= to) {
      ++crossingCount[from];
      --crossingCount[to + 1];
    }
  }
  for (int32_t b = 1; b < blocks; ++b) {
    crossingCount[b] += crossingCount[b - 1];
    crossingChecked[b] = crossingCount[b] <= static_cast<int64_t>(kMaxCrossing);
  }
  for (size_t id = 0; id < edges.size(); ++id) {
    const Edge &e = edges[id];
    for (int32_t b = blockOf(e.producer) + 1; b <= blockOf(e.consumer); ++b)
      if (crossingChecked[b])
        crossing[b].push_back(static_cast<int32_t>(id));
  }
  freeAt.assign(2 * numDevices + 2 * machine.links.size(), 0.0);
  devicePosition.assign(numDevices, -1);
  deviceTime.assign(numDevices, 0.0);
  deviceBytes.assign(numDevices, 0);
  if (numDevices <= kDenseRouteDevices)
    denseRouteOf.assign(numDevices * numDevices, -1);
  ranksCopyMessages =
      machine.cluster && machine.cluster->intra.kind == LinkKind::SharedMemory;
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
  recomputeReader = std::move(lastReader);
  firstInputReader.assign(graph.numInputs, {-1, -1});
  for (size_t c = 0; c < numOps; ++c)
    for (size_t o = 0; o < graph.ops[c].operands.size(); ++o) {
      const Source &src = graph.ops[c].operands[o];
      if (src.kind == Source::Kind::Input && src.index >= 0 &&
          src.index < graph.numInputs && firstInputReader[src.index].first < 0)
        firstInputReader[src.index] = {static_cast<int32_t>(c),
                                       static_cast<int32_t>(o)};
    }
  // Ops built alike: by a hash of their kind and shapes, then compared.
  buildClass.assign(numOps, -1);
  absl::flat_hash_map<size_t, std::vector<int32_t>> representatives;
  int32_t classes = 0;
  for (size_t i = 0; i < numOps; ++i) {
    const Op &op = graph.ops[i];
    size_t hash = absl::HashOf(op.kind, op.elemBytes, op.operands.size(),
                               op.space.dims.size(), hasReaders[i]);
    for (const IterDim &d : op.space.dims)
      hash = absl::HashOf(hash, d.size);
    std::vector<int32_t> &reps = representatives[hash];
    for (int32_t r : reps)
      if (builtAlike(static_cast<size_t>(r), i)) {
        buildClass[i] = buildClass[r];
        break;
      }
    if (buildClass[i] < 0) {
      buildClass[i] = classes++;
      reps.push_back(static_cast<int32_t>(i));
    }
  }
}

bool Simulator::Impl::builtAlike(size_t a, size_t b) const {
  const Op &x = graph.ops[a], &y = graph.ops[b];
  if (x.kind != y.kind || x.dtype != y.dtype || x.elemBytes != y.elemBytes ||
      x.differentiable != y.differentiable || hasReaders[a] != hasReaders[b] ||
      x.operands.size() != y.operands.size() || !(x.cost == y.cost) ||
      !(x.space == y.space))
    return false;
  // What each operand is to the op's state: a graph input it counts as an
  // activation or not, a weight it holds (and that weight's kind) or not.
  for (size_t o = 0; o < x.operands.size(); ++o) {
    const Source &u = x.operands[o], &v = y.operands[o];
    if (u.kind != v.kind)
      return false;
    auto is = [](const std::pair<int32_t, int32_t> &use, size_t op, size_t o) {
      return use ==
             std::make_pair(static_cast<int32_t>(op), static_cast<int32_t>(o));
    };
    auto firstReader = [&](const Source &src) {
      return src.index >= 0 && src.index < graph.numInputs
                 ? firstInputReader[src.index]
                 : std::make_pair(-1, -1);
    };
    if (u.kind == Source::Kind::Input &&
        is(firstReader(u), a, o) != is(firstReader(v), b, o))
      return false;
    if (u.kind == Source::Kind::Weight) {
      const Weight &wu = graph.weights[u.index], &wv = graph.weights[v.index];
      const WeightUse &hu = weightHolder[u.index], &hv = weightHolder[v.index];
      if (wu.shape != wv.shape || wu.elemBytes != wv.elemBytes ||
          wu.trainable != wv.trainable ||
          is({hu.op, hu.operand}, a, o) != is({hv.op, hv.operand}, b, o))
        return false;
    }
  }
  return true;
}

/// The id of the route from `src` to `dst` in `routes`.
int32_t Simulator::Impl::routeId(int64_t src, int64_t dst) {
  int64_t key = src * numDevices + dst;
  int32_t *id = denseRouteOf.empty()
                    ? &routeOf.try_emplace(key, -1).first->second
                    : &denseRouteOf[key];
  if (*id < 0) {
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
    *id = static_cast<int32_t>(routes.size());
    routes.push_back(std::move(info));
  }
  return *id;
}

const RouteInfo &Simulator::Impl::route(int64_t src, int64_t dst) {
  return routes[routeId(src, dst)];
}

/// The instances of each (group, replica) pair: for `group` numbering
/// instances by the data they hold, the instances of one replica that
/// hold the same data. Empty pairs are left out.
std::vector<std::vector<int32_t>> Simulator::Impl::membersPerReplica(
    const OpState &st, const std::vector<int32_t> &group, int32_t numGroups) {
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
/// each priced as AllReducePlan::gatherTime of its size (half an
/// all-reduce, or the link's exchange rate), at the rate of a bucket of at
/// least `bucketBytes`.
Collective Simulator::Impl::makeCollective(const OpState &st,
                                           std::vector<int32_t> members,
                                           int64_t bytes, bool sharded,
                                           int64_t bucketBytes,
                                           int64_t gatherBytes) {
  Collective c;
  c.partitions = std::move(members);
  c.bytes = bytes;
  std::vector<int64_t> devices;
  for (int32_t p : c.partitions)
    devices.push_back(st.devices[p]);
  // An all-reduce of `b` bytes (`half`: a reduce-scatter or all-gather of
  // them); `weight` of its link bytes are counted.
  auto collective = [&](int64_t b, double weight, bool half) {
    double size = std::max<double>(static_cast<double>(b),
                                   static_cast<double>(bucketBytes));
    AllReducePlan plan = planAllReduce(machine, devices, size);
    double share = size > 0 ? static_cast<double>(b) / size : 0;
    for (size_t k = 0; k < c.bytesByLinkKind.size(); ++k)
      c.bytesByLinkKind[k] += plan.bytesByLinkKind[k] * share * weight;
    return (half ? plan.gatherTime : plan.time) * share;
  };
  if (!sharded) {
    c.time = collective(bytes, 1, /*half=*/false);
  } else if (gatherBytes < 0 || gatherBytes == bytes) {
    // The two halves' bytes counted at once.
    c.time = c.postTime = collective(bytes, 1, /*half=*/true);
  } else {
    c.time = collective(bytes, 0.5, /*half=*/true);
    c.postTime = collective(gatherBytes, 0.5, /*half=*/true);
  }
  c.time = quantized(c.time);
  c.postTime = quantized(c.postTime);
  return c;
}

/// Builds into `st` what op `i` is under `config`.
/// A ring member's forward is n steps, each its kernel on one block and
/// the send of that block (the streamed operands' pieces of it) to the next
/// member, as long as the longer of the two (the lowering sends before the
/// kernel and receives after it). Its backward is n steps alike, the
/// block's gradients following it one step behind, the last block's
/// exposed at the end. The sends take their route's rate (they run beside
/// the kernels, not on the links' shared timeline) and count on its link
/// kind; a member holds two blocks and, backward, their two gradients.
void Simulator::Impl::priceRing(size_t i, const OpConfig &config,
                                const geometry::OpLayout &layout, OpState &st) {
  const Op &op = graph.ops[i];
  const RingSpec &ring = *op.space.ring;
  int64_t n = config.degrees[ring.along];
  st.numRings = static_cast<int32_t>(layout.rings.size());
  for (const std::vector<int64_t> &members : layout.rings)
    for (int64_t m = 0; m < n; ++m) {
      int64_t p = members[m], next = members[(m + 1) % n];
      int64_t blockBytes = 0;
      for (int32_t o : ring.operands)
        blockBytes += volume(st.operandSlices[o][p]) * op.elemBytes;
      const RouteInfo &route = routes[routeId(st.devices[p], st.devices[next])];
      double send = route.link.transferTime(static_cast<double>(blockBytes));
      const DeviceSpec &spec = machine.getSpec(st.devices[p]);
      std::vector<std::vector<Slice>> results;
      for (const auto &slices : st.resultSlices)
        results.push_back({slices[p]});
      double forward = 0, backward = 0, gradients = 0;
      for (int64_t s = 0; s < n; ++s) {
        Slice iter =
            geometry::ringStepRanges(op.space, st.iter[p], n, (m - s + n) % n);
        std::vector<std::vector<Slice>> operands;
        for (const TensorAccess &operand : op.space.operands)
          operands.push_back({sliceOf(operand, iter)});
        KernelShape shape = kernelShape(iter, operands, results, 0);
        double block = s + 1 < n ? send : 0;
        forward += std::max(
            costModel.kernelTime(op, shape, Phase::Forward, spec), block);
        backward +=
            std::max(costModel.kernelTime(op, shape, Phase::Backward, spec),
                     block + gradients);
        gradients = send;
      }
      st.fwdTime[p] = quantized(forward);
      st.bwdTime[p] = quantized(backward + gradients);
      size_t kind = static_cast<size_t>(route.link.kind);
      st.ringForwardBytes[kind] += static_cast<double>((n - 1) * blockBytes);
      st.ringBackwardBytes[kind] +=
          static_cast<double>((2 * n - 1) * blockBytes);
      st.memory[p].workspace = std::max(st.memory[p].workspace, 4 * blockBytes);
    }
}

void Simulator::Impl::buildOpState(size_t i, const OpConfig &config,
                                   OpState &st) {
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

  // Replicas run the same kernels: cost each partition once. Stages that
  // recompute cost their backward more (StagedKernel::backwardWork).
  double backwardWork =
      op.space.staged && op.space.staged->runsFor(config.degrees, true)
          ? op.space.staged->backwardWork
          : 1.0;
  st.fwdTime.resize(n);
  st.bwdTime.resize(n);
  for (int32_t p = 0; p < n; ++p) {
    if (st.replica[p] != 0) {
      st.fwdTime[p] = st.fwdTime[p - st.replica[p]];
      st.bwdTime[p] = st.bwdTime[p - st.replica[p]];
      continue;
    }
    KernelShape shape =
        kernelShape(st.iter[p], st.operandSlices, st.resultSlices, p);
    const DeviceSpec &spec = machine.getSpec(st.devices[p]);
    st.fwdTime[p] =
        quantized(costModel.kernelTime(op, shape, Phase::Forward, spec));
    st.bwdTime[p] = quantized(
        costModel.kernelTime(op, shape, Phase::Backward, spec) * backwardWork);
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
          joined[p].insert(joined[p].end(), slices[p].begin(), slices[p].end());
      return joined;
    };
    int32_t numComputed = 0;
    st.computedGroup =
        geometry::groupByBox(joinedOf(st.resultSlices), numComputed);
    st.replicaGroup = scattered ? geometry::groupByBox(joinedOf(st.heldSlices),
                                                       st.numReplicaGroups)
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
  st.numRings = 0;
  st.ringForwardBytes = {};
  st.ringBackwardBytes = {};
  if (config.ring)
    priceRing(i, config, layout, st);
  st.gatheredBytes.assign(n, 0);
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
    held.group = geometry::groupByBox(slices, held.numGroups);
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
        if (stage == StateSharding::Parameters) {
          mem.workspace = std::max(mem.workspace, elements * perElement.weight);
          st.gatheredBytes[p] += elements * perElement.weight;
        }
        if (!w.trainable)
          continue;
        mem.gradients += perElement.gradient *
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
      st.updateTime[p] = quantized(
          costModel.updateTime(updateElems[p], updateElemBytes, states,
                               machine.getSpec(st.devices[p])));
    // Results are kept for backward (unless recomputed: then they are
    // alive only around their forward and backward use), reduce-scattered
    // ones as their pieces; the largest result (gradient) is the
    // transient buffer of the backward kernel.
    // A flat view (a reshape) whose boxes visit the same elements in the
    // same order shares its operand's buffer, and its gradient the
    // result gradient's (ppc-alias-views): it holds nothing of its own.
    if (op.space.flatView && geometry::sameFlatOrder(op.space.operands[0].shape,
                                                     st.operandSlices[0][p],
                                                     op.space.results[0].shape,
                                                     st.resultSlices[0][p]))
      continue;
    for (size_t r = 0; r < st.resultSlices.size(); ++r) {
      int64_t bytes = volume(st.resultSlices[r][p]) * op.elemBytes;
      if (!st.recomputed)
        st.memory[p].activations += volume(st.heldSlices[r][p]) * op.elemBytes;
      st.memory[p].workspace = std::max(st.memory[p].workspace, bytes);
    }
  }
}

/// Rebuilds the transfers of edge `e` for the current configurations.
void Simulator::Impl::buildEdge(Edge &e) {
  buildTransfers(e, ops[e.producer], ops[e.consumer], /*forSimulation=*/true);
  summarizeEdge(e, ops[e.producer], ops[e.consumer]);
}

/// The transfer of an edge before `e` from the same result that brings a
/// box containing `box` from copy group `group` to `device`, as (edge,
/// transfer), or (-1, -1).
std::pair<int32_t, int32_t> Simulator::Impl::sharedCopy(const Edge &e,
                                                        int32_t group,
                                                        int64_t device,
                                                        const Slice &box) {
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
/// For the simulation (`forSimulation`), a region an earlier edge of the
/// same result already brings to a consumer's device is read from there,
/// and the transfers are ordered in rounds and indexed for later edges;
/// for the additive costs of the DP, every edge fetches its own and only
/// what those costs read is built (their order does not change them).
void Simulator::Impl::buildTransfers(Edge &e, const OpState &prod,
                                     const OpState &cons, bool forSimulation) {
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
  // The simulation (which shares copies) says what kind of exchange the
  // edge makes when asked to count them; the DP's edge costs need not.
  bool classify = forSimulation && options.countExchanges;
  std::vector<geometry::ExchangeMove> moves;
  e.fwdKind = e.bwdKind = geometry::ExchangeKind::Local;
  bool shareCopies = forSimulation && e.readEarlier;
  // Boxes of forward transfers: what later edges share.
  bool keepBoxes = forSimulation && e.readLater;
  // (consumer instance, copy group) pairs whose region the consumer reads
  // from an earlier edge's copy (its gradient goes back with that edge's).
  std::set<std::pair<int32_t, int32_t>> sharedPairs;

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
  // Forward: one copy of each replicated region, from the replica the
  // communication plan chooses (geometry::SourceChooser, as the lowering).
  geometry::SourceChooser chooser(*produced, prod.devices, *replicaGroup,
                                  numReplicaGroups);
  for (int32_t q = 0; q < nq; ++q) {
    const Slice &needed = cons.operandSlices[e.operand][q];
    int64_t dstDevice = cons.devices[q];
    for (const geometry::SourceChooser::Source &source :
         chooser.choose(needed, dstDevice, bandwidth)) {
      int32_t p = source.instance;
      if (prod.devices[p] == dstDevice) {
        e.fwdLocal.push_back({p, q});
        continue;
      }
      Slice box;
      if (keepBoxes || shareCopies || classify)
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
      if (classify)
        moves.push_back(
            {prod.devices[p], dstDevice, box, box == (*produced)[p]});
      e.fwd.push_back(makeTransfer(p, q, prod.devices[p], dstDevice,
                                   source.volume * elemBytes));
      if (keepBoxes)
        e.fwdBoxes.push_back(std::move(box));
    }
  }
  if (classify)
    e.fwdKind = geometry::classifyExchange(moves, /*summed=*/false).kind;
  if (forSimulation)
    orderAsRounds(e.fwd, prod.devices, cons.devices,
                  keepBoxes ? &e.fwdBoxes : nullptr);
  priceExchanges(e.fwd, prod.devices, cons.devices, e.fwdLocal);
  e.fwdByDestination.clear();
  if (keepBoxes) {
    for (size_t t = 0; t < e.fwd.size(); ++t)
      e.fwdByDestination.emplace_back(cons.devices[e.fwd[t].dst],
                                      (*replicaGroup)[e.fwd[t].src],
                                      static_cast<int32_t>(t));
    std::sort(e.fwdByDestination.begin(), e.fwdByDestination.end());
  }

  // Integer values (indices, labels) carry no gradient back.
  if (!weightEdge && !graph.ops[e.producer].differentiable)
    return;
  moves.clear();

  // Backward: each consumer partition's gradient reaches every copy of
  // the producer's result, or, for a weight, each group of holder
  // instances that synchronize it once (see gradientRoutes); a region read
  // from a shared copy is summed there and sent back by the edge that
  // brought it.
  // The shared copies each consumer instance reads, in order.
  std::vector<std::vector<int32_t>> sharedOf(nq);
  for (size_t c = 0; c < e.fwdShared.size(); ++c)
    sharedOf[e.fwdShared[c].dst].push_back(static_cast<int32_t>(c));
  for (const geometry::GradientRoute &route : geometry::gradientRoutes(
           *computed, prod.devices, prod.replica, cons.operandSlices[e.operand],
           cons.devices, cons.numReplicas, reduced, /*everyMember=*/!weightEdge,
           bandwidth)) {
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
    if (classify && prod.devices[p] != cons.devices[q])
      moves.push_back({cons.devices[q], prod.devices[p], route.box,
                       route.box == cons.operandSlices[e.operand][q]});
  }
  if (classify)
    e.bwdKind = geometry::classifyExchange(moves, /*summed=*/true).kind;

  if (forSimulation)
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
        if (overlapVolume(cons.operandSlices[e.operand][q], (*computed)[p]) > 0)
          r.contributors.push_back(q);
    int64_t bytes = volume((*computed)[members.front()]) * elemBytes;
    r.reduce =
        makeCollective(prod, std::move(members), bytes, /*sharded=*/false);
    e.bwdReduces.push_back(std::move(r));
  }
}

/// Per-device communication time and received bytes, and bytes per link
/// kind, of the transfers of `e`.
void Simulator::Impl::summarizeEdge(Edge &e, const OpState &prod,
                                    const OpState &cons) {
  e.commTimeByDevice.clear();
  e.receivedByDevice.clear();
  e.bytesByLinkKind.fill(0);
  if (e.fwd.empty() && e.bwd.empty() && e.bwdReduces.empty())
    return;
  // Sums per device in the scratch tables, then listed in device order.
  std::vector<int64_t> touched;
  auto addTime = [&](int64_t device, double time) {
    if (devicePosition[device] < 0) {
      devicePosition[device] = 0;
      touched.push_back(device);
    }
    deviceTime[device] += time;
  };
  for (const Transfer &t : e.fwd) {
    addTime(prod.devices[t.src], t.time);
    addTime(cons.devices[t.dst], t.time);
    deviceBytes[cons.devices[t.dst]] += t.bytes;
    e.bytesByLinkKind[static_cast<int>(routes[t.route].link.kind)] += t.bytes;
  }
  for (const Transfer &t : e.bwd) {
    addTime(cons.devices[t.src], t.time);
    addTime(prod.devices[t.dst], t.time);
    e.bytesByLinkKind[static_cast<int>(routes[t.route].link.kind)] += t.bytes;
  }
  for (const Edge::GradReduce &r : e.bwdReduces) {
    for (int32_t p : r.reduce.partitions)
      addTime(prod.devices[p], r.reduce.time);
    for (size_t k = 0; k < r.reduce.bytesByLinkKind.size(); ++k)
      e.bytesByLinkKind[k] += r.reduce.bytesByLinkKind[k];
  }
  std::sort(touched.begin(), touched.end());
  for (int64_t device : touched) {
    e.commTimeByDevice.emplace_back(device, deviceTime[device]);
    if (deviceBytes[device] != 0)
      e.receivedByDevice.emplace_back(device, deviceBytes[device]);
    deviceTime[device] = 0;
    deviceBytes[device] = 0;
    devicePosition[device] = -1;
  }
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
bool Simulator::Impl::completeExchange(const std::vector<Transfer> &transfers,
                                       const std::vector<int64_t> &srcDevices,
                                       const std::vector<int64_t> &dstDevices,
                                       int64_t n) {
  if (static_cast<int64_t>(transfers.size()) < n * (n - 1))
    return false;
  std::vector<int64_t> &pairs = pairScratch;
  pairs.clear();
  for (const Transfer &t : transfers) {
    int64_t from = devicePosition[srcDevices[t.src]];
    int64_t to = devicePosition[dstDevices[t.dst]];
    if (from != to)
      pairs.push_back(from * n + to);
  }
  std::sort(pairs.begin(), pairs.end());
  return std::unique(pairs.begin(), pairs.end()) - pairs.begin() == n * (n - 1);
}

void Simulator::Impl::orderAsRounds(std::vector<Transfer> &transfers,
                                    const std::vector<int64_t> &srcDevices,
                                    const std::vector<int64_t> &dstDevices,
                                    std::vector<Slice> *boxes) {
  if (transfers.size() < 2 || !options.exchangesAsCollectives)
    return;
  // The devices involved, each once (an exchange has many transfers per
  // device), numbered in device order.
  std::vector<int64_t> devices;
  auto involve = [&](int64_t device) {
    if (devicePosition[device] < 0) {
      devicePosition[device] = 0;
      devices.push_back(device);
    }
  };
  for (const Transfer &t : transfers) {
    involve(srcDevices[t.src]);
    involve(dstDevices[t.dst]);
  }
  std::sort(devices.begin(), devices.end());
  for (size_t i = 0; i < devices.size(); ++i)
    devicePosition[devices[i]] = static_cast<int32_t>(i);
  // Transfers by round, in their order within a round (a counting sort).
  // A complete exchange (every device sends to every other: an all-to-all,
  // an all-gather) over a power of two pairs i with i xor r in round r
  // (MPICH's pairwise exchange): devices numbered in order fill the nodes
  // in aligned blocks, so the rounds that cross nodes come last and all
  // together, each NIC sending and receiving one piece per round, as
  // NCCL's grouped sends and receives progress at once. With i + r, each
  // device's node-crossing rounds start one round after its neighbour's,
  // and the NICs take their pieces in a staircase about twice as long.
  int64_t n = static_cast<int64_t>(devices.size());
  bool pairwise = (n & (n - 1)) == 0 &&
                  completeExchange(transfers, srcDevices, dstDevices, n);
  std::vector<int32_t> round(transfers.size());
  std::vector<size_t> first(n + 1, 0);
  for (size_t k = 0; k < transfers.size(); ++k) {
    int64_t from = devicePosition[srcDevices[transfers[k].src]];
    int64_t to = devicePosition[dstDevices[transfers[k].dst]];
    round[k] = static_cast<int32_t>(pairwise ? from ^ to : (to - from + n) % n);
    ++first[round[k] + 1];
  }
  for (int64_t device : devices)
    devicePosition[device] = -1;
  for (int64_t r = 0; r < n; ++r)
    first[r + 1] += first[r];
  std::vector<size_t> order(transfers.size());
  bool inPlace = true;
  for (size_t k = 0; k < transfers.size(); ++k) {
    size_t at = first[round[k]]++;
    order[at] = k;
    inPlace = inPlace && at == k;
  }
  if (inPlace)
    return;
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
/// datasheet rate would price it faster than NCCL moves it, and where the
/// link caps exchanges (LinkSpec::exchangeBusBandwidth) at most that. A
/// destination fed by one remote piece alone (a pipeline send) keeps the
/// link's rate. `locals` are the pieces the destinations hold already.
void Simulator::Impl::priceExchanges(std::vector<Transfer> &transfers,
                                     const std::vector<int64_t> &srcDevices,
                                     const std::vector<int64_t> &dstDevices,
                                     const std::vector<LocalDep> &locals) {
  if (transfers.empty() || !options.exchangesAsCollectives)
    return;
  // Pieces per destination instance (locals count where a transfer
  // arrives too), in a kept table indexed by instance.
  std::vector<int32_t> &pieces = piecesByDestination;
  pieces.assign(dstDevices.size(), 0);
  for (const Transfer &t : transfers)
    ++pieces[t.dst];
  for (const LocalDep &d : locals)
    if (pieces[d.dst] > 0)
      ++pieces[d.dst];
  for (Transfer &t : transfers) {
    int64_t k = pieces[t.dst];
    int64_t a = srcDevices[t.src], b = dstDevices[t.dst];
    const LinkSpec *link = machine.clusterLink(a, b);
    if (k < 2 || !link || !link->bySize.empty() ||
        link->collectiveBySize.empty() ||
        machine.getNode(a) != machine.getNode(b))
      continue;
    double whole = static_cast<double>(t.bytes) * k;
    t.time = quantized(link->latency + static_cast<double>(t.bytes) /
                                           link->exchangeBandwidthAt(whole));
  }
}

Transfer Simulator::Impl::makeTransfer(int32_t src, int32_t dst,
                                       int64_t srcDevice, int64_t dstDevice,
                                       int64_t bytes) {
  Transfer t;
  t.src = src;
  t.dst = dst;
  t.bytes = bytes;
  t.route = routeId(srcDevice, dstDevice);
  t.time =
      quantized(routes[t.route].link.transferTime(static_cast<double>(bytes)));
  if (ranksCopyMessages)
    t.sendTime =
        quantized(routes[t.route].link.sendTime(static_cast<double>(bytes)));
  return t;
}

const OpState &Simulator::Impl::stateFor(size_t op, const OpConfig &config) {
  std::vector<int64_t> key = config.degrees;
  key.push_back(config.start);
  key.push_back(config.replicas);
  key.push_back(config.recompute);
  key.push_back(static_cast<int64_t>(config.sharding));
  key.push_back(config.scatterDim);
  key.push_back(config.ring);
  key.insert(key.end(), config.strides.begin(), config.strides.end());
  auto [it, inserted] = stateCache.try_emplace({op, std::move(key)});
  if (inserted)
    buildOpState(op, config, it->second);
  return it->second;
}

double Simulator::Impl::nodeCost(size_t op, const OpConfig &config) {
  const OpState &st = stateFor(op, config);
  double kernels = 0, collectives = 0, updates = 0;
  for (size_t p = 0; p < st.devices.size(); ++p) {
    kernels = std::max(kernels,
                       st.fwdTime[p] * (st.recomputed ? 2 : 1) + st.bwdTime[p]);
    updates = std::max(updates, st.updateTime[p]);
  }
  for (const auto *list :
       {&st.partialSums, &st.gradSyncs, &st.statSyncs[0], &st.statSyncs[1]})
    for (const Collective &c : *list)
      collectives += c.time + c.postTime + 2 * c.gatherTime;
  return kernels + collectives + updates;
}

int32_t Simulator::Impl::edgeSideId(const OpState &st, int32_t side) {
  EdgeCostMemo &memo = edgeCostMemo;
  auto [found, fresh] = memo.sideIds.try_emplace({&st, side}, -1);
  if (!fresh)
    return found->second;
  std::vector<int64_t> &key = memo.scratch;
  key.clear();
  auto addBoxes = [&](const std::vector<Slice> &boxes) {
    key.push_back(static_cast<int64_t>(boxes.size()));
    for (const Slice &box : boxes) {
      key.push_back(static_cast<int64_t>(box.size()));
      for (const Range &r : box) {
        key.push_back(r.lo);
        key.push_back(r.hi);
      }
    }
  };
  auto addInts = [&](const auto &values) {
    key.push_back(static_cast<int64_t>(values.size()));
    key.insert(key.end(), values.begin(), values.end());
  };
  // What buildTransfers reads of each side, tagged by kind.
  if (side >= kOperandSide) {
    key.push_back(0);
    addBoxes(st.operandSlices[side - kOperandSide]);
    addInts(st.devices);
    addInts(st.partition);
    key.push_back(st.numReplicas);
  } else if (side < 0) {
    const OpState::HeldWeight &held = st.heldWeights[-1 - side];
    key.push_back(1);
    addBoxes(held.slices);
    addInts(st.devices);
    addInts(held.group);
    key.push_back(held.numGroups);
    addInts(st.replica);
  } else {
    key.push_back(2);
    addBoxes(st.heldSlices[side]);
    addBoxes(st.resultSlices[side]);
    addInts(st.devices);
    addInts(st.replicaGroup);
    key.push_back(st.numReplicaGroups);
    addInts(st.computedGroup);
    addInts(st.replica);
  }
  auto [id, added] = memo.layoutIds.try_emplace(
      key, static_cast<int32_t>(memo.layoutIds.size()));
  if (added)
    memo.storedInts += static_cast<int64_t>(key.size());
  found->second = id->second;
  return id->second;
}

double Simulator::Impl::edgeCost(size_t consumer, size_t operand,
                                 const OpConfig &producerConfig,
                                 const OpConfig &consumerConfig) {
  for (int32_t id : inEdges[consumer]) {
    if (edges[id].operand != static_cast<int32_t>(operand))
      continue;
    Edge &e = costEdge;
    e.takeIdentity(edges[id]);
    const OpState &prod = stateFor(e.producer, producerConfig);
    const OpState &cons = stateFor(consumer, consumerConfig);
    // The memo's keys hold whole layouts: bounded, it starts over.
    EdgeCostMemo &memo = edgeCostMemo;
    if (memo.storedInts > kEdgeCostMemoInts) {
      memo.layoutIds.clear();
      memo.sideIds.clear();
      memo.costs.clear();
      memo.storedInts = 0;
    }
    bool weightEdge = e.weightOperand >= 0;
    int64_t elemBytes =
        weightEdge ? graph.weights[graph.ops[consumer].operands[operand].index]
                         .elemBytes
                   : graph.ops[e.producer].elemBytes;
    auto key = std::make_tuple(
        edgeSideId(prod, weightEdge ? -1 - e.weightOperand : e.result),
        edgeSideId(cons, kOperandSide + static_cast<int32_t>(operand)),
        elemBytes, weightEdge || graph.ops[e.producer].differentiable);
    if (auto it = memo.costs.find(key); it != memo.costs.end())
      return it->second;
    buildTransfers(e, prod, cons);
    // Transfers into one partition queue behind each other; partitions
    // receive in parallel.
    auto slowestReceiver = [](const std::vector<Transfer> &transfers,
                              size_t receivers) {
      std::vector<double> in(receivers, 0.0);
      for (const Transfer &t : transfers)
        in[t.dst] += t.time;
      return in.empty() ? 0.0 : *std::max_element(in.begin(), in.end());
    };
    double fwd = slowestReceiver(e.fwd, cons.devices.size());
    double bwd = slowestReceiver(e.bwd, prod.devices.size());
    for (const Edge::GradReduce &r : e.bwdReduces)
      bwd = std::max(bwd, r.reduce.time);
    memo.costs.emplace(key, fwd + bwd);
    return fwd + bwd;
  }
  return 0;
}

} // namespace ppc::sim
