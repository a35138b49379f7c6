// Fuzz target for ork serve's request bodies (network input): any bytes,
// as a /v1/chat/completions or /v1/completions body (the first byte picks),
// are read into a request or refused with an HTTP 400 whose message says
// why - never a crash, an exception or a hang. Tokenizing and the chat
// template run on the built-in model, as the server runs them.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "ork/ork.hpp"
#include "serve/openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ork;
  static std::unique_ptr<api::LoadedModel> model = [] {
    auto m = api::LoadedModel::load(ORK_SOURCE_DIR "/data/models/stories260K-f32.gguf");
    if (!m.is_ok()) std::abort();
    return std::move(*m);
  }();
  if (size == 0) return 0;
  const bool chat = data[0] & 1;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  serve::CompletionRequest request;
  serve::HttpError err;
  if (serve::parse_request(body, chat, *model, serve::RequestLimits{}, &request, &err)) {
    if (request.prompt.empty()) std::abort();
    for (int32_t t : request.prompt) {
      if (t < 0 || t >= model->n_vocab()) std::abort();
    }
  } else if (err.status != 400 || err.message.empty()) {
    std::abort();
  }
  return 0;
}
