//===- CudaKernels.h - how the cuda backend's kernel files register -*- C++
//-*-//
//
// Private to runtime/cuda. Each *Kernels.cu file registers the ops it
// implements, forward and backward, under the same contract as the cpu
// kernels (ppc/Runtime/Kernels.h: global coordinates, partial sums over
// split reductions, backward ADDS into input grads, staged ops); Kernels.cu
// dispatches by op kind. Op-level facts (stages, scratch shapes, updated
// operands, which ops read bf16) are the op's, answered by Kernels.h's
// functions for every backend alike.
//
// A kernel gets float32 views in device memory (the backend widens 16-bit
// buffers and rounds results back, as the cpu backend does), except that
// ops with readsBf16 get bf16 operands unwidened (DeviceView::bf16), and
// where every operand and result is bf16, their results as bf16 too
// (KernelView::bf16Result). It
// enqueues its work on ctx.stream and returns at once; an error is a
// message ("ppc.conv2d: ..."), found before anything is enqueued where it
// can be.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_CUDA_CUDAKERNELS_H
#define PPC_RUNTIME_CUDA_CUDAKERNELS_H

#include "Device.h"

#include "ppc/Runtime/Kernels.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ppc::runtime::cuda {

/// A kernel's view: a TensorView whose `data` (float32) or `bf16`
/// (readsBf16 ops' operands) are device addresses, or neither (a gradient
/// that is not wanted); host code reads its shape, lo and hi as the cpu
/// kernels do, device code its `box`.
struct KernelView : TensorView {
  DeviceBox box;
  /// A bf16 result written in place (readsBf16 ops whose operands and
  /// results are all bf16: no float32 result and rounding pass); `bf16`
  /// then points there too.
  uint16_t *bf16Result = nullptr;
  bool present() const { return data || bf16; }
  int64_t count() const { return box.count(); }
};

class Library;

/// Temporary device memory a kernel needs while it runs (im2col blocks,
/// cuDNN workspaces): valid until the kernel's work on the stream is done;
/// the backend keeps it until the next synchronize point.
class Workspace {
public:
  virtual ~Workspace() = default;
  /// `n` floats, zero-filled if `zero`; null when the device is out of
  /// memory.
  virtual float *floats(int64_t n, bool zero = false) = 0;
};

/// What a kernel runs with.
struct ExecContext {
  Stream stream{};
  Library *library = nullptr; ///< cuBLAS/cuDNN seams (Library.h)
  Workspace *workspace = nullptr;
};

using ForwardFn = std::function<KernelStatus(
    const OpDesc &, const KernelContext &, ExecContext &,
    const std::vector<KernelView> &inputs,
    const std::vector<KernelView> &outputs,
    const std::vector<KernelView> &scratch)>;
using BackwardFn = std::function<KernelStatus(
    const OpDesc &, const KernelContext &, ExecContext &,
    const std::vector<KernelView> &inputs,
    const std::vector<KernelView> &outputs,
    const std::vector<KernelView> &outputGrads,
    const std::vector<KernelView> &inputGrads,
    const std::vector<KernelView> &scratch)>;

struct CudaKernel {
  ForwardFn forward;
  BackwardFn backward;
};

using CudaKernelTable = std::map<std::string, CudaKernel>;

// Each group's file (a helper may add more).
void registerContractionKernels(CudaKernelTable &table);
void registerElementwiseKernels(CudaKernelTable &table);
void registerDataMovementKernels(CudaKernelTable &table);
void registerReduceKernels(CudaKernelTable &table);
void registerNormKernels(CudaKernelTable &table);
void registerLossKernels(CudaKernelTable &table);
void registerConvPoolKernels(CudaKernelTable &table);
void registerAttentionKernels(CudaKernelTable &table);

/// Every registered kernel, by op kind.
const CudaKernelTable &cudaKernels();

/// The ops with a kernel in the table, sorted.
std::vector<std::string> cudaKernelOps();

/// Zero-fills `n` floats at `data` on the stream.
void zeroFloats(Stream stream, float *data, int64_t n);

} // namespace ppc::runtime::cuda

#endif // PPC_RUNTIME_CUDA_CUDAKERNELS_H
