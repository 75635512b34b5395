//===- RunArgsFuzzer.cpp - libFuzzer target for ppc-run's command line ----===//
//
// Feeds arbitrary bytes to parseRunArgs as a command line: the input split
// at NUL bytes into arguments (as argv holds them). An accepted command
// line must name a plan (unless --help or --version), a kernel thread
// count from 1 to the host's cores and a positive timeout: a violation
// aborts, so libFuzzer reports it. See docs/fuzzing.md.
//
//===----------------------------------------------------------------------===//

#include "ppc/Runtime/RunArgs.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<std::string> words = {"ppc-run"};
  std::string word;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      words.push_back(word);
      word.clear();
    } else {
      word += static_cast<char>(data[i]);
    }
  }
  words.push_back(word);
  std::vector<const char *> argv;
  for (const std::string &w : words)
    argv.push_back(w.c_str());
  ppc::runtime::RunArgs args;
  absl::Status error = ppc::runtime::parseRunArgs(static_cast<int>(argv.size()),
                                                  argv.data(), args);
  if (!error.empty())
    return 0;
  const int cores =
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if ((args.plan.empty() && !args.help && !args.version) ||
      args.options.threads < 1 || args.options.threads > cores ||
      !(args.options.timeout > 0))
    std::abort();
  return 0;
}
