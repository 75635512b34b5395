//===- OnnxWeights.cpp - initializer values read back from a model --------===//

#include "ppc/Import/OnnxWeights.h"

#include "ImporterInternal.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MemoryBuffer.h"

#include <exception>

using namespace ppc;
using namespace ppc::onnx_import;
using llvm::StringRef;

struct OnnxWeightReader::Model {
  std::string path;
  onnx::ModelProto proto;
  llvm::StringMap<const onnx::TensorProto *> initializers;
  llvm::StringMap<std::vector<std::string>> stacks;
};

OnnxWeightReader::OnnxWeightReader(std::unique_ptr<Model> model)
    : model(std::move(model)) {}

OnnxWeightReader::~OnnxWeightReader() = default;

std::unique_ptr<OnnxWeightReader> OnnxWeightReader::open(StringRef path,
                                                         std::string &error) {
  auto model = std::make_unique<Model>();
  model->path = path.str();
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file) {
    error = "cannot read ONNX model '" + model->path +
            "': " + file.getError().message();
    return nullptr;
  }
  try {
    if (auto err = parseOnnxModel((*file)->getBuffer(), model->proto)) {
      error = "'" + model->path + "': " + *err;
      return nullptr;
    }
    if (auto problem = resolveExternalDataLocations(model->proto, path)) {
      error = "ONNX model '" + model->path + "': " + problem->second;
      return nullptr;
    }
  } catch (const std::exception &e) {
    error = "cannot parse ONNX model '" + model->path + "': " + e.what();
    return nullptr;
  }
  for (const onnx::TensorProto &t : model->proto.graph().initializer())
    model->initializers[t.name()] = &t;
  return std::unique_ptr<OnnxWeightReader>(
      new OnnxWeightReader(std::move(model)));
}

void OnnxWeightReader::addStack(StringRef name,
                                std::vector<std::string> parts) {
  model->stacks[name] = std::move(parts);
}

std::optional<std::string> OnnxWeightReader::read(StringRef name,
                                                  llvm::ArrayRef<int64_t> shape,
                                                  std::vector<float> &values) {
  auto stack = model->stacks.find(name);
  if (stack != model->stacks.end()) {
    const std::vector<std::string> &parts = stack->second;
    if (shape.empty() || shape[0] != static_cast<int64_t>(parts.size()))
      return "weight '" + name.str() + "' stacks " +
             std::to_string(parts.size()) +
             " initializers but its dim 0 is not that";
    std::vector<float> part;
    values.clear();
    for (const std::string &partName : parts) {
      if (auto err = read(partName, shape.drop_front(), part))
        return "part of weight '" + name.str() + "': " + *err;
      values.insert(values.end(), part.begin(), part.end());
    }
    return std::nullopt;
  }
  std::string what =
      "initializer '" + name.str() + "' of ONNX model '" + model->path + "'";
  auto it = model->initializers.find(name);
  if (it == model->initializers.end())
    return "the model has no " + what +
           " (was the model changed after "
           "import?)";
  const onnx::TensorProto &tensor = *it->second;
  if (!llvm::equal(tensor.dims(), shape))
    return what + " has another shape than the module's weight (was the "
                  "model changed after import?)";
  int32_t dtype = tensor.data_type();
  if (!isFloatDType(dtype))
    return what + " is not a floating-point tensor";
  std::string bytes;
  if (auto err = readTensorBytes(tensor, bytes))
    return "cannot read " + what + ": " + *err;
  size_t count = bytes.size() / getDTypeByteWidth(dtype);
  values.resize(count);
  for (size_t i = 0; i < count; ++i)
    values[i] = static_cast<float>(
        decodeFloatElement(bytes, static_cast<int64_t>(i), dtype));
  return std::nullopt;
}

std::vector<std::pair<std::string, std::vector<int64_t>>>
OnnxWeightReader::floatInitializers() const {
  std::vector<std::pair<std::string, std::vector<int64_t>>> list;
  for (const onnx::TensorProto &t : model->proto.graph().initializer())
    if (isFloatDType(t.data_type()))
      list.emplace_back(t.name(),
                        std::vector<int64_t>(t.dims().begin(), t.dims().end()));
  return list;
}
