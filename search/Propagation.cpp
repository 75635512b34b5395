//===- Propagation.cpp - a layout carried along the graph's edges ---------===//
//
// Part of the search library; see Propagation.h.
//
//===----------------------------------------------------------------------===//

#include "Propagation.h"

#include <vector>

namespace ppc::search::detail {

namespace {

/// How `from`'s instances lay out one tensor: per tensor dim, the degree it
/// is split by and the device stride between consecutive pieces; plus one
/// group of instances that share a piece (degree and stride), if any.
struct TensorSplit {
  std::vector<int64_t> degree;
  std::vector<int64_t> stride;
  int64_t copies = 1;
  int64_t copyStride = 0;
};

/// The split of a tensor `from` accesses through `access` under `config`;
/// none when it cannot be carried over (a split dim indexing the tensor
/// through a divisor, or copies in more than one group).
std::optional<TensorSplit> splitOf(const TensorAccess &access,
                                   const OpConfig &config) {
  TensorSplit split;
  split.degree.assign(access.dims.size(), 1);
  split.stride.assign(access.dims.size(), 0);
  std::vector<int64_t> strides = config.effectiveStrides();
  size_t next = 0; // the stride of the next split dim
  auto addCopies = [&](int64_t degree, int64_t stride) {
    if (split.copies > 1)
      return false;
    split.copies = degree;
    split.copyStride = stride;
    return true;
  };
  for (size_t d = 0; d < config.degrees.size(); ++d) {
    if (config.degrees[d] <= 1)
      continue;
    int64_t stride = strides[next++];
    bool indexed = false;
    for (size_t t = 0; t < access.dims.size(); ++t) {
      const DimAccess &dim = access.dims[t];
      if (dim.iterDim != static_cast<int32_t>(d))
        continue;
      if (dim.divisor != 1 || indexed)
        return std::nullopt;
      indexed = true;
      split.degree[t] = config.degrees[d];
      split.stride[t] = stride;
    }
    if (!indexed && !addCopies(config.degrees[d], stride))
      return std::nullopt;
  }
  if (config.replicas > 1 && !addCopies(config.replicas, strides[next]))
    return std::nullopt;
  return split;
}

/// The configuration of an op with `space` accessing the tensor through
/// `access` so that it is split as `split` on the devices from `start`.
std::optional<OpConfig> configFor(const IterationSpace &space,
                                  const TensorAccess &access,
                                  const TensorSplit &split, int64_t start) {
  OpConfig config;
  config.degrees.assign(space.dims.size(), 1);
  std::vector<int64_t> strideOf(space.dims.size(), 0);
  for (size_t t = 0; t < access.dims.size(); ++t) {
    if (split.degree[t] <= 1)
      continue;
    const DimAccess &dim = access.dims[t];
    if (dim.isWhole() || dim.divisor != 1)
      return std::nullopt;
    size_t d = static_cast<size_t>(dim.iterDim);
    if (config.degrees[d] != 1 || !space.dims[d].splittable ||
        space.dims[d].size % split.degree[t] != 0)
      return std::nullopt;
    config.degrees[d] = split.degree[t];
    strideOf[d] = split.stride[t];
  }
  config.start = start;
  config.replicas = split.copies;
  for (size_t d = 0; d < config.degrees.size(); ++d)
    if (config.degrees[d] > 1)
      config.strides.push_back(strideOf[d]);
  if (config.replicas > 1)
    config.strides.push_back(split.copyStride);
  // Contiguous strides are spelled as none, as the configuration space
  // spells them.
  OpConfig contiguous = config;
  contiguous.strides.clear();
  if (contiguous.effectiveStrides() == config.strides)
    config.strides.clear();
  return config;
}

} // namespace

std::optional<OpConfig> alignedConfig(const sim::Graph &graph, size_t op,
                                      size_t from, const OpConfig &fromConfig,
                                      const OpConfig &keep,
                                      int64_t numDevices) {
  const sim::Op &self = graph.ops[op];
  const sim::Op &other = graph.ops[from];
  if (fromConfig.degrees.size() != other.space.dims.size())
    return std::nullopt;
  // The configuration of `op` accessing the tensor through `opAccess` as
  // `from` does through `fromAccess`; with `copiesAllowed` false, none
  // where `from`'s instances share pieces of it.
  auto carry = [&](const TensorAccess &fromAccess, const TensorAccess &opAccess,
                   bool copiesAllowed) -> std::optional<OpConfig> {
    std::optional<TensorSplit> split = splitOf(fromAccess, fromConfig);
    if (!split || (!copiesAllowed && split->copies > 1))
      return std::nullopt;
    std::optional<OpConfig> config =
        configFor(self.space, opAccess, *split, fromConfig.start);
    if (!config)
      return std::nullopt;
    config->recompute = keep.recompute;
    config->sharding = keep.sharding;
    config->stage = keep.stage;
    if (!checkConfig(self.space, *config, numDevices).ok())
      return std::nullopt;
    return config;
  };
  // `op` reads a result of `from`: the result as `from` holds it (a
  // reduce-scattered partial sum is held in pieces the access does not
  // describe; an all-reduced one whole on every member of its group, which
  // `op` reads as copies).
  if (fromConfig.scatterDim < 0)
    for (size_t i = 0; i < self.operands.size(); ++i) {
      const sim::Source &source = self.operands[i];
      if (source.kind != sim::Source::Kind::Op ||
          source.index != static_cast<int32_t>(from))
        continue;
      if (auto config = carry(other.space.results[source.result],
                              self.space.operands[i], true))
        return config;
    }
  // `from` reads a result of `op`, which takes the split only: readers
  // sharing a piece (a column-parallel layer's input) do not make their
  // producers copies, as GSPMD propagates no replication backwards; the
  // run stops there.
  for (size_t i = 0; i < other.operands.size(); ++i) {
    const sim::Source &source = other.operands[i];
    if (source.kind != sim::Source::Kind::Op ||
        source.index != static_cast<int32_t>(op))
      continue;
    if (auto config = carry(other.space.operands[i],
                            self.space.results[source.result], false))
      return config;
  }
  return std::nullopt;
}

} // namespace ppc::search::detail
