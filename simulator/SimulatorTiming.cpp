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
    occupy(res, end);
  if (core >= 0)
    occupy(core, end);
  if (ranksCopyMessages)
    occupy(r.dst, end);
  if (options.recordTimeline)
    for (int32_t res : r.resources)
      record(edge, kind, res, start, end);
  return end;
}

/// With shared cores, the core of `a`'s node that frees first (issue
/// order, as a list scheduler) when `a` and `b` share the node; else -1.
int64_t Simulator::Impl::sharedCore(int64_t a, int64_t b) {
  if (coresPerNode == 0 || a / devicesPerNode != b / devicesPerNode)
    return -1;
  int64_t base = firstCore + a / devicesPerNode * coresPerNode;
  int64_t core = base;
  // The cores not taken decided the choice too (use).
  for (int64_t c = base; c < base + coresPerNode; ++c) {
    use(c);
    if (freeAt[c] < freeAt[core])
      core = c;
  }
  return core;
}

double Simulator::Impl::runKernel(int64_t device, double ready, double time,
                                  int32_t op, TaskKind kind) {
  double start = std::max(freeAt[device], ready);
  if (int64_t core = sharedCore(device, device); core >= 0) {
    start = std::max(start, freeAt[core]);
    occupy(core, start + time);
  }
  if (start == 0)
    zeroStartSeen = true;
  double end = start + time;
  occupy(device, end);
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
  occupy(device, std::max(freeAt[device], until));
  return until;
}

void Simulator::Impl::forward(int32_t i) {
  OpState &st = ops[i];
  size_t n = st.devices.size();
  std::vector<double> &inReady = inReadyScratch;
  inReady.assign(n, 0);
  // Overlapped tensor-parallel communication: the kernel waits for the
  // producers only, and for the data in chunks (commReady).
  std::vector<double> &commReady = commReadyScratch;
  commReady.assign(n, 0);
  for (int32_t id : inEdges[i]) {
    const Edge &e = edges[id];
    // A weight is there from the start; an activation once produced.
    const std::vector<double> &producedAt = ops[e.producer].fwdEnd;
    double shift = fwdPass.shift[blockOf(e.producer)];
    auto produced = [&](int32_t p) {
      return e.weightOperand >= 0 ? 0.0 : shifted(producedAt[p], shift);
    };
    for (const LocalDep &d : e.fwdLocal)
      inReady[d.dst] = std::max(inReady[d.dst], produced(d.src));
    Edge &mutableEdge = edges[id];
    mutableEdge.fwdEnd.resize(e.fwd.size());
    for (size_t k = 0; k < e.fwd.size(); ++k) {
      const Transfer &t = e.fwd[k];
      double end = runTransfer(t, produced(t.src), id, TaskKind::Transfer);
      mutableEdge.fwdEnd[k] = end;
      bool chunked = st.overlapsComm && e.weightOperand < 0 && withinNode(t);
      inReady[t.dst] =
          std::max(inReady[t.dst], chunked ? produced(t.src) : end);
      if (chunked)
        commReady[t.dst] = std::max(commReady[t.dst], end);
    }
    for (const Edge::SharedCopy &c : e.fwdShared) {
      double end = transferEndOf(c.edge, c.transfer);
      const Transfer &t = edges[c.edge].fwd[c.transfer];
      bool chunked = st.overlapsComm && withinNode(t);
      inReady[c.dst] = std::max(inReady[c.dst], chunked ? end - t.time : end);
      if (chunked)
        commReady[c.dst] = std::max(commReady[c.dst], end);
    }
  }
  gatherWeights(i, inReady);
  st.fwdEnd.resize(n);
  std::vector<double> &fwdStart = fwdStartScratch;
  fwdStart.resize(n);
  for (size_t p = 0; p < n; ++p)
    st.fwdEnd[p] =
        runChunkedKernel(st, p, inReady[p], commReady[p], st.fwdTime[p], i,
                         TaskKind::Forward, fwdStart[p]);
  runStatSyncs(i, st.statSyncs[0], st.fwdEnd);
  for (const Collective &c : st.partialSums) {
    // Overlapped: the reduction of each chunk starts once the kernel has
    // produced it, the last one after the kernel.
    bool chunked = st.overlapsComm && withinNode(st, c);
    double end = runCollective(
        st, c, c.time,
        [&](int32_t p) {
          return chunked ? fwdStart[p] + st.fwdTime[p] / kOverlapChunks
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
  std::vector<double> &gradReady = gradReadyScratch;
  gradReady.assign(n, 0);
  std::vector<double> &commReady = commReadyScratch;
  commReady.assign(n, 0);
  for (int32_t id : outEdges[i]) {
    const Edge &e = edges[id];
    const OpState &cons = ops[e.consumer];
    // The consumer's times, and the gradients it packed.
    double shift = bwdPass.shift[blockOf(e.consumer)];
    auto consumed = [&](int32_t p) { return shifted(cons.bwdEnd[p], shift); };
    for (const LocalDep &d : e.bwdLocal)
      gradReady[d.dst] = std::max(gradReady[d.dst], consumed(d.src));
    for (const Edge::SharedCopy &c : e.fwdShared)
      for (int32_t p : c.gradTo)
        gradReady[p] = std::max(gradReady[p], consumed(c.dst));
    for (size_t k = 0; k < e.bwd.size(); ++k) {
      const Transfer &t = e.bwd[k];
      double end = runTransfer(
          t, consumed(t.src), id, TaskKind::GradTransfer,
          k < e.bwdPackedAt.size() ? shifted(e.bwdPackedAt[k], shift) : -1.0);
      bool chunked = st.overlapsComm && withinNode(t);
      gradReady[t.dst] =
          std::max(gradReady[t.dst], chunked ? consumed(t.src) : end);
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
            ready = chunked ? shifted(cons.bwdStart[c], shift) +
                                  cons.bwdTime[c] / kOverlapChunks
                            : consumed(c);
          }
        return ready;
      };
      double end = runCollective(st, r.reduce, r.reduce.time, contributed, i,
                                 TaskKind::GradReduce);
      if (chunked)
        for (int32_t c : r.contributors)
          end = std::max(end, consumed(c) + r.reduce.time / kOverlapChunks);
      for (int32_t p : members)
        gradReady[p] = std::max(gradReady[p], end);
    }
  }
  gatherWeights(i, gradReady);
  st.bwdEnd.resize(n);
  st.bwdStart.resize(n);
  for (size_t p = 0; p < n; ++p)
    st.bwdEnd[p] =
        runChunkedKernel(st, p, gradReady[p], commReady[p], st.bwdTime[p], i,
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
  double shift = bwdPass.shift[blockOf(i)];
  st.syncEnd.resize(st.gradSyncs.size());
  for (size_t g = 0; g < st.gradSyncs.size(); ++g)
    st.syncEnd[g] = runCollective(
        st, st.gradSyncs[g], st.gradSyncs[g].time,
        [&](int32_t p) {
          return std::max(shifted(st.bwdEnd[p], shift), notBefore);
        },
        i, TaskKind::GradSync);
}

void Simulator::Impl::update(int32_t i) {
  OpState &st = ops[i];
  size_t n = st.devices.size();
  std::vector<double> &updateEnd = updateEndScratch;
  updateEnd.assign(n, 0);
  bool kernelless = false;
  // Synced after the backward (not overlapped), the syncs are timed whole,
  // outside the blocks.
  double shift = bwdPass.shift[blockOf(i)];
  double syncShift = options.overlapGradSync ? shift : 0;
  for (size_t p = 0; p < n; ++p) {
    double ready = shifted(st.bwdEnd[p], shift);
    for (int32_t g : st.syncsOf[p])
      ready = std::max(ready, shifted(st.syncEnd[g], syncShift));
    if (st.updateTime[p] <= 0) {
      updateEnd[p] = ready;
      kernelless = true;
      continue;
    }
    updateEnd[p] =
        runKernel(st.devices[p], ready, st.updateTime[p], i, TaskKind::Update);
    updateSlack =
        std::min(updateSlack, updateEnd[p] - st.updateTime[p] - ready);
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
    // Gathers that wait for no update kernel wait for the inputs: they do
    // not move with the updates before them.
    if (kernelless)
      updateSlack = 0;
    runCollective(
        st, c, c.postTime, [&](int32_t p) { return updateEnd[p]; }, i,
        TaskKind::WeightGather);
  }
}

void Simulator::Impl::swapForwardBlock(int32_t b) {
  for (int32_t i = blockBegin(b); i < blockEnd(b); ++i) {
    ops[i].fwdEnd.swap(undo.opTiming[i].fwdEnd);
    // An edge's forward transfers are timed with its consumer's forward.
    for (int32_t id : inEdges[i])
      edges[id].fwdEnd.swap(undo.edgeTiming[id].fwdEnd);
  }
}

void Simulator::Impl::swapBackwardBlock(int32_t b) {
  for (int32_t i = blockBegin(b); i < blockEnd(b); ++i) {
    OpState &st = ops[i];
    Undo::OpTiming &t = undo.opTiming[i];
    st.bwdEnd.swap(t.bwdEnd);
    st.bwdStart.swap(t.bwdStart);
    st.syncEnd.swap(t.syncEnd);
    // The consumer packs an edge's gradients after its backward.
    for (int32_t id : inEdges[i])
      edges[id].bwdPackedAt.swap(undo.edgeTiming[id].bwdPackedAt);
  }
}

void Simulator::Impl::revertTiming() {
  for (BlockPass *pass : {&fwdPass, &bwdPass, &updPass}) {
    for (int32_t b : pass->timed) {
      if (pass == &fwdPass)
        swapForwardBlock(b);
      else if (pass == &bwdPass)
        swapBackwardBlock(b);
      std::swap(pass->blocks[b], pass->lastBlocks[b]);
    }
    pass->timed.clear();
    pass->shift.swap(pass->lastShift);
  }
  for (size_t s = undo.firstSnapshot; s < undo.fwdSnapshots.size(); ++s)
    fwdSnapshots[s].swap(undo.fwdSnapshots[s]);
  std::swap(lastPassEnd, undo.lastPassEnd);
  timeline.swap(undo.timeline);
  recomputePeak.swap(undo.recomputePeak);
}

bool Simulator::Impl::entryMoved(const BlockTiming &block, double shift,
                                 std::optional<double> &d) const {
  for (size_t k = 0; k < block.resources.size(); ++k) {
    double now = freeAt[block.resources[k]];
    double was = shifted(block.entry[k], shift);
    if (now == 0 && was == 0)
      continue;
    if (now == 0 || was == 0)
      return false;
    if (!d)
      d = now - was;
    else if (now != was + *d)
      return false;
  }
  // Moving is exact only while the times are (kTimeQuantum).
  return !d || std::fabs(*d) < kExactTimesBelow;
}

/// Whether `now` is `before` (stored, with its block's `shift`) moved by
/// `d`: times by d, others (unused, or -1: none) as they were; moved ones
/// stay > 0.
static bool movedBy(const std::vector<double> &now,
                    const std::vector<double> &before, double shift, double d) {
  if (now.size() != before.size())
    return false;
  for (size_t k = 0; k < now.size(); ++k) {
    double was = shifted(before[k], shift);
    if (was > 0 ? !(now[k] > 0 && now[k] == was + d)
                : now[k] != was || (d != 0 && was == 0))
      return false;
  }
  return true;
}

bool Simulator::Impl::forwardCrossingMoved(int32_t b, double d) const {
  if (b >= static_cast<int32_t>(crossing.size()) || !crossingChecked[b])
    return false;
  // Values of block `block` (`now`; the last pass stored `last`): a block
  // this pass timed again compares them, one it moved (or left: before
  // the first block timed) is moved by its shift's change.
  auto moved = [&](int32_t block, const std::vector<double> &now,
                   const std::vector<double> &last) {
    return fwdPass.timedIn[block] == passNumber
               ? movedBy(now, last, fwdPass.lastShift[block], d)
               : fwdPass.shift[block] - fwdPass.lastShift[block] == d;
  };
  int32_t boundary = blockBegin(b);
  for (int32_t id : crossing[b]) {
    const Edge &e = edges[id];
    // A weight is there from the start: its forward reads no time.
    if (e.weightOperand >= 0)
      continue;
    // The producer's results, and the copies of them its readers before
    // the boundary brought (which later readers may share).
    if (!moved(blockOf(e.producer), ops[e.producer].fwdEnd,
               undo.opTiming[e.producer].fwdEnd))
      return false;
    for (int32_t other : outEdges[e.producer]) {
      const Edge &o = edges[other];
      if (o.consumer >= boundary || o.weightOperand >= 0)
        continue;
      if (!moved(blockOf(o.consumer), o.fwdEnd, undo.edgeTiming[other].fwdEnd))
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
    int32_t c = edges[id].consumer, block = blockOf(c);
    if (bwdPass.timedIn[block] != passNumber) {
      if (bwdPass.shift[block] - bwdPass.lastShift[block] != d)
        return false;
      continue;
    }
    double last = bwdPass.lastShift[block];
    const Undo::OpTiming &before = undo.opTiming[c];
    if (!movedBy(ops[c].bwdEnd, before.bwdEnd, last, d) ||
        !movedBy(ops[c].bwdStart, before.bwdStart, last, d) ||
        !movedBy(edges[id].bwdPackedAt, undo.edgeTiming[id].bwdPackedAt, last,
                 d))
      return false;
  }
  return true;
}

void Simulator::Impl::countRecomputes(int32_t b) {
  recomputesInBlock.resize(numBlocks(), 0);
  int32_t count = 0;
  for (int32_t i = blockBegin(b); i < blockEnd(b); ++i)
    for (int32_t y : recomputeBefore[i])
      count += ops[y].recomputed;
  recomputesInBlock[b] = count;
}

template <typename Movable, typename InputsMoved, typename SwapBlock,
          typename TimeBlock>
bool Simulator::Impl::runBlocks(BlockPass &pass, int32_t first, bool forward,
                                bool keepUndo, bool mayMove, int64_t &timed,
                                int64_t &moved, Movable movable,
                                InputsMoved inputsMoved, SwapBlock swapBlock,
                                TimeBlock timeBlock) {
  int32_t blocks = numBlocks();
  // A task that started at time 0 waited for nothing: it does not move.
  auto blockMovable = [&](int32_t b, double d) {
    return movable(b, d) && (d == 0 || !lastTiming(pass, b).zeroStart);
  };
  // `moving`: the blocks of this run so far are the last pass's moved by
  // `d`, and so is what they read from before it. The state the last one
  // (`previous`) left is written to freeAt when a block uses other
  // resources, or is timed: consecutive blocks that use the same ones (a
  // model's repeated layers) leave it to the last of them.
  bool moving = false;
  double d = 0;
  // A moved block's record is the last pass's (pass.blocks).
  int32_t previous = -1;
  auto leaveState = [&] {
    if (previous < 0)
      return;
    const BlockTiming &left = pass.blocks[previous];
    for (size_t r = 0; r < left.resources.size(); ++r)
      freeAt[left.resources[r]] = shifted(left.exit[r], pass.shift[previous]);
    previous = -1;
  };
  for (int32_t b = first; b >= 0 && b < blocks; b += forward ? 1 : -1) {
    int32_t size = blockEnd(b) - blockBegin(b);
    if (forward && b % kSnapshotBlocks == 0) {
      leaveState();
      size_t s = static_cast<size_t>(b / kSnapshotBlocks);
      if (keepUndo)
        fwdSnapshots[s].swap(undo.fwdSnapshots[s]);
      fwdSnapshots[s] = freeAt;
    }
    if (mayMove) {
      const BlockTiming &last = lastTiming(pass, b);
      // The resources the block before moved used are the last pass's
      // moved by d: this block finds them as that one left them.
      if (moving) {
        bool sameResources =
            previous >= 0 && last.resources == pass.blocks[previous].resources;
        if (!sameResources)
          leaveState();
        std::optional<double> same = d;
        moving = (sameResources || entryMoved(last, pass.lastShift[b], same)) &&
                 blockMovable(b, d);
      }
      if (!moving) {
        // A new run, from here.
        leaveState();
        std::optional<double> shift;
        if (entryMoved(last, pass.lastShift[b], shift) &&
            blockMovable(b, shift.value_or(0)) &&
            inputsMoved(b, shift.value_or(0))) {
          moving = true;
          d = shift.value_or(0);
        }
      }
      if (moving) {
        pass.shift[b] = pass.lastShift[b] + d;
        previous = b;
        moved += size;
        continue;
      }
    }
    if (stopNow())
      return false;
    if (keepUndo) {
      swapBlock(b);
      std::swap(pass.blocks[b], pass.lastBlocks[b]);
      pass.timed.push_back(b);
    }
    pass.timedIn[b] = passNumber;
    pass.shift[b] = 0;
    zeroStartSeen = false;
    clearUse();
    BlockTiming &record = pass.blocks[b];
    timeBlock(b, record);
    record.zeroStart = zeroStartSeen;
    recordUse(record);
    timed += size;
  }
  leaveState();
  return true;
}

/// Times the whole iteration. With `keepUndo` (a delta simulation: fwdDirty
/// and bwdDirty say which blocks changed), a block nothing changed in is
/// not timed again where the state of the resources it uses and every
/// value it reads across its boundary are the last pass's moved by one d
/// (and none of its tasks started at time 0, which would not move): its
/// times are the last pass's moved by d, exactly (kTimeQuantum), and so are
/// the following blocks' while the resources they use are; moving a block
/// changes its shift (BlockPass). The updates move likewise where their
/// inputs, the block's backward, moved (BlockTiming::slack).
double Simulator::Impl::runTiming(bool keepUndo) {
  int32_t n = static_cast<int32_t>(ops.size());
  int32_t blocks = numBlocks();
  ++passNumber;
  for (BlockPass *pass : {&fwdPass, &bwdPass, &updPass}) {
    pass->blocks.resize(blocks);
    pass->shift.resize(blocks, 0);
    pass->timedIn.resize(blocks, 0);
    pass->timed.clear();
    if (keepUndo) {
      pass->lastBlocks.resize(blocks);
      pass->lastShift = pass->shift;
    }
  }
  fwdDirty.resize(blocks, 0);
  bwdDirty.resize(blocks, 0);
  resourceUse.resize(freeAt.size(), 0);
  if (keepUndo) {
    undo.opTiming.resize(n);
    undo.edgeTiming.resize(edges.size());
    std::swap(lastPassEnd, undo.lastPassEnd);
    timeline.swap(undo.timeline);
    recomputePeak.swap(undo.recomputePeak);
  }
  // Moving needs the last pass and exact times.
  bool mayMove = keepUndo && !options.recordTimeline &&
                 undo.lastPassEnd < kExactTimesBelow;
  timingStats = {};
  auto clearDirty = [&] {
    std::fill(fwdDirty.begin(), fwdDirty.end(), 0);
    std::fill(bwdDirty.begin(), bwdDirty.end(), 0);
  };
  // The latest end of block b's forward (backward) tasks.
  auto blockLatestEnd = [&](int32_t b, bool forward) {
    double latest = 0;
    for (int32_t i = blockBegin(b); i < blockEnd(b); ++i)
      for (double t : forward ? ops[i].fwdEnd : ops[i].bwdEnd)
        latest = std::max(latest, t);
    return latest;
  };

  // Forward, from the snapshot before the first block that changed (the
  // blocks before it are the last pass's), or from the zero state.
  size_t snapshots =
      static_cast<size_t>((blocks + kSnapshotBlocks - 1) / kSnapshotBlocks);
  fwdSnapshots.resize(snapshots);
  int32_t firstBlock = 0;
  if (mayMove)
    firstBlock = static_cast<int32_t>(
        (std::find(fwdDirty.begin(), fwdDirty.end(), 1) - fwdDirty.begin()) /
        kSnapshotBlocks * kSnapshotBlocks);
  if (firstBlock >= blocks)
    firstBlock = (blocks - 1) / kSnapshotBlocks * kSnapshotBlocks;
  if (keepUndo) {
    undo.fwdSnapshots.resize(snapshots);
    undo.firstSnapshot = static_cast<size_t>(firstBlock / kSnapshotBlocks);
  }
  if (firstBlock == 0) {
    std::fill(freeAt.begin(), freeAt.end(), 0.0);
    timeline.clear();
  } else {
    freeAt = fwdSnapshots[firstBlock / kSnapshotBlocks];
  }
  bool done = runBlocks(
      fwdPass, firstBlock, /*forward=*/true, keepUndo, mayMove,
      timingStats.opsTimed, timingStats.opsMoved,
      [&](int32_t b, double) { return !fwdDirty[b]; },
      [&](int32_t b, double d) { return forwardCrossingMoved(b, d); },
      [&](int32_t b) { swapForwardBlock(b); },
      [&](int32_t b, BlockTiming &record) {
        for (int32_t i = blockBegin(b); i < blockEnd(b); ++i)
          forward(i);
        record.latestEnd = blockLatestEnd(b, /*forward=*/true);
      });

  // Backward, from the top block down.
  if (done) {
    recomputedNow.assign(n, 0);
    recomputePeak.assign(numDevices, 0);
    done = runBlocks(
        bwdPass, blocks - 1, /*forward=*/false, keepUndo, mayMove,
        timingStats.opsTimed, timingStats.opsMoved,
        [&](int32_t b, double) { return !bwdDirty[b] && !recomputesIn(b); },
        [&](int32_t b, double d) { return backwardCrossingMoved(b + 1, d); },
        [&](int32_t b) { swapBackwardBlock(b); },
        [&](int32_t b, BlockTiming &record) {
          for (int32_t i = blockEnd(b) - 1; i >= blockBegin(b); --i) {
            for (int32_t x : recomputeBefore[i]) {
              cascadeBytes.assign(numDevices, 0);
              recompute(x);
              for (int64_t dev = 0; dev < numDevices; ++dev)
                recomputePeak[dev] =
                    std::max(recomputePeak[dev], cascadeBytes[dev]);
            }
            backward(i);
            if (options.overlapGradSync)
              syncGradients(i, 0);
          }
          record.latestEnd = blockLatestEnd(b, /*forward=*/false);
        });
  }
  clearDirty();
  if (!done)
    return 0;

  if (!options.overlapGradSync) {
    // Synchronize only once the whole backward pass is done.
    double backwardDone = 0;
    for (int64_t dev = 0; dev < numDevices; ++dev)
      backwardDone = std::max(backwardDone, freeAt[dev]);
    for (int32_t i = n - 1; i >= 0; --i)
      syncGradients(i, backwardDone);
  }
  // The updates, from the top block down. They read their own block's
  // backward: where it moved by less than the updates (their slack, beyond
  // which they wait for it), they move with what precedes them. Syncs
  // after the backward, and gathers summed for the next forward, are
  // timed whole.
  deferredGather.assign(numDevices, 0);
  bool mayMoveUpdates =
      mayMove && options.overlapGradSync && !options.overlapParamGather;
  done = runBlocks(
      updPass, blocks - 1, /*forward=*/false, keepUndo, mayMoveUpdates,
      timingStats.updatesTimed, timingStats.updatesMoved,
      [&](int32_t b, double d) {
        if (bwdPass.timedIn[b] == passNumber)
          return false;
        const BlockTiming &last = lastTiming(updPass, b);
        double inputs = bwdPass.shift[b] - last.inputShift;
        double own = updPass.lastShift[b] + d;
        return inputs == own || (last.slack > 0 && inputs - own <= last.slack);
      },
      [](int32_t, double) { return true; }, [](int32_t) {},
      [&](int32_t b, BlockTiming &record) {
        updateSlack = std::numeric_limits<double>::infinity();
        for (int32_t i = blockEnd(b) - 1; i >= blockBegin(b); --i)
          update(i);
        record.slack = updateSlack;
        record.inputShift = bwdPass.shift[b];
      });
  if (!done)
    return 0;
  double end = 0;
  for (double t : freeAt)
    end = std::max(end, t);
  if (options.overlapParamGather) {
    // Deferred gathers run beside the next forward: what they take beyond
    // it delays that iteration.
    double gathers = 0;
    for (double t : deferredGather)
      gathers = std::max(gathers, t);
    end += std::max(0.0, gathers - latestEnd(fwdPass));
  }
  lastPassEnd = end;
  return end;
}

} // namespace ppc::sim
