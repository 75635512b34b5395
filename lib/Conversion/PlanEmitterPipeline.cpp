//===- PlanEmitterPipeline.cpp - micro-batches and schedule ---------------===//
//
// Pipelines: one state of layouts and buffers per micro-batch, the stages'
// forward and backward tasks in the schedule's order (merged into one
// global order), and the returned values summed over micro-batches.
//
//===----------------------------------------------------------------------===//

#include "PlanEmitter.h"

namespace ppc {
namespace conversion {

void PlanEmitter::swapState(MicroBatchState &state) {
  std::swap(parts.layouts, state.layouts);
  std::swap(results, state.results);
  std::swap(resultGrads, state.resultGrads);
  std::swap(held, state.held);
  std::swap(operands, state.operands);
  std::swap(scratch, state.scratch);
  std::swap(gathered, state.gathered);
  std::swap(recomputedNow, state.recomputedNow);
}

void PlanEmitter::enterMicroBatch(int64_t j) {
  if (j == currentMicroBatch)
    return;
  // The current state goes back to its slot; what comes out of it (left
  // there when it was entered) is dropped by the second swap.
  swapState(microBatches[currentMicroBatch]);
  swapState(microBatches[j]);
  currentMicroBatch = j;
}

void PlanEmitter::allocPipelinedOutputs() {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (Value value : ret.getOperands()) {
    // Collected on the first device of the producer's stage, within the
    // stage's tasks; sent to rank 0 at the end of the step.
    auto [k, r] = *parts.producerOf(value);
    int64_t rank = pipeline.firstDevice[parts.strategy[k].stage];
    Value buffer = alloc(rank, tensorOf[stripParallelOps(value)],
                         geometry::wholeBox(shapeOf(value)), false);
    keepForStep(rank, buffer);
    plan::FillOp::create(at(rank), loc, buffer, builder.getF32FloatAttr(0.0f));
    outputBuffers.emplace_back(rank, buffer);
  }
}

void PlanEmitter::gatherPipelinedOutputs(int64_t k) {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (auto [value, output] : llvm::zip(ret.getOperands(), outputBuffers)) {
    auto [pk, r] = *parts.producerOf(value);
    if (pk != k)
      continue;
    // Micro-batches hold disjoint boxes of a batched value and each a
    // share of a batch mean (the loss): adding them up gives both.
    const OpLayout &layout = parts.layouts[k];
    gatherFrom(
        layout.heldBoxes[r], layout.devices,
        [&](int64_t q) { return held[k][r][q]; }, output.first, output.second,
        geometry::wholeBox(shapeOf(value)), nullptr, nullptr,
        /*accumulate=*/true);
  }
}

void PlanEmitter::emitPipelinedOutputs() {
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (auto [value, output] : llvm::zip(ret.getOperands(), outputBuffers)) {
    auto [rank, buffer] = output;
    if (rank != 0) {
      Box whole = geometry::wholeBox(shapeOf(value));
      Value onZero = alloc(0, tensorOf[stripParallelOps(value)], whole, false);
      keepForStep(0, onZero);
      transfer(rank, buffer, 0, onZero, whole, /*accumulate=*/false);
      buffer = onZero;
    }
    plan::OutputOp::create(at(0), loc, buffer);
  }
}

LogicalResult PlanEmitter::emitForwardTask(int64_t stage, int64_t j) {
  enterMicroBatch(j);
  taskMicroBatch = pipeline.enabled() ? j : -1;
  const std::vector<int64_t> &ops = stageOps[stage];
  for (size_t t = 0; t < ops.size(); ++t) {
    const int64_t k = ops[t];
    if (t + 1 < ops.size())
      prefetchWeightShards(ops[t + 1]);
    if (failed(emitForward(k)))
      return failure();
    if (pipeline.enabled())
      gatherPipelinedOutputs(k);
  }
  taskMicroBatch = -1;
  dropPrefetchedWeights();
  return pipeline.enabled() ? success() : emitOutputs();
}

LogicalResult PlanEmitter::emitBackwardTask(int64_t stage, int64_t j) {
  enterMicroBatch(j);
  taskMicroBatch = pipeline.enabled() ? j : -1;
  const std::vector<int64_t> &ops = stageOps[stage];
  for (size_t t = ops.size(); t-- > 0;) {
    const int64_t k = ops[t];
    if (t > 0)
      prefetchWeightShards(ops[t - 1]);
    // Dropped results come back before the first backward that reads
    // them: their latest reader's.
    for (size_t x = 0; x < recomputed.size(); ++x)
      if (lastReader[x] == k)
        emitRecompute(x);
    if (failed(emitBackward(k)))
      return failure();
    // A recomputed op's new results are last read by its own backward.
    if (recomputedNow[k])
      for (const std::vector<Value> &perResult : held[k])
        for (auto [p, buffer] : llvm::enumerate(perResult)) {
          plan::FreeOp::create(at(parts.layouts[k].devices[p]), loc, buffer);
          freedEarly.insert(buffer);
        }
  }
  taskMicroBatch = -1;
  dropPrefetchedWeights();
  if (!pipeline.enabled())
    return success();
  // The micro-batch is done on this stage: its buffers go (of this
  // stage's ops: an interleaved group still runs other stages of it).
  for (size_t i : transientOf[{j, stage}]) {
    const Transient &t = transient[i];
    if (freedEarly.insert(t.buffer).second)
      plan::FreeOp::create(at(t.rank), loc, t.buffer);
  }
  return success();
}

LogicalResult PlanEmitter::emitSchedule() {
  size_t numOps = parts.ops.size();
  int64_t numRanks = parts.numDevices;
  pipeline = parts.pipeline;
  sim::Pipeline stages = pipeline.orWholeMachine(numRanks);
  int64_t numStages = stages.numStages(), m = stages.microbatches;
  stageOps.assign(numStages, {});
  for (size_t k = 0; k < numOps; ++k)
    stageOps[parts.strategy[k].stage].push_back(static_cast<int64_t>(k));

  // A kernel whose statistics span the batch (batch norm's) never sees the
  // whole batch when micro-batches run apart: the search's own check.
  size_t atFault = 0;
  if (pipeline.enabled())
    if (absl::Status problem =
            sim::checkMicroBatching(parts.graph, m, training, &atFault);
        !problem.ok())
      return parts.ops[atFault]->emitError() << ppc::messageOf(problem);

  // Every micro-batch starts with empty buffers and its own layouts.
  microBatches.assign(m, MicroBatchState());
  for (int64_t j = 0; j < m; ++j) {
    MicroBatchState &state = microBatches[j];
    state.layouts = pipeline.enabled() ? parts.microLayouts[j] : parts.layouts;
    state.results.resize(numOps);
    state.resultGrads.resize(numOps);
    state.held.resize(numOps);
    state.operands.resize(numOps);
    state.scratch.resize(numOps);
    state.recomputedNow.assign(numOps, 0);
  }
  currentMicroBatch = 0;
  swapState(microBatches[0]);
  groupOfRank.assign(numRanks, -1);
  for (int64_t g = 0; g < stages.numGroups(); ++g)
    for (int64_t d = 0; d < stages.numDevices[g]; ++d)
      groupOfRank[stages.firstDevice[g] + d] = g;
  if (pipeline.enabled())
    allocPipelinedOutputs();

  int64_t numGroups = stages.numGroups();
  std::vector<std::vector<PipelineTask>> order(numGroups);
  for (int64_t g = 0; g < numGroups; ++g)
    for (const PipelineTask &task :
         pipelineOrder(stages.schedule, numStages, numGroups, g, m))
      if (training || task.forward)
        order[g].push_back(task);
  // One global order: each group's tasks in turn as far as their inputs
  // are emitted (the previous stage's forward, the next stage's backward).
  std::vector<std::vector<char>> forwardDone(numStages,
                                             std::vector<char>(m, 0)),
      backwardDone = forwardDone;
  std::vector<size_t> next(numGroups, 0);
  bool progressed = true;
  while (progressed) {
    progressed = false;
    for (int64_t g = 0; g < numGroups; ++g) {
      while (next[g] < order[g].size()) {
        PipelineTask task = order[g][next[g]];
        int64_t s = task.stage, j = task.microbatch;
        bool ready = task.forward
                         ? s == 0 || forwardDone[s - 1][j]
                         : s + 1 == numStages || backwardDone[s + 1][j];
        if (!ready)
          break;
        if (failed(emitTask(task)))
          return failure();
        (task.forward ? forwardDone : backwardDone)[s][j] = 1;
        ++next[g];
        progressed = true;
      }
    }
  }
  phaseRanks.clear();
  for (int64_t g = 0; g < numGroups; ++g)
    if (next[g] != order[g].size())
      return func.emitError() << "internal error: the pipeline schedule of "
                                 "device group "
                              << g << " cannot proceed";
  if (pipeline.enabled())
    emitPipelinedOutputs();
  return success();
}

LogicalResult PlanEmitter::emitTask(PipelineTask task) {
  int64_t stage = task.stage;
  if (!pipeline.enabled()) {
    phase(task.forward ? plan::Phase::forward : plan::Phase::backward);
    return task.forward ? emitForwardTask(stage, task.microbatch)
                        : emitBackwardTask(stage, task.microbatch);
  }
  int64_t first = pipeline.firstDevice[stage];
  int64_t last = first + pipeline.numDevices[stage];
  auto blockOf = [&](int64_t rank) -> Block & {
    return programs[rank].getBody().front();
  };
  int64_t j = task.microbatch;
  phaseRanks.clear();
  for (int64_t rank = first; rank < last; ++rank)
    phaseRanks.push_back(rank);
  phase(task.forward ? plan::Phase::forward : plan::Phase::backward);
  for (int64_t rank = first; rank < last; ++rank) {
    // What later stages' backwards left for this one comes first.
    if (!task.forward)
      for (Operation *op : std::exchange(backwardQueue[{rank, j}], {}))
        blockOf(rank).push_back(op);
  }
  int64_t numRanks = static_cast<int64_t>(programs.size());
  std::vector<Operation *> before(numRanks, nullptr);
  for (int64_t rank = 0; rank < numRanks; ++rank)
    if (!blockOf(rank).empty())
      before[rank] = &blockOf(rank).back();
  if (failed(task.forward ? emitForwardTask(stage, j)
                          : emitBackwardTask(stage, j)))
    return failure();
  // A task emits on other stages' ranks too: the sends of what it reads
  // from earlier stages (forward), the receipt of the gradients it sends
  // back (backward). Those go where that rank's own schedule has them:
  // right after its latest forward of this micro-batch, or at the start of
  // its next backward of it, so no rank waits for a message it does not
  // need yet. Such a rank runs an earlier stage: its group's first is.
  for (int64_t rank = 0; rank < numRanks; ++rank) {
    if (rank >= first && rank < last)
      continue;
    int64_t home = groupOfRank[rank];
    if (home < 0 || home >= stage ||
        (task.forward && !forwardEnd.count({rank, j})))
      continue;
    Block &block = blockOf(rank);
    std::vector<Operation *> foreign;
    for (Operation &op :
         llvm::make_range(before[rank] ? std::next(before[rank]->getIterator())
                                       : block.begin(),
                          block.end()))
      foreign.push_back(&op);
    for (Operation *op : foreign) {
      if (task.forward) {
        Operation *&anchor = forwardEnd[{rank, j}];
        op->moveAfter(anchor);
        anchor = op;
      } else {
        op->remove();
        backwardQueue[{rank, j}].push_back(op);
      }
    }
  }
  if (task.forward)
    for (int64_t rank = first; rank < last; ++rank)
      forwardEnd[{rank, j}] = &blockOf(rank).back();
  return success();
}

} // namespace conversion
} // namespace ppc
