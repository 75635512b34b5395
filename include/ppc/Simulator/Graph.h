//===- Graph.h - the simulator's view of a training graph -------*- C++ -*-===//
//
// MLIR-free: what the simulator and the search know of a model. Every op is
// its iteration space (ParallelizableOpInterface's answer) plus its cost and
// where its operands come from. lib/Simulator builds it from a ppc module.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SIMULATOR_GRAPH_H
#define PPC_SIMULATOR_GRAPH_H

#include "ppc/Simulator/Machine.h"
#include "ppc/Support/IterationSpace.h"
#include "ppc/Support/MachineView.h"

#include <random>
#include <string>
#include <vector>

namespace ppc::sim {

/// Where one operand of an op comes from.
struct Source {
  enum class Kind : uint8_t {
    Op,       ///< result `result` of op `index` (an activation).
    Input,    ///< graph input `index`: each partition's slice is loaded
              ///< where it is used (the data loader), at no cost.
    Weight,   ///< weight `index`: each partition keeps its slice.
    Constant, ///< replicated everywhere at no cost.
  };
  Kind kind = Kind::Constant;
  int32_t index = 0;
  int32_t result = 0;
};

struct Op {
  /// For reports: the op's name in the model (ONNX node name or location).
  std::string name;
  /// Operation name, e.g. "ppc.conv2d": the key of measured profiles.
  std::string kind;
  IterationSpace space;
  OpCost cost;
  /// Element type of the op's compute and of its results.
  DType dtype = DType::F32;
  int64_t elemBytes = 4;
  /// Whether its results are floating point and carry gradients back;
  /// integer results (indices, labels, masks) have none to send.
  bool differentiable = true;
  /// One per operand, parallel to space.operands.
  std::vector<Source> operands;
};

struct Weight {
  std::string name;
  std::vector<int64_t> shape;
  int64_t elemBytes = 4;
  /// False for state the optimizer does not train (batch-norm statistics):
  /// it has no gradient to synchronize and no optimizer state.
  bool trainable = true;
};

/// The most bytes the tensors of a graph may hold together (1 EiB): the
/// simulator adds tensor sizes per device in int64 (weights, gradients, up
/// to two optimizer states, activations, received slices, workspace), and
/// below 2^60 no such sum can overflow.
inline constexpr int64_t kMaxGraphBytes = int64_t(1) << 60;

/// A model: ops in a topological order (operands come from earlier ops).
struct Graph {
  std::vector<Op> ops;
  std::vector<Weight> weights;
  int64_t numInputs = 0;

  /// OK when well formed, else the first problem (InvalidArgument): a source
  /// out of range or from a later op, an invalid iteration space, an operand
  /// count that does not match the space, or tensors too large for the int64
  /// arithmetic of the simulator (see kMaxGraphBytes).
  absl::Status validate() const;
};

/// Whether `a` and `b` are one model but for the names of their ops and
/// weights: a simulation of one under a strategy is one of the other (the
/// pipeline simulates identical stages once).
bool sameButNames(const Graph &a, const Graph &b);

/// The use of a weight that holds it: which op and operand.
struct WeightUse {
  int32_t op = -1;
  int32_t operand = -1;
};

/// Per weight, the use that holds it (-1s for an unused weight). A weight
/// used by several ops (tied embeddings, an unrolled RNN's cell, ONNX
/// initializers that an exporter de-duplicated) is one parameter, trained
/// jointly: it lives in the layout its first use reads it in (that op
/// holds, synchronizes and updates it), and every other use reads its
/// pieces from there like an activation from its producer and sends its
/// gradient back there to accumulate. The simulator prices exactly this
/// and the lowering emits exactly this, so any strategy lowers.
std::vector<WeightUse> weightHolders(const Graph &graph);

/// The forward and backward FLOPs of `graph`: its model FLOPs per
/// iteration (recomputation not counted).
double modelFlops(const Graph &graph);

/// Seconds the forward and backward FLOPs of `graph` take on one device of
/// `spec` at its peak rates: model FLOPs utilization is this over the
/// iteration time times the device count.
double peakComputeSeconds(const Graph &graph, const DeviceSpec &spec);

/// Per operand of `op`, whether it takes part in a contraction: an
/// iteration dim that it and at least one other operand index and no
/// result does (a matmul's k, a convolution's input channels and window),
/// where two of those operands each index a dim the other does not (a
/// matmul's m and n); a loss's batch, read by the logits and the labels
/// alike, is no contraction.
/// Such operands meet on a GPU's matrix units in tiles; the rest (a bias)
/// are added elementwise. Bit i for operand i (operands beyond 64 are never
/// contracted); 0 when `op` contracts nothing. No allocation: the GEMM
/// model asks for every kernel it times.
uint64_t contractedOperands(const Op &op);

/// Per op, how many operands of later ops read one of its results.
std::vector<int> readerCounts(const Graph &graph);

/// Per op, the ops joined to it by an edge (its producers and readers),
/// sorted, each once.
std::vector<std::vector<size_t>> neighbours(const Graph &graph);

/// Labels the sample (batch) dim of every op by following the batch from
/// the graph inputs through the ops' tensor maps, instead of by position:
/// in a sequence-first model ([S, N, E], PyTorch's nn.MultiheadAttention)
/// the batch is tensor dim 1, then dim 0 after a transpose. The iteration
/// dim that indexes an operand's batch dim becomes the op's sample dim, and
/// dims an op guessed as sample by position become attribute dims; ops that
/// reduce the batch away (a loss) or read none keep their labels.
/// `inputBatchDims[i]` is input i's batch dim (-1: none); inputs beyond it
/// have theirs at dim 0.
void followBatch(Graph &graph, const std::vector<int> &inputBatchDims = {});

/// One configuration per op, parallel to Graph::ops.
using Strategy = std::vector<OpConfig>;

/// Every op on one device (degrees all 1, start `device`).
Strategy singleDevice(const Graph &graph, int64_t device = 0);
/// Data parallel over `numDevices`: each op's first sample dim split by the
/// largest divisor of its size that is <= numDevices and divides numDevices;
/// ops without a sample dim stay whole on device 0.
Strategy dataParallel(const Graph &graph, int64_t numDevices);

/// A random configuration of `op` on `numDevices` devices: a random subset
/// of its splittable dims split by factors of the device count, sometimes
/// replicated by a further factor (so degrees times replicas divide the
/// device count), as a ring where the op streams a dim (most of the times
/// the split allows it), on a contiguous view. Always valid
/// for checkConfig; a building block for benchmarks, tests and the search.
OpConfig randomConfig(const Op &op, int64_t numDevices, std::mt19937_64 &rng);

} // namespace ppc::sim

#endif // PPC_SIMULATOR_GRAPH_H
