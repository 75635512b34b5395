//===- Backends.cpp - the backends this build has -------------------------===//

#include "ppc/Runtime/Backend.h"
#include "ppc/Runtime/CpuBackend.h"
#include "ppc/Support/Alternatives.h"
// The cuda backend, or in ppc-run-emulated (a test tool) its host emulation
// (runtime/cuda/Device.h) under the same name.
#if defined(PPC_HAVE_CUDA) || defined(PPC_CUDA_EMULATION)
#include "ppc/Runtime/CudaBackend.h"
#endif

#include <cstdlib>

namespace ppc::runtime {

namespace {
absl::StatusOr<std::unique_ptr<Backend>>
startCpu(const BackendOptions &options) {
  return createCpuBackend(options);
}
} // namespace

const std::vector<BackendInfo> &backends() {
  static const std::vector<BackendInfo> list = {
    {"cpu", "host memory, oneDNN and the reference kernels, MPI", startCpu},
#if defined(PPC_CUDA_EMULATION)
    {"cuda",
     "the cuda backend's host emulation (a test build: its own kernels on "
     "the host, plain GEMM loops for cuBLAS, no cuDNN, collectives over MPI)",
     createCudaBackend},
#elif defined(PPC_HAVE_CUDA)
    {"cuda",
     "one GPU per rank (the local rank's), cuBLAS, cuDNN and own kernels, "
     "NCCL",
     createCudaBackend},
#endif
  };
  return list;
}

std::string backendNames() {
  std::vector<std::string> names;
  for (const BackendInfo &info : backends())
    names.push_back(info.name);
  return listAlternatives(names);
}

const BackendInfo *findBackend(const std::string &name) {
  for (const BackendInfo &info : backends())
    if (name == info.name)
      return &info;
  return nullptr;
}

absl::StatusOr<std::unique_ptr<Backend>>
createBackend(const std::string &name, const BackendOptions &options) {
  const BackendInfo *info = findBackend(name);
  if (!info)
    return absl::InvalidArgumentError("unknown backend '" + name +
                                      "' (this build has " + backendNames() +
                                      ")");
  BackendOptions withEnvironment = options;
  if (const char *poison = std::getenv("PPC_POISON_UNINITIALIZED"))
    withEnvironment.poisonUninitialized |= std::string(poison) == "1";
  return info->create(withEnvironment);
}

} // namespace ppc::runtime
