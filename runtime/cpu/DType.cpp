//===- DType.cpp - conversions between float and storage types -----------===//

#include "ppc/Runtime/DType.h"

#include <cmath>
#include <cstring>

namespace ppc::runtime {

void toFloat(DType dtype, const void *data, int64_t n, float *out) {
  switch (dtype) {
  case DType::F32:
    std::memmove(out, data, n * sizeof(float));
    return;
  case DType::BF16: {
    const uint16_t *in = static_cast<const uint16_t *>(data);
    for (int64_t i = 0; i < n; ++i)
      out[i] = bfloat16ToFloat(in[i]);
    return;
  }
  case DType::F16: {
    const uint16_t *in = static_cast<const uint16_t *>(data);
    for (int64_t i = 0; i < n; ++i)
      out[i] = halfToFloat(in[i]);
    return;
  }
  case DType::I64: {
    const int64_t *in = static_cast<const int64_t *>(data);
    for (int64_t i = 0; i < n; ++i)
      out[i] = static_cast<float>(in[i]);
    return;
  }
  }
}

void fromFloat(DType dtype, const float *in, int64_t n, void *data) {
  switch (dtype) {
  case DType::F32:
    std::memmove(data, in, n * sizeof(float));
    return;
  case DType::BF16: {
    uint16_t *out = static_cast<uint16_t *>(data);
    for (int64_t i = 0; i < n; ++i)
      out[i] = floatToBFloat16(in[i]);
    return;
  }
  case DType::F16: {
    uint16_t *out = static_cast<uint16_t *>(data);
    for (int64_t i = 0; i < n; ++i)
      out[i] = floatToHalf(in[i]);
    return;
  }
  case DType::I64: {
    int64_t *out = static_cast<int64_t *>(data);
    for (int64_t i = 0; i < n; ++i)
      out[i] = std::isfinite(in[i]) ? std::llround(in[i]) : 0;
    return;
  }
  }
}

void roundToDType(DType dtype, float *values, int64_t n) {
  switch (dtype) {
  case DType::BF16:
    for (int64_t i = 0; i < n; ++i)
      values[i] = bfloat16ToFloat(floatToBFloat16(values[i]));
    return;
  case DType::F16:
    for (int64_t i = 0; i < n; ++i)
      values[i] = halfToFloat(floatToHalf(values[i]));
    return;
  default:
    return;
  }
}

} // namespace ppc::runtime
