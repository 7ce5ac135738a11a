// kvforge/status.h — the error currency of every module boundary.
//
// Status is a code plus a message; OK carries no allocation. Result<T> holds either a value or a
// non-OK Status; its member names are a subset of std::expected so a later switch is mechanical.
// No exception escapes kvforge's public API: functions that can fail return one of these.
// Thread-safety: plain values, no shared state.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace kvforge {

enum class StatusCode : uint8_t {
  kOk = 0,
  kInvalidArgument,    // the caller passed something malformed (bad flag, bad request field)
  kNotFound,           // a named thing does not exist (file, tensor, metadata key)
  kDataLoss,           // a file's bytes are corrupt or truncated
  kUnimplemented,      // valid input that this build does not support (dtype, architecture)
  kResourceExhausted,  // a configured limit was hit (memory budget, context length)
  kUnavailable,        // transient: try again later
  kCancelled,          // aborted by the caller
  kInternal,           // a bug in kvforge
  kIoError,            // the operating system refused an I/O operation
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) {
    return Status(StatusCode::kInvalidArgument, std::move(msg));
  }
  static Status NotFound(std::string msg) { return Status(StatusCode::kNotFound, std::move(msg)); }
  static Status DataLoss(std::string msg) { return Status(StatusCode::kDataLoss, std::move(msg)); }
  static Status Unimplemented(std::string msg) {
    return Status(StatusCode::kUnimplemented, std::move(msg));
  }
  static Status ResourceExhausted(std::string msg) {
    return Status(StatusCode::kResourceExhausted, std::move(msg));
  }
  static Status Unavailable(std::string msg) {
    return Status(StatusCode::kUnavailable, std::move(msg));
  }
  static Status Cancelled(std::string msg) {
    return Status(StatusCode::kCancelled, std::move(msg));
  }
  static Status Internal(std::string msg) { return Status(StatusCode::kInternal, std::move(msg)); }
  static Status IoError(std::string msg) { return Status(StatusCode::kIoError, std::move(msg)); }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  const std::string& message() const;
  // "INVALID_ARGUMENT: message", or "OK".
  std::string ToString() const;
  // Returns a copy whose message is prefixed with `context: `.
  Status WithContext(std::string_view context) const;

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const Rep> rep_;  // null means OK; shared so copies are cheap
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = Status::Internal("Result constructed from OK status");
  }

  bool has_value() const { return value_.has_value(); }
  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

  const Status& error() const { return status_; }
  const Status& status() const { return status_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace kvforge

#define KVF_CONCAT_INNER_(a, b) a##b
#define KVF_CONCAT_(a, b) KVF_CONCAT_INNER_(a, b)

#define KVF_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::kvforge::Status kvf_status_ = (expr);    \
    if (!kvf_status_.ok()) return kvf_status_; \
  } while (0)

#define KVF_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.error();               \
  lhs = std::move(tmp).value()

#define KVF_ASSIGN_OR_RETURN(lhs, expr) \
  KVF_ASSIGN_OR_RETURN_IMPL_(KVF_CONCAT_(kvf_result_, __LINE__), lhs, expr)
