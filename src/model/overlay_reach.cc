#include "model/overlay_reach.h"

#include <algorithm>

#include "engines/engine.h"
#include "format/gguf/gguf.h"
#include "model/config.h"
#include "quant/tier.h"

namespace ork {
namespace {

struct Shape {
  int64_t k = 0, n = 0;  // input width, output rows
};

// One token's overlay jobs, group by group, by the virtual clock's rules.
class Replay {
 public:
  Replay(const Engine& npu, const ReachOptions& o) : npu_(npu), o_(o) {}

  // A group whose inputs exist now, with the device free.
  void start_group() { cpu_us_ = npu_free_us_ = 0; }
  double cpu_now() const { return cpu_us_; }

  // The CPU computes `name`; its job, opened at `open_us` (when its input
  // exists), counts if the device is predicted to finish it by then.
  void member(const std::string& name, Shape s, double open_us) {
    cpu_us_ += static_cast<double>(s.n) * (static_cast<double>(tier_stored_k(s.k)) / 2.0 + 4.0) / (o_.cpu_gbps * 1e3);
    Count& c = counts_[name];
    ++c.total;
    if (o_.overlaid && !o_.overlaid(name)) return;
    const double device = npu_.predict_us(MatmulOp{Tier::kI8s, 1, tier_stored_k(s.k), s.n});
    const double start = std::max(open_us, npu_free_us_);
    if (device < 0 || start + device > cpu_us_) return;  // predicted late: not opened
    npu_free_us_ = start + device;
    ++c.hits;
  }

  std::map<std::string, double> shares() const {
    std::map<std::string, double> out;
    for (const auto& [name, c] : counts_) out[name] = c.total > 0 ? static_cast<double>(c.hits) / c.total : 0.0;
    return out;
  }

 private:
  struct Count {
    int hits = 0, total = 0;
  };
  const Engine& npu_;
  const ReachOptions& o_;
  double cpu_us_ = 0, npu_free_us_ = 0;
  std::map<std::string, Count> counts_;
};

}  // namespace

Result<std::map<std::string, double>> overlay_reach(const GgufFile& gguf, const Engine& npu, const ReachOptions& o) {
  ORK_ASSIGN_OR_RETURN(const ModelConfig c, read_model_config(gguf));
  auto shape = [&](const std::string& name) -> const GgufTensorInfo* {
    const GgufTensorInfo* t = gguf.find_tensor(name);
    return t != nullptr && t->dims.size() >= 2 ? t : nullptr;
  };
  Replay replay(npu, o);
  std::map<std::string, bool> grouped;
  // Members present, in the forward's order, from one input.
  auto group = [&](const std::string& prefix, std::initializer_list<const char*> roles) {
    replay.start_group();
    for (const char* role : roles) {
      const std::string name = prefix + role + ".weight";
      if (const GgufTensorInfo* t = shape(name)) {
        replay.member(name, {static_cast<int64_t>(t->ne(0)), static_cast<int64_t>(t->ne(1))}, 0);
        grouped[name] = true;
      }
    }
  };
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    group(p, {"attn_q", "attn_k", "attn_v"});
    group(p, {"ffn_gate", "ffn_up"});
    group(p, {"ffn_gate_shexp", "ffn_up_shexp"});
    // The routed experts: every gate and up, then every down, once the
    // first loop has made their inputs.
    const std::string gate = p + "ffn_gate_exps.weight", up = p + "ffn_up_exps.weight", down = p + "ffn_down_exps.weight";
    const GgufTensorInfo *tg = shape(gate), *tu = shape(up), *td = shape(down);
    if (tg != nullptr && tu != nullptr && td != nullptr && c.n_expert_used > 0) {
      replay.start_group();
      for (int e = 0; e < c.n_expert_used; ++e) {
        replay.member(gate, {static_cast<int64_t>(tg->ne(0)), static_cast<int64_t>(tg->ne(1))}, 0);
        replay.member(up, {static_cast<int64_t>(tu->ne(0)), static_cast<int64_t>(tu->ne(1))}, 0);
      }
      const double downs_open = replay.cpu_now();
      for (int e = 0; e < c.n_expert_used; ++e) {
        replay.member(down, {static_cast<int64_t>(td->ne(0)), static_cast<int64_t>(td->ne(1))}, downs_open);
      }
      grouped[gate] = grouped[up] = grouped[down] = true;
    }
  }
  // Every other matrix is consumed as soon as the CPU has it - the token
  // embedding only when it is also the output head (else it is a lookup).
  const bool tied = shape("output.weight") == nullptr;
  for (const GgufTensorInfo& t : gguf.tensors()) {
    if (t.dims.size() != 2 || t.ne(1) < 2 || grouped.count(t.name) || (t.name == "token_embd.weight" && !tied)) continue;
    replay.start_group();
    replay.member(t.name, {static_cast<int64_t>(t.ne(0)), static_cast<int64_t>(t.ne(1))}, 0);
  }
  return replay.shares();
}

}  // namespace ork
