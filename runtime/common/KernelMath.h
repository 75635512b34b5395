//===- KernelMath.h - float math the backends' kernels share ----*- C++ -*-===//
//
// Private to the backends (runtime/cpu, runtime/cuda). Approximations the
// cpu kernels vectorize and the cuda kernels run as they are, PPC_HD, so
// both backends round alike.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_RUNTIME_COMMON_KERNELMATH_H
#define PPC_RUNTIME_COMMON_KERNELMATH_H

#include "ppc/Runtime/DType.h"
#include "ppc/Runtime/HostDevice.h"

#include <cmath>
#include <cstdint>

namespace ppc::runtime {

/// e^x for the softmax family's x <= 0 (any x works): Cephes' expf (x = n
/// ln 2 + r, a degree-7 polynomial in r, 2^n from the exponent bits), plain
/// arithmetic that the compiler vectorizes, where libm's expf is a call per
/// element. Within 2 ulp of e^x on [-86.64, 88.37]; 0 below, +inf above,
/// NaN for NaN. The low bound keeps 2^n >= 2^-125, so that no lane, not
/// even one whose result is then replaced by 0, computes with denormals,
/// which cost x86 cores a hundred cycles each (a causal mask's -1e9
/// scores all land there).
PPC_HD inline float softmaxExp(float x) {
  constexpr float kHi = 88.3762626647949f, kLo = -86.64f;
  const bool nan = !(x == x);
  float c = x > kHi ? kHi : (x < kLo ? kLo : x);
  c = nan ? 0.0f : c;
  // Round to nearest: adding and taking away 1.5 * 2^23.
  const float n = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = c - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  const float scale = bitsFloat(static_cast<uint32_t>(bits));
  float y = p * scale;
  y = x < kLo ? 0.0f : y;
  y = x > kHi ? bitsFloat(0x7f800000u) : y;
  return nan ? x : y;
}

/// erfc(z) for z >= 0 in float, vectorizable: Numerical Recipes' Chebyshev
/// fit, t e^(-z^2 + P(t)) with t = 1 / (1 + z / 2), fractional error below
/// 1.2e-7 in exact arithmetic (a few float ulp here) at every z, so
/// 1 + erf(-z) = erfc(z) keeps its precision far into the tail.
PPC_HD inline float erfcNonNegative(float z) {
  const float t = 1.0f / (1.0f + 0.5f * z);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  return t * softmaxExp(p - z * z);
}

} // namespace ppc::runtime

#endif // PPC_RUNTIME_COMMON_KERNELMATH_H
