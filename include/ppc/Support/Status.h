//===- Status.h - ppc's error style outside MLIR ----------------*- C++ -*-===//
//
// Outside MLIR (the runtime, the simulator, the search and the tools) a
// function that can fail returns absl::Status or absl::StatusOr<T>. The
// message is what the user reads: it names what is wrong and where, and
// callers add context in front of it (annotate) instead of wrapping it in a
// message of their own. The code says what kind of failure it is:
// InvalidArgument for bad input (a plan, a file, a flag), NotFound for a
// missing file, DataLoss for a truncated or corrupt one, ResourceExhausted
// for memory, Unavailable for a peer that is gone, Internal for a library
// call that failed. Tools print message(), never ToString(), so the code
// never shows in what the user reads.
//
// Header-only and MLIR-free; targets that include it link absl::status.
//
//===----------------------------------------------------------------------===//

#ifndef PPC_SUPPORT_STATUS_H
#define PPC_SUPPORT_STATUS_H

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <string>
#include <string_view>
#include <utility>

namespace ppc {

/// `status` with "`context`: " in front of its message and the same code;
/// an OK status stays OK.
inline absl::Status annotate(const absl::Status &status,
                             std::string_view context) {
  if (status.ok())
    return status;
  std::string message(context);
  message += ": ";
  message.append(status.message().data(), status.message().size());
  return absl::Status(status.code(), message);
}

/// `status` with `text` after its message ("... (instruction 4 of rank 0)")
/// and the same code; an OK status stays OK.
inline absl::Status appendToMessage(const absl::Status &status,
                                    std::string_view text) {
  if (status.ok())
    return status;
  std::string message(status.message().data(), status.message().size());
  message += text;
  return absl::Status(status.code(), message);
}

/// `status` with its message replaced by `message` and the same code.
inline absl::Status withMessage(const absl::Status &status,
                                std::string message) {
  if (status.ok())
    return status;
  return absl::Status(status.code(), message);
}

/// The message of `status` as a string ("" when OK), for printing.
inline std::string messageOf(const absl::Status &status) {
  return std::string(status.message());
}

} // namespace ppc

/// Returns the status of `expr` from the enclosing function when it is an
/// error (the enclosing function returns absl::Status or a StatusOr).
#define PPC_RETURN_IF_ERROR(expr)                                              \
  do {                                                                         \
    if (::absl::Status ppc_status_ = (expr); !ppc_status_.ok())                \
      return ppc_status_;                                                      \
  } while (false)

#define PPC_STATUS_CONCAT_INNER_(a, b) a##b
#define PPC_STATUS_CONCAT_(a, b) PPC_STATUS_CONCAT_INNER_(a, b)

/// Evaluates `expr` (a StatusOr); on error returns its status from the
/// enclosing function, else moves its value into `lhs`, which may declare a
/// variable ("PPC_ASSIGN_OR_RETURN(int64_t n, reader.getInt(key));"). `lhs`
/// must not contain a top-level comma.
#define PPC_ASSIGN_OR_RETURN(lhs, expr)                                        \
  PPC_ASSIGN_OR_RETURN_IMPL_(PPC_STATUS_CONCAT_(ppc_statusor_, __LINE__), lhs, \
                             expr)
#define PPC_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr)                        \
  auto statusor = (expr);                                                      \
  if (!statusor.ok())                                                          \
    return std::move(statusor).status();                                       \
  lhs = *std::move(statusor)

#endif // PPC_SUPPORT_STATUS_H
