//===- OnnxWeights.h - initializer values read back from a model -*- C++
//-*-===//
//
// The importer leaves weight values in the model file: `ppc.weight` carries
// the initializer's name, and the module the model's absolute path
// (PPCDialect::getSourceModelAttrName(), `ppc.source_model`). Whoever needs the
// values (the plan export, which writes them to the plan's weights file) reads
// them here, one tensor at a time, with the importer's checks on external data.
// Memory stays at the model's protobuf plus one tensor: weights above 2 GiB in
// all live in external data files, which are mapped, not copied.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_IMPORT_ONNXWEIGHTS_H
#define PPC_IMPORT_ONNXWEIGHTS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ppc {

class OnnxWeightReader {
public:
  /// Parses the model at `path` (binary or text syntax) and resolves its
  /// external data. Null and `error` (naming the file) on failure.
  static std::unique_ptr<OnnxWeightReader> open(llvm::StringRef path,
                                                std::string &error);
  ~OnnxWeightReader();

  /// The values of floating-point initializer `name` as float32, row-major.
  /// Fails (the message names the initializer and the model) when there is
  /// no such initializer, its shape is not `shape`, or its data is
  /// unreadable.
  std::optional<std::string> read(llvm::StringRef name,
                                  llvm::ArrayRef<int64_t> shape,
                                  std::vector<float> &values);

  /// Makes `name` (not an initializer) read as the initializers `parts`
  /// stacked along a new dim 0, in that order: the importer's fused
  /// weights (PPCDialect::getStackedWeightsAttrName()).
  void addStack(llvm::StringRef name, std::vector<std::string> parts);

  /// The floating-point initializers' names and shapes, in the model's
  /// order: what `read` can read.
  std::vector<std::pair<std::string, std::vector<int64_t>>>
  floatInitializers() const;

private:
  struct Model;
  explicit OnnxWeightReader(std::unique_ptr<Model> model);
  std::unique_ptr<Model> model;
};

} // namespace ppc

#endif // PPC_IMPORT_ONNXWEIGHTS_H
