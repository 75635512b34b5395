//===- JsonReader.h - strict reading of JSON objects ------------*- C++ -*-===//
//
// Header-only, shared by ppc's JSON readers (machines, profiles, strategies).
// Every read returns absl::Status or StatusOr: an error is InvalidArgument
// with the message "<path>: <problem>" (the path in the document, e.g.
// "cluster.device.memory_bytes"), and the reader's boundary adds the file
// name in front (ppc::annotate), so the user reads
// "<file>: <path>: <problem>". nlohmann's exceptions stop at parseJson.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SUPPORT_JSONREADER_H
#define PPC_SUPPORT_JSONREADER_H

#include "ppc/Support/Status.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>

namespace ppc::json_reader {

using json = nlohmann::json;

/// "<path>: <problem>", InvalidArgument; the top level is "(top level)".
inline absl::Status jsonError(std::string_view path, std::string_view problem) {
  std::string message(path.empty() ? "(top level)" : path);
  message += ": ";
  message += problem;
  return absl::InvalidArgumentError(message);
}

/// "<key>[<i>]", the path of an array element.
inline std::string indexed(const std::string &key, size_t i) {
  return key + "[" + std::to_string(i) + "]";
}

/// A JSON object being read: checks types, tracks the path, and rejects keys
/// nobody asked for (a misspelt key must not go unnoticed).
class ObjectReader {
public:
  /// The reader of `value`, which must be an object.
  static absl::StatusOr<ObjectReader> open(const json &value,
                                           std::string path) {
    if (!value.is_object())
      return jsonError(path, "must be an object");
    return ObjectReader(value, std::move(path));
  }

  std::string at(const std::string &key) const {
    return path.empty() ? key : path + "." + key;
  }
  bool has(const std::string &key) const { return value.contains(key); }

  absl::StatusOr<const json *> get(const std::string &key) {
    seen.insert(key);
    auto it = value.find(key);
    if (it == value.end())
      return jsonError(at(key), "missing");
    return &*it;
  }

  /// The object under `key`, read in turn.
  absl::StatusOr<ObjectReader> getObject(const std::string &key) {
    PPC_ASSIGN_OR_RETURN(const json *v, get(key));
    return open(*v, at(key));
  }

  /// The array under `key`.
  absl::StatusOr<const json *> getArray(const std::string &key) {
    PPC_ASSIGN_OR_RETURN(const json *v, get(key));
    if (!v->is_array())
      return jsonError(at(key), "must be an array");
    return v;
  }

  absl::StatusOr<std::string> getString(const std::string &key) {
    PPC_ASSIGN_OR_RETURN(const json *v, get(key));
    if (!v->is_string())
      return jsonError(at(key), "must be a string");
    return v->get<std::string>();
  }
  absl::StatusOr<std::string> getString(const std::string &key,
                                        std::string dflt) {
    if (!has(key))
      return dflt;
    return getString(key);
  }
  absl::StatusOr<std::string> getNonEmptyString(const std::string &key) {
    PPC_ASSIGN_OR_RETURN(std::string s, getString(key));
    if (s.empty())
      return jsonError(at(key), "must not be empty");
    return s;
  }

  absl::StatusOr<int64_t> getInt(const std::string &key) {
    PPC_ASSIGN_OR_RETURN(const json *v, get(key));
    if (!v->is_number_integer())
      return jsonError(at(key), "must be an integer");
    // nlohmann keeps integers above INT64_MAX unsigned; get<int64_t> would
    // wrap them to negative numbers.
    if (v->is_number_unsigned() && v->get<uint64_t>() > INT64_MAX)
      return jsonError(at(key), "must be less than 2^63");
    return v->get<int64_t>();
  }
  absl::StatusOr<int64_t> getInt(const std::string &key, int64_t dflt) {
    if (!has(key))
      return dflt;
    return getInt(key);
  }

  absl::StatusOr<bool> getBool(const std::string &key, bool dflt) {
    if (!has(key))
      return dflt;
    PPC_ASSIGN_OR_RETURN(const json *v, get(key));
    if (!v->is_boolean())
      return jsonError(at(key), "must be true or false");
    return v->get<bool>();
  }

  absl::StatusOr<double> getNumber(const std::string &key) {
    PPC_ASSIGN_OR_RETURN(const json *v, get(key));
    if (!v->is_number())
      return jsonError(at(key), "must be a number");
    return v->get<double>();
  }

  /// Call once every key has been read: anything left is a typo.
  absl::Status finish() const {
    for (auto it = value.begin(); it != value.end(); ++it)
      if (!seen.count(it.key()))
        return jsonError(at(it.key()), "unknown key");
    return absl::OkStatus();
  }

private:
  ObjectReader(const json &value, std::string path)
      : value(value), path(std::move(path)) {}

  const json &value;
  std::string path;
  std::set<std::string> seen;
};

/// Parses `text`; an error is "<fileName>: invalid JSON: <what and where>".
inline absl::StatusOr<json> parseJson(std::string_view text,
                                      const std::string &fileName) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception &e) {
    // Not only parse_error: a number too large for a double ("1e999") is an
    // out_of_range. e.what() is "[json.exception.parse_error.101] parse
    // error at line...".
    std::string what = e.what();
    size_t start = what.find("] ");
    return absl::InvalidArgumentError(
        fileName + ": invalid JSON: " +
        (start == std::string::npos ? what : what.substr(start + 2)));
  }
}

/// The text of the file at `path`; NotFound when it cannot be opened.
inline absl::StatusOr<std::string> readTextFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::NotFoundError(path + ": cannot open the file");
  std::stringstream buffer;
  buffer << in.rdbuf();
  if (in.bad())
    return absl::InternalError(path + ": cannot read the file");
  return buffer.str();
}

} // namespace ppc::json_reader

#endif // PPC_SUPPORT_JSONREADER_H
