//===- PipelineSearch.cpp - stages x micro-batches x intra-stage layouts --===//
//
// Megatron-LM's and Alpa's two levels, searched by the simulator: stages cut
// by forward FLOPs onto equal submeshes, a micro-batch count, and inside
// every stage one baseline built for the stage's ops at the micro-batch size
// on its submesh. Every candidate is simulated whole (sim::simulatePipeline).
//
//===----------------------------------------------------------------------===//

#include "ppc/Search/Search.h"
#include "ppc/Support/Alternatives.h"

#include "Divisors.h"
#include "StageDp.h"
#include "ppc/Support/Layout.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <set>

namespace ppc::search {

double pipelineObjective(const Problem &problem,
                         const sim::PipelineResult &result) {
  if (result.stopped)
    return std::numeric_limits<double>::infinity();
  return objective(problem, result.devices, result.iterationTime);
}

bool outranks(const SearchResult &candidate, const SearchResult &incumbent) {
  auto time = [](const SearchResult &r) {
    return r.pipeline.enabled() ? r.pipelineResult.iterationTime
                                : r.result.iterationTime;
  };
  return incumbent.strategy.empty() ||
         candidate.objective < incumbent.objective ||
         (!std::isfinite(incumbent.objective) &&
          !std::isfinite(candidate.objective) &&
          time(candidate) < time(incumbent));
}

namespace {

/// The most seconds the DP may take inside one stage of the winner.
constexpr double kStageDpSeconds = 20;
/// The shares of the time budget the equal-cut candidates, and then the
/// stage DP with its plans, may take.
constexpr double kEnumerateShare = 0.5;
constexpr double kStageDpShare = 0.75;
/// The most pipelines interleaving starts from: the best, then the best
/// equal cuts of distinct stage counts and baselines.
constexpr size_t kInterleaveOrigins = 8;

/// Stage of each op when `graph` is cut into `stages` contiguous stages of
/// about equal forward FLOPs, each cut where the fewest activation bytes
/// cross near its equal-FLOP point (layerClusters: on a transformer, at a
/// layer's residual stream, as Megatron-LM cuts between layers, not after a
/// layer norm, where its output and the residual both cross); empty when
/// some stage would get no op.
std::vector<int32_t> balancedStages(const sim::Graph &graph, int64_t stages) {
  if (stages < 1 || stages > static_cast<int64_t>(graph.ops.size()))
    return {};
  std::vector<int32_t> stageOf = detail::layerClusters(graph, stages);
  std::vector<char> used(stages, 0);
  for (int32_t s : stageOf)
    used[s] = 1;
  for (char u : used)
    if (!u)
      return {};
  return stageOf;
}

/// The largest count every sample dim of `graph` divides into (their gcd;
/// 0 when there is none).
int64_t commonBatch(const sim::Graph &graph) {
  int64_t batch = 0;
  for (const sim::Op &op : graph.ops)
    for (const IterDim &dim : op.space.dims)
      if (dim.kind == IterKind::Sample)
        batch = std::gcd(batch, dim.size);
  return batch;
}

/// Whether every sample dim of `graph` divides into `microbatches`.
bool batchDivides(const sim::Graph &graph, int64_t microbatches) {
  return commonBatch(graph) % microbatches == 0;
}

/// Puts `local`, the configurations of stage `stage`'s ops (in op order, on
/// its submesh numbered from 0), into `global`: views moved to the submesh's
/// `firstDevice`, and the stage named when the strategy is `pipelined`.
void placeStage(const std::vector<int32_t> &stageOf, int32_t stage,
                const sim::Strategy &local, int64_t firstDevice, bool pipelined,
                sim::Strategy &global) {
  size_t next = 0;
  for (size_t op = 0; op < stageOf.size(); ++op) {
    if (stageOf[op] != stage)
      continue;
    OpConfig config = local[next++];
    config.start += firstDevice;
    config.stage = pipelined ? stage : 0;
    global[op] = std::move(config);
  }
}

} // namespace

SearchResult pipelineSearch(const Problem &problem,
                            const SearchOptions &options,
                            const PipelineSearchOptions &pipelineOptions) {
  auto begin = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         begin)
        .count();
  };
  const sim::Graph &graph = problem.graph;
  const Machine &machine = problem.machine;
  int64_t numDevices = machine.numDevices();
  int64_t nodes = machine.numNodes();

  // A fixed stage or micro-batch count that cannot work is refused with
  // why, before any candidate is built.
  auto refuse = [&](const std::string &why) {
    SearchResult refused;
    refused.algorithm = "pipeline search: " + why;
    refused.seconds = elapsed();
    return refused;
  };
  if (pipelineOptions.stages < 0 || pipelineOptions.microbatches < 0)
    return refuse("stages and microbatches must be >= 0 (0: searched)");
  int64_t stagesAsked = pipelineOptions.stages;
  if (stagesAsked > 0 && numDevices % stagesAsked != 0)
    return refuse(
        "stages = " + std::to_string(stagesAsked) + " does not divide the " +
        std::to_string(numDevices) + " devices into equal submeshes: take " +
        listAlternatives(detail::divisors(numDevices)) + " (0: searched)");
  if (stagesAsked > static_cast<int64_t>(graph.ops.size()))
    return refuse("stages = " + std::to_string(stagesAsked) +
                  " is more than the graph's " +
                  std::to_string(graph.ops.size()) + " ops");
  if (int64_t m = pipelineOptions.microbatches; m > 1) {
    int64_t batch = commonBatch(graph);
    if (batch % m != 0)
      return refuse("microbatches = " + std::to_string(m) +
                    " does not divide the batch of " + std::to_string(batch) +
                    " samples: take " +
                    listAlternatives(detail::divisors(batch)) +
                    " (0: searched)");
    if (absl::Status why = sim::checkMicroBatching(graph, m); !why.ok())
      return refuse(messageOf(why));
  }

  // Most stages first: their submeshes simulate fastest, so a time budget
  // reaches the layouts large models need.
  std::vector<int64_t> stageCounts =
      pipelineOptions.stages > 0
          ? std::vector<int64_t>{pipelineOptions.stages}
          : detail::divisors(nodes > 1 ? nodes : numDevices);
  std::reverse(stageCounts.begin(), stageCounts.end());
  // The baselines inside the stages; one that lays the whole graph out as
  // an earlier one does (deepspeed-moe on a model without experts is
  // zero2) is taken as that one.
  std::vector<const BaselineInfo *> inside;
  std::vector<sim::Strategy> insideWhole;
  for (const BaselineInfo &info : baselines()) {
    if (!pipelineOptions.stageBaseline.empty() &&
        pipelineOptions.stageBaseline != info.name)
      continue;
    sim::Strategy whole = info.build(graph, machine);
    if (std::find(insideWhole.begin(), insideWhole.end(), whole) !=
        insideWhole.end())
      continue;
    insideWhole.push_back(std::move(whole));
    inside.push_back(&info);
  }

  SearchResult best;
  best.algorithm = "pipeline";
  std::string bestInside;
  // The baseline inside each stage of the best; empty when its stages ran
  // the DP.
  std::vector<const BaselineInfo *> bestStages;
  int64_t tooLarge = 0;      // candidates skipped for their transfer count
  std::string lastRejection; // why checkPipeline refused the last one
  // The candidates take at most kEnumerateShare of the budget (checked
  // before each, once one that fits is found); the DP inside the winner's
  // stages has the rest.
  bool candidatesCut = false; // the budget stopped the enumeration
  // Until one fits in memory, they may take the whole budget.
  auto outOfTime = [&] {
    double share = std::isfinite(best.objective) ? kEnumerateShare : 1.0;
    return (options.cancel && options.cancel->load()) ||
           (options.seconds > 0 && elapsed() > share * options.seconds &&
            !best.strategy.empty());
  };

  // Lines, not a live counter: each phase takes seconds to minutes.
  auto report = [&](const std::string &what) {
    if (!options.progress)
      return;
    std::fprintf(stderr,
                 "ppc-search: pipeline: %s; best %.3f ms (%s), %lld "
                 "simulated, %.1f s\n",
                 what.c_str(), best.objective * 1e3,
                 best.strategy.empty() ? "none" : bestInside.c_str(),
                 static_cast<long long>(best.iterations), elapsed());
  };

  auto consider = [&](const sim::Strategy &strategy,
                      const sim::Pipeline &pipeline,
                      std::vector<const BaselineInfo *> stagesInside,
                      std::string name = "") -> double {
    constexpr double kNotSimulated = std::numeric_limits<double>::infinity();
    if (absl::Status why = checkPipeline(graph, strategy, pipeline, numDevices);
        !why.ok()) {
      lastRejection = messageOf(why);
      return kNotSimulated;
    }
    // One weird trick on a transformer over 512 devices per stage took
    // 24 GB (PipelineSearchOptions::maxTransferPairs).
    if (detail::tooManyTransfers(graph, strategy,
                                 pipelineOptions.maxTransferPairs)) {
      ++tooLarge;
      return kNotSimulated;
    }
    sim::PipelineResult result =
        sim::simulatePipeline(graph, machine, problem.costModel,
                              problem.simOptions, strategy, pipeline);
    ++best.iterations;
    double objective = pipelineObjective(problem, result);
    // Ties go to the candidate simulated first.
    bool better =
        best.strategy.empty() || objective < best.objective ||
        (!std::isfinite(best.objective) && !std::isfinite(objective) &&
         result.iterationTime < best.pipelineResult.iterationTime);
    if (!better)
      return objective;
    best.objective = objective;
    best.strategy = strategy;
    best.pipeline = pipeline;
    best.pipelineResult = std::move(result);
    // Named by the baseline of each stage: "a" when all run a, else
    // "a / b / ...".
    // Interleaved stages are dealt round-robin: named per submesh.
    size_t named = pipeline.schedule == PipelineSchedule::Interleaved
                       ? static_cast<size_t>(pipeline.numGroups())
                       : stagesInside.size();
    if (name.empty())
      for (size_t s = 0; s < named && s < stagesInside.size(); ++s)
        name += (s ? " / " : "") + std::string(stagesInside[s]->name);
    if (std::all_of(stagesInside.begin(), stagesInside.end(),
                    [&](const BaselineInfo *info) {
                      return info == stagesInside.front();
                    }) &&
        !stagesInside.empty())
      name = stagesInside.front()->name;
    bestInside = name;
    bestStages = std::move(stagesInside);
    return objective;
  };

  // Every equal-cut pipeline that fits, for interleaving later.
  struct EqualCut {
    double objective;
    sim::Pipeline pipeline;
    std::vector<const BaselineInfo *> inside;
  };
  std::vector<EqualCut> equalCuts;
  for (int64_t stages : stageCounts) {
    if (numDevices % stages != 0)
      continue;
    std::vector<int32_t> stageOf = balancedStages(graph, stages);
    if (stageOf.empty()) {
      lastRejection = "the graph's ops do not cut into " +
                      std::to_string(stages) + " stages of an op each";
      continue;
    }
    int64_t perStage = numDevices / stages;
    std::vector<Machine> meshes;
    for (int64_t s = 0; s < stages; ++s)
      meshes.push_back(machine.subMachine(s * perStage, perStage));
    for (int64_t m = 1;; m *= 2) {
      if (pipelineOptions.microbatches > 0 &&
          m != pipelineOptions.microbatches) {
        if (m > pipelineOptions.microbatches)
          break;
        continue;
      }
      if (!batchDivides(graph, m))
        break;
      // Fewer micro-batches than stages leave stages idle most of the time.
      if (m < stages && pipelineOptions.microbatches == 0)
        continue;
      if (outOfTime()) {
        candidatesCut = true;
        break;
      }
      sim::Graph micro = sim::microBatchGraph(graph, m);
      std::vector<sim::Graph> parts;
      for (int64_t s = 0; s < stages; ++s)
        parts.push_back(
            sim::stageGraph(micro, stageOf, static_cast<int32_t>(s)));
      sim::Pipeline pipeline;
      pipeline.microbatches = m;
      // Candidates run 1F1B (or the schedule asked for; interleaving comes
      // after, on the winner).
      pipeline.schedule = pipelineOptions.schedule == PipelineSchedule::GPipe
                              ? PipelineSchedule::GPipe
                              : PipelineSchedule::OneFOneB;
      if (stages > 1 || m > 1)
        for (int64_t s = 0; s < stages; ++s) {
          pipeline.firstDevice.push_back(s * perStage);
          pipeline.numDevices.push_back(perStage);
        }
      for (const BaselineInfo *info : inside) {
        if (outOfTime()) {
          candidatesCut = true;
          break;
        }
        sim::Strategy strategy(graph.ops.size());
        for (int64_t s = 0; s < stages; ++s)
          placeStage(stageOf, static_cast<int32_t>(s),
                     info->build(parts[s], meshes[s]), s * perStage,
                     pipeline.enabled(), strategy);
        std::vector<const BaselineInfo *> stagesInside(stages, info);
        double objective = consider(strategy, pipeline, stagesInside);
        if (std::isfinite(objective) && pipeline.enabled())
          equalCuts.push_back({objective, pipeline, stagesInside});
      }
    }
    report(std::to_string(stages) + " stages done");
  }
  // Alpa's stage DP (StageDp.h): cuts and submesh sizes chosen from the
  // simulated costs of layer clusters instead of equal FLOPs on equal
  // submeshes, at the winner's micro-batch count and its neighbours; its
  // best plans are simulated whole.
  if (pipelineOptions.stageDp && pipelineOptions.stages == 0 &&
      !best.strategy.empty() && !(options.cancel && options.cancel->load())) {
    int64_t won = best.pipeline.microbatches;
    std::vector<int64_t> counts;
    for (int64_t m : {won / 2, won, 2 * won, 4 * won, 8 * won}) {
      // An unpipelined winner (m = 1) gets 2, 4 and 8; a pipelined one
      // half, the same and twice its count.
      if (m < 2 || (won > 1 && m > 2 * won) ||
          (pipelineOptions.microbatches > 0 &&
           m != pipelineOptions.microbatches) ||
          !batchDivides(graph, m))
        continue;
      counts.push_back(m);
    }
    detail::StageDpOptions dpOptions;
    dpOptions.maxTransferPairs = pipelineOptions.maxTransferPairs;
    if (pipelineOptions.schedule == PipelineSchedule::GPipe)
      dpOptions.schedule = PipelineSchedule::GPipe;
    dpOptions.stop = [&] {
      return (options.cancel && options.cancel->load()) ||
             (options.seconds > 0 &&
              elapsed() > kStageDpShare * options.seconds);
    };
    std::vector<detail::StagePlan> plans =
        detail::stageDp(problem, inside, counts, dpOptions);
    std::map<int64_t, sim::Graph> micro;
    for (const detail::StagePlan &plan : plans) {
      if (dpOptions.stop()) {
        best.cutShort.push_back(
            "pipeline search: the stage DP's plans cut at its share of the "
            "budget");
        break;
      }
      int64_t m = plan.microbatches;
      auto [it, added] = micro.try_emplace(m);
      if (added)
        it->second = sim::microBatchGraph(graph, m);
      sim::Pipeline pipeline;
      pipeline.microbatches = m;
      pipeline.schedule = dpOptions.schedule;
      int64_t stages = static_cast<int64_t>(plan.firstDevice.size());
      if (stages > 1 || m > 1) {
        pipeline.firstDevice = plan.firstDevice;
        pipeline.numDevices = plan.numDevices;
      }
      sim::Strategy strategy(graph.ops.size());
      for (int64_t s = 0; s < stages; ++s) {
        sim::Graph part =
            sim::stageGraph(it->second, plan.stageOf, static_cast<int32_t>(s));
        Machine mesh =
            machine.subMachine(plan.firstDevice[s], plan.numDevices[s]);
        placeStage(plan.stageOf, static_cast<int32_t>(s),
                   plan.inside[s]->build(part, mesh), plan.firstDevice[s],
                   pipeline.enabled(), strategy);
      }
      consider(strategy, pipeline, plan.inside);
    }
    report("the stage dp done (" + std::to_string(plans.size()) + " plans)");
  }
  // The intra-op search inside the stages of the best candidate: the DP on
  // each stage's ops at the micro-batch size on its submesh, within what is
  // left of the budget; kept when the whole pipeline simulates faster and
  // fits with its micro-batches in flight.
  if (!best.strategy.empty() && std::isfinite(best.objective) &&
      pipelineOptions.stageBaseline.empty() &&
      (best.pipeline.enabled() || pipelineOptions.refineUnpipelined)) {
    sim::Pipeline pipeline = best.pipeline.orWholeMachine(numDevices);
    int64_t stages = pipeline.numStages();
    std::vector<int32_t> stageOf;
    for (const OpConfig &config : best.strategy)
      stageOf.push_back(static_cast<int32_t>(config.stage));
    sim::Graph micro = sim::microBatchGraph(graph, pipeline.microbatches);
    sim::Strategy refined = best.strategy;
    bool complete = true;
    for (int64_t s = 0; s < stages && complete; ++s) {
      double left = options.seconds > 0 ? options.seconds - elapsed() : 60;
      if (left <= 1 || (options.cancel && options.cancel->load())) {
        complete = false;
        break;
      }
      sim::Graph part =
          sim::stageGraph(micro, stageOf, static_cast<int32_t>(s));
      Machine mesh =
          machine.subMachine(pipeline.firstDevice[s], pipeline.numDevices[s]);
      Problem local{part, mesh, problem.costModel, problem.simOptions};
      ConfigSpace space(part, mesh);
      SearchOptions dpOptions = options;
      // Its tables come in seconds; refinement would use all it is given.
      dpOptions.seconds =
          std::min(kStageDpSeconds, left / static_cast<double>(stages - s));
      dpOptions.iterations = 0;
      dpOptions.progress = false;
      SearchResult dp = dynamicProgramming(local, space, dpOptions);
      ++best.iterations;
      if (dp.strategy.size() != part.ops.size()) {
        complete = false;
        break;
      }
      placeStage(stageOf, static_cast<int32_t>(s), dp.strategy,
                 pipeline.firstDevice[s], best.pipeline.enabled(), refined);
    }
    if (complete)
      consider(refined, best.pipeline, {}, "the dp");
    report("the dp inside the stages done");
  }
  // The best layout as GPipe too (faster only when the 1F1B warm-up costs
  // more than GPipe's extra activations).
  if (best.pipeline.enabled() && !pipelineOptions.schedule) {
    sim::Pipeline gpipe = best.pipeline;
    gpipe.schedule = PipelineSchedule::GPipe;
    sim::Strategy strategy = best.strategy;
    std::string name = bestInside;
    consider(strategy, gpipe, bestStages, name);
  }
  // The best pipeline interleaved (Megatron-LM's virtual stages): its P
  // submeshes take v = 2, 4, ... stages each of a cut into P v stages of
  // equal FLOPs, dealt round-robin, each with the baseline its submesh won
  // with; v doubles while that simulates faster. The bubble shrinks v times
  // for v times the boundary messages. The fastest equal cuts are
  // interleaved too (below).
  bool interleave = !pipelineOptions.schedule ||
                    pipelineOptions.schedule == PipelineSchedule::Interleaved;
  auto interleavable = [](const sim::Pipeline &pipeline,
                          const std::vector<const BaselineInfo *> &inside) {
    int32_t p = pipeline.numStages();
    return pipeline.enabled() && p > 1 &&
           inside.size() == static_cast<size_t>(p) &&
           pipeline.microbatches % p == 0;
  };
  std::vector<std::pair<sim::Pipeline, std::vector<const BaselineInfo *>>>
      origins;
  std::vector<double> originObjectives;
  if (interleave && interleavable(best.pipeline, bestStages)) {
    origins.push_back({best.pipeline, bestStages});
    originObjectives.push_back(best.objective);
  }
  // The fastest equal cuts too, one per stage count and baseline: a
  // layout slower at 1F1B (more stages, recomputation that leaves room
  // for the interleaved schedule's extra activations) may interleave best.
  std::stable_sort(equalCuts.begin(), equalCuts.end(),
                   [](const EqualCut &a, const EqualCut &b) {
                     return a.objective < b.objective;
                   });
  std::set<std::pair<int32_t, const BaselineInfo *>> tried;
  for (const EqualCut &cut : equalCuts) {
    if (!interleave || origins.size() >= kInterleaveOrigins)
      break;
    if (!interleavable(cut.pipeline, cut.inside) ||
        !tried.insert({cut.pipeline.numStages(), cut.inside.front()}).second)
      continue;
    if (cut.pipeline.firstDevice == best.pipeline.firstDevice &&
        cut.pipeline.microbatches == best.pipeline.microbatches &&
        cut.inside == bestStages)
      continue;
    origins.push_back({cut.pipeline, cut.inside});
    originObjectives.push_back(cut.objective);
  }
  if (!origins.empty()) {
    // Asked for, interleaving replaces the 1F1B winner even when slower
    // (unless no interleaved cut exists).
    SearchResult uninterleaved = best;
    std::string uninterleavedInside = bestInside;
    std::vector<const BaselineInfo *> uninterleavedStages = bestStages;
    if (pipelineOptions.schedule) {
      best = SearchResult();
      best.algorithm = uninterleaved.algorithm;
      best.iterations = uninterleaved.iterations;
      best.trace = uninterleaved.trace;
    }
    for (size_t origin = 0; origin < origins.size(); ++origin) {
      const auto &[groups, groupInside] = origins[origin];
      int64_t p = groups.numStages(), m = groups.microbatches;
      sim::Graph micro = sim::microBatchGraph(graph, m);
      double previous = pipelineOptions.schedule
                            ? std::numeric_limits<double>::infinity()
                            : originObjectives[origin];
      for (int64_t v = 2;; v *= 2) {
        if ((options.cancel && options.cancel->load()) ||
            (options.seconds > 0 && elapsed() > options.seconds))
          break;
        std::vector<int32_t> stageOf = balancedStages(graph, p * v);
        if (stageOf.empty())
          break;
        sim::Pipeline interleaved;
        interleaved.microbatches = m;
        interleaved.schedule = PipelineSchedule::Interleaved;
        sim::Strategy strategy(graph.ops.size());
        std::vector<const BaselineInfo *> stagesInside;
        for (int64_t k = 0; k < p * v; ++k) {
          int64_t first = groups.firstDevice[k % p];
          int64_t count = groups.numDevices[k % p];
          interleaved.firstDevice.push_back(first);
          interleaved.numDevices.push_back(count);
          sim::Graph part =
              sim::stageGraph(micro, stageOf, static_cast<int32_t>(k));
          placeStage(
              stageOf, static_cast<int32_t>(k),
              groupInside[k % p]->build(part, machine.subMachine(first, count)),
              first, true, strategy);
          stagesInside.push_back(groupInside[k % p]);
        }
        double objective = consider(strategy, interleaved, stagesInside);
        if (!(objective < previous))
          break;
        previous = objective;
      }
    }
    if (best.strategy.empty()) {
      int64_t iterations = best.iterations;
      best = std::move(uninterleaved);
      best.iterations = iterations;
      bestInside = uninterleavedInside;
      bestStages = uninterleavedStages;
    }
    report("interleaving done");
  }
  if (best.strategy.empty() && tooLarge > 0) {
    best.algorithm = "every candidate was skipped: simulating each would "
                     "need more than " +
                     std::to_string(pipelineOptions.maxTransferPairs) +
                     " point-to-point transfers (" + std::to_string(tooLarge) +
                     " candidates)";
    best.seconds = elapsed();
    return best;
  }
  if (best.strategy.empty()) {
    best.algorithm =
        "pipeline search: no candidate could be built" +
        (lastRejection.empty() ? std::string() : ": " + lastRejection);
    best.seconds = elapsed();
    return best;
  }
  if (candidatesCut)
    best.cutShort.insert(best.cutShort.begin(),
                         "pipeline search: its equal-stage candidates cut at "
                         "their share of the budget");
  // Stages running different baselines are named in order ("a / b").
  std::string inner = bestInside.find(" / ") == std::string::npos
                          ? bestInside + " in each stage"
                          : bestInside + (best.pipeline.schedule ==
                                                  PipelineSchedule::Interleaved
                                              ? " by submesh"
                                              : " by stage");
  int64_t numStages = best.pipeline.numStages();
  int64_t numGroups = best.pipeline.numGroups();
  std::string stagesText = std::to_string(numStages) + " stages";
  if (numGroups < numStages)
    stagesText += " (" + std::to_string(numGroups) + " submeshes x " +
                  std::to_string(numStages / numGroups) + ")";
  const std::vector<int64_t> &sizes = best.pipeline.numDevices;
  if (std::adjacent_find(sizes.begin(), sizes.end(), std::not_equal_to<>()) !=
      sizes.end()) {
    stagesText += " on";
    for (size_t s = 0; s < sizes.size(); ++s)
      stagesText += (s ? "+" : " ") + std::to_string(sizes[s]);
    stagesText += " devices";
  }
  best.algorithm = best.pipeline.enabled()
                       ? "pipeline of " + stagesText + " x " +
                             std::to_string(best.pipeline.microbatches) +
                             " micro-batches (" +
                             pipelineScheduleInfo(best.pipeline.schedule).name +
                             ", " + inner + ")"
                       : "pipeline search: " + bestInside + " unpipelined";
  best.seconds = elapsed();
  return best;
}

const std::vector<RecomputeInfo> &recomputeModes() {
  static const std::vector<RecomputeInfo> list = {
      {Recompute::None, "none", "every activation kept for backward"},
      {Recompute::Selective, "selective",
       "inside the tensor-parallel blocks, the ops that keep much memory for "
       "little compute (attention scores, softmax, dropout) recomputed "
       "(Korthikanti et al. 2022)"},
      {Recompute::Full, "full",
       "every op recomputed but those whose results cross every second of "
       "the graph's cheapest cuts (recomputeLayers: the residual stream, "
       "one checkpoint per layer), as Megatron-LM's full recomputation "
       "keeps each layer's input"},
  };
  return list;
}

const RecomputeInfo *findRecompute(const std::string &name) {
  return findByName(recomputeModes(), name);
}

absl::StatusOr<SearchResult> megatronLayout(const Problem &problem,
                                            const MegatronLayout &layout) {
  auto begin = std::chrono::steady_clock::now();
  const sim::Graph &graph = problem.graph;
  const Machine &machine = problem.machine;
  int64_t numDevices = machine.numDevices();
  SearchResult best;
  auto fail = [](const std::string &why) {
    return absl::InvalidArgumentError(why);
  };
  if (layout.tensorParallel < 0 || layout.pipelineParallel < 1 ||
      layout.dataParallel < 0 || layout.virtualStages < 1 ||
      layout.microbatches < 0 || layout.contextParallel < 1 ||
      layout.expertParallel < 1 || layout.expertTensorParallel < 0)
    return fail("tp, dp, etp and microbatches must be >= 0, pp, cp, ep and "
                "virtual-stages >= 1");
  int64_t tp = layout.tensorParallel > 0 ? layout.tensorParallel
                                         : devicesPerNode(machine);
  int64_t pp = layout.pipelineParallel, v = layout.virtualStages;
  int64_t cp = layout.contextParallel;
  // "tp x cp x pp" where cp is asked for, else as before.
  std::string degrees = "tp x " + std::string(cp > 1 ? "cp x " : "") + "pp";
  std::string values = std::to_string(tp) + " x " +
                       (cp > 1 ? std::to_string(cp) + " x " : "") +
                       std::to_string(pp);
  if (tp > numDevices || cp > numDevices || numDevices % (tp * cp * pp) != 0)
    return fail(degrees + " = " + values + " does not divide the machine's " +
                std::to_string(numDevices) + " devices");
  int64_t dp = numDevices / (tp * cp * pp);
  int64_t ep = layout.expertParallel, etp = layout.expertTensorParallel;
  if ((numDevices / pp) % (ep * std::max<int64_t>(etp, 1)) != 0)
    return fail((etp > 0 ? "ep x etp = " + std::to_string(ep) + " x " +
                               std::to_string(etp)
                         : "ep = " + std::to_string(ep)) +
                " does not divide a pipeline rank's " +
                std::to_string(numDevices / pp) + " devices");
  if (ep > 1 || etp > 0) {
    // The first dispatch whose experts ep does not divide, else the first.
    const sim::Op *dispatch = nullptr;
    for (const sim::Op &op : graph.ops) {
      if (op.space.expertDim < 0)
        continue;
      bool divides = op.space.dims[op.space.expertDim].size % ep == 0;
      if (!dispatch || !divides)
        dispatch = &op;
      if (!divides)
        break;
    }
    if (!dispatch)
      return fail((ep > 1 ? "ep = " + std::to_string(ep)
                          : "etp = " + std::to_string(etp)) +
                  " but the graph has no mixture of experts");
    int64_t experts = dispatch->space.dims[dispatch->space.expertDim].size;
    if (experts % ep != 0)
      return fail("ep = " + std::to_string(ep) + " does not divide the " +
                  std::to_string(experts) + " experts of '" + dispatch->name +
                  "'");
  }
  if (layout.dataParallel > 0 && layout.dataParallel != dp)
    return fail(degrees + " x dp = " + values + " x " +
                std::to_string(layout.dataParallel) + " but the machine has " +
                std::to_string(numDevices) + " devices");
  if (v > 1 && pp == 1)
    return fail("virtual-stages needs pp > 1");
  int64_t stages = pp * v;
  std::vector<int32_t> stageOf = balancedStages(graph, stages);
  if (stageOf.empty())
    return fail("the graph's " + std::to_string(graph.ops.size()) +
                " ops do not cut into pp x virtual-stages = " +
                std::to_string(stages) + " stages");
  std::vector<int64_t> counts;
  if (layout.microbatches > 0) {
    if (!batchDivides(graph, layout.microbatches))
      return fail("the batch does not divide into " +
                  std::to_string(layout.microbatches) + " micro-batches");
    if (v > 1 && layout.microbatches % pp != 0)
      return fail("interleaving needs micro-batches (" +
                  std::to_string(layout.microbatches) + ") a multiple of pp (" +
                  std::to_string(pp) + ")");
    counts.push_back(layout.microbatches);
  } else if (pp == 1) {
    counts.push_back(1);
  } else {
    for (int64_t m = pp; batchDivides(graph, m); m *= 2)
      counts.push_back(m);
    if (counts.empty())
      return fail("the batch does not divide into pp = " + std::to_string(pp) +
                  " micro-batches");
  }

  MegatronOptions inner;
  inner.tensorParallel = tp;
  inner.sequenceParallel = layout.sequenceParallel;
  inner.distributedOptimizer = layout.distributedOptimizer;
  inner.recompute = layout.recompute == Recompute::Full;
  inner.selectiveRecompute = layout.recompute == Recompute::Selective;
  inner.shardWeights = layout.shardWeights;
  inner.contextParallel = cp;
  inner.contextExchange = layout.contextExchange;
  inner.expertParallel = ep;
  inner.expertTensorParallel = etp;
  int64_t perRank = numDevices / pp;
  if (cp > 1 || etp > 1)
    for (int64_t k = 0; k < stages; ++k) {
      sim::Graph part =
          sim::stageGraph(graph, stageOf, static_cast<int32_t>(k));
      if (absl::Status problem = checkMegatron(
              part, machine.subMachine((k % pp) * perRank, perRank), inner);
          !problem.ok())
        return problem;
    }
  bool splitsLayers = false;
  for (int64_t m : counts) {
    sim::Pipeline pipeline;
    pipeline.microbatches = m;
    pipeline.schedule =
        v > 1 ? PipelineSchedule::Interleaved : PipelineSchedule::OneFOneB;
    if (pp > 1 || m > 1)
      for (int64_t k = 0; k < stages; ++k) {
        pipeline.firstDevice.push_back((k % pp) * perRank);
        pipeline.numDevices.push_back(perRank);
      }
    sim::Graph micro = sim::microBatchGraph(graph, m);
    sim::Strategy strategy(graph.ops.size());
    for (int64_t k = 0; k < stages; ++k) {
      int64_t first = (k % pp) * perRank;
      sim::Graph part =
          sim::stageGraph(micro, stageOf, static_cast<int32_t>(k));
      placeStage(stageOf, static_cast<int32_t>(k),
                 megatron(part, machine.subMachine(first, perRank), inner),
                 first, pipeline.enabled(), strategy);
    }
    for (size_t op = 0; op < graph.ops.size(); ++op)
      for (size_t d = 0; d < strategy[op].degrees.size(); ++d)
        if (graph.ops[op].space.dims[d].kind == IterKind::Parameter &&
            strategy[op].degrees[d] > 1)
          splitsLayers = true;
    SearchResult candidate;
    candidate.strategy = std::move(strategy);
    if (pipeline.enabled()) {
      candidate.pipeline = pipeline;
      candidate.pipelineResult = sim::simulatePipeline(
          graph, machine, problem.costModel, problem.simOptions,
          candidate.strategy, pipeline);
      candidate.objective =
          pipelineObjective(problem, candidate.pipelineResult);
    } else {
      sim::Simulator simulator(graph, machine, problem.costModel,
                               problem.simOptions);
      candidate.result = simulator.simulate(candidate.strategy);
      candidate.objective = objective(problem, candidate.result);
    }
    best.iterations += 1;
    if (outranks(candidate, best)) {
      int64_t iterations = best.iterations;
      best = std::move(candidate);
      best.iterations = iterations;
    }
  }
  if (tp > 1 && !splitsLayers)
    return fail("tp = " + std::to_string(tp) +
                " splits no layer: no linear layer's output features "
                "divide by it");
  std::string text = "megatron tp " + std::to_string(tp) +
                     (cp > 1 ? " x cp " + std::to_string(cp) : "") + " x pp " +
                     std::to_string(pp) + " x dp " + std::to_string(dp) +
                     (ep > 1 ? ", experts over ep " + std::to_string(ep) : "") +
                     (etp > 0 ? (ep > 1 ? " x etp " : ", experts over etp ") +
                                    std::to_string(etp)
                              : "");
  if (cp > 1)
    for (const ContextExchangeInfo &info : contextExchanges())
      if (info.kind == layout.contextExchange)
        text += std::string(", context exchange ") + info.name;
  if (v > 1)
    text += ", " + std::to_string(v) + " virtual stages";
  if (best.pipeline.enabled())
    text += ", " + std::to_string(best.pipeline.microbatches) +
            " micro-batches (" +
            pipelineScheduleInfo(best.pipeline.schedule).name + ")";
  if (layout.sequenceParallel)
    text += ", sequence parallel";
  if (layout.shardWeights)
    text += ", fsdp";
  else if (layout.distributedOptimizer)
    text += ", distributed optimizer";
  for (const RecomputeInfo &info : recomputeModes())
    if (info.mode == layout.recompute && info.mode != Recompute::None)
      text += std::string(", ") + info.name + " recomputation";
  best.algorithm = text;
  best.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin)
          .count();
  return best;
}

} // namespace ppc::search
