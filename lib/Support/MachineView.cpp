//===- MachineView.cpp - which device runs which partition ----------------===//

#include "ppc/Support/MachineView.h"
#include "ppc/Support/CheckedMath.h"
#include "ppc/Support/IterationSpace.h"

#include <algorithm>
#include <sstream>

namespace ppc {

int64_t OpConfig::numPartitions() const {
  int64_t n = 1;
  for (int64_t d : degrees)
    n *= d;
  return n;
}

std::vector<int64_t> OpConfig::gridExtents() const {
  std::vector<int64_t> extents;
  for (int64_t d : degrees)
    if (d > 1)
      extents.push_back(d);
  if (replicas > 1)
    extents.push_back(replicas);
  return extents;
}

std::vector<int64_t> OpConfig::effectiveStrides() const {
  if (!strides.empty())
    return strides;
  std::vector<int64_t> extents = gridExtents();
  std::vector<int64_t> result(extents.size());
  int64_t running = 1;
  for (size_t i = extents.size(); i-- > 0;) {
    result[i] = running;
    running *= extents[i];
  }
  return result;
}

std::vector<int64_t> OpConfig::devices() const {
  std::vector<int64_t> extents = gridExtents();
  std::vector<int64_t> stride = effectiveStrides();
  int64_t n = numInstances();
  std::vector<int64_t> result(n);
  for (int64_t p = 0; p < n; ++p) {
    int64_t rest = p, device = start;
    for (size_t i = extents.size(); i-- > 0;) {
      device += (rest % extents[i]) * stride[i];
      rest /= extents[i];
    }
    result[p] = device;
  }
  return result;
}

/// Whether the grid's (extent, stride) pairs, ordered by stride, nest:
/// each stride at least the extent times the stride of the one before it,
/// so that no two instances share a device.
static bool stridesNest(const OpConfig &config) {
  std::vector<int64_t> extents = config.gridExtents();
  std::vector<int64_t> strides = config.effectiveStrides();
  std::vector<std::pair<int64_t, int64_t>> grid;
  for (size_t i = 0; i < extents.size(); ++i)
    grid.emplace_back(strides[i], extents[i]);
  std::sort(grid.begin(), grid.end());
  int64_t reach = 1; // devices the smaller strides span
  for (const auto &[stride, extent] : grid) {
    if (stride < reach)
      return false;
    reach = stride * extent; // no overflow: checkConfig bounded the reach
  }
  return true;
}

/// InvalidArgument with the parts streamed as its message; the stream is
/// built only for an error (a search checks every configuration it
/// enumerates).
template <typename... Parts>
static absl::Status invalidConfig(const Parts &...parts) {
  std::ostringstream os;
  (os << ... << parts);
  return absl::InvalidArgumentError(os.str());
}

/// A ring streams an unsplit dim's blocks around the groups that split its
/// `along` dim: one block per member.
static absl::Status checkRing(const IterationSpace &space,
                              const OpConfig &config) {
  if (!space.ring)
    return invalidConfig("ring: the op has no dim whose operands stream "
                         "around a ring");
  const RingSpec &ring = *space.ring;
  int64_t n = config.degrees[ring.along];
  if (n < 2)
    return invalidConfig("ring: iteration dim ", ring.along,
                         " (the one whose groups form the ring) is not split");
  if (config.degrees[ring.streamed] != 1)
    return invalidConfig("ring: iteration dim ", ring.streamed,
                         " streams around the ring whole, but its degree is ",
                         config.degrees[ring.streamed]);
  if (space.dims[ring.streamed].size % n != 0)
    return invalidConfig("ring: ", n, " members do not divide iteration dim ",
                         ring.streamed, " of size ",
                         space.dims[ring.streamed].size, " into equal blocks");
  if (config.replicas != 1)
    return invalidConfig("ring: an op that streams around a ring runs "
                         "without replicas");
  return absl::OkStatus();
}

/// Why `config.scatterDim` does not fit (the degrees are valid): every
/// result must be a partial sum (so that no result is kept whole for the
/// backward kernel) with that dim, and its box must split into one equal
/// piece per member of the summing group.
static absl::Status checkScatter(const IterationSpace &space,
                                 const OpConfig &config) {
  int64_t dim = config.scatterDim;
  if (dim < 0) {
    return invalidConfig("scatter dim ", dim, " is negative");
  }
  std::vector<Range> iter = partitionRanges(space, config.degrees, 0);
  for (size_t r = 0; r < space.results.size(); ++r) {
    int64_t group = 1;
    for (size_t d = 0; d < config.degrees.size(); ++d)
      if (config.degrees[d] > 1 && space.makesPartialSum(d, r))
        group *= config.degrees[d];
    if (group == 1) {
      return invalidConfig(
          "scatter dim ", dim, " is set but result ", r,
          " is not a partial sum (no reduction dim it lacks is split)");
    }
    std::vector<Range> box = sliceOf(space.results[r], iter);
    if (dim >= static_cast<int64_t>(box.size())) {
      return invalidConfig("scatter dim ", dim, " is not a dim of result ", r,
                           ", which has ", box.size());
    }
    if (box[dim].size() % group != 0) {
      return invalidConfig(
          "scatter dim ", dim, " of result ", r, " has ", box[dim].size(),
          " elements per partition, which do not split ", "evenly among the ",
          group, " partitions that sum it");
    }
  }
  if (space.results.empty()) {
    return invalidConfig("scatter dim ", dim,
                         " is set but the op has no result");
  }
  return absl::OkStatus();
}

absl::Status checkConfig(const IterationSpace &space, const OpConfig &config,
                         std::optional<int64_t> numDevices) {
  const std::vector<int64_t> &degrees = config.degrees;
  if (degrees.size() != space.dims.size()) {
    return invalidConfig("strategy has ", degrees.size(),
                         " degrees but the op has ", space.dims.size(),
                         " iteration dims");
  }
  int64_t partitioned = 0;
  for (size_t i = 0; i < degrees.size(); ++i) {
    int64_t d = degrees[i];
    const IterDim &dim = space.dims[i];
    if (d < 1) {
      return invalidConfig("degree ", i, " is ", d, "; degrees must be >= 1");
    }
    if (d > 1 && !dim.splittable) {
      return invalidConfig("iteration dim ", i, " (",
                           stringifyIterKind(dim.kind),
                           ") cannot be split, but its degree is ", d);
    }
    if (dim.size % d != 0) {
      return invalidConfig("degree ", d, " does not divide iteration dim ", i,
                           " of size ", dim.size, " into equal partitions");
    }
    partitioned += d > 1;
  }
  if (config.replicas < 1) {
    return invalidConfig("replicas is ", config.replicas, "; it must be >= 1");
  }
  if (static_cast<int>(config.sharding) > kMaxStateSharding) {
    return invalidConfig("state sharding ", static_cast<int>(config.sharding),
                         " is not a ZeRO stage (0 to ", kMaxStateSharding, ")");
  }
  if (config.stage < 0) {
    return invalidConfig("stage ", config.stage, " is negative");
  }
  if (config.scatterDim != -1) {
    if (absl::Status problem = checkScatter(space, config); !problem.ok())
      return problem;
  }
  if (config.ring) {
    if (absl::Status problem = checkRing(space, config); !problem.ok())
      return problem;
  }
  partitioned += config.replicas > 1;
  if (config.start < 0) {
    return invalidConfig("start device ", config.start, " is negative");
  }
  if (!config.strides.empty() &&
      static_cast<int64_t>(config.strides.size()) != partitioned) {
    return invalidConfig(
        "expected ", partitioned,
        " strides (one per dim with degree > 1, and one for the replicas "
        "when replicas > 1), got ",
        config.strides.size());
  }
  for (int64_t s : config.strides)
    if (s < 1) {
      return invalidConfig("stride ", s, " must be >= 1");
    }
  // Degrees, start and strides come from input: bound the partition count
  // and the highest device with checked arithmetic before enumerating
  // anything, so that huge values are an error, not a wrapped-around
  // product.
  int64_t deviceLimit = numDevices ? *numDevices : kMaxDevices;
  auto describeLimit = [&]() {
    return numDevices
               ? "the machine has " + std::to_string(*numDevices) + " devices"
               : "ppc supports at most " + std::to_string(kMaxDevices) +
                     " devices";
  };
  std::vector<int64_t> extents = degrees;
  extents.push_back(config.replicas);
  std::optional<int64_t> partitions = checkedProduct(extents);
  // Partial products of degrees >= 1 are at most the whole product, so the
  // contiguous strides cannot overflow once the product does not.
  std::optional<int64_t> highest = config.start;
  if (partitions) {
    std::vector<int64_t> stride = config.effectiveStrides();
    size_t k = 0;
    for (int64_t d : extents) {
      if (d == 1)
        continue;
      std::optional<int64_t> reach = checkedMul(d - 1, stride[k++]);
      highest = highest && reach ? checkedAdd(*highest, *reach) : std::nullopt;
    }
  }
  if (!partitions || !highest) {
    return invalidConfig(
        "strategy uses devices beyond 2^63 (the product of its degrees "
        "and strides overflows); ",
        describeLimit());
  }
  if (*highest >= deviceLimit) {
    return invalidConfig("strategy uses device ", *highest, " but ",
                         describeLimit());
  }
  // More partitions than devices in range: two share a device.
  if (*partitions > deviceLimit)
    return absl::InvalidArgumentError(
        "strategy maps two instances to one device; the strides overlap");
  // Contiguous (no strides given) is one device per instance by
  // construction; so is a grid whose strides nest (each at least the reach
  // of the smaller ones). Any other: the devices sorted, none twice.
  if (!config.strides.empty() && !stridesNest(config)) {
    std::vector<int64_t> devices = config.devices();
    std::sort(devices.begin(), devices.end());
    if (std::adjacent_find(devices.begin(), devices.end()) != devices.end())
      return absl::InvalidArgumentError(
          "strategy maps two instances to one device; the strides overlap");
  }
  return absl::OkStatus();
}

absl::StatusOr<OpConfig> asRing(const IterationSpace &space, OpConfig config,
                                std::optional<int64_t> numDevices) {
  config.ring = true;
  if (absl::Status fits = checkConfig(space, config, numDevices); !fits.ok())
    return fits;
  return config;
}

} // namespace ppc
