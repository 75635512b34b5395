//===- Pipelines.h - ppc's registered pass pipelines ------------*- C++ -*-===//

#ifndef PPC_PIPELINES_PIPELINES_H
#define PPC_PIPELINES_PIPELINES_H

#include "ppc/Simulator/Simulator.h"

#include "mlir/Pass/PassManager.h"
#include "ppc/Analysis/SimGraph.h"

#include "mlir/Pass/PassOptions.h"

#include <string>
#include <thread>

namespace ppc {

/// Options of `ppc-auto-parallel`, the whole job in one pipeline: add a
/// loss, convert the dtype, attach the machine, search, export.
struct AutoParallelOptions
    : public mlir::PassPipelineOptions<AutoParallelOptions> {
  Option<std::string> machine{
      *this, "machine",
      llvm::cl::desc("Machine preset or JSON file (empty: the machine "
                     "already attached to the module)")};
  Option<std::string> search{
      *this, "search",
      llvm::cl::desc("mcmc, dp, exhaustive, pipeline, megatron (with tp, "
                     "pp, ...) or a baseline (data-parallel, fsdp, ...)"),
      llvm::cl::init("mcmc")};
  Option<std::string> budget{
      *this, "budget",
      llvm::cl::desc("Search budget: seconds ('30s', '2m') or iterations per "
                     "chain ('5000', '5000it')"),
      llvm::cl::init("30s")};
  Option<unsigned> threads{
      *this, "threads",
      llvm::cl::desc("Threads for independent MCMC chains (default: every "
                     "core; 0 too)"),
      llvm::cl::init(std::thread::hardware_concurrency())};
  Option<uint64_t> seed{*this, "seed", llvm::cl::desc("Random seed"),
                        llvm::cl::init(1)};
  Option<std::string> loss{
      *this, "loss",
      llvm::cl::desc("auto (softmax-ce for class logits, else mse), "
                     "softmax-ce, mse or none (the model has a loss)"),
      llvm::cl::init("auto")};
  Option<sim::Optimizer> optimizer{
      *this, "optimizer", llvm::cl::desc("Optimizer simulated in training"),
      llvm::cl::init(sim::Optimizer::SGD),
      llvm::cl::values(
          clEnumValN(sim::Optimizer::SGD, "sgd", "plain SGD"),
          clEnumValN(sim::Optimizer::Momentum, "momentum", "SGD with momentum"),
          clEnumValN(sim::Optimizer::Adam, "adam", "Adam"))};
  Option<std::string> zigzag{
      *this, "zigzag",
      llvm::cl::desc(
          "Store causal sequences in zigzag order (ppc-zigzag-sequence: "
          "context parallelism balanced for the degrees dividing its "
          "pairs): auto (as many pairs as the machine allows, kept only "
          "where the search splits a causal attention's positions), off "
          "(natural order) or N pairs"),
      llvm::cl::init("auto")};
  Option<std::string> dtype{
      *this, "dtype",
      llvm::cl::desc("Element type of training: f32, bf16 or f16 (mixed "
                     "precision); by default the model's own types stay")};
  Option<std::string> memoryLimit{
      *this, "memory-limit",
      llvm::cl::desc("Memory per device a strategy may use ('16GiB'), in "
                     "place of each device's memory; default: the device's "
                     "memory")};
  Option<std::string> profile{
      *this, "profile",
      llvm::cl::desc("Measured kernel times for the search's simulator "
                     "(docs/profile-format.md; ppc-run --profile writes "
                     "them)")};
  Option<std::string> profileRequests{
      *this, "profile-requests",
      llvm::cl::desc("Write the kernels the search's configuration space "
                     "asks for, for ppc-profile to measure")};
  Option<bool> overlap{
      *this, "overlap",
      llvm::cl::desc("Simulate gradient sync overlapping backward (true) or "
                     "after it (false, as ppc-run's cpu backend runs it)"),
      llvm::cl::init(true)};
  Option<bool> overlapParamGather{
      *this, "overlap-param-gather",
      llvm::cl::desc("Simulate sharded optimizer states' parameter gathers "
                     "overlapping the next forward (Megatron-LM's "
                     "--overlap-param-gather)"),
      llvm::cl::init(false)};
  Option<bool> overlapTensorParallel{
      *this, "tp-comm-overlap",
      llvm::cl::desc("Simulate tensor-parallel communication inside a node "
                     "overlapping the linear layers next to it "
                     "(Megatron-Core's --tp-comm-overlap)"),
      llvm::cl::init(false)};
  Option<bool> regatherInputs{
      *this, "regather-inputs",
      llvm::cl::desc("Simulate linear layers that keep none of the "
                     "activations they receive and gather them again in "
                     "backward (Megatron-LM's sequence parallelism)"),
      llvm::cl::init(false)};
  Option<bool> fp32Gradients{
      *this, "fp32-gradients",
      llvm::cl::desc("Simulate 16-bit weights accumulating and "
                     "synchronizing their gradients in float32 (Megatron-"
                     "LM's --accumulate-allreduce-grads-in-fp32)"),
      llvm::cl::init(false)};
  Option<int64_t> gradBucketBytes{
      *this, "grad-bucket-bytes",
      llvm::cl::desc("Simulate gradient syncs in buckets of at least this "
                     "many bytes (0: each weight on its own)"),
      llvm::cl::init(0)};
  Option<std::string> reportDir{
      *this, "report-dir",
      llvm::cl::desc("Write the report files into this directory")};
  Option<std::string> strategyOut{
      *this, "strategy-out",
      llvm::cl::desc("Write the strategy file (JSON) here")};
  Option<std::string> strategyIn{
      *this, "strategy-in",
      llvm::cl::desc("Take the strategy from this file instead of "
                     "searching")};
  Option<std::string> progress{
      *this, "progress",
      llvm::cl::desc("Search progress on stderr: auto (when a terminal), on "
                     "or off"),
      llvm::cl::init("auto")};
  Option<std::string> planOut{
      *this, "plan",
      llvm::cl::desc("Lower the strategy and write the plan file for ppc-run "
                     "here (the module becomes the plan)")};
  Option<bool> planText{*this, "plan-text",
                        llvm::cl::desc("Write the plan in protobuf text form"),
                        llvm::cl::init(false)};
  Option<std::string> traffic{
      *this, "traffic",
      llvm::cl::desc("With plan: write the bytes the plan moves and the bytes "
                     "the simulator priced, by link kind, as JSON here "
                     "(default with report-dir: DIR/traffic.json)")};
  Option<double> learningRate{
      *this, "lr",
      llvm::cl::desc("Learning rate in the plan (0: the optimizer's default, "
                     "0.01 for sgd and momentum, 0.001 for adam)"),
      llvm::cl::init(0.0)};
  // search=megatron: a published layout (ppc-search's options of the same
  // names).
  Option<int64_t> tp{*this, "tp",
                     llvm::cl::desc("search=megatron: tensor-parallel degree "
                                    "(0: the devices of a node)"),
                     llvm::cl::init(0)};
  Option<int64_t> pp{*this, "pp",
                     llvm::cl::desc("search=megatron: pipeline stages"),
                     llvm::cl::init(1)};
  Option<int64_t> dp{*this, "dp",
                     llvm::cl::desc("search=megatron: data-parallel degree "
                                    "expected (0: what tp x pp leave)"),
                     llvm::cl::init(0)};
  Option<int64_t> virtualStages{
      *this, "virtual-stages",
      llvm::cl::desc("search=megatron: model chunks per pipeline stage"),
      llvm::cl::init(1)};
  Option<int64_t> microbatches{
      *this, "microbatches",
      llvm::cl::desc("search=megatron or pipeline: micro-batches (0: "
                     "searched)"),
      llvm::cl::init(0)};
  // search=pipeline (ppc-search's options of the same names).
  Option<int64_t> stages{
      *this, "stages",
      llvm::cl::desc("search=pipeline: pipeline stages (0: searched)"),
      llvm::cl::init(0)};
  Option<std::string> stageBaseline{
      *this, "stage-baseline",
      llvm::cl::desc("search=pipeline: the baseline inside every stage "
                     "(default: searched among all)"),
      llvm::cl::init("")};
  Option<bool> stageDp{
      *this, "stage-dp",
      llvm::cl::desc("search=pipeline: also cut stages and size their "
                     "submeshes by Alpa's DP over layer clusters (unless "
                     "stages is fixed)"),
      llvm::cl::init(true)};
  Option<std::string> schedule{
      *this, "schedule",
      llvm::cl::desc("search=pipeline: gpipe, 1f1b or interleaved-1f1b "
                     "(default: searched)"),
      llvm::cl::init("")};
  Option<bool> dpStart{
      *this, "dp-start",
      llvm::cl::desc("search=mcmc: first run the dynamic programming and "
                     "start the first chain from its answer"),
      llvm::cl::init(true)};
  Option<bool> pipelines{
      *this, "pipelines",
      llvm::cl::desc("search=mcmc: on more than one device, also run the "
                     "pipeline search and take its answer when faster"),
      llvm::cl::init(true)};
  Option<bool> megatronLayouts{
      *this, "megatron-layouts",
      llvm::cl::desc("search=mcmc: where ops mix sequence positions, also "
                     "try Megatron-LM's and Megatron-Core's layouts and "
                     "Ulysses x ZeRO-3"),
      llvm::cl::init(true)};
  Option<std::string> recompute{
      *this, "recompute",
      llvm::cl::desc("search=megatron: none, selective or full"),
      llvm::cl::init("none")};
  Option<bool> sequenceParallel{
      *this, "sequence-parallel",
      llvm::cl::desc("search=megatron: sequence parallelism"),
      llvm::cl::init(false)};
  Option<bool> distributedOptimizer{
      *this, "distributed-optimizer",
      llvm::cl::desc("search=megatron: optimizer state sharded over the "
                     "data-parallel replicas"),
      llvm::cl::init(false)};
  Option<bool> fsdp{
      *this, "fsdp",
      llvm::cl::desc("search=megatron: weights, gradients and optimizer "
                     "state sharded over the data-parallel replicas"),
      llvm::cl::init(false)};
  Option<int64_t> cp{*this, "cp",
                     llvm::cl::desc("search=megatron: context-parallel "
                                    "degree"),
                     llvm::cl::init(1)};
  Option<int64_t> ep{*this, "ep",
                     llvm::cl::desc("search=megatron: expert-parallel "
                                    "degree"),
                     llvm::cl::init(1)};
  Option<int64_t> etp{*this, "etp",
                      llvm::cl::desc("search=megatron: expert tensor-parallel "
                                     "degree (0: 1 under ep > 1, else the "
                                     "experts in the tensor-parallel blocks)"),
                      llvm::cl::init(0)};
  Option<std::string> cpComm{
      *this, "cp-comm",
      llvm::cl::desc("search=megatron with cp > 1: all-gather, "
                     "all-to-all or key-blocks"),
      llvm::cl::init("all-gather")};
};

/// Options of `ppc-lower-to-plan`: materialize resharding, partition into
/// per-rank programs and write the plan file.
struct LowerToPlanOptions
    : public mlir::PassPipelineOptions<LowerToPlanOptions> {
  Option<std::string> plan{*this, "plan",
                           llvm::cl::desc("Plan file to write (none: keep "
                                          "the plan dialect module only)")};
  Option<bool> text{*this, "text",
                    llvm::cl::desc("Write the plan in protobuf text form"),
                    llvm::cl::init(false)};
  Option<std::string> traffic{
      *this, "traffic",
      llvm::cl::desc("Write the bytes the plan moves and the bytes the "
                     "simulator priced, by link kind, as JSON here")};
  Option<std::string> optimizer{*this, "optimizer",
                                llvm::cl::desc("sgd, momentum or adam"),
                                llvm::cl::init("sgd")};
  Option<double> learningRate{
      *this, "lr",
      llvm::cl::desc("Learning rate (0: the optimizer's default, 0.01 for sgd "
                     "and momentum, 0.001 for adam)"),
      llvm::cl::init(0.0)};
  Option<UnassignedPolicy> unassigned{
      *this, "unassigned", llvm::cl::desc("What ops without a strategy run as"),
      llvm::cl::init(UnassignedPolicy::SingleDevice),
      llvm::cl::values(clEnumValN(UnassignedPolicy::SingleDevice,
                                  "single-device", "whole on device 0"),
                       clEnumValN(UnassignedPolicy::DataParallel,
                                  "data-parallel",
                                  "data parallel over every device"))};
};

/// Adds `ppc-lower-to-plan`'s passes to `pm`.
void buildLowerToPlanPipeline(mlir::OpPassManager &pm,
                              const LowerToPlanOptions &options);

/// Adds `ppc-auto-parallel`'s passes to `pm`. The batch size is not an
/// option: it is the importer's (--batch-size, --input-shape).
void buildAutoParallelPipeline(mlir::OpPassManager &pm,
                               const AutoParallelOptions &options);

/// Registers every ppc pipeline.
void registerPPCPipelines();

} // namespace ppc

#endif // PPC_PIPELINES_PIPELINES_H
