#include "model/expert_pages.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "model/model.h"

namespace ork {
namespace {

constexpr uintptr_t kRegion = uintptr_t{2} << 20;

// The regions [p, p + bytes) overlaps, by their first byte within it.
void add_regions(const void* p, uint64_t bytes, std::vector<const uint8_t*>& out) {
  if (p == nullptr || bytes == 0) return;
  const auto begin = reinterpret_cast<uintptr_t>(p), end = begin + bytes;
  out.push_back(static_cast<const uint8_t*>(p));
  for (uintptr_t r = (begin + kRegion) & ~(kRegion - 1); r < end; r += kRegion) {
    out.push_back(reinterpret_cast<const uint8_t*>(r));
  }
}

}  // namespace

ExpertPages::ExpertPages(const Model& model) {
  if (!model.resident() || model.expert_cache() != nullptr) return;
  for (int l = 0; l < model.config().n_layer; ++l) {
    const LayerWeights& L = model.layer(l);
    for (const auto* experts : {&L.gate_exps, &L.up_exps, &L.down_exps}) {
      for (const WeightView& w : *experts) {
        const uint64_t scales = w.scales != nullptr ? 4ull * static_cast<uint64_t>(w.rows) : 0;
        add_regions(w.data, matrix_bytes(w) - scales, regions_);
        add_regions(w.scales, scales, regions_);
      }
    }
  }
  // One address a region, in address order (a sweep walks memory forward).
  std::sort(regions_.begin(), regions_.end());
  regions_.erase(std::unique(regions_.begin(), regions_.end(),
                             [](const uint8_t* a, const uint8_t* b) {
                               return reinterpret_cast<uintptr_t>(a) / kRegion == reinterpret_cast<uintptr_t>(b) / kRegion;
                             }),
                 regions_.end());
}

ExpertPages::~ExpertPages() {
  if (pool_ == nullptr) return;
  // Take the task back if it is still this one; another's goes back in.
  const ThreadPool::Idle replaced = pool_->set_idle_task({});
  if (replaced.arg != this) (void)pool_->set_idle_task(replaced);
}

void ExpertPages::touch_next() {
  const size_t i = next_.fetch_add(1, std::memory_order_relaxed) % regions_.size();
  const uint8_t byte = *static_cast<const volatile uint8_t*>(regions_[i]);
  asm volatile("" : : "r"(byte));
}

void ExpertPages::keep(ThreadPool& pool) {
  if (regions_.empty() || pool_ != nullptr) return;
  if (const char* env = std::getenv("ORK_KEEP_EXPERT_PAGES"); env != nullptr && std::strcmp(env, "0") == 0) return;
  pool_ = &pool;
  (void)pool.set_idle_task({[](void* self) { static_cast<ExpertPages*>(self)->touch_next(); }, this});
}

}  // namespace ork
