// Status and StatusOr<T>: how errors cross layers in ecoserve.
//
// A Status is a code plus a human-readable message that names what is wrong
// ("gguf: tensor 'blk.0.attn_q.weight' data [1024, 4096) past end of file (2000 bytes)").
// Exceptions never cross a layer; functions that can fail return Status or StatusOr.
// Thread-compatible value types.
#pragma once

#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace ecoserve {

enum class StatusCode {
  kOk = 0,
  kCancelled,
  kInvalidArgument,
  kDeadlineExceeded,
  kNotFound,
  kAlreadyExists,
  kPermissionDenied,
  kResourceExhausted,
  kFailedPrecondition,
  kOutOfRange,
  kUnimplemented,
  kInternal,
  kUnavailable,
  kDataLoss,
  kUnauthenticated,
};

std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message", or "OK".
  std::string to_string() const;
  // Returns a copy whose message is "prefix: message".
  Status with_prefix(std::string_view prefix) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status ok_status() { return Status(); }

#define ECOSERVE_STATUS_FACTORY(fn, code)                                        \
  template <typename... Args>                                                    \
  Status fn(fmt::format_string<Args...> f, Args&&... args) {                     \
    return Status(StatusCode::code, fmt::format(f, std::forward<Args>(args)...)); \
  }
ECOSERVE_STATUS_FACTORY(cancelled_error, kCancelled)
ECOSERVE_STATUS_FACTORY(invalid_argument_error, kInvalidArgument)
ECOSERVE_STATUS_FACTORY(deadline_exceeded_error, kDeadlineExceeded)
ECOSERVE_STATUS_FACTORY(not_found_error, kNotFound)
ECOSERVE_STATUS_FACTORY(already_exists_error, kAlreadyExists)
ECOSERVE_STATUS_FACTORY(permission_denied_error, kPermissionDenied)
ECOSERVE_STATUS_FACTORY(resource_exhausted_error, kResourceExhausted)
ECOSERVE_STATUS_FACTORY(failed_precondition_error, kFailedPrecondition)
ECOSERVE_STATUS_FACTORY(out_of_range_error, kOutOfRange)
ECOSERVE_STATUS_FACTORY(unimplemented_error, kUnimplemented)
ECOSERVE_STATUS_FACTORY(internal_error, kInternal)
ECOSERVE_STATUS_FACTORY(unavailable_error, kUnavailable)
ECOSERVE_STATUS_FACTORY(data_loss_error, kDataLoss)
ECOSERVE_STATUS_FACTORY(unauthenticated_error, kUnauthenticated)
#undef ECOSERVE_STATUS_FACTORY

// Holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : v_(status) { check_not_ok(); }  // NOLINT
  StatusOr(Status&& status) : v_(std::move(status)) { check_not_ok(); }  // NOLINT
  StatusOr(const T& value) : v_(value) {}  // NOLINT
  StatusOr(T&& value) : v_(std::move(value)) {}  // NOLINT
  template <typename U,
            typename = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                        !std::is_same_v<std::decay_t<U>, Status> &&
                                        !std::is_same_v<std::decay_t<U>, StatusOr>>>
  StatusOr(U&& value) : v_(T(std::forward<U>(value))) {}  // NOLINT

  bool ok() const { return v_.index() == 1; }
  Status status() const { return ok() ? Status() : std::get<0>(v_); }

  T& value() & { check_ok(); return std::get<1>(v_); }
  const T& value() const& { check_ok(); return std::get<1>(v_); }
  T&& value() && { check_ok(); return std::get<1>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void check_not_ok() const;
  void check_ok() const;
  std::variant<Status, T> v_;
};

[[noreturn]] void check_failed(const char* file, int line, const char* expr, const std::string& msg);

template <typename T>
void StatusOr<T>::check_not_ok() const {
  if (std::get<0>(v_).ok()) check_failed(__FILE__, __LINE__, "!status.ok()", "StatusOr built from OK status");
}
template <typename T>
void StatusOr<T>::check_ok() const {
  if (!ok()) check_failed(__FILE__, __LINE__, "ok()", "StatusOr::value() on error: " + std::get<0>(v_).to_string());
}

}  // namespace ecoserve

#define ECO_CONCAT_INNER(a, b) a##b
#define ECO_CONCAT(a, b) ECO_CONCAT_INNER(a, b)

// Returns from the current function when `expr` (a Status) is not OK.
#define ECO_RETURN_IF_ERROR(expr)                       \
  do {                                                  \
    ::ecoserve::Status eco_status_ = (expr);            \
    if (!eco_status_.ok()) return eco_status_;          \
  } while (0)

// `lhs = value of expr` (a StatusOr), or returns its Status.
#define ECO_ASSIGN_OR_RETURN(lhs, expr) \
  ECO_ASSIGN_OR_RETURN_IMPL(ECO_CONCAT(eco_statusor_, __LINE__), lhs, expr)
#define ECO_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

// For broken invariants only (never for bad input): prints and aborts.
#define ECO_CHECK(cond)                                                          \
  do {                                                                           \
    if (!(cond)) ::ecoserve::check_failed(__FILE__, __LINE__, #cond, "");       \
  } while (0)
#define ECO_CHECK_MSG(cond, ...)                                                           \
  do {                                                                                     \
    if (!(cond)) ::ecoserve::check_failed(__FILE__, __LINE__, #cond, fmt::format(__VA_ARGS__)); \
  } while (0)
