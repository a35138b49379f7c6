#include "model/model.h"

#include "format/gguf/dequant.h"

namespace ork {
namespace {

class Binder {
 public:
  explicit Binder(const GgufFile& gguf) : gguf_(gguf) {}

  // A matrix of ne = [cols, rows], any dequantizable type.
  Status matrix(const std::string& name, int64_t cols, int64_t rows, ref::WeightView* out) {
    const GgufTensorInfo* t = gguf_.find_tensor(name);
    if (t == nullptr) return error(StatusCode::kNotFound, "{}: tensor '{}' is missing", gguf_.path(), name);
    if (t->dims.size() != 2 || t->dims[0] != static_cast<uint64_t>(cols) || t->dims[1] != static_cast<uint64_t>(rows)) {
      return error(StatusCode::kCorrupt, "{}: tensor '{}' has shape {}, expected [{}, {}]", gguf_.path(), name,
                   shape(*t), cols, rows);
    }
    ORK_RETURN_IF_ERROR(check_type(*t));
    *out = ref::WeightView{t->type, t->data, cols, rows, t->bytes / static_cast<uint64_t>(rows)};
    return Status::ok();
  }

  // A vector of n values, widened to f32.
  Status vector(const std::string& name, int64_t n, std::vector<float>* out) {
    const GgufTensorInfo* t = gguf_.find_tensor(name);
    if (t == nullptr) return error(StatusCode::kNotFound, "{}: tensor '{}' is missing", gguf_.path(), name);
    if (t->elems != static_cast<uint64_t>(n) || t->dims[0] != static_cast<uint64_t>(n)) {
      return error(StatusCode::kCorrupt, "{}: tensor '{}' has shape {}, expected [{}]", gguf_.path(), name, shape(*t),
                   n);
    }
    ORK_RETURN_IF_ERROR(check_type(*t));
    out->resize(static_cast<size_t>(n));
    return dequantize(t->type, t->data, out->data(), n);
  }

  bool has(const std::string& name) const { return gguf_.find_tensor(name) != nullptr; }

 private:
  Status check_type(const GgufTensorInfo& t) const {
    if (!can_dequantize(t.type)) {
      return error(StatusCode::kUnsupported, "{}: tensor '{}' has type {}, which ork cannot read yet", gguf_.path(),
                   t.name, ggml_type_name(t.type));
    }
    return Status::ok();
  }

  static std::string shape(const GgufTensorInfo& t) {
    std::string s = "[";
    for (size_t i = 0; i < t.dims.size(); ++i) s += (i ? ", " : "") + std::to_string(t.dims[i]);
    return s + "]";
  }

  const GgufFile& gguf_;
};

}  // namespace

Result<std::unique_ptr<Model>> Model::load(const std::string& path) {
  ORK_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::open(path));
  return load(std::move(gguf));
}

Result<std::unique_ptr<Model>> Model::load(GgufFile gguf) {
  std::unique_ptr<Model> model(new Model());
  model->gguf_ = std::move(gguf);
  ORK_RETURN_IF_ERROR(model->bind());
  return model;
}

Status Model::bind() {
  ORK_ASSIGN_OR_RETURN(config_, read_model_config(gguf_));
  ModelConfig& c = config_;
  Binder b(gguf_);

  const GgufTensorInfo* embd = gguf_.find_tensor("token_embd.weight");
  if (embd == nullptr) return error(StatusCode::kNotFound, "{}: tensor 'token_embd.weight' is missing", gguf_.path());
  if (embd->dims.size() != 2 || embd->dims[1] > (1u << 24)) {
    return error(StatusCode::kCorrupt, "{}: tensor 'token_embd.weight' is not [n_embd, n_vocab]", gguf_.path());
  }
  c.n_vocab = static_cast<int>(embd->dims[1]);
  ORK_RETURN_IF_ERROR(b.matrix("token_embd.weight", c.n_embd, c.n_vocab, &token_embd_));
  tied_ = !b.has("output.weight");
  if (tied_) {
    output_ = token_embd_;
  } else {
    ORK_RETURN_IF_ERROR(b.matrix("output.weight", c.n_embd, c.n_vocab, &output_));
  }
  ORK_RETURN_IF_ERROR(b.vector("output_norm.weight", c.n_embd, &output_norm_));
  if (b.has("rope_freqs.weight")) ORK_RETURN_IF_ERROR(b.vector("rope_freqs.weight", c.n_rot / 2, &rope_freqs_));

  layers_.resize(static_cast<size_t>(c.n_layer));
  for (int i = 0; i < c.n_layer; ++i) {
    LayerWeights& l = layers_[static_cast<size_t>(i)];
    const std::string p = "blk." + std::to_string(i) + ".";
    ORK_RETURN_IF_ERROR(b.vector(p + "attn_norm.weight", c.n_embd, &l.attn_norm));
    ORK_RETURN_IF_ERROR(b.matrix(p + "attn_q.weight", c.n_embd, c.q_dim(), &l.wq));
    ORK_RETURN_IF_ERROR(b.matrix(p + "attn_k.weight", c.n_embd, c.kv_dim(), &l.wk));
    ORK_RETURN_IF_ERROR(b.matrix(p + "attn_v.weight", c.n_embd, c.kv_dim(), &l.wv));
    ORK_RETURN_IF_ERROR(b.matrix(p + "attn_output.weight", c.q_dim(), c.n_embd, &l.wo));
    if (c.arch->qkv_bias) {
      ORK_RETURN_IF_ERROR(b.vector(p + "attn_q.bias", c.q_dim(), &l.bq));
      ORK_RETURN_IF_ERROR(b.vector(p + "attn_k.bias", c.kv_dim(), &l.bk));
      ORK_RETURN_IF_ERROR(b.vector(p + "attn_v.bias", c.kv_dim(), &l.bv));
    }
    if (c.arch->qk_norm) {
      ORK_RETURN_IF_ERROR(b.vector(p + "attn_q_norm.weight", c.head_dim, &l.q_norm));
      ORK_RETURN_IF_ERROR(b.vector(p + "attn_k_norm.weight", c.head_dim, &l.k_norm));
    }
    ORK_RETURN_IF_ERROR(b.vector(p + "ffn_norm.weight", c.n_embd, &l.ffn_norm));
    ORK_RETURN_IF_ERROR(b.matrix(p + "ffn_gate.weight", c.n_embd, c.n_ff, &l.w_gate));
    ORK_RETURN_IF_ERROR(b.matrix(p + "ffn_up.weight", c.n_embd, c.n_ff, &l.w_up));
    ORK_RETURN_IF_ERROR(b.matrix(p + "ffn_down.weight", c.n_ff, c.n_embd, &l.w_down));
  }
  return Status::ok();
}

uint64_t Model::weight_bytes() const {
  uint64_t total = 0;
  for (const auto& t : gguf_.tensors()) total += t.bytes;
  return total;
}

}  // namespace ork
