//===- ConfigSpace.cpp - the SOAP configurations of every op --------------===//
//
// Per op: every degree vector over its splittable iteration dims (sample,
// attribute, parameter, and reduction when allowed) whose product divides
// the device count, times the machine views that place it on the machine:
// contiguous blocks at every aligned start, the partitions replicated over
// the whole machine, and strided views that spread one partitioned dim
// across nodes while the others stay packed inside a node; a view that
// leaves partial sums also reduce-scatters them along one result dim that
// splits evenly (that changes where the sums are held, so edges differ).
// Recomputation and
// state sharding are not enumerated: they change no edge, only an op's own
// time and memory, and MCMC proposes them as moves of their own.
//
//===----------------------------------------------------------------------===//

#include "ppc/Search/Search.h"

#include "Divisors.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

namespace ppc::search {

double objective(const Problem &problem,
                 const std::vector<sim::DeviceStats> &devices,
                 double iterationTime) {
  for (const sim::DeviceStats &device : devices)
    if (device.memory.total() > device.capacity)
      return std::numeric_limits<double>::infinity();
  return iterationTime;
}

double objective(const Problem &problem, const sim::SimResult &result) {
  if (result.stopped)
    return std::numeric_limits<double>::infinity();
  return objective(problem, result.devices, result.iterationTime);
}

namespace {

/// Prime factors of `n` with multiplicity, ascending.
std::vector<int64_t> primeFactors(int64_t n) {
  std::vector<int64_t> factors;
  for (int64_t p = 2; p * p <= n; ++p)
    while (n % p == 0) {
      factors.push_back(p);
      n /= p;
    }
  if (n > 1)
    factors.push_back(n);
  return factors;
}

/// Every degree vector of `dims` whose product divides `numDevices`, with
/// each degree a divisor of `numDevices` that divides its dim.
std::vector<std::vector<int64_t>>
degreeVectors(const std::vector<IterDim> &dims, bool reductionSplits,
              int maxSplitDims, const std::vector<int64_t> &deviceDivisors,
              int64_t numDevices) {
  std::vector<std::vector<int64_t>> result;
  std::vector<int64_t> degrees(dims.size(), 1);
  // Depth-first over dims; `budget` is what the degrees so far leave of the
  // device count (the product of the rest must divide it).
  auto recurse = [&](auto &self, size_t d, int64_t budget, int splits) -> void {
    if (d == dims.size()) {
      result.push_back(degrees);
      return;
    }
    const IterDim &dim = dims[d];
    bool searched =
        dim.splittable && (dim.kind != IterKind::Reduction || reductionSplits);
    for (int64_t k : deviceDivisors) {
      if (k > 1 && (!searched || budget % k != 0 || dim.size % k != 0 ||
                    (maxSplitDims > 0 && splits == maxSplitDims)))
        continue;
      degrees[d] = k;
      self(self, d + 1, budget / k, splits + (k > 1));
    }
    degrees[d] = 1;
  };
  recurse(recurse, 0, numDevices, 0);
  return result;
}

int64_t product(const std::vector<int64_t> &values) {
  int64_t p = 1;
  for (int64_t v : values)
    p *= v;
  return p;
}

/// Devices per node when the machine is made of equal nodes numbered in
/// contiguous blocks (always so for cluster machines), else 0.
int64_t uniformDevicesPerNode(const Machine &machine) {
  if (machine.cluster)
    return machine.cluster->devicesPerNode;
  int64_t numDevices = machine.numDevices(), nodes = machine.numNodes();
  if (nodes <= 0 || numDevices % nodes != 0)
    return 0;
  int64_t perNode = numDevices / nodes;
  for (int64_t d = 0; d < numDevices; ++d)
    if (machine.getNode(d) != d / perNode)
      return 0;
  return perNode;
}

/// The machine views of `degrees`: contiguous at every start aligned to the
/// partition count, replicated over the whole machine (when `replicate`),
/// then (on a machine of several equal nodes) views that
/// stride one partitioned dim across nodes, keeping the other partitioned
/// dims packed inside a node. Views that map partitions to devices the same
/// way as an earlier one are left out, and with `anchoredOnly` those that
/// do not start at device 0.
void appendViews(const std::vector<int64_t> &degrees, int64_t numDevices,
                 int64_t devicesPerNode, bool stridedViews, bool replicate,
                 bool anchoredOnly, std::vector<OpConfig> &out) {
  int64_t partitions = product(degrees);
  // The replicas, the start (instance 0's device) and the strides (the
  // step to the next instance's device along each grid dim) fix how a view
  // of these degrees places its instances. Contiguous views differ by their
  // starts, the replicated one by its replicas, strided ones of one dim
  // across nodes by their starts and of different dims by their strides:
  // only a strided view whose strides are the row-major ones can repeat a
  // contiguous view (a set of every view's key cost seconds on thousands
  // of devices).
  const std::vector<int64_t> contiguousStrides =
      OpConfig{degrees, 0, {}}.effectiveStrides();
  int64_t lastStart = anchoredOnly ? 0 : numDevices - partitions;
  for (int64_t start = 0; start <= lastStart; start += partitions)
    out.push_back(OpConfig{degrees, start, {}});
  // Replicated over the whole machine: each partition on a contiguous block
  // of devices (Megatron's layer norms, replicated in each tensor-parallel
  // group next to the group's column-parallel linears).
  if (replicate && partitions < numDevices) {
    OpConfig replicated{degrees, 0, {}};
    replicated.replicas = numDevices / partitions;
    out.push_back(std::move(replicated));
  }
  auto addStrided = [&](OpConfig config) {
    if (anchoredOnly && config.start != 0)
      return;
    if (config.start % partitions == 0 &&
        config.effectiveStrides() == contiguousStrides)
      return;
    out.push_back(std::move(config));
  };

  int64_t nodes = devicesPerNode > 0 ? numDevices / devicesPerNode : 0;
  if (!stridedViews || nodes < 2)
    return;
  std::vector<size_t> partitioned;
  for (size_t d = 0; d < degrees.size(); ++d)
    if (degrees[d] > 1)
      partitioned.push_back(d);
  for (size_t across = 0; across < partitioned.size(); ++across) {
    int64_t acrossDegree = degrees[partitioned[across]];
    int64_t inside = partitions / acrossDegree;
    if (nodes % acrossDegree != 0 || devicesPerNode % inside != 0)
      continue;
    // Row-major packing of the other partitioned dims inside a node.
    std::vector<int64_t> strides(partitioned.size());
    int64_t running = 1;
    for (size_t i = partitioned.size(); i-- > 0;) {
      if (i == across)
        continue;
      strides[i] = running;
      running *= degrees[partitioned[i]];
    }
    strides[across] = devicesPerNode;
    for (int64_t group = 0; group < nodes / acrossDegree; ++group)
      for (int64_t slot = 0; slot < devicesPerNode / inside; ++slot)
        addStrided(OpConfig{
            degrees, group * acrossDegree * devicesPerNode + slot * inside,
            strides});
  }
}

/// `config` with its partial sums reduce-scattered along one result dim:
/// the first indexed by an attribute dim (a sequence or image row: the
/// layout sequence parallelism gives the ops after a row-parallel layer),
/// else by a sample dim, else any, that splits evenly; none when `config`
/// leaves no partial sums. One variant per configuration keeps the space
/// from multiplying by the result's rank.
std::optional<OpConfig> scatteredVariant(const IterationSpace &space,
                                         const OpConfig &config,
                                         int64_t numDevices) {
  if (space.results.empty())
    return std::nullopt;
  const std::vector<DimAccess> &dims = space.results[0].dims;
  for (int pass = 0; pass < 3; ++pass)
    for (size_t d = 0; d < dims.size(); ++d) {
      IterKind kind = dims[d].isWhole() ? IterKind::Reduction
                                        : space.dims[dims[d].iterDim].kind;
      if ((pass == 0 && kind != IterKind::Attribute) ||
          (pass == 1 && kind != IterKind::Sample))
        continue;
      OpConfig scattered = config;
      scattered.scatterDim = static_cast<int64_t>(d);
      if (checkConfig(space, scattered, numDevices).ok())
        return scattered;
    }
  return std::nullopt;
}

/// Everything of `space` its configurations depend on, flattened: ops with
/// equal keys have equal configuration lists.
std::vector<int64_t> spaceKey(const IterationSpace &space) {
  std::vector<int64_t> key;
  // Counts before each list keep the flattening unambiguous.
  key.push_back(static_cast<int64_t>(space.dims.size()));
  key.push_back(space.ring ? 1 : 0);
  for (const IterDim &dim : space.dims)
    key.insert(key.end(), {dim.size, static_cast<int64_t>(dim.kind),
                           static_cast<int64_t>(dim.splittable)});
  for (const std::vector<TensorAccess> *tensors :
       {&space.operands, &space.results}) {
    key.push_back(static_cast<int64_t>(tensors->size()));
    for (const TensorAccess &tensor : *tensors) {
      key.push_back(static_cast<int64_t>(tensor.shape.size()));
      key.insert(key.end(), tensor.shape.begin(), tensor.shape.end());
      key.push_back(static_cast<int64_t>(tensor.dims.size()));
      for (const DimAccess &a : tensor.dims)
        key.insert(key.end(),
                   {a.iterDim, a.divisor, a.stride, a.offset, a.extent});
    }
  }
  return key;
}

} // namespace

std::vector<int64_t> detail::divisors(int64_t n) {
  std::set<int64_t> divisors = {1};
  for (int64_t p : primeFactors(n)) {
    std::set<int64_t> next = divisors;
    for (int64_t d : divisors)
      next.insert(d * p);
    divisors = std::move(next);
  }
  return {divisors.begin(), divisors.end()};
}

ConfigSpace::ConfigSpace(const sim::Graph &graph, const Machine &machine,
                         SpaceOptions options)
    : spaceOptions(options) {
  int64_t numDevices = machine.numDevices();
  std::vector<int64_t> deviceDivisors = detail::divisors(numDevices);
  int64_t devicesPerNode = uniformDevicesPerNode(machine);
  std::map<std::vector<int64_t>, uint32_t> listOfSpace;
  listOf.reserve(graph.ops.size());
  for (const sim::Op &op : graph.ops) {
    auto [it, added] = listOfSpace.try_emplace(
        spaceKey(op.space), static_cast<uint32_t>(lists.size()));
    listOf.push_back(it->second);
    if (!added)
      continue;
    std::vector<std::vector<int64_t>> vectors =
        degreeVectors(op.space.dims, options.reductionSplits,
                      options.maxSplitDims, deviceDivisors, numDevices);
    // Largest total degree first; ties in lexicographic order, so the cap
    // keeps the same vectors on every run.
    std::stable_sort(
        vectors.begin(), vectors.end(),
        [](const std::vector<int64_t> &a, const std::vector<int64_t> &b) {
          int64_t pa = product(a), pb = product(b);
          return pa != pb ? pa > pb : a > b;
        });
    if (options.maxDegreeVectors > 0 &&
        static_cast<int64_t>(vectors.size()) > options.maxDegreeVectors)
      vectors.resize(options.maxDegreeVectors);
    std::vector<OpConfig> configs;
    for (const std::vector<int64_t> &degrees : vectors)
      appendViews(degrees, numDevices, devicesPerNode, options.stridedViews,
                  options.replicas, options.anchoredViews, configs);
    if (options.scatter) {
      // Whether and where partial sums scatter depends on the degrees
      // only: found once per degree vector, not per view (thousands of
      // views each on a large machine).
      std::map<std::vector<int64_t>, std::optional<int64_t>> scatterDimOf;
      size_t unscattered = configs.size();
      configs.reserve(2 * unscattered);
      for (size_t c = 0; c < unscattered; ++c) {
        auto [it, fresh] = scatterDimOf.try_emplace(configs[c].degrees);
        if (fresh)
          if (std::optional<OpConfig> scattered =
                  scatteredVariant(op.space, configs[c], numDevices))
            it->second = scattered->scatterDim;
        if (!it->second)
          continue;
        OpConfig scattered = configs[c];
        scattered.scatterDim = *it->second;
        configs.push_back(std::move(scattered));
      }
    }
    if (op.space.ring) {
      // Each configuration that splits the ring's `along` dim and not its
      // streamed one may run as a ring instead (OpConfig::ring).
      const RingSpec &ring = *op.space.ring;
      size_t plain = configs.size();
      for (size_t c = 0; c < plain; ++c) {
        if (configs[c].degrees[ring.along] < 2 ||
            configs[c].degrees[ring.streamed] != 1)
          continue;
        if (absl::StatusOr<OpConfig> variant =
                asRing(op.space, configs[c], numDevices);
            variant.ok())
          configs.push_back(std::move(*variant));
      }
    }
    for ([[maybe_unused]] const OpConfig &config : configs)
      assert(checkConfig(op.space, config, numDevices).ok());
    lists.push_back(std::move(configs));
  }
}

double ConfigSpace::log10Size() const {
  double sum = 0;
  for (uint32_t list : listOf)
    sum += std::log10(
        static_cast<double>(std::max<size_t>(lists[list].size(), 1)));
  return sum;
}

} // namespace ppc::search
