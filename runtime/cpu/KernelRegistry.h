//===- KernelRegistry.h - how kernel files register their ops ---*- C++ -*-===//
//
// Private to runtime/cpu. Each *Kernels.cpp file registers the ops it
// implements; Kernels.cpp dispatches by op kind. Box iteration helpers are
// here so every kernel walks boxes the same way.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_CPU_KERNELREGISTRY_H
#define PPC_RUNTIME_CPU_KERNELREGISTRY_H

#include "ppc/Runtime/Boxes.h"
#include "ppc/Runtime/Kernels.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ppc::runtime::cpu {

using ForwardFn = std::function<absl::Status(
    const OpDesc &, const KernelContext &, const std::vector<TensorView> &,
    std::vector<TensorView> &, std::vector<TensorView> &)>;
using BackwardFn = std::function<absl::Status(
    const OpDesc &, const KernelContext &, const std::vector<TensorView> &,
    const std::vector<TensorView> &, const std::vector<TensorView> &,
    std::vector<TensorView> &, std::vector<TensorView> &)>;
using ScratchFn = std::function<std::vector<std::vector<int64_t>>(
    const OpDesc &, const std::vector<TensorView> &, bool backward)>;
using StagesFn = std::function<int32_t(
    const OpDesc &, const std::vector<TensorView> &, bool backward)>;

struct KernelImpl {
  ForwardFn forward;
  BackwardFn backward;
  /// Null for single-stage ops.
  ScratchFn scratch;
  /// Forward stages in training (and backward ones unless backwardStages
  /// says otherwise); inference runs 1 unless stagedInInference.
  int32_t trainingStages = 1;
  /// Operands the forward updates in place in training.
  std::vector<int> updatedOperands = {};
  /// Reads operands, results and result gradients as bf16 where a backend
  /// passes them so (Kernels.h, readsBf16).
  bool readsBf16 = false;
  /// Backward stages where they differ from the forward's (-1: as many).
  int32_t backwardStages = -1;
  bool stagedInInference = false;
  /// Stages where they depend on the partition's boxes (attention: its key
  /// blocks), in training and inference; overrides the counts above.
  StagesFn stages;
};

using KernelTable = std::map<std::string, KernelImpl>;

void registerContractionKernels(KernelTable &table);
void registerAttentionKernels(KernelTable &table);
void registerConvPoolKernels(KernelTable &table);
void registerNormKernels(KernelTable &table);
void registerLossKernels(KernelTable &table);
void registerElementwiseKernels(KernelTable &table);
void registerReduceKernels(KernelTable &table);
void registerDataMovementKernels(KernelTable &table);
void registerMoeKernels(KernelTable &table);

/// Calls fn(index) for every global index of box [lo, hi), row-major.
template <typename Fn>
void forEachIndex(const std::vector<int64_t> &lo,
                  const std::vector<int64_t> &hi, Fn &&fn) {
  if (boxVolume(lo, hi) == 0 && !lo.empty())
    return;
  std::vector<int64_t> index = lo;
  do
    fn(static_cast<const std::vector<int64_t> &>(index));
  while (nextIndex(index, lo, hi, lo.size()));
}

} // namespace ppc::runtime::cpu

#endif // PPC_RUNTIME_CPU_KERNELREGISTRY_H
