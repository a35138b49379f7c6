// Errors as values. Every fallible library call returns Status or Result<T>;
// nothing throws across the library boundary and nothing calls exit().
//
// A Status carries a code and a message written for a person: it names the
// file, the tensor, the field that was wrong ("model.gguf: tensor
// 'blk.0.attn_q.weight': data [1024, 5120) runs past end of file (4096)").
#pragma once

#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace ork {

enum class StatusCode {
  kOk,
  kInvalidArgument,  // the caller or the user gave something malformed
  kNotFound,         // a file, key or tensor that is not there
  kUnsupported,      // well-formed, but ork does not handle it (yet)
  kCorrupt,          // a file whose bytes contradict its own format
  kIo,               // the operating system refused (open, mmap, write)
  kInternal,         // an invariant of ork itself broke
  kResourceExhausted,  // not enough memory (or another resource) for the request
  kNumerical,        // a computation produced NaN or infinity
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "corrupt: model.gguf: ..." — what a CLI prints.
  std::string to_string() const;

  // Adds context in front of the message, keeping the code:
  // status.with_context("model.gguf") -> "model.gguf: <message>".
  Status with_context(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename... Args>
Status error(StatusCode code, fmt::format_string<Args...> format, Args&&... args) {
  return Status(code, fmt::format(format, std::forward<Args>(args)...));
}

// A value or the Status saying why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : state_(std::move(status)) {}  // NOLINT

  bool is_ok() const { return std::holds_alternative<T>(state_); }
  const Status& status() const {
    static const Status kOkStatus;
    return is_ok() ? kOkStatus : std::get<Status>(state_);
  }
  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> state_;
};

}  // namespace ork

// Propagates a failed Status to the caller.
#define ORK_RETURN_IF_ERROR(expr)             \
  do {                                        \
    ::ork::Status ork_status_ = (expr);       \
    if (!ork_status_.is_ok()) return ork_status_; \
  } while (0)

#define ORK_CONCAT_INNER(a, b) a##b
#define ORK_CONCAT(a, b) ORK_CONCAT_INNER(a, b)

// Declares `lhs` from a Result, or returns its Status.
#define ORK_ASSIGN_OR_RETURN(lhs, expr) \
  ORK_ASSIGN_OR_RETURN_IMPL(ORK_CONCAT(ork_result_, __LINE__), lhs, expr)
#define ORK_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.is_ok()) return tmp.status();          \
  lhs = std::move(tmp).value()
