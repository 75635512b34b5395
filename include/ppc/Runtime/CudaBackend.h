//===- CudaBackend.h - the cuda backend -------------------------*- C++ -*-===//
//
// MLIR-free. One GPU per rank (the local rank's, modulo the GPUs visible):
// buffers in device memory from a caching allocator, cuBLAS GEMMs, cuDNN
// convolutions, the backend's own kernels for every other op (runtime/cuda),
// the optimizer of OptimizerStep.h, all issued in order on one stream;
// host reads and writes through pinned staging. Collectives between ranks
// go through NCCL (NcclCommunicator.h).
//
// Built when CMake finds nvcc (PPC_HAVE_CUDA); the same sources also build,
// with PPC_CUDA_EMULATION, into a host emulation (runtime/cuda/Device.h)
// that the tests run against the cpu backend where no GPU is present.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_CUDABACKEND_H
#define PPC_RUNTIME_CUDABACKEND_H

#include "ppc/Runtime/Backend.h"

#include <memory>
#include <string>

namespace ppc::runtime {

/// The cuda backend on this rank's GPU; null with the reason in `error`
/// ("no GPU visible: ...", a library that failed to start) otherwise.
absl::StatusOr<std::unique_ptr<Backend>>
createCudaBackend(const BackendOptions &options);

/// The ops the cuda backend implements, sorted.
std::vector<std::string> cudaSupportedOps();

} // namespace ppc::runtime

#endif // PPC_RUNTIME_CUDABACKEND_H
