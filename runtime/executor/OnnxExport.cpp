//===- OnnxExport.cpp - trained weights back into the ONNX model ----------===//

#include "ppc/Runtime/OnnxExport.h"
#include "ppc/Runtime/DType.h"

#include "ppc/Runtime/Checkpoint.h"
#include "ppc/Runtime/PlanIO.h"

#include "onnx/onnx_pb.h"

#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ppc::runtime {

using ppc::planfile::Tensor;

static absl::Status readModel(const std::string &path,
                              onnx::ModelProto &model) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::InvalidArgumentError("cannot open ONNX model '" + path + "'");
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  if (bytes.size() >= static_cast<size_t>(INT_MAX) ||
      !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) ||
      !model.has_graph())
    return absl::InvalidArgumentError("'" + path +
                                      "' is not a binary ONNX model");
  return absl::OkStatus();
}

static bool isFloatType(int32_t type) {
  return type == onnx::TensorProto::FLOAT ||
         type == onnx::TensorProto::DOUBLE ||
         type == onnx::TensorProto::FLOAT16 ||
         type == onnx::TensorProto::BFLOAT16;
}

absl::Status checkOnnxWeights(const std::string &path,
                              const ppc::planfile::Plan &plan) {
  onnx::ModelProto model;
  PPC_RETURN_IF_ERROR(readModel(path, model));
  std::map<std::string, const onnx::TensorProto *> initializers;
  for (const onnx::TensorProto &init : model.graph().initializer())
    initializers[init.name()] = &init;
  for (const Tensor &tensor : plan.tensors()) {
    if (tensor.role() != Tensor::WEIGHT && tensor.role() != Tensor::FROZEN)
      continue;
    std::vector<int64_t> shape(tensor.shape().begin(), tensor.shape().end());
    // A stacked weight is its initializers' slices of dim 0.
    std::vector<std::string> names = {tensor.name()};
    const bool stacked = !tensor.stacked_from().empty();
    if (stacked) {
      if (shape.empty() || shape[0] != tensor.stacked_from_size())
        return absl::InvalidArgumentError(
            "the plan's weight '" + tensor.name() + "' stacks " +
            std::to_string(tensor.stacked_from_size()) +
            " initializers but has shape " + shapeString(shape));
      names.assign(tensor.stacked_from().begin(), tensor.stacked_from().end());
      shape.erase(shape.begin());
    }
    for (const std::string &name : names) {
      auto it = initializers.find(name);
      if (it == initializers.end())
        return absl::InvalidArgumentError(
            "'" + path + "' has no initializer '" + name + "' for " +
            (stacked ? "a part of the plan's weight '" + tensor.name() + "'"
                     : std::string("the plan's weight of that name")) +
            ": the plan was made from another model");
      const onnx::TensorProto &init = *it->second;
      std::vector<int64_t> dims(init.dims().begin(), init.dims().end());
      if (dims != shape)
        return absl::InvalidArgumentError(
            "initializer '" + name + "' of '" + path + "' has shape " +
            shapeString(dims) + " but the plan's weight " +
            (stacked ? "'" + tensor.name() + "' stacks parts of shape "
                     : std::string()) +
            shapeString(shape));
      if (!isFloatType(init.data_type()))
        return absl::InvalidArgumentError("initializer '" + name + "' of '" +
                                          path +
                                          "' is not of a floating-point type");
    }
  }
  return absl::OkStatus();
}

template <typename T> static void append(std::string &bytes, T value) {
  char raw[sizeof(T)];
  std::memcpy(raw, &value, sizeof(T));
  bytes.append(raw, sizeof(T));
}

absl::Status
exportOnnxWeights(const std::string &path, const std::string &out,
                  const std::map<std::string, std::vector<float>> &values) {
  onnx::ModelProto model;
  PPC_RETURN_IF_ERROR(readModel(path, model));
  size_t replaced = 0;
  for (onnx::TensorProto &init :
       *model.mutable_graph()->mutable_initializer()) {
    auto it = values.find(init.name());
    if (it == values.end())
      continue;
    const std::vector<float> &v = it->second;
    std::vector<int64_t> dims(init.dims().begin(), init.dims().end());
    if (checkedElementCount(dims) != static_cast<int64_t>(v.size()))
      return absl::InvalidArgumentError(
          "initializer '" + init.name() + "' of '" + path + "' has " +
          std::to_string(checkedElementCount(dims)) + " elements, the " +
          "trained weight " + std::to_string(v.size()));
    std::string bytes;
    switch (init.data_type()) {
    case onnx::TensorProto::FLOAT:
      bytes.assign(reinterpret_cast<const char *>(v.data()), v.size() * 4);
      break;
    case onnx::TensorProto::DOUBLE:
      for (float x : v)
        append<double>(bytes, x);
      break;
    case onnx::TensorProto::FLOAT16:
      for (float x : v)
        append<uint16_t>(bytes, floatToHalf(x));
      break;
    case onnx::TensorProto::BFLOAT16:
      for (float x : v)
        append<uint16_t>(bytes, floatToBFloat16(x));
      break;
    default:
      return absl::InvalidArgumentError("initializer '" + init.name() +
                                        "' of '" + path +
                                        "' is not of a floating-point type");
    }
    init.clear_float_data();
    init.clear_double_data();
    init.clear_int32_data();
    init.clear_external_data();
    init.set_data_location(onnx::TensorProto::DEFAULT);
    init.set_raw_data(std::move(bytes));
    ++replaced;
  }
  if (replaced != values.size())
    return absl::InvalidArgumentError("'" + path + "' lacks " +
                                      std::to_string(values.size() - replaced) +
                                      " of the trained weights' initializers");
  if (model.ByteSizeLong() >= static_cast<size_t>(INT_MAX))
    return absl::InvalidArgumentError(
        "the trained model is over 2 GiB, protobuf's limit for one ONNX "
        "file");
  const std::string temporary = out + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    if (!file || !model.SerializeToOstream(&file) || !file.flush())
      return absl::InvalidArgumentError("cannot write '" + temporary + "'");
  }
  // Checkpoints' rename: OUT.onnx is whole or absent, and durable.
  return commitFile(out);
}

} // namespace ppc::runtime
