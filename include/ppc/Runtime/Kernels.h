//===- Kernels.h - cpu kernels of graph ops on boxes ------------*- C++ -*-===//
//
// MLIR-free. Every graph op has a forward and a backward kernel that computes
// one partition of the op: the part of its iteration space whose tensors are
// the boxes held by the views it is given. The same kernel runs a whole op
// (every view holds the whole tensor) or any partition of it, so partitioned
// and single-device training share one implementation.
//
// Contract (what the plan guarantees, what a kernel must do):
//  - A view holds the box [lo, hi) of a global tensor of shape `shape`,
//    row-major over the box. Kernels index in global coordinates.
//  - Output views give the non-reduced iteration ranges: a kernel computes
//    exactly the elements of its output boxes.
//  - Input views hold the slice the partition reads (IterationSpace::sliceOf
//    of its iteration ranges), halos included but clipped to the tensor.
//    Positions a window reaches outside the tensor are padding. The ranges of
//    split reduction dims (matmul K, conv input channels, gather's rows,
//    reduced axes, a loss's batch rows) are the input boxes along those dims;
//    the output is then a partial sum over that range, which the plan sums
//    across partitions. Hence:
//      * means (reduce_mean, global_avg_pool, losses) divide by the global
//        count, not the local one;
//      * a bias (linear, conv2d) is added, and its gradient taken, only by
//        the partition whose reduction ranges all start at 0;
//      * gather outputs 0 for indices outside its rows of `data`.
//  - Backward kernels ADD their contributions into the input-grad views
//    (zero-filled by the plan); a null input grad is not wanted. Contributions
//    of a halo land in the halo part of the grad view; the plan sends them on.
//  - Staged ops (batch_norm in training) run stage 0 then stage 1, with the
//    plan summing the scratch buffers across the partitions that share
//    channels in between. A backward kernel gets the forward's scratch
//    buffers first, then its own. batch_norm in training updates its running
//    mean/variance operands in place (every replica the same way).
//  - Integer tensors (labels, indices) are held as floats.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_KERNELS_H
#define PPC_RUNTIME_KERNELS_H

#include "ppc/Support/Status.h"
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace ppc::runtime {

/// A box of a global tensor held in a dense row-major buffer.
struct TensorView {
  float *data = nullptr;
  std::vector<int64_t> shape; ///< the global tensor's shape
  std::vector<int64_t> lo;    ///< first held index per dim
  std::vector<int64_t> hi;    ///< one past the last held index per dim
  /// The box stored as bfloat16, for an operand a kernel reads that way
  /// (readsBf16): a backend then passes a bf16 operand unwidened, `data`
  /// null. Null otherwise.
  const uint16_t *bf16 = nullptr;
  /// The box as a backend stores it, for a backend whose kernels read and
  /// write every storage type as it is (the cuda backend's); `data` is then
  /// null. Null otherwise.
  const void *storage = nullptr;

  /// Whether the view has values (a gradient nobody wants, or a result the
  /// plan did not keep, has none).
  bool present() const { return data || bf16 || storage; }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t extent(int64_t d) const { return hi[d] - lo[d]; }
  int64_t numElements() const;
  /// Row-major strides of the held box.
  std::vector<int64_t> strides() const;
  /// Offset in `data` of global index `index` (must be inside the box).
  int64_t offsetOf(const std::vector<int64_t> &index) const;
  bool contains(const std::vector<int64_t> &index) const;
  /// True if the view holds the whole tensor.
  bool isWhole() const;
};

using AttributeValue = std::variant<int64_t, double, std::string,
                                    std::vector<int64_t>, std::vector<double>>;

/// An op as the kernels see it: its ppc dialect name ("ppc.conv2d"), its
/// attributes under their ODS names (missing ones take the ODS defaults), and
/// its global operand and result shapes.
struct OpDesc {
  std::string kind;
  std::map<std::string, AttributeValue> attributes;
  std::vector<std::vector<int64_t>> operandShapes;
  std::vector<std::vector<int64_t>> resultShapes;

  int64_t getInt(const std::string &name, int64_t fallback) const;
  double getFloat(const std::string &name, double fallback) const;
  std::string getString(const std::string &name,
                        const std::string &fallback) const;
  std::vector<int64_t> getInts(const std::string &name,
                               std::vector<int64_t> fallback) const;
  bool has(const std::string &name) const;
};

/// Per-call context: which training step (dropout masks are drawn from the
/// op's seed, the step and the global element index, so every partitioning
/// draws the same mask) and whether this is a training run.
struct KernelContext {
  int64_t step = 0;
  bool training = true;
  int32_t stage = 0;
  /// Where the executor issued the kernel (its instruction), for errors a
  /// backend finds on its device after the call returned
  /// (Backend::deferredError); -1 outside the executor.
  int64_t instruction = -1;
};
/// Shapes of the scratch buffers a staged op needs for the partition whose
/// operand boxes are `inputs` (batch_norm: one [3, channels] statistics
/// buffer). Empty for ops that run in one stage.
std::vector<std::vector<int64_t>>
scratchShapes(const OpDesc &op, const std::vector<TensorView> &inputs,
              bool backward);

/// Number of stages of the op's forward (backward) kernel for the partition
/// whose operand boxes are `inputs`: 2 for batch_norm in training, 3 (2)
/// for an attention key block (keys split), else 1.
int32_t numStages(const OpDesc &op, const std::vector<TensorView> &inputs,
                  bool training, bool backward);

/// Whether the op's kernels read bf16 operands as they are stored
/// (TensorView::bf16) instead of widened to float: the GEMM ops, whose
/// bf16 products run at twice the float32 rate. Their results and operand
/// gradients are float32 views either way.
bool readsBf16(const OpDesc &op);

/// Operands the op's forward updates in place (batch_norm's running mean and
/// variance in training), which a backend storing them in another type
/// writes back.
std::vector<int> updatedOperands(const OpDesc &op, bool training);

absl::Status forward(const OpDesc &op, const KernelContext &ctx,
                     const std::vector<TensorView> &inputs,
                     std::vector<TensorView> &outputs,
                     std::vector<TensorView> &scratch);

/// `inputGrads[i].data` may be null: operand i needs no gradient.
absl::Status backward(const OpDesc &op, const KernelContext &ctx,
                      const std::vector<TensorView> &inputs,
                      const std::vector<TensorView> &outputs,
                      const std::vector<TensorView> &outputGrads,
                      std::vector<TensorView> &inputGrads,
                      std::vector<TensorView> &scratch);

/// For a unary elementwise op whose derivative jumps where the input
/// crosses a point (relu's 0, leaky_relu, clip, abs, hard_sigmoid,
/// hard_swish): its derivative at x. Null for every other op, and for
/// attributes the op rejects. --verify's reference evaluates it on the side
/// of such a point that the partitioned run took (Reference.h).
std::function<float(float)> kinkedDerivative(const OpDesc &op);

/// The ppc ops the cpu backend implements, sorted.
std::vector<std::string> supportedOps();

/// Library kernels (oneDNN's convolutions) for the partitions they fit, the
/// reference kernels for the rest (the default; PPC_REFERENCE_KERNELS=1 in
/// the environment starts a process with it off); off: reference kernels
/// only, which the tests use as the oracle of the library ones.
void setLibraryKernels(bool on);
bool libraryKernels();

/// Threads of the kernels' libraries (OpenBLAS, oneDNN's OpenMP) in this
/// process.
void setKernelThreads(int threads);

/// C = A B, row-major (m x k times k x n): the GEMM every kernel calls
/// (oneDNN's with library kernels on, else OpenBLAS's), which
/// ppc-calibrate measures.
void kernelGemm(int64_t m, int64_t n, int64_t k, const float *a, const float *b,
                float *c);

} // namespace ppc::runtime

#endif // PPC_RUNTIME_KERNELS_H
