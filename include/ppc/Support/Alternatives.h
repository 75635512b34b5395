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

/// The entry of `list` whose `name` is `name` (a list of named choices:
/// baselines, recompute modes, context exchanges), or null.
template <typename Info>
const Info *findByName(const std::vector<Info> &list, const std::string &name) {
  for (const Info &info : list)
    if (name == info.name)
      return &info;
  return nullptr;
}

/// listAlternatives of the names of `list`'s entries.
template <typename Info> std::string listNames(const std::vector<Info> &list) {
  std::vector<std::string> names;
  for (const Info &info : list)
    names.push_back(info.name);
  return listAlternatives(names);
}

} // namespace ppc

#endif // PPC_SUPPORT_ALTERNATIVES_H
