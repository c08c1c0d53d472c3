// Status and Result<T>: how every fallible call in Engram Store reports failure.
//
// Modeled on LevelDB's Status: a cheap OK value and, on failure, a code plus a
// human-readable message that names what went wrong (the file, the field, the
// row). Nothing in the library throws across the public API.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace engram {

enum class StatusCode : uint8_t {
  kOk = 0,
  kInvalidArgument,   // a bad argument or configuration from the caller
  kNotFound,          // a file, table, tensor or key that does not exist
  kCorruption,        // a file or block whose bytes fail validation or checksum
  kIOError,           // the operating system reported an I/O failure
  kOutOfRange,        // a row ID or offset past the end of a table
  kUnsupported,       // a valid request this build or kernel cannot serve
  kResourceExhausted, // out of memory, queue slots, locked memory, ...
  kCancelled,         // the operation was abandoned (shutdown)
  kInternal,          // a broken invariant: a bug in Engram Store
  kUnavailable,       // a service the store depends on is not there (engram-served gone or restarting)
  kDeadlineExceeded,  // a call's deadline passed before its answer came (a stopped or wedged engram-served)
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status IOError(std::string m) { return {StatusCode::kIOError, std::move(m)}; }
  static Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
  static Status Unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
  static Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
  static Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status DeadlineExceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
  // An I/O error from errno, e.g. FromErrno("open table.engram", errno).
  static Status FromErrno(std::string_view what, int err);

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "Corruption: block 12 checksum mismatch" / "OK".
  std::string ToString() const;

  // Prefixes context to the message, keeping the code: "open a.engram: <msg>".
  Status WithContext(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Thrown by Result::value() (and * and ->) on a Result that holds an error:
// it carries that status, so an unchecked value() -- Store::Open(options).value()
// in a quick program -- still says what went wrong. Check ok() where an error
// is expected; the library itself never lets this escape.
class BadResultAccess : public std::exception {
 public:
  explicit BadResultAccess(Status status)
      : status_(std::move(status)), what_("Result::value() on an error: " + status_.ToString()) {}
  const char* what() const noexcept override { return what_.c_str(); }
  const Status& status() const { return status_; }

 private:
  Status status_;
  std::string what_;
};

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    if (std::get<Status>(v_).ok()) v_ = Status::Internal("Result constructed from an OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & {
    CheckHasValue();
    return *std::get_if<T>(&v_);
  }
  const T& value() const& {
    CheckHasValue();
    return *std::get_if<T>(&v_);
  }
  T&& value() && {
    CheckHasValue();
    return std::move(*std::get_if<T>(&v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  void CheckHasValue() const {
    if (!ok()) throw BadResultAccess(std::get<Status>(v_));
  }

  std::variant<Status, T> v_;
};

}  // namespace engram

// Early return of a failed Status (or of a failed Result's status).
#define ENGRAM_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::engram::Status _engram_st = (expr);            \
    if (!_engram_st.ok()) return _engram_st;         \
  } while (0)

#define ENGRAM_CONCAT_INNER_(a, b) a##b
#define ENGRAM_CONCAT_(a, b) ENGRAM_CONCAT_INNER_(a, b)
// ENGRAM_ASSIGN_OR_RETURN(auto x, MakeX()); returns the status if MakeX failed.
#define ENGRAM_ASSIGN_OR_RETURN(lhs, expr) \
  ENGRAM_ASSIGN_OR_RETURN_IMPL_(ENGRAM_CONCAT_(_engram_res_, __LINE__), lhs, expr)
#define ENGRAM_ASSIGN_OR_RETURN_IMPL_(res, lhs, expr) \
  auto res = (expr);                                  \
  if (!res.ok()) return res.status();                 \
  lhs = std::move(res).value()
