// ork serve: an OpenAI-compatible HTTP server (cpp-httplib) over the
// scheduler's slots - /v1/chat/completions and /v1/completions, streamed
// (server-sent events) or not, /v1/models, /health, /metrics (Prometheus)
// and a chat page at /. Requests are read by openai_request, answered by
// openai_response; the HTTP threads only wait on their jobs.
#include <httplib.h>
#include <pthread.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <mutex>

#include <fmt/format.h>

#include "builtin_model.h"
#include "commands.h"
#include "core/escape.h"
#include "core/thread_pool.h"
#include "load_model.h"
#include "serve/openai_request.h"
#include "serve/openai_response.h"
#include "serve/peer_watch.h"
#include "serve/scheduler.h"
#include "serve/web_page.h"

namespace ork::cli {
namespace {

using serve::HttpError;
using serve::Job;

struct ServeOptions {
  std::string model;
  bool mmap = false;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  std::string chat_template;
  int parallel = 4;
  int n_ctx = 0;
  int batch = 512;
  int threads = 0;
  int threads_http = 64;
  int timeout = 60;
  size_t max_body = 16u << 20;
  size_t max_queue = 64;
  bool no_webui = false;
  bool metrics_flag = false;
};

std::mutex g_log_mu;
template <typename... Args>
void log_line(fmt::format_string<Args...> f, Args&&... args) {
  const std::string line = fmt::format(f, std::forward<Args>(args)...);
  std::lock_guard<std::mutex> lk(g_log_mu);
  std::fprintf(stderr, "ork: %s\n", escape_text(line).c_str());
}

// A failure on the server's side (5xx).
HttpError server_error(int status, std::string message) {
  HttpError e;
  e.status = status;
  e.type = "server_error";
  e.message = std::move(message);
  return e;
}

void send_error(httplib::Response& res, const HttpError& e) {
  res.status = e.status;
  res.set_content(serve::to_text(serve::error_body(e)), "application/json");
}

std::string model_id(const std::string& path) {
  if (path.empty()) return "stories260K";
  return std::filesystem::path(path).filename().string();
}

class Server {
 public:
  Server(const ServeOptions& o, api::LoadedModel& model, serve::Scheduler& slots)
      : o_(o), model_(model), slots_(slots), id_(model_id(o.model)), started_(std::time(nullptr)) {}

  void install(httplib::Server& svr);

 private:
  bool authorized(const httplib::Request& req, httplib::Response& res) const;
  void completions(const httplib::Request& req, httplib::Response& res, bool chat);
  void stream(std::shared_ptr<Job> job, serve::ResponseHead head, httplib::Response& res);
  void metrics(httplib::Response& res) const;
  void log_done(const char* path, const Job& job) const;

  const ServeOptions& o_;
  api::LoadedModel& model_;
  serve::Scheduler& slots_;
  const std::string id_;
  const int64_t started_;
  std::atomic<uint64_t> next_id_{1};
  mutable std::atomic<uint64_t> http_requests_{0}, http_errors_{0};
};

bool Server::authorized(const httplib::Request& req, httplib::Response& res) const {
  if (o_.api_key.empty()) return true;
  if (req.get_header_value("Authorization") == "Bearer " + o_.api_key) return true;
  HttpError e;
  e.status = 401;
  e.type = "authentication_error";
  e.message = "invalid or missing API key (send the header 'Authorization: Bearer <key>')";
  send_error(res, e);
  return false;
}

void Server::log_done(const char* path, const Job& job) const {
  const double tps = job.predicted_ms > 0 ? job.completion_tokens * 1e3 / job.predicted_ms : 0.0;
  log_line("{} slot {}: prompt {} tokens ({} cached) in {:.1f} ms; {} tokens in {:.1f} ms ({:.2f} tok/s); {}", path,
           job.slot, job.prompt_tokens, job.prompt_cached, job.prompt_ms, job.completion_tokens, job.predicted_ms, tps,
           !job.error.empty() ? "error: " + job.error : job.finish_reason.empty() ? "cancelled" : job.finish_reason);
}

void Server::completions(const httplib::Request& req, httplib::Response& res, bool chat) {
  if (!authorized(req, res)) return;
  serve::CompletionRequest request;
  HttpError err;
  if (!serve::parse_request(req.body, chat, model_, serve::RequestLimits{}, &request, &err)) {
    send_error(res, err);
    return;
  }
  if (static_cast<int>(request.prompt.size()) >= slots_.n_ctx()) {
    err.param = chat ? "messages" : "prompt";
    err.message = fmt::format("the prompt is {} tokens; a slot's context holds {} (-c / --parallel)",
                              request.prompt.size(), slots_.n_ctx());
    send_error(res, err);
    return;
  }
  serve::ResponseHead head;
  head.chat = chat;
  head.id = fmt::format("{}-{:x}{:06x}", chat ? "chatcmpl" : "cmpl", started_, next_id_++);
  head.model = request.model.empty() ? id_ : request.model;
  head.created = std::time(nullptr);
  auto job = std::make_shared<Job>(std::move(request));
  if (!slots_.submit(job)) {
    send_error(res, server_error(503, fmt::format("the server is busy: {} requests are already waiting for a slot",
                                                   o_.max_queue)));
    return;
  }
  if (job->request.stream) {
    stream(job, head, res);
    return;
  }
  // A client that goes away before its answer cancels the request, as a
  // stream's does (its slot is freed at the next step).
  const serve::PeerWatch peer(req.remote_addr, req.remote_port, req.local_port);
  std::unique_lock<std::mutex> lk(job->mu);
  while (!job->cv.wait_for(lk, std::chrono::milliseconds(100), [&] { return job->done; })) {
    if (!job->cancelled && peer.gone()) job->cancelled = true;
  }
  std::string text;
  for (const std::string& piece : job->pending) text += piece;
  lk.unlock();
  log_done(req.path.c_str(), *job);
  if (!job->error.empty()) {
    send_error(res, server_error(500, job->error));
    return;
  }
  res.set_content(serve::to_text(serve::completion_body(head, *job, text)), "application/json");
}

// Server-sent events: a chunk per piece of text as the slot makes it, the
// last chunk with the finish reason and timings, usage if asked, [DONE].
// A client that goes away cancels the job; its slot is freed at the next step.
void Server::stream(std::shared_ptr<Job> job, serve::ResponseHead head, httplib::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  auto first = std::make_shared<bool>(true);
  const std::string path = head.chat ? "/v1/chat/completions" : "/v1/completions";
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, job, head, first, path](size_t, httplib::DataSink& sink) {
        auto send = [&](const nlohmann::json& j) {
          const std::string event = "data: " + serve::to_text(j) + "\n\n";
          if (sink.write(event.data(), event.size())) return true;
          job->cancelled = true;
          return false;
        };
        std::unique_lock<std::mutex> lk(job->mu);
        job->cv.wait_for(lk, std::chrono::milliseconds(250), [&] { return job->done || !job->pending.empty(); });
        std::vector<std::string> pieces = std::move(job->pending);
        job->pending.clear();
        const bool done = job->done;
        lk.unlock();
        // An event per token's text (a role-only event first, for a chat).
        if (*first && head.chat) pieces.insert(pieces.begin(), std::string());
        for (const std::string& text : pieces) {
          if (!send(serve::stream_chunk(head, text, *first, "", nullptr))) return false;
          *first = false;
        }
        if (!done) {
          // Nothing new: a comment keeps the line open and finds a vanished client.
          if (pieces.empty() && !sink.write(": \n\n", 4)) {
            job->cancelled = true;
            return false;
          }
          return true;
        }
        log_done(path.c_str(), *job);
        if (!job->error.empty()) {
          if (!send(serve::error_body(server_error(500, job->error)))) return false;
        } else {
          if (!send(serve::stream_chunk(head, "", false, job->finish_reason, job.get()))) return false;
          if (job->request.include_usage && !send(serve::usage_chunk(head, *job))) return false;
        }
        static const char kDone[] = "data: [DONE]\n\n";
        if (!sink.write(kDone, sizeof(kDone) - 1)) return false;
        sink.done();
        return true;
      },
      [job](bool success) {
        if (!success) job->cancelled = true;
      });
}

void Server::metrics(httplib::Response& res) const {
  const serve::SchedulerMetrics m = slots_.metrics();
  std::string out;
  auto add = [&](const char* name, const char* type, const char* help, double value) {
    out += fmt::format("# HELP ork_{0} {1}\n# TYPE ork_{0} {2}\nork_{0} {3}\n", name, help, type, value);
  };
  add("requests_total", "counter", "Completion requests given a slot.", static_cast<double>(m.requests));
  add("requests_cancelled_total", "counter", "Requests whose client went away before the end.", static_cast<double>(m.cancelled));
  add("request_errors_total", "counter", "Requests that failed inside the model.", static_cast<double>(m.errors));
  add("http_requests_total", "counter", "HTTP requests of any kind.", static_cast<double>(http_requests_));
  add("http_errors_total", "counter", "HTTP answers with a 4xx or 5xx status.", static_cast<double>(http_errors_));
  add("prompt_tokens_total", "counter", "Prompt tokens evaluated (not counting reused cache).", static_cast<double>(m.prompt_tokens));
  add("prompt_tokens_cached_total", "counter", "Prompt tokens found in a slot's cache.", static_cast<double>(m.prompt_cached));
  add("prompt_seconds_total", "counter", "Time spent on prompts.", m.prompt_seconds);
  add("tokens_predicted_total", "counter", "Tokens generated.", static_cast<double>(m.predicted_tokens));
  add("tokens_predicted_seconds_total", "counter", "Time spent generating, summed over requests.", m.predicted_seconds);
  add("batch_steps_total", "counter", "Batches evaluated (one per scheduler step).", static_cast<double>(m.steps));
  add("requests_processing", "gauge", "Slots serving a request.", m.busy_slots);
  add("requests_deferred", "gauge", "Requests waiting for a slot.", m.queued);
  add("slots", "gauge", "Slots (--parallel).", m.slots);
  res.set_content(out, "text/plain; version=0.0.4");
}

void Server::install(httplib::Server& svr) {
  svr.set_payload_max_length(o_.max_body);
  svr.set_read_timeout(o_.timeout, 0);
  svr.set_write_timeout(o_.timeout, 0);
  svr.set_keep_alive_max_count(1000);
  const int pool = o_.threads_http;
  svr.new_task_queue = [pool] { return new httplib::ThreadPool(static_cast<size_t>(pool)); };
  svr.set_pre_routing_handler([this](const httplib::Request&, httplib::Response& res) {
    ++http_requests_;
    res.set_header("Access-Control-Allow-Origin", "*");
    return httplib::Server::HandlerResponse::Unhandled;
  });
  svr.Options(R"(/.*)", [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    res.status = 204;
  });
  if (!o_.no_webui) {
    svr.Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(serve::web_page()), "text/html; charset=utf-8");
    });
  }
  svr.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  auto models = [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    res.set_content(serve::to_text(serve::models_body(id_, started_, model_, slots_.n_ctx())), "application/json");
  };
  svr.Get("/v1/models", models);
  svr.Get("/models", models);
  for (const char* path : {"/v1/chat/completions", "/chat/completions"}) {
    svr.Post(path, [this](const httplib::Request& req, httplib::Response& res) { completions(req, res, true); });
  }
  for (const char* path : {"/v1/completions", "/completions"}) {
    svr.Post(path, [this](const httplib::Request& req, httplib::Response& res) { completions(req, res, false); });
  }
  svr.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
    if (authorized(req, res)) metrics(res);
  });
  // Every other failure (no such route, a body too large, a malformed
  // request line) in OpenAI's error shape.
  svr.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    ++http_errors_;
    if (!res.body.empty()) return;
    HttpError e;
    e.status = res.status;
    e.type = res.status >= 500 ? "server_error" : "invalid_request_error";
    e.message = res.status == 404   ? fmt::format("no route {} {}", req.method, req.path)
                : res.status == 413 ? fmt::format("the body is larger than {} bytes (--max-body)", o_.max_body)
                                    : fmt::format("HTTP status {}", res.status);
    send_error(res, e);
  });
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
    }
    send_error(res, server_error(500, what));
  });
}

int serve_main(const ServeOptions& o) {
  // SIGINT/SIGTERM stop the server from a thread of their own: blocked here,
  // before any thread starts, so that every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  if (o.threads > 0) ThreadPool::set_default_threads(o.threads);
  set_context_hint(o.n_ctx);
  auto loaded = o.model.empty() ? load_builtin_api_model() : load_api_model(o.model, o.mmap);
  if (!loaded.is_ok()) return fail(loaded.status().to_string());
  api::LoadedModel& model = **loaded;
  if (Status st = set_chat_template_option(model, o.chat_template); !st.is_ok()) return fail(st.message());
  const int per_slot = o.n_ctx > 0 ? o.n_ctx / o.parallel : std::min(model.n_ctx_train(), 4096);
  if (per_slot < 8) return fail(fmt::format("-c {} over --parallel {} leaves {} positions per slot", o.n_ctx, o.parallel, per_slot));
  if (Status st = check_context(model.internal(), per_slot, o.batch, true, o.parallel); !st.is_ok()) return fail(st.to_string());
  serve::SchedulerOptions so;
  so.slots = o.parallel;
  so.n_ctx = per_slot;
  so.batch = o.batch;
  so.max_queue = o.max_queue;
  so.cache_type_k = kv_type_name(cache_types().k);
  so.cache_type_v = kv_type_name(cache_types().v);
  auto slots = serve::Scheduler::create(model, so);
  if (!slots.is_ok()) return fail(slots.status().to_string());


  httplib::Server svr;
  Server server(o, model, **slots);
  server.install(svr);
  // Debian's cpp-httplib (a shared library, its backlog compiled in) listens
  // with room for 5 waiting connections: a burst of more clients at once can
  // overflow the accept queue and be reset (seen in server.concurrent_clients
  // under ASan). Its listening socket, kept as it is made, is listened on
  // again with room for 512 (Linux updates the backlog of a listening socket).
  int listen_fd = -1;
  svr.set_socket_options([&listen_fd](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_fd = sock;
  });
  const int port = o.port == 0 ? svr.bind_to_any_port(o.host) : (svr.bind_to_port(o.host, o.port) ? o.port : -1);
  if (port < 0) return fail(fmt::format("cannot listen on {}:{} (in use, or not an address of this machine)", o.host, o.port));
  if (listen_fd >= 0) ::listen(listen_fd, 512);
  std::thread stopper([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (sig != 0) svr.stop();
  });
  log_line("{} ({}), {} slots x {} positions; chat template: {}", model.path(), model.architecture(), o.parallel,
           per_slot, model.has_chat_template() ? "the model's own" : (o.chat_template.empty() ? "ChatML (the model has none)" : o.chat_template));
  log_line("listening on http://{}:{}{}  (Ctrl-C stops)", o.host, port, o.no_webui ? "" : " - a chat page is at /");
  std::fflush(stderr);
  const bool ok = svr.listen_after_bind();
  // Wake the signal thread if the server stopped by itself.
  pthread_kill(stopper.native_handle(), SIGTERM);
  stopper.join();
  log_line("stopped");
  return ok ? 0 : fail("the server stopped on an error");
}

}  // namespace

Runner add_serve(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  app.add_option("-m,--model", o->model, "Model file, GGUF or orkpack (default: the built-in stories260K)");
  app.add_option("--host", o->host, "Address to listen on")->capture_default_str();
  app.add_option("--port", o->port, "Port to listen on (0: any free port, printed)")->capture_default_str()->check(CLI::Range(0, 65535));
  app.add_option("--api-key", o->api_key, "Require 'Authorization: Bearer KEY' on /v1/* and /metrics");
  app.add_option("--chat-template", o->chat_template, "Chat template: a Jinja file, or 'chatml' (default: the model's own, else ChatML)");
  app.add_option("--parallel", o->parallel, "Slots: requests served at once, batched together (also -np)")->capture_default_str()->check(CLI::Range(1, 256));
  app.add_option("-c,--ctx-size", o->n_ctx, "Context positions over all slots (default: the model's, at most 4096, per slot)")->check(token_count());
  app.add_option("-b,--batch-size", o->batch, "Prompt tokens evaluated per step, over all slots")->capture_default_str()->check(CLI::Range(1, 1 << 16));
  app.add_option("-t,--threads", o->threads, "Threads for the model (default: all cores)")->check(thread_count());
  app.add_option("--threads-http", o->threads_http, "Connections served at once (HTTP threads)")->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--timeout", o->timeout, "Seconds a client may take to send or read before it is dropped (also -to)")->capture_default_str()->check(CLI::Range(1, 86400));
  app.add_option("--max-body", o->max_body, "Largest request body in bytes (larger: 413)")->capture_default_str()->check(CLI::Range(size_t{1024}, size_t{1} << 32));
  app.add_option("--max-queue", o->max_queue, "Requests that may wait for a slot (more: 503)")->capture_default_str()->check(CLI::Range(size_t{1}, size_t{1} << 20));
  app.add_flag("--no-webui", o->no_webui, "No chat page at /");
  app.add_flag("--metrics", o->metrics_flag, "Accepted for llama-server's scripts: /metrics is always on");
  add_load_flags(app, o->mmap);
  add_cache_type_flags(app);
  return [o] { return serve_main(*o); };
}

}  // namespace ork::cli
