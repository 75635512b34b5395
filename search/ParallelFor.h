//===- ParallelFor.h - items of independent work on several threads -*- C++ -*-===//
//
// Private to search/. Each item is done once, by whichever worker takes it
// next, and writes only its own slot of the caller's output, so the result
// does not depend on timing or on the number of workers.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SEARCH_PARALLELFOR_H
#define PPC_SEARCH_PARALLELFOR_H

#include <atomic>
#include <cstddef>
#include <system_error>
#include <thread>
#include <vector>

namespace ppc::search::detail {

/// Calls work(worker, item) for every item in [0, count), on `workers`
/// workers: the calling thread is worker 0. A worker whose thread cannot be
/// started (the system's thread limit) leaves its items to the others.
template <typename WorkFn>
void parallelFor(int workers, size_t count, WorkFn work) {
  std::atomic<size_t> next{0};
  auto drain = [&](int worker) {
    for (size_t item = next++; item < count; item = next++)
      work(worker, item);
  };
  std::vector<std::thread> threads;
  for (int w = 1; w < workers && static_cast<size_t>(w) < count; ++w) {
    try {
      threads.emplace_back(drain, w);
    } catch (const std::system_error &) {
      break;
    }
  }
  drain(0);
  for (std::thread &thread : threads)
    thread.join();
}

} // namespace ppc::search::detail

#endif // PPC_SEARCH_PARALLELFOR_H
