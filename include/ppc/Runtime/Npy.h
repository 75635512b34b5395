//===- Npy.h - numpy .npy files ---------------------------------*- C++ -*-===//
//
// MLIR-free. Reads the .npy arrays given to `ppc-run --input` (any numeric
// little-endian dtype, C order, converted to float32: the runtime holds
// integer tensors as floats) and writes float32 arrays (--save-outputs).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_NPY_H
#define PPC_RUNTIME_NPY_H

#include <cstdint>
#include <string>
#include <vector>

namespace ppc::runtime {

struct NpyArray {
  std::vector<int64_t> shape;
  std::vector<float> data; ///< row-major, converted to float32
  std::string dtype;       ///< the file's descr, e.g. "<i8"
};

/// Reads `path`; "" or an error naming the file and what is wrong.
std::string readNpy(const std::string &path, NpyArray &array);

/// Writes a float32 array of `shape` (format version 1.0); "" or the error.
std::string writeNpy(const std::string &path, const std::vector<int64_t> &shape,
                     const float *data);

} // namespace ppc::runtime

#endif // PPC_RUNTIME_NPY_H
