#include "model/perplexity.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <thread>

#include "core/thread_pool.h"
#include "model/forward.h"

namespace ork {

void log_softmax(std::span<float> x) {
  const float max = *std::max_element(x.begin(), x.end());
  double sum = 0;
  for (float v : x) sum += std::exp(static_cast<double>(v) - max);
  const auto log_sum = static_cast<float>(std::log(sum)) + max;
  for (float& v : x) v -= log_sum;
}

TokenScore score_token(std::span<const float> lp, std::span<const float> base, int32_t target) {
  TokenScore s;
  s.nll = -lp[static_cast<size_t>(target)];
  if (base.empty()) return s;
  s.has_base = true;
  s.base_nll = -base[static_cast<size_t>(target)];
  for (size_t i = 0; i < lp.size(); ++i) {
    const double pb = std::exp(static_cast<double>(base[i]));
    s.kld += pb * (static_cast<double>(base[i]) - lp[i]);
  }
  const auto argmax = [](std::span<const float> v) { return std::max_element(v.begin(), v.end()) - v.begin(); };
  s.same_top1 = argmax(lp) == argmax(base) ? 1.0 : 0.0;
  s.dp = std::exp(-s.nll) - std::exp(-s.base_nll);
  return s;
}

void QualityAccumulator::add(const TokenScore& s) {
  ++n_;
  nll_ += s.nll;
  nll2_ += s.nll * s.nll;
  if (!s.has_base) return;
  has_base_ = true;
  base_nll_ += s.base_nll;
  base_nll2_ += s.base_nll * s.base_nll;
  kld_ += s.kld;
  kld2_ += s.kld * s.kld;
  same_ += s.same_top1;
  dp2_ += s.dp * s.dp;
  dp4_ += s.dp * s.dp * s.dp * s.dp;
}

namespace {

// Mean and standard error of the mean from a sum and a sum of squares.
Estimate mean_of(double sum, double sum2, uint64_t n) {
  if (n == 0) return {};
  const double mean = sum / static_cast<double>(n);
  const double var = n > 1 ? std::max(0.0, (sum2 / static_cast<double>(n) - mean * mean)) * n / (n - 1.0) : 0.0;
  return {mean, std::sqrt(var / static_cast<double>(n))};
}

}  // namespace

QualityStats QualityAccumulator::finish() const {
  QualityStats s;
  s.tokens = n_;
  s.ln_ppl = mean_of(nll_, nll2_, n_);
  s.ppl = {std::exp(s.ln_ppl.value), std::exp(s.ln_ppl.value) * s.ln_ppl.err};  // delta method
  s.has_base = has_base_;
  if (has_base_) {
    const Estimate base_ln = mean_of(base_nll_, base_nll2_, n_);
    s.base_ppl = {std::exp(base_ln.value), std::exp(base_ln.value) * base_ln.err};
    s.kld = mean_of(kld_, kld2_, n_);
    s.top1 = mean_of(same_, same_, n_);
    // RMS = sqrt(mean dp^2); its error by the delta method from mean dp^2's.
    const Estimate ms = mean_of(dp2_, dp4_, n_);
    const double rms = std::sqrt(ms.value);
    s.rms_dp = {rms, rms > 0 ? ms.err / (2 * rms) : 0.0};
  }
  return s;
}

namespace {

// The log-probabilities at positions first .. n-2, decoding: positions
// 0..first as one batch, then each later one alone.
Result<WindowScores> score_window_decoding(Context& ctx, const std::vector<int32_t>& window, int first) {
  ctx.truncate(0);
  WindowScores scores;
  std::vector<float> logits;
  ORK_RETURN_IF_ERROR(ctx.eval(std::span<const int32_t>(window.data(), static_cast<size_t>(first) + 1), logits));
  for (size_t j = static_cast<size_t>(first);; ++j) {
    log_softmax(logits);
    scores.push_back(logits);
    if (j + 2 >= window.size()) break;
    ORK_RETURN_IF_ERROR(ctx.eval(std::span<const int32_t>(&window[j + 1], 1), logits));
  }
  return scores;
}

Result<WindowScores> score_window(Context& ctx, const std::vector<int32_t>& window, int first, bool decode) {
  if (decode) return score_window_decoding(ctx, window, first);
  ctx.truncate(0);
  ORK_ASSIGN_OR_RETURN(std::vector<float> logits, ctx.eval(window, /*all_logits=*/true));
  const size_t n_vocab = logits.size() / window.size();
  WindowScores scores;
  for (size_t j = static_cast<size_t>(first); j + 1 < window.size(); ++j) {
    std::vector<float> lp(logits.begin() + static_cast<long>(j * n_vocab),
                          logits.begin() + static_cast<long>((j + 1) * n_vocab));
    log_softmax(lp);
    scores.push_back(std::move(lp));
  }
  return scores;
}

}  // namespace

Result<QualityStats> measure_quality(const Model& model, const std::vector<int32_t>& tokens, int32_t bos,
                                     const PerplexityOptions& o, const Model* base,
                                     const std::vector<WindowScores>* base_scores, std::vector<WindowScores>* save_base,
                                     const std::function<void(int, int)>& progress) {
  if (o.n_ctx < 4) return error(StatusCode::kInvalidArgument, "perplexity: context {} is too short", o.n_ctx);
  int chunks = static_cast<int>(tokens.size() / static_cast<size_t>(o.n_ctx));
  if (o.max_chunks > 0) chunks = std::min(chunks, o.max_chunks);
  if (chunks == 0) {
    return error(StatusCode::kInvalidArgument, "perplexity: {} tokens do not fill one window of {} (need {})",
                 tokens.size(), o.n_ctx, o.n_ctx);
  }
  if (base != nullptr && base->config().n_vocab != model.config().n_vocab) {
    return error(StatusCode::kInvalidArgument, "the reference model's vocabulary ({}) differs from the model's ({})",
                 base->config().n_vocab, model.config().n_vocab);
  }
  if (base_scores != nullptr && static_cast<int>(base_scores->size()) < chunks) {
    return error(StatusCode::kInvalidArgument, "the KL base holds {} windows, {} are needed", base_scores->size(), chunks);
  }
  // Windows are independent: score them on several threads, each with its
  // own contexts, then accumulate in window order so results do not depend
  // on the thread count.
  const int n_threads = std::max(1, std::min(chunks, o.threads > 0 ? o.threads
                                                                     : static_cast<int>(std::thread::hardware_concurrency())));
  std::vector<std::vector<TokenScore>> per_chunk(static_cast<size_t>(chunks));
  if (save_base != nullptr) save_base->assign(static_cast<size_t>(chunks), {});
  std::vector<Status> failures(static_cast<size_t>(n_threads));
  std::atomic<int> next{0}, finished{0};
  std::mutex progress_mutex;
  const int first = o.n_ctx / 2;
  auto worker = [&](int tid) {
    // Parallel over windows already: each window's matmuls run serially.
    ThreadPool serial(1);
    Context ctx(model, o.n_ctx, &serial);
    ctx.set_fast_kernels(!o.reference_kernels);
    if (o.setup) o.setup(ctx);
    std::optional<Context> base_ctx;
    if (base != nullptr) base_ctx.emplace(*base, o.n_ctx, &serial);
    for (int c; (c = next++) < chunks;) {
      std::vector<int32_t> window(tokens.begin() + static_cast<long>(c) * o.n_ctx,
                                  tokens.begin() + static_cast<long>(c + 1) * o.n_ctx);
      if (bos >= 0) window[0] = bos;
      auto scores = score_window(ctx, window, first, o.decode);
      if (!scores.is_ok()) {
        failures[static_cast<size_t>(tid)] = scores.status();
        return;
      }
      WindowScores base_window;
      if (base_ctx) {
        auto b = score_window(*base_ctx, window, first, false);
        if (!b.is_ok()) {
          failures[static_cast<size_t>(tid)] = b.status();
          return;
        }
        base_window = std::move(b).value();
      } else if (base_scores != nullptr) {
        base_window = (*base_scores)[static_cast<size_t>(c)];
        if (base_window.size() != scores->size() || base_window[0].size() != (*scores)[0].size()) {
          failures[static_cast<size_t>(tid)] =
              error(StatusCode::kInvalidArgument, "the KL base does not match this text, context or vocabulary");
          return;
        }
      }
      auto& out = per_chunk[static_cast<size_t>(c)];
      for (size_t j = 0; j < scores->size(); ++j) {
        const int32_t target = window[static_cast<size_t>(first) + j + 1];
        out.push_back(score_token((*scores)[j],
                                  base_window.empty() ? std::span<const float>() : std::span<const float>(base_window[j]),
                                  target));
      }
      if (save_base != nullptr) (*save_base)[static_cast<size_t>(c)] = std::move(scores).value();
      if (progress) {
        std::lock_guard<std::mutex> lock(progress_mutex);
        progress(++finished, chunks);
      }
    }
    if (o.dispatch_stats != nullptr) {
      std::lock_guard<std::mutex> lock(progress_mutex);
      o.dispatch_stats->add(ctx.dispatch_stats());
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < n_threads; ++t) threads.emplace_back(worker, t);
  worker(0);
  for (auto& t : threads) t.join();
  for (const Status& s : failures) ORK_RETURN_IF_ERROR(s);
  QualityAccumulator acc;
  for (const auto& chunk : per_chunk) {
    for (const TokenScore& s : chunk) acc.add(s);
  }
  return acc.finish();
}

}  // namespace ork
