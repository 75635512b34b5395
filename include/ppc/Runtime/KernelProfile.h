//===- KernelProfile.h - measured kernel times, as the simulator reads -*- C++
//-*-//
//
// MLIR-free. Kernel times in the simulator's profile format
// (docs/profile-format.md), from two sources:
//  - `ppc-run --profile`: the kernels of a running plan, timed in place;
//  - `ppc-profile`: every distinct kernel of a plan (all ranks' programs)
//    and of a search's profile requests (ppc/Search/ProfileRequests.h),
//    each run alone on one backend, warm-up runs first, then timed runs
//    until enough time has passed; the backend is synchronized around the
//    timed runs, so a GPU's queued work is counted when it is done.
// A kernel's key is (op kind, dtype, phase, operand slice shapes); a
// profile file being written adds to one of the same device (averaging by
// runs), so the runs of several plans accumulate.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_KERNELPROFILE_H
#define PPC_RUNTIME_KERNELPROFILE_H

#include "ppc/Runtime/Backend.h"
#include "ppc/Runtime/DataSource.h"
#include "ppc/Runtime/plan.pb.h"
#include "ppc/Support/Status.h"

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace ppc::runtime {

/// The device model the cpu backend's profiles measure by default: the
/// cpux presets' device (simulator/MachinePresets.cpp), which ppc-calibrate
/// names its machines' devices too.
inline constexpr const char *kCpuProfileDevice = "cpu-epyc-2core";

struct KernelTiming {
  double seconds = 0; ///< summed over the runs
  int64_t runs = 0;
};
/// By kernelProfileKey.
using KernelTimings = std::map<std::string, KernelTiming>;

/// "kind|dtype|phase|[[d0,d1],...]": the operand slice shapes are the
/// extents of `operandBoxes` (lo, hi pairs).
std::string kernelProfileKey(
    const ppc::planfile::Plan &plan, const ppc::planfile::Op &op,
    const char *phase,
    const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>
        &operandBoxes);

/// Writes `timings` (each averaged over its runs) to the profile at `path`
/// for device `device`, adding to what the file already holds for that
/// device.
absl::Status writeKernelProfile(const std::string &path,
                                const std::string &device,
                                const KernelTimings &timings);

struct KernelProfileOptions {
  int warmupRuns = 2;
  /// Timed runs at least, and until minSeconds have passed.
  int minRuns = 5;
  double minSeconds = 0.02;
  bool training = true;
  /// Progress lines ("profiling 12/40: ppc.linear [[8,64],[64,16]]").
  std::ostream *progress = nullptr;
};

/// One measured kernel, for reports (ppc-profile --details).
struct KernelMeasurement {
  int32_t op = -1; ///< the plan's op
  std::vector<std::vector<int64_t>> operandShapes;
  double forwardSeconds = 0, backwardSeconds = 0; ///< per run; 0: not run
};

/// Measures the forward and (for a training plan) backward of every
/// distinct kernel of `plan`'s programs and of the requests in
/// `requestsPath` ("" for none) on `backend`, operands from `data` where
/// the tensor has a source (inputs, labels, weights), random in [-1, 1)
/// otherwise; adds them to `timings`.
absl::Status profileKernels(const ppc::planfile::Plan &plan,
                            const std::string &requestsPath, Backend &backend,
                            const DataSource &data,
                            const KernelProfileOptions &options,
                            KernelTimings &timings,
                            std::vector<KernelMeasurement> *measured = nullptr);

} // namespace ppc::runtime

#endif // PPC_RUNTIME_KERNELPROFILE_H
