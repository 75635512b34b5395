//===- OnnxExport.h - trained weights back into the ONNX model --*- C++ -*-===//
//
// MLIR-free. `ppc-run --export-onnx MODEL.onnx=OUT.onnx` writes OUT.onnx:
// MODEL.onnx (the model the plan was made from) with the initializer of
// every weight of the plan (trainable weights and batch-norm statistics)
// replaced by its values after the run, in the initializer's own element
// type (float, double, float16, bfloat16), and nothing else changed. The
// plan's tensors carry their ONNX names; a weight without an initializer of
// its name and shape means the plan came from another model.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_ONNXEXPORT_H
#define PPC_RUNTIME_ONNXEXPORT_H

#include "ppc/Runtime/plan.pb.h"
#include "ppc/Support/Status.h"

#include <map>
#include <string>
#include <vector>

namespace ppc::runtime {

/// OK when every weight of `plan` has an initializer of its name and
/// shape in binary ONNX model `model`, else the first mismatch.
absl::Status checkOnnxWeights(const std::string &model,
                              const ppc::planfile::Plan &plan);

/// Writes `model` with the initializers named in `values` (whole tensors,
/// row-major float32) replaced to `out` (written to a temporary file, then
/// renamed, so a failure leaves no half model).
absl::Status
exportOnnxWeights(const std::string &model, const std::string &out,
                  const std::map<std::string, std::vector<float>> &values);

} // namespace ppc::runtime

#endif // PPC_RUNTIME_ONNXEXPORT_H
