//===- CpuBackend.h - the cpu backend ---------------------------*- C++ -*-===//
//
// MLIR-free. Buffers in host memory, the kernels of Kernels.h (oneDNN and
// the reference kernels), the optimizer of Optimizer.h. Work runs when it is
// issued: events are done when recorded.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_CPUBACKEND_H
#define PPC_RUNTIME_CPUBACKEND_H

#include "ppc/Runtime/Backend.h"

#include <memory>

namespace ppc::runtime {

/// Applies `options` to the process's kernel libraries (their threads and
/// library-or-reference choice are process-wide).
std::unique_ptr<Backend> createCpuBackend(const BackendOptions &options = {});

/// The host address of a cpu buffer's element `offset` as floats (the
/// buffer must be f32): for code that runs only on the cpu backend.
float *cpuFloats(const DeviceBuffer &buffer, int64_t offset = 0);

} // namespace ppc::runtime

#endif // PPC_RUNTIME_CPUBACKEND_H
