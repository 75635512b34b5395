//===- SimulatorImpl.h - the simulator's state ------------------*- C++ -*-===//
//
// Private to simulator/. What a Simulator keeps between simulations: per op
// its instances' kernels, collectives and memory (OpState), per edge its
// transfers (Edge), the resources' state and the timeline. Three files fill
// it: SimulatorBuild.cpp builds the tasks of a configuration (the kernels,
// the transfers of each edge and the collectives, which the plan's
// instructions mirror: lib/Conversion/PlanTraffic), SimulatorTiming.cpp times
// them in issue order, and Simulator.cpp sums the result and writes the
// trace.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SIMULATOR_SIMULATORIMPL_H
#define PPC_SIMULATOR_SIMULATORIMPL_H

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "ppc/Simulator/Simulator.h"
#include "ppc/Support/Alternatives.h"
#include "ppc/Support/ChromeTrace.h"
#include "ppc/Support/Exchange.h"
#include "ppc/Support/Layout.h"
#include <algorithm>
#include <cassert>
#include <cmath>
#include <iomanip>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>

namespace ppc::sim {
namespace detail {

/// Chunks an overlapped tensor-parallel exchange is cut into
/// (SimOptions::overlapTensorParallel): the first chunk's communication
/// (or the last one's) is not hidden. Transformer Engine's pipelined
/// overlap splits into 4 by default.
inline constexpr double kOverlapChunks = 4;

/// Whether `op` contracts a weight: a weight operand takes part in a
/// contraction (contractedOperands: linear layers, convolutions).
inline bool contractsWeight(const Op &op) {
  uint64_t contracted = contractedOperands(op);
  for (size_t i = 0; i < op.operands.size() && i < 64; ++i)
    if ((contracted >> i & 1) && op.operands[i].kind == Source::Kind::Weight)
      return true;
  return false;
}

/// Durations are whole multiples of 2^-40 s (about a picosecond): the
/// timing's sums and maxima of them, and the halves and quarters of chunked
/// kernels, are then exact below kExactTimesBelow, so a timeline moved by d
/// and then timed on equals one timed on and then moved by d. That lets a
/// delta simulation move what follows a change instead of timing it again
/// (runTiming), with the result of a full simulation to the last bit.
inline constexpr double kTimeQuantum = 0x1p-40;
inline constexpr double kExactTimesBelow = 0x1p10;

/// `seconds` rounded to a multiple of kTimeQuantum (kept as it is where it
/// is too large for one to matter, or not finite).
inline double quantized(double seconds) {
  if (!(std::fabs(seconds) < 0x1p40))
    return seconds;
  return std::nearbyint(seconds / kTimeQuantum) * kTimeQuantum;
}

/// A stored time `t` moved by `shift`: entries > 0 are times, others (0:
/// unused, -1: none) stay as they are.
inline double shifted(double t, double shift) { return t > 0 ? t + shift : t; }

/// Adds `add` to `to`: tensors kept together sum, the transient buffer is
/// the larger one.
inline void accumulate(MemoryUse &to, const MemoryUse &add) {
  to.weights += add.weights;
  to.gradients += add.gradients;
  to.optimizerState += add.optimizerState;
  to.activations += add.activations;
  to.workspace = std::max(to.workspace, add.workspace);
}

using Slice = std::vector<Range>;

inline int64_t volume(const Slice &slice) {
  int64_t v = 1;
  for (const Range &r : slice)
    v *= r.size();
  return v;
}

using geometry::overlapVolume;

/// A point-to-point transfer between a partition of the sending op and one
/// of the receiving op.
struct Transfer {
  int32_t src = 0, dst = 0;
  int32_t route = 0; ///< index into Impl::routes.
  int64_t bytes = 0;
  double time = 0;
  /// The sender's part of `time` between ranks that move their own
  /// messages (LinkSpec::sendTime); 0 elsewhere.
  double sendTime = 0;
};

/// Data a partition reads from a partition on its own device.
struct LocalDep {
  int32_t src = 0, dst = 0;
};

/// A collective over some partitions of one op (all on distinct devices).
struct Collective {
  std::vector<int32_t> partitions;
  int64_t bytes = 0;   ///< bytes of the reduced buffer.
  double time = 0;     ///< before the consumer may go on.
  double postTime = 0; ///< all-gather after the update (sharded sync).
  /// ZeRO-3: the all-gather of the sharded weight before the forward
  /// kernels and again before the backward kernels.
  double gatherTime = 0;
  /// Bytes all participants send, by link kind (twice for a sharded sync:
  /// reduce-scatter and all-gather together move what an all-reduce does).
  std::array<double, 8> bytesByLinkKind{};
};

/// The route of transfers from one device to another, as resources.
struct RouteInfo {
  LinkSpec link;
  std::vector<int32_t> resources;
  int64_t src = 0, dst = 0; ///< devices
};

/// Producer result `result` of op `producer` feeds operand `operand` of op
/// `consumer`; or, for a weight edge (`weightOperand` >= 0), the weight that
/// operand `weightOperand` of its holder `producer` reads does.
struct Edge {
  int32_t producer = 0, result = 0, consumer = 0, operand = 0;
  int32_t weightOperand = -1;
  /// An earlier (later) edge reads the same result, an activation: this
  /// edge may share its copies (they may share this one's, so this one
  /// keeps fwdBoxes and fwdByDestination).
  bool readEarlier = false, readLater = false;
  /// Takes what identifies `from` (the fields above), not its transfers:
  /// a spare edge rebuilt in its place keeps its own buffers.
  void takeIdentity(const Edge &from) {
    producer = from.producer;
    result = from.result;
    consumer = from.consumer;
    operand = from.operand;
    weightOperand = from.weightOperand;
    readEarlier = from.readEarlier;
    readLater = from.readLater;
  }
  std::vector<Transfer> fwd, bwd;
  std::vector<LocalDep> fwdLocal, bwdLocal;
  /// Gradients summed by an all-reduce instead of transfers: the producer
  /// instances of one piece (partitions of the collective, in the
  /// producer's numbering) each get the sum of what the consumer instance
  /// on their device (`contributors`, parallel) computed for the piece.
  struct GradReduce {
    Collective reduce;
    std::vector<int32_t> contributors;
  };
  std::vector<GradReduce> bwdReduces;
  /// The box each forward transfer carries (activation edges), so that a
  /// later consumer of the same result can share the copy.
  std::vector<Slice> fwdBoxes;
  /// fwd's indices by (destination device, producer copy group), sorted:
  /// what later edges of the same value look up to share a copy.
  std::vector<std::tuple<int64_t, int32_t, int32_t>> fwdByDestination;
  /// Copies this edge shares with an earlier edge of the same result: the
  /// consumer instance `dst` reads what transfer `transfer` of edge `edge`
  /// already brought to its device (one gathered copy per device and box,
  /// not one per consumer); its gradient accumulates there and goes back
  /// with that edge's.
  struct SharedCopy {
    int32_t dst = 0, edge = 0, transfer = 0;
    std::vector<int32_t> gradTo; ///< producer instances its gradient feeds.
  };
  std::vector<SharedCopy> fwdShared;
  /// End of each forward transfer in the last timing pass.
  std::vector<double> fwdEnd;
  /// Between ranks that move their own messages, when the consumer's rank
  /// began packing each backward transfer (after its backward kernel, where
  /// the plan sends the gradient) in the last timing pass.
  std::vector<double> bwdPackedAt;
  // Totals of the transfers, kept so that a result need not walk them.
  std::vector<std::pair<int32_t, double>> commTimeByDevice;
  std::vector<std::pair<int32_t, int64_t>> receivedByDevice;
  std::array<double, 8> bytesByLinkKind{};
  /// What kind of exchange the forward transfers and the backward ones
  /// make (geometry::classifyExchange; set by the simulation, not by the
  /// DP's edge costs).
  geometry::ExchangeKind fwdKind = geometry::ExchangeKind::Local;
  geometry::ExchangeKind bwdKind = geometry::ExchangeKind::Local;
};

/// An op under one configuration. Its arrays have one entry per instance
/// (a partition or one of its replicas, see OpConfig::replicas).
struct OpState {
  std::vector<int64_t> devices;
  std::vector<Slice> iter;
  /// resultSlices[r][p]: slice of result r instance p computes (and needs
  /// the gradient of); heldSlices[r][p]: what it keeps after forward for
  /// readers (a piece of it when partial sums are reduce-scattered).
  std::vector<std::vector<Slice>> resultSlices, heldSlices;
  /// operandSlices[o][p]: slice of operand o instance p reads.
  std::vector<std::vector<Slice>> operandSlices;
  /// The partition and replica each instance is; replicas per partition.
  std::vector<int64_t> partition, replica;
  int64_t numReplicas = 1;
  /// Results dropped after forward and computed again in backward.
  bool recomputed = false;
  /// Instances holding the same result slices after forward (partial sums
  /// once all-reduced, copies, and replicas): any of them can serve a
  /// reader.
  std::vector<int32_t> replicaGroup;
  int32_t numReplicaGroups = 0;
  /// Instances computing the same result slices: the groups that sum
  /// partials, and that each receive a reader's gradient.
  std::vector<int32_t> computedGroup;
  /// For each weight operand this op holds (weightHolders), partition p's
  /// slice of it and its replica group; empty for other operands. Weight
  /// edges read them as an activation edge reads resultSlices.
  struct HeldWeight {
    std::vector<Slice> slices;
    std::vector<int32_t> group;
    int32_t numGroups = 0;
  };
  std::vector<HeldWeight> heldWeights;
  std::vector<double> fwdTime, bwdTime, updateTime;
  std::vector<Collective> partialSums, gradSyncs;
  /// A staged kernel's statistics reductions between its stages (forward,
  /// backward), per statistics group.
  std::vector<Collective> statSyncs[2];
  /// Gradient syncs each partition takes part in.
  std::vector<std::vector<int32_t>> syncsOf;
  std::vector<MemoryUse> memory;
  /// ZeRO-3: per instance, the bytes of the whole weights it gathers for
  /// its kernels (result() adds the next op's: the lowering allocates
  /// them one op ahead).
  std::vector<int64_t> gatheredBytes;

  /// A ring op (OpConfig::ring): the rings it runs, and the bytes its
  /// blocks move in one forward and one backward, by link kind (their time
  /// is in the kernels', Impl::priceRing).
  int32_t numRings = 0;
  std::array<double, 8> ringForwardBytes{}, ringBackwardBytes{};

  /// Tensor-parallel communication next to this op's kernel overlaps it
  /// (SimOptions::overlapTensorParallel and a contraction over a weight).
  bool overlapsComm = false;
  /// Received activation slices are not kept for backward but gathered
  /// again (SimOptions::regatherInputs and a contraction over a weight).
  bool regathers = false;

  // Timing of the last pass, as stored: a time is the stored one plus the
  // shift of the op's block (Impl::BlockPass; forward times the forward
  // block's, backward ones and syncEnd with overlapped syncs the backward
  // block's).
  std::vector<double> fwdEnd, bwdEnd, syncEnd;
  /// When each instance's last backward kernel started.
  std::vector<double> bwdStart;

  /// Takes `from`'s timing (a state rebuilt in place of `from` keeps the
  /// last pass's times until it is timed again).
  void copyTimingFrom(const OpState &from) {
    fwdEnd = from.fwdEnd;
    bwdEnd = from.bwdEnd;
    bwdStart = from.bwdStart;
    syncEnd = from.syncEnd;
  }
};

/// What a timeline event is; its name is only built when a trace is written.
enum class TaskKind : uint8_t {
  Forward,
  Backward,
  Update,
  PartialSum,
  GradSync,
  WeightGather,
  Transfer,
  GradTransfer,
  GradReduce,
  Recompute,
};

struct TimelineEvent {
  int32_t op; ///< the op, or for transfers the edge.
  TaskKind kind;
  int32_t resource;
  double start, duration;
};

} // namespace detail

using namespace detail;

struct Simulator::Impl {
  const Graph &graph;
  const Machine &machine;
  const CostModel &costModel;
  SimOptions options;
  int64_t numDevices;

  Strategy strategy;
  std::vector<OpState> ops;
  std::vector<Edge> edges;
  std::vector<std::vector<int32_t>> inEdges, outEdges;
  /// The use that holds, synchronizes and updates each weight (see
  /// weightHolders): its first, whose op is the last to finish backward.
  std::vector<WeightUse> weightHolder;
  /// Recomputation: the ops read by each op (activations), whether anything
  /// reads an op's results, and the ops to recompute before each op's
  /// backward — those whose latest reader it is (readers follow their
  /// producers, so the first backward to need the results runs there).
  std::vector<std::vector<int32_t>> producersOf;
  std::vector<char> hasReaders;
  /// Per graph input, the (op, operand) that first reads it: the one that
  /// counts its slices as activations (a pipeline stage's input is read by
  /// a layer norm and a residual add, and is one buffer).
  std::vector<std::pair<int32_t, int32_t>> firstInputReader;
  std::vector<std::vector<int32_t>> recomputeBefore;
  /// The op whose backward recomputes each op (recomputeBefore), and per
  /// block the ops recomputed before its ops' backward (countRecomputes).
  std::vector<int32_t> recomputeReader, recomputesInBlock;
  /// Counts again the ops recomputed before block `b`'s backward.
  void countRecomputes(int32_t b);
  /// Counts again those of the block where op `x` is recomputed (if it is).
  void recountRecomputeOf(int32_t x) {
    countRecomputes(blockOf(recomputeReader[x]));
  }
  /// Per op, a class of the ops whose states buildOpState builds alike
  /// under any one configuration (a layer's op and its counterparts in the
  /// other layers): a move of all of them builds one and copies it.
  std::vector<int32_t> buildClass;
  /// Whether ops `a` and `b` are built alike (buildClass).
  bool builtAlike(size_t a, size_t b) const;
  /// Per op, whether it was recomputed in the current timing pass; per
  /// device, the bytes of the cascade of recomputations running now and
  /// the most any cascade needs (its results live together until their
  /// backward).
  std::vector<char> recomputedNow;
  std::vector<int64_t> cascadeBytes, recomputePeak;

  // Resources: compute stream d, communication stream numDevices + d,
  // direction k of link l at 2 * numDevices + 2 * l + k, and with shared
  // cores core c of node n at firstCore + n * coresPerNode + c.
  std::vector<double> freeAt;
  int64_t coresPerNode = 0, devicesPerNode = 1, firstCore = 0;
  /// The devices are processes of hosts (a cluster whose devices talk over
  /// shared memory): one thread per rank runs its kernels and copies its
  /// messages, so a message holds its receiver's compute stream while it
  /// moves (the rank waits in its receive, then copies the data out) and a
  /// collective holds every member's (ppc-run's ranks without --overlap).
  bool ranksCopyMessages = false;
  /// Route id per (src * numDevices + dst), filled as transfers need them:
  /// sparse, since a dense numDevices^2 table does not fit in memory for
  /// large machines and a strategy uses few device pairs.
  absl::flat_hash_map<int64_t, int32_t> routeOf;
  /// The same, dense, on machines of at most kDenseRouteDevices devices
  /// (-1: not yet known): a transfer's route is looked up each time an
  /// edge is rebuilt, which is most of a delta simulation's work.
  static constexpr int64_t kDenseRouteDevices = 256;
  std::vector<int32_t> denseRouteOf;
  std::vector<RouteInfo> routes;
  /// Scratch indexed by device, left as found after each use (-1, 0, 0):
  /// a device's position among an edge's devices (orderAsRounds) or a mark
  /// that it has sums (summarizeEdge), and its sums.
  std::vector<int32_t> devicePosition;
  std::vector<double> deviceTime;
  std::vector<int64_t> deviceBytes;
  /// Scratch of priceExchanges: pieces per destination instance.
  std::vector<int32_t> piecesByDestination;
  std::vector<TimelineEvent> timeline;

  /// Rebuilds everything of op `i` that depends on its own configuration.
  void buildOp(size_t i) { buildOpState(i, strategy[i], ops[i]); }

  //===--------------------------------------------------------------------===//
  // Additive costs for the dynamic programming search
  //===--------------------------------------------------------------------===//

  /// States of ops under configurations other than the current ones,
  /// memoized: the DP asks for each (op, config) many times.
  std::map<std::pair<size_t, std::vector<int64_t>>, OpState> stateCache;
  /// The edge edgeCost builds, kept so that its buffers are reused.
  Edge costEdge;
  /// Edge costs by what decides them: the producer's layout of the value
  /// (its pieces, devices, replica and gradient groups) and the consumer's
  /// (the pieces it reads, devices, partitions), each interned to an id,
  /// with the element size and whether a gradient goes back. Edges of the
  /// same geometry (a network's repeated branches, other edges' tables)
  /// are built once. Exact: the keys are the layouts themselves; cleared
  /// when they grow past kEdgeCostMemoInts.
  struct EdgeCostMemo {
    absl::flat_hash_map<std::vector<int64_t>, int32_t> layoutIds;
    /// (state, side) -> layout id; a side is a result (r), a held weight
    /// (-1 - w) or, offset by kOperandSide, an operand.
    absl::flat_hash_map<std::pair<const OpState *, int32_t>, int32_t> sideIds;
    absl::flat_hash_map<std::tuple<int32_t, int32_t, int64_t, bool>, double>
        costs;
    int64_t storedInts = 0;
    std::vector<int64_t> scratch;
  } edgeCostMemo;
  static constexpr int32_t kOperandSide = 1 << 20;
  static constexpr int64_t kEdgeCostMemoInts = int64_t{1} << 24;
  /// The interned id of one side of an edge (see EdgeCostMemo).
  int32_t edgeSideId(const OpState &st, int32_t side);

  //===--------------------------------------------------------------------===//
  // Timing
  //===--------------------------------------------------------------------===//

  /// Runs a collective of op `op` ready when `ready(p)` for its members.
  template <typename ReadyFn>
  double runCollective(const OpState &st, const Collective &c, double time,
                       ReadyFn ready, int32_t op, TaskKind kind) {
    double start = 0;
    for (int32_t p : c.partitions)
      start = std::max({start, ready(p), freeAt[numDevices + st.devices[p]]});
    // Members that share a node's cores copy the data themselves (see
    // runTransfer): the collective holds a core of each such node.
    std::vector<int64_t> cores;
    if (coresPerNode > 0)
      for (int32_t p : c.partitions) {
        int64_t core = sharedCore(st.devices[p], st.devices[p]);
        if (core >= 0 &&
            std::find(cores.begin(), cores.end(), core) == cores.end())
          cores.push_back(core);
      }
    for (int64_t core : cores)
      start = std::max(start, freeAt[core]);
    if (ranksCopyMessages)
      for (int32_t p : c.partitions)
        start = std::max(start, freeAt[st.devices[p]]);
    if (start == 0)
      zeroStartSeen = true;
    double end = start + time;
    for (int64_t core : cores)
      occupy(core, end);
    for (int32_t p : c.partitions) {
      if (ranksCopyMessages)
        occupy(st.devices[p], end);
      occupy(numDevices + st.devices[p], end);
      record(op, kind, static_cast<int32_t>(numDevices + st.devices[p]), start,
             end);
    }
    return end;
  }

  /// When overlapped communication has brought each instance's data
  /// (forward and backward reuse it: no allocation per op and pass).
  std::vector<double> commReadyScratch;
  /// When regathered inputs arrive, per instance (backward).
  std::vector<double> regatherScratch;
  /// What an op's own tasks read while it is timed, per instance: when its
  /// inputs (forward) and its gradients (backward) are ready, when its
  /// forward kernels started, when its updates end.
  std::vector<double> inReadyScratch, gradReadyScratch, fwdStartScratch,
      updateEndScratch;

  /// Per device, the parameter all-gathers deferred to the next forward
  /// (overlapParamGather), in seconds.
  std::vector<double> deferredGather;

  /// The ops are timed in blocks of kBlockOps (forward in issue order,
  /// backward and updates in reverse), each block's tasks recorded with
  /// the resources they use: a delta simulation times the blocks a change
  /// touches and moves the others (runTiming).
  static constexpr int32_t kBlockOps = 8;
  static int32_t blockOf(int32_t op) { return op / kBlockOps; }
  /// Block b's ops: [blockBegin(b), blockEnd(b)).
  static int32_t blockBegin(int32_t b) { return b * kBlockOps; }
  int32_t blockEnd(int32_t b) const {
    return std::min<int32_t>(static_cast<int32_t>(ops.size()),
                             (b + 1) * kBlockOps);
  }
  /// What timing a block found: the resources its tasks read or wrote
  /// (by index; recordUse), their state before the block and after it.
  struct BlockTiming {
    std::vector<int32_t> resources;
    std::vector<double> entry, exit;
    /// A task of the block started at time 0: had it waited for nothing
    /// it would not move with what precedes it.
    bool zeroStart = false;
    /// When the block's last forward (backward) task ended.
    double latestEnd = 0;
    /// Updates: the least time a task of the block waited for its
    /// resources once its inputs were ready (0: one started on its
    /// inputs; infinite: no task), and the shift of the block's backward
    /// when it was timed. Inputs moved later than the block by less than
    /// the slack leave every task waiting for its resources: the block
    /// moves whole.
    double slack = 0, inputShift = 0;
  };
  /// One pass over the blocks: the forward, the backward or the updates.
  /// A block's record, and what its tasks wrote, are stored as the timing
  /// pass that last timed it left them, and a time is the stored one plus
  /// the block's shift (entries > 0; 0 and -1 mean unused and none):
  /// moving a block changes its shift and the state of its resources
  /// only, so a delta simulation costs the blocks it times plus one step
  /// per block.
  struct BlockPass {
    std::vector<BlockTiming> blocks;
    std::vector<double> shift;
    /// The timing pass (passNumber) that last timed each block.
    std::vector<uint32_t> timedIn;
    // For revert(): the shifts, and the records of the blocks it timed
    // (`timed`), before the pending update.
    std::vector<double> lastShift;
    std::vector<BlockTiming> lastBlocks;
    std::vector<int32_t> timed;
  };
  BlockPass fwdPass, bwdPass, updPass;
  /// The whole state at the start of every kSnapshotBlocks-th forward
  /// block, as the last pass found it: a delta simulation's forward starts
  /// at the one before the first block that changed (the blocks before are
  /// the last pass's).
  static constexpr int32_t kSnapshotBlocks = 8;
  std::vector<std::vector<double>> fwdSnapshots;
  /// Numbers the timing passes (BlockPass::timedIn).
  uint32_t passNumber = 0;
  int32_t numBlocks() const {
    return static_cast<int32_t>((ops.size() + kBlockOps - 1) / kBlockOps);
  }
  /// Block `b`'s record as the last pass left it (stored; with
  /// pass.lastShift[b]).
  const BlockTiming &lastTiming(const BlockPass &pass, int32_t b) const {
    return pass.timedIn[b] == passNumber ? pass.lastBlocks[b] : pass.blocks[b];
  }
  /// When the last of `pass`'s tasks ended, in the current timing.
  double latestEnd(const BlockPass &pass) const {
    double latest = 0;
    for (size_t b = 0; b < pass.blocks.size(); ++b)
      latest =
          std::max(latest, shifted(pass.blocks[b].latestEnd, pass.shift[b]));
    return latest;
  }
  /// The resources a block uses (BlockTiming) are those whose state it
  /// changed (a state only grows within a pass), and those it read
  /// without changing them, which are marked here: a task that occupied a
  /// resource for no time, and the cores sharedCore chose among.
  void use(int64_t r) { resourceUse[r] = useEpoch; }
  /// Resource `r` is busy until `until` (a task reads the resources it
  /// occupies, before).
  void occupy(int64_t r, double until) {
    if (until == freeAt[r])
      use(r);
    freeAt[r] = until;
  }
  std::vector<uint32_t> resourceUse;
  uint32_t useEpoch = 0;
  /// The state before the block being timed.
  std::vector<double> blockEntry;
  /// Starts a block's record of the resources it uses.
  void clearUse() {
    if (++useEpoch == 0) {
      std::fill(resourceUse.begin(), resourceUse.end(), 0);
      useEpoch = 1;
    }
    blockEntry = freeAt;
  }
  /// Fills in `record`'s resources from the state before and after the
  /// block (clearUse).
  void recordUse(BlockTiming &record) const {
    record.resources.clear();
    record.entry.clear();
    record.exit.clear();
    for (size_t r = 0; r < freeAt.size(); ++r)
      if (freeAt[r] != blockEntry[r] || resourceUse[r] == useEpoch) {
        record.resources.push_back(static_cast<int32_t>(r));
        record.entry.push_back(blockEntry[r]);
        record.exit.push_back(freeAt[r]);
      }
  }
  /// Transfer k of `edge` ends: stored plus its block's shift (transfers
  /// are timed with their consumer's forward). What else the timing reads
  /// of other ops adds their blocks' shifts likewise.
  double transferEndOf(int32_t edge, size_t k) const {
    return shifted(edges[edge].fwdEnd[k],
                   fwdPass.shift[blockOf(edges[edge].consumer)]);
  }
  /// Per block boundary b (between blocks b - 1 and b), the edges that
  /// cross it (producer before, consumer after): whose values the blocks
  /// after it read in forward (and before it in backward). Empty for a
  /// boundary crossed by too many edges to check (kMaxCrossing); then
  /// crossingChecked[b] is false.
  std::vector<std::vector<int32_t>> crossing;
  std::vector<char> crossingChecked;
  static constexpr size_t kMaxCrossing = 64;
  /// Blocks whose forward (backward) tasks the pending update changed:
  /// their ops' kernels or collectives, or the transfers they issue.
  std::vector<char> fwdDirty, bwdDirty;
  /// Marks op `i`'s forward and/or backward block changed.
  void markChanged(int32_t i, bool forward, bool backward) {
    size_t b = static_cast<size_t>(blockOf(i));
    if (fwdDirty.size() <= b) {
      fwdDirty.resize(numBlocks(), 0);
      bwdDirty.resize(numBlocks(), 0);
    }
    if (sumsDirty.size() <= b)
      sumsDirty.resize(numBlocks(), 1);
    if (forward)
      fwdDirty[b] = sumsDirty[b] = 1;
    if (backward)
      bwdDirty[b] = 1;
  }
  /// A block's part of the result: its ops' and their incoming edges'
  /// busy time, memory and bytes per device (sparse) and in all, summed
  /// when the block changes. result() adds the blocks in order, so that
  /// a delta simulation's sums are a full one's to the bit.
  struct BlockSums {
    std::vector<std::pair<int64_t, DeviceStats>> devices;
    std::array<double, 8> bytesByLinkKind{}, syncBytesByLinkKind{};
    std::array<SimResult::ExchangeCount, std::size(geometry::kExchangeKinds)>
        exchanges{};
    /// Empties the sums, keeping the devices' buffer.
    void clear() {
      devices.clear();
      bytesByLinkKind = {};
      syncBytesByLinkKind = {};
      exchanges = {};
    }
  };
  std::vector<BlockSums> blockSums;
  /// The sums of each group of kGroupBlocks blocks, in order: result()
  /// adds the groups (a change sums its group again, not every block).
  static constexpr int32_t kGroupBlocks = 16;
  std::vector<BlockSums> groupSums;
  std::vector<char> groupDirtyScratch;
  BlockSums totalScratch;
  /// Adds `from` to `to`.
  void addSums(BlockSums &to, const BlockSums &from);
  /// Blocks whose sums the pending result() must take again.
  std::vector<char> sumsDirty;
  /// Sums block `b` into `out`.
  void sumBlock(int32_t b, BlockSums &out);
  /// ZeRO-3: per device, the bytes of weights op `i` and the op before it
  /// gather, where both gather there (they live together: the lowering
  /// gathers one op ahead).
  const std::vector<std::pair<int64_t, int64_t>> &
  gatheredWithPrevious(int32_t i);
  std::vector<std::pair<int64_t, int64_t>> gatheredScratch;
  /// Set by the timing when a task starts at time 0 (see BlockTiming).
  bool zeroStartSeen = false;
  /// The least slack of the updates timed since it was reset (BlockTiming).
  double updateSlack = 0;
  /// The latest time of the last timing pass: a pass moves blocks only
  /// while times are exact (kExactTimesBelow).
  double lastPassEnd = 0;
  /// What the last update() timed again and moved (Simulator::TimingStats).
  Simulator::TimingStats timingStats;

  /// Whether the state of the resources block record `block` (stored,
  /// with `shift`) uses is the state it found moved by one d (resources
  /// unused in both, or used in both and later by d), and `d` if given;
  /// sets `d` if not.
  bool entryMoved(const BlockTiming &block, double shift,
                  std::optional<double> &d) const;
  /// Whether the values read across boundary `b` in forward (backward)
  /// are the last pass's moved by `d`.
  bool forwardCrossingMoved(int32_t b, double d) const;
  bool backwardCrossingMoved(int32_t b, double d) const;
  /// Whether block b's backward recomputes: it must run, as the cascade's
  /// memory and marks are the pass's.
  bool recomputesIn(int32_t b) const { return recomputesInBlock[b] > 0; }
  /// Swaps the stored timing block `b`'s forward (backward) writes with
  /// undo's: before a delta simulation times it again, and in revert().
  void swapForwardBlock(int32_t b);
  void swapBackwardBlock(int32_t b);
  /// Times `pass`'s blocks, in issue order from block `first` (`forward`)
  /// or from the last block down, from the state in freeAt, moving the
  /// blocks it may; forward, it keeps the state at every
  /// kSnapshotBlocks-th block in fwdSnapshots.
  /// `movable(b, d)` says whether block b's tasks are the last pass's
  /// moved by d given its resources' state moved by d, `inputsMoved(b, d)`
  /// whether what a run of blocks moved by d from b reads from outside it
  /// is, `swapBlock(b)` swaps block b's stored timing with undo's, and
  /// `timeBlock(b, record)` times it, filling in the record's latestEnd and
  /// slack. Returns false when stopped.
  template <typename Movable, typename InputsMoved, typename SwapBlock,
            typename TimeBlock>
  bool runBlocks(BlockPass &pass, int32_t first, bool forward, bool keepUndo,
                 bool mayMove, int64_t &timed, int64_t &moved, Movable movable,
                 InputsMoved inputsMoved, SwapBlock swapBlock,
                 TimeBlock timeBlock);

  /// What the last update() replaced, for revert(): the changed ops'
  /// configurations, their built states and their edges', and the timing
  /// of every block it timed again (the BlockPasses keep their own).
  /// Everything is swapped, never copied, so a rejected proposal costs its
  /// swaps, not a second delta simulation; the states swapped out are the
  /// next update's to build into.
  struct Undo {
    bool valid = false;
    std::vector<std::pair<size_t, OpConfig>> configs;
    std::vector<size_t> opIds;
    std::vector<int32_t> edgeIds;
    /// opStates[k] is op opIds[k]'s state before the update; likewise
    /// edgeStates. Grown, never shrunk: spares for the next update.
    std::vector<OpState> opStates;
    std::vector<Edge> edgeStates;
    /// The stored timing of the ops and edges of the blocks the update
    /// timed again, as they were (elsewhere, what an earlier update left).
    struct OpTiming {
      std::vector<double> fwdEnd, bwdEnd, bwdStart, syncEnd;
    };
    struct EdgeTiming {
      std::vector<double> fwdEnd, bwdPackedAt;
    };
    std::vector<OpTiming> opTiming;
    std::vector<EdgeTiming> edgeTiming;
    /// fwdSnapshots from firstSnapshot on, before the update.
    std::vector<std::vector<double>> fwdSnapshots;
    size_t firstSnapshot = 0;
    double lastPassEnd = 0;
    std::vector<TimelineEvent> timeline;
    std::vector<int64_t> recomputePeak;
    /// The sums of the blocks (and their groups) the update changed, as
    /// they were.
    std::vector<std::pair<int32_t, BlockSums>> blockSums, groupSums;
  } undo;

  /// Takes the last delta simulation's timing back (revert()).
  void revertTiming();

  Impl(const Graph &graph, const Machine &machine, const CostModel &costModel,
       SimOptions options);

  /// The id of the route from `src` to `dst` in `routes`.
  int32_t routeId(int64_t src, int64_t dst);

  const RouteInfo &route(int64_t src, int64_t dst);

  /// The instances of each (group, replica) pair: for `group` numbering
  /// instances by the data they hold, the instances of one replica that
  /// hold the same data. Empty pairs are left out.
  static std::vector<std::vector<int32_t>>
  membersPerReplica(const OpState &st, const std::vector<int32_t> &group,
                    int32_t numGroups);

  /// A gradient sync of `bytes` over `members` of `st`: an all-reduce, or
  /// when `sharded` a reduce-scatter of the gradients and an all-gather of
  /// `gatherBytes` of updated parameters (-1: as many as the gradients),
  /// each priced as half an all-reduce of its size, at the rate of a
  /// bucket of at least `bucketBytes`.
  Collective makeCollective(const OpState &st, std::vector<int32_t> members,
                            int64_t bytes, bool sharded,
                            int64_t bucketBytes = 0, int64_t gatherBytes = -1);

  /// Builds into `st` what op `i` is under `config`.
  void buildOpState(size_t i, const OpConfig &config, OpState &st);
  /// A ring op's kernel times, bytes and blocks in flight (OpConfig::ring).
  void priceRing(size_t i, const OpConfig &config,
                 const geometry::OpLayout &layout, OpState &st);

  /// Rebuilds the transfers of edge `e` for the current configurations.
  void buildEdge(Edge &e);

  /// The transfer of an edge before `e` from the same result that brings a
  /// box containing `box` from copy group `group` to `device`, as (edge,
  /// transfer), or (-1, -1).
  std::pair<int32_t, int32_t> sharedCopy(const Edge &e, int32_t group,
                                         int64_t device, const Slice &box);

  /// Builds the transfers of `e` between the producer and consumer states:
  /// for the simulation (`forSimulation`), sharing copies with earlier
  /// edges of the same result and in rounds; else only what the DP's
  /// additive edge costs read.
  void buildTransfers(Edge &e, const OpState &prod, const OpState &cons,
                      bool forSimulation = false);

  /// Per-device communication time and received bytes, and bytes per link
  /// kind, of the transfers of `e`.
  void summarizeEdge(Edge &e, const OpState &prod, const OpState &cons);

  /// Issues the transfers of an edge in rounds (SimOptions::
  /// exchangesAsCollectives), as NCCL's rings and MPI's pairwise
  /// all-to-all move an exchange: with the devices involved
  /// numbered 0..n-1, round r moves every piece from device i to device
  /// i + r (mod n) (i xor r in a complete exchange over a power of two),
  /// so that each round sends from and receives into every device at most
  /// once and the devices finish together. In destination
  /// order, the transfers of later destinations would queue behind the
  /// earlier ones' on the senders' links, and each destination would be
  /// ready one piece after the one before. `boxes` (one per transfer,
  /// where given) moves with its transfers. Only earlier edges' transfers are
  /// referred to by index (sharedCopy), so this edge's may still be reordered.
  void orderAsRounds(std::vector<Transfer> &transfers,
                     const std::vector<int64_t> &srcDevices,
                     const std::vector<int64_t> &dstDevices,
                     std::vector<Slice> *boxes);

  /// Whether `transfers` move a piece from each of the `n` devices involved
  /// (numbered by devicePosition) to every other one.
  bool completeExchange(const std::vector<Transfer> &transfers,
                        const std::vector<int64_t> &srcDevices,
                        const std::vector<int64_t> &dstDevices, int64_t n);
  /// Scratch of completeExchange.
  std::vector<int64_t> pairScratch;

  /// Transfers that bring one partition its pieces from k - 1 others of its
  /// node (k >= 2 pieces, a local one included) are an exchange that NCCL
  /// runs as one collective: an all-gather in forward (sequence
  /// parallelism's gather before a column-parallel linear), a
  /// reduce-scatter of gradients in backward. On a link priced by NCCL's
  /// measured collective curve (and no point-to-point curve: GPUs) each
  /// piece moves at the bus bandwidth of the whole, k pieces, which is the
  /// half all-reduce the simulator charges for an all-gather; the link's
  /// datasheet rate would price it faster than NCCL moves it. A
  /// destination fed by one remote piece alone (a pipeline send) keeps the
  /// link's rate. `locals` are the pieces the destinations hold already.
  void priceExchanges(std::vector<Transfer> &transfers,
                      const std::vector<int64_t> &srcDevices,
                      const std::vector<int64_t> &dstDevices,
                      const std::vector<LocalDep> &locals);

  Transfer makeTransfer(int32_t src, int32_t dst, int64_t srcDevice,
                        int64_t dstDevice, int64_t bytes);

  const OpState &stateFor(size_t op, const OpConfig &config);

  double nodeCost(size_t op, const OpConfig &config);

  double edgeCost(size_t consumer, size_t operand,
                  const OpConfig &producerConfig,
                  const OpConfig &consumerConfig);

  void record(int32_t op, TaskKind kind, int32_t resource, double start,
              double end);

  /// The sending rank's part of transfer `t` (packing it and handing it
  /// over: a kernel's worth of its time, and a core), issued now and ready
  /// at `ready`; returns when it starts.
  double packMessage(const Transfer &t, double ready, int32_t edge,
                     TaskKind kind);

  /// Runs a point-to-point transfer ready at `ready`, whose sender began
  /// packing it at `packedAt` (packMessage; < 0: packs it now); returns its
  /// end.
  double runTransfer(const Transfer &t, double ready, int32_t edge,
                     TaskKind kind, double packedAt = -1);

  /// With shared cores, the core of `a`'s node that frees first (issue
  /// order, as a list scheduler) when `a` and `b` share the node; else -1.
  int64_t sharedCore(int64_t a, int64_t b);

  double runKernel(int64_t device, double ready, double time, int32_t op,
                   TaskKind kind);

  /// ZeRO-3: all-gathers op `i`'s sharded weights before its kernels, which
  /// wait for them (`ready`, per instance). They are issued with the op and
  /// may start as early as the communication stream allows (prefetch).
  void gatherWeights(int32_t i, std::vector<double> &ready);

  /// Whether transfer `t` stays inside one node.
  bool withinNode(const Transfer &t) const;

  /// Whether the members of collective `c` of `st` share one node.
  bool withinNode(const OpState &st, const Collective &c) const;

  /// Runs instance `p`'s kernel of `time` once `ready`; with overlapped
  /// communication arriving by `commReady`, the kernel runs in chunks
  /// beside it and ends no sooner than the last chunk after it. Records
  /// the kernel's start in `start`.
  double runChunkedKernel(OpState &st, size_t p, double ready, double commReady,
                          double time, int32_t op, TaskKind kind,
                          double &start);

  /// A kernel on `device` that would end at `end` but consumes data that
  /// arrives in chunks ends no sooner than `until`: the device stays busy.
  double holdUntil(int64_t device, double end, double until);

  void forward(int32_t i);

  void backward(int32_t i);

  /// A staged kernel's statistics reductions, one after another (each
  /// waits for its stage), priced after the kernel: the stages' kernel time
  /// is the op's whole, and the reductions hold every member until done.
  void runStatSyncs(int32_t i, const std::vector<Collective> &syncs,
                    std::vector<double> &end);

  /// SimOptions::regatherInputs: op `i`'s received activation slices are
  /// fetched again once its backward kernel starts, beside the
  /// input-gradient half; the weight-gradient half waits for them.
  void regatherInputs(int32_t i);

  /// Runs op `x`'s forward kernels (and partial sums) again if it drops its
  /// results, after the recomputed ops it reads (each once per pass).
  void recompute(int32_t x);

  /// Gradient all-reduces of op `i`, none starting before `notBefore`.
  void syncGradients(int32_t i, double notBefore);

  void update(int32_t i);

  /// Times the whole iteration. With `keepUndo` (a delta simulation), the
  /// timing it replaces goes to `undo` and the BlockPasses' last* fields.
  double runTiming(bool keepUndo = false);

  /// Set when a simulation stopped part way (SimOptions::stopRequested):
  /// the built states and timing are incomplete until the next simulate().
  bool stopped = false;
  /// Checks the options' stop request between two ops; true once stopped.
  bool stopNow() {
    if (!stopped && options.stopRequested())
      stopped = true;
    return stopped;
  }
  /// What a stopped simulation returns: stopped, every device's capacity
  /// known, nothing else.
  SimResult stoppedResult() const;

  /// The result of the timing pass that took `iterationTime`; with
  /// `keepUndo` (a delta simulation), the block sums it takes again go to
  /// undo.
  SimResult result(double iterationTime, bool keepUndo = false);
};

} // namespace ppc::sim

#endif // PPC_SIMULATOR_SIMULATORIMPL_H
