// The bodies ork serve answers with, in OpenAI's shapes (and llama-server's
// `timings` beside `usage`): whole completions, stream chunks, errors,
// the model list. Text the model generated may be invalid UTF-8 (a byte
// token alone); it is written with U+FFFD in its place, never refused.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "serve/openai_request.h"
#include "serve/scheduler.h"

namespace ork::serve {

// What every body of one response shares.
struct ResponseHead {
  std::string id;       // "chatcmpl-..." / "cmpl-..."
  std::string model;    // the name the client asked for, else the file's
  int64_t created = 0;  // Unix seconds
  bool chat = true;
};

// JSON text (invalid UTF-8 replaced).
std::string to_text(const nlohmann::json& j);

nlohmann::json error_body(const HttpError& e);
// The whole answer of a finished job, not streamed.
nlohmann::json completion_body(const ResponseHead& h, const Job& job, const std::string& text);
// One server-sent event of a stream: a piece of text (and the role, first),
// or (finish_reason non-empty) the last chunk, with timings.
nlohmann::json stream_chunk(const ResponseHead& h, const std::string& text, bool first, const std::string& finish_reason,
                            const Job* job);
// The usage-only chunk of stream_options.include_usage.
nlohmann::json usage_chunk(const ResponseHead& h, const Job& job);
nlohmann::json models_body(const std::string& id, int64_t created, const api::LoadedModel& model, int n_ctx);

}  // namespace ork::serve
