//===- Divisors.h - the divisors of a device count --------------*- C++ -*-===//
//
// Private to search/: the configuration space splits dims by the divisors
// of the device count, the pipeline search the machine into as many stages.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SEARCH_DIVISORS_H
#define PPC_SEARCH_DIVISORS_H

#include <cstdint>
#include <vector>

namespace ppc::search::detail {

/// The divisors of `n` (>= 1), ascending.
std::vector<int64_t> divisors(int64_t n);

} // namespace ppc::search::detail

#endif // PPC_SEARCH_DIVISORS_H
