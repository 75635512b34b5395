//===- DType.h - element types of runtime buffers ---------------*- C++ -*-===//
//
// MLIR-free. The element types a backend stores a buffer in, as the plan
// names them (Tensor.dtype): f32, bf16, f16, and i64 for every integer type
// (labels, indices). A plan's f64 tensors run in f32. (The simulator's
// ppc::DType is another list: the rate classes of a device, tf32 and f8
// among them.) Conversions from f32
// round to nearest even, as IEEE arithmetic and PyTorch's casts do; NaN stays
// NaN and overflow goes to infinity.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_DTYPE_H
#define PPC_RUNTIME_DTYPE_H

#include "ppc/Runtime/HostDevice.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

namespace ppc::runtime {

enum class DType : uint8_t { F32, BF16, F16, I64 };

struct DTypeInfo {
  DType dtype;
  const char *name;
  int bytes;
  /// --verify's default relative tolerance for a plan computing in this type
  /// (the largest over its tensors'): float32 round-off, else a few units
  /// in the last place of a 16-bit float compounded over a training step.
  double verifyTolerance;
  /// --verify's error floor, as a fraction of the largest |value| among
  /// tensors of a kind: values that cancel to rounding noise (a bias before
  /// batch norm) have no scale of their own, and 16-bit sums leave more.
  double verifyFloor;
};

/// Every storage type: the one list that the plan reader, the backends and
/// the docs follow.
inline constexpr DTypeInfo kDTypes[] = {
    {DType::F32, "f32", 4, 1e-4, 0.01},
    {DType::BF16, "bf16", 2, 5e-2, 0.05},
    {DType::F16, "f16", 2, 1e-2, 0.05},
    {DType::I64, "i64", 8, 1e-4, 0.01},
};

inline const DTypeInfo &dtypeInfo(DType dtype) {
  return kDTypes[static_cast<int>(dtype)];
}
inline int dtypeBytes(DType dtype) { return dtypeInfo(dtype).bytes; }
inline const char *dtypeName(DType dtype) { return dtypeInfo(dtype).name; }
inline bool isFloat16(DType dtype) {
  return dtype == DType::BF16 || dtype == DType::F16;
}

/// The storage type of a plan tensor's dtype ("f32", "bf16", "i64", "ui8",
/// ...): false for none (f8, complex).
inline bool storageDType(const std::string &planDType, DType &out) {
  if (planDType == "f32" || planDType == "f64") {
    out = DType::F32;
    return true;
  }
  if (planDType == "bf16" || planDType == "f16") {
    out = planDType == "bf16" ? DType::BF16 : DType::F16;
    return true;
  }
  size_t digits = planDType.rfind('i');
  if (digits == std::string::npos || digits + 1 >= planDType.size() ||
      planDType.find_first_not_of("0123456789", digits + 1) !=
          std::string::npos ||
      planDType.substr(0, digits).find_first_not_of("us") != std::string::npos)
    return false;
  out = DType::I64;
  return true;
}

// The scalar conversions are PPC_HD: the cuda backend's kernels round with
// the same code as the cpu backend.
PPC_HD inline uint32_t floatBits(float value) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(value);
#else
  uint32_t x;
  std::memcpy(&x, &value, 4);
  return x;
#endif
}
PPC_HD inline float bitsFloat(uint32_t x) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(x);
#else
  float value;
  std::memcpy(&value, &x, 4);
  return value;
#endif
}

PPC_HD inline uint16_t floatToBFloat16(float value) {
  const uint32_t x = floatBits(value);
  if ((x & 0x7fffffff) > 0x7f800000) // NaN: keep it quiet
    return static_cast<uint16_t>((x >> 16) | 0x40);
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}
PPC_HD inline float bfloat16ToFloat(uint16_t bits) {
  return bitsFloat(static_cast<uint32_t>(bits) << 16);
}

PPC_HD inline uint16_t floatToHalf(float value) {
  const uint32_t x = floatBits(value);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t magnitude = x & 0x7fffffff;
  if (magnitude > 0x7f800000) // NaN
    return static_cast<uint16_t>(sign | 0x7e00);
  if (magnitude >= 0x477ff000) // rounds to at least 65536: infinity
    return static_cast<uint16_t>(sign | 0x7c00);
  if (magnitude < 0x38800000) {                    // a subnormal half (or zero)
    float scaled = std::fabs(value) * 16777216.0f; // 2^24: units of 2^-24
    return static_cast<uint16_t>(sign |
                                 static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  uint32_t rounded = magnitude + 0xfff + ((magnitude >> 13) & 1);
  return static_cast<uint16_t>(sign | ((rounded - 0x38000000) >> 13));
}
PPC_HD inline float halfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1f;
  const uint32_t mantissa = bits & 0x3ff;
  if (exponent == 0) { // zero or subnormal: mantissa * 2^-24
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31)
    return bitsFloat(sign | 0x7f800000 | (mantissa << 13));
  return bitsFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

/// `n` elements of type `dtype` at `data` to float (i64: as a float).
void toFloat(DType dtype, const void *data, int64_t n, float *out);
/// `n` floats into `n` elements of type `dtype` (i64: rounded to nearest).
void fromFloat(DType dtype, const float *in, int64_t n, void *data);
/// Rounds `n` floats to the nearest value of `dtype` in place (f32: none).
void roundToDType(DType dtype, float *values, int64_t n);

} // namespace ppc::runtime

#endif // PPC_RUNTIME_DTYPE_H
