// The OpenAI-style request bodies ork serve takes (/v1/chat/completions,
// /v1/completions), read and checked into one plain description of the
// work. Everything here is untrusted input: each field's type and range is
// checked, and an error names the field (OpenAI's "param") and says why.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ork/ork.hpp"

namespace ork::serve {

// An error as the client sees it: the HTTP status and OpenAI's error object.
struct HttpError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field, or empty
};

struct CompletionRequest {
  bool chat = false;           // /v1/chat/completions (else /v1/completions)
  std::string model;           // echoed back; any name is accepted
  std::vector<int32_t> prompt; // tokenized (chat: the rendered template)
  api::SamplerOptions sampling;
  bool seed_given = false;
  int max_tokens = -1;         // -1: until the slot's context is full
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

// Limits on what one request may ask for.
struct RequestLimits {
  size_t max_stop_strings = 16;
  size_t max_stop_bytes = 256;
  size_t max_messages = 4096;
};

// Reads a request body. `chat` selects the endpoint's schema. The prompt
// is tokenized with the model (a chat's messages rendered with its chat
// template first). Returns false and fills `err` on anything malformed.
bool parse_request(std::string_view body, bool chat, const api::LoadedModel& model, const RequestLimits& limits,
                   CompletionRequest* out, HttpError* err);

}  // namespace ork::serve
