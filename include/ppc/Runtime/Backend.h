//===- Backend.h - where a rank's buffers live and its kernels run -*- C++ -*-//
//
// MLIR-free. The seam between the plan interpreter (ProgramRunner, the
// --verify reference) and a device: the interpreter owns no memory and runs
// no arithmetic of its own; it asks a Backend for
//  - buffers: typed device memory (DType.h), zero-filled when allocated;
//  - data movement: host values in and out (converted from and to float),
//    and copies (or sums) of a box between two buffers holding boxes of the
//    same tensor, converting between their types;
//  - kernels: the forward and backward of one partition of an op
//    (Kernels.h's contract), on views of its buffers;
//  - the optimizer step (Optimizer.h's math) on a float32 master weight;
//  - ordering: work is issued in program order; an Event marks a point of
//    it, which a communicator's started collective waits for, and every read
//    to the host waits for what was issued before it.
// Collectives run on the same memory through a Communicator
// (Communicator.h), which takes the backend's device addresses.
//
// Mixed precision follows from the buffers' types: a kernel whose operands
// are bf16 or f16 reads them widened to float, computes in float, and
// rounds its results to their types (a gradient summed into a 16-bit buffer
// is rounded after each sum), as tensor cores and oneDNN's bf16 primitives
// accumulate in float. Scratch buffers (batch-norm statistics) are float32.
//
// Backends: cpu (runtime/cpu) and, where nvcc was found at build time, cuda
// (runtime/cuda). The list is backends(); createBackend makes one by name
// with the run's BackendOptions.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_BACKEND_H
#define PPC_RUNTIME_BACKEND_H

#include "ppc/Runtime/DType.h"
#include "ppc/Runtime/Kernels.h"
#include "ppc/Runtime/Optimizer.h"
#include "ppc/Support/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ppc::runtime {

class Communicator;

/// Memory of one buffer on a backend's device.
class DeviceBuffer {
public:
  virtual ~DeviceBuffer() = default;
  DType dtype() const { return dtype_; }
  /// Elements (at least 1, so a view's data is null only where a plan
  /// wants none).
  int64_t size() const { return size_; }
  int64_t bytes() const { return size_ * dtypeBytes(dtype_); }
  /// The device address of element 0.
  void *data() const { return data_; }
  /// The device address of element `offset`.
  void *at(int64_t offset) const {
    return static_cast<char *>(data_) + offset * dtypeBytes(dtype_);
  }

protected:
  DeviceBuffer(DType dtype, int64_t size, void *data)
      : dtype_(dtype), size_(size), data_(data) {}

private:
  DType dtype_;
  int64_t size_;
  void *data_;
};

/// Box [lo, hi) of a global tensor of shape `shape`, row-major in `buffer`
/// from element `offset` on. A null buffer: no data (an input gradient the
/// plan does not want).
struct DeviceView {
  DeviceBuffer *buffer = nullptr;
  int64_t offset = 0;
  std::vector<int64_t> shape, lo, hi;
  /// An input gradient whose first contribution this backward kernel is
  /// (KernelBackward.overwrite): the kernel writes it instead of adding
  /// into it, whatever it held before.
  bool overwrite = false;
  int64_t numElements() const;
};

/// The shapes and boxes of device views, without their data: what
/// scratchShapes and numStages read of a partition.
inline std::vector<TensorView> boxesOf(const std::vector<DeviceView> &views) {
  std::vector<TensorView> boxes;
  for (const DeviceView &v : views)
    boxes.push_back({nullptr, v.shape, v.lo, v.hi});
  return boxes;
}

/// What the optimizer keeps per weight buffer between steps, on the device:
/// numOptimizerSlots float32 buffers, allocated by the first update.
struct DeviceOptimizerState {
  int64_t steps = 0;    ///< updates done (Adam's t)
  int64_t elements = 0; ///< per slot
  std::vector<std::shared_ptr<DeviceBuffer>> slots;
};

/// A point in the work issued to a backend.
class Event {
public:
  virtual ~Event() = default;
  virtual bool done() = 0;
  /// Blocks until the work before the event is done.
  virtual void wait() = 0;
  /// Seconds of device time from `earlier` to this event, both made by
  /// Backend::recordTimed and done; 0 for events that keep no time.
  virtual double secondsSince(Event &earlier) {
    (void)earlier;
    return 0;
  }
};

class Backend {
public:
  virtual ~Backend() = default;
  virtual const char *name() const = 0;
  /// Whether kernels are queued to a device that runs them while the host
  /// goes on (cuda), rather than done by the host when a call returns
  /// (cpu): the host then has time to spare for work ahead, as drawing
  /// the next step's inputs.
  virtual bool queuesWork() const { return false; }

  /// A zero-filled buffer of max(n, 1) elements; null when the device has
  /// no room for it.
  virtual std::shared_ptr<DeviceBuffer> allocate(DType dtype, int64_t n) = 0;
  /// A buffer as allocate() makes it, but not zero-filled: for a buffer
  /// whose first use writes every element (Alloc.uninitialized). With
  /// BackendOptions::poisonUninitialized its elements are NaN (integers:
  /// the most negative value), so a kernel that reads what it never wrote
  /// shows. The default zero-fills.
  virtual std::shared_ptr<DeviceBuffer> allocateUninitialized(DType dtype,
                                                              int64_t n) {
    return allocate(dtype, n);
  }
  virtual void fill(DeviceBuffer &buffer, double value) = 0;
  /// Elements [offset, offset + n) from and to host floats.
  virtual void write(DeviceBuffer &buffer, int64_t offset, const float *host,
                     int64_t n) = 0;
  virtual void read(const DeviceBuffer &buffer, int64_t offset, int64_t n,
                    float *host) = 0;
  /// Copies (accumulate: adds) box [lo, hi), which both views hold, from
  /// `src` to `dst`.
  virtual void copyBox(const DeviceView &src, const DeviceView &dst,
                       const std::vector<int64_t> &lo,
                       const std::vector<int64_t> &hi, bool accumulate) = 0;

  virtual absl::Status forward(const OpDesc &op, const KernelContext &ctx,
                               const std::vector<DeviceView> &inputs,
                               const std::vector<DeviceView> &outputs,
                               const std::vector<DeviceView> &scratch) = 0;
  virtual absl::Status backward(const OpDesc &op, const KernelContext &ctx,
                                const std::vector<DeviceView> &inputs,
                                const std::vector<DeviceView> &outputs,
                                const std::vector<DeviceView> &outputGrads,
                                const std::vector<DeviceView> &inputGrads,
                                const std::vector<DeviceView> &scratch) = 0;

  /// One optimizer step on elements [offset, offset + n) of the float32
  /// `weight` with the n elements of `grad` (any float type), each gradient
  /// multiplied by `gradScale` first (the inverse of a loss scale), and
  /// the updated elements rounded into the same elements of `rounded` (a
  /// 16-bit weight's copy of its master), if given. False when the device
  /// has no room for the state.
  virtual bool update(const ppc::planfile::Optimizer &optimizer,
                      DeviceBuffer &weight, int64_t offset,
                      const DeviceBuffer &grad, int64_t n,
                      DeviceOptimizerState &state, double gradScale,
                      DeviceBuffer *rounded = nullptr) = 0;
  /// One weight's optimizer step, as update() takes it.
  struct UpdateRequest {
    DeviceBuffer *weight = nullptr;
    int64_t offset = 0;
    const DeviceBuffer *grad = nullptr;
    int64_t n = 0;
    DeviceOptimizerState *state = nullptr;
    DeviceBuffer *rounded = nullptr;
  };
  /// The steps of several weights, each as update() would run it, in one
  /// go where the backend can (the cuda backend: one launch for all, as
  /// PyTorch's multi-tensor optimizers). False when the device has no room
  /// for a state; then every weight before `failed` was updated.
  virtual bool updateAll(const ppc::planfile::Optimizer &optimizer,
                         const std::vector<UpdateRequest> &requests,
                         double gradScale, size_t &failed);

  /// True if any of the first n elements of `buffer` is NaN or infinite.
  virtual bool anyNonfinite(const DeviceBuffer &buffer, int64_t n) = 0;

  /// An error a kernel found in device values after its call returned (a
  /// label that is not a class, an index outside its table), once the work
  /// issued so far is done: a backend that queues its work checks such
  /// values on its device rather than read them back mid-step. OK when none;
  /// else `instruction` is the KernelContext::instruction of the kernel.
  /// Clears what it reported: the next call covers later kernels only.
  virtual absl::Status deferredError(int64_t &instruction) {
    instruction = -1;
    return absl::OkStatus();
  }

  /// Device kernels launched and library calls made so far (ppc-run's
  /// launches per step); -1 where the backend does not count them (cpu).
  virtual int64_t launches() const { return -1; }
  /// FLOP/s of the device at its peak for arithmetic on `dtype` (bf16 and
  /// f16: tensor cores; float32: without TF32), for ppc-run's model FLOPs
  /// utilization; 0 where unknown.
  virtual double peakFlops(DType dtype) const {
    (void)dtype;
    return 0;
  }

  /// Marks the work issued so far.
  virtual std::unique_ptr<Event> record() = 0;
  /// Marks the work issued so far with the device's clock, for kernel
  /// profiles on a backend that queues its work (Event::secondsSince); the
  /// others need none (null).
  virtual std::unique_ptr<Event> recordTimed() { return nullptr; }
  /// Waits for all issued work.
  virtual void synchronize() = 0;

  /// The communicator for collectives on this backend's buffers, built on
  /// `host` (MPI over host memory, which also carries the executor's own
  /// exchanges); `timeoutSeconds` bounds every wait. Null: `host` serves as
  /// it is (the cpu backend). Made once every rank has its backend.
  virtual std::unique_ptr<Communicator>
  deviceCommunicator(Communicator &host, double timeoutSeconds);
};

/// How a run wants its backend set up.
struct BackendOptions {
  /// Compute threads per rank (cpu: OpenBLAS's and oneDNN's OpenMP).
  int threads = 1;
  /// cpu: ppc's own kernels only, no oneDNN (the tests' oracles).
  bool referenceKernels = false;
  /// Uninitialized buffers start as NaN (allocateUninitialized): set from
  /// the environment's PPC_POISON_UNINITIALIZED=1 by createBackend; the
  /// tests run with it.
  bool poisonUninitialized = false;
  /// cuda: float32 GEMMs and convolutions may run on TF32 tensor cores
  /// (--allow-tf32). Convolutions whose operands are stored in 16 bits use
  /// them either way: TF32 holds bf16 and f16 values exactly.
  bool allowTf32 = false;
};

struct BackendInfo {
  const char *name;
  const char *description;
  /// The backend, or why it cannot start here (cuda: no GPU visible).
  absl::StatusOr<std::unique_ptr<Backend>> (*create)(const BackendOptions &);
};

/// Every backend this build has: the list --backend and the docs follow.
const std::vector<BackendInfo> &backends();
/// "cpu" or "cpu or cuda", for messages.
std::string backendNames();
/// The backend named `name`, or null.
const BackendInfo *findBackend(const std::string &name);
/// A backend named `name`, or why there is none: an unknown name, or one
/// that cannot start here.
absl::StatusOr<std::unique_ptr<Backend>>
createBackend(const std::string &name, const BackendOptions &options);

} // namespace ppc::runtime

#endif // PPC_RUNTIME_BACKEND_H
