//===- Baselines.cpp - expert strategies ----------------------------------===//
//
// Megatron-LM's tensor parallelism and Krizhevsky's "one weird trick", built
// from the structure of a sim::Graph alone (op kinds, iteration spaces and
// edges), so they apply to any imported model that has the shapes they
// expect, and fall back to data parallelism op by op where it does not.
//
//===----------------------------------------------------------------------===//

#include "ppc/Search/Search.h"
#include "ppc/Support/Alternatives.h"

#include "StageDp.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

namespace ppc::search {

namespace {

bool hasWeightOperand(const sim::Op &op) {
  for (const sim::Source &source : op.operands)
    if (source.kind == sim::Source::Kind::Weight)
      return true;
  return false;
}

/// A linear layer: a matrix product with a weight operand.
bool isWeightedContraction(const sim::Op &op) {
  return op.space.matrixProduct && hasWeightOperand(op);
}

/// The largest divisor of `numDevices` that divides `size`.
int64_t largestCommonDegree(int64_t size, int64_t numDevices) {
  return std::gcd(size, numDevices);
}

int firstSampleDim(const IterationSpace &space) {
  for (size_t d = 0; d < space.dims.size(); ++d)
    if (space.dims[d].kind == IterKind::Sample && space.dims[d].splittable)
      return static_cast<int>(d);
  return -1;
}

int firstSplittableDim(const IterationSpace &space, IterKind kind,
                       int64_t degree) {
  for (size_t d = 0; d < space.dims.size(); ++d)
    if (space.dims[d].kind == kind && space.dims[d].splittable &&
        space.dims[d].size % degree == 0)
      return static_cast<int>(d);
  return -1;
}

/// Degree `tensorDegree` on dim `tensorDim` (innermost, stride 1: each
/// tensor-parallel group is a contiguous block of devices, inside a node),
/// and the sample dim split by as much of `dataDegree` as it divides, one
/// partition per group. An op that cannot take the tensor split is
/// replicated in its group, as Megatron-LM runs layer norms and residuals:
/// whole on every device of the group (or split along the sequence with
/// `sequenceParallel`, Korthikanti et al.'s sequence parallelism). Devices
/// the sample split leaves over hold more replicas, so every op spans the
/// machine.
OpConfig hybridConfig(const sim::Op &op, int tensorDim, int64_t tensorDegree,
                      int64_t dataDegree, bool sequenceParallel = false) {
  const IterationSpace &space = op.space;
  OpConfig config;
  config.degrees.assign(space.dims.size(), 1);
  int sample = firstSampleDim(space);
  bool tensorSplit = tensorDim >= 0 && tensorDim != sample &&
                     tensorDegree > 1 && space.dims[tensorDim].splittable &&
                     space.dims[tensorDim].size % tensorDegree == 0;
  if (!tensorSplit && sequenceParallel && tensorDegree > 1) {
    tensorDim = firstSplittableDim(space, IterKind::Attribute, tensorDegree);
    tensorSplit = tensorDim >= 0;
  }
  int64_t group = tensorSplit ? tensorDegree : 1;
  if (tensorSplit)
    config.degrees[tensorDim] = tensorDegree;
  int64_t samples = 1;
  if (sample >= 0) {
    samples = largestCommonDegree(space.dims[sample].size, dataDegree);
    config.degrees[sample] = samples;
  }
  config.replicas = tensorDegree * dataDegree / (group * samples);
  // Strides: the tensor split innermost, then the replicas, then the
  // samples; one per partitioned dim in dim order, the replicas' last.
  for (size_t d = 0; d < space.dims.size(); ++d) {
    if (config.degrees[d] == 1)
      continue;
    config.strides.push_back(
        static_cast<int>(d) == tensorDim ? 1 : group * config.replicas);
  }
  if (config.replicas > 1)
    config.strides.push_back(group);
  OpConfig contiguous = config;
  contiguous.strides.clear();
  if (config.strides == contiguous.effectiveStrides())
    config.strides.clear(); // the contiguous default says the same
  return config;
}

/// The dim of result 0 indexed by iteration dim `iterDim` along which
/// `config`'s partial sums can be reduce-scattered (checkConfig), or -1.
int64_t scatterDimAlong(const IterationSpace &space, OpConfig config,
                        int iterDim, int64_t numDevices) {
  if (iterDim < 0 || space.results.empty())
    return -1;
  const std::vector<DimAccess> &dims = space.results[0].dims;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d].iterDim != iterDim)
      continue;
    config.scatterDim = static_cast<int64_t>(d);
    if (checkConfig(space, config, numDevices).ok())
      return config.scatterDim;
  }
  return -1;
}

/// Sequence parallelism after a row-parallel layer: the result dim along
/// which `config`'s partial sums are reduce-scattered so that each member of
/// the tensor-parallel group keeps the piece of the sequence its group
/// neighbour outside the block computes (the dim indexed by the first
/// attribute dim the group splits evenly), or -1 where that does not fit.
int64_t sequenceScatterDim(const sim::Op &op, const OpConfig &config,
                           int64_t tensorDegree, int64_t numDevices) {
  return scatterDimAlong(
      op.space, config,
      firstSplittableDim(op.space, IterKind::Attribute, tensorDegree),
      numDevices);
}

/// Which op reads which result: (consumer op, operand index) per result.
struct Use {
  size_t op;
  size_t operand;
};
using UseMap = std::map<std::pair<size_t, int32_t>, std::vector<Use>>;

UseMap buildUses(const sim::Graph &graph) {
  UseMap uses;
  for (size_t c = 0; c < graph.ops.size(); ++c)
    for (size_t i = 0; i < graph.ops[c].operands.size(); ++i) {
      const sim::Source &source = graph.ops[c].operands[i];
      if (source.kind == sim::Source::Kind::Op)
        uses[{static_cast<size_t>(source.index), source.result}].push_back(
            {c, i});
    }
  return uses;
}

/// One Megatron block grown from a column-parallel linear: the split of its
/// output features is followed through the ops that read it (elementwise
/// ops, reshapes and transposes into heads, attention matmuls, softmax)
/// until every path ends in a linear layer that contracts over it (the
/// row-parallel partner) or another op that sums it away (the output head's
/// cross-entropy over a split vocabulary). `dimOf` gets the iteration dim split
/// in each op of the block; false if some path ends anywhere else (the graph
/// output, an op that cannot split that dim), in which case the block is not
/// used. `endsInLoss` tells whether some path ended in an op other than a
/// linear layer.
bool growBlock(const sim::Graph &graph, const UseMap &uses, size_t column,
               int columnDim, int64_t degree,
               const std::map<size_t, int> &assigned,
               std::map<size_t, int> &dimOf, bool &endsInLoss) {
  endsInLoss = false;
  dimOf[column] = columnDim;
  // (op, result, tensor dim) whose tensor dim is split.
  struct Split {
    size_t op;
    int32_t result;
    size_t tensorDim;
  };
  std::vector<Split> work;
  auto pushResults = [&](size_t op, int dim) -> bool {
    const IterationSpace &space = graph.ops[op].space;
    bool any = false;
    for (size_t r = 0; r < space.results.size(); ++r)
      for (size_t t = 0; t < space.results[r].dims.size(); ++t)
        if (space.results[r].dims[t].iterDim == dim) {
          work.push_back({op, static_cast<int32_t>(r), t});
          any = true;
        }
    return any; // false: the split dim is contracted away (partial sums)
  };
  if (!pushResults(column, columnDim))
    return false;
  while (!work.empty()) {
    Split split = work.back();
    work.pop_back();
    auto it = uses.find({split.op, split.result});
    if (it == uses.end())
      return false; // a graph output: no row-parallel partner on this path
    for (const Use &use : it->second) {
      const sim::Op &consumer = graph.ops[use.op];
      const DimAccess &access =
          consumer.space.operands[use.operand].dims[split.tensorDim];
      if (access.isWhole())
        return false;
      int dim = access.iterDim;
      const IterDim &iterDim = consumer.space.dims[dim];
      auto previous = dimOf.find(use.op);
      if (previous == dimOf.end()) {
        auto other = assigned.find(use.op);
        if (other != assigned.end()) {
          if (other->second != dim)
            return false;
          continue; // joins a block already built (q, k, v meet)
        }
      } else {
        if (previous->second != dim)
          return false;
        continue;
      }
      if (!iterDim.splittable || iterDim.size % degree != 0 ||
          iterDim.kind == IterKind::Sample)
        return false;
      dimOf[use.op] = dim;
      if (isWeightedContraction(consumer)) {
        // The row-parallel partner must contract over the split features.
        if (iterDim.kind != IterKind::Reduction)
          return false;
        continue;
      }
      // A split reduction the consumer sums away ends the path as the
      // row-parallel partner does: a vocabulary-parallel loss.
      if (!pushResults(use.op, dim)) {
        if (iterDim.kind != IterKind::Reduction)
          return false;
        endsInLoss = true;
      }
    }
  }
  return true;
}

/// The iteration dim of a linear layer that indexes its weight's output
/// features: a parameter dim that indexes the result and the weight.
int columnDimOf(const sim::Op &op) {
  const IterationSpace &space = op.space;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    if (op.operands[i].kind != sim::Source::Kind::Weight)
      continue;
    for (const DimAccess &access : space.operands[i].dims) {
      if (access.isWhole())
        continue;
      const IterDim &dim = space.dims[access.iterDim];
      if (dim.kind == IterKind::Parameter && dim.splittable &&
          !space.makesPartialSum(access.iterDim))
        return access.iterDim;
    }
  }
  return -1;
}

/// Grows a block (growBlock) from every linear layer `from(op)` accepts
/// that no block holds yet and whose output features divide by `degree`,
/// into `dimOf`; the ops of blocks that end in a loss into `lossBlocks`
/// where given.
template <typename From>
void growBlocks(const sim::Graph &graph, const UseMap &uses, int64_t degree,
                From from, std::map<size_t, int> &dimOf,
                std::set<size_t> *lossBlocks) {
  for (size_t op = 0; op < graph.ops.size(); ++op) {
    if (dimOf.count(op) || !from(op) || !isWeightedContraction(graph.ops[op]))
      continue;
    int column = columnDimOf(graph.ops[op]);
    if (column < 0 || graph.ops[op].space.dims[column].size % degree != 0)
      continue;
    std::map<size_t, int> block;
    bool endsInLoss = false;
    if (!growBlock(graph, uses, op, column, degree, dimOf, block, endsInLoss))
      continue;
    dimOf.insert(block.begin(), block.end());
    if (endsInLoss && lossBlocks)
      for (const auto &entry : block)
        lossBlocks->insert(entry.first);
  }
}

/// The rows of a table a lookup reads (an embedding's vocabulary): a
/// splittable reduction dim that a weight operand indexes and no other
/// operand does, so that each member of a split holds some rows and the
/// partial results are summed. -1 if `op` has none.
int lookupDimOf(const sim::Op &op) {
  const IterationSpace &space = op.space;
  for (size_t d = 0; d < space.dims.size(); ++d) {
    if (space.dims[d].kind != IterKind::Reduction || !space.dims[d].splittable)
      continue;
    bool weight = false, other = false;
    for (size_t i = 0; i < op.operands.size(); ++i)
      if (space.operands[i].indexes(d))
        (op.operands[i].kind == sim::Source::Kind::Weight ? weight : other) =
            true;
    if (weight && !other)
      return static_cast<int>(d);
  }
  return -1;
}

/// Where each op carries the sequence: per op, the iteration dim that
/// indexes the sequence of the tensors it reads (-1: none), followed from
/// the graph inputs through the ops' tensor maps as sim::followBatch
/// follows the batch (an input's sequence is its first tensor dim after
/// the batch that its first reader indexes by a splittable dim); and
/// whether the op mixes positions: it reads some activation's sequence
/// whole, or by another dim (attention's keys and values, read by the key
/// positions).
struct SequenceFlow {
  std::vector<int> dim;
  std::vector<char> mixes;
  /// Of a mixing op, the splittable iteration dim by which it reads another
  /// position's sequence (attention's keys); -1 where there is none.
  std::vector<int> mixDim;
};

SequenceFlow followSequence(const sim::Graph &graph) {
  size_t n = graph.ops.size();
  SequenceFlow flow{std::vector<int>(n, -1), std::vector<char>(n, 0),
                    std::vector<int>(n, -1)};
  // seqOf[op][result]: the result's tensor dim carrying the sequence.
  std::vector<std::vector<int>> seqOf(n);
  std::map<int32_t, int> inputSeq; // graph input -> its sequence dim
  auto splittable = [](const IterationSpace &space, int d) {
    return d >= 0 && space.dims[d].splittable;
  };
  for (size_t i = 0; i < n; ++i) {
    const sim::Op &op = graph.ops[i];
    const IterationSpace &space = op.space;
    int sample = firstSampleDim(space);
    // An input's sequence, or where no other operand has one a
    // constant's: the zigzag order's gathers (ppc-zigzag-sequence) read
    // the tokens whole and index the sequence by their constant indices.
    auto firstSequenceDim = [&](size_t o) {
      const std::vector<DimAccess> &dims = space.operands[o].dims;
      for (size_t t = 0; t < dims.size(); ++t)
        if (!dims[t].isWhole() && dims[t].iterDim != sample &&
            splittable(space, dims[t].iterDim) &&
            space.dims[dims[t].iterDim].kind != IterKind::Reduction)
          return static_cast<int>(t);
      return -1;
    };
    auto tensorSeq = [&](size_t o) -> int {
      const sim::Source &src = op.operands[o];
      if (src.kind == sim::Source::Kind::Op)
        return seqOf[src.index][src.result];
      if (src.kind != sim::Source::Kind::Input)
        return -1;
      auto [it, inserted] = inputSeq.try_emplace(src.index, -1);
      if (inserted)
        it->second = firstSequenceDim(o);
      return it->second;
    };
    for (size_t o = 0; o < op.operands.size() && flow.dim[i] < 0; ++o) {
      int t = tensorSeq(o);
      if (t < 0)
        continue;
      int d = space.operands[o].dims[t].iterDim;
      if (splittable(space, d))
        flow.dim[i] = d;
    }
    for (size_t o = 0; o < op.operands.size() && flow.dim[i] < 0; ++o)
      if (op.operands[o].kind == sim::Source::Kind::Constant)
        if (int t = firstSequenceDim(o); t >= 0)
          flow.dim[i] = space.operands[o].dims[t].iterDim;
    for (size_t o = 0; o < op.operands.size(); ++o) {
      int t = tensorSeq(o);
      if (t < 0 || op.operands[o].kind != sim::Source::Kind::Op)
        continue;
      int d = space.operands[o].dims[t].iterDim;
      if (d == flow.dim[i])
        continue;
      flow.mixes[i] = 1;
      if (flow.mixDim[i] < 0 && splittable(space, d))
        flow.mixDim[i] = d;
    }
    seqOf[i].assign(space.results.size(), -1);
    if (flow.dim[i] < 0)
      continue;
    for (size_t r = 0; r < space.results.size(); ++r)
      for (size_t t = 0; t < space.results[r].dims.size(); ++t)
        if (space.results[r].dims[t].iterDim == flow.dim[i]) {
          seqOf[i][r] = static_cast<int>(t);
          break;
        }
  }
  return flow;
}

/// Per op, the iteration dim that carries the experts (-1: none): followed
/// from each mixture-of-experts dispatch's result (IterationSpace::
/// expertDim) through the ops' tensor maps, as followSequence follows the
/// sequence, until an op reads it whole (the combine). The dispatch
/// itself, which routes its own tokens, carries none.
std::vector<int> followExperts(const sim::Graph &graph) {
  size_t n = graph.ops.size();
  std::vector<int> dim(n, -1);
  // expertsOf[op][result]: the result's tensor dim indexing the experts.
  std::vector<std::vector<int>> expertsOf(n);
  for (size_t i = 0; i < n; ++i) {
    const sim::Op &op = graph.ops[i];
    const IterationSpace &space = op.space;
    for (size_t o = 0; o < op.operands.size() && dim[i] < 0; ++o) {
      const sim::Source &src = op.operands[o];
      if (src.kind != sim::Source::Kind::Op)
        continue;
      int t = expertsOf[src.index][src.result];
      int d = t < 0 ? -1 : space.operands[o].dims[t].iterDim;
      if (d >= 0 && space.dims[d].splittable &&
          space.dims[d].kind != IterKind::Reduction)
        dim[i] = d;
    }
    int carried = space.expertDim >= 0 ? space.expertDim : dim[i];
    expertsOf[i].assign(space.results.size(), -1);
    for (size_t r = 0; r < space.results.size() && carried >= 0; ++r)
      for (size_t t = 0; t < space.results[r].dims.size(); ++t)
        if (space.results[r].dims[t].iterDim == carried) {
          expertsOf[i][r] = static_cast<int>(t);
          break;
        }
  }
  return dim;
}

/// One axis of the device grid, innermost first: its degree and the
/// iteration dim it splits (-1: the op is replicated over it).
struct GridAxis {
  int64_t degree = 1;
  int dim = -1;
};

/// The configuration that lays `space` out on the grid of `axes`
/// (innermost first): axis k's devices lie the product of the inner
/// degrees apart. Consecutive axes on one dim split it together, the outer
/// one major (sequence parallelism inside a context-parallel chunk). An
/// axis whose dim cannot take the split (unsplittable, not dividing, or
/// already split by a non-adjacent axis) replicates the op instead; the
/// replicated axes become the replicas, moved innermost when they are not
/// adjacent, since one stride must reach them all.
OpConfig gridConfig(const IterationSpace &space, std::vector<GridAxis> axes) {
  std::map<int, int64_t> split; // iteration dim -> its degree so far
  int previous = -1;            // the dim the last axis split (-1: none)
  for (GridAxis &axis : axes) {
    if (axis.degree == 1)
      continue;
    if (axis.dim >= 0) {
      auto it = split.find(axis.dim);
      int64_t have = it == split.end() ? 1 : it->second;
      const IterDim &dim = space.dims[axis.dim];
      bool fits = dim.splittable && dim.size % (have * axis.degree) == 0 &&
                  (it == split.end() || previous == axis.dim);
      if (fits)
        split[axis.dim] = have * axis.degree;
      else
        axis.dim = -1;
    }
    previous = axis.dim;
  }
  // Replicated axes that an outer split separates go innermost.
  bool replicatedSeen = false, separated = false, splitAfter = false;
  for (const GridAxis &axis : axes) {
    if (axis.degree == 1)
      continue;
    if (axis.dim < 0) {
      if (replicatedSeen && splitAfter)
        separated = true;
      replicatedSeen = true;
    } else if (replicatedSeen) {
      splitAfter = true;
    }
  }
  if (separated)
    std::stable_partition(axes.begin(), axes.end(),
                          [](const GridAxis &a) { return a.dim < 0; });
  OpConfig config;
  config.degrees.assign(space.dims.size(), 1);
  std::vector<int64_t> strideOf(space.dims.size(), 0);
  int64_t below = 1, replicaStride = 0;
  for (const GridAxis &axis : axes) {
    if (axis.degree == 1)
      continue;
    if (axis.dim < 0) {
      if (config.replicas == 1)
        replicaStride = below;
      config.replicas *= axis.degree;
    } else {
      if (config.degrees[axis.dim] == 1)
        strideOf[axis.dim] = below;
      config.degrees[axis.dim] *= axis.degree;
    }
    below *= axis.degree;
  }
  for (size_t d = 0; d < space.dims.size(); ++d)
    if (config.degrees[d] > 1)
      config.strides.push_back(strideOf[d]);
  if (config.replicas > 1)
    config.strides.push_back(replicaStride);
  OpConfig contiguous = config;
  contiguous.strides.clear();
  if (config.strides == contiguous.effectiveStrides())
    config.strides.clear(); // the contiguous default says the same
  return config;
}

/// The ops an all-to-all context exchange runs split by heads: those of a
/// tensor-parallel block (`tensorDimOf`, not the weighted linears) on a
/// path from a position-mixing op to a position-mixing op through such
/// ops (the fused attention alone; scores, softmax, dropout and context
/// unfused), so that the exchanges fall right around them.
std::vector<char> headSplitOps(const sim::Graph &graph,
                               const std::map<size_t, int> &tensorDimOf,
                               const SequenceFlow &flow) {
  size_t n = graph.ops.size();
  auto inner = [&](size_t op) {
    return tensorDimOf.count(op) && !isWeightedContraction(graph.ops[op]);
  };
  std::vector<char> fromMixing(n, 0), toMixing(n, 0);
  for (size_t op = 0; op < n; ++op) {
    if (!inner(op))
      continue;
    fromMixing[op] = flow.mixes[op];
    for (const sim::Source &src : graph.ops[op].operands)
      if (src.kind == sim::Source::Kind::Op && fromMixing[src.index])
        fromMixing[op] = 1;
  }
  for (size_t op = n; op-- > 0;)
    if (inner(op) && (toMixing[op] |= flow.mixes[op]))
      for (const sim::Source &src : graph.ops[op].operands)
        if (src.kind == sim::Source::Kind::Op && inner(src.index))
          toMixing[src.index] = 1;
  std::vector<char> region(n, 0);
  for (size_t op = 0; op < n; ++op)
    region[op] = fromMixing[op] && toMixing[op];
  return region;
}

} // namespace

namespace {

/// megatron(), and in `unsplitHeads` the ops an all-to-all context
/// exchange should have split by heads but could not (their heads do not
/// divide by tp x cp), which run split along the sequence instead; in
/// `unringed` the ops a ring exchange should have run as rings but could
/// not, and why.
sim::Strategy buildMegatron(
    const sim::Graph &graph, const Machine &machine,
    const MegatronOptions &options, std::vector<std::string> *unsplitHeads,
    std::vector<std::pair<std::string, std::string>> *unringed = nullptr) {
  int64_t numDevices = machine.numDevices();
  // A tensor-parallel degree that does not divide the machine is reduced to
  // the largest one that does; a context-parallel degree to the largest
  // that divides what is left.
  int64_t tp =
      std::gcd(std::max<int64_t>(options.tensorParallel, 1), numDevices);
  int64_t cp =
      std::gcd(std::max<int64_t>(options.contextParallel, 1), numDevices / tp);
  int64_t dp = numDevices / (tp * cp);
  int64_t ep =
      std::gcd(std::max<int64_t>(options.expertParallel, 1), numDevices);
  // An expert tensor-parallel degree is reduced to the largest divisor of
  // what ep leaves (0: the layouts before it, see MegatronOptions).
  int64_t etp = options.expertTensorParallel > 0
                    ? std::gcd(options.expertTensorParallel, numDevices / ep)
                    : 0;
  bool expertGrid = ep > 1 || etp > 0;
  etp = std::max<int64_t>(etp, 1);
  std::vector<int> expertDim;
  if (expertGrid)
    expertDim = followExperts(graph);
  bool byHeads = cp > 1 && options.contextExchange == ContextExchange::AllToAll;
  // Key blocks: the keys over the largest power of two up to sqrt(cp), the
  // query positions over the rest, which balances the rows of queries and
  // results a device holds against its rows of keys and values.
  int64_t keyBlocks = 1;
  if (cp > 1 && options.contextExchange == ContextExchange::KeyBlocks)
    while (keyBlocks * keyBlocks * 4 <= cp && cp % (keyBlocks * 2) == 0)
      keyBlocks *= 2;
  UseMap uses = buildUses(graph);

  // The blocks are found without tensor parallelism too: selective
  // recomputation works inside them, and an all-to-all context exchange
  // splits their attention by heads.
  std::map<size_t, int> tensorDimOf;
  // Ops of a block ending in a loss: selective recomputation leaves them
  // (Megatron-LM recomputes inside the transformer layers only).
  std::set<size_t> lossBlocks;
  if (tp > 1 || options.selectiveRecompute || byHeads)
    growBlocks(
        graph, uses, tp, [](size_t) { return true; }, tensorDimOf, &lossBlocks);
  // Linear layers outside blocks (the output head over the vocabulary) are
  // column parallel in their group, as Megatron's vocabulary-parallel head:
  // left whole on one device per group they would run on 1/tp of the
  // machine.
  if (tp > 1)
    for (size_t op = 0; op < graph.ops.size(); ++op) {
      if (tensorDimOf.count(op) || !isWeightedContraction(graph.ops[op]))
        continue;
      int column = columnDimOf(graph.ops[op]);
      if (column >= 0 && graph.ops[op].space.dims[column].size % tp == 0)
        tensorDimOf[op] = column;
    }
  // Embedding tables are split along their rows in the group, as
  // Megatron's vocabulary-parallel embedding: each member looks up the
  // tokens in its rows, and the partial results are summed (reduce-
  // scattered along the sequence with sequence parallelism).
  if (tp > 1)
    for (size_t op = 0; op < graph.ops.size(); ++op) {
      if (tensorDimOf.count(op))
        continue;
      int rows = lookupDimOf(graph.ops[op]);
      if (rows >= 0 && graph.ops[op].space.dims[rows].size % tp == 0)
        tensorDimOf[op] = rows;
    }

  // Each expert's feed-forward layers as a block of their own, split etp
  // ways (the dense blocks above are split tp ways).
  std::map<size_t, int> expertBlockDim;
  if (expertGrid && etp > 1)
    growBlocks(
        graph, uses, etp, [&](size_t op) { return expertDim[op] >= 0; },
        expertBlockDim, nullptr);

  std::vector<int> readers = sim::readerCounts(graph);
  SequenceFlow flow;
  std::vector<char> headSplit;
  if (cp > 1) {
    flow = followSequence(graph);
    if (byHeads)
      headSplit = headSplitOps(graph, tensorDimOf, flow);
  }
  sim::Strategy strategy;
  strategy.reserve(graph.ops.size());
  for (size_t op = 0; op < graph.ops.size(); ++op) {
    auto it = tensorDimOf.find(op);
    const IterationSpace &space = graph.ops[op].space;
    OpConfig config;
    bool onExperts = expertGrid && expertDim[op] >= 0;
    if (onExperts) {
      // Each expert's layers split over the etp innermost devices, the
      // experts over the next ep (one node's NVLink carries the
      // dispatch's and the combine's all-to-alls where they fit in it),
      // their tokens' samples over the rest.
      auto block = expertBlockDim.find(op);
      int sample = firstSampleDim(space);
      int64_t rest = numDevices / (ep * etp);
      int64_t samples =
          sample >= 0 ? largestCommonDegree(space.dims[sample].size, rest) : 1;
      config = gridConfig(
          space, {{etp, block == expertBlockDim.end() ? -1 : block->second},
                  {ep, expertDim[op]},
                  {rest / samples, -1},
                  {samples, sample}});
    } else if (cp == 1) {
      config = hybridConfig(
          graph.ops[op], tp == 1 || it == tensorDimOf.end() ? -1 : it->second,
          tp, dp, options.sequenceParallel);
    } else {
      // Devices tp innermost, then cp, then dp (Megatron-Core's order):
      // the context group splits the sequence (or, exchanged all-to-all,
      // the heads of attention further), the tensor group the block's dim
      // inside each chunk.
      int block = it == tensorDimOf.end() ? -1 : it->second;
      int seq = flow.dim[op];
      GridAxis tensor{tp, tp > 1 ? block : -1};
      if (tensor.dim < 0 && options.sequenceParallel)
        tensor.dim = seq;
      GridAxis context{cp, seq};
      // Key blocks: the keys inner, so that member k of a group of query
      // rows keeps their k-th piece of the summed result (scatterDim below),
      // the sequence chunk of its context rank.
      GridAxis keys;
      bool blocked =
          keyBlocks > 1 && flow.mixes[op] && flow.mixDim[op] >= 0 && seq >= 0;
      if (blocked) {
        keys = {keyBlocks, flow.mixDim[op]};
        context.degree = cp / keyBlocks;
      }
      if (byHeads && headSplit[op]) {
        if (block >= 0 && space.dims[block].splittable &&
            space.dims[block].size % (tp * cp) == 0) {
          tensor.dim = block;
          context.dim = block;
        } else if (unsplitHeads) {
          unsplitHeads->push_back(graph.ops[op].name);
        }
      }
      int sample = firstSampleDim(space);
      int64_t samples =
          sample >= 0 ? largestCommonDegree(space.dims[sample].size, dp) : 1;
      // Heads exchanged all-to-all inside each context group need the
      // context group innermost (Ulysses' heads chunk t * cp + c on the
      // device of tensor rank t and context rank c, one stride apart);
      // sequence parallelism needs the tensor group innermost (the
      // row-parallel layers' scattered piece t of chunk c is sequence
      // chunk c * tp + t). With both, the heads exchange crosses the
      // tensor groups: the same bytes, as point-to-point messages.
      bool contextInner = byHeads && !options.sequenceParallel;
      std::vector<GridAxis> axes = {
          tensor, keys, context, {dp / samples, -1}, {samples, sample}};
      if (contextInner)
        std::swap(axes[0], axes[2]);
      config = gridConfig(space, std::move(axes));
      if (blocked && config.degrees[flow.mixDim[op]] == keyBlocks)
        config.scatterDim = scatterDimAlong(space, config, seq, numDevices);
      if (options.contextExchange == ContextExchange::Ring && space.ring) {
        absl::StatusOr<OpConfig> ring = asRing(space, config, numDevices);
        if (ring.ok())
          config = std::move(*ring);
        else if (unringed)
          unringed->emplace_back(graph.ops[op].name, messageOf(ring.status()));
      }
    }
    if (options.sequenceParallel && tp > 1 && config.scatterDim < 0 &&
        !onExperts)
      config.scatterDim =
          sequenceScatterDim(graph.ops[op], config, tp, numDevices);
    if (options.distributedOptimizer && hasWeightOperand(graph.ops[op]))
      config.sharding = StateSharding::Optimizer;
    if (options.shardWeights && hasWeightOperand(graph.ops[op]))
      config.sharding = StateSharding::Parameters;
    config.recompute = options.selectiveRecompute && !options.recompute &&
                       it != tensorDimOf.end() && !lossBlocks.count(op) &&
                       !hasWeightOperand(graph.ops[op]) && readers[op] == 1 &&
                       sim::recomputeProblem(graph, op).ok();
    strategy.push_back(std::move(config));
  }
  if (options.recompute)
    recomputeLayers(graph, strategy);
  return strategy;
}

} // namespace

sim::Strategy megatron(const sim::Graph &graph, const Machine &machine,
                       const MegatronOptions &options) {
  return buildMegatron(graph, machine, options, nullptr);
}

absl::Status checkMegatron(const sim::Graph &graph, const Machine &machine,
                           const MegatronOptions &options) {
  int64_t numDevices = machine.numDevices();
  int64_t tp = std::max<int64_t>(options.tensorParallel, 1);
  int64_t cp = std::max<int64_t>(options.contextParallel, 1);
  if (numDevices % tp != 0 || (numDevices / tp) % cp != 0)
    return absl::InvalidArgumentError(
        "tp x cp = " + std::to_string(tp) + " x " + std::to_string(cp) +
        " does not divide the " + std::to_string(numDevices) + " devices");
  int64_t ep = std::max<int64_t>(options.expertParallel, 1);
  int64_t etp = options.expertTensorParallel;
  if (etp > 1) {
    if (numDevices % (ep * etp) != 0)
      return absl::InvalidArgumentError(
          "ep x etp = " + std::to_string(ep) + " x " + std::to_string(etp) +
          " does not divide the " + std::to_string(numDevices) + " devices");
    // Every expert layer takes the split: none is left whole behind it.
    std::vector<int> expertDim = followExperts(graph);
    for (size_t op = 0; op < graph.ops.size(); ++op) {
      if (expertDim[op] < 0 || !isWeightedContraction(graph.ops[op]))
        continue;
      int column = columnDimOf(graph.ops[op]);
      if (column >= 0 && graph.ops[op].space.dims[column].size % etp == 0)
        continue;
      return absl::InvalidArgumentError(
          "etp = " + std::to_string(etp) + " does not divide the " +
          (column < 0 ? std::string("features")
                      : std::to_string(graph.ops[op].space.dims[column].size) +
                            " output features") +
          " of '" + graph.ops[op].name + "'");
    }
  }
  if (cp > 1 && options.contextExchange == ContextExchange::Ring) {
    std::vector<std::pair<std::string, std::string>> unringed;
    buildMegatron(graph, machine, options, nullptr, &unringed);
    if (unringed.empty())
      return absl::OkStatus();
    return absl::InvalidArgumentError(
        "a ring context exchange cannot run '" + unringed.front().first +
        "' as a ring (" + unringed.front().second + ")" +
        (unringed.size() > 1
             ? " (nor " + std::to_string(unringed.size() - 1) + " more)"
             : std::string()));
  }
  if (cp == 1 || options.contextExchange != ContextExchange::AllToAll)
    return absl::OkStatus();
  std::vector<std::string> unsplit;
  buildMegatron(graph, machine, options, &unsplit);
  if (unsplit.empty())
    return absl::OkStatus();
  return absl::InvalidArgumentError(
      "an all-to-all context exchange splits attention by heads over tp x "
      "cp = " +
      std::to_string(tp * cp) + " devices, which the heads of '" +
      unsplit.front() + "' do not divide" +
      (unsplit.size() > 1
           ? " (nor " + std::to_string(unsplit.size() - 1) + " more)"
           : std::string()));
}

const std::vector<ContextExchangeInfo> &contextExchanges() {
  static const std::vector<ContextExchangeInfo> list = {
      {ContextExchange::AllGather, "all-gather",
       "attention split along the query positions; its keys and values "
       "all-gathered over the context-parallel group (Megatron-Core's "
       "cp_comm_type all_gather)"},
      {ContextExchange::AllToAll, "all-to-all",
       "attention split by heads over tp x cp, the sequence whole: an "
       "all-to-all from the sequence split to the heads split before it "
       "and back after (DeepSpeed-Ulysses; cp_comm_type a2a)"},
      {ContextExchange::KeyBlocks, "key-blocks",
       "attention split along its keys too (over the largest power of two "
       "up to the square root of cp, its query positions over the rest), "
       "the blocks merged by log-sum-exp and the results reduce-scattered "
       "back to the sequence split: a device holds that share of the keys "
       "and values, not all of them (ppc's own)"},
      {ContextExchange::Ring, "ring",
       "attention split along the query positions, its keys and values "
       "passed around the context-parallel group a block at a time while "
       "each member computes, merged by log-sum-exp (ring attention: "
       "Megatron-Core's cp_comm_type p2p; its causal load balancing is the "
       "zigzag order, ppc-zigzag-sequence)"},
  };
  return list;
}

namespace {

/// The bytes of training state (weights, gradients, optimizer state) the
/// fullest device holds at least in a Megatron layout of `tp` x `pp` on
/// `devices`: a stage holds at least 1/pp of every weight's bytes, tensor
/// or expert parallelism (`tp` the larger) splits them at most tp ways,
/// and the optimizer state (with
/// `shardWeights`, everything) is at most split over every device.
int64_t trainingStateFloor(const Problem &problem, int64_t tp, int64_t pp,
                           int64_t devices, bool shardWeights) {
  int64_t replicated = 0, sharded = 0;
  for (const sim::Weight &weight : problem.graph.weights) {
    int64_t elems = 1;
    for (int64_t d : weight.shape)
      elems *= d;
    sim::TrainingStateBytes bytes = sim::trainingStateBytes(
        weight.elemBytes, weight.trainable, problem.simOptions.optimizer,
        problem.simOptions.fp32Gradients);
    replicated += elems * (bytes.weight + bytes.gradient);
    sharded += elems * bytes.optimizerState;
  }
  if (shardWeights)
    return (replicated + sharded) / devices;
  return replicated / (tp * pp) + sharded / devices;
}

/// The experts' tensor-parallel degree `layout` has (see
/// MegatronOptions::expertTensorParallel for its default, 0).
int64_t expertTensorDegree(const MegatronLayout &layout) {
  if (layout.expertTensorParallel > 0)
    return layout.expertTensorParallel;
  return layout.expertParallel > 1
             ? 1
             : std::max<int64_t>(layout.tensorParallel, 1);
}

/// The (tp, ep, etp) the Megatron layouts phase tries at one depth: tp in
/// 8, 4, 2, 1, each with every expert-parallel degree of `eps` (largest
/// first), the experts whole (etp 0, its default) and, where both tp and
/// ep split, split as the dense layers are (etp = tp, Megatron-Core's
/// default when expert tensor parallelism is not given).
std::vector<std::array<int64_t, 3>>
tensorExpertDegrees(const std::vector<int64_t> &eps) {
  std::vector<std::array<int64_t, 3>> degrees;
  for (int64_t tp : {8, 4, 2, 1})
    for (int64_t ep : eps) {
      degrees.push_back({tp, ep, 0});
      if (tp > 1 && ep > 1)
        degrees.push_back({tp, ep, tp});
    }
  return degrees;
}

/// The deepest pipeline the Megatron layouts phase tries: Megatron-LM's
/// deepest published one (the 1T GPT's pp 64, Narayanan et al. 2021).
constexpr int64_t kDeepestPipeline = 64;

/// How many of the fastest pipelined layouts (distinct but for their
/// micro-batch counts) the Megatron layouts phase interleaves.
constexpr size_t kInterleavedLayouts = 4;

/// The order the Megatron layouts phase tries the context exchanges in,
/// under a budget the first the likeliest to be reached: the ring first
/// (Megatron-Core's default, p2p; it holds two blocks of the keys and
/// values, so it fits at the smallest cp, and in zigzag order it is
/// balanced), then the all-to-all (Ulysses: no keys held twice, but heads
/// bound its degree), the all-gather (every member holds the whole
/// sequence's keys), ppc's key blocks last. Every exchange of
/// contextExchanges(), once.
constexpr std::array<ContextExchange, 4> kPhaseExchanges = {
    ContextExchange::Ring, ContextExchange::AllToAll,
    ContextExchange::AllGather, ContextExchange::KeyBlocks};

/// The share of a time budget the Megatron layouts phase walks the grid
/// for; the rest is the interleaving's.
constexpr double kWalkShare = 0.75;

/// How much activation memory a recomputation mode keeps: less for more
/// recomputation.
int keptActivations(Recompute recompute) {
  switch (recompute) {
  case Recompute::Full:
    return 0;
  case Recompute::Selective:
    return 1;
  case Recompute::None:
    return 2;
  }
  return 2;
}

/// Whether `a` needs at least the memory per device that `b` does, as far as
/// the layouts' degrees and recomputation tell: no degree of `a` larger,
/// no more recomputation, the same weight sharding and (where the sequence
/// is split) the same context exchange.
bool needsAtLeast(const MegatronLayout &a, const MegatronLayout &b) {
  return a.tensorParallel <= b.tensorParallel &&
         a.contextParallel <= b.contextParallel &&
         a.expertParallel <= b.expertParallel &&
         expertTensorDegree(a) <= expertTensorDegree(b) &&
         a.pipelineParallel <= b.pipelineParallel &&
         keptActivations(a.recompute) >= keptActivations(b.recompute) &&
         a.shardWeights == b.shardWeights &&
         (a.contextParallel == 1 || a.contextExchange == b.contextExchange);
}

/// The degrees, counts and choices that tell the Megatron layouts phase's
/// layouts apart (the exchange only where the sequence is split).
std::vector<int64_t> layoutKey(const MegatronLayout &layout) {
  return {layout.tensorParallel,
          layout.contextParallel,
          layout.pipelineParallel,
          layout.microbatches,
          layout.virtualStages,
          static_cast<int64_t>(layout.recompute),
          layout.contextParallel > 1
              ? static_cast<int64_t>(layout.contextExchange)
              : -1,
          layout.shardWeights,
          layout.expertParallel,
          layout.expertTensorParallel};
}

} // namespace

SearchResult megatronLayouts(const Problem &problem,
                             const SearchOptions &options) {
  auto begin = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         begin)
        .count();
  };
  SearchResult best;
  best.algorithm = "Megatron layouts: none";
  assert(kPhaseExchanges.size() == contextExchanges().size() &&
         "the phase tries every context exchange");
  const sim::Graph &graph = problem.graph;
  int64_t devices = problem.machine.numDevices();
  SequenceFlow flow = followSequence(graph);
  bool mixes = false;
  for (char m : flow.mixes)
    mixes = mixes || m;
  if (devices < 2 || !mixes)
    return best;
  // Mixtures of experts: the largest number of experts a dispatch routes
  // to bounds the expert-parallel degrees tried.
  int64_t experts = 1;
  for (const sim::Op &op : graph.ops)
    if (op.space.expertDim >= 0)
      experts = std::max(experts, op.space.dims[op.space.expertDim].size);
  int64_t batch = 1;
  for (const sim::Op &op : graph.ops)
    if (int sample = firstSampleDim(op.space); sample >= 0) {
      batch = op.space.dims[sample].size;
      break;
    }
  int64_t node = devicesPerNode(problem.machine);
  int64_t capacity = 0;
  for (const DeviceSpec &spec : problem.machine.specs)
    capacity = std::max(capacity, problem.simOptions.capacityOf(spec));

  // Every layout simulated (at its first micro-batch count), and whether it
  // fitted: the memory order (needsAtLeast) answers for the layouts it
  // decides without a simulation.
  std::vector<std::pair<MegatronLayout, bool>> known;
  int64_t simulated = 0;
  bool outOfTime = false;
  // The walk stops at kWalkShare of the time, keeping the rest for
  // interleaving what it found (the layouts a budget-bound walk never
  // reached are interleaved ones of its best).
  double limit = options.seconds * kWalkShare;
  auto stop = [&] {
    outOfTime = outOfTime || (limit > 0 && elapsed() > limit) ||
                (options.cancel && options.cancel->load());
    return outOfTime;
  };
  // The pipelined layouts that fit (with their micro-batch counts), by
  // objective.
  std::vector<std::pair<double, MegatronLayout>> pipelined;
  auto keep = [&](SearchResult candidate, const MegatronLayout &layout) {
    if (std::isfinite(candidate.objective) && candidate.pipeline.enabled())
      pipelined.emplace_back(candidate.objective, layout);
    if (outranks(candidate, best))
      best = std::move(candidate);
  };
  // The micro-batch count Megatron-LM starts from: one sample per
  // data-parallel replica (micro-batch size 1), at least pp; 0 unpipelined.
  auto firstMicrobatches = [&](const MegatronLayout &layout) -> int64_t {
    if (layout.pipelineParallel == 1)
      return 0;
    int64_t dp = devices / (layout.tensorParallel * layout.contextParallel *
                            layout.pipelineParallel);
    int64_t m = layout.pipelineParallel;
    while (batch % (2 * m) == 0 && 2 * m * dp <= batch)
      m *= 2;
    return batch % m == 0 ? m : -1;
  };
  // Simulates `layout` at `microbatches` once (kept as a candidate): its
  // objective, or nullopt when it does not apply.
  std::map<std::vector<int64_t>, std::optional<double>> objectives;
  auto simulate = [&](MegatronLayout layout,
                      int64_t microbatches) -> std::optional<double> {
    layout.microbatches = microbatches;
    std::vector<int64_t> key = layoutKey(layout);
    if (auto it = objectives.find(key); it != objectives.end())
      return it->second;
    absl::StatusOr<SearchResult> built = megatronLayout(problem, layout);
    ++simulated;
    std::optional<double> objective;
    if (built.ok()) {
      objective = built->objective;
      keep(std::move(*built), layout);
    }
    objectives[key] = objective;
    return objective;
  };
  // Whether `layout` fits: from what is known where the memory order
  // decides, else simulated. nullopt when it does not apply or time ran
  // out.
  auto fits = [&](const MegatronLayout &layout) -> std::optional<bool> {
    for (const auto &[other, fitted] : known)
      if ((!fitted && needsAtLeast(layout, other)) ||
          (fitted && needsAtLeast(other, layout)))
        return fitted;
    int64_t m = firstMicrobatches(layout);
    if (m < 0 || stop())
      return std::nullopt;
    std::optional<double> objective = simulate(layout, m);
    if (!objective)
      return std::nullopt;
    bool fitted = std::isfinite(*objective);
    known.emplace_back(layout, fitted);
    return fitted;
  };
  // A layout that fits, at the micro-batch counts below its first one while
  // they are faster and fit (larger micro-batches: more memory, fewer
  // kernels). Whether memory stopped it: the next count did not fit (then
  // more recomputation may buy fewer micro-batches), or the layout itself
  // did not, though the memory order said it would.
  auto evaluate = [&](const MegatronLayout &layout) {
    int64_t m = firstMicrobatches(layout);
    if (m < 0 || stop())
      return false;
    std::optional<double> last = simulate(layout, m);
    if (last && !std::isfinite(*last))
      return true;
    for (m /= 2; m >= layout.pipelineParallel && m > 0 && last &&
                 std::isfinite(*last) && !stop();
         m /= 2) {
      std::optional<double> next = simulate(layout, m);
      if (next && !std::isfinite(*next))
        return true;
      if (!next || !(*next < *last))
        break;
      last = next;
    }
    return false;
  };
  // The layouts with `base`'s tp, pp, recomputation and exchange: the
  // smallest cp from `firstCp` that fits (the fewest devices on the
  // sequence: at a fixed device count a larger cp trades data parallelism
  // for communication), and larger ones while the data-parallel replicas do
  // not divide the batch (a larger cp then splits work they would repeat).
  // The cp where that ended (0 when none fits), and whether memory stopped
  // its micro-batch counts.
  struct SeriesEnd {
    int64_t cp = 0;
    bool memoryBound = false;
  };
  auto series = [&](MegatronLayout base, int64_t firstCp) -> SeriesEnd {
    int64_t room = devices / (base.tensorParallel * base.pipelineParallel);
    std::vector<int64_t> cps;
    for (int64_t cp = firstCp; cp <= room; cp *= 2)
      if (room % cp == 0)
        cps.push_back(cp);
    auto at = [&](size_t i) {
      MegatronLayout layout = base;
      layout.contextParallel = cps[i];
      return layout;
    };
    if (cps.empty())
      return {};
    // Short sequences fit at the first cp, long ones only at the largest:
    // those two first, then bisection (memory falls as cp grows).
    size_t found = 0;
    if (!fits(at(0)).value_or(false)) {
      size_t lo = 0, hi = cps.size() - 1;
      if (hi == 0 || !fits(at(hi)).value_or(false))
        return {};
      while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (fits(at(mid)).value_or(false))
          hi = mid;
        else
          lo = mid;
      }
      found = hi;
    }
    SeriesEnd end;
    for (size_t i = found; i < cps.size() && !stop(); ++i) {
      end.cp = cps[i];
      end.memoryBound = evaluate(at(i)) || end.memoryBound;
      int64_t replicas =
          room / cps[i] * std::max<int64_t>(firstMicrobatches(at(i)), 1);
      if (batch % replicas == 0)
        break;
    }
    return end;
  };

  // The deepest pipelines first: under a budget they are the cheapest to
  // simulate (a stage's ops on a stage's devices) and the likeliest to fit
  // a large model, and a layout that does not fit rules out the same one
  // with fewer stages (needsAtLeast). Within a depth the largest
  // tensor-parallel group first (Megatron-LM's rule: tp up to a node),
  // recomputing only what must be for the layout to fit.
  std::vector<int64_t> depths;
  for (int64_t pp = 1;
       pp <= std::min(devices, kDeepestPipeline) && (pp == 1 || pp <= batch);
       pp *= 2)
    depths.push_back(pp);
  for (auto depth = depths.rbegin(); depth != depths.rend() && !stop();
       ++depth) {
    int64_t pp = *depth;
    // Expert parallelism: the powers of two dividing the experts and a
    // pipeline rank's devices, the largest first (each halving doubles
    // the experts a device holds).
    std::vector<int64_t> eps;
    for (int64_t ep = 1; ep <= experts && ep <= devices / pp; ep *= 2)
      if (experts % ep == 0 && (devices / pp) % ep == 0)
        eps.insert(eps.begin(), ep);
    for (auto [tp, ep, etp] : tensorExpertDegrees(eps)) {
      if (tp > node || devices % (tp * pp) != 0 ||
          (devices / pp) % (ep * std::max<int64_t>(etp, 1)) != 0 ||
          trainingStateFloor(problem,
                             std::max(tp, ep * std::max<int64_t>(etp, 1)), pp,
                             devices, false) > capacity)
        continue;
      // cp = 1 is the same layout for every exchange: in the first's
      // series only; where it suffices the other exchanges are not tried.
      bool sequenceWhole = false;
      for (ContextExchange kind : kPhaseExchanges) {
        if (sequenceWhole)
          break;
        bool first = kind == kPhaseExchanges.front();
        for (Recompute recompute :
             {Recompute::None, Recompute::Selective, Recompute::Full}) {
          MegatronLayout layout;
          layout.tensorParallel = tp;
          layout.pipelineParallel = pp;
          layout.expertParallel = ep;
          layout.expertTensorParallel = etp;
          layout.contextExchange = kind;
          layout.recompute = recompute;
          layout.sequenceParallel = tp > 1;
          layout.distributedOptimizer = true;
          SeriesEnd end = series(layout, first ? 1 : 2);
          sequenceWhole = sequenceWhole || end.cp == 1;
          if (end.cp > 0 && !end.memoryBound)
            break;
        }
      }
    }
    // Ulysses x ZeRO-3: the sequence over every device, attention by heads.
    if (pp == 1 && trainingStateFloor(problem, 1, 1, devices, true) <= capacity)
      for (Recompute recompute : {Recompute::None, Recompute::Full}) {
        MegatronLayout ulysses;
        ulysses.tensorParallel = 1;
        ulysses.contextExchange = ContextExchange::AllToAll;
        ulysses.recompute = recompute;
        ulysses.shardWeights = true;
        SeriesEnd end = series(ulysses, 2);
        if (end.cp > 0 && !end.memoryBound)
          break;
      }
  }
  // The fastest pipelines of distinct layouts interleaved (Megatron-LM's
  // virtual stages: each rank holds v stages of a finer cut, the bubble
  // 1/v as long) while that is faster: the order may change. A copy, as
  // the interleaved simulations add to `pipelined`.
  bool walkCut = outOfTime;
  outOfTime = false;
  limit = options.seconds;
  std::vector<std::pair<double, MegatronLayout>> ranked = pipelined;
  std::stable_sort(
      ranked.begin(), ranked.end(),
      [](const auto &a, const auto &b) { return a.first < b.first; });
  std::set<std::vector<int64_t>> interleaved;
  for (const auto &[objective, fastest] : ranked) {
    if (interleaved.size() == kInterleavedLayouts || stop())
      break;
    MegatronLayout layout = fastest;
    MegatronLayout uncounted = layout; // distinct but for the counts
    uncounted.microbatches = 0;
    if (!interleaved.insert(layoutKey(uncounted)).second)
      continue;
    double before = objective;
    for (int64_t v = 2; !stop(); v *= 2) {
      layout.virtualStages = v;
      std::optional<double> next = simulate(layout, layout.microbatches);
      if (!next || !(*next < before))
        break;
      before = *next;
    }
  }
  if (walkCut || outOfTime)
    best.cutShort.push_back("Megatron layouts: stopped by the budget after " +
                            std::to_string(simulated) + " simulations");
  best.iterations = simulated;
  best.seconds = elapsed();
  return best;
}

const ContextExchangeInfo *findContextExchange(const std::string &name) {
  return findByName(contextExchanges(), name);
}

void recomputeLayers(const sim::Graph &graph, sim::Strategy &strategy) {
  size_t n = graph.ops.size();
  // The cheapest cuts between ops: where the fewest activation bytes
  // cross (a transformer's residual stream between sublayers). The
  // graph's inputs count as well: a pipeline stage's first layer reads the
  // residual stream as an input.
  std::vector<int64_t> crossing = detail::crossingBytes(graph);
  std::map<int32_t, std::pair<size_t, int64_t>> inputs; // last reader, bytes
  for (size_t op = 0; op < n; ++op)
    for (size_t i = 0; i < graph.ops[op].operands.size(); ++i) {
      const sim::Source &src = graph.ops[op].operands[i];
      if (src.kind != sim::Source::Kind::Input)
        continue;
      int64_t bytes = graph.ops[op].elemBytes;
      for (int64_t size : graph.ops[op].space.operands[i].shape)
        bytes *= size;
      inputs[src.index] = {op, bytes};
    }
  for (const auto &[index, use] : inputs)
    for (size_t p = 1; p <= use.first && p < n; ++p)
      crossing[p] += use.second;
  // Cuts from the first op that reads a weight (an embedding) on: before
  // it there is no layer, and what crosses there (token ids, labels, a
  // reordering of them: ppc-zigzag-sequence) is far less than a residual
  // stream, so it would pass for the cheapest cut.
  size_t firstCut = 1;
  for (size_t op = 0; op < n; ++op)
    if (std::any_of(graph.ops[op].operands.begin(),
                    graph.ops[op].operands.end(), [](const sim::Source &src) {
                      return src.kind == sim::Source::Kind::Weight;
                    })) {
      firstCut = op + 1;
      break;
    }
  int64_t cheapest = std::numeric_limits<int64_t>::max();
  for (size_t p = firstCut; p < n; ++p)
    if (crossing[p] > 0)
      cheapest = std::min(cheapest, crossing[p]);
  std::vector<size_t> lastReader(n, 0);
  for (size_t op = 0; op < n; ++op)
    for (const sim::Source &src : graph.ops[op].operands)
      if (src.kind == sim::Source::Kind::Op)
        lastReader[src.index] = std::max(lastReader[src.index], op);
  // A transformer layer has two cheapest cuts (after each residual add);
  // Megatron-LM keeps one checkpoint per layer, so every second cheapest
  // cut is kept, counted back from the end: the last one (a pipeline
  // stage's output, which it keeps to send anyway) is not, the one before
  // it is. The ops between two kept cuts are recomputed as one segment.
  std::vector<char> keep(n + 1, 0);
  int64_t fromEnd = 0;
  for (size_t p = n; p-- > firstCut;)
    if (crossing[p] == cheapest)
      keep[p] = fromEnd++ % 2 == 1;
  // cutsBefore[p]: kept cuts at positions 1..p.
  std::vector<int64_t> cutsBefore(n + 1, 0);
  for (size_t p = 1; p <= n; ++p)
    cutsBefore[p] = cutsBefore[p - 1] + keep[p];
  for (size_t op = 0; op < n; ++op) {
    // Kept: results that cross a cheapest cut (read on its far side).
    // An op nothing reads keeps its results anyway.
    bool read = lastReader[op] > op;
    bool crossesCut = cutsBefore[lastReader[op]] - cutsBefore[op] > 0;
    if (read && !crossesCut && sim::recomputeProblem(graph, op).ok())
      strategy[op].recompute = true;
  }
}

void recomputeSingleReaders(const sim::Graph &graph, sim::Strategy &strategy) {
  std::vector<int> readers = sim::readerCounts(graph);
  for (size_t op = 0; op < graph.ops.size(); ++op)
    if (readers[op] == 1 && sim::recomputeProblem(graph, op).ok())
      strategy[op].recompute = true;
}

void shardTrainingState(const sim::Graph &graph, sim::Strategy &strategy,
                        StateSharding stage) {
  std::vector<sim::WeightUse> holders = sim::weightHolders(graph);
  std::vector<char> shared(graph.ops.size(), 0);
  for (size_t c = 0; c < graph.ops.size(); ++c)
    for (const sim::Source &src : graph.ops[c].operands)
      if (src.kind == sim::Source::Kind::Weight &&
          holders[src.index].op != static_cast<int32_t>(c))
        shared[holders[src.index].op] = 1;
  for (size_t op = 0; op < graph.ops.size(); ++op)
    if (hasWeightOperand(graph.ops[op]))
      strategy[op].sharding = stage == StateSharding::Parameters && shared[op]
                                  ? StateSharding::Gradients
                                  : stage;
}

sim::Strategy megatron(const sim::Graph &graph, const Machine &machine,
                       int64_t tensorParallel) {
  return megatron(graph, machine, MegatronOptions{tensorParallel});
}

sim::Strategy oneWeirdTrick(const sim::Graph &graph, const Machine &machine) {
  int64_t numDevices = machine.numDevices();
  sim::Strategy strategy;
  strategy.reserve(graph.ops.size());
  for (const sim::Op &op : graph.ops) {
    int parameter = -1;
    if (isWeightedContraction(op))
      for (size_t d = 0; d < op.space.dims.size(); ++d)
        if (op.space.dims[d].kind == IterKind::Parameter &&
            op.space.dims[d].splittable) {
          parameter = static_cast<int>(d);
          break;
        }
    // Model parallel over as many devices of a node as the output features
    // allow (Krizhevsky's one machine; across nodes every device would
    // exchange activations with every other); the rest split the batch.
    int64_t degree = parameter < 0
                         ? 1
                         : largestCommonDegree(op.space.dims[parameter].size,
                                               devicesPerNode(machine));
    strategy.push_back(
        hybridConfig(op, parameter, degree, numDevices / degree));
  }
  return strategy;
}

sim::Strategy sampleByParameter(const sim::Graph &graph, const Machine &machine,
                                int64_t parameterDegree) {
  int64_t numDevices = machine.numDevices();
  sim::Strategy strategy;
  strategy.reserve(graph.ops.size());
  for (const sim::Op &op : graph.ops) {
    int parameter =
        firstSplittableDim(op.space, IterKind::Parameter, parameterDegree);
    strategy.push_back(hybridConfig(op, parameter, parameterDegree,
                                    numDevices / parameterDegree));
  }
  return strategy;
}

int64_t devicesPerNode(const Machine &machine) {
  if (machine.cluster)
    return machine.cluster->devicesPerNode;
  return machine.numDevices() / std::max<int64_t>(1, machine.numNodes());
}

namespace {
template <bool SequenceParallel, bool DistributedOptimizer,
          bool Recompute = false, bool ShardWeights = false,
          bool SelectiveRecompute = false>
sim::Strategy megatronPerNode(const sim::Graph &graph, const Machine &machine) {
  return megatron(graph, machine,
                  MegatronOptions{devicesPerNode(machine), SequenceParallel,
                                  DistributedOptimizer, Recompute, ShardWeights,
                                  SelectiveRecompute});
}

sim::Strategy dataParallelBaseline(const sim::Graph &graph,
                                   const Machine &machine) {
  return sim::dataParallel(graph, machine.numDevices());
}

/// Data parallel with every weight's training state sharded as ZeRO's
/// `Stage` over the data-parallel replicas.
/// Stage 3 keeps a weight in shards at its holder, which the lowering
/// refuses for a weight other ops read too: those stay at stage 2.
template <StateSharding Stage>
sim::Strategy zeroBaseline(const sim::Graph &graph, const Machine &machine) {
  sim::Strategy strategy = sim::dataParallel(graph, machine.numDevices());
  shardTrainingState(graph, strategy, Stage);
  return strategy;
}
/// DeepSpeed-Ulysses with ZeRO-3: the all-to-all context exchange over
/// the devices of a node (fewer where the heads do not divide by them),
/// no tensor parallelism, data parallel across nodes, and every weight's
/// training state sharded over its replicas: all the devices.
sim::Strategy ulyssesZero3(const sim::Graph &graph, const Machine &machine) {
  MegatronOptions options;
  options.contextExchange = ContextExchange::AllToAll;
  int64_t node = devicesPerNode(machine), chosen = 1;
  for (int64_t cp = node; cp > 1 && chosen == 1; --cp) {
    options.contextParallel = cp;
    if (node % cp == 0 && checkMegatron(graph, machine, options).ok())
      chosen = cp;
  }
  options.contextParallel = chosen;
  sim::Strategy strategy = megatron(graph, machine, options);
  shardTrainingState(graph, strategy, StateSharding::Parameters);
  return strategy;
}
/// DeepSpeed-MoE (Rajbhandari et al. 2022; DeepSpeed's MoE tutorial):
/// expert parallelism over as many devices as there are experts (the
/// largest degree dividing every dispatch's experts and the machine), no
/// tensor or pipeline parallelism, data parallel for the rest, and every
/// weight's optimizer state and gradients sharded over its replicas
/// (ZeRO-2): the experts' over their own data-parallel group. A model
/// without experts gets zero2.
sim::Strategy deepspeedMoe(const sim::Graph &graph, const Machine &machine) {
  MegatronOptions options;
  options.tensorParallel = 1;
  options.expertParallel = machine.numDevices();
  for (const sim::Op &op : graph.ops)
    if (op.space.expertDim >= 0)
      options.expertParallel = std::gcd(options.expertParallel,
                                        op.space.dims[op.space.expertDim].size);
  sim::Strategy strategy = megatron(graph, machine, options);
  shardTrainingState(graph, strategy, StateSharding::Gradients);
  return strategy;
}
} // namespace

const std::vector<BaselineInfo> &baselines() {
  static const std::vector<BaselineInfo> list = {
      {"data-parallel", "every op's sample dim split over all devices",
       dataParallelBaseline},
      {"zero1",
       "data parallel with optimizer state sharded over the replicas "
       "(ZeRO-1)",
       zeroBaseline<StateSharding::Optimizer>},
      {"zero2",
       "data parallel with optimizer state and gradients sharded (ZeRO-2)",
       zeroBaseline<StateSharding::Gradients>},
      {"fsdp",
       "data parallel with optimizer state, gradients and weights sharded, "
       "weights gathered for each use (ZeRO-3, PyTorch FSDP)",
       zeroBaseline<StateSharding::Parameters>},
      {"megatron",
       "Megatron-LM: tensor parallel in each node (column- then "
       "row-parallel linears, heads split, other ops replicated in the "
       "group), data parallel across nodes",
       megatronPerNode<false, false>},
      {"megatron-sp",
       "megatron with sequence parallelism: ops outside the tensor-parallel "
       "blocks split along the sequence in the group",
       megatronPerNode<true, false>},
      {"megatron-distopt",
       "megatron with the distributed optimizer: optimizer state sharded "
       "over the data-parallel replicas (ZeRO-1)",
       megatronPerNode<false, true>},
      {"megatron-sp-distopt",
       "megatron with sequence parallelism and the distributed optimizer",
       megatronPerNode<true, true>},
      {"megatron-sp-distopt-selective",
       "megatron-sp-distopt with selective recomputation: inside the "
       "tensor-parallel blocks, the ops without weights read by exactly one "
       "op (attention scores, softmax, dropout, activations) recomputed, "
       "the linears' results kept",
       megatronPerNode<true, true, false, false, true>},
      {"megatron-sp-distopt-recompute",
       "megatron-sp-distopt with full activation recomputation: only the "
       "results crossing the graph's cheapest cuts (the residual stream "
       "between sublayers) kept",
       megatronPerNode<true, true, true>},
      {"megatron-sp-fsdp-recompute",
       "megatron-sp with recomputation, and weights, gradients and optimizer "
       "state sharded over the data-parallel replicas (ZeRO-3)",
       megatronPerNode<true, false, true, true>},
      {"ulysses-zero3",
       "DeepSpeed-Ulysses with ZeRO-3: every op split along the sequence "
       "over a node's devices (as many as divide the attention heads), "
       "attention split by heads instead with an all-to-all before and "
       "after, data parallel across nodes, and weights, gradients and "
       "optimizer state sharded over all devices",
       ulyssesZero3},
      {"deepspeed-moe",
       "DeepSpeed-MoE: the experts of every mixture of experts over as many "
       "devices as there are experts (fewer where the machine has fewer), "
       "their samples over the rest; everything else data parallel; "
       "optimizer state and gradients sharded over each weight's replicas "
       "(ZeRO-2)",
       deepspeedMoe},
      {"one-weird-trick",
       "Krizhevsky: data-parallel convolutions, fully connected layers "
       "model parallel within a node",
       oneWeirdTrick},
  };
  return list;
}

const BaselineInfo *findBaseline(const std::string &name) {
  return findByName(baselines(), name);
}

} // namespace ppc::search
