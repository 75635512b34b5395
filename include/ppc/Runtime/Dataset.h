//===- Dataset.h - training inputs from .npy shards -------------*- C++ -*-===//
//
// MLIR-free. `ppc-run --data DIR` reads every input tensor of the plan from
// DIR (docs/runtime.md, "Real data"):
//  - DIR/NAME.npy, or a directory DIR/NAME/ of .npy shards taken in file
//    name order, each of shape [records, ...], where NAME's shape in the plan
//    is [batch, ...] with the same trailing dims. Any numeric dtype; integer
//    inputs (class labels) must hold integers in [0, classes).
//  - Every input has the same number of records R; record r of one input
//    goes with record r of the others.
//  - Step s (from 1) takes the batch at sample positions (s - 1) * batch ...
//    s * batch - 1 of an endless sequence of epochs. Position p is record
//    order(p / R, p % R): with shuffling, a permutation of the R records
//    drawn from (seed, epoch), the same on every rank; else p % R.
//  - A rank reads only the box of the batch its buffers hold, so the plan's
//    partitioning of the batch (or of any other dim) shards the reading.
//    Files are mapped, not read whole.
//  - After serving a box for step s, a thread reads the same box for step
//    s + 1, so the next step's inputs are ready when it loads them.
// Values are a function of (input, step, element) alone, as with synthetic
// inputs: every partitioning and --verify's reference see the same numbers,
// and a resumed run continues the same sequence.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_DATASET_H
#define PPC_RUNTIME_DATASET_H

#include "ppc/Runtime/plan.pb.h"
#include "ppc/Support/Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ppc::runtime {

/// Position `position` of the permutation of [0, n) keyed by `key`: a
/// four-round Feistel network over the next even power of two, walked until
/// it lands below n. A bijection of [0, n), computed without tables.
uint64_t shuffledIndex(uint64_t position, uint64_t n, uint64_t key);

class Dataset {
public:
  struct Options {
    bool shuffle = true;
    uint64_t seed = 1;
    /// Accept NaN and infinite values in float inputs.
    bool allowNonfinite = false;
    /// Read the next step's boxes on a thread.
    bool prefetch = true;
  };

  /// Opens the inputs of `plan` in `dir`. Errors name the directory, the
  /// input and the file: an input with no file, a shard of another shape or
  /// dtype, inputs with different record counts, an empty dataset, a label
  /// outside [0, classes), a NaN (without allowNonfinite).
  static absl::Status open(const ppc::planfile::Plan &plan,
                           const std::string &dir, const Options &options,
                           std::unique_ptr<Dataset> &dataset);
  ~Dataset();

  int64_t numRecords() const;
  /// The batch dimension of the inputs (their first dim).
  int64_t batchSize() const;
  /// The record step `step` puts at batch row `row`.
  int64_t recordOf(int64_t step, int64_t row) const;
  /// Writes box [lo, hi) of input `tensor` at step `step` into `data`,
  /// row-major over the box, from the prefetched copy when there is one.
  absl::Status load(int32_t tensor, const std::vector<int64_t> &lo,
                    const std::vector<int64_t> &hi, int64_t step, float *data);

  struct Impl;

private:
  explicit Dataset(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace ppc::runtime

#endif // PPC_RUNTIME_DATASET_H
