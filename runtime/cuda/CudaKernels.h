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
// A kernel reads and writes its views' Elements (Device.h): the buffers as
// they are stored, float32, bf16, f16 or int64, computing in float
// registers and rounding once where it stores (a native kernel,
// CudaKernel::native). A kernel registered without `native` gets float32
// views instead: the backend widens 16-bit buffers into float32 blocks and
// rounds the results back, as the cpu backend does (the convolutions, for
// now). A view's `data` is its float32 address where it has one (float32
// buffers, widened blocks, scratch), else null.
// A kernel enqueues its work on ctx.stream and returns at once; an error
// is a message ("ppc.conv2d: ..."), found before anything is enqueued
// where it can be.
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

/// A kernel's view: a TensorView whose elements are in device memory, or
/// absent (a gradient that is not wanted); host code reads its shape, lo
/// and hi as the cpu kernels do, device code its `box` and `elements`.
struct KernelView : TensorView {
  DeviceBox box;
  /// The box's elements: the buffer as stored (native kernels), or the
  /// widened float32 block; null when absent.
  Elements elements;
  /// A bf16 result written in place (readsBf16 ops whose operands and
  /// results are all bf16: no float32 result and rounding pass); `bf16`
  /// then points there too. Widened kernels only.
  uint16_t *bf16Result = nullptr;
  /// An input gradient the kernel writes instead of adding into (its first
  /// contribution: DeviceView::overwrite); only for kernels registered with
  /// CudaKernel::overwrites, whose other views never set it.
  bool overwrite = false;
  /// The type the buffer is stored in: float32 for a widened block of a
  /// 16-bit buffer says bf16 or f16 here (whose values float32 products on
  /// TF32 tensor cores take exactly).
  DType stored = DType::F32;
  int64_t count() const { return box.count(); }
  /// The address of element `i` of the box, for libraries.
  void *at(int64_t i) const { return elements.at(i); }
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

/// Checks of device values (labels, gather indices) that a kernel runs on
/// the device instead of reading the values back to the host mid-step: the
/// kernel takes a slot (preset to all ones), its failing elements lower it
/// to a key (flagLeast: the least key is the error reported, so keys order
/// a kernel's errors as its cpu twin finds them), and the backend reads the
/// slots once the work is done (Backend::deferredError) and turns the first
/// flagged slot's key into the kernel's message.
class DeviceChecks {
public:
  virtual ~DeviceChecks() = default;
  /// A slot for a check of the kernel the executor issued as `instruction`;
  /// `message` makes the error of a flagged key. Null when out of memory.
  virtual unsigned long long *
  slot(int64_t instruction,
       std::function<absl::Status(unsigned long long key)> message) = 0;
};

/// What a kernel runs with.
struct ExecContext {
  Stream stream{};
  Library *library = nullptr; ///< cuBLAS/cuDNN seams (Library.h)
  Workspace *workspace = nullptr;
  DeviceChecks *checks = nullptr;
};

using ForwardFn = std::function<absl::Status(
    const OpDesc &, const KernelContext &, ExecContext &,
    const std::vector<KernelView> &inputs,
    const std::vector<KernelView> &outputs,
    const std::vector<KernelView> &scratch)>;
using BackwardFn = std::function<absl::Status(
    const OpDesc &, const KernelContext &, ExecContext &,
    const std::vector<KernelView> &inputs,
    const std::vector<KernelView> &outputs,
    const std::vector<KernelView> &outputGrads,
    const std::vector<KernelView> &inputGrads,
    const std::vector<KernelView> &scratch)>;

struct CudaKernel {
  ForwardFn forward;
  BackwardFn backward;
  /// Reads and writes its views' elements as stored (see the header);
  /// false: float32 views.
  bool native = false;
  /// Its backward honours KernelView::overwrite: an input gradient so
  /// marked gets every element written (0 where it has no contribution).
  /// Other kernels' overwritten gradients are zero-filled before they add.
  bool overwrites = false;
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
void registerMoeKernels(CudaKernelTable &table);

/// Every registered kernel, by op kind.
const CudaKernelTable &cudaKernels();

/// The ops with a kernel in the table, sorted.
std::vector<std::string> cudaKernelOps();

/// Zero-fills `n` floats at `data` on the stream.
void zeroFloats(Stream stream, float *data, int64_t n);

/// Whether a kernel writes the input gradient `grad` outright: true where
/// it is marked overwrite (KernelView::overwrite) and the kernel's
/// contributions `cover` every element of it. Where they do not, a marked
/// gradient is zero-filled here for the kernel to add into.
bool writesGradient(ExecContext &ctx, const KernelView &grad, bool cover);

/// `view` with its 16-bit or integer elements widened to float32 in the
/// workspace (float32 views, and views without elements, as they are); no
/// elements when out of memory.
KernelView widenedToFloat(ExecContext &ctx, const KernelView &view);

struct GemmOperand;
struct GemmResult;

/// A GEMM operand at element `offset` of a kernel view, in its storage
/// type (Library.h).
GemmOperand gemmOperand(const KernelView &view, int64_t offset, int64_t ld,
                        bool transposed, int64_t batchStride);
/// A GEMM result at element `offset` of a kernel view, in its storage type.
GemmResult gemmResult(const KernelView &view, int64_t offset, int64_t ld,
                      int64_t batchStride);

/// Library::gemm into a result of any floating type: where the library
/// cannot write C's type from the operands' (float32 operands, a 16-bit C),
/// through a float32 block of the workspace (C read into it where beta is
/// not 0, rounded back once).
absl::Status gemmInto(ExecContext &ctx, int64_t m, int64_t n, int64_t k,
                      float alpha, const GemmOperand &a, const GemmOperand &b,
                      float beta, const GemmResult &c, int64_t batch);

} // namespace ppc::runtime::cuda

#endif // PPC_RUNTIME_CUDA_CUDAKERNELS_H
