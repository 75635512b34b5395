//===- Layout.cpp - where the pieces of an op's tensors live --------------===//

#include "ppc/Support/Layout.h"
#include "ppc/Support/Exchange.h"

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

#include <algorithm>
#include <limits>
#include <map>

namespace ppc::geometry {

/// Partition `partition`'s iteration ranges within micro-batch `micro`.
static Box microBatchRanges(const IterationSpace &space,
                            const std::vector<int64_t> &degrees,
                            int64_t partition, MicroBatch micro) {
  if (micro.count == 1)
    return partitionRanges(space, degrees, partition);
  IterationSpace block;
  block.dims = space.dims;
  for (IterDim &dim : block.dims)
    if (dim.kind == IterKind::Sample)
      dim.size /= micro.count;
  Box iter = partitionRanges(block, degrees, partition);
  for (size_t d = 0; d < iter.size(); ++d)
    if (block.dims[d].kind == IterKind::Sample) {
      int64_t shift = micro.index * block.dims[d].size;
      iter[d] = {iter[d].lo + shift, iter[d].hi + shift};
    }
  return iter;
}

Box ringStepRanges(const IterationSpace &space, const Box &iter,
                   int64_t members, int64_t block) {
  Box ranges = iter;
  int64_t size = space.dims[space.ring->streamed].size / members;
  ranges[space.ring->streamed] = {block * size, (block + 1) * size};
  return ranges;
}

OpLayout computeLayout(const IterationSpace &space, const OpConfig &config,
                       MicroBatch micro) {
  OpLayout layout;
  layout.devices = config.devices();
  layout.numReplicas = config.replicas;
  int64_t instances = static_cast<int64_t>(layout.devices.size());
  layout.operandBoxes.resize(space.operands.size());
  layout.resultBoxes.resize(space.results.size());
  // Replicas of a partition share its boxes: compute them once.
  for (int64_t p = 0; p < instances; ++p) {
    int64_t partition = config.partitionOf(p);
    layout.partition.push_back(partition);
    layout.replica.push_back(config.replicaOf(p));
    if (config.replicaOf(p) != 0) {
      int64_t first = p - config.replicaOf(p);
      layout.iter.push_back(layout.iter[first]);
      for (auto &boxes : layout.operandBoxes)
        boxes.push_back(boxes[first]);
      for (auto &boxes : layout.resultBoxes)
        boxes.push_back(boxes[first]);
      continue;
    }
    Box iter = microBatchRanges(space, config.degrees, partition, micro);
    for (size_t i = 0; i < space.operands.size(); ++i)
      layout.operandBoxes[i].push_back(sliceOf(space.operands[i], iter));
    for (size_t r = 0; r < space.results.size(); ++r)
      layout.resultBoxes[r].push_back(sliceOf(space.results[r], iter));
    layout.iter.push_back(std::move(iter));
  }
  for (size_t r = 0; r < space.results.size(); ++r) {
    bool partial = false;
    for (size_t d = 0; d < space.dims.size(); ++d)
      if (d < config.degrees.size() && config.degrees[d] > 1 &&
          space.makesPartialSum(d, r))
        partial = true;
    layout.partial.push_back(partial);
    layout.scattered.push_back(partial && config.scatterDim >= 0);
  }
  if (config.ring && space.ring) {
    // Each member starts with the block of the streamed operands its share
    // of `along` indexes.
    const RingSpec &ring = *space.ring;
    int64_t n = config.degrees[ring.along];
    int64_t share = space.dims[ring.along].size / n;
    auto memberOf = [&](int64_t p) {
      return layout.iter[p][ring.along].lo / share;
    };
    for (std::vector<int64_t> &members :
         layout.groupsAgreeingExcept({ring.along})) {
      for (int64_t p : members) {
        Box start = ringStepRanges(space, layout.iter[p], n, memberOf(p));
        for (int32_t i : ring.operands)
          layout.operandBoxes[i][p] = sliceOf(space.operands[i], start);
      }
      std::sort(members.begin(), members.end(), [&](int64_t a, int64_t b) {
        return memberOf(a) < memberOf(b);
      });
      layout.rings.push_back(std::move(members));
    }
  }
  layout.heldBoxes = layout.resultBoxes;
  for (size_t r = 0; r < space.results.size(); ++r) {
    if (!layout.scattered[r])
      continue;
    for (int64_t p = 0; p < instances; ++p) {
      std::vector<int64_t> group = layout.sameResultBox(r, p);
      int64_t member = std::find(group.begin(), group.end(), p) - group.begin();
      layout.heldBoxes[r][p] =
          shardOf(layout.resultBoxes[r][p], static_cast<int64_t>(group.size()),
                  member, static_cast<unsigned>(config.scatterDim));
    }
  }
  return layout;
}

std::vector<Piece> OpLayout::resultPieces(unsigned r) const {
  std::vector<Piece> pieces;
  for (int64_t p = 0; p < numInstances(); ++p)
    pieces.push_back({devices[p], heldBoxes[r][p]});
  return pieces;
}

std::vector<Piece> OpLayout::operandPieces(unsigned i) const {
  std::vector<Piece> pieces;
  for (int64_t p = 0; p < numInstances(); ++p)
    pieces.push_back({devices[p], operandBoxes[i][p]});
  return pieces;
}

std::vector<int64_t> OpLayout::sameResultBox(unsigned r, int64_t p) const {
  std::vector<int64_t> group;
  for (int64_t q = 0; q < numInstances(); ++q)
    if (replica[q] == replica[p] && resultBoxes[r][q] == resultBoxes[r][p])
      group.push_back(q);
  return group;
}

std::vector<std::vector<int64_t>>
OpLayout::groupsAgreeingExcept(const std::vector<int32_t> &dims) const {
  // One map lookup per instance: its replica, then its ranges on the dims
  // that must agree.
  std::map<std::vector<int64_t>, size_t> groupOf;
  std::vector<std::vector<int64_t>> groups;
  for (int64_t p = 0; p < numInstances(); ++p) {
    std::vector<int64_t> key = {replica[p]};
    for (size_t d = 0; d < iter[p].size(); ++d)
      if (std::find(dims.begin(), dims.end(), static_cast<int32_t>(d)) ==
          dims.end()) {
        key.push_back(iter[p][d].lo);
        key.push_back(iter[p][d].hi);
      }
    auto [it, added] = groupOf.emplace(std::move(key), groups.size());
    if (added)
      groups.emplace_back();
    groups[it->second].push_back(p);
  }
  return groups;
}

std::vector<int64_t> OpLayout::replicasOf(int64_t p) const {
  std::vector<int64_t> group;
  int64_t first = p - replica[p];
  for (int64_t r = 0; r < numReplicas; ++r)
    group.push_back(first + r);
  return group;
}

bool zeroShardable(const Box &box, int64_t k) {
  return k >= 2 && !box.empty() && box[0].size() >= k;
}

Box zeroShard(const Box &box, int64_t k, int64_t i) {
  int64_t rows = box[0].size(), base = rows / k, extra = rows % k;
  int64_t lo = box[0].lo + i * base + std::min(i, extra);
  Box shard = box;
  shard[0] = {lo, lo + base + (i < extra ? 1 : 0)};
  return shard;
}

Box shardOf(const Box &box, int64_t k, int64_t i, unsigned dim) {
  Box shard = box;
  int64_t size = box[dim].size() / k;
  shard[dim] = {box[dim].lo + i * size, box[dim].lo + (i + 1) * size};
  return shard;
}

bool isEmpty(const Box &box) {
  for (const Range &r : box)
    if (r.size() == 0)
      return true;
  return false;
}

bool contains(const Box &outer, const Box &inner) {
  if (isEmpty(inner))
    return true;
  for (size_t d = 0; d < outer.size(); ++d)
    if (inner[d].lo < outer[d].lo || inner[d].hi > outer[d].hi)
      return false;
  return true;
}

OverlapIndex::OverlapIndex(const std::vector<Box> &boxes) {
  size_t rank = boxes.empty() ? 0 : boxes.front().size();
  size_t distinct = 0;
  std::vector<int64_t> starts;
  for (size_t d = 0; d < rank; ++d) {
    starts.clear();
    for (const Box &box : boxes)
      if (box.size() > d)
        starts.push_back(box[d].lo);
    // Instances come in partition order, so the starts of most dims are
    // already sorted (or all equal): sort only when they are not.
    if (!std::is_sorted(starts.begin(), starts.end()))
      std::sort(starts.begin(), starts.end());
    size_t count = static_cast<size_t>(
        std::unique(starts.begin(), starts.end()) - starts.begin());
    if (count > distinct) {
      distinct = count;
      dim = d;
    }
  }
  indexed = rank > 0;
  for (size_t i = 0; i < boxes.size(); ++i) {
    if (indexed && boxes[i].size() != rank)
      indexed = false; // mixed ranks: no index, every box a candidate
    byStart.emplace_back(indexed ? boxes[i][dim].lo : 0, i);
    if (indexed)
      longest = std::max(longest, boxes[i][dim].hi - boxes[i][dim].lo);
  }
  if (!std::is_sorted(byStart.begin(), byStart.end()))
    std::sort(byStart.begin(), byStart.end());
}

void OverlapIndex::candidates(const Box &box, std::vector<size_t> &out) const {
  out.clear();
  if (!indexed || box.size() <= dim) {
    for (const auto &[start, i] : byStart)
      out.push_back(i);
  } else {
    const Range &want = box[dim];
    auto from = std::upper_bound(
        byStart.begin(), byStart.end(),
        std::make_pair(want.lo - longest, std::numeric_limits<size_t>::max()));
    auto to = std::lower_bound(byStart.begin(), byStart.end(),
                               std::make_pair(want.hi, size_t{0}));
    for (auto it = from; it < to; ++it)
      out.push_back(it->second);
  }
  if (!std::is_sorted(out.begin(), out.end()))
    std::sort(out.begin(), out.end());
}

bool overlaps(const Box &a, const Box &b) {
  for (size_t d = 0; d < a.size(); ++d)
    if (std::max(a[d].lo, b[d].lo) >= std::min(a[d].hi, b[d].hi))
      return false;
  return true;
}

std::optional<Box> intersect(const Box &a, const Box &b) {
  // Most pairs the simulator and the lowering try are disjoint: answer
  // those without allocating.
  if (!overlaps(a, b))
    return std::nullopt;
  Box box(a.size());
  for (size_t d = 0; d < a.size(); ++d) {
    box[d] = {std::max(a[d].lo, b[d].lo), std::min(a[d].hi, b[d].hi)};
    if (box[d].hi <= box[d].lo)
      return std::nullopt;
  }
  return box;
}

Box wholeBox(const std::vector<int64_t> &shape) {
  Box box;
  for (int64_t size : shape)
    box.push_back({0, size});
  return box;
}

/// The global flat indices a box visits in its own row-major order, as a
/// start and (extent, stride) runs from the outermost, the runs that
/// continue one another merged and extents of 1 dropped: two boxes visit
/// the same indices in the same order exactly when these agree.
static std::optional<
    std::pair<int64_t, std::vector<std::pair<int64_t, int64_t>>>>
flatVisits(const std::vector<int64_t> &shape, const Box &box) {
  if (box.size() != shape.size() || isEmpty(box))
    return std::nullopt;
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  int64_t start = 0;
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (box[d].lo < 0 || box[d].hi > shape[d])
      return std::nullopt;
    start += box[d].lo * strides[d];
    int64_t extent = box[d].size();
    if (extent == 1)
      continue;
    if (!runs.empty() && runs.back().second == extent * strides[d])
      runs.back() = {runs.back().first * extent, strides[d]};
    else
      runs.push_back({extent, strides[d]});
  }
  return std::make_pair(start, std::move(runs));
}

bool sameFlatOrder(const std::vector<int64_t> &shapeA, const Box &a,
                   const std::vector<int64_t> &shapeB, const Box &b) {
  auto count = [](const std::vector<int64_t> &shape) {
    int64_t n = 1;
    for (int64_t s : shape)
      n *= s;
    return n;
  };
  if (count(shapeA) != count(shapeB))
    return false;
  auto visitsA = flatVisits(shapeA, a), visitsB = flatVisits(shapeB, b);
  return visitsA && visitsB && *visitsA == *visitsB;
}

bool linesUp(const std::vector<Piece> &producer,
             const std::vector<Piece> &consumer) {
  for (const Piece &need : consumer) {
    bool held = false;
    for (const Piece &have : producer)
      if (have.device == need.device && contains(have.box, need.box))
        held = true;
    if (!held)
      return false;
  }
  return true;
}

std::vector<GradientRoute>
gradientRoutes(const std::vector<Box> &producedBoxes,
               const std::vector<int64_t> &producerDevices,
               const std::vector<int64_t> &producerReplicas,
               const std::vector<Box> &needed,
               const std::vector<int64_t> &consumerDevices,
               int64_t numConsumerReplicas, const std::vector<char> &skip,
               bool everyMember,
               const std::function<double(int64_t, int64_t)> &bandwidth) {
  // Groups of producer instances: same box, same replica, in order of
  // their first member, as one list of members with each group's start
  // (keyed by a hash, not compared pairwise: thousands of instances on a
  // large machine; no allocation per group).
  const size_t np = producedBoxes.size();
  std::vector<int32_t> groupOfInstance(np, -1);
  std::vector<int64_t> groupStart; // then the end of the last group
  std::vector<Box> representatives;
  {
    int32_t numBoxes = 0;
    std::vector<int32_t> boxGroup = groupByBox(producedBoxes, numBoxes);
    absl::flat_hash_map<std::pair<int32_t, int64_t>, int32_t> groupOf;
    groupOf.reserve(np);
    std::vector<int64_t> sizes;
    for (size_t p = 0; p < np; ++p) {
      if (skip[p])
        continue;
      auto [it, fresh] =
          groupOf.try_emplace(std::make_pair(boxGroup[p], producerReplicas[p]),
                              static_cast<int32_t>(sizes.size()));
      if (fresh) {
        sizes.push_back(0);
        representatives.push_back(producedBoxes[p]);
      }
      groupOfInstance[p] = it->second;
      ++sizes[it->second];
    }
    groupStart.assign(sizes.size() + 1, 0);
    for (size_t g = 0; g < sizes.size(); ++g)
      groupStart[g + 1] = groupStart[g] + sizes[g];
  }
  std::vector<int64_t> members(groupStart.back());
  {
    std::vector<int64_t> next(groupStart.begin(), groupStart.end() - 1);
    for (size_t p = 0; p < np; ++p)
      if (groupOfInstance[p] >= 0)
        members[next[groupOfInstance[p]]++] = static_cast<int64_t>(p);
  }
  OverlapIndex index(representatives);
  std::vector<GradientRoute> routes;
  std::vector<size_t> candidates;
  for (size_t first = 0; first < needed.size(); first += numConsumerReplicas) {
    index.candidates(needed[first], candidates);
    for (size_t g : candidates) {
      const int64_t *groupBegin = members.data() + groupStart[g];
      const int64_t *groupEnd = members.data() + groupStart[g + 1];
      const Box &box = representatives[g];
      std::optional<Box> common = intersect(needed[first], box);
      if (!common)
        continue;
      auto senderFor = [&](int64_t g) {
        return static_cast<int64_t>(first) +
               nearestReplica(consumerDevices, static_cast<int64_t>(first),
                              numConsumerReplicas, producerDevices[g],
                              bandwidth);
      };
      if (everyMember) {
        for (const int64_t *g = groupBegin; g != groupEnd; ++g)
          routes.push_back({senderFor(*g), *g, *common});
        continue;
      }
      // One member: on a consumer replica's device if there is one.
      auto onConsumerDevice = [&](int64_t g) {
        for (int64_t r = 0; r < numConsumerReplicas; ++r)
          if (consumerDevices[first + r] == producerDevices[g])
            return true;
        return false;
      };
      const int64_t *local =
          std::find_if(groupBegin, groupEnd, onConsumerDevice);
      int64_t to = local != groupEnd ? *local : *groupBegin;
      routes.push_back({senderFor(to), to, *common});
    }
  }
  return routes;
}

std::vector<std::vector<int64_t>>
allReducedGradientGroups(const std::vector<Box> &produced,
                         const std::vector<int64_t> &producerDevices,
                         const std::vector<Box> &needed,
                         const std::vector<int64_t> &consumerDevices,
                         const std::vector<int64_t> &consumerPartitions) {
  // Instances holding the same box, in order of the first of each.
  int32_t numBoxes = 0;
  std::vector<int32_t> boxGroup = groupByBox(produced, numBoxes);
  std::vector<std::vector<int64_t>> sameBox(numBoxes);
  for (size_t p = 0; p < produced.size(); ++p)
    sameBox[boxGroup[p]].push_back(static_cast<int64_t>(p));
  OverlapIndex readersIndex(needed);
  std::vector<size_t> candidates;
  std::vector<std::vector<int64_t>> groups;
  for (std::vector<int64_t> &members : sameBox) {
    const Box &piece = produced[members.front()];
    if (members.size() < 2 || isEmpty(piece))
      continue;
    absl::flat_hash_set<int64_t> devices, readers, partitions;
    for (int64_t q : members)
      devices.insert(producerDevices[q]);
    bool ok = devices.size() == members.size();
    size_t count = 0;
    readersIndex.candidates(piece, candidates);
    for (size_t k = 0; ok && k < candidates.size(); ++k) {
      size_t c = candidates[k];
      if (!overlaps(needed[c], piece))
        continue;
      ++count;
      ok = contains(needed[c], piece) && devices.count(consumerDevices[c]) &&
           readers.insert(consumerDevices[c]).second &&
           partitions.insert(consumerPartitions[c]).second;
    }
    if (ok && count == members.size())
      groups.push_back(std::move(members));
  }
  return groups;
}

} // namespace ppc::geometry
