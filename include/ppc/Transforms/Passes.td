//===- Passes.td - ppc graph passes ------------------------*- tablegen -*-===//

#ifndef PPC_TRANSFORMS_PASSES_TD
#define PPC_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

// What one training iteration is simulated with: ppc-simulate and
// ppc-search take the same options (sim::SimOptions).
defvar SimulationOptions = [
    Option<"optimizer", "optimizer", "::ppc::sim::Optimizer",
           "::ppc::sim::Optimizer::SGD",
           "Optimizer whose state and update are simulated",
           [{::llvm::cl::values(
             clEnumValN(::ppc::sim::Optimizer::SGD, "sgd", "plain SGD"),
             clEnumValN(::ppc::sim::Optimizer::Momentum, "momentum",
                        "SGD with momentum (one state tensor per weight)"),
             clEnumValN(::ppc::sim::Optimizer::Adam, "adam",
                        "Adam (two state tensors per weight)"))}]>,
    Option<"overlap", "overlap", "bool", "true",
           "Overlap each weight's gradient synchronization with the rest of "
           "backward">,
    Option<"overlapParamGather", "overlap-param-gather", "bool", "false",
           "Sharded optimizer states: gather the updated parameters during "
           "the next forward (Megatron-LM's --overlap-param-gather), not "
           "right after the update">,
    Option<"overlapTensorParallel", "tp-comm-overlap", "bool", "false",
           "Tensor-parallel communication inside a node next to a linear "
           "layer runs in chunks beside its kernel (Megatron-Core's "
           "--tp-comm-overlap)">,
    Option<"regatherInputs", "regather-inputs", "bool", "false",
           "A linear layer keeps none of the activations it receives from "
           "other devices and gathers them again in backward (Megatron-LM's "
           "sequence parallelism)">,
    Option<"fp32Gradients", "fp32-gradients", "bool", "false",
           "16-bit weights accumulate and synchronize their gradients in "
           "float32 (Megatron-LM's --accumulate-allreduce-grads-in-fp32)">,
    Option<"gradBucketBytes", "grad-bucket-bytes", "int64_t", "0",
           "Gradients synchronize in buckets of at least this many bytes, "
           "each weight at a bucket's rate (0: each weight on its own)">,
    Option<"gradSync", "grad-sync", "::ppc::sim::GradSync",
           "::ppc::sim::GradSync::AllReduce",
           "How replicas of a weight synchronize their gradients",
           [{::llvm::cl::values(
             clEnumValN(::ppc::sim::GradSync::AllReduce, "all-reduce",
                        "all-reduce of the gradients"),
             clEnumValN(::ppc::sim::GradSync::ReduceScatterAllGather,
                        "reduce-scatter",
                        "reduce-scatter, sharded update, all-gather"))}]>,
    Option<"memoryLimit", "memory-limit", "std::string", "\"\"",
           "Memory per device a strategy may use ('16GiB', '500MB', bytes), "
           "in place of each device's memory; default: the device's memory">
];

def OpSummary : Pass<"ppc-op-summary", "mlir::ModuleOp"> {
  let summary = "Print a summary of a ppc graph: ops by kind, weights, FLOPs";
  let description = [{
    Counts the graph ops of every function by kind, the weights and their
    parameter count, the graph inputs and outputs with their shapes, and the
    forward FLOPs given by ParallelizableOpInterface. The module is unchanged.
  }];
  let options = [
    Option<"outputPath", "output", "std::string", "\"-\"",
           "Where to write the summary ('-' for stdout)">,
  ];
}

def AttachMachine : Pass<"ppc-attach-machine", "mlir::ModuleOp"> {
  let summary = "Attach a machine description (preset or JSON file) to the module";
  let description = [{
    Sets the module attribute `ppc.machine` to the machine named by `machine`:
    a preset (`p100x16`, `k80x64`, `dgx-a100`, `dgx-a100xN`, `dgx-h100`,
    `dgx-h100xN`, `cpu`, `cpuxN`) or a JSON file in the format of
    docs/machine-format.md. A hierarchical machine becomes a `#topo.cluster`
    attribute; an explicit graph (or any machine with `explicit-graph=true`)
    a `topo.machine` op that the attribute refers to. A machine attached
    before is replaced. `machine=list` prints the presets and changes nothing.
  }];
  let options = [
    Option<"machine", "machine", "std::string", "\"\"",
           "Preset name, path to a machine JSON file, or 'list'">,
    Option<"explicitGraph", "explicit-graph", "bool", "false",
           "Attach the explicit device/link graph even for a cluster">,
  ];
  let dependentDialects = ["::ppc::topo::TopologyDialect"];
}

def Simulate : Pass<"ppc-simulate", "mlir::ModuleOp"> {
  let summary = "Simulate one training iteration of the module's strategy";
  let description = [{
    Builds the simulator's graph of every function with graph ops, reads the
    `ppc.strategy` of each op (ops without one follow `unassigned`), checks
    each configuration against the op and the machine attached to the module
    (`ppc.machine`, see `--ppc-attach-machine`), and simulates forward,
    backward, gradient synchronization and the optimizer update. Prints a
    report: iteration time and throughput, per-device compute, communication,
    idle time and memory (weights, gradients, optimizer state, activations)
    against capacity, bytes moved per link kind, and the ops that take the
    most time. Needing more memory than a device has is a warning in the
    report, not a failure. The module is unchanged.
  }];
  let options = !listconcat(SimulationOptions, [
    Option<"unassigned", "unassigned", "::ppc::UnassignedPolicy",
           "::ppc::UnassignedPolicy::DataParallel",
           "What ops without a ppc.strategy run as",
           [{::llvm::cl::values(
             clEnumValN(::ppc::UnassignedPolicy::SingleDevice, "single",
                        "whole on device 0"),
             clEnumValN(::ppc::UnassignedPolicy::DataParallel, "data-parallel",
                        "data parallel over all devices"))}]>,
    Option<"profilePath", "profile", "std::string", "\"\"",
           "Measured kernel times (JSON, docs/profile-format.md); kernels it "
           "lacks, and all kernels without it, use the roofline model">,
    Option<"tracePath", "trace", "std::string", "\"\"",
           "Write the simulated timeline as Chrome trace JSON to this file">,
    Option<"outputPath", "output", "std::string", "\"-\"",
           "Where to write the report ('-' for stdout)">,
  ]);
}

def SearchStrategy : Pass<"ppc-search", "mlir::ModuleOp"> {
  let summary = "Search a parallelization strategy and attach it as #ppc.strategy";
  let description = [{
    Searches the SOAP space of every function with graph ops for the
    strategy with the fastest simulated training iteration on the machine
    attached to the module (`ppc.machine`, see `--ppc-attach-machine`), and
    sets `ppc.strategy` on every simulated op. Nothing else in the module
    changes: lowering passes read the attributes.

    `algorithm=mcmc` (FlexFlow's Metropolis-Hastings search) runs independent
    chains on `threads` threads, started from the dynamic programming's
    answer (`dp-start`), every baseline (data parallel, ZeRO, FSDP, the
    Megatron layouts, one weird trick) and the strategy already on the
    module, if any; on more than one device the pipeline search (below)
    runs between the DP and MCMC (`pipelines`), and a pipeline wins when
    it is faster;
    `dp` is the dynamic programming over a series-parallel
    decomposition; `exhaustive` is exact on small graphs; `pipeline` searches
    pipeline stages (on equal submeshes of whole nodes), micro-batch counts
    and the baseline inside each stage by simulating each candidate
    (`stages`, `microbatches` and `stage-baseline` fix those choices), with
    every unpipelined baseline among the candidates, then Alpa's stage DP
    over layer clusters x submesh sizes (`stage-dp`), then runs the dynamic
    programming inside each stage of the winner and tries it as GPipe and
    interleaved (`schedule` fixes one); `megatron` builds Megatron-LM's
    layout as a paper states it (`tp`, `pp`, `dp`, `virtual-stages`,
    `microbatches`, `recompute`, `sequence-parallel`,
    `distributed-optimizer`; by default tensor parallel in each node and
    data parallel across); the other baselines (`data-parallel`, `fsdp`,
    `one-weird-trick`, ...) are taken as they are. The result
    is deterministic for a seed and a thread count. Ctrl-C ends the search
    with the best strategy so far. A one-line summary goes to stderr; with
    `report-dir` the report files of docs/reports.md are written as well.
  }];
  let options = !listconcat([
    Option<"algorithm", "algorithm", "std::string", "\"mcmc\"",
           "mcmc (default: the DP, the pipeline search and MCMC), dp, "
           "exhaustive, pipeline, megatron or a baseline's name "
           "(data-parallel, zero1, fsdp, one-weird-trick, ...; an unknown "
           "name lists them all)">,
    Option<"budget", "budget", "std::string", "\"1000\"",
           "Search budget: seconds ('30s', '2m', '1h') or iterations per "
           "chain ('5000' or '5000it')">,
    Option<"threads", "threads", "unsigned", "0",
           "Threads for independent MCMC chains (0: every core)">,
    Option<"seed", "seed", "uint64_t", "1", "Random seed">],
    SimulationOptions, [
    Option<"profilePath", "profile", "std::string", "\"\"",
           "Measured kernel times (JSON, docs/profile-format.md)">,
    Option<"profileRequests", "profile-requests", "std::string", "\"\"",
           "Write the kernels the configuration space asks for, one per "
           "profile key, for ppc-profile to measure "
           "(ppc/Search/ProfileRequests.h)">,
    Option<"reportDir", "report-dir", "std::string", "\"\"",
           "Write the report files (strategy, summary, timeline, search "
           "trace, graph, baselines, scaling) into this directory">,
    Option<"progress", "progress", "std::string", "\"auto\"",
           "Progress with ETA on stderr: auto (when stderr is a terminal), "
           "on or off">,
    Option<"dpStart", "dp-start", "bool", "true",
           "algorithm=mcmc: first run the dynamic programming (within half "
           "of a time budget, or 50 s under an iteration budget) and start "
           "the first chain from its answer">,
    Option<"pipelines", "pipelines", "bool", "true",
           "algorithm=mcmc: on more than one device, also run the pipeline "
           "search (within half of what is left of a time budget, or 50 s "
           "under an iteration budget) and take its answer when faster">,
    Option<"megatronLayouts", "megatron-layouts", "bool", "true",
           "algorithm=mcmc: where ops mix sequence positions (transformers), "
           "also try Megatron-LM's and Megatron-Core's layouts (tp x cp x "
           "pp x dp, every context exchange, the distributed optimizer, "
           "selective or full recomputation) and Ulysses x ZeRO-3 (within a "
           "third of what is left of a time budget, or 30 s under an "
           "iteration budget), as a start and as an answer">,
    Option<"stages", "stages", "int64_t", "0",
           "algorithm=pipeline: pipeline stages (0: searched)">,
    Option<"microbatches", "microbatches", "int64_t", "0",
           "algorithm=pipeline or megatron: micro-batches (0: searched)">,
    Option<"stageBaseline", "stage-baseline", "std::string", "\"\"",
           "algorithm=pipeline: the baseline inside every stage (default: "
           "searched among all)">,
    Option<"stageDp", "stage-dp", "bool", "true",
           "algorithm=pipeline: also cut stages and size their submeshes "
           "by Alpa's DP over layer clusters (unless stages is fixed)">,
    Option<"tp", "tp", "int64_t", "0",
           "algorithm=megatron: tensor-parallel degree (0: the devices of a "
           "node)">,
    Option<"pp", "pp", "int64_t", "1",
           "algorithm=megatron: pipeline stages">,
    Option<"dp", "dp", "int64_t", "0",
           "algorithm=megatron: data-parallel degree expected (0: what tp x "
           "pp leave)">,
    Option<"virtualStages", "virtual-stages", "int64_t", "1",
           "algorithm=megatron: model chunks per pipeline stage "
           "(interleaved 1F1B when > 1)">,
    Option<"recompute", "recompute", "std::string", "\"none\"",
           "algorithm=megatron: none, selective or full">,
    Option<"sequenceParallel", "sequence-parallel", "bool", "false",
           "algorithm=megatron: sequence parallelism">,
    Option<"distributedOptimizer", "distributed-optimizer", "bool", "false",
           "algorithm=megatron: optimizer state sharded over the "
           "data-parallel replicas">,
    Option<"fsdp", "fsdp", "bool", "false",
           "algorithm=megatron: weights, gradients and optimizer state "
           "sharded over the data-parallel replicas (ZeRO-3)">,
    Option<"cp", "cp", "int64_t", "1",
           "algorithm=megatron: context-parallel degree (every op split "
           "along the sequence over groups of cp devices)">,
    Option<"ep", "ep", "int64_t", "1",
           "algorithm=megatron: expert-parallel degree (the ops on a "
           "mixture of experts' slots split by experts over groups of ep "
           "devices)">,
    Option<"etp", "etp", "int64_t", "0",
           "algorithm=megatron: expert tensor-parallel degree (each "
           "expert's feed-forward layers split column- then row-parallel "
           "over groups of etp devices inside the expert group; 0: 1 under "
           "ep > 1, else the experts inside the tensor-parallel blocks)">,
    Option<"cpComm", "cp-comm", "std::string", "\"all-gather\"",
           "algorithm=megatron with cp > 1: how attention reaches the "
           "sequence's keys and values: all-gather, all-to-all or "
           "key-blocks">,
    Option<"schedule", "schedule", "std::string", "\"\"",
           "algorithm=pipeline: gpipe, 1f1b or interleaved-1f1b (with "
           "stages = S: S submeshes of 2, 4, ... stages each; default: "
           "searched)">,
  ]);
  let dependentDialects = ["::ppc::graph::PPCDialect"];
}

def ExportStrategy : Pass<"ppc-export-strategy", "mlir::ModuleOp"> {
  let summary = "Write the module's strategy to a JSON strategy file";
  let description = [{
    Writes every simulated op's configuration (its `ppc.strategy`, or data
    parallel for ops without one) in the format of docs/strategy-format.md,
    with the predicted per-op times of one simulated iteration. The file can
    be edited and read back with `--ppc-import-strategy`. With several
    functions, one file per function: `FILE.<function>.json`. The module is
    unchanged.
  }];
  let options = [
    Option<"file", "file", "std::string", "\"\"",
           "Strategy file to write ('-' for stdout)">,
    Option<"predict", "predict", "bool", "true",
           "Simulate the strategy and add predicted times">,
    Option<"optimizer", "optimizer", "::ppc::sim::Optimizer",
           "::ppc::sim::Optimizer::SGD",
           "Optimizer simulated for the predictions",
           [{::llvm::cl::values(
             clEnumValN(::ppc::sim::Optimizer::SGD, "sgd", "plain SGD"),
             clEnumValN(::ppc::sim::Optimizer::Momentum, "momentum",
                        "SGD with momentum"),
             clEnumValN(::ppc::sim::Optimizer::Adam, "adam", "Adam"))}]>,
  ];
}

def ImportStrategy : Pass<"ppc-import-strategy", "mlir::ModuleOp"> {
  let summary = "Set #ppc.strategy on every op from a JSON strategy file";
  let description = [{
    Reads a strategy file (docs/strategy-format.md) and sets `ppc.strategy`
    on every simulated op, replacing what was there. Every op must have
    exactly one entry; an unknown op name, a missing op, degrees that do not
    fit the op or the attached machine, or malformed JSON are errors naming
    the entry, and then nothing is changed. With several functions, each reads
    `FILE.<function>.json`.
  }];
  let options = [
    Option<"file", "file", "std::string", "\"\"", "Strategy file to read">,
  ];
  let dependentDialects = ["::ppc::graph::PPCDialect"];
}

def AddLoss : Pass<"ppc-add-loss", "mlir::ModuleOp"> {
  let summary = "Append a training loss to every function with graph ops";
  let description = [{
    ONNX models are inference graphs; training needs a loss. The pass takes
    the function's first result and appends `ppc.softmax_cross_entropy` for
    class logits (`[N, C]`, or `[N, S, C]` reshaped to `[N*S, C]` with the
    labels `[N, S]` reshaped alike) or `ppc.mse_loss` otherwise, with a new
    function argument `labels` (class indices, i64) or `targets` (same type
    as the prediction). The loss becomes the function's only result. A
    function that already has a loss op is left as it is.
  }];
  let options = [
    Option<"loss", "loss", "std::string", "\"auto\"",
           "auto (softmax-ce for [N, C] and [N, S, C] results, else mse), "
           "softmax-ce, mse or none">,
  ];
  let dependentDialects = ["::ppc::graph::PPCDialect"];
}

def ZigzagSequence : Pass<"ppc-zigzag-sequence", "mlir::ModuleOp"> {
  let summary = "Store a causal model's sequence in zigzag order, so that "
                "context parallelism splits its work evenly";
  let description = [{
    Causal attention split n ways along its sequence gives the last part n
    times the first part's work. Megatron-Core balances it by storing the
    sequence in zigzag order: 2 * `pairs` chunks, stored chunk 2j holding
    chunk j and stored chunk 2j + 1 chunk 2 * pairs - 1 - j, so that any
    split into n parts, n dividing `pairs`, does equal work (and each ring
    step too). The pass finds the dims that hold the causal attentions'
    positions (through every op that indexes them one to one, and through
    reshapes), gathers them into zigzag order where they begin (inputs,
    weights, constants) and back where they leave (function results), and
    sets `zigzag` on the attentions, whose masks compare natural positions.
    The loss and the gradients are the same sums, added in another order;
    dropout draws its masks over the stored order. A function with no causal
    attention, or already in zigzag order, is left as it is. The gathers
    carry `ppc.sequence_order` (ppc-restore-sequence-order removes them).

    With `pairs=auto` (the default) the pairs come from the attached machine:
    the most that divide its device count and every causal sequence into
    2 * pairs chunks, so every context-parallel degree the search may choose
    is balanced; on one device, or where no 2 or more pairs fit, nothing
    changes. There a function the pass cannot reorder is left as it is with
    a remark naming the reason, instead of an error.

    Errors name the op that would compute something else on permuted
    positions: one that reads the sequence whole, through a window, slice
    or stride, computes across it (a cumulative sum), selects it by index
    (a gather from a table of positions), or a reshape that splits it over
    two dims; and an attention whose sequence 2 * pairs does not divide.
  }];
  let options = [
    Option<"pairs", "pairs", "std::string", "\"auto\"",
           "Pairs of chunks, balanced for every context-parallel degree "
           "that divides it; auto: from the attached machine, the most that "
           "divide its devices and every causal sequence (none on one "
           "device), a function it cannot reorder left as it is with a "
           "remark">,
  ];
  let dependentDialects = ["::ppc::graph::PPCDialect"];
}

def RestoreSequenceOrder : Pass<"ppc-restore-sequence-order",
                                "mlir::ModuleOp"> {
  let summary = "Put a sequence stored in zigzag order back in natural order "
                "where the strategy does not split it";
  let description = [{
    Undoes ppc-zigzag-sequence in each function none of whose zigzag-ordered
    attentions has a strategy that splits its query or key positions (with
    `all`, in every function): removes the gathers the pass inserted (marked
    `ppc.sequence_order`) and sets the attentions' `zigzag` to 0. Everything
    between those gathers indexes the positions one to one, so the function
    computes the same values; strategies of the other ops are kept. The
    `ppc-auto-parallel` pipeline runs it after its search, so the zigzag
    order it applies by default stays only where context parallelism uses
    it.
  }];
  let options = [
    Option<"all", "all", "bool", "false",
           "Restore natural order in every function, split or not">,
  ];
  let dependentDialects = ["::ppc::graph::PPCDialect"];
}

def ConvertDType : Pass<"ppc-convert-dtype", "mlir::ModuleOp"> {
  let summary = "Rewrite every floating-point tensor to one element type";
  let description = [{
    Mixed-precision training: every floating-point tensor type of every
    function (arguments, results, op results, weights) and the values of
    constants and embedded weights become `dtype`. Integer tensors (labels,
    indices) are unchanged. The simulator costs 16-bit tensors at the
    device's 16-bit rate with float32 master weights and optimizer state;
    ppc-run trains the lowered plan that way (docs/runtime.md).
  }];
  let options = [
    Option<"dtype", "dtype", "std::string", "\"f32\"", "f32, bf16 or f16">,
  ];
}

#endif // PPC_TRANSFORMS_PASSES_TD
