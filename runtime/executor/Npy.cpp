//===- Npy.cpp - numpy .npy files -----------------------------------------===//

#include "ppc/Runtime/Npy.h"
#include "ppc/Runtime/DType.h"
#include "ppc/Runtime/PlanIO.h"

#include "absl/strings/numbers.h"

#include <cstring>
#include <fstream>
#include <sstream>

namespace ppc::runtime {

static const char kMagic[] = "\x93NUMPY";

/// The value of `key` in the header dict ("{'descr': '<f4', ...}"), up to the
/// next top-level comma or closing brace; "" when absent.
static std::string headerValue(const std::string &header,
                               const std::string &key) {
  size_t pos = header.find("'" + key + "'");
  if (pos == std::string::npos)
    return "";
  pos = header.find(':', pos);
  if (pos == std::string::npos)
    return "";
  ++pos;
  int depth = 0;
  size_t end = pos;
  for (; end < header.size(); ++end) {
    char c = header[end];
    if (c == '(')
      ++depth;
    else if (c == ')')
      --depth;
    else if ((c == ',' || c == '}') && depth == 0)
      break;
  }
  std::string value = header.substr(pos, end - pos);
  size_t first = value.find_first_not_of(" \t");
  size_t last = value.find_last_not_of(" \t");
  return first == std::string::npos ? ""
                                    : value.substr(first, last - first + 1);
}

template <typename T>
static void convert(const char *bytes, int64_t n, float *out) {
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, bytes + i * sizeof(T), sizeof(T));
    out[i] = static_cast<float>(v);
  }
}

/// numpy's float16 (IEEE half), read exactly into float.
static void convertHalf(const char *bytes, int64_t n, float *out) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, bytes + i * sizeof(bits), sizeof(bits));
    out[i] = halfToFloat(bits);
  }
}

namespace {
struct Kind {
  const char *name;
  size_t size;
  void (*convert)(const char *, int64_t, float *);
};
const Kind kKinds[] = {
    {"f2", 2, convertHalf},       {"f4", 4, convert<float>},
    {"f8", 8, convert<double>},   {"i1", 1, convert<int8_t>},
    {"i2", 2, convert<int16_t>},  {"i4", 4, convert<int32_t>},
    {"i8", 8, convert<int64_t>},  {"u1", 1, convert<uint8_t>},
    {"u2", 2, convert<uint16_t>}, {"u4", 4, convert<uint32_t>},
    {"u8", 8, convert<uint64_t>}, {"b1", 1, convert<uint8_t>}};

/// The kind of a little-endian (or byte-order-free) descr such as "<f4".
const Kind *kindOf(const std::string &descr) {
  if (descr.size() < 3 ||
      (descr[0] != '<' && descr[0] != '|' && descr[0] != '='))
    return nullptr;
  for (const Kind &k : kKinds)
    if (descr.compare(1, std::string::npos, k.name) == 0)
      return &k;
  return nullptr;
}
} // namespace

void convertNpyElements(const std::string &dtype, const char *bytes, int64_t n,
                        float *out) {
  if (const Kind *kind = kindOf(dtype))
    kind->convert(bytes, n, out);
}

absl::Status readNpyHeader(const std::string &path, NpyHeader &header) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::InvalidArgumentError("cannot open '" + path + "'");
  auto bad = [&](const std::string &what) {
    return absl::InvalidArgumentError("'" + path +
                                      "' is not a valid .npy file: " + what);
  };
  char prefix[12] = {};
  in.read(prefix, sizeof prefix);
  if (in.gcount() < 10 || std::memcmp(prefix, kMagic, 6) != 0)
    return bad("no NUMPY magic");
  const int major = static_cast<unsigned char>(prefix[6]);
  size_t headerLength, headerStart;
  if (major == 1) {
    headerLength = static_cast<unsigned char>(prefix[8]) |
                   static_cast<unsigned char>(prefix[9]) << 8;
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (in.gcount() < 12)
      return bad("truncated header");
    headerLength = 0;
    for (int i = 0; i < 4; ++i)
      headerLength |= size_t(static_cast<unsigned char>(prefix[8 + i]))
                      << (8 * i);
    headerStart = 12;
  } else {
    return bad("format version " + std::to_string(major));
  }
  if (headerLength > (size_t(1) << 24))
    return bad("a header of " + std::to_string(headerLength) + " bytes");
  std::string text(headerLength, '\0');
  in.clear();
  in.seekg(static_cast<std::streamoff>(headerStart));
  in.read(text.data(), static_cast<std::streamsize>(headerLength));
  if (static_cast<size_t>(in.gcount()) != headerLength)
    return bad("truncated header");

  std::string descr = headerValue(text, "descr");
  if (descr.size() < 2 || (descr.front() != '\'' && descr.front() != '"'))
    return bad("no dtype in the header");
  descr = descr.substr(1, descr.size() - 2);
  if (headerValue(text, "fortran_order") != "False")
    return absl::InvalidArgumentError(
        "'" + path +
        "' is in Fortran order; save it in C order "
        "(numpy.ascontiguousarray)");
  std::string shapeText = headerValue(text, "shape");
  if (shapeText.size() < 2 || shapeText.front() != '(' ||
      shapeText.back() != ')')
    return bad("no shape in the header");
  header.shape.clear();
  std::stringstream dims(shapeText.substr(1, shapeText.size() - 2));
  std::string dim;
  while (std::getline(dims, dim, ',')) {
    size_t first = dim.find_first_not_of(" \t");
    if (first == std::string::npos)
      continue;
    int64_t size = 0;
    if (!absl::SimpleAtoi(dim, &size))
      return bad("shape " + shapeText);
    header.shape.push_back(size);
  }
  int64_t n = checkedElementCount(header.shape);
  if (n < 0)
    return bad("shape " + shapeText);
  if (descr.size() < 3 || descr[0] == '>')
    return absl::InvalidArgumentError(
        "'" + path + "' has dtype '" + descr +
        "'; only little-endian numeric arrays are supported");
  const Kind *kind = kindOf(descr);
  if (!kind)
    return absl::InvalidArgumentError(
        "'" + path + "' has dtype '" + descr +
        "'; supported are float, int, uint and bool arrays");
  header.dtype = descr;
  header.elementSize = kind->size;
  header.dataOffset = headerStart + headerLength;
  in.seekg(0, std::ios::end);
  const auto size = static_cast<size_t>(in.tellg());
  if (size - std::min(size, header.dataOffset) < size_t(n) * kind->size)
    return bad("truncated data (" + std::to_string(n) + " elements of " +
               descr + " expected)");
  return absl::OkStatus();
}

absl::Status readNpy(const std::string &path, NpyArray &array) {
  NpyHeader header;
  PPC_RETURN_IF_ERROR(readNpyHeader(path, header));
  const int64_t n = checkedElementCount(header.shape);
  std::string bytes(size_t(n) * header.elementSize, '\0');
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(header.dataOffset));
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (static_cast<size_t>(in.gcount()) != bytes.size())
    return absl::InvalidArgumentError("cannot read '" + path + "'");
  array.shape = header.shape;
  array.dtype = header.dtype;
  array.data.assign(n, 0.0f);
  convertNpyElements(header.dtype, bytes.data(), n, array.data.data());
  return absl::OkStatus();
}

absl::Status writeNpy(const std::string &path,
                      const std::vector<int64_t> &shape, const float *data) {
  std::string shapeText = "(";
  int64_t n = 1;
  for (int64_t d : shape) {
    shapeText += std::to_string(d) + ", ";
    n *= d;
  }
  if (shape.size() > 1)
    shapeText.resize(shapeText.size() - 2);
  else if (shape.size() == 1)
    shapeText.pop_back(); // "(3,)"
  shapeText += ")";
  std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': " + shapeText + ", }";
  // Magic, version and length take 10 bytes; the data starts 64-aligned.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out)
    return absl::InvalidArgumentError("cannot open '" + path + "' for writing");
  out.write(kMagic, 6);
  const char version[2] = {1, 0};
  out.write(version, 2);
  const unsigned char length[2] = {
      static_cast<unsigned char>(header.size() & 0xff),
      static_cast<unsigned char>(header.size() >> 8)};
  out.write(reinterpret_cast<const char *>(length), 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char *>(data),
            static_cast<std::streamsize>(n * sizeof(float)));
  out.close();
  if (!out)
    return absl::InvalidArgumentError("cannot write '" + path + "'");
  return absl::OkStatus();
}

} // namespace ppc::runtime
