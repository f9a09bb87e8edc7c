// status.h — Status and StatusOr<T>: how tensorscope reports expected failures.
//
// Used by every process (client, daemon, tools). Expected failures (bad input,
// missing peer, full ring) return a Status with a human-readable message; bugs abort.
// Thread safety: value types, no shared state.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include <cstdlib>
#include <cstdio>

namespace tensorscope {

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message), true); }
  // "<what>: <strerror(err)>" (thread-safe): a failed system call's error.
  static Status from_errno(const std::string& what, int err);

  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return is_ok(); }
  const std::string& message() const { return message_; }

 private:
  Status(std::string message, bool failed) : message_(std::move(message)), failed_(failed) {}
  std::string message_;
  bool failed_ = false;
};

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT
    if (status_.is_ok()) status_ = Status::error("StatusOr built from an ok Status without a value");
  }

  bool is_ok() const { return value_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const { return status_; }
  const std::string& message() const { return status_.message(); }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace tensorscope

// TENSORSCOPE_CHECK aborts on a broken invariant (a bug), never on bad input.
#define TENSORSCOPE_CHECK(cond)                                                                    \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      std::fprintf(stderr, "tensorscope: CHECK failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                                \
    }                                                                                              \
  } while (0)
