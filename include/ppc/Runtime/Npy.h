//===- Npy.h - numpy .npy files ---------------------------------*- C++ -*-===//
//
// MLIR-free. Reads the .npy arrays given to `ppc-run --input` and the shards
// of `--data` (any numeric little-endian dtype, C order, converted to
// float32: the runtime holds integer tensors as floats) and writes float32
// arrays (--save-outputs).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_NPY_H
#define PPC_RUNTIME_NPY_H

#include "ppc/Support/Status.h"
#include <cstdint>
#include <string>
#include <vector>

namespace ppc::runtime {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data; ///< row-major, converted to float32
  std::string dtype;       ///< the file's descr, e.g. "<i8"
};

/// What a .npy header says: enough to map the file and read it in place.
struct NpyHeader {
  std::vector<int64_t> shape;
  std::string dtype;      ///< the file's descr, e.g. "<i8"
  size_t elementSize = 0; ///< bytes per element
  size_t dataOffset = 0;  ///< where the elements start in the file
};

/// Reads and checks the header of `path` (numeric dtype, little-endian, C
/// order); an error names the file and what is wrong.
absl::Status readNpyHeader(const std::string &path, NpyHeader &header);

/// Converts `n` elements of numpy dtype `dtype` (a descr readNpyHeader
/// accepted) at `bytes` to float32.
void convertNpyElements(const std::string &dtype, const char *bytes, int64_t n,
                        float *out);

/// Reads `path`; an error names the file and what is wrong.
absl::Status readNpy(const std::string &path, NpyArray &array);

/// Writes a float32 array of `shape` (format version 1.0).
absl::Status writeNpy(const std::string &path,
                      const std::vector<int64_t> &shape, const float *data);

} // namespace ppc::runtime

#endif // PPC_RUNTIME_NPY_H
