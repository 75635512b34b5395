//===- PlanEmitterForward.cpp - operands and forward kernels --------------===//
//
// The forward pass of one op: its operands gathered from their producers'
// pieces (or earlier readers' copies, or ZeRO-3 shards), its kernels, partial
// sums and statistics, recomputation of dropped activations, and the
// returned values.
//
//===----------------------------------------------------------------------===//

#include "PlanEmitter.h"

namespace ppc {
namespace conversion {

const StagedKernel *PlanEmitter::stagedKernel(int64_t k) const {
  const std::optional<StagedKernel> &staged = parts.graph.ops[k].space.staged;
  if (!staged || !(parts.strategy[k].ring ||
                   staged->runsFor(parts.strategy[k].degrees, training)))
    return nullptr;
  return &*staged;
}

/// The persistent buffer of an argument, weight or constant box on a rank.
Value PlanEmitter::sourceBuffer(int64_t rank, Value value, const Box &box) {
  const std::string &tensor = tensorOf[value];
  BufferKey key{rank, tensor, boxKey(box), false};
  auto it = persistent.find(key);
  if (it != persistent.end())
    return it->second;
  Value buffer = alloc(rank, tensor, box, false);
  plan::LoadOp::create(at(rank), loc, buffer);
  persistent[key] = buffer;
  return buffer;
}

/// True if the distinct boxes of `pieces` together hold every element of
/// `box` (pieces of one layout do not overlap except as identical replicas).
static bool covers(const std::vector<Box> &pieces, const Box &box) {
  int64_t need = 1;
  for (const Range &r : box)
    need *= r.size();
  std::vector<Box> seen;
  int64_t held = 0;
  for (const Box &piece : pieces) {
    if (llvm::is_contained(seen, piece))
      continue;
    seen.push_back(piece);
    if (std::optional<Box> common = geometry::intersect(piece, box)) {
      int64_t n = 1;
      for (const Range &r : *common)
        n *= r.size();
      held += n;
    }
  }
  return held == need;
}

FailureOr<OperandSource> PlanEmitter::operandBuffer(int64_t k, unsigned i,
                                                    int64_t p) {
  Operation *op = parts.ops[k];
  const OpLayout &layout = parts.layouts[k];
  int64_t rank = layout.devices[p];
  const Box &box = layout.operandBoxes[i][p];
  Value operand = op->getOperand(i);
  Value stripped = stripParallelOps(operand);
  OperandSource source;
  auto producer = parts.producerOf(stripped);
  std::optional<sim::WeightUse> holder = weightHolderOf(k, i);
  if (holder && !holdsPiece(*holder, rank, box)) {
    // Another use of a shared weight: gather its pieces from the holder.
    const OpLayout &from = parts.layouts[holder->op];
    const std::vector<Box> &held = from.operandBoxes[holder->operand];
    // The weight lives only where its holder reads it; a region no piece
    // holds is neither loaded nor trained (e.g. two slices of one weight).
    if (!covers(held, box))
      return op->emitError()
             << "operand #" << i << " of '" << parts.graph.ops[k].name
             << "' reads a region of weight '"
             << stripped.getDefiningOp<WeightOp>().getName()
             << "' that its first use '" << parts.graph.ops[holder->op].name
             << "' does not read; read the weight whole once (e.g. through a "
                "ppc.reshape to its own shape, as the ONNX importer does "
                "for slices of initializers) and slice that";
    source.buffer = alloc(rank, tensorOf[stripped], box, false);
    keepForStep(rank, source.buffer);
    source.pieces = gatherFrom(
        held, from.devices,
        [&](int64_t q) {
          return sourceBuffer(from.devices[q], stripped, held[q]);
        },
        rank, source.buffer, box);
    return source;
  }
  if (!producer && !zero3Group(k, i, p).empty()) {
    gatherWeightShards(k, i);
    source.buffer = gatheredWeights.at({k, i, p});
    return source;
  }
  if (!producer) {
    source.buffer = sourceBuffer(rank, stripped, box);
    return source;
  }
  auto [pk, pr] = *producer;
  const OpLayout &from = parts.layouts[pk];
  if (std::optional<int64_t> q = pieceHeldAs(pk, pr, rank, box)) {
    source.buffer = held[pk][pr][*q];
    source.aliased = *q;
    return source;
  }
  // Anything else must have been made explicit by a parallel op, unless
  // the piece is on this rank already.
  Operation *def = operand.getDefiningOp();
  bool moved = def && isParallelOp(def) && !isa<PartialReduceOp>(def);
  if (!moved &&
      !geometry::linesUp(from.resultPieces(pr), {geometry::Piece{rank, box}}))
    return op->emitError()
           << "operand #" << i << " of '" << parts.graph.ops[k].name
           << "' needs data from other devices but no parallel op moves it: "
              "run --ppc-materialize-resharding first";
  if (auto it = collectiveOperands.find(i);
      it != collectiveOperands.end() && it->second[p]) {
    source.buffer = it->second[p];
    return source;
  }
  source.buffer = alloc(rank, tensorOf[stripped], box, false);
  keepForStep(rank, source.buffer);
  gatheredBoxes[source.buffer] = box;
  // Unreplicated readers of a value on one rank share what was gathered
  // there; the simulator prices the same.
  std::vector<GatheredBuffer> *earlier = nullptr;
  if (parts.strategy[k].replicas == 1)
    earlier = &gathered[{rank, stripped.getAsOpaquePointer()}];
  source.pieces = gatherFrom(
      from.heldBoxes[pr], from.devices,
      [&](int64_t q) { return held[pk][pr][q]; }, rank, source.buffer, box,
      earlier, &source.shared);
  if (earlier)
    earlier->push_back({source.buffer, box});
  return source;
}

std::vector<int64_t> PlanEmitter::zero3Group(int64_t k, unsigned i,
                                             int64_t p) const {
  std::optional<sim::WeightUse> holder = weightHolderOf(k, i);
  if (!training || !holder || holder->op != k ||
      holder->operand != static_cast<int32_t>(i) ||
      parts.strategy[k].sharding != StateSharding::Parameters)
    return {};
  const sim::Source &src = parts.graph.ops[k].operands[i];
  if (!parts.graph.weights[src.index].trainable)
    return {};
  const OpLayout &layout = parts.layouts[k];
  std::vector<int64_t> group;
  for (int64_t q = 0; q < layout.numInstances(); ++q)
    if (layout.replica[q] == layout.replica[p] &&
        layout.operandBoxes[i][q] == layout.operandBoxes[i][p])
      group.push_back(q);
  llvm::sort(group, [&](int64_t a, int64_t b) {
    return layout.devices[a] < layout.devices[b];
  });
  int64_t n = static_cast<int64_t>(group.size());
  if (!geometry::zeroShardable(layout.operandBoxes[i][p], n))
    return {};
  return group;
}

void PlanEmitter::gatherWeightShards(int64_t k, unsigned i) {
  const OpLayout &layout = parts.layouts[k];
  Value weight = stripParallelOps(parts.ops[k]->getOperand(i));
  for (int64_t p = 0; p < layout.numInstances(); ++p) {
    if (gatheredWeights.count({k, i, p}))
      continue;
    std::vector<int64_t> group = zero3Group(k, i, p);
    int64_t n = static_cast<int64_t>(group.size());
    std::vector<int64_t> ranks;
    std::vector<Value> shards, wholes;
    for (int64_t j = 0; j < n; ++j) {
      int64_t q = group[j];
      int64_t rank = layout.devices[q];
      const Box &box = layout.operandBoxes[i][q];
      ranks.push_back(rank);
      shards.push_back(
          sourceBuffer(rank, weight, geometry::zeroShard(box, n, j)));
      Value whole;
      if (auto pre = prefetchedWeights.find({k, i, q});
          pre != prefetchedWeights.end()) {
        whole = pre->second;
        prefetchedWeights.erase(pre);
      } else {
        whole = alloc(rank, tensorOf[weight], box, false, /*staging=*/true);
      }
      wholes.push_back(whole);
      gatheredWeights[{k, i, q}] = whole;
    }
    collective(plan::CollectiveKind::all_gather, ranks, shards, wholes);
  }
}

void PlanEmitter::prefetchWeightShards(int64_t k) {
  Operation *op = parts.ops[k];
  const OpLayout &layout = parts.layouts[k];
  for (unsigned i = 0; i < op->getNumOperands(); ++i) {
    Value weight = stripParallelOps(op->getOperand(i));
    if (parts.producerOf(weight))
      continue;
    for (int64_t p = 0; p < layout.numInstances(); ++p) {
      std::vector<int64_t> group = zero3Group(k, i, p);
      if (group.empty() || prefetchedWeights.count({k, i, p}))
        continue;
      // The shard too, so that nothing the gather reads comes after this.
      const int64_t rank = layout.devices[p];
      const Box &box = layout.operandBoxes[i][p];
      const int64_t j = llvm::find(group, p) - group.begin();
      sourceBuffer(
          rank, weight,
          geometry::zeroShard(box, static_cast<int64_t>(group.size()), j));
      prefetchedWeights[{k, i, p}] =
          alloc(rank, tensorOf[weight], box, false, /*staging=*/true);
    }
  }
}

void PlanEmitter::dropPrefetchedWeights() {
  for (const auto &[key, buffer] : prefetchedWeights) {
    auto [k, i, p] = key;
    plan::FreeOp::create(at(parts.layouts[k].devices[p]), loc, buffer);
  }
  prefetchedWeights.clear();
}

void PlanEmitter::freeGatheredWeights(int64_t k) {
  for (auto it = gatheredWeights.begin(); it != gatheredWeights.end();) {
    auto [op, i, p] = it->first;
    if (op != k) {
      ++it;
      continue;
    }
    plan::FreeOp::create(at(parts.layouts[k].devices[p]), loc, it->second);
    it = gatheredWeights.erase(it);
  }
}

Value PlanEmitter::gradOfGathered(int64_t rank, Value buffer, Value value) {
  Value &grad = gatheredGrads[buffer];
  if (!grad) {
    grad = alloc(rank, tensorOf[value], gatheredBoxes.lookup(buffer), true);
    keepForStep(rank, grad);
    plan::FillOp::create(at(rank), loc, grad, builder.getF32FloatAttr(0.0f));
  }
  return grad;
}

std::optional<sim::WeightUse> PlanEmitter::weightHolderOf(int64_t k,
                                                          unsigned i) const {
  const sim::Source &src = parts.graph.ops[k].operands[i];
  if (src.kind != sim::Source::Kind::Weight)
    return std::nullopt;
  return weightHolders[src.index];
}

bool PlanEmitter::holdsPiece(const sim::WeightUse &holder, int64_t rank,
                             const Box &box) const {
  const OpLayout &layout = parts.layouts[holder.op];
  return partitionHolding(layout.operandBoxes[holder.operand], layout.devices,
                          rank, box)
      .has_value();
}

double PlanEmitter::bandwidth(int64_t from, int64_t to) const {
  return parts.machine ? parts.machine->effectiveLink(from, to).bandwidth : 1;
}

Value PlanEmitter::weightGradBuffer(int64_t rank, Value weight, const Box &box,
                                    int64_t replica, int64_t holderOp) {
  BufferKey key{rank, tensorOf[weight], boxKey(box), true};
  weightGradReplica[key] = replica;
  weightGradStage[key] = parts.strategy[holderOp].sharding;
  weightGradHolder[key] = holderOp;
  Value &grad = weightGrads[key];
  if (!grad) {
    grad = alloc(rank, tensorOf[weight], box, true);
    plan::FillOp::create(at(rank), loc, grad, builder.getF32FloatAttr(0.0f));
  }
  return grad;
}

std::optional<int64_t> PlanEmitter::pieceHeldAs(int64_t k, unsigned r,
                                                int64_t rank,
                                                const Box &box) const {
  const OpLayout &layout = parts.layouts[k];
  return partitionHolding(layout.heldBoxes[r], layout.devices, rank, box);
}

std::vector<std::pair<int64_t, Box>> PlanEmitter::gatherFrom(
    const std::vector<Box> &boxes, const std::vector<int64_t> &devices,
    function_ref<Value(int64_t)> source, int64_t rank, Value buffer,
    const Box &box, const std::vector<GatheredBuffer> *earlier,
    std::vector<std::pair<Value, Box>> *shared, bool accumulate) {
  std::vector<std::pair<int64_t, Box>> pieces;
  // The pieces the simulator priced: one per region, from the replica
  // geometry::SourceChooser picks.
  int32_t numGroups = 0;
  std::vector<int32_t> group = geometry::groupByBox(boxes, numGroups);
  geometry::SourceChooser chooser(boxes, devices, group, numGroups);
  auto bw = [&](int64_t from, int64_t to) { return bandwidth(from, to); };
  for (const geometry::SourceChooser::Source &chosen :
       chooser.choose(box, rank, bw)) {
    int64_t q = chosen.instance;
    Box common = *geometry::intersect(boxes[q], box);
    if (devices[q] != rank && earlier) {
      auto from = llvm::find_if(*earlier, [&](const GatheredBuffer &g) {
        return geometry::contains(g.box, common);
      });
      if (from != earlier->end()) {
        transfer(rank, from->buffer, rank, buffer, common,
                 /*accumulate=*/false);
        shared->emplace_back(from->buffer, common);
        continue;
      }
    }
    transfer(devices[q], source(q), rank, buffer, common, accumulate);
    pieces.emplace_back(q, std::move(common));
  }
  return pieces;
}

std::vector<Value> PlanEmitter::exchangeCollectively(int64_t k, unsigned i) {
  Operation *op = parts.ops[k];
  Value operand = op->getOperand(i);
  Operation *def = operand.getDefiningOp();
  auto exchange = def && isParallelOp(def)
                      ? def->getAttrOfType<StringAttr>("exchange")
                      : StringAttr();
  if (!exchange || !parts.machine)
    return {};
  std::optional<geometry::ExchangeKind> kind =
      geometry::parseExchangeKind(exchange.getValue());
  if (kind != geometry::ExchangeKind::AllGather &&
      kind != geometry::ExchangeKind::AllToAll)
    return {};
  Value stripped = stripParallelOps(operand);
  auto producer = parts.producerOf(stripped);
  if (!producer)
    return {};
  auto [pk, pr] = *producer;
  const OpLayout &from = parts.layouts[pk];
  const OpLayout &layout = parts.layouts[k];
  const std::vector<Box> &heldBoxes = from.heldBoxes[pr];
  auto bw = [&](int64_t a, int64_t b) { return bandwidth(a, b); };
  geometry::ExchangeShape shape = geometry::classifyExchange(
      geometry::forwardMoves(from.resultPieces(pr), layout.operandPieces(i),
                             bw),
      /*summed=*/false);
  if (shape.kind != *kind)
    return {};
  std::vector<int64_t> readerOn(parts.numDevices, -1);
  for (int64_t q = 0; q < layout.numInstances(); ++q) {
    int64_t &reader = readerOn[layout.devices[q]];
    if (reader >= 0)
      return {}; // two readers on one rank
    reader = q;
  }
  int32_t numGroups = 0;
  std::vector<int32_t> groupOf = geometry::groupByBox(heldBoxes, numGroups);
  geometry::SourceChooser chooser(heldBoxes, from.devices, groupOf, numGroups);
  bool shares = parts.strategy[k].replicas == 1;
  std::vector<CollectiveExchange> exchanges;
  for (const geometry::ExchangeGroup &group : shape.groups) {
    CollectiveExchange x;
    x.kind = *kind == geometry::ExchangeKind::AllGather
                 ? plan::CollectiveKind::all_gather
                 : plan::CollectiveKind::all_to_all;
    x.ranks = group.devices;
    size_t n = x.ranks.size();
    x.producers.assign(n, -1);
    for (int64_t rank : x.ranks) {
      if (readerOn[rank] < 0)
        return {};
      const Box &wanted = layout.operandBoxes[i][readerOn[rank]];
      x.wanted.push_back(wanted);
      // One source on each member, the same piece for every reader.
      const auto &sources = chooser.choose(wanted, rank, bw);
      if (sources.size() != n)
        return {};
      for (const geometry::SourceChooser::Source &source : sources) {
        auto member = llvm::find(x.ranks, from.devices[source.instance]);
        if (member == x.ranks.end())
          return {};
        int64_t &piece = x.producers[member - x.ranks.begin()];
        if (piece >= 0 && piece != source.instance)
          return {};
        piece = source.instance;
      }
    }
    for (int64_t q : x.producers)
      x.pieces.push_back(heldBoxes[q]);
    if (*kind == geometry::ExchangeKind::AllGather) {
      if (!ringCrossesPiecesLinks(x.ranks))
        return {};
      if (llvm::any_of(x.wanted,
                       [&](const Box &w) { return w != x.wanted[0]; }))
        return {};
      std::optional<unsigned> axis = tilingAxis(x.pieces, x.wanted[0]);
      if (!axis)
        return {};
      x.axis = *axis;
    } else {
      // k equal parts of every piece and every read box, so each pair
      // moves what the plan's traffic counts (a piece's k-th).
      int64_t part = geometry::overlapVolume(x.pieces[0], x.wanted[0]);
      for (size_t a = 0; a < n; ++a) {
        int64_t pieceVolume = 1, wantedVolume = 1;
        for (const Range &r : x.pieces[a])
          pieceVolume *= r.size();
        for (const Range &r : x.wanted[a])
          wantedVolume *= r.size();
        if (pieceVolume != part * static_cast<int64_t>(n) ||
            wantedVolume != part * static_cast<int64_t>(n))
          return {};
        for (size_t b = 0; b < n; ++b)
          if (geometry::overlapVolume(x.pieces[a], x.wanted[b]) != part)
            return {};
      }
    }
    // A piece an earlier reader brought is read from its copy (as the
    // simulator prices it): then the members exchange point to point.
    if (shares)
      for (int64_t rank : x.ranks)
        for (const GatheredBuffer &earlier :
             gathered[{rank, stripped.getAsOpaquePointer()}])
          for (const Box &box : x.pieces)
            if (geometry::overlaps(earlier.box, box))
              return {};
    exchanges.push_back(std::move(x));
  }
  std::vector<Value> buffers(layout.numInstances());
  for (CollectiveExchange &x : exchanges) {
    std::vector<Value> sends;
    for (auto [rank, q, wanted] : llvm::zip(x.ranks, x.producers, x.wanted)) {
      Value buffer = alloc(rank, tensorOf[stripped], wanted, false);
      keepForStep(rank, buffer);
      gatheredBoxes[buffer] = wanted;
      if (shares)
        gathered[{rank, stripped.getAsOpaquePointer()}].push_back(
            {buffer, wanted});
      buffers[readerOn[rank]] = buffer;
      x.results.push_back(buffer);
      sends.push_back(held[pk][pr][q]);
    }
    auto record = std::make_shared<CollectiveExchange>(std::move(x));
    for (Value buffer : record->results)
      collectiveExchanges[buffer] = record;
    pendingCollectives.push_back([this, record, sends = std::move(sends)] {
      collective(record->kind, record->ranks, sends, record->results,
                 record->axis);
    });
  }
  return buffers;
}

std::vector<std::pair<int64_t, Box>>
PlanEmitter::gatherPieces(int64_t k, unsigned r, int64_t rank, Value buffer,
                          const Box &box) {
  const OpLayout &layout = parts.layouts[k];
  return gatherFrom(
      layout.heldBoxes[r], layout.devices,
      [&](int64_t q) { return held[k][r][q]; }, rank, buffer, box);
}

void PlanEmitter::emitPartialSums(int64_t k) {
  const OpLayout &layout = parts.layouts[k];
  for (unsigned r = 0; r < layout.partial.size(); ++r) {
    if (!layout.partial[r])
      continue;
    std::set<int64_t> done;
    for (int64_t p = 0; p < layout.numInstances(); ++p) {
      if (done.count(p))
        continue;
      std::vector<int64_t> group = layout.sameResultBox(r, p);
      std::vector<int64_t> ranks;
      std::vector<Value> buffers, pieces;
      for (int64_t q : group) {
        done.insert(q);
        int64_t rank = layout.devices[q];
        ranks.push_back(rank);
        buffers.push_back(results[k][r][q]);
        if (layout.scattered[r]) {
          pieces.push_back(alloc(rank, tensorOf[parts.ops[k]->getResult(r)],
                                 layout.heldBoxes[r][q], false));
          keepForStep(rank, pieces.back());
        }
      }
      if (!layout.scattered[r]) {
        allReduce(ranks, buffers);
        continue;
      }
      // Member j keeps piece j (the order of sameResultBox, as heldBoxes);
      // the summands go, as the backward never reads the sum.
      collective(plan::CollectiveKind::reduce_scatter, ranks, buffers, pieces,
                 parts.strategy[k].scatterDim);
      for (auto [j, q] : llvm::enumerate(group)) {
        plan::FreeOp::create(at(ranks[j]), loc, buffers[j]);
        freedEarly.insert(buffers[j]);
        // A recomputation replaces the piece readers hold.
        Value &piece = held[k][r][q];
        if (piece && piece != buffers[j])
          recomputedBuffer[piece] = pieces[j];
        piece = pieces[j];
      }
    }
  }
}

/// Reduces per-partition statistics over the partitions that differ only
/// in the staged kernel's `acrossDims` (within one replica).
void PlanEmitter::syncStatistics(int64_t k, const std::vector<Value> &buffers,
                                 bool max) {
  const OpLayout &layout = parts.layouts[k];
  for (const std::vector<int64_t> &members :
       layout.groupsAgreeingExcept(stagedKernel(k)->acrossDims)) {
    std::vector<int64_t> ranks;
    std::vector<Value> group;
    for (int64_t q : members) {
      ranks.push_back(layout.devices[q]);
      group.push_back(buffers[q]);
    }
    allReduce(ranks, group, max);
  }
}

std::vector<SmallVector<Value, 2>>
PlanEmitter::allocStageScratch(int64_t k, bool backward) {
  const OpLayout &layout = parts.layouts[k];
  std::vector<SmallVector<Value, 2>> buffers(layout.numInstances());
  const StagedKernel *staged = stagedKernel(k);
  if (!staged)
    return buffers;
  for (int64_t p = 0; p < layout.numInstances(); ++p)
    for (const StageScratch &one :
         backward ? staged->backward : staged->forward)
      buffers[p].push_back(allocScratch(layout.devices[p],
                                        staged->shapeOf(one, layout.iter[p])));
  return buffers;
}

void PlanEmitter::runStages(int64_t k, bool backward,
                            const std::vector<SmallVector<Value, 2>> &buffers,
                            llvm::function_ref<void(int64_t)> emitStage) {
  const StagedKernel *staged = stagedKernel(k);
  if (!staged) {
    emitStage(0);
    return;
  }
  const std::vector<StageScratch> &pass =
      backward ? staged->backward : staged->forward;
  int32_t numStages = backward ? staged->backwardStages : staged->forwardStages;
  for (int32_t stage = 0; stage < numStages; ++stage) {
    emitStage(stage);
    for (auto [i, one] : llvm::enumerate(pass)) {
      if (one.syncAfter != stage)
        continue;
      std::vector<Value> perPartition;
      for (const SmallVector<Value, 2> &mine : buffers)
        perPartition.push_back(mine[i]);
      syncStatistics(k, perPartition, one.max);
    }
  }
}

Box PlanEmitter::ringBlockBox(int64_t k, unsigned i, int64_t p,
                              int64_t block) const {
  const IterationSpace &space = parts.graph.ops[k].space;
  int64_t members = parts.strategy[k].degrees[space.ring->along];
  return sliceOf(space.operands[i],
                 geometry::ringStepRanges(space, parts.layouts[k].iter[p],
                                          members, block));
}

Value PlanEmitter::ringBlockBuffer(int64_t k, unsigned i, int64_t p,
                                   int64_t block, bool grad) {
  Value value = stripParallelOps(parts.ops[k]->getOperand(i));
  return alloc(parts.layouts[k].devices[p], tensorOf[value],
               ringBlockBox(k, i, p, block), grad);
}

void PlanEmitter::passRingBlocks(int64_t k, const std::vector<int64_t> &members,
                                 int64_t s, ArrayRef<SmallVector<Value>> ins,
                                 ArrayRef<SmallVector<Value>> now,
                                 std::vector<SmallVector<Value>> &next) {
  const OpLayout &layout = parts.layouts[k];
  int64_t n = static_cast<int64_t>(members.size());
  for (int64_t m = 0; m < n && s + 1 < n; ++m) {
    int64_t to = (m + 1) % n, block = (m - s + n) % n;
    next[to] = ins[members[to]];
    for (int32_t i : parts.graph.ops[k].space.ring->operands) {
      Value buffer = ringBlockBuffer(k, i, members[to], block, false);
      next[to][i] = buffer;
      transfer(layout.devices[members[m]], now[m][i],
               layout.devices[members[to]], buffer,
               ringBlockBox(k, i, members[to], block), /*accumulate=*/false);
    }
  }
}

void PlanEmitter::emitRingForward(int64_t k, ArrayRef<SmallVector<Value>> ins,
                                  ArrayRef<SmallVector<Value>> outs) {
  const OpLayout &layout = parts.layouts[k];
  const IterationSpace &space = parts.graph.ops[k].space;
  const RingSpec &ring = *space.ring;
  auto opSym = FlatSymbolRefAttr::get(context, opSymbols[k]);
  scratch[k] = allocStageScratch(k, /*backward=*/false);
  auto kernel = [&](int64_t p, int32_t stage, ArrayRef<Value> in) {
    plan::KernelOp::create(at(layout.devices[p]), loc, opSym,
                           builder.getI64IntegerAttr(stage), in, outs[p],
                           scratch[k][p]);
  };
  for (const std::vector<int64_t> &members : layout.rings) {
    int64_t n = static_cast<int64_t>(members.size());
    // What each member computes with at this step: its operands, the
    // streamed ones being the block it holds.
    std::vector<SmallVector<Value>> now(n), next(n);
    for (int64_t m = 0; m < n; ++m)
      now[m] = ins[members[m]];
    for (int64_t s = 0; s < n; ++s) {
      // Each block goes on to the next member while the kernels run.
      batchReceipts();
      passRingBlocks(k, members, s, ins, now, next);
      for (int64_t m = 0; m < n; ++m)
        kernel(members[m], s == 0 ? ring.firstStage : ring.mergeStage, now[m]);
      flushReceipts();
      for (int64_t m = 0; m < n && s > 0; ++m)
        for (int32_t i : ring.operands)
          plan::FreeOp::create(at(layout.devices[members[m]]), loc, now[m][i]);
      now.swap(next);
    }
    for (int64_t m = 0; m < n; ++m)
      kernel(members[m], ring.finishStage, ins[members[m]]);
  }
}

void PlanEmitter::emitForwardKernels(int64_t k,
                                     ArrayRef<SmallVector<Value>> ins,
                                     ArrayRef<SmallVector<Value>> outs) {
  if (parts.strategy[k].ring) {
    emitRingForward(k, ins, outs);
    return;
  }
  const OpLayout &layout = parts.layouts[k];
  auto opSym = FlatSymbolRefAttr::get(context, opSymbols[k]);
  scratch[k] = allocStageScratch(k, /*backward=*/false);
  runStages(k, /*backward=*/false, scratch[k], [&](int64_t stage) {
    for (int64_t p = 0; p < layout.numInstances(); ++p)
      plan::KernelOp::create(at(layout.devices[p]), loc, opSym,
                             builder.getI64IntegerAttr(stage), ins[p], outs[p],
                             scratch[k][p]);
  });
}

LogicalResult PlanEmitter::emitForward(int64_t k) {
  emittingOp = k;
  Operation *op = parts.ops[k];
  const OpLayout &layout = parts.layouts[k];
  int64_t numParts = layout.numInstances();
  operands[k].assign(op->getNumOperands(),
                     std::vector<OperandSource>(numParts));
  results[k].assign(op->getNumResults(), std::vector<Value>(numParts));
  held[k].assign(op->getNumResults(), std::vector<Value>(numParts));
  resultGrads[k].assign(op->getNumResults(), std::vector<Value>(numParts));
  scratch[k].assign(numParts, {});
  if (loss && loss->first == static_cast<int64_t>(k))
    phase(plan::Phase::loss);

  std::vector<SmallVector<Value>> ins(numParts), outs(numParts);
  batchReceipts();
  collectiveOperands.clear();
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    if (std::vector<Value> buffers = exchangeCollectively(k, i);
        !buffers.empty())
      collectiveOperands[i] = std::move(buffers);
  for (int64_t p = 0; p < numParts; ++p) {
    int64_t rank = layout.devices[p];
    for (unsigned i = 0; i < op->getNumOperands(); ++i) {
      FailureOr<OperandSource> source = operandBuffer(k, i, p);
      if (failed(source))
        return failure();
      operands[k][i][p] = *source;
      ins[p].push_back(source->buffer);
    }
    for (unsigned r = 0; r < op->getNumResults(); ++r) {
      Value buffer = alloc(rank, tensorOf[op->getResult(r)],
                           layout.resultBoxes[r][p], false);
      keepForStep(rank, buffer);
      results[k][r][p] = buffer;
      held[k][r][p] = buffer;
      outs[p].push_back(buffer);
    }
  }
  flushReceipts();
  emitForwardKernels(k, ins, outs);
  emitPartialSums(k);
  // ZeRO-3 weights gathered for the kernels go again.
  freeGatheredWeights(k);
  // Recomputed ops whose last reader this is drop their results now.
  for (size_t x = 0; x < recomputed.size(); ++x)
    if (recomputed[x] && lastReader[x] == k)
      for (const std::vector<Value> &perResult : held[x])
        for (auto [p, buffer] : llvm::enumerate(perResult)) {
          plan::FreeOp::create(at(parts.layouts[x].devices[p]), loc, buffer);
          freedEarly.insert(buffer);
        }
  return success();
}

LogicalResult PlanEmitter::planRecomputation() {
  size_t numOps = parts.ops.size();
  recomputed.assign(numOps, 0);
  lastReader.resize(numOps);
  producersOf.assign(numOps, {});
  std::vector<char> hasReaders(numOps, 0);
  for (size_t c = 0; c < numOps; ++c)
    lastReader[c] = static_cast<int64_t>(c);
  for (size_t c = 0; c < numOps; ++c)
    for (const sim::Source &src : parts.graph.ops[c].operands)
      if (src.kind == sim::Source::Kind::Op) {
        producersOf[c].push_back(src.index);
        hasReaders[src.index] = 1;
        lastReader[src.index] =
            std::max(lastReader[src.index], static_cast<int64_t>(c));
      }
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (size_t x = 0; x < numOps; ++x) {
    if (!parts.strategy[x].recompute)
      continue;
    absl::Status problem = sim::recomputeProblem(parts.graph, x);
    if (!problem.ok())
      return parts.ops[x]->emitError()
             << "cannot recompute: " << ppc::messageOf(problem);
    // Results nothing reads (the graph's outputs) are kept, as the
    // simulator keeps them.
    bool returned = llvm::any_of(ret.getOperands(), [&](Value v) {
      auto producer = parts.producerOf(v);
      return producer && producer->first == static_cast<int64_t>(x);
    });
    recomputed[x] = hasReaders[x] && !returned && training;
  }
  return success();
}

void PlanEmitter::emitRecompute(int64_t x) {
  if (!recomputed[x] || recomputedNow[x])
    return;
  recomputedNow[x] = 1;
  for (int64_t y : producersOf[x])
    emitRecompute(y);
  // Its buffers are x's, whichever op's backward asked for them.
  int64_t caller = emittingOp;
  emittingOp = x;
  Operation *op = parts.ops[x];
  const OpLayout &layout = parts.layouts[x];
  // ZeRO-3 weights are gathered again for the recomputation.
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    if (!zero3Group(x, i, 0).empty())
      gatherWeightShards(x, i);
  std::vector<SmallVector<Value>> ins(layout.numInstances()),
      outs(layout.numInstances());
  for (int64_t p = 0; p < layout.numInstances(); ++p) {
    int64_t rank = layout.devices[p];
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      ins[p].push_back(gatheredWeights.count({x, i, p})
                           ? gatheredWeights.at({x, i, p})
                           : current(operands[x][i][p].buffer));
    for (unsigned r = 0; r < op->getNumResults(); ++r) {
      Value old = results[x][r][p];
      Value again = alloc(rank, tensorOf[op->getResult(r)],
                          layout.resultBoxes[r][p], false);
      keepForStep(rank, again);
      recomputedBuffer[old] = again;
      results[x][r][p] = again;
      // A reduce-scattered piece is replaced by emitPartialSums.
      if (!layout.scattered[r])
        held[x][r][p] = again;
      outs[p].push_back(again);
    }
  }
  // A staged kernel's statistics are exchanged again; the backward reads
  // the new ones.
  emitForwardKernels(x, ins, outs);
  freeGatheredWeights(x);
  emitPartialSums(x);
  emittingOp = caller;
}

LogicalResult PlanEmitter::emitOutputs() {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (Value value : ret.getOperands()) {
    auto [k, r] = *parts.producerOf(value);
    Box whole = geometry::wholeBox(shapeOf(value));
    Value buffer;
    if (std::optional<int64_t> q = pieceHeldAs(k, r, 0, whole)) {
      buffer = results[k][r][*q];
    } else {
      buffer = alloc(0, tensorOf[stripParallelOps(value)], whole, false);
      keepForStep(0, buffer);
      gatherPieces(k, r, 0, buffer, whole);
    }
    plan::OutputOp::create(at(0), loc, buffer);
  }
  return success();
}

} // namespace conversion
} // namespace ppc
