//===- Alternatives.h - "a, b or c" for messages ----------------*- C++ -*-===//
//
// MLIR-free, header-only (the runtime uses it without linking PPCSupport):
// the one way ppc's messages list what a value may be.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SUPPORT_ALTERNATIVES_H
#define PPC_SUPPORT_ALTERNATIVES_H

#include <string>
#include <vector>

namespace ppc {

/// "a", "a or b", "a, b or c".
inline std::string listAlternatives(const std::vector<std::string> &items) {
  std::string text;
  for (size_t i = 0; i < items.size(); ++i)
    text += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + items[i];
  return text;
}

/// listAlternatives of `values` as numbers: "1, 2 or 4".
template <typename T>
std::string listAlternatives(const std::vector<T> &values) {
  std::vector<std::string> items;
  for (const T &value : values)
    items.push_back(std::to_string(value));
  return listAlternatives(items);
}

} // namespace ppc

#endif // PPC_SUPPORT_ALTERNATIVES_H
