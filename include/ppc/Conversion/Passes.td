//===- Passes.td - ppc lowering passes ---------------------*- tablegen -*-===//

#ifndef PPC_CONVERSION_PASSES_TD
#define PPC_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def MaterializeResharding : Pass<"ppc-materialize-resharding",
                                 "mlir::ModuleOp"> {
  let summary = "Insert explicit parallel ops where configurations differ";
  let description = [{
    Reads every op's `ppc.strategy` (ops without one follow `unassigned`)
    and, on each edge from a producer to a consumer whose partitions do not
    line up, inserts the parallel op that moves the data, as the simulator
    costs it (Unity's parallel operators):
      * `ppc.reduce`      the producer leaves partial sums (a reduction dim
                          is split): all-reduce within each group of partials;
      * `ppc.combine`     the consumer holds fewer, larger pieces;
      * `ppc.repartition` the consumer holds pieces of another layout;
      * `ppc.replicate`   the consumer holds the same piece on several ranks.
    Each carries the configuration of the producer (`from`), the consumer
    (`to`) and the kind of exchange the communication plan makes of it
    (`as "all_gather"`; also "all_to_all", "point_to_point", and for
    `ppc.reduce` "all_reduce" or "reduce_scatter": geometry::classifyExchange
    on the pieces geometry::SourceChooser picks, which the simulator prices).
    The lowering moves an "all_gather" or "all_to_all" with one plan
    collective per group where it can, and their gradients with one
    reduce-scatter or all-to-all. Edges that already line up are left alone; running the pass twice
    changes nothing the second time.
  }];
  let options = [
    Option<"unassigned", "unassigned", "::ppc::UnassignedPolicy",
           "::ppc::UnassignedPolicy::SingleDevice",
           "What ops without a ppc.strategy run as",
           [{::llvm::cl::values(
             clEnumValN(::ppc::UnassignedPolicy::SingleDevice, "single-device",
                        "whole on device 0"),
             clEnumValN(::ppc::UnassignedPolicy::DataParallel, "data-parallel",
                        "data parallel over every device"))}]>,
  ];
  let dependentDialects = ["::ppc::graph::PPCDialect"];
}

def PartitionToPlan : Pass<"ppc-partition-to-plan", "mlir::ModuleOp"> {
  let summary = "Lower a partitioned graph to per-rank programs (plan dialect)";
  let description = [{
    Replaces the module's body by one `plan.plan`: the global tensors and ops
    of the function, and per rank a program of buffer allocations, loads,
    forward kernels on local slices, transfers (copy, send/recv) and
    collectives for the parallel ops, the loss, backward kernels with their
    gradient transfers, gradient all-reduces of replicated weights, and
    optimizer updates. A function that returns a loss (see `ppc-add-loss`)
    gives a training plan; any other a forward-only plan whose results are
    gathered on rank 0. Ranks are the devices of the attached machine
    (`ppc.machine`); without one, the devices the strategy uses.
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", "\"sgd\"",
           "sgd, momentum or adam">,
    Option<"learningRate", "lr", "double", "0.0",
           "Learning rate (0: the optimizer's default, 0.01 for sgd and "
           "momentum, 0.001 for adam)">,
    Option<"momentum", "momentum", "double", "0.9", "Momentum (momentum)">,
    Option<"beta1", "beta1", "double", "0.9", "Adam beta1">,
    Option<"beta2", "beta2", "double", "0.999", "Adam beta2">,
    Option<"epsilon", "epsilon", "double", "1e-8", "Adam epsilon">,
    Option<"weightDecay", "weight-decay", "double", "0.0", "L2 weight decay">,
    Option<"unassigned", "unassigned", "::ppc::UnassignedPolicy",
           "::ppc::UnassignedPolicy::SingleDevice",
           "What ops without a ppc.strategy run as",
           [{::llvm::cl::values(
             clEnumValN(::ppc::UnassignedPolicy::SingleDevice, "single-device",
                        "whole on device 0"),
             clEnumValN(::ppc::UnassignedPolicy::DataParallel, "data-parallel",
                        "data parallel over every device"))}]>,
    Option<"traffic", "traffic", "std::string", "\"\"",
           "Write the bytes one step of the plan moves and the bytes the "
           "simulator prices for the strategy, by link kind, as JSON to this "
           "file">,
  ];
  let dependentDialects = ["::ppc::plan::PlanDialect"];
}

def ElideZeroFills : Pass<"ppc-elide-zero-fills", "mlir::ModuleOp"> {
  let summary = "Allocate without zero-filling where the first write covers "
                "the buffer, and let a gradient's first contribution write it";
  let description = [{
    A plan's buffers are zero-filled when allocated, and a gradient buffer
    is filled with 0 before its contributions are added into it; on a GPU
    each fill is a launch and a pass over memory. For every `plan.alloc` of
    every program, in program order:
      * where the buffer's first instruction writes every element of it (a
        load, a fill, a stage-0 forward kernel that only writes it, a copy,
        recv or gathering collective over its whole box), the alloc becomes
        `uninitialized`;
      * where that first instruction is a fill with 0 followed by a
        contribution that can write instead of add (a backward kernel with
        the buffer as one of its input grads and nowhere else, or an
        accumulating copy or recv over the whole box), the fill is erased
        and the contribution writes: the kernel's `overwrite` entry for the
        buffer is set, the copy or recv no longer accumulates.
    A backend whose kernel cannot write a gradient instead of adding zero-
    fills it first, so every contribution still lands once.
  }];
  let dependentDialects = ["::ppc::plan::PlanDialect"];
}

def AliasViews : Pass<"ppc-alias-views", "mlir::ModuleOp"> {
  let summary = "A reshape's result shares its operand's buffer, and its "
                "operand's gradient shares the result's gradient buffer";
  let description = [{
    A `plan.op` marked `flat_view` (a reshape: IterationSpace::flatView)
    copies its operand's elements to its result in the same order; where a
    partition's two boxes visit the same elements in the same order
    (geometry::sameFlatOrder: a whole tensor, a batch split, a split of an
    innermost dim the reshape keeps), the copy is not needed:
      * forward: the result buffer becomes a `view` of the operand buffer,
        made where the kernel ran, and the kernel goes, provided the result
        buffer's first use was that kernel and nothing writes either
        buffer's memory after it (the operand is a step's activation or
        input, not a weight's buffer kept across steps);
      * backward: the operand's gradient buffer becomes a `view` of the
        result's gradient buffer, and the backward kernel goes, provided
        that kernel was the gradient's first contribution and its first use
        (ppc-elide-zero-fills marked it `overwrite`: run this pass after
        it) and nothing but a free uses the result's gradient after it:
        later contributions then add into the memory the result's gradient
        left.
    The simulator counts no memory and no time for such a partition (the
    same rule), so the plan now does what it priced.
  }];
  let dependentDialects = ["::ppc::plan::PlanDialect"];
}

#endif // PPC_CONVERSION_PASSES_TD
