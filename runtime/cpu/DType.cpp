//===- DType.cpp - conversions between float and storage types -----------===//

#include "ppc/Runtime/DType.h"

#include "KernelHelpers.h"

#include <cmath>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define PPC_HAVE_F16C_PATH 1
#endif

namespace ppc::runtime {

namespace {

// The widening loops every kernel of a 16-bit plan runs on its operands:
// bf16 is integer arithmetic that vectorizes (AVX2 clones); f16 uses the
// F16C instructions where the CPU has them (every AVX2 CPU does), which
// round to nearest even like floatToHalf.
PPC_VECTOR_CLONES void bf16ToFloat(const uint16_t *in, int64_t n, float *out) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = bfloat16ToFloat(in[i]);
}

PPC_VECTOR_CLONES void floatToBf16(const float *in, int64_t n, uint16_t *out) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t x;
    std::memcpy(&x, in + i, 4);
    const uint32_t rounded = (x + 0x7fff + ((x >> 16) & 1)) >> 16;
    const uint32_t quiet = (x >> 16) | 0x40;
    out[i] =
        static_cast<uint16_t>((x & 0x7fffffff) > 0x7f800000 ? quiet : rounded);
  }
}

#ifdef PPC_HAVE_F16C_PATH
__attribute__((target("avx,f16c"))) void f16ToFloatF16c(const uint16_t *in,
                                                        int64_t n, float *out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(
                                  reinterpret_cast<const __m128i *>(in + i))));
  for (; i < n; ++i)
    out[i] = halfToFloat(in[i]);
}

__attribute__((target("avx,f16c"))) void
floatToF16F16c(const float *in, int64_t n, uint16_t *out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(
        reinterpret_cast<__m128i *>(out + i),
        _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i)
    out[i] = floatToHalf(in[i]);
}

bool hasF16c() {
  static const bool has = __builtin_cpu_supports("f16c");
  return has;
}
#endif

} // namespace

void toFloat(DType dtype, const void *data, int64_t n, float *out) {
  switch (dtype) {
  case DType::F32:
    std::memmove(out, data, n * sizeof(float));
    return;
  case DType::BF16:
    bf16ToFloat(static_cast<const uint16_t *>(data), n, out);
    return;
  case DType::F16: {
    const uint16_t *in = static_cast<const uint16_t *>(data);
#ifdef PPC_HAVE_F16C_PATH
    if (hasF16c())
      return f16ToFloatF16c(in, n, out);
#endif
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
  case DType::BF16:
    floatToBf16(in, n, static_cast<uint16_t *>(data));
    return;
  case DType::F16: {
    uint16_t *out = static_cast<uint16_t *>(data);
#ifdef PPC_HAVE_F16C_PATH
    if (hasF16c())
      return floatToF16F16c(in, n, out);
#endif
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
