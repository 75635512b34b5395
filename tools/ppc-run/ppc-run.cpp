//===- ppc-run.cpp - run a ppc plan ---------------------------------------===//
//
// Executes a plan file written by ppc-opt: one process per rank under
// mpirun, or a single process for one-rank plans.
//
//===----------------------------------------------------------------------===//

#include "ppc/Runtime/Backend.h"
#include "ppc/Runtime/Executor.h"
#include "ppc/Runtime/PlanIO.h"
#include "ppc/Runtime/RunArgs.h"
#include "ppc/Version.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <malloc.h>
#include <string>

using namespace ppc::runtime;

int main(int argc, char **argv) {
  // Every step allocates and frees the same buffers (and MPI its temporary
  // ones). By default glibc maps large blocks fresh each time, and the page
  // faults of touching them again cost more than the kernels of a small
  // model: keep freed memory in the heap instead.
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  Communicator::initialize(argc, argv);
  int code = 1;
  {
    RunArgs args;
    absl::Status parsed = parseRunArgs(argc, argv, args);
    auto comm = Communicator::world(args.options.timeout);
    // Every rank sees the same arguments and plan: rank 0 speaks for all.
    const bool speaks = comm->rank() == 0;
    ppc::planfile::Plan plan;
    // An exception is a bug, never the user's: say where, and end the job
    // (the other ranks would wait for this one until the timeout).
    try {
      if (!parsed.ok()) {
        if (speaks)
          std::cerr << "ppc-run: " << parsed.message() << "\n";
      } else if (args.help) {
        if (speaks)
          std::cout << kRunHelp
                    << "\nbackends: " << ppc::runtime::backendNames() << "\n";
        code = 0;
      } else if (args.version) {
        if (speaks)
          std::cout << "ppc-run (ppc) " << ppc::kVersion << "\n";
        code = 0;
      } else if (absl::Status read = readPlanFile(args.plan, plan);
                 comm->anyRank(!read.ok(), [] { return "reading the plan"; })) {
        // A file missing on one node only: that rank speaks, so nobody waits
        // for it.
        const bool rootFailed = comm->broadcastFromRoot(
            speaks && !read.ok(), [] { return "reading the plan"; });
        if (!read.ok() && (speaks || !rootFailed))
          std::cerr << "ppc-run: "
                    << (speaks ? ""
                               : "rank " + std::to_string(comm->rank()) + ": ")
                    << read.message() << "\n";
      } else {
        if (speaks && !args.threadsNote.empty())
          std::cerr << "ppc-run: " << args.threadsNote << "\n";
        args.options.planFile = args.plan;
        args.options.weightsFile = args.weights.empty()
                                       ? weightsFilePath(args.plan, plan)
                                       : args.weights;
        code = runPlan(plan, args.options, *comm, std::cout, std::cerr);
      }
    } catch (const std::exception &e) {
      std::cout.flush();
      std::cerr << "ppc-run: rank " << comm->rank()
                << ": internal error: " << e.what() << "\n";
      std::cerr.flush();
      comm->abort(1);
    }
    std::cout.flush();
    std::cerr.flush();
  }
  Communicator::finalize();
  return code;
}
