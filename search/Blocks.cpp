//===- Blocks.cpp - repeated structure of a graph -------------------------===//

#include "ppc/Search/Blocks.h"

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

} // namespace

RepeatedOps findRepeatedOps(const sim::Graph &graph) {
  std::map<std::pair<std::string, std::vector<int64_t>>, std::vector<size_t>>
      bySignature;
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    const sim::Op &op = graph.ops[i];
    std::vector<int64_t> key;
    key.push_back(static_cast<int64_t>(op.dtype));
    for (const IterDim &dim : op.space.dims) {
      key.push_back(dim.size);
      key.push_back(static_cast<int64_t>(dim.kind));
      key.push_back(dim.splittable);
    }
    for (const TensorAccess &access : op.space.operands)
      appendAccess(key, access);
    for (const TensorAccess &access : op.space.results)
      appendAccess(key, access);
    for (const sim::Source &src : op.operands) {
      key.push_back(static_cast<int64_t>(src.kind));
      switch (src.kind) {
      case sim::Source::Kind::Op:
        key.push_back(static_cast<int64_t>(i) - src.index);
        key.push_back(src.result);
        break;
      case sim::Source::Kind::Weight:
        for (int64_t size : graph.weights[src.index].shape)
          key.push_back(size);
        break;
      case sim::Source::Kind::Input:
      case sim::Source::Kind::Constant:
        key.push_back(src.index);
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

} // namespace ppc::search
