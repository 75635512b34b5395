//===- PlanEmitterBackward.cpp - gradients, their sync, update ------------===//
//
// The backward pass of one op (gradients routed back along
// geometry::gradientRoutes or all-reduced), and after the last one the
// weight gradients' synchronization (all-reduce, reduce-scatter for ZeRO)
// and the optimizer's update of the pieces each rank holds.
//
//===----------------------------------------------------------------------===//

#include "PlanEmitter.h"

namespace ppc {
namespace conversion {

Value PlanEmitter::gradBuffer(int64_t k, unsigned r, int64_t p) {
  Value &buffer = resultGrads[k][r][p];
  if (!buffer) {
    const OpLayout &layout = parts.layouts[k];
    int64_t rank = layout.devices[p];
    buffer = alloc(rank, tensorOf[parts.ops[k]->getResult(r)],
                   layout.resultBoxes[r][p], true);
    keepForStep(rank, buffer, k);
    // The loss is the one value whose gradient is seeded: 1 on every copy
    // (the loss is the sum of a partial-sum group's members, each of which
    // has derivative 1).
    bool seed = loss && loss->first == k && loss->second == r;
    plan::FillOp::create(at(rank), loc, buffer,
                         builder.getF32FloatAttr(seed ? 1.0f : 0.0f));
  }
  return buffer;
}

LogicalResult PlanEmitter::emitBackward(int64_t k) {
  emittingOp = k;
  Operation *op = parts.ops[k];
  const OpLayout &layout = parts.layouts[k];
  int64_t numParts = layout.numInstances();
  auto graphOp = planOp.lookupSymbol<plan::GraphOp>(opSymbols[k]);
  ArrayRef<bool> needsGrad = graphOp.getNeedsGrad();
  if (llvm::none_of(needsGrad, [](bool b) { return b; }))
    return success();
  bool isLoss = loss && loss->first == k;
  bool anyGrad = isLoss;
  for (auto &perResult : resultGrads[k])
    for (Value v : perResult)
      anyGrad |= static_cast<bool>(v);
  if (!anyGrad)
    return success(); // nothing downstream depends on it

  // Where each operand's gradient goes (geometry::gradientRoutes: every
  // copy of an activation, one instance of each synchronizing group of a
  // weight, sent by one replica of each partition) and which pieces an
  // all-reduce sums instead; the simulator prices exactly these.
  unsigned numOperands = op->getNumOperands();
  std::vector<std::vector<std::vector<geometry::GradientRoute>>> routes(
      numOperands, std::vector<std::vector<geometry::GradientRoute>>(numParts));
  std::vector<std::vector<std::vector<int64_t>>> reduced(numOperands);
  auto bw = [&](int64_t from, int64_t to) { return bandwidth(from, to); };
  for (unsigned i = 0; i < numOperands; ++i) {
    if (!needsGrad[i])
      continue;
    std::optional<sim::WeightUse> holder = weightHolderOf(k, i);
    const OpLayout *from = nullptr;
    const std::vector<Box> *held = nullptr;
    if (holder) {
      if (holder->op == k && holder->operand == static_cast<int32_t>(i))
        continue; // the holder's own gradient: no route
      from = &parts.layouts[holder->op];
      held = &from->operandBoxes[holder->operand];
    } else if (auto producer = parts.producerOf(op->getOperand(i))) {
      from = &parts.layouts[producer->first];
      held = &from->resultBoxes[producer->second];
      reduced[i] = geometry::allReducedGradientGroups(
          *held, from->devices, layout.operandBoxes[i], layout.devices,
          layout.partition);
    } else {
      continue;
    }
    std::vector<char> skip(held->size(), 0);
    for (const std::vector<int64_t> &group : reduced[i])
      for (int64_t q : group)
        skip[q] = 1;
    for (geometry::GradientRoute &route : geometry::gradientRoutes(
             *held, from->devices, from->replica, layout.operandBoxes[i],
             layout.devices, layout.numReplicas, skip,
             /*everyMember=*/!holder, bw))
      routes[i][route.consumer].push_back(std::move(route));
  }
  // The consumer instance on `rank` taking part in a reduced group.
  auto inReducedGroup = [&](unsigned i, int64_t p) {
    for (const std::vector<int64_t> &group : reduced[i])
      for (int64_t q : group)
        if (parts.layouts[parts.producerOf(op->getOperand(i))->first]
                .devices[q] == layout.devices[p])
          return true;
    return false;
  };

  std::vector<SmallVector<Value>> outGrads(numParts), inGrads(numParts);
  std::vector<SmallVector<Value>> ins(numParts), outs(numParts);
  // Gradients of operands that are sent along their routes afterwards.
  std::vector<std::vector<Value>> sendBack(numParts);
  for (int64_t p = 0; p < numParts; ++p) {
    int64_t rank = layout.devices[p];
    sendBack[p].assign(numOperands, Value());
    for (unsigned r = 0; r < op->getNumResults(); ++r) {
      outGrads[p].push_back(gradBuffer(k, r, p));
      // Reduce-scattered sums were not kept (checkConfig: all results of
      // such an op are): its backward gets no outputs.
      if (!layout.scattered[r])
        outs[p].push_back(results[k][r][p]);
    }
    for (unsigned i = 0; i < numOperands; ++i) {
      const OperandSource &source = operands[k][i][p];
      if (!zero3Group(k, i, p).empty()) {
        // ZeRO-3: the whole weight is gathered again for the backward.
        gatherWeightShards(k, i);
        ins[p].push_back(gatheredWeights.at({k, i, p}));
      } else {
        ins[p].push_back(current(source.buffer));
      }
      if (!needsGrad[i])
        continue;
      Value stripped = stripParallelOps(op->getOperand(i));
      const Box &box = layout.operandBoxes[i][p];
      std::optional<sim::WeightUse> holder = weightHolderOf(k, i);
      if (holder && holder->op == k &&
          holder->operand == static_cast<int32_t>(i)) {
        // The holder's own piece: its gradient lives across steps.
        inGrads[p].push_back(
            weightGradBuffer(rank, stripped, box, layout.replica[p], k));
        continue;
      }
      // Accumulate straight into the one piece this gradient goes to when
      // it is on this device and is exactly this box.
      const std::vector<geometry::GradientRoute> &mine = routes[i][p];
      bool single = mine.size() == 1 && mine.front().box == box &&
                    !(holder ? false : inReducedGroup(i, p));
      if (single && holder && source.pieces.empty()) {
        const OpLayout &from = parts.layouts[holder->op];
        int64_t q = mine.front().producer;
        if (from.devices[q] == rank) {
          inGrads[p].push_back(weightGradBuffer(rank, stripped, box,
                                                from.replica[q], holder->op));
          continue;
        }
      }
      if (single && !holder && source.aliased &&
          *source.aliased == mine.front().producer) {
        auto producer = parts.producerOf(stripped);
        inGrads[p].push_back(
            gradBuffer(producer->first, producer->second, *source.aliased));
        continue;
      }
      // Later readers that copied from a gathered buffer added their
      // gradients to its gradient buffer already.
      Value grad;
      if (gatheredBoxes.count(source.buffer)) {
        grad = gradOfGathered(rank, source.buffer, stripped);
      } else {
        grad = alloc(rank, tensorOf[stripped], box, true);
        keepForStep(rank, grad);
        plan::FillOp::create(at(rank), loc, grad,
                             builder.getF32FloatAttr(0.0f));
      }
      inGrads[p].push_back(grad);
      sendBack[p][i] = grad;
    }
  }

  auto opSym = FlatSymbolRefAttr::get(context, opSymbols[k]);
  auto mask = DenseBoolArrayAttr::get(context, needsGrad);
  // The forward's scratch first, then the backward's own.
  std::vector<SmallVector<Value, 2>> backwardScratch =
      allocStageScratch(k, /*backward=*/true);
  std::vector<SmallVector<Value, 2>> passed = scratch[k];
  passed.resize(numParts);
  for (int64_t p = 0; p < numParts; ++p)
    passed[p].append(backwardScratch[p].begin(), backwardScratch[p].end());
  if (parts.strategy[k].ring) {
    emitRingBackward(k, mask, ins, outs, outGrads, inGrads, passed);
  } else {
    runStages(k, /*backward=*/true, backwardScratch, [&](int64_t stage) {
      for (int64_t p = 0; p < numParts; ++p)
        plan::KernelBackwardOp::create(at(layout.devices[p]), loc, opSym,
                                       builder.getI64IntegerAttr(stage), mask,
                                       ins[p], outs[p], outGrads[p], inGrads[p],
                                       passed[p], DenseBoolArrayAttr());
    });
  }

  freeGatheredWeights(k);
  // Regions copied from an earlier reader's buffer go back through it,
  // before that buffer's gradient is sent on (the earlier reader may be
  // another operand of this op, reading the same value).
  for (int64_t p = 0; p < numParts; ++p)
    for (unsigned i = 0; i < numOperands; ++i) {
      if (!sendBack[p][i] || weightHolderOf(k, i))
        continue;
      Value value = stripParallelOps(op->getOperand(i));
      for (const auto &[buffer, region] : operands[k][i][p].shared)
        transfer(layout.devices[p], sendBack[p][i], layout.devices[p],
                 gradOfGathered(layout.devices[p], buffer, value), region,
                 /*accumulate=*/true);
    }
  // Each operand gradient goes along its routes, as one exchange.
  batchReceipts();
  std::vector<std::vector<char>> scattered(numOperands,
                                           std::vector<char>(numParts, 0));
  for (unsigned i = 0; i < numOperands; ++i) {
    if (weightHolderOf(k, i))
      continue;
    Value value = stripParallelOps(op->getOperand(i));
    if (auto producer = parts.producerOf(value)) {
      std::vector<Value> grads(numParts);
      for (int64_t p = 0; p < numParts; ++p)
        grads[p] = sendBack[p][i];
      returnGradientsCollectively(k, i, value, *producer, routes[i], grads,
                                  scattered[i]);
      gatherGradientsCollectively(k, i, value, *producer, routes[i], grads,
                                  scattered[i]);
    }
  }
  for (int64_t p = 0; p < numParts; ++p) {
    int64_t rank = layout.devices[p];
    for (unsigned i = 0; i < numOperands; ++i) {
      if (!sendBack[p][i])
        continue;
      Value value = stripParallelOps(op->getOperand(i));
      if (std::optional<sim::WeightUse> holder = weightHolderOf(k, i)) {
        const OpLayout &from = parts.layouts[holder->op];
        for (const geometry::GradientRoute &route : routes[i][p]) {
          int64_t q = route.producer;
          transfer(rank, sendBack[p][i], from.devices[q],
                   weightGradBuffer(from.devices[q], value,
                                    from.operandBoxes[holder->operand][q],
                                    from.replica[q], holder->op),
                   route.box, /*accumulate=*/true);
        }
        continue;
      }
      const std::vector<std::pair<Value, Box>> &shared =
          operands[k][i][p].shared;
      if (scattered[i][p])
        continue;
      auto [pk, pr] = *parts.producerOf(op->getOperand(i));
      for (const geometry::GradientRoute &route : routes[i][p]) {
        if (llvm::any_of(shared, [&](const auto &region) {
              return region.second == route.box;
            }))
          continue;
        transfer(rank, sendBack[p][i],
                 parts.layouts[pk].devices[route.producer],
                 gradBuffer(pk, pr, route.producer), route.box,
                 /*accumulate=*/true);
      }
    }
  }
  flushReceipts();
  // Pieces whose copies each need the sum of one gradient per device: copy
  // each device's share out, all-reduce, and add the sum to every copy.
  for (unsigned i = 0; i < numOperands; ++i) {
    if (reduced[i].empty())
      continue;
    Value value = stripParallelOps(op->getOperand(i));
    auto [pk, pr] = *parts.producerOf(op->getOperand(i));
    const OpLayout &from = parts.layouts[pk];
    for (const std::vector<int64_t> &group : reduced[i]) {
      std::vector<int64_t> ranks;
      std::vector<Value> sums;
      for (int64_t q : group) {
        int64_t rank = from.devices[q];
        const Box &box = from.resultBoxes[pr][q];
        int64_t contributor = -1;
        for (int64_t p = 0; p < numParts; ++p)
          if (layout.devices[p] == rank &&
              geometry::intersect(layout.operandBoxes[i][p], box))
            contributor = p;
        Value sum = alloc(rank, tensorOf[value], box, true);
        keepForStep(rank, sum, pk);
        transfer(rank, sendBack[contributor][i], rank, sum, box,
                 /*accumulate=*/false);
        ranks.push_back(rank);
        sums.push_back(sum);
      }
      allReduce(ranks, sums);
      for (auto [q, sum] : llvm::zip(group, sums))
        transfer(from.devices[q], sum, from.devices[q], gradBuffer(pk, pr, q),
                 from.resultBoxes[pr][q], /*accumulate=*/true);
    }
  }
  return success();
}

void PlanEmitter::emitRingBackward(int64_t k, DenseBoolArrayAttr mask,
                                   ArrayRef<SmallVector<Value>> ins,
                                   ArrayRef<SmallVector<Value>> outs,
                                   ArrayRef<SmallVector<Value>> outGrads,
                                   ArrayRef<SmallVector<Value>> inGrads,
                                   ArrayRef<SmallVector<Value, 2>> passed) {
  const OpLayout &layout = parts.layouts[k];
  const IterationSpace &space = parts.graph.ops[k].space;
  const RingSpec &ring = *space.ring;
  auto opSym = FlatSymbolRefAttr::get(context, opSymbols[k]);
  ArrayRef<bool> needsGrad = mask.asArrayRef();
  // The place of operand i's gradient among a kernel's input grads.
  auto gradIndex = [&](unsigned i) {
    return llvm::count(needsGrad.take_front(i), true);
  };
  auto kernel = [&](int64_t p, int32_t stage, ArrayRef<Value> in,
                    ArrayRef<Value> grads) {
    plan::KernelBackwardOp::create(
        at(layout.devices[p]), loc, opSym, builder.getI64IntegerAttr(stage),
        mask, in, outs[p], outGrads[p], grads, passed[p], DenseBoolArrayAttr());
  };
  for (int64_t p = 0; p < layout.numInstances(); ++p)
    kernel(p, ring.prepareStage, ins[p], inGrads[p]);
  for (const std::vector<int64_t> &members : layout.rings) {
    int64_t n = static_cast<int64_t>(members.size());
    // Per member at this step: the operands it computes with (the block it
    // holds) and the gradients it adds to (that block's, which go round
    // with it, starting from 0 with its first holder).
    std::vector<SmallVector<Value>> now(n), next(n), grads(n), nextGrads(n);
    for (int64_t m = 0; m < n; ++m) {
      now[m] = ins[members[m]];
      grads[m] = inGrads[members[m]];
      for (int32_t i : ring.operands) {
        if (!needsGrad[i])
          continue;
        Value sum = ringBlockBuffer(k, i, members[m], m, /*grad=*/true);
        plan::FillOp::create(at(layout.devices[members[m]]), loc, sum,
                             builder.getF32FloatAttr(0.0f));
        grads[m][gradIndex(i)] = sum;
      }
    }
    for (int64_t s = 0; s < n; ++s) {
      batchReceipts();
      passRingBlocks(k, members, s, ins, now, next);
      for (int64_t m = 0; m < n; ++m)
        kernel(members[m], ring.blockStage, now[m], grads[m]);
      // The block's gradients follow it; after the last step they reach
      // its first holder, which adds them to its own.
      for (int64_t m = 0; m < n; ++m) {
        int64_t to = (m + 1) % n, block = (m - s + n) % n;
        nextGrads[to] = inGrads[members[to]];
        for (int32_t i : ring.operands) {
          if (!needsGrad[i])
            continue;
          Value sum = grads[m][gradIndex(i)];
          Value into = s + 1 < n ? ringBlockBuffer(k, i, members[to], block,
                                                   /*grad=*/true)
                                 : inGrads[members[to]][gradIndex(i)];
          transfer(layout.devices[members[m]], sum, layout.devices[members[to]],
                   into, ringBlockBox(k, i, members[to], block),
                   /*accumulate=*/s + 1 == n);
          nextGrads[to][gradIndex(i)] = into;
        }
      }
      flushReceipts();
      for (int64_t m = 0; m < n; ++m) {
        int64_t rank = layout.devices[members[m]];
        for (int32_t i : ring.operands) {
          if (s > 0)
            plan::FreeOp::create(at(rank), loc, now[m][i]);
          if (needsGrad[i])
            plan::FreeOp::create(at(rank), loc, grads[m][gradIndex(i)]);
        }
      }
      now.swap(next);
      grads.swap(nextGrads);
    }
  }
}

void PlanEmitter::returnGradientsCollectively(
    int64_t k, unsigned i, Value value, std::pair<int64_t, unsigned> producer,
    const std::vector<std::vector<geometry::GradientRoute>> &routes,
    const std::vector<Value> &sendBack, std::vector<char> &done) {
  const OpLayout &layout = parts.layouts[k];
  auto [pk, pr] = producer;
  std::set<CollectiveExchange *> seen;
  for (int64_t p = 0; p < layout.numInstances(); ++p) {
    auto it = collectiveExchanges.find(operands[k][i][p].buffer);
    if (it == collectiveExchanges.end() ||
        !seen.insert(it->second.get()).second)
      continue;
    const CollectiveExchange &x = *it->second;
    // Each member's gradient of what it read goes back as the parts the
    // members' pieces hold, to the instances it read them from: the
    // exchange's transpose (the simulator classifies these routes so too).
    std::vector<int64_t> members;
    bool matches = true;
    for (auto [read, wanted] : llvm::zip(x.results, x.wanted)) {
      int64_t q = *llvm::find_if(
          llvm::seq<int64_t>(0, layout.numInstances()),
          [&](int64_t q) { return operands[k][i][q].buffer == read; });
      const std::vector<geometry::GradientRoute> &mine = routes[q];
      matches = matches && sendBack[q] && operands[k][i][q].shared.empty() &&
                mine.size() == x.producers.size();
      for (const geometry::GradientRoute &route : mine) {
        auto j = llvm::find(x.producers, route.producer);
        matches = matches && j != x.producers.end() &&
                  geometry::intersect(
                      wanted, x.pieces[j - x.producers.begin()]) == route.box;
      }
      members.push_back(q);
    }
    if (!matches)
      continue;
    std::vector<Value> grads, sums;
    for (auto [rank, q, piece] : llvm::zip(x.ranks, members, x.pieces)) {
      Value sum = alloc(rank, tensorOf[value], piece, true);
      keepForStep(rank, sum, pk);
      grads.push_back(sendBack[q]);
      sums.push_back(sum);
      done[q] = 1;
    }
    plan::CollectiveKind kind = x.kind == plan::CollectiveKind::all_gather
                                    ? plan::CollectiveKind::reduce_scatter
                                    : plan::CollectiveKind::all_to_all;
    pendingCollectives.push_back(
        [this, x = *it->second, kind, grads, sums, pk = pk, pr = pr] {
          collective(kind, x.ranks, grads, sums, x.axis);
          for (auto [rank, q, piece, sum] :
               llvm::zip(x.ranks, x.producers, x.pieces, sums))
            transfer(rank, sum, rank, gradBuffer(pk, pr, q), piece,
                     /*accumulate=*/true);
        });
  }
}

void PlanEmitter::gatherGradientsCollectively(
    int64_t k, unsigned i, Value value, std::pair<int64_t, unsigned> producer,
    const std::vector<std::vector<geometry::GradientRoute>> &routes,
    const std::vector<Value> &sendBack, std::vector<char> &done) {
  if (!parts.machine)
    return;
  const OpLayout &layout = parts.layouts[k];
  auto [pk, pr] = producer;
  const OpLayout &from = parts.layouts[pk];
  int64_t numParts = layout.numInstances();
  std::vector<geometry::ExchangeMove> moves;
  for (int64_t q = 0; q < numParts; ++q) {
    if (done[q] || !operands[k][i][q].shared.empty())
      return;
    if (!sendBack[q])
      continue;
    for (const geometry::GradientRoute &route : routes[q])
      moves.push_back({layout.devices[q], from.devices[route.producer],
                       route.box, route.box == layout.operandBoxes[i][q]});
  }
  geometry::ExchangeShape shape =
      geometry::classifyExchange(moves, /*summed=*/true);
  if (shape.kind != geometry::ExchangeKind::AllGather)
    return;
  struct Gather {
    std::vector<int64_t> ranks, senders, receivers;
    Box whole;
    unsigned axis = 0;
  };
  std::vector<Gather> gathers;
  for (const geometry::ExchangeGroup &group : shape.groups) {
    Gather g;
    g.ranks = group.devices;
    std::vector<Box> pieces;
    for (int64_t rank : g.ranks) {
      // One sender and one receiver on each member.
      std::vector<int64_t> senders, receivers;
      for (int64_t q = 0; q < numParts; ++q)
        if (layout.devices[q] == rank && sendBack[q])
          senders.push_back(q);
      for (int64_t p = 0; p < from.numInstances(); ++p)
        if (from.devices[p] == rank)
          receivers.push_back(p);
      if (senders.size() != 1 || receivers.size() != 1)
        return;
      g.senders.push_back(senders[0]);
      g.receivers.push_back(receivers[0]);
      pieces.push_back(layout.operandBoxes[i][senders[0]]);
      const Box &computed = from.resultBoxes[pr][receivers[0]];
      if (g.whole.empty())
        g.whole = computed;
      if (computed != g.whole)
        return;
    }
    if (!ringCrossesPiecesLinks(g.ranks))
      return;
    // Each sender's whole piece to every member, the local one included.
    for (int64_t q : g.senders) {
      if (routes[q].size() != g.ranks.size())
        return;
      for (const geometry::GradientRoute &route : routes[q])
        if (!llvm::is_contained(g.receivers, route.producer) ||
            route.box != layout.operandBoxes[i][q])
          return;
    }
    std::optional<unsigned> axis = tilingAxis(pieces, g.whole);
    if (!axis)
      return;
    g.axis = *axis;
    gathers.push_back(std::move(g));
  }
  for (Gather &g : gathers) {
    std::vector<Value> grads, wholes;
    for (auto [rank, q] : llvm::zip(g.ranks, g.senders)) {
      Value whole = alloc(rank, tensorOf[value], g.whole, true);
      keepForStep(rank, whole, pk);
      grads.push_back(sendBack[q]);
      wholes.push_back(whole);
      done[q] = 1;
    }
    pendingCollectives.push_back(
        [this, g = std::move(g), grads, wholes, pk = pk, pr = pr] {
          collective(plan::CollectiveKind::all_gather, g.ranks, grads, wholes,
                     g.axis);
          for (auto [rank, p, whole] : llvm::zip(g.ranks, g.receivers, wholes))
            transfer(rank, whole, rank, gradBuffer(pk, pr, p), g.whole,
                     /*accumulate=*/true);
        });
  }
}

void PlanEmitter::allocBeside(Value shard, Value grad) {
  Operation *def = grad.getDefiningOp();
  Operation *alloc = shard.getDefiningOp();
  if (def && isa<plan::AllocOp>(def) && def->getBlock() == alloc->getBlock())
    alloc->moveAfter(def);
}

LogicalResult PlanEmitter::emitGradSyncAndUpdate() {
  phase(plan::Phase::grad_sync);
  // The instances holding the same weight piece in the same replica sum
  // their gradients (replicas computed identical ones).
  std::map<std::tuple<std::string, std::vector<std::pair<int64_t, int64_t>>,
                      int64_t>,
           std::vector<std::pair<int64_t, Value>>>
      replicas;
  for (const auto &[key, grad] : weightGrads)
    replicas[{key.tensor, key.box, weightGradReplica.at(key)}].emplace_back(
        key.rank, grad);
  for (const auto &[a, ranksA] : replicas)
    for (const auto &[b, ranksB] : replicas) {
      if (std::get<0>(a) != std::get<0>(b) || std::get<1>(a) == std::get<1>(b))
        continue;
      Box boxA, boxB;
      for (auto [lo, hi] : std::get<1>(a))
        boxA.push_back({lo, hi});
      for (auto [lo, hi] : std::get<1>(b))
        boxB.push_back({lo, hi});
      // The holder's partitions read a weight in equal or disjoint pieces;
      // anything else is a bug here, not in the strategy.
      if (geometry::intersect(boxA, boxB))
        return func.emitError()
               << "internal error: weight '"
               << planOp.lookupSymbol<plan::TensorOp>(std::get<0>(a))
                      .getModelName()
                      .value_or(std::get<0>(a))
               << "' is held in overlapping but different pieces";
    }
  // ZeRO stages 1 and 2 (geometry::zeroShardable decides, as in the
  // simulator): the group reduce-scatters the gradient along dim 0, each
  // member updates its shard of the weight and the shards are all-gathered
  // back; stage 2 frees the whole gradient after the reduce-scatter.
  struct ShardedPiece {
    std::vector<int64_t> ranks;
    std::vector<Value> weights, shardGrads;
    std::vector<Box> shards;
    std::string tensor;
  };
  std::vector<ShardedPiece> sharded;
  llvm::DenseSet<Value> shardedGrads;
  struct ShardUpdate {
    int64_t rank;
    Value weight, grad;
  };
  std::vector<ShardUpdate> zero3Updates;
  for (const auto &[piece, holders] : replicas) {
    std::vector<int64_t> ranks;
    std::vector<Value> buffers;
    for (const auto &[rank, grad] : holders) {
      ranks.push_back(rank);
      buffers.push_back(grad);
    }
    const std::string &tensor = std::get<0>(piece);
    Box box;
    for (auto [lo, hi] : std::get<1>(piece))
      box.push_back({lo, hi});
    BufferKey first{ranks.front(), tensor, std::get<1>(piece), true};
    StateSharding stage = weightGradStage.at(first);
    int64_t k = static_cast<int64_t>(ranks.size());
    if (stage == StateSharding::None || !geometry::zeroShardable(box, k)) {
      allReduce(ranks, buffers);
      continue;
    }
    if (stage == StateSharding::Parameters) {
      // ZeRO-3: the weight lives in shards; the gradient is reduce-scattered
      // into each rank's shard and updates it there.
      std::vector<Value> shardGrads;
      for (int64_t j = 0; j < k; ++j) {
        Box shard = geometry::zeroShard(box, k, j);
        Value shardGrad = alloc(ranks[j], tensor, shard, true);
        allocBeside(shardGrad, buffers[j]);
        keepForStep(ranks[j], shardGrad);
        shardGrads.push_back(shardGrad);
        shardedGrads.insert(buffers[j]);
        zero3Updates.push_back(
            {ranks[j], persistent.at({ranks[j], tensor, boxKey(shard), false}),
             shardGrad});
      }
      collective(plan::CollectiveKind::reduce_scatter, ranks, buffers,
                 shardGrads);
      for (auto [rank, grad] : llvm::zip(ranks, buffers))
        plan::FreeOp::create(at(rank), loc, grad);
      continue;
    }
    ShardedPiece s;
    s.ranks = ranks;
    s.tensor = tensor;
    for (int64_t j = 0; j < k; ++j) {
      s.shards.push_back(geometry::zeroShard(box, k, j));
      Value shardGrad = alloc(ranks[j], tensor, s.shards[j], true);
      allocBeside(shardGrad, buffers[j]);
      keepForStep(ranks[j], shardGrad);
      s.shardGrads.push_back(shardGrad);
      BufferKey valueKey{ranks[j], tensor, std::get<1>(piece), false};
      s.weights.push_back(persistent.at(valueKey));
      shardedGrads.insert(buffers[j]);
    }
    collective(plan::CollectiveKind::reduce_scatter, ranks, buffers,
               s.shardGrads);
    if (stage == StateSharding::Gradients)
      for (auto [rank, grad] : llvm::zip(ranks, buffers))
        plan::FreeOp::create(at(rank), loc, grad);
    sharded.push_back(std::move(s));
  }
  phase(plan::Phase::update);
  for (const auto &[key, grad] : weightGrads) {
    if (shardedGrads.count(grad))
      continue;
    BufferKey valueKey = key;
    valueKey.grad = false;
    plan::UpdateOp::create(at(key.rank), loc, persistent.at(valueKey), grad);
  }
  for (const ShardUpdate &u : zero3Updates)
    plan::UpdateOp::create(at(u.rank), loc, u.weight, u.grad);
  for (const ShardedPiece &s : sharded) {
    std::vector<Value> staged;
    for (size_t j = 0; j < s.ranks.size(); ++j) {
      int64_t rank = s.ranks[j];
      plan::UpdateOp::create(at(rank), loc, s.weights[j], s.shardGrads[j]);
      // The updated shard, staged for the all-gather.
      Value shard = alloc(rank, s.tensor, s.shards[j], false,
                          /*staging=*/true);
      keepForStep(rank, shard);
      transfer(rank, s.weights[j], rank, shard, s.shards[j],
               /*accumulate=*/false);
      staged.push_back(shard);
    }
    collective(plan::CollectiveKind::all_gather, s.ranks, staged, s.weights);
  }
  return success();
}

} // namespace conversion
} // namespace ppc
