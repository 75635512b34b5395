//===- PlanEmitter.h - the plan emitter's state and sections -----*- C++
//-*-===//
//
// Private to PPCConversion. PlanEmitter lowers one partitioned function to a
// plan.plan (see PartitionToPlan.cpp for the scheme); its sections live in
// their own files: PlanEmitter.cpp (buffers, instructions, tensors and graph
// ops), PlanEmitterForward.cpp (operand exchanges, forward kernels,
// recomputation, ZeRO-3 gathers), PlanEmitterBackward.cpp (gradients, their
// synchronization, the update) and PlanEmitterPipeline.cpp (micro-batches and
// the pipeline schedule); PartitionToPlan.cpp puts them together.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_LIB_CONVERSION_PLANEMITTER_H
#define PPC_LIB_CONVERSION_PLANEMITTER_H

#include "PartitionedFunction.h"

#include "ppc/Conversion/Passes.h"
#include "ppc/Dialect/Graph/GraphOps.h"
#include "ppc/Dialect/Plan/PlanOps.h"
#include "ppc/Simulator/Pipeline.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

#include <functional>
#include <map>
#include <set>

namespace ppc {
namespace conversion {

using namespace mlir;
using namespace ppc::graph;
using geometry::Box;
using geometry::OpLayout;

/// Buffers are keyed by what they hold: a tensor's box (value or gradient)
/// on one rank.
struct BufferKey {
  int64_t rank;
  std::string tensor;
  std::vector<std::pair<int64_t, int64_t>> box;
  bool grad;
  bool operator<(const BufferKey &o) const {
    return std::tie(rank, tensor, box, grad) <
           std::tie(o.rank, o.tensor, o.box, o.grad);
  }
};

std::vector<std::pair<int64_t, int64_t>> boxKey(const Box &box);
std::vector<int64_t> shapeOf(Value value);
bool isFloat(Value value);

/// The partition whose piece `boxes[q]`, held on `devices[q]`, is exactly
/// `box` on `rank` (the first such), if any.
/// The dim along which `pieces` (in order) tile `whole` end to end, each
/// equal to it in every other dim (what one all_gather along it makes).
std::optional<unsigned> tilingAxis(const std::vector<Box> &pieces,
                                   const Box &whole);
std::optional<int64_t> partitionHolding(const std::vector<Box> &boxes,
                                        const std::vector<int64_t> &devices,
                                        int64_t rank, const Box &box);

/// Where a forward operand buffer came from, for the backward pass.
struct OperandSource {
  Value buffer;
  /// Producer pieces the buffer was assembled from: (partition, box); for a
  /// weight read away from its holder, partitions of the holding op.
  std::vector<std::pair<int64_t, Box>> pieces;
  /// The buffer is the producer partition's own result buffer.
  std::optional<int64_t> aliased;
  /// Regions copied from an earlier reader's buffer on this rank (one
  /// gathered copy per rank, shared): (that buffer, region). Their
  /// gradients go back through it.
  std::vector<std::pair<Value, Box>> shared;
};

/// A buffer an unreplicated reader gathered a value into on one rank.
struct GatheredBuffer {
  Value buffer;
  Box box;
};

class PlanEmitter {
public:
  PlanEmitter(func::FuncOp func, PartitionedFunction &parts,
              const PartitionToPlanOptions &options)
      : func(func), parts(parts), options(options), context(func.getContext()),
        builder(context) {}

  FailureOr<plan::PlanOp> emit(OpBuilder &top);

private:
  // Setup.
  LogicalResult emitTensors();
  LogicalResult emitGraphOps();
  plan::Init weightInit(WeightOp weight, double &bound);
  int64_t intMaxOf(Value value);
  // Buffers and instructions.
  OpBuilder &at(int64_t rank);
  /// A buffer of `box` of `tensor` on `rank`: its values, its gradient
  /// (`grad`), or a step-local copy of a weight's values (`staging`).
  Value alloc(int64_t rank, StringRef tensor, const Box &box, bool grad,
              bool staging = false);
  Value allocScratch(int64_t rank, const std::vector<int64_t> &shape);
  void transfer(int64_t fromRank, Value from, int64_t toRank, Value to,
                const Box &box, bool accumulate);
  /// Transfers emitted between this and flushReceipts() form one exchange
  /// (the gathers of an op's operands, or the routes of its operands'
  /// gradients): each send is emitted at once, the
  /// receiving side (recvs and local copies, in their order) after all the
  /// sends, so every rank sends its pieces before it waits for any and the
  /// members' messages move at the same time, as the simulator prices an
  /// exchange. Interleaved, a rank that receives before it sends holds its
  /// peers' receipts back by a whole message.
  void batchReceipts();
  void flushReceipts();
  /// Sums (max: takes the maximum of) `buffers` over `ranks` in place.
  void allReduce(const std::vector<int64_t> &ranks,
                 const std::vector<Value> &buffers, bool max = false);
  /// An all_gather or reduce_scatter along dim `axis` over `ranks`.
  void collective(plan::CollectiveKind kind, const std::vector<int64_t> &ranks,
                  const std::vector<Value> &buffers,
                  const std::vector<Value> &results, int64_t axis = 0);
  void phase(plan::Phase phase);
  DenseI64ArrayAttr loAttr(const Box &box);
  DenseI64ArrayAttr hiAttr(const Box &box);
  // Forward and backward.
  FailureOr<OperandSource> operandBuffer(int64_t k, unsigned i, int64_t p);
  /// When the parallel op in front of operand `i` of op `k` is an
  /// all-gather or an all-to-all (MaterializeResharding's `exchange`, the
  /// communication plan's kind) that one collective per group can move —
  /// each reader reading one piece from each member of its group; for an
  /// all-gather, the group on one node, its pieces tiling the box every
  /// member reads along one dim in rank order; for an all-to-all, every
  /// piece and every read box k equal parts, one per member; and none read
  /// from an earlier reader's copy — allocates every instance's operand
  /// buffer and queues the collectives for flushReceipts; returns the
  /// buffers by instance, or nothing (point-to-point, as gatherFrom).
  std::vector<Value> exchangeCollectively(int64_t k, unsigned i);
  /// Whether `ranks` lie in one node joined by one kind of link, so that
  /// an all-gather's ring crosses the links of the kind the simulator's
  /// pieces between them do (PlanTraffic counts it as the ring).
  bool ringCrossesPiecesLinks(const std::vector<int64_t> &ranks) const;
  /// The backward of such an exchange: when the gradients of each group go
  /// back exactly along its pieces (to each member the part of the
  /// reader's box its piece holds), one reduce_scatter (of an all-gather)
  /// or all_to_all per group, queued for flushReceipts, each member adding
  /// what it receives to its piece's gradient. Marks the instances whose
  /// routes it took in `done`. `value` is operand i of op k without its
  /// parallel ops, `producer` the op and result that compute it.
  void returnGradientsCollectively(
      int64_t k, unsigned i, Value value, std::pair<int64_t, unsigned> producer,
      const std::vector<std::vector<geometry::GradientRoute>> &routes,
      const std::vector<Value> &sendBack, std::vector<char> &done);
  /// Gradients that go back as an all-gather (geometry::classifyExchange
  /// of their routes): each consumer instance's whole gradient to every
  /// member's producer instance, the pieces tiling the box those compute
  /// along one dim in rank order, the group on one node (the backward of a
  /// reduce-scattered sum read in its pieces). One all_gather per group,
  /// queued for flushReceipts, each member adding the whole to its
  /// gradient. Marks the instances whose routes it took in `done`.
  void gatherGradientsCollectively(
      int64_t k, unsigned i, Value value, std::pair<int64_t, unsigned> producer,
      const std::vector<std::vector<geometry::GradientRoute>> &routes,
      const std::vector<Value> &sendBack, std::vector<char> &done);
  /// An exchange exchangeCollectively emitted, per member in group order:
  /// its rank, the producer instance it sends from and that piece's box,
  /// the box it reads and the buffer it reads it into.
  struct CollectiveExchange {
    plan::CollectiveKind kind = plan::CollectiveKind::all_gather;
    std::vector<int64_t> ranks, producers;
    std::vector<Box> pieces, wanted;
    std::vector<Value> results;
    unsigned axis = 0; ///< an all-gather's
  };
  /// By each member's operand buffer.
  DenseMap<Value, std::shared_ptr<CollectiveExchange>> collectiveExchanges;
  Value sourceBuffer(int64_t rank, Value value, const Box &box);
  LogicalResult emitForward(int64_t k);
  /// Decides which ops are recomputed; fails on one that cannot be.
  LogicalResult planRecomputation();
  /// ZeRO-3: the instances of op `k` that hold operand `i`'s weight piece
  /// in the same replica as instance `p`, in rank order, when that weight
  /// is kept in shards (stage 3, trainable, splitting evenly); else empty.
  std::vector<int64_t> zero3Group(int64_t k, unsigned i, int64_t p) const;
  /// ZeRO-3: all-gathers the shards of operand `i` of op `k` into a whole
  /// weight buffer per instance (gatheredWeights), each group once.
  void gatherWeightShards(int64_t k, unsigned i);
  /// ZeRO-3: allocates (and loads the shards of), ahead of op `k`'s forward
  /// or backward, the whole weight buffers its gathers will fill
  /// (prefetchedWeights), so that with --overlap the gather starts while
  /// the op before runs (FSDP's prefetch, one op ahead).
  void prefetchWeightShards(int64_t k);
  /// Frees what was prefetched and not gathered (end of a task).
  void dropPrefetchedWeights();
  /// Frees what gatherWeightShards gathered for op `k`.
  void freeGatheredWeights(int64_t k);
  /// Runs op `x`'s forward again into new result buffers (and its partial
  /// sums), after the recomputed ops it reads; once per step.
  void emitRecompute(int64_t x);
  /// The buffer holding `buffer`'s values now (recomputed or itself).
  Value current(Value buffer) const {
    Value now = recomputedBuffer.lookup(buffer);
    return now ? now : buffer;
  }
  void emitPartialSums(int64_t k);
  /// Reduces scratch buffers (one per partition) over op `k`'s statistics
  /// groups, by max or by sum.
  void syncStatistics(int64_t k, const std::vector<Value> &buffers, bool max);
  /// Allocates the scratch of op `k`'s staged kernel for its forward or
  /// backward pass, per partition (none for other kernels).
  std::vector<SmallVector<Value, 2>> allocStageScratch(int64_t k,
                                                       bool backward);
  /// Runs every stage of op `k`'s forward or backward pass through
  /// `emitStage` (one for a kernel that is not staged), reducing each of
  /// the pass's scratch `buffers` after its stage.
  void runStages(int64_t k, bool backward,
                 const std::vector<SmallVector<Value, 2>> &buffers,
                 llvm::function_ref<void(int64_t)> emitStage);
  /// The forward kernels of op `k`'s partitions on `ins` and `outs`, every
  /// stage of a staged kernel, into new scratch (scratch[k]).
  void emitForwardKernels(int64_t k, ArrayRef<SmallVector<Value>> ins,
                          ArrayRef<SmallVector<Value>> outs);
  /// Op `k`'s forward as rings (OpConfig::ring, RingSpec): every member
  /// runs the ring's stages on the block of the streamed operands it holds
  /// while it sends that block to the next member, n steps, into new
  /// scratch (scratch[k]).
  void emitRingForward(int64_t k, ArrayRef<SmallVector<Value>> ins,
                       ArrayRef<SmallVector<Value>> outs);
  /// Its backward: the prepare stage, then per step the block stage on the
  /// block each member holds, adding to gradients of that block that go
  /// round the ring with it and reach its first holder's `inGrads` after n
  /// steps. `passed`: each instance's scratch, the forward's then the
  /// backward's.
  void emitRingBackward(int64_t k, DenseBoolArrayAttr mask,
                        ArrayRef<SmallVector<Value>> ins,
                        ArrayRef<SmallVector<Value>> outs,
                        ArrayRef<SmallVector<Value>> outGrads,
                        ArrayRef<SmallVector<Value>> inGrads,
                        ArrayRef<SmallVector<Value, 2>> passed);
  /// Block `block` of streamed operand `i` of a ring of op `k`, as instance
  /// `p` reads it.
  Box ringBlockBox(int64_t k, unsigned i, int64_t p, int64_t block) const;
  /// A buffer of that box on `p`'s rank (its value, or with `grad` its
  /// gradient).
  Value ringBlockBuffer(int64_t k, unsigned i, int64_t p, int64_t block,
                        bool grad);
  /// Step `s` of a ring of op `k` (`members` in ring order): each member
  /// sends the block of the streamed operands it holds (`now`) to the next
  /// one, into buffers that one allocates (`next`: its operands `ins`, the
  /// streamed ones replaced); nothing at the last step. Within an exchange
  /// (batchReceipts): the receipts wait for flushReceipts.
  void passRingBlocks(int64_t k, const std::vector<int64_t> &members, int64_t s,
                      ArrayRef<SmallVector<Value>> ins,
                      ArrayRef<SmallVector<Value>> now,
                      std::vector<SmallVector<Value>> &next);
  Value gradBuffer(int64_t k, unsigned r, int64_t p);
  /// The use holding the weight that operand `i` of op `k` reads, if any.
  std::optional<sim::WeightUse> weightHolderOf(int64_t k, unsigned i) const;
  /// Whether `holder` keeps exactly `box` of its weight on `rank`.
  bool holdsPiece(const sim::WeightUse &holder, int64_t rank,
                  const Box &box) const;
  /// The persistent gradient of a weight piece the holder keeps on `rank`
  /// in its replica `replica` (replicas synchronize separately).
  Value weightGradBuffer(int64_t rank, Value weight, const Box &box,
                         int64_t replica, int64_t holderOp);
  /// Link bandwidth between two devices, for choosing among replicas as
  /// the simulator does (equal without a machine).
  double bandwidth(int64_t from, int64_t to) const;
  LogicalResult emitBackward(int64_t k);
  LogicalResult emitGradSyncAndUpdate();
  /// Moves the allocation of a ZeRO gradient shard to right after that of
  /// the gradient it is reduce-scattered from, so that the reduce-scatter
  /// waits only for the gradient's last kernel and --overlap starts it
  /// during the backward, where the simulator overlaps it.
  void allocBeside(Value shard, Value grad);
  LogicalResult emitOutputs();
  /// Op `k`'s staged kernel when it runs staged in this plan (batch norm
  /// only in training; a ring always), else null.
  const StagedKernel *stagedKernel(int64_t k) const;
  /// The partition of op `k` whose result `r` on `rank` is exactly `box`.
  std::optional<int64_t> pieceHeldAs(int64_t k, unsigned r, int64_t rank,
                                     const Box &box) const;
  /// Fills `buffer` (box `box` on `rank`) from pieces held by partitions:
  /// `boxes[q]` on `devices[q]` in buffer `source(q)`. One transfer per
  /// distinct piece that overlaps it, from a replica on `rank` if there is
  /// one, else the first. Returns (partition, box) of every transfer, for
  /// the gradients to go back the same way.
  /// With `earlier`, a region that no piece on `rank` holds but an earlier
  /// reader's buffer there does is copied from it instead, and listed in
  /// `shared`.
  std::vector<std::pair<int64_t, Box>>
  gatherFrom(const std::vector<Box> &boxes, const std::vector<int64_t> &devices,
             function_ref<Value(int64_t)> source, int64_t rank, Value buffer,
             const Box &box,
             const std::vector<GatheredBuffer> *earlier = nullptr,
             std::vector<std::pair<Value, Box>> *shared = nullptr,
             bool accumulate = false);
  /// The gradient buffer of a gathered operand buffer on `rank`, shared by
  /// its owner and the later readers that copied from it (zero at first
  /// use).
  Value gradOfGathered(int64_t rank, Value buffer, Value value);
  /// gatherFrom the pieces of result `r` of op `k`.
  std::vector<std::pair<int64_t, Box>> gatherPieces(int64_t k, unsigned r,
                                                    int64_t rank, Value buffer,
                                                    const Box &box);

  func::FuncOp func;
  PartitionedFunction &parts;
  const PartitionToPlanOptions &options;
  MLIRContext *context;
  OpBuilder builder;
  Location loc = UnknownLoc::get(context);
  bool training = false;
  std::optional<std::pair<int64_t, unsigned>> loss;

  plan::PlanOp planOp;
  std::vector<plan::ProgramOp> programs;
  std::vector<OpBuilder> builders;
  int64_t nextTag = 0;
  /// The receiving side of the exchange being emitted (batchReceipts).
  bool batchingReceipts = false;
  std::vector<std::function<void()>> pendingReceipts;
  /// Collectives of the exchange, emitted after its sends (which do not
  /// block, so every member reaches them) and before its receipts, which
  /// may copy what a collective brought (another operand reading the same
  /// value shares its buffer).
  std::vector<std::function<void()>> pendingCollectives;
  /// The current op's operands that exchangeCollectively moves: by operand,
  /// each instance's buffer.
  std::map<unsigned, std::vector<Value>> collectiveOperands;

  DenseMap<Value, std::string> tensorOf; // stripped value -> tensor symbol
  std::vector<std::string> opSymbols;
  std::map<BufferKey, Value> persistent; // weights, inputs, constants
  std::set<std::string> trainable;
  // [op][result][partition] result buffers and their gradients, and what
  // readers fetch from (OpLayout::heldBoxes: the reduce-scattered piece of
  // a partial sum, else the result buffer).
  std::vector<std::vector<std::vector<Value>>> results, resultGrads, held;
  // [op][operand][partition]
  std::vector<std::vector<std::vector<OperandSource>>> operands;
  // [op][partition] forward scratch of staged kernels.
  std::vector<std::vector<SmallVector<Value, 2>>> scratch;
  // Weight gradients by (rank, tensor, box), and the holder replica each
  // belongs to.
  std::map<BufferKey, Value> weightGrads;
  std::map<BufferKey, int64_t> weightGradReplica;
  std::map<BufferKey, StateSharding> weightGradStage;
  std::map<BufferKey, int64_t> weightGradHolder;
  std::vector<sim::WeightUse> weightHolders; // by sim::Graph weight index
  /// A step-local buffer, freed at the end of the step or, in a pipeline,
  /// after the backward of its micro-batch on its stage (transientOf).
  struct Transient {
    int64_t rank;
    Value buffer;
  };
  std::vector<Transient> transient;
  /// Keeps `buffer` until the end of the step or of its micro-batch's
  /// backward on the stage of op `owner` (default: the op being emitted).
  void keepForStep(int64_t rank, Value buffer, int64_t owner = -1) {
    if (owner < 0)
      owner = emittingOp;
    int64_t stage = owner >= 0 ? parts.strategy[owner].stage : 0;
    if (taskMicroBatch >= 0)
      transientOf[{taskMicroBatch, stage}].push_back(transient.size());
    transient.push_back({rank, buffer});
  }
  /// The op whose forward, backward or recomputation is being emitted.
  int64_t emittingOp = -1;
  // What unreplicated readers gathered, by (rank, value); the box of every
  // gathered operand buffer and its gradient buffer.
  std::map<std::pair<int64_t, void *>, std::vector<GatheredBuffer>> gathered;
  DenseMap<Value, Box> gatheredBoxes;
  DenseMap<Value, Value> gatheredGrads;
  // Activation recomputation (OpConfig::recompute): which ops drop their
  // results, the op after whose forward they go (the latest reader) and
  // before whose backward they come back, the ops read by each op, and the
  // recomputed buffer that replaces a dropped one.
  std::vector<char> recomputed, recomputedNow;
  std::vector<int64_t> lastReader;
  std::vector<std::vector<int64_t>> producersOf;
  DenseMap<Value, Value> recomputedBuffer;
  DenseSet<Value> freedEarly;
  // ZeRO-3: the whole weight gathered for each holder instance, by
  // (op, operand, instance), while an op's kernels need it.
  std::map<std::tuple<int64_t, unsigned, int64_t>, Value> gatheredWeights;
  /// Allocated by prefetchWeightShards, not gathered yet.
  std::map<std::tuple<int64_t, unsigned, int64_t>, Value> prefetchedWeights;

  // Pipelines. Each micro-batch has its own layouts and buffers: the
  // members above from parts.layouts to recomputedNow hold the current
  // micro-batch's, the others wait in microBatches (enterMicroBatch swaps).
  // A step without a pipeline is one stage of one micro-batch.
  struct MicroBatchState {
    std::vector<OpLayout> layouts;
    std::vector<std::vector<std::vector<Value>>> results, resultGrads, held;
    std::vector<std::vector<std::vector<OperandSource>>> operands;
    std::vector<std::vector<SmallVector<Value, 2>>> scratch;
    std::map<std::pair<int64_t, void *>, std::vector<GatheredBuffer>> gathered;
    std::vector<char> recomputedNow;
  };
  void swapState(MicroBatchState &state);
  void enterMicroBatch(int64_t j);
  /// Emits the step's forwards and backwards in the pipeline schedule's
  /// order (pipelineOrder per device group, merged into one global order
  /// that respects their dependencies).
  LogicalResult emitSchedule();
  /// Emits one task of a stage's schedule and moves what it emits on the
  /// ranks of earlier stages to where their own schedule needs it.
  LogicalResult emitTask(PipelineTask task);
  LogicalResult emitForwardTask(int64_t stage, int64_t j);
  LogicalResult emitBackwardTask(int64_t stage, int64_t j);
  /// The returned values gathered on rank 0, summed over micro-batches.
  void allocPipelinedOutputs();
  void gatherPipelinedOutputs(int64_t k);
  void emitPipelinedOutputs();
  sim::Pipeline pipeline;
  std::vector<std::vector<int64_t>> stageOps;
  std::vector<MicroBatchState> microBatches;
  int64_t currentMicroBatch = 0;
  int64_t taskMicroBatch = -1;
  /// Per (rank, micro-batch): the last op of the rank's forward of it, and
  /// the ops later stages' backwards emitted for its backward of it.
  std::map<std::pair<int64_t, int64_t>, Operation *> forwardEnd;
  std::map<std::pair<int64_t, int64_t>, std::vector<Operation *>> backwardQueue;
  /// Per rank, its device group: the first stage on its submesh (its other
  /// stages, if interleaved, follow every numGroups); -1 off the pipeline.
  std::vector<int64_t> groupOfRank;
  /// Per (micro-batch, stage), the indices in `transient` of the buffers
  /// the stage's backward of that micro-batch is the last to need.
  std::map<std::pair<int64_t, int64_t>, std::vector<size_t>> transientOf;
  /// Ranks phase markers go to (the current stage's); empty: all.
  std::vector<int64_t> phaseRanks;
  /// Per returned value, the rank and buffer collecting it (pipelines).
  std::vector<std::pair<int64_t, Value>> outputBuffers;
};

} // namespace conversion
} // namespace ppc

#endif // PPC_LIB_CONVERSION_PLANEMITTER_H
