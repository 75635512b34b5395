//===- Blocks.cpp - repeated structure of a graph -------------------------===//

#include "ppc/Search/Blocks.h"

#include <cstring>
#include <map>
#include <string>

namespace ppc::search {

namespace {

void appendAccess(std::vector<int64_t> &key, const TensorAccess &access) {
  key.push_back(static_cast<int64_t>(access.shape.size()));
  for (int64_t size : access.shape)
    key.push_back(size);
  for (const DimAccess &dim : access.dims) {
    key.push_back(dim.iterDim);
    key.push_back(dim.divisor);
    key.push_back(dim.stride);
    key.push_back(dim.offset);
    key.push_back(dim.extent);
  }
}

void appendDouble(std::vector<int64_t> &key, double value) {
  int64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  key.push_back(bits);
}

/// Everything of op `i` that its simulated cost under a configuration reads
/// (see Simulator's op state): kind, element type, FLOPs and bytes, the
/// iteration space, whether anything reads its results, and per operand
/// the source kind, with a weight's shape, bytes, trainability and whether
/// this use holds it.
std::vector<int64_t> localKey(const sim::Graph &graph, size_t i,
                              const std::vector<sim::WeightUse> &holders,
                              const std::vector<int> &readers) {
  const sim::Op &op = graph.ops[i];
  std::vector<int64_t> key;
  key.push_back(static_cast<int64_t>(op.dtype));
  key.push_back(op.elemBytes);
  for (double v :
       {op.cost.fwdFlops, op.cost.bwdFlops, op.cost.fwdBytes, op.cost.bwdBytes})
    appendDouble(key, v);
  key.push_back(readers[i] > 0);
  for (const IterDim &dim : op.space.dims) {
    key.push_back(dim.size);
    key.push_back(static_cast<int64_t>(dim.kind));
    key.push_back(dim.splittable);
  }
  for (const TensorAccess &access : op.space.operands)
    appendAccess(key, access);
  for (const TensorAccess &access : op.space.results)
    appendAccess(key, access);
  for (size_t o = 0; o < op.operands.size(); ++o) {
    const sim::Source &src = op.operands[o];
    key.push_back(static_cast<int64_t>(src.kind));
    if (src.kind != sim::Source::Kind::Weight)
      continue;
    const sim::Weight &w = graph.weights[src.index];
    for (int64_t size : w.shape)
      key.push_back(size);
    key.push_back(w.elemBytes);
    key.push_back(w.trainable);
    const sim::WeightUse &holder = holders[src.index];
    key.push_back(holder.op == static_cast<int32_t>(i) &&
                  holder.operand == static_cast<int32_t>(o));
  }
  return key;
}

/// localKey of every op.
std::vector<std::vector<int64_t>> localKeys(const sim::Graph &graph) {
  std::vector<sim::WeightUse> holders = sim::weightHolders(graph);
  std::vector<int> readers = sim::readerCounts(graph);
  std::vector<std::vector<int64_t>> keys;
  keys.reserve(graph.ops.size());
  for (size_t i = 0; i < graph.ops.size(); ++i)
    keys.push_back(localKey(graph, i, holders, readers));
  return keys;
}

} // namespace

std::vector<int32_t> costClasses(const sim::Graph &graph) {
  std::vector<std::vector<int64_t>> keys = localKeys(graph);
  std::map<std::pair<std::string, std::vector<int64_t>>, int32_t> ids;
  std::vector<int32_t> classOf(graph.ops.size());
  for (size_t i = 0; i < graph.ops.size(); ++i)
    classOf[i] = ids.try_emplace({graph.ops[i].kind, std::move(keys[i])},
                                 static_cast<int32_t>(ids.size()))
                     .first->second;
  return classOf;
}

RepeatedOps findRepeatedOps(const sim::Graph &graph) {
  std::vector<std::vector<int64_t>> keys = localKeys(graph);
  std::map<std::pair<std::string, std::vector<int64_t>>, std::vector<size_t>>
      bySignature;
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    const sim::Op &op = graph.ops[i];
    std::vector<int64_t> &key = keys[i];
    // The wiring: how far back each operand's producer is, or which input
    // or constant it reads.
    for (const sim::Source &src : op.operands) {
      switch (src.kind) {
      case sim::Source::Kind::Op:
        key.push_back(static_cast<int64_t>(i) - src.index);
        key.push_back(src.result);
        break;
      case sim::Source::Kind::Input:
      case sim::Source::Kind::Constant:
        key.push_back(src.index);
        break;
      case sim::Source::Kind::Weight:
        break;
      }
    }
    bySignature[{op.kind, std::move(key)}].push_back(i);
  }
  RepeatedOps out;
  out.classOf.assign(graph.ops.size(), -1);
  for (auto &[signature, members] : bySignature) {
    if (members.size() < 2)
      continue;
    for (size_t op : members)
      out.classOf[op] = static_cast<int32_t>(out.classes.size());
    out.classes.push_back(std::move(members));
  }
  return out;
}

std::vector<BlockRun> findRepeatedBlocks(const sim::Graph &graph) {
  RepeatedOps repeated = findRepeatedOps(graph);
  const std::vector<int32_t> &classOf = repeated.classOf;
  size_t n = classOf.size();
  // Each op's place among its counterparts, to find the next ones.
  std::vector<size_t> place(n, 0);
  for (const std::vector<size_t> &members : repeated.classes)
    for (size_t k = 0; k < members.size(); ++k)
      place[members[k]] = k;
  auto sameBlock = [&](size_t a, size_t b, size_t length) {
    for (size_t t = 0; t < length; ++t)
      if (classOf[a + t] < 0 || classOf[a + t] != classOf[b + t])
        return false;
    return true;
  };
  // A block holds an op's counterpart within a few of its next ones (an op
  // repeated inside a block, as q, k and v projections may be, is a shorter
  // candidate that covers less); more candidates only cost time.
  constexpr size_t kCandidates = 8;
  std::vector<BlockRun> runs;
  for (size_t i = 0; i < n;) {
    BlockRun best;
    if (classOf[i] >= 0) {
      const std::vector<size_t> &members = repeated.classes[classOf[i]];
      for (size_t k = place[i] + 1;
           k < members.size() && k <= place[i] + kCandidates; ++k) {
        size_t length = members[k] - i;
        size_t count = 1;
        while (i + (count + 1) * length <= n &&
               sameBlock(i, i + count * length, length))
          ++count;
        if (count >= 2 && count * length > best.count * best.length)
          best = {i, length, count};
      }
    }
    if (best.count >= 2) {
      runs.push_back(best);
      i = best.end();
    } else {
      ++i;
    }
  }
  return runs;
}

} // namespace ppc::search
