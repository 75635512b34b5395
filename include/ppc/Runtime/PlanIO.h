//===- PlanIO.h - read and write plan files ---------------------*- C++ -*-===//
//
// MLIR-free. The one reader and writer of plan files: binary protobuf, or
// protobuf text format for people. Readers check the format version.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_PLANIO_H
#define PPC_RUNTIME_PLANIO_H

#include "ppc/Runtime/Kernels.h"
#include "ppc/Runtime/plan.pb.h"
#include "ppc/Support/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace ppc::runtime {

/// The plan format version this build writes and reads.
constexpr uint32_t kPlanVersion = 4;

/// Writes `plan` to `path` (text format if `text`), atomically: a temporary
/// file renamed into place.
absl::Status writePlanFile(const ppc::planfile::Plan &plan,
                           const std::string &path, bool text);

/// Reads a plan written by writePlanFile (binary or text, recognized by
/// content) and checks its version and its structure (ids in range, one
/// program per rank). An error names the file and what is
/// wrong.
absl::Status readPlanFile(const std::string &path, ppc::planfile::Plan &plan);

/// FNV-1a 64 of `n` bytes: the one hash of plans, checkpoint files and
/// weights-file tensors.
uint64_t fnv1a(const void *data, size_t n);

/// The checksum of a weights file tensor (Tensor.weights_checksum): fnv1a
/// over the little-endian bytes of its float32 values.
uint64_t weightsChecksum(const float *values, int64_t count);

/// Where the weights file of the plan read from `planPath` is (its
/// WeightsFile.path taken relative to the plan's directory), "" if it has
/// none.
std::string weightsFilePath(const std::string &planPath,
                            const ppc::planfile::Plan &plan);

/// readPlanFile on the file's contents `bytes`; `path` only names the file
/// in errors.
absl::Status parsePlan(const std::string &bytes, const std::string &path,
                       ppc::planfile::Plan &plan);

/// Checks a plan's internal consistency; the first problem found if any.
/// Every tensor's and scratch buffer's float32 bytes fit in int64 (so box
/// volumes and byte counts of a valid plan never overflow), and every box
/// of a buffer lies inside its tensor.
absl::Status validatePlan(const ppc::planfile::Plan &plan);

/// The elements of `shape`, or -1 if a dim is negative or its float32 bytes
/// do not fit in int64.
int64_t checkedElementCount(const std::vector<int64_t> &shape);

/// "[2, 3]".
std::string shapeString(const std::vector<int64_t> &shape);

/// Whether tensor `t` persists across steps and checkpoints: a weight or a
/// frozen statistic.
bool isPersistentRole(const ppc::planfile::Tensor &t);
/// Whether `alloc` makes a buffer of persistent state (a box of a weight or
/// frozen statistic, not a view, a gradient or a ZeRO-3 staging copy):
/// what the executor keeps across steps and a checkpoint holds.
bool isPersistentBuffer(const ppc::planfile::Plan &plan,
                        const ppc::planfile::Instruction::Alloc &alloc);

/// The kernels' view of a global op: attributes and global shapes.
OpDesc describeOp(const ppc::planfile::Plan &plan, const ppc::planfile::Op &op);

} // namespace ppc::runtime

#endif // PPC_RUNTIME_PLANIO_H
