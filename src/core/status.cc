#include "ork/status.h"

namespace ork {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kCorrupt: return "corrupt";
    case StatusCode::kIo: return "i/o error";
    case StatusCode::kInternal: return "internal error";
    case StatusCode::kResourceExhausted: return "out of memory";
    case StatusCode::kNumerical: return "numerical error";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return fmt::format("{}: {}", status_code_name(code_), message_);
}

Status Status::with_context(const std::string& context) const {
  if (is_ok()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace ork
