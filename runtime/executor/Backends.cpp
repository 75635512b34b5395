//===- Backends.cpp - the backends this build has -------------------------===//

#include "ppc/Runtime/Backend.h"
#include "ppc/Runtime/CpuBackend.h"

namespace ppc::runtime {

const std::vector<BackendInfo> &backends() {
  static const std::vector<BackendInfo> list = {
      {"cpu", "host memory, oneDNN and the reference kernels, MPI",
       createCpuBackend},
  };
  return list;
}

std::string backendNames() {
  std::string names;
  const std::vector<BackendInfo> &list = backends();
  for (size_t i = 0; i < list.size(); ++i)
    names += std::string(i == 0                 ? ""
                         : i + 1 == list.size() ? " or "
                                                : ", ") +
             list[i].name;
  return names;
}

const BackendInfo *findBackend(const std::string &name) {
  for (const BackendInfo &info : backends())
    if (name == info.name)
      return &info;
  return nullptr;
}

std::unique_ptr<Backend> createBackend(const std::string &name,
                                       const BackendOptions &options) {
  const BackendInfo *info = findBackend(name);
  return info ? info->create(options) : nullptr;
}

} // namespace ppc::runtime
