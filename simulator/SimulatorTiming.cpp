//===- SimulatorTiming.cpp - the tasks in issue order
//-----------------------===//
//
// Times the built tasks: forward, backward, recomputation, gradient syncs
// and updates, each on its resources in issue order, in blocks of ops; a
// delta simulation times the blocks a change touches and moves the others
// by the shift of what precedes them (runTiming).
//
//===----------------------------------------------------------------------===//

#include "SimulatorImpl.h"

namespace ppc::sim {

void Simulator::Impl::record(int32_t op, TaskKind kind, int32_t resource,
                             double start, double end) {
  if (options.recordTimeline)
    timeline.push_back({op, kind, resource, start, end - start});
}

/// The sending rank's part of transfer `t` (packing it and handing it
/// over: a kernel's worth of its time, and a core), issued now and ready
/// at `ready`; returns when it starts.
double Simulator::Impl::packMessage(const Transfer &t, double ready,
                                    int32_t edge, TaskKind kind) {
  return runKernel(routes[t.route].src, ready, t.sendTime, edge, kind) -
         t.sendTime;
}

/// Runs a point-to-point transfer ready at `ready`, whose sender began
/// packing it at `packedAt` (packMessage; < 0: packs it now); returns its
/// end.
double Simulator::Impl::runTransfer(const Transfer &t, double ready,
                                    int32_t edge, TaskKind kind,
                                    double packedAt) {
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
  if (start == 0)
    zeroStartSeen = true;
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

/// With shared cores, the core of `a`'s node that frees first (issue
/// order, as a list scheduler) when `a` and `b` share the node; else -1.
int64_t Simulator::Impl::sharedCore(int64_t a, int64_t b) const {
  if (coresPerNode == 0 || a / devicesPerNode != b / devicesPerNode)
    return -1;
  int64_t base = firstCore + a / devicesPerNode * coresPerNode;
  int64_t core = base;
  for (int64_t c = base + 1; c < base + coresPerNode; ++c)
    if (freeAt[c] < freeAt[core])
      core = c;
  return core;
}

double Simulator::Impl::runKernel(int64_t device, double ready, double time,
                                  int32_t op, TaskKind kind) {
  double start = std::max(freeAt[device], ready);
  if (int64_t core = sharedCore(device, device); core >= 0) {
    start = std::max(start, freeAt[core]);
    freeAt[core] = start + time;
  }
  if (start == 0)
    zeroStartSeen = true;
  double end = start + time;
  freeAt[device] = end;
  record(op, kind, static_cast<int32_t>(device), start, end);
  return end;
}

/// ZeRO-3: all-gathers op `i`'s sharded weights before its kernels, which
/// wait for them (`ready`, per instance). They are issued with the op and
/// may start as early as the communication stream allows (prefetch).
void Simulator::Impl::gatherWeights(int32_t i, std::vector<double> &ready) {
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
bool Simulator::Impl::withinNode(const Transfer &t) const {
  const RouteInfo &r = routes[t.route];
  return machine.getNode(r.src) == machine.getNode(r.dst);
}

/// Whether the members of collective `c` of `st` share one node.
bool Simulator::Impl::withinNode(const OpState &st, const Collective &c) const {
  for (int32_t p : c.partitions)
    if (machine.getNode(st.devices[p]) !=
        machine.getNode(st.devices[c.partitions.front()]))
      return false;
  return true;
}

/// Runs instance `p`'s kernel of `time` once `ready`; with overlapped
/// communication arriving by `commReady`, the kernel runs in chunks
/// beside it and ends no sooner than the last chunk after it. Records
/// the kernel's start in `start`.
double Simulator::Impl::runChunkedKernel(OpState &st, size_t p, double ready,
                                         double commReady, double time,
                                         int32_t op, TaskKind kind,
                                         double &start) {
  int64_t device = st.devices[p];
  double end = runKernel(device, ready, time, op, kind);
  start = end - time;
  return holdUntil(device, end, commReady + time / kOverlapChunks);
}

/// A kernel on `device` that would end at `end` but consumes data that
/// arrives in chunks ends no sooner than `until`: the device stays busy.
double Simulator::Impl::holdUntil(int64_t device, double end, double until) {
  if (until <= end)
    return end;
  freeAt[device] = std::max(freeAt[device], until);
  return until;
}

void Simulator::Impl::forward(int32_t i) {
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

void Simulator::Impl::backward(int32_t i) {
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
          end = std::max(end, cons.bwdEnd[c] + r.reduce.time / kOverlapChunks);
      for (int32_t p : members)
        st.gradReady[p] = std::max(st.gradReady[p], end);
    }
  }
  gatherWeights(i, st.gradReady);
  st.bwdEnd.resize(n);
  st.bwdStart.resize(n);
  for (size_t p = 0; p < n; ++p)
    st.bwdEnd[p] =
        runChunkedKernel(st, p, st.gradReady[p], commReady[p], st.bwdTime[p], i,
                         TaskKind::Backward, st.bwdStart[p]);
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
void Simulator::Impl::runStatSyncs(int32_t i,
                                   const std::vector<Collective> &syncs,
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
void Simulator::Impl::regatherInputs(int32_t i) {
  OpState &st = ops[i];
  std::vector<double> &arrived = regatherScratch;
  arrived.assign(st.devices.size(), 0);
  for (int32_t id : inEdges[i]) {
    const Edge &e = edges[id];
    if (e.weightOperand >= 0)
      continue;
    for (const Transfer &t : e.fwd)
      arrived[t.dst] =
          std::max(arrived[t.dst],
                   runTransfer(t, st.bwdStart[t.dst], id, TaskKind::Transfer));
  }
  for (size_t p = 0; p < st.devices.size(); ++p)
    if (arrived[p] > 0)
      st.bwdEnd[p] = holdUntil(st.devices[p], st.bwdEnd[p],
                               arrived[p] + st.bwdTime[p] / 2);
}

/// Runs op `x`'s forward kernels (and partial sums) again if it drops its
/// results, after the recomputed ops it reads (each once per pass).
void Simulator::Impl::recompute(int32_t x) {
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
    end[p] =
        runKernel(st.devices[p], end[p], st.fwdTime[p], x, TaskKind::Recompute);
    for (const auto &slices : st.heldSlices)
      cascadeBytes[st.devices[p]] += volume(slices[p]) * graph.ops[x].elemBytes;
  }
  runStatSyncs(x, st.statSyncs[0], end);
  for (const Collective &c : st.partialSums)
    runCollective(
        st, c, c.time, [&](int32_t p) { return end[p]; }, x,
        TaskKind::Recompute);
}

/// Gradient all-reduces of op `i`, none starting before `notBefore`.
void Simulator::Impl::syncGradients(int32_t i, double notBefore) {
  OpState &st = ops[i];
  st.syncEnd.resize(st.gradSyncs.size());
  for (size_t g = 0; g < st.gradSyncs.size(); ++g)
    st.syncEnd[g] = runCollective(
        st, st.gradSyncs[g], st.gradSyncs[g].time,
        [&](int32_t p) { return std::max(st.bwdEnd[p], notBefore); }, i,
        TaskKind::GradSync);
}

void Simulator::Impl::update(int32_t i) {
  OpState &st = ops[i];
  size_t n = st.devices.size();
  st.updateEnd.assign(n, 0);
  for (size_t p = 0; p < n; ++p) {
    double ready = st.bwdEnd[p];
    for (int32_t g : st.syncsOf[p])
      ready = std::max(ready, st.syncEnd[g]);
    st.updateEnd[p] = st.updateTime[p] > 0
                          ? runKernel(st.devices[p], ready, st.updateTime[p], i,
                                      TaskKind::Update)
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

void Simulator::Impl::swapTiming(int32_t firstTimed) {
  size_t n = ops.size();
  undo.opTiming.resize(n);
  undo.edgeTiming.resize(edges.size());
  undo.fwdCheckpoints.resize(fwdCheckpoints.size());
  undo.bwdCheckpoints.resize(bwdCheckpoints.size());
  for (size_t i = 0; i < n; ++i) {
    OpState &st = ops[i];
    Undo::OpTiming &t = undo.opTiming[i];
    if (static_cast<int32_t>(i) >= firstTimed) {
      st.inReady.swap(t.inReady);
      st.fwdEnd.swap(t.fwdEnd);
      st.fwdStart.swap(t.fwdStart);
    }
    st.gradReady.swap(t.gradReady);
    st.bwdEnd.swap(t.bwdEnd);
    st.bwdStart.swap(t.bwdStart);
    st.syncEnd.swap(t.syncEnd);
    st.updateEnd.swap(t.updateEnd);
  }
  for (size_t id = 0; id < edges.size(); ++id) {
    Edge &e = edges[id];
    Undo::EdgeTiming &t = undo.edgeTiming[id];
    // An edge's forward transfers are timed with its consumer's forward.
    if (e.consumer >= firstTimed)
      e.fwdEnd.swap(t.fwdEnd);
    e.bwdPackedAt.swap(t.bwdPackedAt);
  }
  // The pass starts from the checkpoint of firstTimed's block and writes
  // the later ones, and every backward one.
  for (size_t c = firstTimed / kCheckpointEvery + 1; c < fwdCheckpoints.size();
       ++c)
    std::swap(fwdCheckpoints[c], undo.fwdCheckpoints[c]);
  bwdCheckpoints.swap(undo.bwdCheckpoints);
  std::swap(lastPassEnd, undo.lastPassEnd);
  timeline.swap(undo.timeline);
  recomputePeak.swap(undo.recomputePeak);
}

std::optional<double>
Simulator::Impl::stateShift(const std::vector<double> &now,
                            const std::vector<double> &before) const {
  if (now.size() != before.size())
    return std::nullopt;
  std::optional<double> d;
  for (size_t r = 0; r < now.size(); ++r) {
    if (now[r] == 0 && before[r] == 0)
      continue;
    if (now[r] == 0 || before[r] == 0)
      return std::nullopt;
    if (!d)
      d = now[r] - before[r];
    else if (now[r] != before[r] + *d)
      return std::nullopt;
  }
  if (!d)
    return 0.0;
  // Moving is exact only while the times are (kTimeQuantum).
  if (!(std::fabs(*d) < kExactTimesBelow))
    return std::nullopt;
  return d;
}

/// Whether `now` is `before` moved by `d`: entries > 0 (times) by d, others
/// (unused, or -1: none) as they were; moved ones stay > 0.
static bool movedBy(const std::vector<double> &now,
                    const std::vector<double> &before, double d) {
  if (now.size() != before.size())
    return false;
  for (size_t k = 0; k < now.size(); ++k) {
    if (before[k] > 0 ? !(now[k] > 0 && now[k] == before[k] + d)
                      : now[k] != before[k] || (d != 0 && before[k] == 0))
      return false;
  }
  return true;
}

/// `out` = `from` with its entries > 0 (times, not "unused" or "none")
/// moved by `d`.
static void moveInto(std::vector<double> &out, const std::vector<double> &from,
                     double d) {
  out.resize(from.size());
  for (size_t k = 0; k < from.size(); ++k)
    out[k] = from[k] > 0 ? from[k] + d : from[k];
}

bool Simulator::Impl::forwardCrossingMoved(int32_t b, double d,
                                           int32_t firstTimed) const {
  if (b >= static_cast<int32_t>(crossing.size()) || !crossingChecked[b])
    return false;
  int32_t boundary = b * kCheckpointEvery;
  for (int32_t id : crossing[b]) {
    const Edge &e = edges[id];
    // A weight is there from the start: its forward reads no time.
    if (e.weightOperand >= 0)
      continue;
    // The producer's results, and the copies of them its readers before
    // the boundary brought (which later readers may share).
    if (e.producer < firstTimed) {
      // Not timed again: as it was.
      if (d != 0)
        return false;
      continue;
    }
    if (!movedBy(ops[e.producer].fwdEnd, undo.opTiming[e.producer].fwdEnd, d))
      return false;
    for (int32_t other : outEdges[e.producer]) {
      const Edge &o = edges[other];
      if (o.consumer >= boundary || o.weightOperand >= 0)
        continue;
      if (o.consumer < firstTimed
              ? d != 0
              : !movedBy(o.fwdEnd, undo.edgeTiming[other].fwdEnd, d))
        return false;
    }
  }
  return true;
}

bool Simulator::Impl::backwardCrossingMoved(int32_t b, double d) const {
  if (b >= static_cast<int32_t>(crossing.size()))
    return true; // the top: nothing above it
  if (!crossingChecked[b])
    return false;
  for (int32_t id : crossing[b]) {
    const Edge &e = edges[id];
    const OpState &cons = ops[e.consumer];
    const Undo::OpTiming &before = undo.opTiming[e.consumer];
    if (!movedBy(cons.bwdEnd, before.bwdEnd, d) ||
        !movedBy(cons.bwdStart, before.bwdStart, d) ||
        !movedBy(e.bwdPackedAt, undo.edgeTiming[id].bwdPackedAt, d))
      return false;
  }
  return true;
}

void Simulator::Impl::moveForward(int32_t i, double d) {
  OpState &st = ops[i];
  const Undo::OpTiming &before = undo.opTiming[i];
  moveInto(st.inReady, before.inReady, d);
  moveInto(st.fwdEnd, before.fwdEnd, d);
  moveInto(st.fwdStart, before.fwdStart, d);
  for (int32_t id : inEdges[i])
    moveInto(edges[id].fwdEnd, undo.edgeTiming[id].fwdEnd, d);
}

void Simulator::Impl::moveBackward(int32_t i, double d) {
  OpState &st = ops[i];
  const Undo::OpTiming &before = undo.opTiming[i];
  moveInto(st.gradReady, before.gradReady, d);
  moveInto(st.bwdEnd, before.bwdEnd, d);
  moveInto(st.bwdStart, before.bwdStart, d);
  if (options.overlapGradSync)
    moveInto(st.syncEnd, before.syncEnd, d);
  for (int32_t id : inEdges[i])
    moveInto(edges[id].bwdPackedAt, undo.edgeTiming[id].bwdPackedAt, d);
}

bool Simulator::Impl::recomputesIn(int32_t b) const {
  int32_t hi = std::min<int32_t>(static_cast<int32_t>(ops.size()),
                                 (b + 1) * kCheckpointEvery);
  for (int32_t i = b * kCheckpointEvery; i < hi; ++i)
    for (int32_t x : recomputeBefore[i])
      if (ops[x].recomputed)
        return true;
  return false;
}

/// Times the whole iteration, re-using the last pass for the forward of
/// the ops before `firstChanged` (nothing before it changed). With
/// `keepUndo` (a delta simulation: fwdDirty and bwdDirty say which blocks
/// changed), a block nothing changed in is not timed again where the state
/// before it and every value it reads across its boundary are the last
/// pass's moved by one d (and none of its tasks started at time 0, which
/// would not move): its times are the last pass's moved by d, exactly
/// (kTimeQuantum), up to the next block that changed.
double Simulator::Impl::runTiming(int32_t firstChanged, bool keepUndo) {
  int32_t n = static_cast<int32_t>(ops.size());
  int32_t blocks = numBlocks();
  fwdCheckpoints.resize(blocks + 1);
  bwdCheckpoints.resize(blocks + 1);
  fwdDirty.resize(blocks, 0);
  bwdDirty.resize(blocks, 0);
  int32_t firstBlock = firstChanged / kCheckpointEvery;
  if (options.recordTimeline)
    firstBlock = 0;
  int32_t first = firstBlock * kCheckpointEvery;
  if (keepUndo) {
    undo.firstTimed = first;
    swapTiming(first);
  }
  // Moving needs the last pass (in undo, as large as this one's after
  // swapTiming) and exact times.
  bool mayMove = keepUndo && !options.recordTimeline &&
                 undo.lastPassEnd < kExactTimesBelow;
  opsTimed = opsMoved = 0;
  auto clearDirty = [&] {
    std::fill(fwdDirty.begin(), fwdDirty.end(), 0);
    std::fill(bwdDirty.begin(), bwdDirty.end(), 0);
  };
  auto moveCheckpoint = [&](Checkpoint &out, const Checkpoint &before,
                            double d) {
    moveInto(out.freeAt, before.freeAt, d);
    out.zeroStart = before.zeroStart;
    out.latestEnd = before.latestEnd > 0 ? before.latestEnd + d : 0;
  };
  // The latest end of ops [lo, hi)'s forward (backward) tasks.
  auto latestEnd = [&](int32_t lo, int32_t hi, bool forward) {
    double latest = 0;
    for (int32_t i = lo; i < hi; ++i)
      for (double t : forward ? ops[i].fwdEnd : ops[i].bwdEnd)
        latest = std::max(latest, t);
    return latest;
  };

  if (first == 0) {
    std::fill(freeAt.begin(), freeAt.end(), 0.0);
    timeline.clear();
    fwdCheckpoints[0].freeAt = freeAt;
  } else {
    freeAt = fwdCheckpoints[firstBlock].freeAt;
  }
  // Forward. `moving`: the blocks from here are the last pass's moved by
  // `shift` (freeAt is not kept up to date meanwhile).
  bool moving = false;
  double shift = 0;
  for (int32_t b = firstBlock; b < blocks; ++b) {
    if (stopNow()) {
      clearDirty();
      return 0;
    }
    int32_t lo = b * kCheckpointEvery, hi = std::min(n, lo + kCheckpointEvery);
    const Checkpoint &before = undo.fwdCheckpoints[b + 1];
    auto canMove = [&](double d) {
      return !fwdDirty[b] && (d == 0 || !before.zeroStart);
    };
    if (b > firstBlock && mayMove && !moving && !fwdDirty[b]) {
      std::optional<double> d =
          stateShift(freeAt, undo.fwdCheckpoints[b].freeAt);
      if (d && canMove(*d) && forwardCrossingMoved(b, *d, first)) {
        moving = true;
        shift = *d;
      }
    }
    if (moving && !canMove(shift)) {
      // A changed block: timed again from its moved checkpoint.
      moving = false;
      freeAt = fwdCheckpoints[b].freeAt;
    }
    if (moving) {
      for (int32_t i = lo; i < hi; ++i)
        moveForward(i, shift);
      moveCheckpoint(fwdCheckpoints[b + 1], before, shift);
      opsMoved += hi - lo;
      continue;
    }
    zeroStartSeen = false;
    for (int32_t i = lo; i < hi; ++i)
      forward(i);
    opsTimed += hi - lo;
    fwdCheckpoints[b + 1].freeAt = freeAt;
    fwdCheckpoints[b + 1].zeroStart = zeroStartSeen;
    fwdCheckpoints[b + 1].latestEnd = latestEnd(lo, hi, /*forward=*/true);
  }
  if (moving)
    freeAt = fwdCheckpoints[blocks].freeAt;

  // Backward, from the top block down.
  recomputedNow.assign(n, 0);
  recomputePeak.assign(numDevices, 0);
  bwdCheckpoints[blocks].freeAt = freeAt;
  bwdCheckpoints[blocks].zeroStart = false;
  moving = false;
  for (int32_t b = blocks - 1; b >= 0; --b) {
    if (stopNow()) {
      clearDirty();
      return 0;
    }
    int32_t lo = b * kCheckpointEvery, hi = std::min(n, lo + kCheckpointEvery);
    const Checkpoint &before = undo.bwdCheckpoints[b];
    auto canMove = [&](double d) {
      return !bwdDirty[b] && (d == 0 || !before.zeroStart) && !recomputesIn(b);
    };
    if (mayMove && !moving && !bwdDirty[b]) {
      std::optional<double> d =
          stateShift(freeAt, undo.bwdCheckpoints[b + 1].freeAt);
      if (d && canMove(*d) && backwardCrossingMoved(b + 1, *d)) {
        moving = true;
        shift = *d;
      }
    }
    if (moving && !canMove(shift)) {
      moving = false;
      freeAt = bwdCheckpoints[b + 1].freeAt;
    }
    if (moving) {
      for (int32_t i = hi - 1; i >= lo; --i)
        moveBackward(i, shift);
      moveCheckpoint(bwdCheckpoints[b], before, shift);
      opsMoved += hi - lo;
      continue;
    }
    zeroStartSeen = false;
    for (int32_t i = hi - 1; i >= lo; --i) {
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
    opsTimed += hi - lo;
    bwdCheckpoints[b].freeAt = freeAt;
    bwdCheckpoints[b].zeroStart = zeroStartSeen;
    bwdCheckpoints[b].latestEnd = latestEnd(lo, hi, /*forward=*/false);
  }
  if (moving)
    freeAt = bwdCheckpoints[0].freeAt;
  clearDirty();

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
  if (options.overlapParamGather) {
    // Deferred gathers run beside the next forward: what they take beyond
    // it delays that iteration.
    double gathers = 0, forwardEnd = 0;
    for (double t : deferredGather)
      gathers = std::max(gathers, t);
    for (const OpState &st : ops)
      for (double t : st.fwdEnd)
        forwardEnd = std::max(forwardEnd, t);
    end += std::max(0.0, gathers - forwardEnd);
  }
  lastPassEnd = end;
  return end;
}

} // namespace ppc::sim
