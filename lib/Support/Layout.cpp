//===- Layout.cpp - where the pieces of an op's tensors live --------------===//

#include "ppc/Support/Layout.h"

#include <algorithm>

namespace ppc::geometry {

OpLayout computeLayout(const IterationSpace &space, const OpConfig &config) {
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
    Box iter = partitionRanges(space, config.degrees, partition);
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
  }
  return layout;
}

std::vector<Piece> OpLayout::resultPieces(unsigned r) const {
  std::vector<Piece> pieces;
  for (int64_t p = 0; p < numInstances(); ++p)
    pieces.push_back({devices[p], resultBoxes[r][p]});
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

std::vector<int64_t>
OpLayout::sameRangesExcept(int64_t p, const std::vector<unsigned> &dims) const {
  std::vector<int64_t> group;
  for (int64_t q = 0; q < numInstances(); ++q) {
    bool same = replica[q] == replica[p];
    for (size_t d = 0; d < iter[p].size(); ++d)
      if (std::find(dims.begin(), dims.end(), d) == dims.end() &&
          !(iter[q][d] == iter[p][d]))
        same = false;
    if (same)
      group.push_back(q);
  }
  return group;
}

std::vector<int64_t> OpLayout::replicasOf(int64_t p) const {
  std::vector<int64_t> group;
  int64_t first = p - replica[p];
  for (int64_t r = 0; r < numReplicas; ++r)
    group.push_back(first + r);
  return group;
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

std::optional<Box> intersect(const Box &a, const Box &b) {
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

} // namespace ppc::geometry
