//===- Pipeline.cpp - pipeline stages, micro-batches and schedules --------===//

#include "ppc/Simulator/Pipeline.h"
#include "ppc/Support/ChromeTrace.h"

#include "ppc/Support/Layout.h"

#include <algorithm>
#include <cassert>
#include <limits>
#include <map>
#include <set>
#include <sstream>

namespace ppc::sim {

absl::Status checkMicroBatching(const Graph &graph, int64_t microbatches,
                                bool training, size_t *at) {
  if (microbatches <= 1)
    return absl::OkStatus();
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    const Op &op = graph.ops[i];
    const std::optional<StagedKernel> &staged = op.space.staged;
    if (!staged || (staged->trainingOnly && !training))
      continue;
    for (int32_t d : staged->acrossDims)
      if (op.space.dims[d].kind == IterKind::Sample) {
        if (at)
          *at = i;
        return absl::InvalidArgumentError(
            "'" + op.name +
            "' normalizes by statistics of the whole batch, which a "
            "pipeline of " +
            std::to_string(microbatches) +
            " micro-batches never has at once: train this model with "
            "microbatches = 1");
      }
  }
  return absl::OkStatus();
}

absl::Status checkPipeline(const Graph &graph, const Strategy &strategy,
                           const Pipeline &pipeline, int64_t numDevices,
                           bool training) {
  std::ostringstream os;
  if (strategy.size() != graph.ops.size()) {
    os << "the strategy has " << strategy.size() << " configurations; the "
       << "graph has " << graph.ops.size() << " ops";
    return absl::InvalidArgumentError(os.str());
  }
  if (!pipeline.enabled()) {
    for (size_t op = 0; op < graph.ops.size(); ++op)
      if (strategy[op].stage != 0) {
        os << "op '" << graph.ops[op].name << "' is in stage "
           << strategy[op].stage << " but the strategy has no pipeline";
        return absl::InvalidArgumentError(os.str());
      }
    return absl::OkStatus();
  }
  if (absl::Status problem = checkPipelineShape(
          pipeline.microbatches, pipeline.schedule, pipeline.firstDevice,
          pipeline.numDevices, numDevices);
      !problem.ok())
    return problem;
  if (absl::Status problem =
          checkMicroBatching(graph, pipeline.microbatches, training);
      !problem.ok())
    return problem;
  int32_t stages = pipeline.numStages();
  int32_t previous = 0;
  for (size_t op = 0; op < graph.ops.size(); ++op) {
    int64_t s = strategy[op].stage;
    if (s < 0 || s >= stages || s < previous || s > previous + 1 ||
        (op == 0 && s != 0)) {
      os << "op " << op << " ('" << graph.ops[op].name << "') is in stage " << s
         << " after stage " << previous
         << ": stages must start at 0 and follow the op order in steps of "
            "one, up to "
         << stages - 1;
      return absl::InvalidArgumentError(os.str());
    }
    previous = static_cast<int32_t>(s);
  }
  if (previous != stages - 1) {
    os << "stage " << stages - 1 << " has no op";
    return absl::InvalidArgumentError(os.str());
  }
  for (size_t op = 0; op < graph.ops.size(); ++op) {
    int64_t s = strategy[op].stage;
    int64_t first = pipeline.firstDevice[s], count = pipeline.numDevices[s];
    const OpConfig &config = strategy[op];
    for (int64_t device : config.devices())
      if (device < first || device >= first + count) {
        os << "op '" << graph.ops[op].name << "' runs on device " << device
           << ", outside its stage " << s << "'s devices [" << first << ", "
           << first + count << ")";
        return absl::InvalidArgumentError(os.str());
      }
    const IterationSpace &space = graph.ops[op].space;
    for (size_t d = 0; d < space.dims.size(); ++d) {
      if (space.dims[d].kind != IterKind::Sample)
        continue;
      int64_t perPartition = space.dims[d].size / config.degrees[d];
      if (perPartition % pipeline.microbatches != 0) {
        os << "op '" << graph.ops[op].name << "' has " << perPartition
           << " samples per partition along dim " << d
           << ", which do not divide into " << pipeline.microbatches
           << " micro-batches";
        return absl::InvalidArgumentError(os.str());
      }
    }
  }
  return absl::OkStatus();
}

namespace {

bool isSampleDim(const IterationSpace &space, const DimAccess &access) {
  return !access.isWhole() &&
         space.dims[access.iterDim].kind == IterKind::Sample;
}

} // namespace

Graph microBatchGraph(const Graph &graph, int64_t microbatches) {
  Graph micro = graph;
  if (microbatches == 1)
    return micro;
  for (Op &op : micro.ops) {
    IterationSpace &space = op.space;
    bool batched = false;
    auto scale = [&](TensorAccess &tensor) {
      for (size_t t = 0; t < tensor.dims.size(); ++t)
        if (isSampleDim(space, tensor.dims[t]))
          tensor.shape[t] /= microbatches;
    };
    for (TensorAccess &tensor : space.operands)
      scale(tensor);
    for (TensorAccess &tensor : space.results)
      scale(tensor);
    for (IterDim &dim : space.dims)
      if (dim.kind == IterKind::Sample) {
        dim.size /= microbatches;
        batched = true;
      }
    if (!batched)
      continue;
    // Weights are read (and their gradients written) whole per micro-batch;
    // everything else scales with the batch.
    double weightBytes = 0;
    for (size_t i = 0; i < op.operands.size(); ++i) {
      if (op.operands[i].kind != Source::Kind::Weight)
        continue;
      double elements = 1;
      for (int64_t size : space.operands[i].shape)
        elements *= static_cast<double>(size);
      weightBytes +=
          elements *
          static_cast<double>(graph.weights[op.operands[i].index].elemBytes);
    }
    double m = static_cast<double>(microbatches);
    OpCost &cost = op.cost;
    cost.fwdFlops /= m;
    cost.bwdFlops /= m;
    double fwdWeights = std::min(weightBytes, cost.fwdBytes);
    double bwdWeights = std::min(2 * weightBytes, cost.bwdBytes);
    cost.fwdBytes = (cost.fwdBytes - fwdWeights) / m + fwdWeights;
    cost.bwdBytes = (cost.bwdBytes - bwdWeights) / m + bwdWeights;
  }
  return micro;
}

Graph stageGraph(const Graph &graph, const std::vector<int32_t> &stages,
                 int32_t stage, std::vector<BoundaryValue> *boundary) {
  auto stageOf = [&](int32_t op) { return stages[op]; };
  std::vector<WeightUse> holders = weightHolders(graph);
  Graph sub;
  std::map<int32_t, int32_t> opIndex, weightIndex;
  std::map<std::pair<int32_t, int32_t>, int32_t> inputIndex;
  for (size_t op = 0; op < graph.ops.size(); ++op) {
    if (stageOf(static_cast<int32_t>(op)) != stage)
      continue;
    Op copy = graph.ops[op];
    for (Source &src : copy.operands) {
      switch (src.kind) {
      case Source::Kind::Op:
        if (stageOf(src.index) == stage) {
          src.index = opIndex.at(src.index);
          break;
        }
        [[fallthrough]];
      case Source::Kind::Input: {
        // Graph inputs keyed by -1 - index, boundary values by (op, result).
        std::pair<int32_t, int32_t> key =
            src.kind == Source::Kind::Input
                ? std::make_pair(-1 - src.index, 0)
                : std::make_pair(src.index, src.result);
        auto [it, inserted] = inputIndex.try_emplace(
            key, static_cast<int32_t>(inputIndex.size()));
        if (inserted && src.kind == Source::Kind::Op && boundary)
          boundary->push_back(
              {src.index, src.result, stageOf(src.index), stage});
        src = {Source::Kind::Input, it->second, 0};
        break;
      }
      case Source::Kind::Weight: {
        int32_t holder = holders[src.index].op;
        if (holder >= 0 && stageOf(holder) != stage) {
          // Keyed apart from the graph inputs (second 0) and the values.
          auto [it, inserted] =
              inputIndex.try_emplace(std::make_pair(-1 - src.index, 1),
                                     static_cast<int32_t>(inputIndex.size()));
          if (inserted && boundary)
            boundary->push_back({holder, 0, stageOf(holder), stage, src.index});
          src = {Source::Kind::Input, it->second, 0};
          break;
        }
        auto [it, inserted] = weightIndex.try_emplace(
            src.index, static_cast<int32_t>(sub.weights.size()));
        if (inserted)
          sub.weights.push_back(graph.weights[src.index]);
        src.index = it->second;
        break;
      }
      case Source::Kind::Constant:
        break;
      }
    }
    opIndex[static_cast<int32_t>(op)] = static_cast<int32_t>(sub.ops.size());
    sub.ops.push_back(std::move(copy));
  }
  sub.numInputs = static_cast<int64_t>(inputIndex.size());
  return sub;
}

namespace {

/// Seconds to move one micro-batch of `value` from stage `value.fromStage`
/// to the ops of its receiving stage that read it, as the plan moves it:
/// each reader instance (in op, operand and instance order) fetches from
/// each distinct piece the producer holds its overlap with the box it
/// reads, unless a piece on its own device holds it or a box an earlier
/// reader without replicas fetched to that device contains it (the copy
/// is shared). Devices receive in parallel, over the link from the sending
/// stage's first device; the bytes are counted on the link from each
/// piece's device, and the gradient goes back the same way.
double boundaryTime(const Graph &graph, const Machine &machine,
                    const Strategy &strategy, const Pipeline &pipeline,
                    const BoundaryValue &value,
                    std::array<double, 8> &bytesByLinkKind) {
  // The pieces the producer holds (the holder reads, for a weight).
  geometry::OpLayout producer = geometry::computeLayout(
      graph.ops[value.producer].space, strategy[value.producer]);
  std::vector<geometry::Box> held;
  int64_t elemBytes = graph.ops[value.producer].elemBytes;
  if (value.weight >= 0) {
    elemBytes = graph.weights[value.weight].elemBytes;
    const Op &holder = graph.ops[value.producer];
    for (size_t i = 0; i < holder.operands.size(); ++i)
      if (holder.operands[i].kind == Source::Kind::Weight &&
          holder.operands[i].index == value.weight) {
        held = producer.operandBoxes[i];
        break;
      }
  } else {
    held = producer.heldBoxes[value.result];
  }
  // The distinct pieces, in the order of their first instance, with the
  // devices holding each; which may overlap a box, by an index.
  struct HeldPiece {
    geometry::Box box;
    int64_t sender = 0; ///< its first instance's device
    std::vector<int64_t> devices;
  };
  std::vector<HeldPiece> pieces;
  std::map<std::vector<int64_t>, size_t> pieceOf;
  for (size_t q = 0; q < held.size(); ++q) {
    std::vector<int64_t> key;
    for (const Range &r : held[q]) {
      key.push_back(r.lo);
      key.push_back(r.hi);
    }
    auto [it, inserted] = pieceOf.try_emplace(std::move(key), pieces.size());
    if (inserted)
      pieces.push_back({held[q], producer.devices[q], {}});
    pieces[it->second].devices.push_back(producer.devices[q]);
  }
  std::vector<geometry::Box> distinct;
  for (const HeldPiece &piece : pieces)
    distinct.push_back(piece.box);
  geometry::OverlapIndex index(distinct);
  std::vector<size_t> candidates;

  std::map<int64_t, std::vector<geometry::Box>> gathered; // per device
  std::map<int64_t, double> bytes;                        // per device
  for (size_t op = 0; op < graph.ops.size(); ++op) {
    if (strategy[op].stage != value.toStage)
      continue;
    const Op &reader = graph.ops[op];
    geometry::OpLayout layout;
    bool laidOut = false;
    for (size_t i = 0; i < reader.operands.size(); ++i) {
      const Source &src = reader.operands[i];
      bool reads =
          value.weight >= 0
              ? src.kind == Source::Kind::Weight && src.index == value.weight
              : src.kind == Source::Kind::Op && src.index == value.producer &&
                    src.result == value.result;
      if (!reads)
        continue;
      if (!laidOut) {
        layout = geometry::computeLayout(reader.space, strategy[op]);
        laidOut = true;
      }
      for (int64_t p = 0; p < layout.numInstances(); ++p) {
        int64_t device = layout.devices[p];
        const geometry::Box &box = layout.operandBoxes[i][p];
        std::vector<geometry::Box> &earlier = gathered[device];
        index.candidates(box, candidates);
        for (size_t q : candidates) {
          const HeldPiece &piece = pieces[q];
          std::optional<geometry::Box> common =
              geometry::intersect(piece.box, box);
          if (!common)
            continue;
          bool local = std::find(piece.devices.begin(), piece.devices.end(),
                                 device) != piece.devices.end();
          if (local || std::any_of(earlier.begin(), earlier.end(),
                                   [&](const geometry::Box &g) {
                                     return geometry::contains(g, *common);
                                   }))
            continue;
          double b = static_cast<double>(elemBytes);
          for (const Range &r : *common)
            b *= static_cast<double>(r.size());
          bytes[device] += b;
          // The value forward, its gradient back.
          LinkSpec link = machine.effectiveLink(piece.sender, device);
          bytesByLinkKind[static_cast<size_t>(link.kind)] += 2 * b;
        }
        if (strategy[op].replicas == 1)
          earlier.push_back(box);
      }
    }
  }
  double time = 0;
  int64_t from = pipeline.firstDevice[value.fromStage];
  for (auto [device, b] : bytes)
    time =
        std::max(time, machine.effectiveLink(from, device, b).transferTime(b));
  return time;
}

} // namespace

SimOptions stageSimOptions(SimOptions options, int64_t microbatches) {
  if (microbatches > 1)
    options.overlapGradSync = false;
  return options;
}

StageAlone simulateStageAlone(const Graph &stage, const Machine &mesh,
                              const CostModel &costModel,
                              const SimOptions &options, int64_t microbatches,
                              const Strategy &strategy) {
  StageAlone out;
  Simulator simulator(stage, mesh, costModel,
                      stageSimOptions(options, microbatches));
  out.result = simulator.simulate(strategy);
  if (out.result.stopped)
    return out;
  out.opTimes = simulator.opTimes();
  out.tail = out.result.iterationTime - out.result.backwardTime;
  if (microbatches > 1 && options.overlapGradSync) {
    // The last micro-batch's backward overlaps the gradient sync (as
    // Megatron-LM's --overlap-grad-reduce and DDP's last synchronizing
    // step do): the tail is what the sync and update take beyond it.
    Simulator overlapped(stage, mesh, costModel, options);
    SimResult whole = overlapped.simulate(strategy);
    out.result.stopped = whole.stopped;
    out.tail = std::max(0.0, whole.iterationTime - out.result.backwardTime);
  }
  return out;
}

PipelineResult simulatePipeline(const Graph &graph, const Machine &machine,
                                const CostModel &costModel, SimOptions options,
                                const Strategy &strategy,
                                const Pipeline &given) {
  Pipeline pipeline = given.orWholeMachine(machine.numDevices());
  assert(
      checkPipeline(graph, strategy, pipeline, machine.numDevices()).empty() &&
      "simulatePipeline needs a pipeline checkPipeline accepts");
  PipelineResult out;
  Graph micro = microBatchGraph(graph, pipeline.microbatches);
  int32_t numStages = pipeline.numStages();
  int64_t m = pipeline.microbatches;
  out.devices.resize(machine.numDevices());
  for (int64_t d = 0; d < machine.numDevices(); ++d)
    out.devices[d].capacity = options.capacityOf(machine.getSpec(d));

  // Each stage alone, one micro-batch.
  std::vector<int32_t> stages;
  for (const OpConfig &config : strategy)
    stages.push_back(static_cast<int32_t>(config.stage));
  std::vector<BoundaryValue> boundary;
  std::vector<SimResult> alone(numStages);
  out.stages.resize(numStages);
  // Stages alike (a transformer's middle stages: the same layers in the
  // same layout on meshes of one shape) are simulated once.
  struct Simulated {
    Graph graph;
    Machine mesh;
    Strategy strategy;
    StageAlone stage;
  };
  std::vector<Simulated> simulated;
  for (int32_t s = 0; s < numStages; ++s) {
    Graph sub = stageGraph(micro, stages, s, &boundary);
    int64_t first = pipeline.firstDevice[s];
    Machine mesh = machine.subMachine(first, pipeline.numDevices[s]);
    Strategy local;
    int32_t firstOp = -1;
    for (size_t op = 0; op < graph.ops.size(); ++op)
      if (strategy[op].stage == s) {
        if (firstOp < 0)
          firstOp = static_cast<int32_t>(op);
        local.push_back(strategy[op]);
        local.back().start -= first;
        local.back().stage = 0;
      }
    auto same = std::find_if(simulated.begin(), simulated.end(),
                             [&](const Simulated &earlier) {
                               return earlier.strategy == local &&
                                      sameButNames(earlier.mesh, mesh) &&
                                      sameButNames(earlier.graph, sub);
                             });
    if (same == simulated.end()) {
      simulated.push_back({sub, mesh, local,
                           simulateStageAlone(sub, mesh, costModel, options,
                                              pipeline.microbatches, local)});
      same = simulated.end() - 1;
    }
    const StageAlone &stageAlone = same->stage;
    if (stageAlone.result.stopped) {
      out.stopped = true;
      out.iterationTime = std::numeric_limits<double>::infinity();
      return out;
    }
    alone[s] = stageAlone.result;
    // The stage's ops are the graph's from firstOp on, in order.
    const std::vector<Simulator::OpTimes> &times = stageAlone.opTimes;
    if (out.opTimes.empty())
      out.opTimes.resize(graph.ops.size());
    for (size_t op = 0, local = 0; op < graph.ops.size(); ++op)
      if (strategy[op].stage == s && local < times.size())
        out.opTimes[op] = times[local++];
    // Gradients synchronize once per iteration; the rest moves per
    // micro-batch.
    for (size_t kind = 0; kind < out.bytesByLinkKind.size(); ++kind) {
      double once = alone[s].syncBytesByLinkKind[kind];
      out.bytesByLinkKind[kind] +=
          (alone[s].bytesByLinkKind[kind] - once) * static_cast<double>(m) +
          once;
    }
    for (size_t kind = 0; kind < out.exchanges.size(); ++kind) {
      out.exchanges[kind].count += alone[s].exchanges[kind].count * m;
      out.exchanges[kind].bytes +=
          alone[s].exchanges[kind].bytes * static_cast<double>(m);
    }
    PipelineStageResult &stage = out.stages[s];
    stage.firstDevice = first;
    stage.numDevices = pipeline.numDevices[s];
    stage.firstOp = firstOp;
    stage.numOps = static_cast<int32_t>(sub.ops.size());
    stage.forward = alone[s].forwardTime;
    stage.backward = alone[s].backwardTime - alone[s].forwardTime;
    stage.tail = stageAlone.tail;
  }

  // Transfer time per (sending stage, receiving stage).
  std::map<std::pair<int32_t, int32_t>, double> transfer;
  for (const BoundaryValue &value : boundary) {
    std::array<double, 8> bytes{};
    double t = boundaryTime(micro, machine, strategy, pipeline, value, bytes);
    SimResult::ExchangeCount &p2p = out.exchanges[static_cast<size_t>(
        geometry::ExchangeKind::PointToPoint)];
    for (size_t kind = 0; kind < bytes.size(); ++kind) {
      out.bytesByLinkKind[kind] += bytes[kind] * static_cast<double>(m);
      p2p.bytes += bytes[kind] * static_cast<double>(m);
    }
    p2p.count += 2 * m;
    double &total = transfer[{value.fromStage, value.toStage}];
    total += t;
    out.stages[value.fromStage].send =
        std::max(out.stages[value.fromStage].send, total);
  }

  // Each device group's order of tasks (a group runs one stage, or for
  // interleaved-1f1b every numGroups-th).
  int32_t numGroups = pipeline.numGroups();
  std::vector<std::vector<PipelineTask>> order(numGroups);
  for (int32_t g = 0; g < numGroups; ++g)
    order[g] = pipelineOrder(pipeline.schedule, numStages, numGroups, g, m);
  for (int32_t s = 0; s < numStages; ++s)
    out.stages[s].inFlight =
        pipelineInFlight(pipeline.schedule, numStages, numGroups, s, m);

  // Time the schedule: a group runs its next task once its input is there
  // (the previous stages' forward of that micro-batch, or the later
  // stages' backward), one task at a time.
  constexpr double kNotYet = -1;
  std::vector<std::vector<double>> fwdEnd(numStages,
                                          std::vector<double>(m, kNotYet)),
      bwdEnd = fwdEnd;
  // Per stage, what its forward waits for (the stages sending to it) and
  // its backward (the stages it sends to), with the transfer's time.
  std::vector<std::vector<std::pair<int32_t, double>>> fwdFrom(numStages),
      bwdFrom(numStages);
  for (const auto &[stages, time] : transfer) {
    fwdFrom[stages.second].push_back({stages.first, time});
    bwdFrom[stages.first].push_back({stages.second, time});
  }
  std::vector<size_t> next(numGroups, 0);
  std::vector<double> freeAt(numGroups, 0), busy(numGroups, 0);
  size_t remaining = 2 * static_cast<size_t>(m) * numStages;
  while (remaining > 0) {
    bool progressed = false;
    for (int32_t g = 0; g < numGroups; ++g) {
      while (next[g] < order[g].size()) {
        PipelineTask task = order[g][next[g]];
        int32_t s = static_cast<int32_t>(task.stage);
        int64_t j = task.microbatch;
        bool forward = task.forward;
        double ready = 0;
        bool waiting = false;
        for (const auto &[other, time] : forward ? fwdFrom[s] : bwdFrom[s]) {
          double end = forward ? fwdEnd[other][j] : bwdEnd[other][j];
          if (end == kNotYet)
            waiting = true;
          else
            ready = std::max(ready, end + time);
        }
        if (!forward)
          ready = std::max(ready, fwdEnd[s][j]);
        if (waiting || (!forward && fwdEnd[s][j] == kNotYet))
          break;
        double duration =
            forward ? out.stages[s].forward : out.stages[s].backward;
        double start = std::max(ready, freeAt[g]);
        freeAt[g] = start + duration;
        busy[g] += duration;
        (forward ? fwdEnd : bwdEnd)[s][j] = freeAt[g];
        out.tasks.push_back({s, j, forward, start, freeAt[g]});
        ++next[g];
        --remaining;
        progressed = true;
      }
    }
    assert(progressed && "a pipeline schedule cannot deadlock");
    if (!progressed)
      break;
  }
  // After its last backward a group synchronizes and updates the weights
  // of all its stages.
  std::vector<double> tail(numGroups, 0);
  for (int32_t s = 0; s < numStages; ++s)
    tail[s % numGroups] += out.stages[s].tail;
  for (int32_t g = 0; g < numGroups; ++g)
    out.iterationTime = std::max(out.iterationTime, freeAt[g] + tail[g]);

  // Memory: each stage's training state once; activations as the group's
  // order keeps them (a stage's from its forward of a micro-batch to its
  // backward of it), at their joint peak.
  double idle = 0, devices = 0;
  for (int32_t g = 0; g < numGroups; ++g) {
    int64_t first = pipeline.firstDevice[g], count = pipeline.numDevices[g];
    double bubble = out.iterationTime > 0
                        ? std::max(0.0, 1 - busy[g] / out.iterationTime)
                        : 0;
    for (int64_t d = 0; d < count; ++d) {
      DeviceStats &global = out.devices[first + d];
      global.memory = MemoryUse();
      global.commTime = 0;
      for (int32_t s = g; s < numStages; s += numGroups) {
        const MemoryUse &local = alone[s].devices[d].memory;
        global.memory.weights += local.weights;
        global.memory.gradients += local.gradients;
        global.memory.optimizerState += local.optimizerState;
        global.memory.workspace =
            std::max(global.memory.workspace, local.workspace);
        global.commTime +=
            alone[s].devices[d].commTime * static_cast<double>(m);
      }
      std::vector<int64_t> live(numStages, 0);
      int64_t activations = 0;
      for (const PipelineTask &task : order[g]) {
        live[task.stage] += task.forward ? 1 : -1;
        int64_t now = 0;
        for (int32_t s = g; s < numStages; s += numGroups)
          now += alone[s].devices[d].memory.activations * live[s];
        activations = std::max(activations, now);
      }
      global.memory.activations = activations;
      global.computeTime = busy[g];
      global.idleTime = std::max(0.0, out.iterationTime - busy[g]);
      if (global.memory.total() > global.capacity)
        out.outOfMemory = true;
    }
    for (int32_t s = g; s < numStages; s += numGroups) {
      PipelineStageResult &stage = out.stages[s];
      stage.bubble = bubble;
      for (int64_t d = 0; d < count; ++d)
        stage.peakMemory =
            std::max(stage.peakMemory, out.devices[first + d].memory.total());
      stage.capacity = out.devices[first].capacity;
    }
    idle += bubble * static_cast<double>(count);
    devices += static_cast<double>(count);
  }
  out.bubbleFraction = devices > 0 ? idle / devices : 0;
  return out;
}

SimResult PipelineResult::asSimResult() const {
  SimResult result;
  result.iterationTime = iterationTime;
  result.devices = devices;
  result.bytesByLinkKind = bytesByLinkKind;
  result.exchanges = exchanges;
  result.outOfMemory = outOfMemory;
  result.stopped = stopped;
  double tightest = -1;
  for (size_t d = 0; d < devices.size(); ++d) {
    double used =
        static_cast<double>(devices[d].memory.total()) /
        static_cast<double>(std::max<int64_t>(1, devices[d].capacity));
    if (used > tightest) {
      tightest = used;
      result.tightestDevice = static_cast<int64_t>(d);
    }
  }
  return result;
}

void writePipelineTrace(const PipelineResult &result, std::ostream &os) {
  namespace ct = chrome_trace;
  ct::Writer trace(os);
  for (size_t s = 0; s < result.stages.size(); ++s) {
    const PipelineStageResult &stage = result.stages[s];
    trace.add(ct::processName(
        s, "stage " + std::to_string(s) + " (devices " +
               std::to_string(stage.firstDevice) + ".." +
               std::to_string(stage.firstDevice + stage.numDevices - 1) + ")"));
  }
  std::vector<double> last(result.stages.size(), 0);
  for (const PipelineResult::Task &task : result.tasks) {
    trace.add(ct::complete((task.forward ? "F " : "B ") +
                               std::to_string(task.microbatch),
                           task.stage, 0, task.start, task.end - task.start));
    last[task.stage] = std::max(last[task.stage], task.end);
  }
  for (size_t s = 0; s < result.stages.size(); ++s)
    if (result.stages[s].tail > 0)
      trace.add(
          ct::complete("sync + update", s, 0, last[s], result.stages[s].tail));
  trace.finish();
}

} // namespace ppc::sim
