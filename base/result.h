// Errors as values: every parser and validator in nodewarden returns Result<T>.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace nodewarden {

// A human-readable error. Context is prepended as the error travels up, so the final
// message reads outermost-first: "policy.json: evictionHard[\"memory.available\"]: ...".
struct Error {
  std::string message;
  // The errno of a failed system call behind this error, 0 otherwise (cgroups/ uses it to
  // tell a vanished cgroup from a real failure).
  int sysErrno = 0;

  // Returns a copy with `context` and ": " in front of the message.
  Error withContext(std::string_view context) const {
    return Error{std::string(context) + ": " + message, sysErrno};
  }
};

// Either a value or an Error. Never throws; accessing the wrong alternative is a bug
// (asserted).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  const T& value() const& {
    assert(ok());
    return std::get<T>(v_);
  }
  T& value() & {
    assert(ok());
    return std::get<T>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(v_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  const Error& error() const {
    assert(!ok());
    return std::get<Error>(v_);
  }

 private:
  std::variant<T, Error> v_;
};

// Success without a value, or an Error: for operations that only succeed or fail (`return {};`
// on success). A Result<bool> is a real yes/no answer, never "it worked".
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }

  const Error& error() const {
    assert(!ok());
    return *error_;
  }

 private:
  std::optional<Error> error_;
};

}  // namespace nodewarden
