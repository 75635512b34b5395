//===- MachineView.cpp - which device runs which partition ----------------===//

#include "ppc/Support/MachineView.h"
#include "ppc/Support/CheckedMath.h"
#include "ppc/Support/IterationSpace.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace ppc {

int64_t OpConfig::numPartitions() const {
  int64_t n = 1;
  for (int64_t d : degrees)
    n *= d;
  return n;
}

namespace {
/// The extents of the device grid of `config`: its partitioned degrees, then
/// the replicas.
std::vector<int64_t> gridExtents(const OpConfig &config) {
  std::vector<int64_t> extents;
  for (int64_t d : config.degrees)
    if (d > 1)
      extents.push_back(d);
  if (config.replicas > 1)
    extents.push_back(config.replicas);
  return extents;
}
} // namespace

std::vector<int64_t> OpConfig::effectiveStrides() const {
  if (!strides.empty())
    return strides;
  std::vector<int64_t> extents = gridExtents(*this);
  std::vector<int64_t> result(extents.size());
  int64_t running = 1;
  for (size_t i = extents.size(); i-- > 0;) {
    result[i] = running;
    running *= extents[i];
  }
  return result;
}

std::vector<int64_t> OpConfig::devices() const {
  std::vector<int64_t> extents = gridExtents(*this);
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

/// Why `config.scatterDim` does not fit (the degrees are valid): every
/// result must be a partial sum (so that no result is kept whole for the
/// backward kernel) with that dim, and its box must split into one equal
/// piece per member of the summing group.
static absl::Status checkScatter(const IterationSpace &space,
                                 const OpConfig &config) {
  std::ostringstream os;
  int64_t dim = config.scatterDim;
  if (dim < 0) {
    os << "scatter dim " << dim << " is negative";
    return absl::InvalidArgumentError(os.str());
  }
  std::vector<Range> iter = partitionRanges(space, config.degrees, 0);
  for (size_t r = 0; r < space.results.size(); ++r) {
    int64_t group = 1;
    for (size_t d = 0; d < config.degrees.size(); ++d)
      if (config.degrees[d] > 1 && space.makesPartialSum(d, r))
        group *= config.degrees[d];
    if (group == 1) {
      os << "scatter dim " << dim << " is set but result " << r
         << " is not a partial sum (no reduction dim it lacks is split)";
      return absl::InvalidArgumentError(os.str());
    }
    std::vector<Range> box = sliceOf(space.results[r], iter);
    if (dim >= static_cast<int64_t>(box.size())) {
      os << "scatter dim " << dim << " is not a dim of result " << r
         << ", which has " << box.size();
      return absl::InvalidArgumentError(os.str());
    }
    if (box[dim].size() % group != 0) {
      os << "scatter dim " << dim << " of result " << r << " has "
         << box[dim].size() << " elements per partition, which do not split "
         << "evenly among the " << group << " partitions that sum it";
      return absl::InvalidArgumentError(os.str());
    }
  }
  if (space.results.empty()) {
    os << "scatter dim " << dim << " is set but the op has no result";
    return absl::InvalidArgumentError(os.str());
  }
  return absl::OkStatus();
}

absl::Status checkConfig(const IterationSpace &space, const OpConfig &config,
                         std::optional<int64_t> numDevices) {
  std::ostringstream os;
  const std::vector<int64_t> &degrees = config.degrees;
  if (degrees.size() != space.dims.size()) {
    os << "strategy has " << degrees.size() << " degrees but the op has "
       << space.dims.size() << " iteration dims";
    return absl::InvalidArgumentError(os.str());
  }
  int64_t partitioned = 0;
  for (size_t i = 0; i < degrees.size(); ++i) {
    int64_t d = degrees[i];
    const IterDim &dim = space.dims[i];
    if (d < 1) {
      os << "degree " << i << " is " << d << "; degrees must be >= 1";
      return absl::InvalidArgumentError(os.str());
    }
    if (d > 1 && !dim.splittable) {
      os << "iteration dim " << i << " (" << stringifyIterKind(dim.kind)
         << ") cannot be split, but its degree is " << d;
      return absl::InvalidArgumentError(os.str());
    }
    if (dim.size % d != 0) {
      os << "degree " << d << " does not divide iteration dim " << i
         << " of size " << dim.size << " into equal partitions";
      return absl::InvalidArgumentError(os.str());
    }
    partitioned += d > 1;
  }
  if (config.replicas < 1) {
    os << "replicas is " << config.replicas << "; it must be >= 1";
    return absl::InvalidArgumentError(os.str());
  }
  if (static_cast<int>(config.sharding) > kMaxStateSharding) {
    os << "state sharding " << static_cast<int>(config.sharding)
       << " is not a ZeRO stage (0 to " << kMaxStateSharding << ")";
    return absl::InvalidArgumentError(os.str());
  }
  if (config.stage < 0) {
    os << "stage " << config.stage << " is negative";
    return absl::InvalidArgumentError(os.str());
  }
  if (config.scatterDim != -1) {
    if (absl::Status problem = checkScatter(space, config); !problem.ok())
      return problem;
  }
  partitioned += config.replicas > 1;
  if (config.start < 0) {
    os << "start device " << config.start << " is negative";
    return absl::InvalidArgumentError(os.str());
  }
  if (!config.strides.empty() &&
      static_cast<int64_t>(config.strides.size()) != partitioned) {
    os << "expected " << partitioned
       << " strides (one per dim with degree > 1, and one for the replicas "
          "when replicas > 1), got "
       << config.strides.size();
    return absl::InvalidArgumentError(os.str());
  }
  for (int64_t s : config.strides)
    if (s < 1) {
      os << "stride " << s << " must be >= 1";
      return absl::InvalidArgumentError(os.str());
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
    os << "strategy uses devices beyond 2^63 (the product of its degrees "
          "and strides overflows); "
       << describeLimit();
    return absl::InvalidArgumentError(os.str());
  }
  if (*highest >= deviceLimit) {
    os << "strategy uses device " << *highest << " but " << describeLimit();
    return absl::InvalidArgumentError(os.str());
  }
  // More partitions than devices in range: two share a device.
  if (*partitions > deviceLimit)
    return absl::InvalidArgumentError(
        "strategy maps two instances to one device; the strides overlap");
  std::vector<int64_t> devices = config.devices();
  if (std::set<int64_t>(devices.begin(), devices.end()).size() !=
      devices.size())
    return absl::InvalidArgumentError(
        "strategy maps two instances to one device; the strides overlap");
  return absl::OkStatus();
}

} // namespace ppc
