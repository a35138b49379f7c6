// A loaded llama-family model: its configuration and views of its weights
// inside the mapped GGUF or orkpack file (never copied, except small 1-D
// tensors such as norms and biases, which are widened to f32 once at load).
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "format/gguf/gguf.h"
#include "format/orkpack/orkpack.h"
#include "quant/weight_view.h"
#include "model/config.h"
#include "model/expert_cache.h"

namespace ork {

struct LayerWeights {
  std::vector<float> attn_norm;
  WeightView wq, wk, wv, wo;
  std::vector<float> bq, bk, bv;          // qwen2 only
  std::vector<float> q_norm, k_norm;      // qwen3 only
  // A short-convolution layer (lfm2): in_proj to B, C, X (3 x n_embd
  // rows), the depthwise kernel as [tap][channel] (tap conv_kernel - 1 the
  // current token), out_proj.
  WeightView conv_in, conv_out;
  std::vector<float> conv_w;
  // A gated DeltaNet layer (qwen35): q, k, v in one projection, the output
  // gate z, beta and alpha per v-head, the convolution's kernel as
  // [tap][channel], dt bias and A (negative) per v-head, the output norm
  // (per v-head dims), out_proj.
  WeightView ssm_qkv, ssm_gate, ssm_beta, ssm_alpha, ssm_out;
  std::vector<float> ssm_conv_w, ssm_dt_bias, ssm_a, ssm_norm;
  std::vector<float> ffn_norm;
  WeightView w_gate, w_up, w_down;  // dense FFN

  // Mixture of experts: the router (n_embd -> n_expert logits) and each
  // expert's matrices; qwen2moe's shared expert and its gate vector.
  WeightView router;
  std::vector<WeightView> gate_exps, up_exps, down_exps;
  WeightView gate_shexp, up_shexp, down_shexp;
  std::vector<float> shexp_gate;
  std::vector<float> expert_bias;  // exp_probs_b: added to the gates to choose the top k only (lfm2moe)
};


class Model {
 public:
  // Validates every tensor the architecture needs (name, shape, type) and
  // takes ownership of the file. Errors name the file and the tensor.
  static Result<std::unique_ptr<Model>> load(GgufFile gguf);
  static Result<std::unique_ptr<Model>> load(OrkpackFile pack);
  // Opens a GGUF or an orkpack, whichever the file is: mapped, or read into
  // memory of its own on huge pages (MappedFile::Residency), which decodes
  // faster.
  static Result<std::unique_ptr<Model>> load(const std::string& path,
                                             MappedFile::Residency residency = MappedFile::Residency::kMapped);
  // A Mixture-of-Experts orkpack within `budget` bytes of memory: every
  // tensor but the routed experts is read into memory, reserve(config)
  // bytes are left for what the caller will allocate (KV cache, buffers),
  // and the rest holds an expert cache (ExpertCache) from which the
  // experts are read on demand. Refused, naming the numbers, when the
  // resident part, the reserve and the smallest cache do not fit.
  // `o.bytes` is ignored.
  static Result<std::unique_ptr<Model>> load_experts_on_disk(
      const std::string& path, uint64_t budget, const std::function<uint64_t(const ModelConfig&)>& reserve,
      const ExpertCacheOptions& o);
  // What a command loads: a model that fits `budget` bytes (0: the memory
  // available, less a margin) with reserve(config) beside it is loaded as
  // load(path, residency) does; a Mixture-of-Experts orkpack that does not
  // is loaded with load_experts_on_disk. A mapping asked for (kMapped) with
  // no budget is a mapping.
  static Result<std::unique_ptr<Model>> load_within_budget(const std::string& path, MappedFile::Residency residency,
                                                           uint64_t budget,
                                                           const std::function<uint64_t(const ModelConfig&)>& reserve,
                                                           const ExpertCacheOptions& o);
  // Bytes of an orkpack that stay in memory with load_experts_on_disk
  // (everything but the routed experts), and those of the routed experts.
  static Result<std::pair<uint64_t, uint64_t>> resident_and_expert_bytes(const std::string& path);
  // Whether an orkpack entry is a routed expert's matrix ("<name>_exps.weight.e<i>").
  static bool routed_expert_tensor(const std::string& name);

  const ModelConfig& config() const { return config_; }
  // Metadata (and, for a GGUF, the tensors). For an orkpack: its metadata only.
  const GgufFile& gguf() const { return pack_ ? pack_->metadata() : gguf_; }
  const std::string& path() const { return pack_ ? pack_->path() : gguf_.path(); }
  // Read into memory of its own (MappedFile::Residency::kResident), not mapped.
  bool resident() const { return pack_ ? pack_->resident() : gguf_.resident(); }
  const OrkpackFile* orkpack() const { return pack_ ? &*pack_ : nullptr; }
  const WeightView& token_embd() const { return token_embd_; }
  const WeightView& output() const { return output_; }
  const std::vector<float>& output_norm() const { return output_norm_; }
  const std::vector<float>& rope_freqs() const { return rope_freqs_; }
  const LayerWeights& layer(int i) const { return layers_[static_cast<size_t>(i)]; }
  bool tied_embeddings() const { return tied_; }
  uint64_t weight_bytes() const;
  // Weight bytes every decoded token reads: each matrix once, the embedding
  // only for its one row unless it is also the output matrix, and no
  // routed expert (those depend on routing: see Context::moe_stats).
  uint64_t dense_bytes_per_token() const;
  // The expert cache of a model loaded with load_experts_on_disk (else
  // null): the routed experts' views in layer() then have no data, and a
  // Context asks the cache for them.
  ExpertCache* expert_cache() const { return expert_cache_.get(); }
  // Something a layer above keeps as long as the model, made by `make` at
  // the first call only (thread-safe): model/expert_pages.h's upkeep of the
  // routed experts' pages, which a Context starts. Released before the
  // weights it may read.
  void attach_once(const std::function<std::shared_ptr<void>()>& make) const {
    std::call_once(attached_once_, [&] { attached_ = make(); });
  }
  // Every matrix's view (a MoE tensor's experts one by one, named
  // "<tensor>.e<i>"; a tied output matrix beside the embedding, under its
  // name). The mutable form lets a caller point a matrix at other weights
  // for a while - model/sensitivity.h measures a tensor's effect so - and
  // put it back; a Context made meanwhile reads whatever the views say.
  std::vector<const WeightView*> matrix_views() const;
  std::vector<WeightView*> mutable_matrix_views();

 private:
  Model() = default;
  Status bind();

  GgufFile gguf_;
  std::optional<OrkpackFile> pack_;
  ModelConfig config_;
  WeightView token_embd_;
  WeightView output_;
  bool tied_ = false;
  std::vector<float> output_norm_;
  std::vector<float> rope_freqs_;
  std::vector<LayerWeights> layers_;
  // "<name>.e<i>" for each expert of a GGUF's 3-D tensors (views point here),
  // the names an orkpack gives its entries: importance matrices key on them.
  std::deque<std::string> expert_names_;
  std::unique_ptr<ExpertCache> expert_cache_;

  // attach_once()'s (a const call: what it keeps does not change the
  // model). Last, so destroyed first.
  mutable std::once_flag attached_once_;
  mutable std::shared_ptr<void> attached_;
};

}  // namespace ork
