// The server's slots: N sessions of one model, each serving one request at
// a time, advanced together by one thread. Every step is one batch
// (Session::eval_together) holding each decoding slot's next token and a
// chunk of each new prompt - continuous batching: a request joins and
// leaves between steps without waiting for the others. A new request goes
// to the free slot whose cache holds the longest prefix of its prompt.
// A cancelled request (its client gone) frees its slot at the next step.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ork/ork.hpp"
#include "serve/openai_request.h"

namespace ork::serve {

// One request's progress, shared by the HTTP thread that waits on it and
// the scheduler that advances it.
struct Job {
  explicit Job(CompletionRequest r) : request(std::move(r)) {}
  const CompletionRequest request;
  std::atomic<bool> cancelled{false};

  std::mutex mu;
  std::condition_variable cv;
  // Under mu: text generated and not yet taken (a piece per token, as
  // it is to be streamed), and the outcome.
  std::vector<std::string> pending;
  bool done = false;
  std::string finish_reason;  // "stop", "length", or empty with an error
  std::string error;          // a failure inside the model (HTTP 500)
  int prompt_tokens = 0, prompt_cached = 0, completion_tokens = 0;
  double prompt_ms = 0, predicted_ms = 0;
  int slot = -1;
};

struct SchedulerOptions {
  int slots = 4;
  int n_ctx = 0;          // positions per slot
  int batch = 512;        // prompt tokens evaluated per step, over all slots
  size_t max_queue = 64;  // requests waiting for a slot; more are refused
  std::string cache_type_k = "f16", cache_type_v = "f16";  // each slot's KV cache (api::SessionOptions)
};

// Counters for /metrics (monotonic since start, except the gauges).
struct SchedulerMetrics {
  uint64_t requests = 0, cancelled = 0, errors = 0;
  uint64_t prompt_tokens = 0, prompt_cached = 0, predicted_tokens = 0, steps = 0;
  double prompt_seconds = 0, predicted_seconds = 0;
  int busy_slots = 0, queued = 0, slots = 0;
};

class Scheduler {
 public:
  // Makes the slots' sessions (fails naming the context if memory is short).
  static Result<std::unique_ptr<Scheduler>> create(api::LoadedModel& model, const SchedulerOptions& options);
  ~Scheduler();  // finishes every job (cancelled) and stops the thread

  int n_ctx() const { return options_.n_ctx; }
  int slots() const { return options_.slots; }
  // Queues a job; false if the queue is full.
  bool submit(const std::shared_ptr<Job>& job);
  SchedulerMetrics metrics() const;

 private:
  struct Slot;
  Scheduler(api::LoadedModel& model, const SchedulerOptions& options);
  void loop();
  void assign_locked();
  void step();
  void finish(Slot& slot, const std::string& reason, const std::string& error = {});

  api::LoadedModel& model_;
  SchedulerOptions options_;
  std::vector<std::unique_ptr<Slot>> slots_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stopping_ = false;
  SchedulerMetrics metrics_;
  std::thread thread_;
};

}  // namespace ork::serve
