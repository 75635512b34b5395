//===- DataSource.h - values of inputs, weights and constants ---*- C++ -*-===//
//
// MLIR-free. What a plan's Load instruction puts into a buffer holding box
// [lo, hi) of a tensor. Every value is a function of the tensor and the
// element's global flat index (never of the box), so all ranks and all
// partitionings, and the single-device reference of --verify, see the same
// numbers:
//  - INPUT: the batch of the step from `--data DIR` (ppc/Runtime/Dataset.h),
//    or the array of `--input NAME=FILE.npy` (the same every step), else
//    synthetic: hash(seed, step, tensor id, index) mapped to a float uniform
//    in [-1, 1), or for integer inputs (int_max > 0) to an integer in
//    [0, int_max) held as a float. A new batch every step, or with a batch
//    cycle of N the batches of steps 1..N over again (N = 1: one fixed
//    batch, which a model can fit, so its loss falls).
//  - WEIGHT / FROZEN: by the tensor's init: ZEROS, ONES, UNIFORM(bound) drawn
//    from hash(seed, 0, tensor id, index) (steps count from 1, so stream 0 is
//    never an input's), DATA, or WEIGHTS_FILE (the model's values in the
//    plan's weights file, see setWeightsFile). UNIFORM with bound 0, and an
//    unspecified init without data, use bound 1/sqrt(fan_in), fan_in being the
//    product of the dims after the first (the first dim of a vector). With
//    InitMode::Seed, WEIGHT tensors ignore DATA and draw UNIFORM, and
//    WEIGHTS_FILE ones follow their seed_init; FROZEN ones (batch-norm
//    statistics) keep their values, since random running variances would be
//    negative.
//  - CONSTANT: DATA (ZEROS / ONES when the plan says so).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_DATASOURCE_H
#define PPC_RUNTIME_DATASOURCE_H

#include "ppc/Runtime/Dataset.h"
#include "ppc/Runtime/plan.pb.h"
#include "ppc/Support/Status.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ppc::runtime {

/// splitmix64 chained over (seed, stream, tensor, index).
uint64_t hashElement(uint64_t seed, uint64_t stream, uint64_t tensor,
                     uint64_t index);

/// The top 24 bits of `hash` as a float uniform in [-1, 1) (exact in f32).
float uniformFromHash(uint64_t hash);

enum class InitMode {
  Plan, ///< as the plan says
  Seed, ///< weights drawn from the seed even where the plan has DATA
};

class DataSource {
public:
  DataSource(const ppc::planfile::Plan &plan, uint64_t seed, InitMode mode,
             int64_t batchCycle = 0);

  /// Uses the array in `path` for the input tensor named `name` (every
  /// step). Errors: no such tensor (the message lists the inputs), not an
  /// input, unreadable file, shape differs, NaN or infinite values (naming
  /// the first). With `nonfinite`, those values are accepted and
  /// *nonfinite describes them ("" if none).
  absl::Status setInputFile(const std::string &name, const std::string &path,
                            std::string *nonfinite = nullptr);

  /// Reads every input from the dataset in `dir` (see Dataset::open for
  /// the errors). Fails when an --input file was set.
  absl::Status setDataDirectory(const std::string &dir,
                                const Dataset::Options &options);
  /// The dataset of setDataDirectory, or null.
  const Dataset *dataset() const { return data_.get(); }

  /// Maps the plan's weights file (raw float32, see plan.proto WeightsFile)
  /// and checks its size and the checksum of every tensor this run reads
  /// from it. Errors name the file: missing, not a regular file, of another
  /// size than the plan says, a tensor whose checksum differs. Nothing to
  /// do ("") when no tensor needs the file, whatever `path`.
  absl::Status setWeightsFile(const std::string &path);

  /// Writes the values of box [lo, hi) of tensor `tensor` at training step
  /// `step` (counted from 1) into `data`, row-major over the box.
  absl::Status load(int32_t tensor, const std::vector<int64_t> &lo,
                    const std::vector<int64_t> &hi, int64_t step,
                    float *data) const;

private:
  const ppc::planfile::Plan &plan;
  uint64_t seed;
  InitMode mode;
  int64_t batchCycle; ///< 0: a new synthetic batch every step
  std::map<int32_t, std::vector<float>> inputFiles;
  /// Shared: load() is const, and the dataset's prefetch cache changes.
  std::shared_ptr<Dataset> data_;
  /// The mapped weights file (null when none is used).
  struct MappedFile;
  std::shared_ptr<const MappedFile> weights;

  /// The init rule this run applies to a weight or constant.
  ppc::planfile::Tensor::Init
  effectiveInit(const ppc::planfile::Tensor &tensor) const;
};

} // namespace ppc::runtime

#endif // PPC_RUNTIME_DATASOURCE_H
