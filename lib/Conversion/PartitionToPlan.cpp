//===- PartitionToPlan.cpp - per-rank programs of a partitioned graph -----===//
//
// Lowers a function of graph ops with their strategies (and the parallel ops
// of --ppc-materialize-resharding) to a plan.plan: the global tensors and
// ops, and one program per rank. Every partition of every op becomes a kernel
// on buffers holding exactly the boxes its iteration ranges touch; the
// parallel ops become copies, send/recv pairs and all-reduces; the backward
// pass sends each gradient along geometry::gradientRoutes (to every copy of
// an activation, to one instance of each group synchronizing a weight, from
// one replica of each consumer partition) or sums it with the all-reduce of
// geometry::allReducedGradientGroups, accumulating at the producer; the
// instances holding a weight piece in one replica all-reduce its gradient;
// each rank updates the weight pieces it holds. Replicas of an op
// (OpConfig::replicas) run the same kernels on their own buffers. A weight used
// by several ops lives in the layout of its holding use (sim::weightHolders);
// the other uses gather their pieces from it and send their gradients back.
//
// Instructions are emitted in one global order and each rank's program is
// its subsequence, so with non-blocking sends the programs cannot deadlock:
// every recv and collective waits only for instructions earlier in that order.
//
//===----------------------------------------------------------------------===//

#include "PartitionedFunction.h"
#include "PlanTraffic.h"

#include "ppc/Conversion/Passes.h"
#include "ppc/Dialect/Graph/GraphDialect.h"
#include "ppc/Dialect/Graph/GraphOps.h"
#include "ppc/Dialect/Plan/PlanOps.h"
#include "ppc/Runtime/PlanIO.h"
#include "ppc/Search/StrategyJson.h"
#include "ppc/Simulator/Pipeline.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

#include <cmath>
#include <functional>
#include <map>
#include <set>

using namespace mlir;
using namespace ppc::graph;

namespace ppc {
#define GEN_PASS_DEF_PARTITIONTOPLAN
#include "ppc/Conversion/Passes.h.inc"

namespace {

using conversion::PartitionedFunction;
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

std::vector<std::pair<int64_t, int64_t>> boxKey(const Box &box) {
  std::vector<std::pair<int64_t, int64_t>> key;
  for (const Range &r : box)
    key.emplace_back(r.lo, r.hi);
  return key;
}

std::vector<int64_t> shapeOf(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  return {type.getShape().begin(), type.getShape().end()};
}

bool isFloat(Value value) {
  return isa<FloatType>(getElementTypeOrSelf(value.getType()));
}

/// The partition whose piece `boxes[q]`, held on `devices[q]`, is exactly
/// `box` on `rank` (the first such), if any.
std::optional<int64_t> partitionHolding(const std::vector<Box> &boxes,
                                        const std::vector<int64_t> &devices,
                                        int64_t rank, const Box &box) {
  for (size_t q = 0; q < boxes.size(); ++q)
    if (devices[q] == rank && boxes[q] == box)
      return static_cast<int64_t>(q);
  return std::nullopt;
}

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
  LogicalResult emitOutputs();
  /// Op `k`'s staged kernel when it runs staged in this plan (batch norm
  /// only in training), else null.
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

OpBuilder &PlanEmitter::at(int64_t rank) { return builders[rank]; }

DenseI64ArrayAttr PlanEmitter::loAttr(const Box &box) {
  SmallVector<int64_t> lo;
  for (const Range &r : box)
    lo.push_back(r.lo);
  return DenseI64ArrayAttr::get(context, lo);
}

DenseI64ArrayAttr PlanEmitter::hiAttr(const Box &box) {
  SmallVector<int64_t> hi;
  for (const Range &r : box)
    hi.push_back(std::max(r.lo, r.hi));
  return DenseI64ArrayAttr::get(context, hi);
}

Value PlanEmitter::alloc(int64_t rank, StringRef tensor, const Box &box,
                         bool grad, bool staging) {
  Value buffer = plan::AllocOp::create(
      at(rank), loc, plan::BufferType::get(context),
      FlatSymbolRefAttr::get(context, tensor), loAttr(box), hiAttr(box),
      grad ? UnitAttr::get(context) : UnitAttr(),
      staging ? UnitAttr::get(context) : UnitAttr(), UnitAttr(), Value());
  return buffer;
}

Value PlanEmitter::allocScratch(int64_t rank,
                                const std::vector<int64_t> &shape) {
  Box box;
  for (int64_t size : shape)
    box.push_back({0, size});
  Value buffer = plan::AllocOp::create(
      at(rank), loc, plan::BufferType::get(context), FlatSymbolRefAttr(),
      loAttr(box), hiAttr(box), UnitAttr(), UnitAttr(), UnitAttr(), Value());
  keepForStep(rank, buffer);
  return buffer;
}

void PlanEmitter::transfer(int64_t fromRank, Value from, int64_t toRank,
                           Value to, const Box &box, bool accumulate) {
  UnitAttr acc = accumulate ? UnitAttr::get(context) : UnitAttr();
  int64_t tag = -1; // a local copy
  if (fromRank != toRank) {
    // MPI guarantees tags up to 32767; reusing one is safe because messages
    // between a pair of ranks are matched in order (receipts keep the
    // order of their sends).
    tag = nextTag++ % 32768;
    plan::SendOp::create(at(fromRank), loc, from, loAttr(box), hiAttr(box),
                         builder.getI64IntegerAttr(toRank),
                         builder.getI64IntegerAttr(tag));
  }
  auto receive = [this, acc, here = loc, fromRank, from, toRank, to, box,
                  tag]() {
    if (tag < 0)
      plan::CopyOp::create(at(toRank), here, from, to, loAttr(box), hiAttr(box),
                           acc);
    else
      plan::RecvOp::create(at(toRank), here, to, loAttr(box), hiAttr(box),
                           builder.getI64IntegerAttr(fromRank),
                           builder.getI64IntegerAttr(tag), acc);
  };
  if (batchingReceipts)
    pendingReceipts.push_back(std::move(receive));
  else
    receive();
}

void PlanEmitter::batchReceipts() {
  assert(!batchingReceipts && "exchanges do not nest");
  batchingReceipts = true;
}

void PlanEmitter::flushReceipts() {
  batchingReceipts = false;
  for (std::function<void()> &receive : pendingReceipts)
    receive();
  pendingReceipts.clear();
}

void PlanEmitter::allReduce(const std::vector<int64_t> &ranks,
                            const std::vector<Value> &buffers, bool max) {
  if (ranks.size() < 2)
    return;
  auto group = DenseI64ArrayAttr::get(context, ranks);
  for (auto [rank, buffer] : llvm::zip(ranks, buffers))
    plan::CollectiveOp::create(
        at(rank), loc,
        plan::CollectiveKindAttr::get(context,
                                      plan::CollectiveKind::all_reduce),
        group, buffer, Value(), builder.getStringAttr(max ? "max" : "sum"),
        builder.getI64IntegerAttr(0), builder.getI64IntegerAttr(0));
}

void PlanEmitter::phase(plan::Phase value) {
  auto attr = plan::PhaseAttr::get(context, value);
  if (phaseRanks.empty())
    for (OpBuilder &b : builders)
      plan::PhaseOp::create(b, loc, attr);
  for (int64_t rank : phaseRanks)
    plan::PhaseOp::create(at(rank), loc, attr);
}

//===----------------------------------------------------------------------===//
// Tensors and graph ops
//===----------------------------------------------------------------------===//

plan::Init PlanEmitter::weightInit(WeightOp weight, double &bound) {
  bound = 0;
  if (weight.getValue())
    return plan::Init::data;
  // What the ops reading it say (a normalization's scale and shift), else
  // every vector (biases) at zero and the rest uniform over their fan-in.
  std::vector<int64_t> shape = shapeOf(weight.getResult());
  std::optional<std::vector<int64_t>> fanInDims;
  for (OpOperand &use : weight.getResult().getUses()) {
    auto reader = dyn_cast<ParallelizableOpInterface>(use.getOwner());
    if (!reader)
      continue;
    std::optional<OperandInit> init =
        reader.getOperandInit(use.getOperandNumber());
    if (!init)
      continue;
    if (init->kind == OperandInit::Kind::Ones)
      return plan::Init::ones;
    if (init->kind == OperandInit::Kind::Zeros)
      return plan::Init::zeros;
    if (!init->fanInDims.empty())
      fanInDims = init->fanInDims;
  }
  if (shape.size() < 2)
    return plan::Init::zeros;
  int64_t fanIn = 1;
  if (fanInDims) {
    for (int64_t d : *fanInDims)
      fanIn *= shape[d];
  } else {
    for (size_t d = 1; d < shape.size(); ++d)
      fanIn *= shape[d];
  }
  bound = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(1, fanIn)));
  return plan::Init::uniform;
}

/// Synthetic integer inputs must be valid class labels or indices: follow
/// the value through ops that forward values to an op that bounds them.
int64_t PlanEmitter::intMaxOf(Value value) {
  SmallVector<Value> work{value};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      auto reader = dyn_cast<ParallelizableOpInterface>(user);
      if (reader)
        if (std::optional<int64_t> bound =
                reader.getIndexBound(use.getOperandNumber()))
          return *bound;
      if (isParallelOp(user) || (reader && reader.forwardsValues()))
        for (Value result : user->getResults())
          work.push_back(result);
    }
  }
  return 2;
}

LogicalResult PlanEmitter::emitTensors() {
  OpBuilder &b = builder;
  int64_t count = 0;
  auto symbol = [&](StringRef prefix) {
    return (prefix + Twine(count++)).str();
  };
  auto create = [&](Value value, plan::Role role, StringRef name,
                    plan::Init init, double bound, ElementsAttr data,
                    int64_t intMax, StringRef prefix) {
    std::string sym = symbol(prefix);
    std::vector<int64_t> shape = shapeOf(value);
    auto op = plan::TensorOp::create(
        b, loc, StringAttr::get(context, sym),
        plan::RoleAttr::get(context, role),
        DenseI64ArrayAttr::get(context, shape),
        TypeAttr::get(getElementTypeOrSelf(value.getType())),
        plan::InitAttr::get(context, init), b.getF64FloatAttr(bound), data,
        b.getI64IntegerAttr(intMax), UnitAttr(),
        name.empty() ? StringAttr() : b.getStringAttr(name));
    (void)op;
    tensorOf[value] = sym;
    return sym;
  };

  for (BlockArgument arg : func.getArguments()) {
    std::string name = ("arg" + Twine(arg.getArgNumber())).str();
    if (auto attr =
            func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "ppc.name"))
      name = attr.getValue().str();
    bool integer = !isFloat(arg);
    create(arg, plan::Role::input, name, plan::Init::none, 0, {},
           integer ? intMaxOf(arg) : 0, "in");
  }
  for (Operation &op : func.getBody().front()) {
    if (auto weight = dyn_cast<WeightOp>(op)) {
      double bound = 0;
      plan::Init init = weightInit(weight, bound);
      std::string sym = create(
          weight.getResult(),
          weight.getFrozen() ? plan::Role::frozen : plan::Role::weight,
          weight.getName(), init, bound,
          weight.getValue() ? *weight.getValue() : ElementsAttr(), 0, "w");
      if (!weight.getFrozen())
        trainable.insert(sym);
      continue;
    }
    if (auto constant = dyn_cast<graph::ConstantOp>(op)) {
      create(constant.getResult(), plan::Role::constant, "", plan::Init::data,
             0, constant.getValue(), 0, "c");
      continue;
    }
    auto it = parts.indexOf.find(&op);
    if (it == parts.indexOf.end())
      continue;
    for (OpResult result : op.getResults())
      create(result, plan::Role::activation, parts.graph.ops[it->second].name,
             plan::Init::none, 0, {}, 0, "t");
  }
  // Returned values are the plan's outputs.
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (Value value : ret.getOperands()) {
    Value stripped = stripParallelOps(value);
    auto it = tensorOf.find(stripped);
    if (it == tensorOf.end() || !parts.producerOf(stripped))
      return ret.emitError("the plan can only return results of graph ops");
    auto tensor = planOp.lookupSymbol<plan::TensorOp>(it->second);
    tensor.setIsOutput(true);
  }
  return success();
}

LogicalResult PlanEmitter::emitGraphOps() {
  for (auto [k, op] : llvm::enumerate(parts.ops)) {
    SmallVector<Attribute> operandSyms, resultSyms;
    SmallVector<bool> needsGrad;
    for (Value operand : op->getOperands()) {
      Value stripped = stripParallelOps(operand);
      auto it = tensorOf.find(stripped);
      if (it == tensorOf.end())
        return op->emitError("cannot lower an operand that is not a function "
                             "argument, weight, constant or graph op result");
      operandSyms.push_back(FlatSymbolRefAttr::get(context, it->second));
      bool grad =
          isFloat(stripped) && (parts.producerOf(stripped).has_value() ||
                                trainable.count(it->second));
      needsGrad.push_back(training && grad);
    }
    for (Value result : op->getResults())
      resultSyms.push_back(FlatSymbolRefAttr::get(context, tensorOf[result]));
    // The kernels read the inherent attributes by their ODS names.
    NamedAttrList attrs;
    for (NamedAttribute attr : op->getAttrDictionary())
      if (!attr.getName().getValue().starts_with("ppc."))
        attrs.push_back(attr);
    if (auto compute = dyn_cast<ParallelizableOpInterface>(op))
      compute.addKernelAttributes(attrs);
    std::string sym = ("op" + Twine(k)).str();
    opSymbols.push_back(sym);
    plan::GraphOp::create(
        builder, loc, StringAttr::get(context, sym),
        StringAttr::get(context, op->getName().getStringRef()),
        ArrayAttr::get(context, operandSyms),
        ArrayAttr::get(context, resultSyms), attrs.getDictionary(context),
        DenseBoolArrayAttr::get(context, needsGrad),
        StringAttr::get(context, parts.graph.ops[k].name),
        parts.graph.ops[k].space.flatView ? UnitAttr::get(context)
                                          : UnitAttr());
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

const StagedKernel *PlanEmitter::stagedKernel(int64_t k) const {
  const std::optional<StagedKernel> &staged = parts.graph.ops[k].space.staged;
  if (!staged || (staged->trainingOnly && !training))
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
      Value whole = alloc(rank, tensorOf[weight], box, false,
                          /*staging=*/true);
      wholes.push_back(whole);
      gatheredWeights[{k, i, q}] = whole;
    }
    collective(plan::CollectiveKind::all_gather, ranks, shards, wholes);
  }
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
  std::set<std::vector<std::pair<int64_t, int64_t>>> seen;
  for (size_t q = 0; q < boxes.size(); ++q) {
    if (!seen.insert(boxKey(boxes[q])).second)
      continue;
    std::optional<Box> common = geometry::intersect(boxes[q], box);
    if (!common)
      continue;
    std::optional<int64_t> local =
        partitionHolding(boxes, devices, rank, boxes[q]);
    if (!local && earlier) {
      auto from = llvm::find_if(*earlier, [&](const GatheredBuffer &g) {
        return geometry::contains(g.box, *common);
      });
      if (from != earlier->end()) {
        transfer(rank, from->buffer, rank, buffer, *common,
                 /*accumulate=*/false);
        shared->emplace_back(from->buffer, *common);
        continue;
      }
    }
    int64_t replica = local.value_or(q);
    transfer(devices[replica], source(replica), rank, buffer, *common,
             accumulate);
    pieces.emplace_back(replica, *common);
  }
  return pieces;
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

void PlanEmitter::emitForwardKernels(int64_t k,
                                     ArrayRef<SmallVector<Value>> ins,
                                     ArrayRef<SmallVector<Value>> outs) {
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
    std::string problem = sim::recomputeProblem(parts.graph, x);
    if (!problem.empty())
      return parts.ops[x]->emitError() << "cannot recompute: " << problem;
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

//===----------------------------------------------------------------------===//
// Backward, gradient synchronization, update
//===----------------------------------------------------------------------===//

Value PlanEmitter::gradBuffer(int64_t k, unsigned r, int64_t p) {
  Value &buffer = resultGrads[k][r][p];
  if (!buffer) {
    const OpLayout &layout = parts.layouts[k];
    int64_t rank = layout.devices[p];
    buffer = alloc(rank, tensorOf[parts.ops[k]->getResult(r)],
                   layout.resultBoxes[r][p], true);
    keepForStep(rank, buffer, k);
    // The loss is the one value whose gradient is seeded: 1 on every copy
    // (the loss is the sum of a partial-sum group's members, each of which
    // has derivative 1).
    bool seed = loss && loss->first == k && loss->second == r;
    plan::FillOp::create(at(rank), loc, buffer,
                         builder.getF32FloatAttr(seed ? 1.0f : 0.0f));
  }
  return buffer;
}

LogicalResult PlanEmitter::emitBackward(int64_t k) {
  emittingOp = k;
  Operation *op = parts.ops[k];
  const OpLayout &layout = parts.layouts[k];
  int64_t numParts = layout.numInstances();
  auto graphOp = planOp.lookupSymbol<plan::GraphOp>(opSymbols[k]);
  ArrayRef<bool> needsGrad = graphOp.getNeedsGrad();
  if (llvm::none_of(needsGrad, [](bool b) { return b; }))
    return success();
  bool isLoss = loss && loss->first == k;
  bool anyGrad = isLoss;
  for (auto &perResult : resultGrads[k])
    for (Value v : perResult)
      anyGrad |= static_cast<bool>(v);
  if (!anyGrad)
    return success(); // nothing downstream depends on it

  // Where each operand's gradient goes (geometry::gradientRoutes: every
  // copy of an activation, one instance of each synchronizing group of a
  // weight, sent by one replica of each partition) and which pieces an
  // all-reduce sums instead; the simulator prices exactly these.
  unsigned numOperands = op->getNumOperands();
  std::vector<std::vector<std::vector<geometry::GradientRoute>>> routes(
      numOperands, std::vector<std::vector<geometry::GradientRoute>>(numParts));
  std::vector<std::vector<std::vector<int64_t>>> reduced(numOperands);
  auto bw = [&](int64_t from, int64_t to) { return bandwidth(from, to); };
  for (unsigned i = 0; i < numOperands; ++i) {
    if (!needsGrad[i])
      continue;
    std::optional<sim::WeightUse> holder = weightHolderOf(k, i);
    const OpLayout *from = nullptr;
    const std::vector<Box> *held = nullptr;
    if (holder) {
      if (holder->op == k && holder->operand == static_cast<int32_t>(i))
        continue; // the holder's own gradient: no route
      from = &parts.layouts[holder->op];
      held = &from->operandBoxes[holder->operand];
    } else if (auto producer = parts.producerOf(op->getOperand(i))) {
      from = &parts.layouts[producer->first];
      held = &from->resultBoxes[producer->second];
      reduced[i] = geometry::allReducedGradientGroups(
          *held, from->devices, layout.operandBoxes[i], layout.devices,
          layout.partition);
    } else {
      continue;
    }
    std::vector<char> skip(held->size(), 0);
    for (const std::vector<int64_t> &group : reduced[i])
      for (int64_t q : group)
        skip[q] = 1;
    for (geometry::GradientRoute &route : geometry::gradientRoutes(
             *held, from->devices, from->replica, layout.operandBoxes[i],
             layout.devices, layout.numReplicas, skip,
             /*everyMember=*/!holder, bw))
      routes[i][route.consumer].push_back(std::move(route));
  }
  // The consumer instance on `rank` taking part in a reduced group.
  auto inReducedGroup = [&](unsigned i, int64_t p) {
    for (const std::vector<int64_t> &group : reduced[i])
      for (int64_t q : group)
        if (parts.layouts[parts.producerOf(op->getOperand(i))->first]
                .devices[q] == layout.devices[p])
          return true;
    return false;
  };

  std::vector<SmallVector<Value>> outGrads(numParts), inGrads(numParts);
  std::vector<SmallVector<Value>> ins(numParts), outs(numParts);
  // Gradients of operands that are sent along their routes afterwards.
  std::vector<std::vector<Value>> sendBack(numParts);
  for (int64_t p = 0; p < numParts; ++p) {
    int64_t rank = layout.devices[p];
    sendBack[p].assign(numOperands, Value());
    for (unsigned r = 0; r < op->getNumResults(); ++r) {
      outGrads[p].push_back(gradBuffer(k, r, p));
      // Reduce-scattered sums were not kept (checkConfig: all results of
      // such an op are): its backward gets no outputs.
      if (!layout.scattered[r])
        outs[p].push_back(results[k][r][p]);
    }
    for (unsigned i = 0; i < numOperands; ++i) {
      const OperandSource &source = operands[k][i][p];
      if (!zero3Group(k, i, p).empty()) {
        // ZeRO-3: the whole weight is gathered again for the backward.
        gatherWeightShards(k, i);
        ins[p].push_back(gatheredWeights.at({k, i, p}));
      } else {
        ins[p].push_back(current(source.buffer));
      }
      if (!needsGrad[i])
        continue;
      Value stripped = stripParallelOps(op->getOperand(i));
      const Box &box = layout.operandBoxes[i][p];
      std::optional<sim::WeightUse> holder = weightHolderOf(k, i);
      if (holder && holder->op == k &&
          holder->operand == static_cast<int32_t>(i)) {
        // The holder's own piece: its gradient lives across steps.
        inGrads[p].push_back(
            weightGradBuffer(rank, stripped, box, layout.replica[p], k));
        continue;
      }
      // Accumulate straight into the one piece this gradient goes to when
      // it is on this device and is exactly this box.
      const std::vector<geometry::GradientRoute> &mine = routes[i][p];
      bool single = mine.size() == 1 && mine.front().box == box &&
                    !(holder ? false : inReducedGroup(i, p));
      if (single && holder && source.pieces.empty()) {
        const OpLayout &from = parts.layouts[holder->op];
        int64_t q = mine.front().producer;
        if (from.devices[q] == rank) {
          inGrads[p].push_back(weightGradBuffer(rank, stripped, box,
                                                from.replica[q], holder->op));
          continue;
        }
      }
      if (single && !holder && source.aliased &&
          *source.aliased == mine.front().producer) {
        auto producer = parts.producerOf(stripped);
        inGrads[p].push_back(
            gradBuffer(producer->first, producer->second, *source.aliased));
        continue;
      }
      // Later readers that copied from a gathered buffer added their
      // gradients to its gradient buffer already.
      Value grad;
      if (gatheredBoxes.count(source.buffer)) {
        grad = gradOfGathered(rank, source.buffer, stripped);
      } else {
        grad = alloc(rank, tensorOf[stripped], box, true);
        keepForStep(rank, grad);
        plan::FillOp::create(at(rank), loc, grad,
                             builder.getF32FloatAttr(0.0f));
      }
      inGrads[p].push_back(grad);
      sendBack[p][i] = grad;
    }
  }

  auto opSym = FlatSymbolRefAttr::get(context, opSymbols[k]);
  auto mask = DenseBoolArrayAttr::get(context, needsGrad);
  // The forward's scratch first, then the backward's own.
  std::vector<SmallVector<Value, 2>> backwardScratch =
      allocStageScratch(k, /*backward=*/true);
  std::vector<SmallVector<Value, 2>> passed = scratch[k];
  passed.resize(numParts);
  for (int64_t p = 0; p < numParts; ++p)
    passed[p].append(backwardScratch[p].begin(), backwardScratch[p].end());
  runStages(k, /*backward=*/true, backwardScratch, [&](int64_t stage) {
    for (int64_t p = 0; p < numParts; ++p)
      plan::KernelBackwardOp::create(at(layout.devices[p]), loc, opSym,
                                     builder.getI64IntegerAttr(stage), mask,
                                     ins[p], outs[p], outGrads[p], inGrads[p],
                                     passed[p], DenseBoolArrayAttr());
  });

  freeGatheredWeights(k);
  // Each operand gradient goes along its routes, as one exchange.
  batchReceipts();
  for (int64_t p = 0; p < numParts; ++p) {
    int64_t rank = layout.devices[p];
    for (unsigned i = 0; i < numOperands; ++i) {
      if (!sendBack[p][i])
        continue;
      Value value = stripParallelOps(op->getOperand(i));
      if (std::optional<sim::WeightUse> holder = weightHolderOf(k, i)) {
        const OpLayout &from = parts.layouts[holder->op];
        for (const geometry::GradientRoute &route : routes[i][p]) {
          int64_t q = route.producer;
          transfer(rank, sendBack[p][i], from.devices[q],
                   weightGradBuffer(from.devices[q], value,
                                    from.operandBoxes[holder->operand][q],
                                    from.replica[q], holder->op),
                   route.box, /*accumulate=*/true);
        }
        continue;
      }
      // Regions copied from an earlier reader's buffer go back through it.
      const std::vector<std::pair<Value, Box>> &shared =
          operands[k][i][p].shared;
      for (const auto &[buffer, region] : shared)
        transfer(rank, sendBack[p][i], rank,
                 gradOfGathered(rank, buffer, value), region,
                 /*accumulate=*/true);
      auto [pk, pr] = *parts.producerOf(op->getOperand(i));
      for (const geometry::GradientRoute &route : routes[i][p]) {
        if (llvm::any_of(shared, [&](const auto &region) {
              return region.second == route.box;
            }))
          continue;
        transfer(rank, sendBack[p][i],
                 parts.layouts[pk].devices[route.producer],
                 gradBuffer(pk, pr, route.producer), route.box,
                 /*accumulate=*/true);
      }
    }
  }
  flushReceipts();
  // Pieces whose copies each need the sum of one gradient per device: copy
  // each device's share out, all-reduce, and add the sum to every copy.
  for (unsigned i = 0; i < numOperands; ++i) {
    if (reduced[i].empty())
      continue;
    Value value = stripParallelOps(op->getOperand(i));
    auto [pk, pr] = *parts.producerOf(op->getOperand(i));
    const OpLayout &from = parts.layouts[pk];
    for (const std::vector<int64_t> &group : reduced[i]) {
      std::vector<int64_t> ranks;
      std::vector<Value> sums;
      for (int64_t q : group) {
        int64_t rank = from.devices[q];
        const Box &box = from.resultBoxes[pr][q];
        int64_t contributor = -1;
        for (int64_t p = 0; p < numParts; ++p)
          if (layout.devices[p] == rank &&
              geometry::intersect(layout.operandBoxes[i][p], box))
            contributor = p;
        Value sum = alloc(rank, tensorOf[value], box, true);
        keepForStep(rank, sum, pk);
        transfer(rank, sendBack[contributor][i], rank, sum, box,
                 /*accumulate=*/false);
        ranks.push_back(rank);
        sums.push_back(sum);
      }
      allReduce(ranks, sums);
      for (auto [q, sum] : llvm::zip(group, sums))
        transfer(from.devices[q], sum, from.devices[q], gradBuffer(pk, pr, q),
                 from.resultBoxes[pr][q], /*accumulate=*/true);
    }
  }
  return success();
}

LogicalResult PlanEmitter::emitGradSyncAndUpdate() {
  phase(plan::Phase::grad_sync);
  // The instances holding the same weight piece in the same replica sum
  // their gradients (replicas computed identical ones).
  std::map<std::tuple<std::string, std::vector<std::pair<int64_t, int64_t>>,
                      int64_t>,
           std::vector<std::pair<int64_t, Value>>>
      replicas;
  for (const auto &[key, grad] : weightGrads)
    replicas[{key.tensor, key.box, weightGradReplica.at(key)}].emplace_back(
        key.rank, grad);
  for (const auto &[a, ranksA] : replicas)
    for (const auto &[b, ranksB] : replicas) {
      if (std::get<0>(a) != std::get<0>(b) || std::get<1>(a) == std::get<1>(b))
        continue;
      Box boxA, boxB;
      for (auto [lo, hi] : std::get<1>(a))
        boxA.push_back({lo, hi});
      for (auto [lo, hi] : std::get<1>(b))
        boxB.push_back({lo, hi});
      // The holder's partitions read a weight in equal or disjoint pieces;
      // anything else is a bug here, not in the strategy.
      if (geometry::intersect(boxA, boxB))
        return func.emitError()
               << "internal error: weight '"
               << planOp.lookupSymbol<plan::TensorOp>(std::get<0>(a))
                      .getModelName()
                      .value_or(std::get<0>(a))
               << "' is held in overlapping but different pieces";
    }
  // ZeRO stages 1 and 2 (geometry::zeroShardable decides, as in the
  // simulator): the group reduce-scatters the gradient along dim 0, each
  // member updates its shard of the weight and the shards are all-gathered
  // back; stage 2 frees the whole gradient after the reduce-scatter.
  struct ShardedPiece {
    std::vector<int64_t> ranks;
    std::vector<Value> weights, shardGrads;
    std::vector<Box> shards;
    std::string tensor;
  };
  std::vector<ShardedPiece> sharded;
  llvm::DenseSet<Value> shardedGrads;
  struct ShardUpdate {
    int64_t rank;
    Value weight, grad;
  };
  std::vector<ShardUpdate> zero3Updates;
  for (const auto &[piece, holders] : replicas) {
    std::vector<int64_t> ranks;
    std::vector<Value> buffers;
    for (const auto &[rank, grad] : holders) {
      ranks.push_back(rank);
      buffers.push_back(grad);
    }
    const std::string &tensor = std::get<0>(piece);
    Box box;
    for (auto [lo, hi] : std::get<1>(piece))
      box.push_back({lo, hi});
    BufferKey first{ranks.front(), tensor, std::get<1>(piece), true};
    StateSharding stage = weightGradStage.at(first);
    int64_t k = static_cast<int64_t>(ranks.size());
    if (stage == StateSharding::None || !geometry::zeroShardable(box, k)) {
      allReduce(ranks, buffers);
      continue;
    }
    if (stage == StateSharding::Parameters) {
      // ZeRO-3: the weight lives in shards; the gradient is reduce-scattered
      // into each rank's shard and updates it there.
      std::vector<Value> shardGrads;
      for (int64_t j = 0; j < k; ++j) {
        Box shard = geometry::zeroShard(box, k, j);
        Value shardGrad = alloc(ranks[j], tensor, shard, true);
        keepForStep(ranks[j], shardGrad);
        shardGrads.push_back(shardGrad);
        shardedGrads.insert(buffers[j]);
        zero3Updates.push_back(
            {ranks[j], persistent.at({ranks[j], tensor, boxKey(shard), false}),
             shardGrad});
      }
      collective(plan::CollectiveKind::reduce_scatter, ranks, buffers,
                 shardGrads);
      for (auto [rank, grad] : llvm::zip(ranks, buffers))
        plan::FreeOp::create(at(rank), loc, grad);
      continue;
    }
    ShardedPiece s;
    s.ranks = ranks;
    s.tensor = tensor;
    for (int64_t j = 0; j < k; ++j) {
      s.shards.push_back(geometry::zeroShard(box, k, j));
      Value shardGrad = alloc(ranks[j], tensor, s.shards[j], true);
      keepForStep(ranks[j], shardGrad);
      s.shardGrads.push_back(shardGrad);
      BufferKey valueKey{ranks[j], tensor, std::get<1>(piece), false};
      s.weights.push_back(persistent.at(valueKey));
      shardedGrads.insert(buffers[j]);
    }
    collective(plan::CollectiveKind::reduce_scatter, ranks, buffers,
               s.shardGrads);
    if (stage == StateSharding::Gradients)
      for (auto [rank, grad] : llvm::zip(ranks, buffers))
        plan::FreeOp::create(at(rank), loc, grad);
    sharded.push_back(std::move(s));
  }
  phase(plan::Phase::update);
  for (const auto &[key, grad] : weightGrads) {
    if (shardedGrads.count(grad))
      continue;
    BufferKey valueKey = key;
    valueKey.grad = false;
    plan::UpdateOp::create(at(key.rank), loc, persistent.at(valueKey), grad);
  }
  for (const ShardUpdate &u : zero3Updates)
    plan::UpdateOp::create(at(u.rank), loc, u.weight, u.grad);
  for (const ShardedPiece &s : sharded) {
    std::vector<Value> staged;
    for (size_t j = 0; j < s.ranks.size(); ++j) {
      int64_t rank = s.ranks[j];
      plan::UpdateOp::create(at(rank), loc, s.weights[j], s.shardGrads[j]);
      // The updated shard, staged for the all-gather.
      Value shard = alloc(rank, s.tensor, s.shards[j], false,
                          /*staging=*/true);
      keepForStep(rank, shard);
      transfer(rank, s.weights[j], rank, shard, s.shards[j],
               /*accumulate=*/false);
      staged.push_back(shard);
    }
    collective(plan::CollectiveKind::all_gather, s.ranks, staged, s.weights);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Micro-batches and the pipeline schedule
//===----------------------------------------------------------------------===//

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
  for (int64_t k : stageOps[stage]) {
    if (failed(emitForward(k)))
      return failure();
    if (pipeline.enabled())
      gatherPipelinedOutputs(k);
  }
  taskMicroBatch = -1;
  return pipeline.enabled() ? success() : emitOutputs();
}

LogicalResult PlanEmitter::emitBackwardTask(int64_t stage, int64_t j) {
  enterMicroBatch(j);
  taskMicroBatch = pipeline.enabled() ? j : -1;
  const std::vector<int64_t> &ops = stageOps[stage];
  for (int64_t k : llvm::reverse(ops)) {
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
    if (std::string problem =
            sim::checkMicroBatching(parts.graph, m, training, &atFault);
        !problem.empty())
      return parts.ops[atFault]->emitError() << problem;

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

void PlanEmitter::collective(plan::CollectiveKind kind,
                             const std::vector<int64_t> &ranks,
                             const std::vector<Value> &buffers,
                             const std::vector<Value> &results, int64_t axis) {
  auto group = DenseI64ArrayAttr::get(context, ranks);
  for (size_t j = 0; j < ranks.size(); ++j)
    plan::CollectiveOp::create(
        at(ranks[j]), loc, plan::CollectiveKindAttr::get(context, kind), group,
        buffers[j], results[j], builder.getStringAttr("sum"),
        builder.getI64IntegerAttr(0), builder.getI64IntegerAttr(axis));
}

FailureOr<plan::PlanOp> PlanEmitter::emit(OpBuilder &top) {
  // A function returning the scalar of a loss op trains; anything else is
  // a forward-only plan.
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  if (ret.getNumOperands() == 1) {
    Value value = stripParallelOps(ret.getOperand(0));
    if (auto op = value.getDefiningOp<ParallelizableOpInterface>();
        op && op.isLoss())
      loss = parts.producerOf(value);
  }
  training = loss.has_value();
  weightHolders = sim::weightHolders(parts.graph);

  int64_t numRanks = parts.numDevices;
  int64_t batch = 1;
  if (func.getNumArguments() > 0 && !shapeOf(func.getArgument(0)).empty())
    batch = shapeOf(func.getArgument(0))[0];
  std::string strategyJson;
  if (parts.machine)
    strategyJson =
        search::writeStrategyJson(parts.graph, *parts.machine, parts.strategy,
                                  nullptr, nullptr, parts.pipeline);

  DictionaryAttr optimizer;
  if (training) {
    const sim::OptimizerInfo *info = sim::findOptimizer(options.optimizer);
    if (!info)
      return func.emitError() << "unknown optimizer '" << options.optimizer
                              << "': expected " << sim::optimizerNames();
    if (!(options.learningRate >= 0) || std::isinf(options.learningRate))
      return func.emitError() << "learning rate " << options.learningRate
                              << " is not a finite number >= 0";
    // 0 asks for the optimizer's conventional rate.
    double lr = options.learningRate > 0 ? options.learningRate
                                         : info->defaultLearningRate;
    NamedAttrList attrs;
    attrs.set("kind", builder.getStringAttr(options.optimizer));
    attrs.set("lr", builder.getF64FloatAttr(lr));
    attrs.set("momentum", builder.getF64FloatAttr(options.momentum));
    attrs.set("beta1", builder.getF64FloatAttr(options.beta1));
    attrs.set("beta2", builder.getF64FloatAttr(options.beta2));
    attrs.set("epsilon", builder.getF64FloatAttr(options.epsilon));
    attrs.set("weight_decay", builder.getF64FloatAttr(options.weightDecay));
    optimizer = attrs.getDictionary(context);
  }
  planOp = plan::PlanOp::create(
      top, func.getLoc(), top.getI64IntegerAttr(runtime::kPlanVersion),
      top.getI64IntegerAttr(numRanks), top.getStringAttr(parts.machineName),
      top.getStringAttr(parts.machineName), top.getStringAttr(strategyJson),
      top.getI64IntegerAttr(batch), optimizer, FlatSymbolRefAttr(),
      top.getF64FloatAttr(sim::modelFlops(parts.graph)));
  Block *body = new Block();
  planOp.getBody().push_back(body);
  builder.setInsertionPointToEnd(body);

  if (failed(emitTensors()) || failed(emitGraphOps()))
    return failure();
  if (loss)
    planOp.setLossAttr(FlatSymbolRefAttr::get(
        context, tensorOf[parts.ops[loss->first]->getResult(loss->second)]));

  for (int64_t rank = 0; rank < numRanks; ++rank) {
    auto program =
        plan::ProgramOp::create(builder, loc, builder.getI64IntegerAttr(rank));
    program.getBody().push_back(new Block());
    programs.push_back(program);
    builders.emplace_back(context);
    builders.back().setInsertionPointToEnd(&program.getBody().front());
  }

  if (failed(planRecomputation()))
    return failure();
  // ZeRO-3 keeps a weight in shards at its holder: other ops cannot read
  // it from there.
  for (size_t k = 0; k < parts.graph.ops.size(); ++k)
    for (auto [i, src] : llvm::enumerate(parts.graph.ops[k].operands)) {
      if (src.kind != sim::Source::Kind::Weight)
        continue;
      const sim::WeightUse &holder = weightHolders[src.index];
      if (holder.op != static_cast<int32_t>(k) &&
          parts.strategy[holder.op].sharding == StateSharding::Parameters)
        return parts.ops[k]->emitError()
               << "weight '" << parts.graph.weights[src.index].name
               << "' is read by other ops too: ZeRO stage 3 of a shared "
                  "weight is not lowered; use zero = 1 or 2 on '"
               << parts.graph.ops[holder.op].name << "'";
    }
  if (failed(emitSchedule()))
    return failure();
  if (training) {
    if (failed(emitGradSyncAndUpdate()))
      return failure();
  }
  // Step-local buffers go at the end of the step; weights and their
  // gradients persist.
  for (const Transient &t : transient)
    if (!freedEarly.contains(t.buffer))
      plan::FreeOp::create(at(t.rank), loc, t.buffer);
  return planOp;
}

struct PartitionToPlanPass : impl::PartitionToPlanBase<PartitionToPlanPass> {
  using PartitionToPlanBase::PartitionToPlanBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> funcs;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() && !getSimulatedOps(func).empty())
        funcs.push_back(func);
    if (funcs.size() != 1) {
      module.emitError() << "ppc-partition-to-plan needs exactly one function "
                            "of graph ops, found "
                         << funcs.size();
      return signalPassFailure();
    }
    func::FuncOp func = funcs.front();
    FailureOr<conversion::PartitionedFunction> parts =
        conversion::analyzePartitions(func, unassigned);
    if (failed(parts))
      return signalPassFailure();
    PartitionToPlanOptions options{optimizer,   learningRate, momentum,
                                   beta1,       beta2,        epsilon,
                                   weightDecay, unassigned};
    OpBuilder top(module.getContext());
    top.setInsertionPointToEnd(module.getBody());
    PlanEmitter emitter(func, *parts, options);
    FailureOr<plan::PlanOp> plan = emitter.emit(top);
    if (failed(plan)) {
      // Leave the module as it was.
      module.walk([](plan::PlanOp op) { op.erase(); });
      return signalPassFailure();
    }
    const sim::OptimizerInfo *info = sim::findOptimizer(optimizer);
    if (info && failed(conversion::reportTraffic(*plan, *parts, info->kind,
                                                 traffic, func.getLoc()))) {
      plan->erase();
      return signalPassFailure();
    }
    // The plan replaces the graph: it holds everything the runtime needs.
    for (Operation &op : llvm::make_early_inc_range(*module.getBody()))
      if (&op != plan->getOperation())
        op.erase();
    module->removeAttr("ppc.machine");
  }
};

} // namespace
} // namespace ppc
