//===- GraphAttrs.td - ppc graph dialect attributes --------*- tablegen -*-===//

#ifndef PPC_DIALECT_GRAPH_GRAPHATTRS_TD
#define PPC_DIALECT_GRAPH_GRAPHATTRS_TD

include "ppc/Dialect/Graph/GraphBase.td"
include "mlir/IR/EnumAttr.td"

def PPC_StrategyAttr : PPC_Attr<"Strategy", "strategy"> {
  let summary = "How one op is split over the machine (SOAP degrees + view)";
  let description = [{
    A degree for each iteration dimension of the op (in the order of its
    `ParallelizableOpInterface` iteration space) and a machine view in the
    style of Unity: partition `p` (row-major over the degrees) runs on device
    `start + sum_i coord_i(p) * strides[i]`, where `i` ranges over the
    partitioned dims (degree > 1) in order. An empty stride list means the
    contiguous view (strides are the row-major products of the degrees).

    `replicas = r` runs every partition on `r` devices (the replica is the
    innermost coordinate of the device grid, with its own stride last in
    `strides`): Megatron-LM's layer norms run whole on each device of a
    tensor-parallel group. `recompute` drops the op's results after forward
    and runs the forward again right before its backward. `zero = s` shards
    the training state of the weights the op holds over the replicas that
    synchronize their gradients, as ZeRO's stage s: 1 optimizer state,
    2 also gradients, 3 also the parameters (gathered before use).
    `scatter = d` reduce-scatters the partial sums of a split reduction dim
    along dim d of the result instead of all-reducing them: member i of each
    summing group keeps piece i (Megatron-LM's sequence parallelism after a
    row-parallel layer). `stage = s` puts the op in stage s of the function's
    pipeline (`#ppc.pipeline`): its devices are that stage's submesh.
    `ring` streams the op's ring dim (its interface's `RingSpec`: the keys
    of an attention) around the groups that split the dim it pairs with
    (the query positions), a block per member passed point to point while
    each computes, instead of gathering it whole (ring attention).

    ```mlir
    // 4-way data parallel x 2-way tensor parallel on devices 0..7, the tensor
    // parallel pairs 4 apart (across nodes of 4 devices).
    #ppc.strategy<degrees = [4, 2, 1], strides = [1, 4]>
    // 8-way data parallel on devices 8..15 (contiguous view).
    #ppc.strategy<degrees = [8, 1, 1], start = 8>
    // A layer norm data parallel 2 ways, each half replicated on 4 devices;
    // recomputed in backward; its weights sharded ZeRO-3 style.
    #ppc.strategy<degrees = [2, 1, 1], replicas = 4, recompute, zero = 3>
    // A row-parallel matmul [b, s, k] x [k, n] split 4 ways along k, its
    // summed result [b, s, n] left split along s.
    #ppc.strategy<degrees = [1, 1, 1, 4], scatter = 1>
    ```
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$degrees,
                        DefaultValuedParameter<"int64_t", "0">:$start,
                        OptionalArrayRefParameter<"int64_t">:$strides,
                        DefaultValuedParameter<"int64_t", "1">:$replicas,
                        DefaultValuedParameter<"bool", "false">:$recompute,
                        DefaultValuedParameter<"int64_t", "0">:$zero,
                        DefaultValuedParameter<"int64_t", "-1">:$scatter,
                        DefaultValuedParameter<"int64_t", "0">:$stage,
                        DefaultValuedParameter<"bool", "false">:$ring);
  // Hand-written (GraphOps.cpp): a declarative format cannot parse two
  // optional groups that both begin with `,` (it commits to the first).
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The MLIR-free form the simulator and search use.
    ::ppc::OpConfig getConfig() const;
    /// The attribute of an MLIR-free configuration.
    static StrategyAttr get(::mlir::MLIRContext *context,
                            const ::ppc::OpConfig &config);
    /// Number of partitions (product of the degrees).
    int64_t getNumPartitions() const;
    /// Device of every instance (partition x replica), in row-major order.
    ::llvm::SmallVector<int64_t> getDevices() const;
  }];
}

def PPC_PipelineAttr : PPC_Attr<"Pipeline", "pipeline"> {
  let summary = "Pipeline stages, micro-batches and schedule of a function";
  let description = [{
    On a function (`ppc.pipeline`): its ops, each in the stage its
    `#ppc.strategy` names, run as a pipeline of stages, stage s on the
    devices [first_devices[s], first_devices[s] + devices[s]); the global
    batch runs as `microbatches` micro-batches in `schedule` order (`gpipe`
    or `1f1b`).

    ```mlir
    // Two stages of 8 devices each, 8 micro-batches, 1F1B.
    #ppc.pipeline<microbatches = 8, schedule = "1f1b",
                  first_devices = [0, 8], devices = [8, 8]>
    ```
  }];
  let parameters = (ins "int64_t":$microbatches, StringRefParameter<>:$schedule,
                        ArrayRefParameter<"int64_t">:$first_devices,
                        ArrayRefParameter<"int64_t">:$devices);
  let assemblyFormat = "`<` `microbatches` `=` $microbatches `,` `schedule` "
                       "`=` $schedule `,` `first_devices` `=` `[` "
                       "$first_devices `]` `,` `devices` `=` `[` $devices `]` "
                       "`>`";
  let genVerifyDecl = 1;
}

def PPC_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "approximation used by gelu", [
      I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"tanh", 1>]> {
  let cppNamespace = "::ppc::graph";
}

#endif // PPC_DIALECT_GRAPH_GRAPHATTRS_TD
