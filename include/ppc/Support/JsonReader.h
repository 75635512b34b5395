//===- JsonReader.h - strict reading of JSON objects ------------*- C++ -*-===//
//
// Header-only, shared by ppc's JSON readers (machines, profiles, strategies):
// errors are thrown as JsonError (path, problem) and caught at the reader's
// boundary, which turns them into "<file>: <path>: <problem>". Only code
// built with exceptions uses it (the MLIR-free libraries).
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SUPPORT_JSONREADER_H
#define PPC_SUPPORT_JSONREADER_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace ppc::json_reader {

struct JsonError {
  std::string path;
  std::string message;
};

/// A JSON object being read: checks types, tracks the path, and rejects keys
/// nobody asked for (a misspelt key must not go unnoticed).
class ObjectReader {
public:
  using json = nlohmann::json;

  ObjectReader(const json &value, std::string path)
      : value(value), path(std::move(path)) {
    if (!value.is_object())
      throw JsonError{this->path.empty() ? "(top level)" : this->path,
                      "must be an object"};
  }

  std::string at(const std::string &key) const {
    return path.empty() ? key : path + "." + key;
  }
  bool has(const std::string &key) const { return value.contains(key); }

  const json &get(const std::string &key) {
    seen.insert(key);
    auto it = value.find(key);
    if (it == value.end())
      throw JsonError{at(key), "missing"};
    return *it;
  }

  std::string getString(const std::string &key) {
    const json &v = get(key);
    if (!v.is_string())
      throw JsonError{at(key), "must be a string"};
    return v.get<std::string>();
  }
  std::string getString(const std::string &key, std::string dflt) {
    return has(key) ? getString(key) : dflt;
  }
  std::string getNonEmptyString(const std::string &key) {
    std::string s = getString(key);
    if (s.empty())
      throw JsonError{at(key), "must not be empty"};
    return s;
  }

  int64_t getInt(const std::string &key) {
    const json &v = get(key);
    if (!v.is_number_integer())
      throw JsonError{at(key), "must be an integer"};
    // nlohmann keeps integers above INT64_MAX unsigned; get<int64_t> would
    // wrap them to negative numbers.
    if (v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX)
      throw JsonError{at(key), "must be less than 2^63"};
    return v.get<int64_t>();
  }
  int64_t getInt(const std::string &key, int64_t dflt) {
    return has(key) ? getInt(key) : dflt;
  }

  bool getBool(const std::string &key, bool dflt) {
    if (!has(key))
      return dflt;
    const json &v = get(key);
    if (!v.is_boolean())
      throw JsonError{at(key), "must be true or false"};
    return v.get<bool>();
  }

  double getNumber(const std::string &key) {
    const json &v = get(key);
    if (!v.is_number())
      throw JsonError{at(key), "must be a number"};
    return v.get<double>();
  }

  /// Call once every key has been read: anything left is a typo.
  void finish() const {
    for (auto it = value.begin(); it != value.end(); ++it)
      if (!seen.count(it.key()))
        throw JsonError{at(it.key()), "unknown key"};
  }

private:
  const json &value;
  std::string path;
  std::set<std::string> seen;
};

/// Parses `text`, or sets `error` to "<fileName>: invalid JSON: <what and
/// where>" and returns nullopt.
inline std::optional<nlohmann::json> parseJson(std::string_view text,
                                               const std::string &fileName,
                                               std::string &error) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception &e) {
    // Not only parse_error: a number too large for a double ("1e999") is an
    // out_of_range. e.what() is "[json.exception.parse_error.101] parse
    // error at line...".
    std::string what = e.what();
    size_t start = what.find("] ");
    error = fileName + ": invalid JSON: " +
            (start == std::string::npos ? what : what.substr(start + 2));
    return std::nullopt;
  }
}

} // namespace ppc::json_reader

#endif // PPC_SUPPORT_JSONREADER_H
