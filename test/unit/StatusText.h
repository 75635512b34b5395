//===- StatusText.h - absl::Status as text in tests ------------*- C++ -*-===//
//
// Tests compare what a call returned with "" (OK) or search its message:
// statusText gives "" for OK and the message otherwise, and never "" for an
// error (one without a message reads "error without a message"), so
// EXPECT_EQ(statusText(call()), "") fails, printing the message, exactly
// when the call failed.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_TEST_UNIT_STATUSTEXT_H
#define PPC_TEST_UNIT_STATUSTEXT_H

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <string>

namespace ppc::test {

inline std::string statusText(const absl::Status &status) {
  if (status.ok())
    return "";
  if (status.message().empty())
    return "error without a message";
  return std::string(status.message());
}

/// statusText of a StatusOr's status: "" when it holds a value.
template <typename T>
std::string statusText(const absl::StatusOr<T> &statusOr) {
  return statusText(statusOr.status());
}

} // namespace ppc::test

#endif // PPC_TEST_UNIT_STATUSTEXT_H
