//===- RunArgs.h - ppc-run's command line ------------------------*- C++
//-*-===//
//
// MLIR-free. ppc-run's options, parsed into RunOptions: here rather than in
// the tool so that tests and the command-line fuzzer (docs/fuzzing.md) run
// the parser ppc-run runs.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_RUNARGS_H
#define PPC_RUNTIME_RUNARGS_H

#include "ppc/Runtime/Executor.h"
#include "ppc/Support/Status.h"

#include <string>

namespace ppc::runtime {

/// ppc-run's --help text (without the list of backends).
extern const char kRunHelp[];

struct RunArgs {
  std::string plan;
  std::string weights; ///< --weights, "" for the plan's own
  RunOptions options;  ///< options.timeout also bounds the MPI waits
  bool help = false;
  bool version = false;
  std::string threadsNote; ///< --threads was lowered to the cores
};

/// What is wrong with the command line `argv[1..argc)`, if anything. Never
/// throws.
absl::Status parseRunArgs(int argc, const char *const *argv, RunArgs &args);

} // namespace ppc::runtime

#endif // PPC_RUNTIME_RUNARGS_H
