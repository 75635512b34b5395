//===- CheckedMath.h - int64 arithmetic that reports overflow ---*- C++ -*-===//
//
// Sizes, degrees, volumes, device counts and strides come from user input
// (MLIR text, JSON files, plan files) and are multiplied together all over
// ppc. A product that wraps around silently turns into a negative or zero
// size, and from there into a crash or a nonsense prediction. Every such
// product goes through these helpers, which return nullopt instead of
// wrapping, so that callers can reject the input with a clear error.
//
// Header-only and MLIR-free: the dialects, simulator, search and runtime all
// include it.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SUPPORT_CHECKEDMATH_H
#define PPC_SUPPORT_CHECKEDMATH_H

#include <cstdint>
#include <optional>

namespace ppc {

/// a * b, or nullopt when it does not fit in int64.
inline std::optional<int64_t> checkedMul(int64_t a, int64_t b) {
  int64_t result;
  if (__builtin_mul_overflow(a, b, &result))
    return std::nullopt;
  return result;
}

/// a + b, or nullopt when it does not fit in int64.
inline std::optional<int64_t> checkedAdd(int64_t a, int64_t b) {
  int64_t result;
  if (__builtin_add_overflow(a, b, &result))
    return std::nullopt;
  return result;
}

/// The product of `values` (1 when empty), or nullopt when it, or a partial
/// product, does not fit in int64.
template <typename Range>
std::optional<int64_t> checkedProduct(const Range &values) {
  int64_t product = 1;
  for (int64_t v : values)
    if (__builtin_mul_overflow(product, v, &product))
      return std::nullopt;
  return product;
}

} // namespace ppc

#endif // PPC_SUPPORT_CHECKEDMATH_H
