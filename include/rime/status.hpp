// rime: one status type for every stage. Nothing in the public API throws or aborts; every fallible call
// returns a Status (or a Result<T> carrying one) that the caller must look at.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace rime {

// A closed set. Keep the codes apart: InvalidGraph means the graph is wrong, InvalidArgument means a call's other
// arguments are (unbound or misaligned buffers at execute, a bad arch name, an option out of range),
// NotSupported means the graph is valid but no capability row serves it (the message carries every row's
// reason), Internal means rime is wrong. New codes are appended: the numbers are part of the ABI.
enum class StatusCode : int {
  Ok = 0,
  InvalidGraph,
  InvalidJson,
  NotSupported,
  CompileFailed,
  CacheCorrupt,
  CudaError,
  Internal,
  InvalidArgument,
};

const char* to_string(StatusCode code) noexcept;

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message, std::string location = {})
      : code_(code), message_(std::move(message)), location_(std::move(location)) {}

  static Status success() { return Status(); }

  bool ok() const noexcept { return code_ == StatusCode::Ok; }
  StatusCode code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  // A JSON pointer into the graph's JSON form (e.g. "/tensors/2/dims") when the error is about one field;
  // empty otherwise.
  const std::string& location() const noexcept { return location_; }
  // "InvalidGraph at /tensors/2/dims: K: dims [...] do not match ..."
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::Ok;
  std::string message_;
  std::string location_;
};

// A value or the Status that explains why there is none. Check ok() before reading value().
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design, like std::optional
  Result(Status status) : status_(std::move(status)) {
    if (status_.ok()) status_ = Status(StatusCode::Internal, "Result built from an Ok status without a value");
  }

  bool ok() const noexcept { return value_.has_value(); }
  const Status& status() const noexcept { return status_; }
  const T& value() const& { return *value_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T* operator->() const { return &*value_; }
  T* operator->() { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace rime
