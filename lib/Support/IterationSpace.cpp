//===- IterationSpace.cpp - SOAP iteration spaces of graph ops ------------===//
//
// MLIR-free: used by the graph dialect, the simulator and the search alike.
//
//===----------------------------------------------------------------------===//

#include "ppc/Support/IterationSpace.h"

#include "ppc/Support/CheckedMath.h"
#include "ppc/Support/SequenceOrder.h"

#include <algorithm>
#include <sstream>

namespace ppc {

const char *stringifyIterKind(IterKind kind) {
  switch (kind) {
  case IterKind::Sample:
    return "sample";
  case IterKind::Attribute:
    return "attribute";
  case IterKind::Parameter:
    return "parameter";
  case IterKind::Reduction:
    return "reduction";
  }
  return "unknown";
}

std::optional<IterKind> symbolizeIterKind(const std::string &name) {
  for (IterKind k : {IterKind::Sample, IterKind::Attribute, IterKind::Parameter,
                     IterKind::Reduction})
    if (name == stringifyIterKind(k))
      return k;
  return std::nullopt;
}

int64_t IterationSpace::numPoints() const {
  int64_t n = 1;
  for (const IterDim &d : dims)
    n *= d.size;
  return n;
}

/// Points (s, t) of [s0, s1) x [t0, t1) with t <= s.
static double causalPairs(const Range &query, const Range &key) {
  double s0 = static_cast<double>(query.lo), s1 = static_cast<double>(query.hi);
  double t0 = static_cast<double>(key.lo), t1 = static_cast<double>(key.hi);
  if (s1 <= s0 || t1 <= t0)
    return 0;
  // Row s sees min(max(s + 1 - t0, 0), t1 - t0) keys: none before t0, a
  // ramp up to t1 - 1, then every key.
  double rampLo = std::max(s0, t0), rampHi = std::min(s1, t1);
  double pairs = 0;
  if (rampHi > rampLo)
    pairs += (rampHi - rampLo) * (rampLo + rampHi + 1 - 2 * t0) / 2;
  double fullLo = std::max(s0, t1);
  if (s1 > fullLo)
    pairs += (s1 - fullLo) * (t1 - t0);
  return pairs;
}

double IterationSpace::workFraction(const std::vector<Range> &iter) const {
  double points = 1, whole = 1;
  for (size_t d = 0; d < dims.size() && d < iter.size(); ++d) {
    if (causal && (static_cast<int32_t>(d) == causal->query ||
                   static_cast<int32_t>(d) == causal->key))
      continue;
    points *= static_cast<double>(iter[d].size());
    whole *= static_cast<double>(dims[d].size);
  }
  if (causal) {
    auto full = [&](int32_t d) { return Range{0, dims[d].size}; };
    // In zigzag order a stored range is runs of natural positions.
    auto runs = [&](Range stored) {
      std::vector<Range> out;
      forEachZigzagRun(stored.lo, stored.hi, dims[causal->query].size,
                       causal->zigzag, [&](int64_t at, int64_t count) {
                         out.push_back({at, at + count});
                       });
      return out;
    };
    double pairs = 0;
    for (const Range &query : runs(iter[causal->query]))
      for (const Range &key : runs(iter[causal->key]))
        pairs += causalPairs(query, key);
    points *= pairs;
    whole *= causalPairs(full(causal->query), full(causal->key));
  }
  return whole > 0 ? points / whole : 0;
}

bool IterationSpace::makesPartialSum(unsigned d, unsigned r) const {
  return !results.at(r).indexes(d);
}

static absl::Status validateAccess(const IterationSpace &space,
                                   const TensorAccess &t, const char *what,
                                   unsigned index) {
  std::ostringstream os;
  if (t.shape.size() != t.dims.size()) {
    os << what << " #" << index << " has rank " << t.shape.size() << " but "
       << t.dims.size() << " dim accesses";
    return absl::InvalidArgumentError(os.str());
  }
  // Slices and transfers are sized from volumes in int64.
  if (!checkedProduct(t.shape)) {
    os << what << " #" << index << " has more than 2^63 elements";
    return absl::InvalidArgumentError(os.str());
  }
  for (size_t i = 0; i < t.dims.size(); ++i) {
    const DimAccess &a = t.dims[i];
    if (a.isWhole())
      continue;
    if (a.iterDim >= static_cast<int32_t>(space.dims.size()) || a.divisor < 1 ||
        a.stride < 0 || a.extent < 1) {
      os << what << " #" << index << " dim " << i
         << " has an invalid access to iteration dim " << a.iterDim;
      return absl::InvalidArgumentError(os.str());
    }
  }
  return absl::OkStatus();
}

absl::Status IterationSpace::validate() const {
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i].size < 1)
      return absl::InvalidArgumentError("iteration dim " + std::to_string(i) +
                                        " has size " +
                                        std::to_string(dims[i].size));
  std::vector<int64_t> sizes;
  for (const IterDim &dim : dims)
    sizes.push_back(dim.size);
  if (!checkedProduct(sizes))
    return absl::InvalidArgumentError(
        "the iteration space has more than 2^63 points");
  for (size_t i = 0; i < operands.size(); ++i)
    PPC_RETURN_IF_ERROR(validateAccess(*this, operands[i], "operand", i));
  for (size_t i = 0; i < results.size(); ++i)
    PPC_RETURN_IF_ERROR(validateAccess(*this, results[i], "result", i));
  if (flatView &&
      (operands.empty() || results.empty() ||
       *checkedProduct(operands[0].shape) != *checkedProduct(results[0].shape)))
    return absl::InvalidArgumentError(
        "a flat view whose result 0 does not have operand 0's element "
        "count");
  if (causal) {
    int32_t n = static_cast<int32_t>(dims.size());
    if (causal->query < 0 || causal->query >= n || causal->key < 0 ||
        causal->key >= n || causal->query == causal->key)
      return absl::InvalidArgumentError(
          "a causal domain names iteration dims " +
          std::to_string(causal->query) + " and " +
          std::to_string(causal->key) + " of " + std::to_string(n));
    int64_t length = dims[causal->query].size;
    if (causal->zigzag < 0 ||
        (causal->zigzag > 0 && (dims[causal->key].size != length ||
                                length % (2 * causal->zigzag) != 0)))
      return absl::InvalidArgumentError(
          "a causal domain in zigzag order of " +
          std::to_string(causal->zigzag) +
          " pairs needs as many keys as queries, a multiple of " +
          std::to_string(2 * causal->zigzag));
  }
  if (expertDim >= static_cast<int32_t>(dims.size()) ||
      (expertDim >= 0 && (results.empty() || !results[0].indexes(expertDim))))
    return absl::InvalidArgumentError(
        "the expert dim " + std::to_string(expertDim) +
        " is no iteration dim that indexes result 0");
  if (staged) {
    auto badDim = [&](int32_t d) {
      return d < 0 || d >= static_cast<int32_t>(dims.size());
    };
    for (int32_t d : staged->acrossDims)
      if (badDim(d))
        return absl::InvalidArgumentError(
            "staged kernel: statistics group names iteration dim " +
            std::to_string(d));
    for (const auto *pass : {&staged->forward, &staged->backward}) {
      int32_t stages = pass == &staged->forward ? staged->forwardStages
                                                : staged->backwardStages;
      for (const StageScratch &scratch : *pass) {
        if (scratch.syncAfter >= stages - 1 || scratch.syncAfter < -1)
          return absl::InvalidArgumentError(
              "staged kernel: a scratch buffer syncs after stage " +
              std::to_string(scratch.syncAfter) + " of " +
              std::to_string(stages));
        for (const ScratchDim &dim : scratch.shape)
          if (dim.iterDim >= 0 ? badDim(dim.iterDim) : dim.size < 1)
            return absl::InvalidArgumentError(
                "staged kernel: a scratch dim is empty or names a "
                "missing iteration dim");
      }
    }
  }
  return absl::OkStatus();
}

std::vector<int64_t>
StagedKernel::shapeOf(const StageScratch &scratch,
                      const std::vector<Range> &iter) const {
  std::vector<int64_t> shape;
  for (const ScratchDim &dim : scratch.shape)
    shape.push_back(dim.iterDim >= 0 ? iter.at(dim.iterDim).size() : dim.size);
  return shape;
}

bool StagedKernel::runsFor(const std::vector<int64_t> &degrees,
                           bool training) const {
  if (trainingOnly && !training)
    return false;
  if (!onlyWhenSplit)
    return true;
  for (int32_t d : acrossDims)
    if (static_cast<size_t>(d) < degrees.size() && degrees[d] > 1)
      return true;
  return false;
}

static int64_t floorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

std::vector<Range> sliceOf(const TensorAccess &access,
                           const std::vector<Range> &iter) {
  std::vector<Range> slice(access.shape.size());
  for (size_t i = 0; i < access.shape.size(); ++i) {
    const DimAccess &a = access.dims[i];
    int64_t size = access.shape[i];
    if (a.isWhole()) {
      slice[i] = {0, size};
      continue;
    }
    const Range &r = iter.at(a.iterDim);
    if (r.size() == 0) {
      slice[i] = {0, 0};
      continue;
    }
    int64_t lo = floorDiv(r.lo, a.divisor) * a.stride + a.offset;
    int64_t hi = floorDiv(r.hi - 1, a.divisor) * a.stride + a.offset + a.extent;
    lo = std::clamp<int64_t>(lo, 0, size);
    hi = std::clamp<int64_t>(hi, 0, size);
    slice[i] = {lo, std::max(lo, hi)};
  }
  return slice;
}

std::vector<Range> partitionRanges(const IterationSpace &space,
                                   const std::vector<int64_t> &degrees,
                                   int64_t index) {
  std::vector<Range> ranges(space.dims.size());
  for (size_t i = space.dims.size(); i-- > 0;) {
    int64_t deg = i < degrees.size() ? degrees[i] : 1;
    int64_t part = index % deg;
    index /= deg;
    int64_t size = space.dims[i].size;
    // Even split; the first `size % deg` parts take one extra element.
    int64_t base = size / deg, extra = size % deg;
    int64_t lo = part * base + std::min(part, extra);
    ranges[i] = {lo, lo + base + (part < extra ? 1 : 0)};
  }
  return ranges;
}

bool operator==(const IterDim &a, const IterDim &b) {
  return a.size == b.size && a.kind == b.kind && a.splittable == b.splittable;
}

bool operator==(const TensorAccess &a, const TensorAccess &b) {
  return a.shape == b.shape && a.dims == b.dims;
}

bool operator==(const ScratchDim &a, const ScratchDim &b) {
  return a.size == b.size && a.iterDim == b.iterDim;
}

bool operator==(const StageScratch &a, const StageScratch &b) {
  return a.shape == b.shape && a.syncAfter == b.syncAfter && a.max == b.max;
}

bool operator==(const StagedKernel &a, const StagedKernel &b) {
  return a.forwardStages == b.forwardStages &&
         a.backwardStages == b.backwardStages && a.forward == b.forward &&
         a.backward == b.backward && a.acrossDims == b.acrossDims &&
         a.trainingOnly == b.trainingOnly &&
         a.onlyWhenSplit == b.onlyWhenSplit && a.backwardWork == b.backwardWork;
}

bool operator==(const CausalDomain &a, const CausalDomain &b) {
  return a.query == b.query && a.key == b.key && a.zigzag == b.zigzag;
}

bool operator==(const IterationSpace &a, const IterationSpace &b) {
  return a.dims == b.dims && a.operands == b.operands &&
         a.results == b.results && a.staged == b.staged &&
         a.flatView == b.flatView && a.matrixProduct == b.matrixProduct &&
         a.causal == b.causal && a.expertDim == b.expertDim;
}

bool operator==(const OpCost &a, const OpCost &b) {
  return a.fwdFlops == b.fwdFlops && a.bwdFlops == b.bwdFlops &&
         a.fwdBytes == b.fwdBytes && a.bwdBytes == b.bwdBytes &&
         a.kernel == b.kernel;
}

std::vector<IterKind> activationKinds(unsigned rank) {
  using K = IterKind;
  switch (rank) {
  case 0:
    return {};
  case 1:
    return {K::Sample};
  case 2:
    return {K::Sample, K::Parameter};
  case 3:
    return {K::Sample, K::Attribute, K::Parameter};
  default: {
    // [N, C, spatial...] and [N, heads, S, S].
    std::vector<K> kinds(rank, K::Attribute);
    kinds[0] = K::Sample;
    kinds[1] = K::Parameter;
    return kinds;
  }
  }
}

} // namespace ppc
