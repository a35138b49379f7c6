// The server's slots and the one thread that advances them (scheduler.h).
#include "serve/scheduler.h"

#include <algorithm>
#include <chrono>
#include <random>

#include <fmt/format.h>

namespace ork::serve {

using Clock = std::chrono::steady_clock;

struct Scheduler::Slot {
  int index = 0;
  std::unique_ptr<api::Session> session;
  // The request being served (null: the slot is free; its cache stays for
  // the next prompt that shares a prefix with it).
  std::shared_ptr<Job> job;
  std::unique_ptr<api::Sampler> sampler;
  api::TextStream stream;
  std::vector<int32_t> pending;  // to evaluate: the prompt's rest, or the last token sampled
  size_t pending_at = 0;         // how much of `pending` is evaluated
  bool prefilling = false;
  int generated = 0, max_tokens = 0;
  Clock::time_point t_start, t_first;
};

namespace {

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

}  // namespace

Scheduler::Scheduler(api::LoadedModel& model, const SchedulerOptions& options) : model_(model), options_(options) {}

Result<std::unique_ptr<Scheduler>> Scheduler::create(api::LoadedModel& model, const SchedulerOptions& options) {
  if (options.slots < 1 || options.n_ctx < 2 || options.batch < 1) {
    return error(StatusCode::kInvalidArgument, "server: {} slots of {} positions, batch {}: each must be positive",
                 options.slots, options.n_ctx, options.batch);
  }
  std::unique_ptr<Scheduler> s(new Scheduler(model, options));
  for (int i = 0; i < options.slots; ++i) {
    api::SessionOptions so;
    so.n_ctx = options.n_ctx;
    so.cache_type_k = options.cache_type_k;
    so.cache_type_v = options.cache_type_v;
    ORK_ASSIGN_OR_RETURN(auto session, api::Session::create(model, so));
    auto slot = std::make_unique<Slot>();
    slot->index = i;
    slot->session = std::move(session);
    s->slots_.push_back(std::move(slot));
  }
  s->metrics_.slots = options.slots;
  s->thread_ = std::thread([p = s.get()] { p->loop(); });
  return s;
}

Scheduler::~Scheduler() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Scheduler::submit(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_ || queue_.size() >= options_.max_queue) return false;
    queue_.push_back(job);
    metrics_.queued = static_cast<int>(queue_.size());
  }
  wake_.notify_all();
  return true;
}

SchedulerMetrics Scheduler::metrics() const {
  std::lock_guard<std::mutex> lk(mu_);
  return metrics_;
}

// Under mu_: each waiting job, in order, to the free slot whose cache
// holds the longest prefix of its prompt.
void Scheduler::assign_locked() {
  while (!queue_.empty()) {
    std::shared_ptr<Job> job = queue_.front();
    if (job->cancelled) {
      queue_.pop_front();
      std::lock_guard<std::mutex> jl(job->mu);
      job->done = true;
      ++metrics_.cancelled;
      job->cv.notify_all();
      continue;
    }
    Slot* best = nullptr;
    size_t best_prefix = 0;
    for (auto& s : slots_) {
      if (s->job) continue;
      const size_t p = common_prefix(s->session->tokens(), job->request.prompt);
      if (!best || p > best_prefix) {
        best = s.get();
        best_prefix = p;
      }
    }
    if (!best) return;
    queue_.pop_front();
    Slot& s = *best;
    const CompletionRequest& r = job->request;
    // At least one prompt token is evaluated, for its logits.
    // (A hybrid model may keep less: its convolutions' inputs are a window.)
    const auto keep = static_cast<size_t>(s.session->truncate(static_cast<int>(std::min(best_prefix, r.prompt.size() - 1))));
    s.pending.assign(r.prompt.begin() + static_cast<std::ptrdiff_t>(keep), r.prompt.end());
    s.pending_at = 0;
    s.prefilling = true;
    s.generated = 0;
    const int room = options_.n_ctx - static_cast<int>(r.prompt.size());
    s.max_tokens = r.max_tokens < 0 ? room : std::min(r.max_tokens, room);
    api::SamplerOptions so = r.sampling;
    if (!r.seed_given) so.seed = std::random_device{}();
    auto sampler = api::Sampler::create(so);
    s.sampler = sampler.is_ok() ? std::move(*sampler) : nullptr;
    for (int32_t t : r.prompt) {
      if (s.sampler) s.sampler->accept(t);
    }
    s.stream = api::TextStream(r.stop);
    s.t_start = Clock::now();
    s.job = job;
    job->slot = s.index;
    job->prompt_tokens = static_cast<int>(r.prompt.size());
    job->prompt_cached = static_cast<int>(keep);
    ++metrics_.busy_slots;
    ++metrics_.requests;
    metrics_.prompt_cached += keep;
    metrics_.queued = static_cast<int>(queue_.size());
  }
}

void Scheduler::finish(Slot& s, const std::string& reason, const std::string& error) {
  std::shared_ptr<Job> job = std::move(s.job);
  s.job = nullptr;
  const Clock::time_point now = Clock::now();
  const bool started = !s.prefilling;
  const double prompt_ms = ms_between(s.t_start, started ? s.t_first : now);
  const double predicted_ms = started ? ms_between(s.t_first, now) : 0;
  // The counters are settled before the client is woken: a client that
  // reads /metrics right after its answer sees its own request in them.
  {
    std::lock_guard<std::mutex> lk(mu_);
    --metrics_.busy_slots;
    metrics_.cancelled += reason == "cancelled";
    metrics_.errors += !error.empty();
    metrics_.prompt_tokens += static_cast<uint64_t>(job->prompt_tokens - job->prompt_cached);
    metrics_.predicted_tokens += static_cast<uint64_t>(s.generated);
    metrics_.prompt_seconds += prompt_ms / 1e3;
    metrics_.predicted_seconds += predicted_ms / 1e3;
  }
  {
    std::lock_guard<std::mutex> jl(job->mu);
    if (error.empty() && reason != "cancelled") {
      const std::string_view rest = s.stream.finish();
      if (!rest.empty()) job->pending.emplace_back(rest);
    }
    job->finish_reason = reason == "cancelled" ? "" : reason;
    job->error = error;
    job->completion_tokens = s.generated;
    job->prompt_ms = prompt_ms;
    job->predicted_ms = predicted_ms;
    job->done = true;
  }
  job->cv.notify_all();
}

// One batch: each decoding slot's token and chunks of new prompts (up to
// `batch` prompt tokens in all), then a token sampled for every slot whose
// logits are now its next-token scores.
void Scheduler::step() {
  std::vector<Slot*> in;
  std::vector<std::span<const int32_t>> tokens;
  int budget = options_.batch;
  for (auto& sp : slots_) {
    Slot& s = *sp;
    if (!s.job) continue;
    if (s.job->cancelled) {
      finish(s, "cancelled");
      continue;
    }
    if (!s.sampler) {
      finish(s, "", "the sampler could not be made");
      continue;
    }
    size_t n = s.pending.size() - s.pending_at;
    if (s.prefilling) {
      if (budget <= 0) continue;
      n = std::min(n, static_cast<size_t>(budget));
      budget -= static_cast<int>(n);
    }
    in.push_back(&s);
    tokens.emplace_back(s.pending.data() + s.pending_at, n);
  }
  if (in.empty()) return;
  std::vector<api::Session*> sessions;
  for (Slot* s : in) sessions.push_back(s->session.get());
  const Status st = api::Session::eval_together(sessions, tokens);
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++metrics_.steps;
  }
  if (!st.is_ok()) {
    for (Slot* s : in) finish(*s, "", st.to_string());
    return;
  }
  for (size_t i = 0; i < in.size(); ++i) {
    Slot& s = *in[i];
    s.pending_at += tokens[i].size();
    if (s.pending_at < s.pending.size()) continue;  // more of the prompt next step
    if (s.prefilling) {
      s.prefilling = false;
      s.t_first = Clock::now();
    }
    Job& job = *s.job;
    const int32_t id = s.sampler->sample(s.session->logits());
    if (!job.request.ignore_eos && model_.is_end_of_generation(id)) {
      finish(s, "stop");
      continue;
    }
    ++s.generated;
    const std::string_view text = s.stream.push(model_.piece(id));
    if (!text.empty()) {
      {
        std::lock_guard<std::mutex> jl(job.mu);
        job.pending.emplace_back(text);
        job.completion_tokens = s.generated;
      }
      // A whole answer is read at the end: its thread is woken once, then,
      // not at every token (on two cores each wake-up takes a core from
      // the batch).
      if (job.request.stream) job.cv.notify_all();
    }
    if (s.stream.stopped()) {
      finish(s, "stop");
    } else if (s.generated >= s.max_tokens || s.session->n_past() >= options_.n_ctx) {
      finish(s, "length");
    } else {
      s.pending.assign(1, id);
      s.pending_at = 0;
    }
  }
}

void Scheduler::loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      auto busy = [&] { return std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->job != nullptr; }); };
      auto free = [&] { return std::any_of(slots_.begin(), slots_.end(), [](const auto& s) { return s->job == nullptr; }); };
      wake_.wait(lk, [&] { return stopping_ || busy() || (!queue_.empty() && free()); });
      if (stopping_) break;
      assign_locked();
    }
    step();
  }
  // Shutting down: every job still held or waiting ends, with an error.
  for (auto& s : slots_) {
    if (s->job) finish(*s, "", "the server is shutting down");
  }
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& job : queue_) {
    std::lock_guard<std::mutex> jl(job->mu);
    job->error = "the server is shutting down";
    job->done = true;
    job->cv.notify_all();
  }
  queue_.clear();
}

}  // namespace ork::serve
