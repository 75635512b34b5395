//===- AutoParallel.cpp - the whole job as one pipeline -------------------===//
//
// `ppc-auto-parallel` is the individual passes in their usual order, so that
// what the pipeline does can be redone (or changed) step by step with
// ppc-opt. Options are only forwarded: each pass validates its own.
//
//===----------------------------------------------------------------------===//

#include "ppc/Pipelines/Pipelines.h"

#include "ppc/Conversion/Passes.h"
#include "ppc/Interop/Passes.h"
#include "ppc/Target/PlanExport.h"
#include "ppc/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"

#include <thread>

using namespace mlir;

void ppc::buildAutoParallelPipeline(OpPassManager &pm,
                                    const AutoParallelOptions &options) {
  // A TOSA or linalg function from an MLIR front end becomes a ppc graph
  // first (a no-op on a ppc graph).
  pm.addPass(createImportUpstream());

  AddLossOptions lossOptions;
  lossOptions.loss = options.loss;
  pm.addPass(createAddLoss(lossOptions));

  // A bf16 model trains in bf16 unless a dtype is asked for.
  if (!options.dtype.empty()) {
    ConvertDTypeOptions dtypeOptions;
    dtypeOptions.dtype = options.dtype;
    pm.addPass(createConvertDType(dtypeOptions));
  }

  if (!options.machine.empty()) {
    AttachMachineOptions machineOptions;
    machineOptions.machine = options.machine;
    pm.addPass(createAttachMachine(machineOptions));
  }

  // Causal sequences in zigzag order, so that the search prices balanced
  // context parallelism. By default (auto) only when searching: the pairs
  // from the machine, and natural order restored after the search wherever
  // it splits no causal attention's positions. A strategy file fixes the
  // graph it was written for.
  const std::string &zigzag = options.zigzag;
  const bool automatic = zigzag == "auto";
  if (zigzag != "off" && zigzag != "0" &&
      !(automatic && !options.strategyIn.empty())) {
    ZigzagSequenceOptions zigzagOptions;
    zigzagOptions.pairs = zigzag;
    pm.addPass(createZigzagSequence(zigzagOptions));
  }

  if (!options.strategyIn.empty()) {
    ImportStrategyOptions importOptions;
    importOptions.file = options.strategyIn;
    pm.addPass(createImportStrategy(importOptions));
  } else {
    SearchStrategyOptions searchOptions;
    searchOptions.algorithm = options.search;
    searchOptions.budget = options.budget;
    searchOptions.threads =
        options.threads ? options.threads.getValue()
                        : std::max(1u, std::thread::hardware_concurrency());
    searchOptions.seed = options.seed;
    searchOptions.optimizer = options.optimizer;
    searchOptions.memoryLimit = options.memoryLimit;
    searchOptions.profilePath = options.profile;
    searchOptions.profileRequests = options.profileRequests;
    searchOptions.overlap = options.overlap;
    searchOptions.overlapParamGather = options.overlapParamGather;
    searchOptions.overlapTensorParallel = options.overlapTensorParallel;
    searchOptions.regatherInputs = options.regatherInputs;
    searchOptions.fp32Gradients = options.fp32Gradients;
    searchOptions.gradBucketBytes = options.gradBucketBytes;
    searchOptions.reportDir = options.reportDir;
    searchOptions.progress = options.progress;
    searchOptions.tp = options.tp;
    searchOptions.pp = options.pp;
    searchOptions.dp = options.dp;
    searchOptions.virtualStages = options.virtualStages;
    searchOptions.microbatches = options.microbatches;
    searchOptions.recompute = options.recompute;
    searchOptions.sequenceParallel = options.sequenceParallel;
    searchOptions.distributedOptimizer = options.distributedOptimizer;
    searchOptions.fsdp = options.fsdp;
    searchOptions.cp = options.cp;
    searchOptions.ep = options.ep;
    searchOptions.etp = options.etp;
    searchOptions.cpComm = options.cpComm;
    searchOptions.stages = options.stages;
    searchOptions.stageBaseline = options.stageBaseline;
    searchOptions.stageDp = options.stageDp;
    searchOptions.schedule = options.schedule;
    searchOptions.dpStart = options.dpStart;
    searchOptions.pipelines = options.pipelines;
    searchOptions.megatronLayouts = options.megatronLayouts;
    pm.addPass(createSearchStrategy(searchOptions));
    if (automatic)
      pm.addPass(createRestoreSequenceOrder());
  }

  if (!options.strategyOut.empty()) {
    ExportStrategyOptions exportOptions;
    exportOptions.file = options.strategyOut;
    exportOptions.optimizer = options.optimizer;
    pm.addPass(createExportStrategy(exportOptions));
  }

  if (!options.planOut.empty()) {
    LowerToPlanOptions planOptions;
    planOptions.plan = options.planOut;
    planOptions.text = options.planText;
    // The report counts what the plan moves beside what was priced.
    planOptions.traffic = !options.traffic.empty() || options.reportDir.empty()
                              ? options.traffic.getValue()
                              : (options.reportDir + "/traffic.json");
    planOptions.learningRate = options.learningRate;
    planOptions.optimizer = sim::optimizerInfo(options.optimizer).name;
    buildLowerToPlanPipeline(pm, planOptions);
  }
}

void ppc::buildLowerToPlanPipeline(OpPassManager &pm,
                                   const LowerToPlanOptions &options) {
  UnassignedPolicy unassigned = options.unassigned;
  MaterializeReshardingOptions materialize;
  materialize.unassigned = unassigned;
  pm.addPass(createMaterializeResharding(materialize));
  PartitionToPlanOptions partition;
  partition.optimizer = options.optimizer;
  partition.learningRate = options.learningRate;
  partition.unassigned = unassigned;
  partition.traffic = options.traffic;
  pm.addPass(createPartitionToPlan(partition));
  pm.addPass(createElideZeroFills());
  pm.addPass(createAliasViews());
  if (!options.plan.empty()) {
    ExportPlanOptions exportOptions;
    exportOptions.file = options.plan;
    exportOptions.text = options.text;
    pm.addPass(createExportPlan(exportOptions));
  }
}

void ppc::registerPPCPipelines() {
  PassPipelineRegistration<AutoParallelOptions>(
      "ppc-auto-parallel",
      "Parallelize a model for training: import TOSA/linalg ops, add a loss, "
      "convert the dtype, "
      "attach the machine, search a strategy (#ppc.strategy on every op), "
      "and write the report and strategy file. The batch size is the "
      "importer's --batch-size",
      buildAutoParallelPipeline);
  PassPipelineRegistration<LowerToPlanOptions>(
      "ppc-lower-to-plan",
      "Lower a module with strategies to a runtime plan: materialize "
      "resharding, partition into per-rank programs, write the plan file",
      buildLowerToPlanPipeline);
}
