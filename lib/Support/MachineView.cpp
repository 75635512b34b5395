//===- MachineView.cpp - which device runs which partition ----------------===//

#include "ppc/Support/MachineView.h"

#include <algorithm>

namespace ppc {

int64_t OpConfig::numPartitions() const {
  int64_t n = 1;
  for (int64_t d : degrees)
    n *= d;
  return n;
}

std::vector<int64_t> OpConfig::effectiveStrides() const {
  if (!strides.empty())
    return strides;
  std::vector<int64_t> result;
  int64_t running = 1;
  for (auto it = degrees.rbegin(); it != degrees.rend(); ++it) {
    if (*it == 1)
      continue;
    result.push_back(running);
    running *= *it;
  }
  std::reverse(result.begin(), result.end());
  return result;
}

std::vector<int64_t> OpConfig::devices() const {
  std::vector<int64_t> partitioned;
  for (int64_t d : degrees)
    if (d > 1)
      partitioned.push_back(d);
  std::vector<int64_t> stride = effectiveStrides();
  int64_t n = numPartitions();
  std::vector<int64_t> result(n);
  for (int64_t p = 0; p < n; ++p) {
    int64_t rest = p, device = start;
    for (size_t i = partitioned.size(); i-- > 0;) {
      device += (rest % partitioned[i]) * stride[i];
      rest /= partitioned[i];
    }
    result[p] = device;
  }
  return result;
}

} // namespace ppc
