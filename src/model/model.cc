#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>

#include "core/escape.h"
#include "format/gguf/dequant.h"

namespace ork {
namespace {

// One tensor as the model binds it, from either file format.
struct TensorEntry {
  std::vector<uint64_t> dims;
  WeightView view;
  std::string type_name;
  bool readable = true;
};

// Whether any of n values of sizeof(U) bytes at p has every exponent bit of
// `mask` set (an IEEE infinity or NaN): no early exit, so it vectorises.
template <typename U>
bool any_exponent_full(const uint8_t* p, uint64_t n, U mask) {
  unsigned hit = 0;
  for (uint64_t i = 0; i < n; ++i) {
    U u;
    std::memcpy(&u, p + i * sizeof(U), sizeof(U));
    hit |= (u & mask) == mask ? 1u : 0u;
  }
  return hit != 0;
}

// The index of the first of n float values (f32, f16 or bf16) at p that is
// not finite, or -1. Blocks are scanned without an exit and only a block
// with a hit value by value. An element-by-element loop with an early exit
// read 1 GiB of bf16 in memory at 5.3 GB/s, this at 21 (the Zen 5 of
// session 44): a BF16 GGUF of 8.8 GB is scanned at every load.
template <typename U>
int64_t first_non_finite(const uint8_t* p, uint64_t n, U mask) {
  constexpr uint64_t kBlock = uint64_t{1} << 14;
  for (uint64_t b = 0; b < n; b += kBlock) {
    const uint64_t m = std::min(kBlock, n - b);
    if (!any_exponent_full<U>(p + b * sizeof(U), m, mask)) continue;
    for (uint64_t i = 0; i < m; ++i) {
      U u;
      std::memcpy(&u, p + (b + i) * sizeof(U), sizeof(U));
      if ((u & mask) == mask) return static_cast<int64_t>(b + i);
    }
  }
  return -1;
}

class Binder {
 public:
  Binder(const GgufFile& gguf, const OrkpackFile* pack, std::deque<std::string>* names)
      : gguf_(gguf), pack_(pack), names_(names) {}

  // A matrix of ne = [cols, rows].
  Status matrix(const std::string& name, int64_t cols, int64_t rows, WeightView* out) {
    ORK_ASSIGN_OR_RETURN(TensorEntry t, find(name));
    if (t.dims.size() != 2 || t.dims[0] != static_cast<uint64_t>(cols) || t.dims[1] != static_cast<uint64_t>(rows)) {
      return error(StatusCode::kCorrupt, "{}: tensor '{}' has shape {}, expected [{}, {}]", path(), name,
                   shape(t.dims), cols, rows);
    }
    *out = t.view;
    return check_float_matrix(name, t.view);
  }

  // Mixture-of-experts matrices [cols, rows] per expert: a 3-D GGUF tensor
  // [cols, rows, n_expert], or the orkpack's "<name>.e<i>" entries.
  Status experts(const std::string& name, int64_t cols, int64_t rows, int64_t n_expert,
                 std::vector<WeightView>* out) {
    out->resize(static_cast<size_t>(n_expert));
    if (pack_ != nullptr) {
      for (int64_t e = 0; e < n_expert; ++e) {
        ORK_RETURN_IF_ERROR(matrix(name + ".e" + std::to_string(e), cols, rows, &(*out)[static_cast<size_t>(e)]));
      }
      return Status::ok();
    }
    ORK_ASSIGN_OR_RETURN(TensorEntry t, find(name));
    if (t.dims.size() != 3 || t.dims[0] != static_cast<uint64_t>(cols) || t.dims[1] != static_cast<uint64_t>(rows) ||
        t.dims[2] != static_cast<uint64_t>(n_expert)) {
      return error(StatusCode::kCorrupt, "{}: tensor '{}' has shape {}, expected [{}, {}, {}]", path(), name,
                   shape(t.dims), cols, rows, n_expert);
    }
    ORK_RETURN_IF_ERROR(check_float_matrix(name, t.view));
    const uint64_t expert_bytes = t.view.row_bytes * static_cast<uint64_t>(rows);
    for (int64_t e = 0; e < n_expert; ++e) {
      WeightView v = t.view;
      v.rows = rows;
      v.data = t.view.data + static_cast<uint64_t>(e) * expert_bytes;
      v.name = names_->emplace_back(name + ".e" + std::to_string(e)).c_str();
      (*out)[static_cast<size_t>(e)] = v;
    }
    return Status::ok();
  }

  // A vector of n values, widened to f32.
  Status vector(const std::string& name, int64_t n, std::vector<float>* out) {
    ORK_ASSIGN_OR_RETURN(TensorEntry t, find(name));
    if (t.dims.size() != 1 || t.dims[0] != static_cast<uint64_t>(n)) {
      return error(StatusCode::kCorrupt, "{}: tensor '{}' has shape {}, expected [{}]", path(), name, shape(t.dims), n);
    }
    out->resize(static_cast<size_t>(n));
    dequantize_row(t.view, 0, out->data());
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite((*out)[static_cast<size_t>(i)])) {
        return error(StatusCode::kCorrupt, "{}: tensor '{}' holds {} at {}; ork refuses values that are not finite",
                     path(), escape_text(name), (*out)[static_cast<size_t>(i)], i);
      }
    }
    return Status::ok();
  }

  // A small float tensor of ne = [cols, rows] (a convolution's kernel),
  // rows x cols values widened to f32: never a matmul, so never packed.
  Status small_matrix(const std::string& name, int64_t cols, int64_t rows, std::vector<float>* out) {
    ORK_ASSIGN_OR_RETURN(TensorEntry t, find(name));
    if (t.dims.size() != 2 || t.dims[0] != static_cast<uint64_t>(cols) || t.dims[1] != static_cast<uint64_t>(rows)) {
      return error(StatusCode::kCorrupt, "{}: tensor '{}' has shape {}, expected [{}, {}]", path(), name,
                   shape(t.dims), cols, rows);
    }
    out->resize(static_cast<size_t>(cols * rows));
    std::vector<float> row(static_cast<size_t>(std::max<int64_t>(cols, t.view.k_stored)));
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(t.view, r, row.data());
      std::copy_n(row.begin(), cols, out->begin() + r * cols);
    }
    for (size_t i = 0; i < out->size(); ++i) {
      if (!std::isfinite((*out)[i])) {
        return error(StatusCode::kCorrupt, "{}: tensor '{}' holds {} at {}; ork refuses values that are not finite",
                     path(), escape_text(name), (*out)[i], i);
      }
    }
    return Status::ok();
  }

  // A GGUF's float matrices are scanned for NaN and infinity at load (an
  // orkpack's are when it is opened; block-quantized types are not: a bad
  // block scale shows as a non-finite logit, which eval refuses).
  Status check_float_matrix(const std::string& name, const WeightView& v) const {
    if (v.is_tier) return Status::ok();
    const uint64_t n = static_cast<uint64_t>(v.cols) * static_cast<uint64_t>(v.rows);
    int64_t bad = -1;
    if (v.type == GgmlType::kF32) {
      bad = first_non_finite<uint32_t>(v.data, n, 0x7F800000u);
    } else if (v.type == GgmlType::kF16 || v.type == GgmlType::kBF16) {
      bad = first_non_finite<uint16_t>(v.data, n, v.type == GgmlType::kF16 ? 0x7C00 : 0x7F80);
    }
    if (bad < 0) return Status::ok();
    return error(StatusCode::kCorrupt, "{}: tensor '{}' holds a value that is not finite in row {}; ork refuses it",
                 path(), escape_text(name), bad / v.cols);
  }

  bool has(const std::string& name) const {
    return pack_ != nullptr ? pack_->find_tensor(name) != nullptr : gguf_.find_tensor(name) != nullptr;
  }

  const std::string& path() const { return pack_ != nullptr ? pack_->path() : gguf_.path(); }

  // Every tensor of the file that no bind step asked for, in file order.
  std::vector<std::string> unused() const {
    std::vector<std::string> out;
    if (pack_ != nullptr) {
      for (const OrkpackTensor& t : pack_->tensors()) {
        if (used_.count(t.spec.name) == 0) out.push_back(t.spec.name);
      }
    } else {
      for (const GgufTensorInfo& t : gguf_.tensors()) {
        if (used_.count(t.name) == 0) out.push_back(t.name);
      }
    }
    return out;
  }

 private:
  Result<TensorEntry> find(const std::string& name) const {
    used_.insert(name);
    TensorEntry e;
    if (pack_ != nullptr) {
      const OrkpackTensor* t = pack_->find_tensor(name);
      if (t == nullptr) return error(StatusCode::kNotFound, "{}: tensor '{}' is missing", path(), name);
      e.dims = t->spec.dims;
      WeightView& v = e.view;
      v.is_tier = true;
      v.tier = t->spec.tier;
      v.data = t->data;
      v.scales = t->scales;
      v.cols = static_cast<int64_t>(t->spec.dims[0]);
      v.rows = t->spec.rows();
      v.k_stored = t->spec.k_stored;
      v.rotation_block = static_cast<int>(t->spec.rotation_block);
      v.rotation_seed = pack_->rotation_seed();
      v.name = t->spec.name.c_str();
      return e;
    }
    const GgufTensorInfo* t = gguf_.find_tensor(name);
    if (t == nullptr) return error(StatusCode::kNotFound, "{}: tensor '{}' is missing", path(), name);
    if (!can_dequantize(t->type)) {
      return error(StatusCode::kUnsupported, "{}: tensor '{}' has type {}, which ork cannot read yet", path(), t->name,
                   ggml_type_name(t->type));
    }
    e.dims = t->dims;
    // rows() counts every row of every expert of a 3-D tensor.
    e.view = WeightView{t->type, t->name.c_str(), t->data, static_cast<int64_t>(t->ne(0)),
                             static_cast<int64_t>(t->rows()), t->bytes / t->rows()};
    return e;
  }

  static std::string shape(const std::vector<uint64_t>& dims) {
    std::string s = "[";
    for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + "]";
  }

  const GgufFile& gguf_;
  const OrkpackFile* pack_;
  std::deque<std::string>* names_;
  mutable std::set<std::string> used_;
};

// A file whose tensors are not the ones its metadata describes (a block
// count too small, tensors of another architecture) must not run as if it
// were a smaller model: llama.cpp refuses such files too.
Status check_nothing_left(const Binder& b, const ModelConfig& c) {
  const std::vector<std::string> left = b.unused();
  if (left.empty()) return Status::ok();
  const std::string& first = left.front();
  if (first.rfind("blk.", 0) == 0) {
    const int block = std::atoi(first.c_str() + 4);
    if (block >= c.n_layer) {
      return error(StatusCode::kCorrupt,
                   "{}: tensor '{}' belongs to block {}, but metadata '{}.block_count' = {} ({} tensors are not part "
                   "of the model)",
                   b.path(), escape_text(first), block, c.arch->name, c.n_layer, left.size());
    }
  }
  return error(StatusCode::kCorrupt,
               "{}: tensor '{}' is not part of a {} model ({} such tensors): the file and its metadata disagree",
               b.path(), escape_text(first), c.arch->name, left.size());
}

// The kernel of a causal convolution, ne = [taps, channels], as
// [tap][channel].
Status bind_conv_kernel(Binder& b, const std::string& name, int taps, int channels, std::vector<float>* out) {
  std::vector<float> kernel;  // [channel][tap] as stored
  ORK_RETURN_IF_ERROR(b.small_matrix(name, taps, channels, &kernel));
  out->resize(kernel.size());
  for (int ch = 0; ch < channels; ++ch) {
    for (int tap = 0; tap < taps; ++tap) {
      (*out)[static_cast<size_t>(tap) * channels + ch] = kernel[static_cast<size_t>(ch) * taps + tap];
    }
  }
  return Status::ok();
}

// One gated DeltaNet layer's tensors.
Status bind_delta_net(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights* out) {
  LayerWeights& l = *out;
  const int nv = c.ssm_v_heads;
  ORK_RETURN_IF_ERROR(b.matrix(p + "attn_qkv.weight", c.n_embd, c.ssm_qkv_dim(), &l.ssm_qkv));
  ORK_RETURN_IF_ERROR(b.matrix(p + "attn_gate.weight", c.n_embd, c.ssm_inner(), &l.ssm_gate));
  ORK_RETURN_IF_ERROR(b.matrix(p + "ssm_beta.weight", c.n_embd, nv, &l.ssm_beta));
  ORK_RETURN_IF_ERROR(b.matrix(p + "ssm_alpha.weight", c.n_embd, nv, &l.ssm_alpha));
  ORK_RETURN_IF_ERROR(bind_conv_kernel(b, p + "ssm_conv1d.weight", c.ssm_conv_kernel, c.ssm_qkv_dim(), &l.ssm_conv_w));
  ORK_RETURN_IF_ERROR(b.vector(p + "ssm_dt.bias", nv, &l.ssm_dt_bias));
  ORK_RETURN_IF_ERROR(b.vector(p + "ssm_a", nv, &l.ssm_a));
  ORK_RETURN_IF_ERROR(b.vector(p + "ssm_norm.weight", c.ssm_v_dim, &l.ssm_norm));
  return b.matrix(p + "ssm_out.weight", c.ssm_inner(), c.n_embd, &l.ssm_out);
}

// One attention layer's projections, biases and QK-norm weights; a gated
// attention's q projection holds each head's gate beside its query.
Status bind_attention(Binder& b, const ModelConfig& c, const std::string& p, LayerWeights* out) {
  LayerWeights& l = *out;
  ORK_RETURN_IF_ERROR(b.matrix(p + "attn_q.weight", c.n_embd, (c.arch->gated_attention ? 2 : 1) * c.q_dim(), &l.wq));
  ORK_RETURN_IF_ERROR(b.matrix(p + "attn_k.weight", c.n_embd, c.kv_dim(), &l.wk));
  ORK_RETURN_IF_ERROR(b.matrix(p + "attn_v.weight", c.n_embd, c.kv_dim(), &l.wv));
  ORK_RETURN_IF_ERROR(b.matrix(p + "attn_output.weight", c.q_dim(), c.n_embd, &l.wo));
  if (c.arch->qkv_bias) {
    ORK_RETURN_IF_ERROR(b.vector(p + "attn_q.bias", c.q_dim(), &l.bq));
    ORK_RETURN_IF_ERROR(b.vector(p + "attn_k.bias", c.kv_dim(), &l.bk));
    ORK_RETURN_IF_ERROR(b.vector(p + "attn_v.bias", c.kv_dim(), &l.bv));
  }
  if (c.arch->qk_norm != QkNorm::kNone) {
    const bool whole = c.arch->qk_norm == QkNorm::kWhole;
    ORK_RETURN_IF_ERROR(b.vector(p + "attn_q_norm.weight", whole ? c.q_dim() : c.head_dim, &l.q_norm));
    ORK_RETURN_IF_ERROR(b.vector(p + "attn_k_norm.weight", whole ? c.kv_dim() : c.head_dim, &l.k_norm));
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Model>> Model::load(const std::string& path, MappedFile::Residency residency) {
  if (OrkpackFile::sniff_file(path)) {
    ORK_ASSIGN_OR_RETURN(OrkpackFile pack, OrkpackFile::open(path, residency));
    return load(std::move(pack));
  }
  ORK_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::open(path, residency));
  return load(std::move(gguf));
}

Result<std::unique_ptr<Model>> Model::load(OrkpackFile pack) {
  std::unique_ptr<Model> model(new Model());
  model->pack_.emplace(std::move(pack));
  ORK_RETURN_IF_ERROR(model->bind());
  return model;
}

Result<std::unique_ptr<Model>> Model::load(GgufFile gguf) {
  std::unique_ptr<Model> model(new Model());
  model->gguf_ = std::move(gguf);
  ORK_RETURN_IF_ERROR(model->bind());
  return model;
}

std::vector<WeightView*> Model::mutable_matrix_views() {
  std::vector<WeightView*> out = {&token_embd_, &output_};
  for (LayerWeights& l : layers_) {
    for (WeightView* v : {&l.wq, &l.wk, &l.wv, &l.wo, &l.conv_in, &l.conv_out, &l.ssm_qkv, &l.ssm_gate, &l.ssm_beta,
                          &l.ssm_alpha, &l.ssm_out, &l.w_gate, &l.w_up, &l.w_down, &l.router, &l.gate_shexp,
                          &l.up_shexp, &l.down_shexp}) {
      out.push_back(v);
    }
    for (auto* experts : {&l.gate_exps, &l.up_exps, &l.down_exps}) {
      for (WeightView& v : *experts) out.push_back(&v);
    }
  }
  std::erase_if(out, [](const WeightView* v) { return v->name == nullptr || v->rows == 0; });
  return out;
}

std::vector<const WeightView*> Model::matrix_views() const {
  const std::vector<WeightView*> views = const_cast<Model*>(this)->mutable_matrix_views();
  return {views.begin(), views.end()};
}

Status Model::bind() {
  ORK_ASSIGN_OR_RETURN(config_, read_model_config(gguf()));
  ModelConfig& c = config_;
  Binder b(gguf_, orkpack(), &expert_names_);

  const std::vector<uint64_t>* embd_dims = nullptr;
  if (pack_) {
    if (const OrkpackTensor* t = pack_->find_tensor("token_embd.weight")) embd_dims = &t->spec.dims;
  } else if (const GgufTensorInfo* t = gguf_.find_tensor("token_embd.weight")) {
    embd_dims = &t->dims;
  }
  if (embd_dims == nullptr) return error(StatusCode::kNotFound, "{}: tensor 'token_embd.weight' is missing", path());
  if (embd_dims->size() != 2 || (*embd_dims)[1] > (1u << 24)) {
    return error(StatusCode::kCorrupt, "{}: tensor 'token_embd.weight' is not [n_embd, n_vocab]", path());
  }
  c.n_vocab = static_cast<int>((*embd_dims)[1]);
  ORK_RETURN_IF_ERROR(b.matrix("token_embd.weight", c.n_embd, c.n_vocab, &token_embd_));
  tied_ = !b.has("output.weight");
  if (tied_) {
    output_ = token_embd_;
  } else {
    ORK_RETURN_IF_ERROR(b.matrix("output.weight", c.n_embd, c.n_vocab, &output_));
  }
  ORK_RETURN_IF_ERROR(b.vector(c.arch->output_norm, c.n_embd, &output_norm_));
  if (b.has("rope_freqs.weight")) ORK_RETURN_IF_ERROR(b.vector("rope_freqs.weight", c.n_rot / 2, &rope_freqs_));

  layers_.resize(static_cast<size_t>(c.n_layer));
  for (int i = 0; i < c.n_layer; ++i) {
    LayerWeights& l = layers_[static_cast<size_t>(i)];
    const std::string p = "blk." + std::to_string(i) + ".";
    ORK_RETURN_IF_ERROR(b.vector(p + "attn_norm.weight", c.n_embd, &l.attn_norm));
    if (c.blocks[static_cast<size_t>(i)] == BlockKind::kShortConv) {
      ORK_RETURN_IF_ERROR(b.matrix(p + "shortconv.in_proj.weight", c.n_embd, 3 * static_cast<int64_t>(c.n_embd), &l.conv_in));
      ORK_RETURN_IF_ERROR(bind_conv_kernel(b, p + "shortconv.conv.weight", c.conv_kernel, c.n_embd, &l.conv_w));
      ORK_RETURN_IF_ERROR(b.matrix(p + "shortconv.out_proj.weight", c.n_embd, c.n_embd, &l.conv_out));
    } else if (c.blocks[static_cast<size_t>(i)] == BlockKind::kDeltaNet) {
      ORK_RETURN_IF_ERROR(bind_delta_net(b, c, p, &l));
    } else {
      ORK_RETURN_IF_ERROR(bind_attention(b, c, p, &l));
    }
    ORK_RETURN_IF_ERROR(b.vector(p + c.arch->ffn_norm, c.n_embd, &l.ffn_norm));
    if (!c.moe_layer(i)) {
      ORK_RETURN_IF_ERROR(b.matrix(p + "ffn_gate.weight", c.n_embd, c.n_ff, &l.w_gate));
      ORK_RETURN_IF_ERROR(b.matrix(p + "ffn_up.weight", c.n_embd, c.n_ff, &l.w_up));
      ORK_RETURN_IF_ERROR(b.matrix(p + "ffn_down.weight", c.n_ff, c.n_embd, &l.w_down));
      continue;
    }
    ORK_RETURN_IF_ERROR(b.matrix(p + "ffn_gate_inp.weight", c.n_embd, c.n_expert, &l.router));
    ORK_RETURN_IF_ERROR(b.experts(p + "ffn_gate_exps.weight", c.n_embd, c.n_ff_exp, c.n_expert, &l.gate_exps));
    ORK_RETURN_IF_ERROR(b.experts(p + "ffn_up_exps.weight", c.n_embd, c.n_ff_exp, c.n_expert, &l.up_exps));
    ORK_RETURN_IF_ERROR(b.experts(p + "ffn_down_exps.weight", c.n_ff_exp, c.n_embd, c.n_expert, &l.down_exps));
    if (b.has(p + "exp_probs_b.bias")) ORK_RETURN_IF_ERROR(b.vector(p + "exp_probs_b.bias", c.n_expert, &l.expert_bias));
    if (c.arch->shared_expert) {
      ORK_RETURN_IF_ERROR(b.vector(p + "ffn_gate_inp_shexp.weight", c.n_embd, &l.shexp_gate));
      ORK_RETURN_IF_ERROR(b.matrix(p + "ffn_gate_shexp.weight", c.n_embd, c.n_ff_shexp, &l.gate_shexp));
      ORK_RETURN_IF_ERROR(b.matrix(p + "ffn_up_shexp.weight", c.n_embd, c.n_ff_shexp, &l.up_shexp));
      ORK_RETURN_IF_ERROR(b.matrix(p + "ffn_down_shexp.weight", c.n_ff_shexp, c.n_embd, &l.down_shexp));
    }
  }
  return check_nothing_left(b, c);
}


uint64_t Model::dense_bytes_per_token() const {
  uint64_t total = 0;
  for (const LayerWeights& L : layers_) {
    for (const WeightView* w : {&L.conv_in, &L.conv_out, &L.ssm_qkv, &L.ssm_gate, &L.ssm_beta, &L.ssm_alpha, &L.ssm_out,
                                &L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &L.router, &L.gate_shexp,
                                &L.up_shexp, &L.down_shexp}) {
      total += matrix_bytes(*w);
    }
  }
  return total + matrix_bytes(output_);
}

uint64_t Model::weight_bytes() const {
  uint64_t total = 0;
  if (pack_) {
    for (const auto& t : pack_->tensors()) total += t.data_size + t.scales_size;
  } else {
    for (const auto& t : gguf_.tensors()) total += t.bytes;
  }
  return total;
}

}  // namespace ork
