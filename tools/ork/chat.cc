// ork chat: an interactive conversation in the model's own chat template.
// The session's cache is kept across turns: each turn evaluates only what
// the template adds after the cached prefix. Ctrl-C stops a reply (a
// second one, or one at the prompt, leaves); /clear, /save, /load, /exit.
#include <pthread.h>
#include <signal.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "builtin_model.h"
#include "commands.h"
#include "core/escape.h"
#include "core/output_file.h"
#include "core/thread_pool.h"
#include "load_model.h"
#include "sampling_cli.h"

namespace ork::cli {
namespace {

using json = nlohmann::ordered_json;

struct ChatOptions {
  std::string model;
  bool mmap = false;
  std::string system;
  std::string chat_template;
  int n_predict = -1;
  int n_ctx = 0;
  int threads = 0;
  bool ignore_eos = false;
  std::vector<std::string> stop;
  SamplingCli sampling;
};

std::atomic<bool> g_interrupted{false};

void on_sigint(int) { g_interrupted = true; }

void out(std::string_view text) {
  const std::string safe = escape_stream_text(text);
  std::fwrite(safe.data(), 1, safe.size(), stdout);
  std::fflush(stdout);
}

const char kHelp[] =
    "  /clear       forget the conversation (the system prompt stays)\n"
    "  /save FILE   save the conversation and its cache (FILE and FILE.json)\n"
    "  /load FILE   continue a saved conversation\n"
    "  /exit        leave (also Ctrl-D, or Ctrl-C at the prompt)\n"
    "  A line ending in \\ continues on the next. Ctrl-C stops a reply.\n";

class Chat {
 public:
  Chat(const ChatOptions& o, api::LoadedModel& model, api::Session& session, api::Sampler& sampler)
      : o_(o), model_(model), session_(session), sampler_(sampler) {
    clear();
  }

  void clear() {
    messages_ = json::array();
    if (!o_.system.empty()) messages_.push_back({{"role", "system"}, {"content", o_.system}});
  }
  // One user turn: render, generate, stream, remember the reply.
  Status turn(const std::string& text);
  Status save(const std::string& path) const;
  Status load(const std::string& path);

 private:
  // The prompt for the conversation so far; the oldest turns are dropped
  // (with a note) until it leaves room for a reply.
  Result<std::vector<int32_t>> render();

  const ChatOptions& o_;
  api::LoadedModel& model_;
  api::Session& session_;
  api::Sampler& sampler_;
  json messages_;
};

Result<std::vector<int32_t>> Chat::render() {
  const int room = std::max(16, session_.n_ctx() / 4);
  for (;;) {
    ORK_ASSIGN_OR_RETURN(std::string prompt, model_.apply_chat_template(messages_.dump(), true));
    std::vector<int32_t> ids = model_.tokenize_prompt(prompt);
    if (static_cast<int>(ids.size()) + room <= session_.n_ctx()) return ids;
    // Drop the oldest exchange after the system prompt, if there is one to drop.
    const size_t first = !messages_.empty() && messages_[0]["role"] == "system" ? 1 : 0;
    if (messages_.size() <= first + 1) {
      if (static_cast<int>(ids.size()) < session_.n_ctx()) return ids;
      return error(StatusCode::kInvalidArgument, "the message is {} tokens; the context (-c) holds {}", ids.size(),
                   session_.n_ctx());
    }
    messages_.erase(messages_.begin() + static_cast<std::ptrdiff_t>(first));
    if (messages_.size() > first + 1 && messages_[first]["role"] == "assistant") {
      messages_.erase(messages_.begin() + static_cast<std::ptrdiff_t>(first));
    }
    std::fprintf(stderr, "[the context is full: the oldest turn is forgotten]\n");
  }
}

Status Chat::turn(const std::string& text) {
  messages_.push_back({{"role", "user"}, {"content", text}});
  auto ids = render();
  if (!ids.is_ok()) {
    messages_.erase(messages_.end() - 1);
    return ids.status();
  }
  api::GenerateOptions go;
  go.max_tokens = o_.n_predict < 0 ? session_.n_ctx() : o_.n_predict;
  go.stop = o_.stop;
  go.ignore_eos = o_.ignore_eos;
  g_interrupted = false;
  ORK_ASSIGN_OR_RETURN(api::GenerateResult r, session_.generate(*ids, sampler_, go, [](std::string_view piece) {
                         out(piece);
                         return !g_interrupted.load();
                       }));
  messages_.push_back({{"role", "assistant"}, {"content", r.text}});
  out("\n");
  const double tps = r.generate_seconds > 0 ? r.generated_tokens / r.generate_seconds : 0;
  std::fprintf(stderr, "[%s%d tokens, %.1f tok/s; prompt: %d new tokens, %d cached]\n",
               r.stop_reason == "cancelled" ? "stopped: " : r.stop_reason == "context" ? "context full: " : "",
               r.generated_tokens, tps, r.prompt_evaluated, r.prompt_tokens - r.prompt_evaluated);
  return Status::ok();
}

Status Chat::save(const std::string& path) const {
  ORK_RETURN_IF_ERROR(session_.save(path));
  return write_file_atomically(path + ".json", messages_.dump(1) + "\n");
}

Status Chat::load(const std::string& path) {
  std::ifstream in(path + ".json", std::ios::binary);
  if (!in) return error(StatusCode::kIo, "{}.json: cannot read the conversation", path);
  const json m = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (m.is_discarded() || !m.is_array()) return error(StatusCode::kCorrupt, "{}.json: not a conversation (a JSON array of messages)", path);
  for (const json& msg : m) {
    if (!msg.is_object() || !msg.contains("role") || !msg["role"].is_string() || !msg.contains("content") ||
        !msg["content"].is_string()) {
      return error(StatusCode::kCorrupt, "{}.json: each message needs a string role and content", path);
    }
  }
  ORK_RETURN_IF_ERROR(session_.load(path));
  messages_ = m;
  return Status::ok();
}

enum class Input { kLine, kEof, kInterrupted, kError };

// One line of standard input (without its newline). Waits in poll() with a
// short timeout and looks at the Ctrl-C flag between waits: a SIGINT that
// lands just before a blocking read would otherwise leave it blocked.
Input read_line(std::string* line) {
  static std::string buffered;
  static bool eof = false;
  line->clear();
  for (;;) {
    const size_t nl = buffered.find('\n');
    if (nl != std::string::npos) {
      line->assign(buffered, 0, nl);
      buffered.erase(0, nl + 1);
      return Input::kLine;
    }
    if (eof) {
      if (buffered.empty()) return Input::kEof;
      line->swap(buffered);
      buffered.clear();
      return Input::kLine;
    }
    if (g_interrupted) return Input::kInterrupted;
    pollfd p = {STDIN_FILENO, POLLIN, 0};
    const int ready = poll(&p, 1, 100);
    if (ready < 0 && errno != EINTR) return Input::kError;
    if (ready <= 0) continue;
    char chunk[4096];
    const ssize_t n = read(STDIN_FILENO, chunk, sizeof(chunk));
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return Input::kError;
    }
    if (n == 0) eof = true;
    buffered.append(chunk, static_cast<size_t>(n));
  }
}

int chat_main(const ChatOptions& o) {
  if (o.threads > 0) ThreadPool::set_default_threads(o.threads);
  // Ctrl-C must reach the main thread - the one blocked reading the prompt
  // or streaming a reply: every other thread (the pool's, started here)
  // blocks SIGINT, else the kernel may hand it to a worker and a read at
  // the prompt is never interrupted.
  sigset_t interrupt;
  sigemptyset(&interrupt);
  sigaddset(&interrupt, SIGINT);
  pthread_sigmask(SIG_BLOCK, &interrupt, nullptr);
  (void)ThreadPool::global();
  pthread_sigmask(SIG_UNBLOCK, &interrupt, nullptr);
  set_context_hint(o.n_ctx);
  auto loaded = o.model.empty() ? load_builtin_api_model() : load_api_model(o.model, o.mmap);
  if (!loaded.is_ok()) return fail(loaded.status().to_string());
  api::LoadedModel& model = **loaded;
  if (Status st = set_chat_template_option(model, o.chat_template); !st.is_ok()) return fail(st.message());
  const int n_ctx = o.n_ctx > 0 ? o.n_ctx : std::min(model.n_ctx_train(), 4096);
  if (Status st = check_context(model.internal(), n_ctx, std::min(n_ctx, 512)); !st.is_ok()) return fail(st.to_string());
  const api::SamplerOptions sp = o.sampling.resolve();
  SamplingCli::describe(sp);
  auto sampler = api::Sampler::create(sp);
  if (!sampler.is_ok()) return fail(sampler.status().to_string());
  api::SessionOptions so;
  so.n_ctx = n_ctx;
  set_cache_types(so);
  auto session = api::Session::create(model, so);
  if (!session.is_ok()) return fail(session.status().to_string());
  std::fprintf(stderr, "ork: chat with %s (%s), %d positions; chat template: %s. /help lists the commands.\n",
               model.path().c_str(), model.architecture().c_str(), n_ctx,
               !o.chat_template.empty() ? o.chat_template.c_str()
               : model.has_chat_template() ? "the model's own"
                                           : "ChatML (the model has none)");

  // Ctrl-C interrupts (no restart: a read at the prompt returns).
  struct sigaction sa = {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);

  Chat chat(o, model, **session, **sampler);
  const bool tty = isatty(STDIN_FILENO);
  for (;;) {
    g_interrupted = false;
    out("> ");
    std::string text, line;
    Input got = Input::kLine;
    bool more = true;
    while (more && (got = read_line(&line)) == Input::kLine) {
      more = !line.empty() && line.back() == '\\';
      if (more) line.back() = '\n';
      text += line;
      if (more && tty) out(". ");
    }
    if (got == Input::kInterrupted || got == Input::kEof) {
      out("\n");
      return 0;
    }
    if (got == Input::kError) return fail("cannot read standard input");
    if (!tty) out(text + "\n");  // a piped conversation reads as one
    if (text.empty()) continue;
    if (text[0] == '/') {
      const size_t space = text.find(' ');
      const std::string cmd = text.substr(0, space);
      const std::string arg = space == std::string::npos ? "" : text.substr(space + 1);
      Status st = Status::ok();
      if (cmd == "/exit" || cmd == "/quit") return 0;
      if (cmd == "/help") {
        out(kHelp);
      } else if (cmd == "/clear") {
        chat.clear();
        std::fprintf(stderr, "[the conversation is cleared]\n");
      } else if ((cmd == "/save" || cmd == "/load") && arg.empty()) {
        std::fprintf(stderr, "[%s needs a file name]\n", cmd.c_str());
      } else if (cmd == "/save") {
        st = chat.save(arg);
        if (st.is_ok()) std::fprintf(stderr, "[saved to %s and %s.json]\n", escape_text(arg).c_str(), escape_text(arg).c_str());
      } else if (cmd == "/load") {
        st = chat.load(arg);
        if (st.is_ok()) std::fprintf(stderr, "[loaded %s]\n", escape_text(arg).c_str());
      } else {
        std::fprintf(stderr, "[unknown command %s; /help lists them]\n", escape_text(cmd).c_str());
      }
      if (!st.is_ok()) std::fprintf(stderr, "ork: %s\n", escape_text(st.to_string()).c_str());
      continue;
    }
    if (Status st = chat.turn(text); !st.is_ok()) std::fprintf(stderr, "ork: %s\n", escape_text(st.to_string()).c_str());
  }
}

}  // namespace

Runner add_chat(CLI::App& app) {
  auto o = std::make_shared<ChatOptions>();
  app.add_option("-m,--model", o->model, "Model file, GGUF or orkpack (default: the built-in stories260K)");
  app.add_option("--system-prompt", o->system, "A system prompt at the start of the conversation (also -sys)");
  app.add_option("--chat-template", o->chat_template, "Chat template: a Jinja file, or 'chatml' (default: the model's own, else ChatML)");
  app.add_option("-n,--n-predict", o->n_predict, "Tokens per reply at most (-1: until the context is full)")
      ->capture_default_str()->check(CLI::Range(-1, 1 << 20));
  app.add_option("-c,--ctx-size", o->n_ctx, "Context size in tokens (default: the model's, at most 4096)")->check(token_count());
  app.add_option("-r,--reverse-prompt,--stop", o->stop, "Stop a reply before this text (repeatable)");
  app.add_option("-t,--threads", o->threads, "Threads (default: all cores)")->check(thread_count());
  app.add_flag("--ignore-eos", o->ignore_eos, "Keep a reply going past the end-of-text token");
  o->sampling.add_options(app);
  add_load_flags(app, o->mmap);
  add_cache_type_flags(app);
  return [o] { return chat_main(*o); };
}

}  // namespace ork::cli
