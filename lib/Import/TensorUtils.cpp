//===- TensorUtils.cpp - ONNX tensors, data types and attributes ----------===//
//
// Decoding and encoding of ONNX TensorProto data (raw, typed and external
// fields), data type mapping, and node attribute accessors.
//
//===----------------------------------------------------------------------===//

#include "ImporterInternal.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <charconv>
#include <cmath>
#include <cstring>

using namespace mlir;
using namespace ppc;
using namespace ppc::onnx_import;
using onnx::TensorProto;

//===----------------------------------------------------------------------===//
// Data types
//===----------------------------------------------------------------------===//

bool onnx_import::isFloatDType(int32_t dtype) {
  return dtype == TensorProto::FLOAT || dtype == TensorProto::DOUBLE ||
         dtype == TensorProto::FLOAT16 || dtype == TensorProto::BFLOAT16;
}

int64_t onnx_import::getDTypeByteWidth(int32_t dtype) {
  switch (dtype) {
  case TensorProto::UINT8:
  case TensorProto::INT8:
  case TensorProto::BOOL:
    return 1;
  case TensorProto::UINT16:
  case TensorProto::INT16:
  case TensorProto::FLOAT16:
  case TensorProto::BFLOAT16:
    return 2;
  case TensorProto::FLOAT:
  case TensorProto::INT32:
  case TensorProto::UINT32:
    return 4;
  case TensorProto::INT64:
  case TensorProto::UINT64:
  case TensorProto::DOUBLE:
    return 8;
  default:
    return 0;
  }
}

StringRef onnx_import::getDTypeName(int32_t dtype) {
  if (!TensorProto::DataType_IsValid(dtype))
    return "invalid";
  static const std::string names[] = {
      "undefined", "float",  "uint8",     "int8",       "uint16",  "int16",
      "int32",     "int64",  "string",    "bool",       "float16", "double",
      "uint32",    "uint64", "complex64", "complex128", "bfloat16"};
  if (dtype < 0 || dtype >= static_cast<int32_t>(std::size(names)))
    return "unknown";
  return names[dtype];
}

Type onnx_import::getElementType(int32_t dtype, MLIRContext *ctx) {
  Builder b(ctx);
  switch (dtype) {
  case TensorProto::FLOAT:
    return b.getF32Type();
  case TensorProto::DOUBLE:
    return b.getF64Type();
  case TensorProto::FLOAT16:
    return b.getF16Type();
  case TensorProto::BFLOAT16:
    return b.getBF16Type();
  case TensorProto::BOOL:
    return b.getI1Type();
  default:
    if (int64_t width = getDTypeByteWidth(dtype))
      return b.getIntegerType(width * 8);
    return {};
  }
}

int32_t onnx_import::getDTypeFor(Type type) {
  if (type.isF32())
    return TensorProto::FLOAT;
  if (type.isF64())
    return TensorProto::DOUBLE;
  if (type.isF16())
    return TensorProto::FLOAT16;
  if (type.isBF16())
    return TensorProto::BFLOAT16;
  switch (type.isSignlessInteger() ? type.getIntOrFloatBitWidth() : 0) {
  case 1:
    return TensorProto::BOOL;
  case 8:
    return TensorProto::INT8;
  case 16:
    return TensorProto::INT16;
  case 32:
    return TensorProto::INT32;
  case 64:
    return TensorProto::INT64;
  default:
    return 0;
  }
}

std::optional<int64_t> onnx_import::getNumElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return std::nullopt;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      return std::nullopt;
    n *= d;
  }
  return n;
}

//===----------------------------------------------------------------------===//
// ConstTensor
//===----------------------------------------------------------------------===//

bool ConstTensor::isFloat() const { return isFloatDType(dtype); }

int64_t ConstTensor::numElements() const {
  return isFloat() ? static_cast<int64_t>(floats.size())
                   : static_cast<int64_t>(ints.size());
}

ConstTensor ConstTensor::zeros(int32_t dtype, ArrayRef<int64_t> shape) {
  ConstTensor t;
  t.dtype = dtype;
  t.shape.assign(shape.begin(), shape.end());
  int64_t n = getNumElements(shape).value_or(0);
  if (t.isFloat())
    t.floats.assign(n, 0.0);
  else
    t.ints.assign(n, 0);
  return t;
}

//===----------------------------------------------------------------------===//
// Reading tensor data
//===----------------------------------------------------------------------===//

/// Appends `value` as `width` little-endian bytes.
static void appendLE(std::string &bytes, uint64_t value, int64_t width) {
  for (int64_t i = 0; i < width; ++i)
    bytes.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

static uint64_t readLE(const char *p, int64_t width) {
  uint64_t v = 0;
  for (int64_t i = 0; i < width; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

/// Reads the [offset, offset + length) part of an external data file.
static std::optional<std::string> readExternalBytes(const TensorProto &tensor,
                                                    std::string &bytes) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto &entry : tensor.external_data()) {
    if (entry.key() == "location")
      location = entry.value();
    else if (entry.key() == "offset" || entry.key() == "length") {
      int64_t v;
      if (StringRef(entry.value()).getAsInteger(10, v) || v < 0)
        return "bad external data " + entry.key() + " '" + entry.value() + "'";
      (entry.key() == "offset" ? offset : length) = v;
    }
  }
  auto file = llvm::MemoryBuffer::getFile(location, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file)
    return "cannot read external data file '" + location +
           "': " + file.getError().message();
  StringRef data = (*file)->getBuffer();
  if (offset > static_cast<int64_t>(data.size()) ||
      (length >= 0 && length > static_cast<int64_t>(data.size()) - offset))
    return "external data file '" + location + "' is too short";
  bytes = data.substr(offset, length < 0 ? StringRef::npos : length).str();
  return std::nullopt;
}

/// True if `path` is `dir` or inside it (both absolute, symlinks resolved).
static bool isInsideDirectory(StringRef path, StringRef dir) {
  if (!path.consume_front(dir))
    return false;
  return path.empty() || llvm::sys::path::is_separator(path.front()) ||
         llvm::sys::path::is_separator(dir.back());
}

std::optional<std::pair<std::string, std::string>>
onnx_import::resolveExternalDataLocations(onnx::ModelProto &model,
                                          StringRef modelPath) {
  namespace fs = llvm::sys::fs;
  namespace path = llvm::sys::path;
  SmallString<256> dir(modelPath == "-" ? "" : modelPath);
  path::remove_filename(dir);
  if (dir.empty())
    dir = ".";
  SmallString<256> realDir;
  if (fs::real_path(dir, realDir)) {
    realDir = dir;
    (void)fs::make_absolute(realDir);
  }
  for (TensorProto &tensor : *model.mutable_graph()->mutable_initializer()) {
    if (tensor.data_location() != TensorProto::EXTERNAL)
      continue;
    auto problem = [&](const llvm::Twine &message) {
      return std::make_pair(tensor.name(), message.str());
    };
    auto *entries = tensor.mutable_external_data();
    auto location = llvm::find_if(
        *entries, [](const auto &e) { return e.key() == "location"; });
    if (location == entries->end())
      return problem("initializer '" + tensor.name() +
                     "' has external data without a location");
    const std::string &written = location->value();
    std::string where = "external data location '" + written +
                        "' of initializer '" + tensor.name() + "'";
    if (path::is_absolute(written))
      return problem(where + " is an absolute path; it must be relative to "
                             "the model's directory");
    SmallString<256> normalized(written);
    path::remove_dots(normalized, /*remove_dot_dot=*/true);
    if (normalized.starts_with(".."))
      return problem(where + " is outside the model's directory '" + realDir +
                     "'");
    SmallString<256> file(realDir);
    path::append(file, normalized);
    if (!fs::exists(file))
      return problem("external data file '" + file + "' of initializer '" +
                     tensor.name() + "' does not exist");
    // Symbolic links may point anywhere: check where the file really is.
    SmallString<256> real;
    if (fs::real_path(file, real))
      return problem("external data file '" + file + "' of initializer '" +
                     tensor.name() + "' cannot be resolved");
    if (!isInsideDirectory(real, realDir))
      return problem(where + " resolves to '" + real +
                     "', outside the model's directory '" + realDir + "'");
    if (!fs::is_regular_file(real))
      return problem("external data file '" + file + "' of initializer '" +
                     tensor.name() + "' is not a regular file");
    location->set_value(std::string(real));
  }
  return std::nullopt;
}

/// Reads a typed repeated field into `bytes`, `width` bytes per element.
template <typename Field, typename Convert>
static void readTyped(const Field &field, int64_t width, std::string &bytes,
                      Convert convert) {
  bytes.reserve(field.size() * width);
  for (const auto &v : field)
    appendLE(bytes, convert(v), width);
}

std::optional<std::string>
onnx_import::readTensorBytes(const TensorProto &tensor, std::string &bytes) {
  int32_t dtype = tensor.data_type();
  int64_t width = getDTypeByteWidth(dtype);
  if (!width)
    return "unsupported tensor data type '" + getDTypeName(dtype).str() + "'";
  SmallVector<int64_t> shape(tensor.dims().begin(), tensor.dims().end());
  std::optional<int64_t> n = getNumElements(shape);
  if (!n || *n > std::numeric_limits<int64_t>::max() / width)
    return std::string("invalid tensor dims");
  int64_t expected = *n * width;

  bytes.clear();
  if (tensor.data_location() == TensorProto::EXTERNAL) {
    if (auto err = readExternalBytes(tensor, bytes))
      return err;
  } else if (tensor.has_raw_data()) {
    bytes = tensor.raw_data();
  } else {
    auto asBits = [](auto v) { return static_cast<uint64_t>(v); };
    switch (dtype) {
    case TensorProto::FLOAT:
      readTyped(tensor.float_data(), width, bytes,
                [](float f) { return uint64_t(llvm::bit_cast<uint32_t>(f)); });
      break;
    case TensorProto::DOUBLE:
      readTyped(tensor.double_data(), width, bytes,
                [](double d) { return llvm::bit_cast<uint64_t>(d); });
      break;
    case TensorProto::INT64:
      readTyped(tensor.int64_data(), width, bytes, asBits);
      break;
    case TensorProto::UINT32:
    case TensorProto::UINT64:
      readTyped(tensor.uint64_data(), width, bytes, asBits);
      break;
    default: // int32, int16, int8, uint16, uint8, bool, float16, bfloat16.
      readTyped(tensor.int32_data(), width, bytes, asBits);
      break;
    }
  }
  if (static_cast<int64_t>(bytes.size()) != expected)
    return "tensor has " + std::to_string(bytes.size()) +
           " bytes of data, expected " + std::to_string(expected);
  return std::nullopt;
}

/// Converts a 16-bit float (IEEE half or bfloat16) to double.
static double halfToDouble(uint64_t bits, bool bf16) {
  APFloat f(bf16 ? APFloat::BFloat() : APFloat::IEEEhalf(),
            APInt(16, bits & 0xffff));
  return f.convertToDouble();
}

static uint64_t doubleToHalf(double value, bool bf16) {
  APFloat f(value);
  bool lost;
  f.convert(bf16 ? APFloat::BFloat() : APFloat::IEEEhalf(),
            APFloat::rmNearestTiesToEven, &lost);
  return f.bitcastToAPInt().getZExtValue();
}

double onnx_import::decodeFloatElement(const std::string &bytes, int64_t i,
                                       int32_t dtype) {
  int64_t width = getDTypeByteWidth(dtype);
  uint64_t bits = readLE(bytes.data() + i * width, width);
  switch (dtype) {
  case TensorProto::DOUBLE:
    return llvm::bit_cast<double>(bits);
  case TensorProto::FLOAT16:
  case TensorProto::BFLOAT16:
    return halfToDouble(bits, dtype == TensorProto::BFLOAT16);
  default:
    return llvm::bit_cast<float>(static_cast<uint32_t>(bits));
  }
}

std::optional<std::string> onnx_import::decodeTensor(const TensorProto &tensor,
                                                     ConstTensor &result) {
  SmallVector<int64_t> shape(tensor.dims().begin(), tensor.dims().end());
  std::optional<int64_t> n = getNumElements(shape);
  if (!n)
    return std::string("invalid tensor dims");
  if (*n > kMaxFoldElements)
    return std::string("tensor too large to evaluate");
  std::string bytes;
  if (auto err = readTensorBytes(tensor, bytes))
    return err;
  int32_t dtype = tensor.data_type();
  int64_t width = getDTypeByteWidth(dtype);
  result = ConstTensor::zeros(dtype, shape);
  for (int64_t i = 0; i < *n; ++i) {
    uint64_t bits = readLE(bytes.data() + i * width, width);
    switch (dtype) {
    case TensorProto::FLOAT:
    case TensorProto::DOUBLE:
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16:
      result.floats[i] = decodeFloatElement(bytes, i, dtype);
      break;
    case TensorProto::INT8:
    case TensorProto::INT16:
    case TensorProto::INT32:
    case TensorProto::INT64:
      result.ints[i] = llvm::SignExtend64(bits, width * 8);
      break;
    default: // Unsigned and bool.
      result.ints[i] = static_cast<int64_t>(bits);
      break;
    }
  }
  return std::nullopt;
}

std::string onnx_import::encodeBytes(const ConstTensor &tensor) {
  int64_t width = getDTypeByteWidth(tensor.dtype);
  std::string bytes;
  int64_t n = tensor.numElements();
  bytes.reserve(n * width);
  for (int64_t i = 0; i < n; ++i) {
    uint64_t bits;
    switch (tensor.dtype) {
    case TensorProto::FLOAT:
      bits = llvm::bit_cast<uint32_t>(static_cast<float>(tensor.floats[i]));
      break;
    case TensorProto::DOUBLE:
      bits = llvm::bit_cast<uint64_t>(tensor.floats[i]);
      break;
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16:
      bits =
          doubleToHalf(tensor.floats[i], tensor.dtype == TensorProto::BFLOAT16);
      break;
    case TensorProto::BOOL:
      bits = tensor.ints[i] != 0;
      break;
    default:
      bits = static_cast<uint64_t>(tensor.ints[i]);
      break;
    }
    appendLE(bytes, bits, width);
  }
  return bytes;
}

void onnx_import::encodeTensor(const ConstTensor &tensor, StringRef name,
                               TensorProto &proto) {
  proto.Clear();
  proto.set_name(name.str());
  proto.set_data_type(tensor.dtype);
  for (int64_t d : tensor.shape)
    proto.add_dims(d);
  proto.set_raw_data(encodeBytes(tensor));
}

DenseElementsAttr onnx_import::getElementsAttr(RankedTensorType type,
                                               StringRef bytes) {
  // i1 is bit-packed in DenseElementsAttr's raw form: go through bools.
  if (type.getElementType().isInteger(1)) {
    SmallVector<bool> bools;
    for (char c : bytes)
      bools.push_back(c != 0);
    return DenseElementsAttr::get(type, bools);
  }
  ArrayRef<char> raw(bytes.data(), bytes.size());
  bool splat;
  if (!DenseElementsAttr::isValidRawBuffer(type, raw, splat))
    return {};
  return DenseElementsAttr::getFromRawBuffer(type, raw);
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

const onnx::AttributeProto *onnx_import::findAttr(const onnx::NodeProto &node,
                                                  StringRef name) {
  for (const auto &attr : node.attribute())
    if (attr.name() == name)
      return &attr;
  return nullptr;
}

int64_t onnx_import::getAttrInt(const onnx::NodeProto &node, StringRef name,
                                int64_t defaultValue) {
  const auto *attr = findAttr(node, name);
  return attr && attr->has_i() ? attr->i() : defaultValue;
}

double onnx_import::widenFloat(float value) {
  if (!std::isfinite(value))
    return value;
  // to_chars gives the shortest digits that round-trip in single precision.
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  double result;
  if (ec != std::errc() || StringRef(buffer, end - buffer).getAsDouble(result))
    return value;
  return result;
}

double onnx_import::getAttrFloat(const onnx::NodeProto &node, StringRef name,
                                 double defaultValue) {
  const auto *attr = findAttr(node, name);
  return attr && attr->has_f() ? widenFloat(attr->f()) : defaultValue;
}

std::string onnx_import::getAttrString(const onnx::NodeProto &node,
                                       StringRef name, StringRef defaultValue) {
  const auto *attr = findAttr(node, name);
  return attr && attr->has_s() ? attr->s() : defaultValue.str();
}

std::optional<SmallVector<int64_t>>
onnx_import::getAttrInts(const onnx::NodeProto &node, StringRef name) {
  const auto *attr = findAttr(node, name);
  if (!attr)
    return std::nullopt;
  return SmallVector<int64_t>(attr->ints().begin(), attr->ints().end());
}
