//===- Graph.cpp - the simulator's view of a training graph ---------------===//
//
// Well-formedness checks and the two trivial strategies every search starts
// from (or compares against): everything on one device, and data parallel.
//
//===----------------------------------------------------------------------===//

#include "ppc/Simulator/Graph.h"

#include "ppc/Support/CheckedMath.h"

#include <algorithm>
#include <random>
#include <sstream>

namespace ppc::sim {
namespace {

std::string shapeString(const std::vector<int64_t> &shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i)
    os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

/// "op 3 'fc1' (ppc.matmul)": how errors name an op.
std::string describeOp(const Graph &graph, size_t index) {
  const Op &op = graph.ops[index];
  std::string text = "op " + std::to_string(index);
  if (!op.name.empty())
    text += " '" + op.name + "'";
  if (!op.kind.empty())
    text += " (" + op.kind + ")";
  return text;
}

/// OK, or the problem with operand `operand` of op `index`.
absl::Status validateSource(const Graph &graph, size_t index, size_t operand) {
  const Op &op = graph.ops[index];
  const Source &source = op.operands[operand];
  const std::vector<int64_t> &shape = op.space.operands[operand].shape;
  std::string where =
      describeOp(graph, index) + ": operand " + std::to_string(operand) + ": ";
  switch (source.kind) {
  case Source::Kind::Op: {
    if (source.index < 0 || static_cast<size_t>(source.index) >= index)
      return absl::InvalidArgumentError(
          where + "source op " + std::to_string(source.index) +
          (source.index >= 0 &&
                   static_cast<size_t>(source.index) < graph.ops.size()
               ? " is not an earlier op"
               : " out of range"));
    const Op &producer = graph.ops[source.index];
    if (source.result < 0 ||
        static_cast<size_t>(source.result) >= producer.space.results.size())
      return absl::InvalidArgumentError(
          where + "result " + std::to_string(source.result) + " of op " +
          std::to_string(source.index) + " out of range (it has " +
          std::to_string(producer.space.results.size()) + ")");
    const std::vector<int64_t> &produced =
        producer.space.results[source.result].shape;
    // Transfers are sized from the producer's slices and read as the
    // consumer's slices: the two must describe the same tensor.
    if (produced != shape)
      return absl::InvalidArgumentError(
          where + "shape " + shapeString(shape) + " but result " +
          std::to_string(source.result) + " of op " +
          std::to_string(source.index) + " has shape " + shapeString(produced));
    return absl::OkStatus();
  }
  case Source::Kind::Input:
    if (source.index < 0 || source.index >= graph.numInputs)
      return absl::InvalidArgumentError(
          where + "input " + std::to_string(source.index) + " out of range (" +
          std::to_string(graph.numInputs) + " inputs)");
    return absl::OkStatus();
  case Source::Kind::Weight: {
    if (source.index < 0 ||
        static_cast<size_t>(source.index) >= graph.weights.size())
      return absl::InvalidArgumentError(
          where + "weight " + std::to_string(source.index) + " out of range (" +
          std::to_string(graph.weights.size()) + " weights)");
    const Weight &weight = graph.weights[source.index];
    if (weight.shape != shape)
      return absl::InvalidArgumentError(
          where + "shape " + shapeString(shape) + " but weight " +
          std::to_string(source.index) + " '" + weight.name + "' has shape " +
          shapeString(weight.shape));
    return absl::OkStatus();
  }
  case Source::Kind::Constant:
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(where + "unknown source kind");
}

/// Adds the bytes of tensor `what` of `shape` to `total`. Returns the
/// problem (and leaves `total` unchanged) when a dim is negative or the
/// bytes do not fit in int64 or push `total` past kMaxGraphBytes, else OK.
absl::Status addTensorBytes(const std::string &what,
                            const std::vector<int64_t> &shape,
                            int64_t elemBytes, int64_t &total) {
  if (std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; }))
    return absl::InvalidArgumentError(what + ": negative dim in shape " +
                                      shapeString(shape));
  std::optional<int64_t> volume = checkedProduct(shape);
  std::optional<int64_t> bytes =
      volume ? checkedMul(*volume, elemBytes) : std::nullopt;
  if (!bytes || *bytes > kMaxGraphBytes - total)
    return absl::InvalidArgumentError(
        what + " of shape " + shapeString(shape) +
        " takes the graph's tensors past 2^60 bytes (1 EiB), more than "
        "the simulator's int64 memory accounting can represent");
  total += *bytes;
  return absl::OkStatus();
}

} // namespace

absl::Status Graph::validate() const {
  if (numInputs < 0)
    return absl::InvalidArgumentError("negative input count " +
                                      std::to_string(numInputs));
  // Sizes from huge batches must be an error, not wrapped-around products.
  int64_t totalBytes = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    std::string what =
        "weight " + std::to_string(i) + " '" + weights[i].name + "'";
    if (weights[i].elemBytes < 1)
      return absl::InvalidArgumentError(what + ": element size " +
                                        std::to_string(weights[i].elemBytes));
    if (absl::Status problem = addTensorBytes(what, weights[i].shape,
                                              weights[i].elemBytes, totalBytes);
        !problem.ok())
      return problem;
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op &op = ops[i];
    if (absl::Status problem = op.space.validate(); !problem.ok())
      return annotate(problem, describeOp(*this, i));
    if (op.operands.size() != op.space.operands.size())
      return absl::InvalidArgumentError(
          describeOp(*this, i) + ": " + std::to_string(op.operands.size()) +
          " sources for " + std::to_string(op.space.operands.size()) +
          " operands of the iteration space");
    if (op.elemBytes < 1)
      return absl::InvalidArgumentError(describeOp(*this, i) +
                                        ": element size " +
                                        std::to_string(op.elemBytes));
    for (size_t o = 0; o < op.operands.size(); ++o)
      if (absl::Status problem = validateSource(*this, i, o); !problem.ok())
        return problem;
    // Operands count too: each consumer may receive its own copy.
    for (size_t o = 0; o < op.space.operands.size(); ++o)
      if (absl::Status problem = addTensorBytes(
              describeOp(*this, i) + ": operand " + std::to_string(o),
              op.space.operands[o].shape, op.elemBytes, totalBytes);
          !problem.ok())
        return problem;
    for (size_t r = 0; r < op.space.results.size(); ++r)
      if (absl::Status problem = addTensorBytes(
              describeOp(*this, i) + ": result " + std::to_string(r),
              op.space.results[r].shape, op.elemBytes, totalBytes);
          !problem.ok())
        return problem;
  }
  return absl::OkStatus();
}

uint64_t contractedOperands(const Op &op) {
  const IterationSpace &space = op.space;
  size_t numOperands = std::min<size_t>(space.operands.size(), 64);
  uint64_t contracted = 0;
  for (size_t d = 0; d < space.dims.size(); ++d) {
    if (std::any_of(space.results.begin(), space.results.end(),
                    [&](const TensorAccess &t) { return t.indexes(d); }))
      continue;
    uint64_t readers = 0;
    for (size_t i = 0; i < numOperands; ++i)
      if (space.operands[i].indexes(d))
        readers |= uint64_t(1) << i;
    if (!(readers & (readers - 1))) // fewer than two
      continue;
    // Some pair of readers with a dim of its own each: the two sides of a
    // product.
    auto ownDim = [&](size_t i, size_t j) {
      for (size_t e = 0; e < space.dims.size(); ++e)
        if (space.operands[i].indexes(e) && !space.operands[j].indexes(e))
          return true;
      return false;
    };
    bool product = false;
    for (size_t i = 0; i < numOperands && !product; ++i)
      for (size_t j = i + 1; j < numOperands && !product; ++j)
        product = (readers >> i & 1) && (readers >> j & 1) && ownDim(i, j) &&
                  ownDim(j, i);
    if (product)
      contracted |= readers;
  }
  return contracted;
}

std::vector<int> readerCounts(const Graph &graph) {
  std::vector<int> readers(graph.ops.size(), 0);
  for (const Op &op : graph.ops)
    for (const Source &src : op.operands)
      if (src.kind == Source::Kind::Op)
        ++readers[src.index];
  return readers;
}

std::vector<std::vector<size_t>> neighbours(const Graph &graph) {
  std::vector<std::vector<size_t>> result(graph.ops.size());
  for (size_t c = 0; c < graph.ops.size(); ++c)
    for (const Source &source : graph.ops[c].operands)
      if (source.kind == Source::Kind::Op) {
        size_t p = static_cast<size_t>(source.index);
        result[c].push_back(p);
        result[p].push_back(c);
      }
  for (std::vector<size_t> &list : result) {
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
  }
  return result;
}

bool sameButNames(const Graph &a, const Graph &b) {
  if (a.numInputs != b.numInputs || a.ops.size() != b.ops.size() ||
      a.weights.size() != b.weights.size())
    return false;
  for (size_t i = 0; i < a.weights.size(); ++i) {
    const Weight &x = a.weights[i], &y = b.weights[i];
    if (x.shape != y.shape || x.elemBytes != y.elemBytes ||
        x.trainable != y.trainable)
      return false;
  }
  auto sameSource = [](const Source &x, const Source &y) {
    return x.kind == y.kind && x.index == y.index && x.result == y.result;
  };
  for (size_t i = 0; i < a.ops.size(); ++i) {
    const Op &x = a.ops[i], &y = b.ops[i];
    if (x.kind != y.kind || x.dtype != y.dtype || x.elemBytes != y.elemBytes ||
        x.differentiable != y.differentiable ||
        x.operands.size() != y.operands.size() || !(x.cost == y.cost) ||
        !(x.space == y.space))
      return false;
    for (size_t o = 0; o < x.operands.size(); ++o)
      if (!sameSource(x.operands[o], y.operands[o]))
        return false;
  }
  return true;
}

std::vector<WeightUse> weightHolders(const Graph &graph) {
  std::vector<WeightUse> holders(graph.weights.size());
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    const std::vector<Source> &operands = graph.ops[i].operands;
    for (size_t o = 0; o < operands.size(); ++o) {
      const Source &src = operands[o];
      if (src.kind != Source::Kind::Weight || src.index < 0 ||
          static_cast<size_t>(src.index) >= holders.size() ||
          holders[src.index].op >= 0)
        continue;
      holders[src.index] = {static_cast<int32_t>(i), static_cast<int32_t>(o)};
    }
  }
  return holders;
}

void followBatch(Graph &graph, const std::vector<int> &inputBatchDims) {
  // batchOf[op][result]: the tensor dim that carries the batch, or -1.
  std::vector<std::vector<int>> batchOf(graph.ops.size());
  auto batchDimOf = [&](const Source &src) -> int {
    switch (src.kind) {
    case Source::Kind::Input:
      return static_cast<size_t>(src.index) < inputBatchDims.size()
                 ? inputBatchDims[src.index]
                 : 0;
    case Source::Kind::Op:
      return batchOf[src.index][src.result];
    default:
      return -1;
    }
  };
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    Op &op = graph.ops[i];
    std::vector<IterDim> &dims = op.space.dims;
    int sample = -1; // the iteration dim that carries the batch
    bool readsBatch = false;
    for (size_t o = 0; o < op.operands.size() && sample < 0; ++o) {
      int b = batchDimOf(op.operands[o]);
      const std::vector<DimAccess> &access = op.space.operands[o].dims;
      if (b < 0 || static_cast<size_t>(b) >= access.size())
        continue;
      readsBatch = true;
      int d = access[b].iterDim;
      if (d >= 0 && static_cast<size_t>(d) < dims.size() &&
          dims[d].kind != IterKind::Reduction)
        sample = d;
    }
    if (sample >= 0) {
      for (IterDim &dim : dims)
        if (dim.kind == IterKind::Sample)
          dim.kind = IterKind::Attribute;
      dims[sample].kind = IterKind::Sample;
    } else if (!readsBatch) {
      // Nothing to follow (a graph that starts from weights or constants):
      // the op's own guess stands.
      for (size_t d = 0; d < dims.size() && sample < 0; ++d)
        if (dims[d].kind == IterKind::Sample)
          sample = static_cast<int>(d);
    }
    batchOf[i].assign(op.space.results.size(), -1);
    if (sample < 0)
      continue;
    for (size_t r = 0; r < op.space.results.size(); ++r) {
      const std::vector<DimAccess> &access = op.space.results[r].dims;
      for (size_t t = 0; t < access.size(); ++t)
        if (access[t].iterDim == sample) {
          batchOf[i][r] = static_cast<int>(t);
          break;
        }
    }
  }
}

Strategy singleDevice(const Graph &graph, int64_t device) {
  Strategy strategy;
  strategy.reserve(graph.ops.size());
  for (const Op &op : graph.ops) {
    OpConfig config;
    config.degrees.assign(op.space.dims.size(), 1);
    config.start = device;
    strategy.push_back(std::move(config));
  }
  return strategy;
}

Strategy dataParallel(const Graph &graph, int64_t numDevices) {
  Strategy strategy = singleDevice(graph, 0);
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    const std::vector<IterDim> &dims = graph.ops[i].space.dims;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d].kind != IterKind::Sample || !dims[d].splittable)
        continue;
      // Equal partitions on a device group that tiles the machine: the
      // degree divides both the batch and the device count (batch 6 on 4
      // devices -> 2).
      int64_t degree = 1;
      for (int64_t k = std::min(numDevices, dims[d].size); k > 1; --k)
        if (dims[d].size % k == 0 && numDevices % k == 0) {
          degree = k;
          break;
        }
      strategy[i].degrees[d] = degree;
      break;
    }
  }
  return strategy;
}

OpConfig randomConfig(const Op &op, int64_t numDevices, std::mt19937_64 &rng) {
  const std::vector<IterDim> &dims = op.space.dims;
  OpConfig config;
  config.degrees.assign(dims.size(), 1);
  // Split dims one factor at a time: pick a splittable dim and a prime
  // factor of the devices still free that divides what is left of the dim.
  int64_t budget = numDevices;
  std::uniform_int_distribution<int> coin(0, 3);
  for (int attempt = 0; attempt < 8 && budget > 1 && coin(rng) != 0;
       ++attempt) {
    std::vector<size_t> candidates;
    for (size_t d = 0; d < dims.size(); ++d)
      if (dims[d].splittable)
        candidates.push_back(d);
    if (candidates.empty())
      break;
    size_t d = candidates[std::uniform_int_distribution<size_t>(
        0, candidates.size() - 1)(rng)];
    int64_t factor = 2;
    while (budget % factor != 0)
      ++factor;
    if ((dims[d].size / config.degrees[d]) % factor != 0)
      continue;
    config.degrees[d] *= factor;
    budget /= factor;
  }
  // Sometimes replicate the partitions over part of the devices left.
  while (budget > 1 && coin(rng) == 0) {
    int64_t factor = 2;
    while (budget % factor != 0)
      ++factor;
    config.replicas *= factor;
    budget /= factor;
  }
  // Sometimes shard the training state of the op's weights.
  if (coin(rng) == 0)
    config.sharding = static_cast<StateSharding>(
        std::uniform_int_distribution<int>(0, kMaxStateSharding)(rng));
  // Sometimes a ring, where the op streams a dim and the split allows it.
  if (op.space.ring && coin(rng) != 0)
    if (absl::StatusOr<OpConfig> ring = asRing(op.space, config, numDevices);
        ring.ok())
      config = std::move(*ring);
  // A contiguous view at a random start that keeps every device in range.
  int64_t parts = config.numInstances();
  int64_t slots = numDevices / parts;
  config.start =
      std::uniform_int_distribution<int64_t>(0, slots - 1)(rng) * parts;
  return config;
}

double modelFlops(const Graph &graph) {
  double flops = 0;
  for (const Op &op : graph.ops)
    flops += op.cost.fwdFlops + op.cost.bwdFlops;
  return flops;
}

double peakComputeSeconds(const Graph &graph, const DeviceSpec &spec) {
  double seconds = 0;
  for (const Op &op : graph.ops)
    if (spec.hasPeakFlops(op.dtype))
      seconds += (op.cost.fwdFlops + op.cost.bwdFlops) /
                 spec.peakFlops[static_cast<int>(op.dtype)];
  return seconds;
}

} // namespace ppc::sim
