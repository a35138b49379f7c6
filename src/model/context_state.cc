// A Context's KV cache saved to a file and read back (ork chat's /save and
// /load): the positions in use, per attention layer and KV head, as the
// kernels keep them (f16 or q8_0 on the fast path, f32 on the reference
// path; q8_0 keys in whole tiles of kKvTile positions); for
// a hybrid model (ORKSESS2) also each short convolution's last
// conv_kernel - 1 inputs and each DeltaNet's state matrices and last
// convolution inputs, f32.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "core/output_file.h"
#include "model/forward.h"

namespace ork {
namespace {

constexpr char kMagic[8] = {'O', 'R', 'K', 'S', 'E', 'S', 'S', '1'};
constexpr char kMagicHybrid[8] = {'O', 'R', 'K', 'S', 'E', 'S', 'S', '2'};

struct StateHeader {
  char magic[8];
  uint32_t n_layer, n_head_kv, head_dim, n_vocab;
  uint32_t fast, n_past, n_tokens;  // fast: bit 0 the fast kernels, bit 1 q8_0 keys, bit 2 q8_0 values
  uint32_t conv_rows;  // ORKSESS2: inputs kept per short-convolution layer (ORKSESS1: 0)
};

// Floats of every DeltaNet layer's state and convolution inputs.
size_t delta_floats(const ModelConfig& c) {
  const auto layers = static_cast<size_t>(c.n_delta_layers);
  return layers * (static_cast<size_t>(c.ssm_v_heads) * c.ssm_k_dim * c.ssm_v_dim +
                   static_cast<size_t>(c.ssm_conv_kernel - 1) * static_cast<size_t>(c.ssm_qkv_dim()));
}

uint32_t kernels_word(bool fast, KvTypes t) {
  if (!fast) return 0;
  return 1u | (t.k == KvType::kQ8_0 ? 2u : 0u) | (t.v == KvType::kQ8_0 ? 4u : 0u);
}

std::string kernels_name(uint32_t word) {
  if ((word & 1) == 0) return "reference kernels";
  return fmt::format("fast kernels with a {} key and {} value cache", (word & 2) ? "q8_0" : "f16",
                     (word & 4) ? "q8_0" : "f16");
}

// One KV head's first n positions in a q8_0 cache: {code, scale} counts
// from the head's start (keys in whole tiles).
std::pair<size_t, size_t> q8_extent(int hd, int n, bool key) {
  const int64_t positions = key ? (n + kKvTile - 1) / kKvTile * kKvTile : n;
  return {static_cast<size_t>(positions) * hd, static_cast<size_t>(positions) * (hd / kKvBlock)};
}

}  // namespace

Status Context::save_state(const std::string& path, std::span<const int32_t> tokens) const {
  StateHeader h{};
  std::memcpy(h.magic, c_.is_hybrid() ? kMagicHybrid : kMagic, 8);
  h.conv_rows = c_.n_conv_layers > 0 ? static_cast<uint32_t>(c_.conv_kernel - 1) : 0;
  h.n_layer = static_cast<uint32_t>(c_.n_layer);
  h.n_head_kv = static_cast<uint32_t>(c_.n_head_kv);
  h.head_dim = static_cast<uint32_t>(c_.head_dim);
  h.n_vocab = static_cast<uint32_t>(c_.n_vocab);
  h.fast = kernels_word(fast_kernels(), kv_types_);
  h.n_past = static_cast<uint32_t>(n_past_);
  h.n_tokens = static_cast<uint32_t>(tokens.size());
  ORK_ASSIGN_OR_RETURN(OutputFile f, OutputFile::create(path));
  ORK_RETURN_IF_ERROR(f.write(&h, sizeof h));
  ORK_RETURN_IF_ERROR(f.write(tokens.data(), tokens.size() * 4));
  const size_t hd = static_cast<size_t>(c_.head_dim), kv = static_cast<size_t>(c_.kv_dim());
  for (int l = 0; l < c_.n_kv_layers; ++l) {
    for (int which = 0; which < 2; ++which) {
      if (fast_kernels() && (which == 0 ? kv_types_.k : kv_types_.v) == KvType::kQ8_0) {
        const std::vector<int8_t>& codes = which == 0 ? k_codes8_ : v_codes8_;
        const std::vector<float>& scales = which == 0 ? k_scales8_ : v_scales8_;
        const KvQ8Layout q8(c_.head_dim, n_ctx_);
        const auto [n_codes, n_scales] = q8_extent(c_.head_dim, n_past_, which == 0);
        for (int h2 = 0; h2 < c_.n_head_kv && !codes.empty(); ++h2) {
          const size_t head = static_cast<size_t>(l) * c_.n_head_kv + h2;
          ORK_RETURN_IF_ERROR(f.write(&codes[head * q8.codes()], n_codes));
          ORK_RETURN_IF_ERROR(f.write(&scales[head * q8.scales()], n_scales * 4));
        }
      } else if (fast_kernels()) {
        const std::vector<uint16_t>& cache = which == 0 ? k_cache16_ : v_cache16_;
        for (int h2 = 0; h2 < c_.n_head_kv && !cache.empty(); ++h2) {
          const size_t at = ((static_cast<size_t>(l) * c_.n_head_kv + h2) * n_ctx_) * hd;
          ORK_RETURN_IF_ERROR(f.write(&cache[at], static_cast<size_t>(n_past_) * hd * 2));
        }
      } else if (!(which == 0 ? k_cache_ : v_cache_).empty()) {
        const std::vector<float>& cache = which == 0 ? k_cache_ : v_cache_;
        ORK_RETURN_IF_ERROR(f.write(&cache[static_cast<size_t>(l) * n_ctx_ * kv], static_cast<size_t>(n_past_) * kv * 4));
      }
    }
  }
  // The convolutions' last inputs, oldest first (zeros before position 0).
  const auto uE = static_cast<size_t>(c_.n_embd);
  std::vector<float> row(uE);
  for (int l = 0; l < c_.n_conv_layers; ++l) {
    for (int i = 0; i < static_cast<int>(h.conv_rows); ++i) {
      const int pos = n_past_ - static_cast<int>(h.conv_rows) + i;
      std::fill(row.begin(), row.end(), 0.0f);
      if (pos >= 0 && !conv_ring_.empty()) {
        std::copy_n(&conv_ring_[(static_cast<size_t>(l) * conv_window() + static_cast<size_t>(pos) % conv_window()) * uE],
                    uE, row.begin());
      }
      ORK_RETURN_IF_ERROR(f.write(row.data(), uE * 4));
    }
  }
  // The DeltaNets' states and convolution inputs, as they are (zero at
  // position 0: a fresh Context's are zeroed when it first evaluates).
  if (c_.has_delta_layers()) {
    if (delta_state_.empty() || n_past_ == 0) {
      const std::vector<float> zeros(delta_floats(c_), 0.0f);
      ORK_RETURN_IF_ERROR(f.write(zeros.data(), zeros.size() * 4));
    } else {
      ORK_RETURN_IF_ERROR(f.write(delta_state_.data(), delta_state_.size() * 4));
      ORK_RETURN_IF_ERROR(f.write(delta_conv_.data(), delta_conv_.size() * 4));
    }
  }
  return f.commit();
}

Result<std::vector<int32_t>> Context::load_state(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return error(StatusCode::kIo, "{}: cannot read", path);
  StateHeader h{};
  in.read(reinterpret_cast<char*>(&h), sizeof h);
  const bool hybrid_file = in && std::memcmp(h.magic, kMagicHybrid, 8) == 0;
  if (!in || (!hybrid_file && std::memcmp(h.magic, kMagic, 8) != 0)) {
    return error(StatusCode::kCorrupt, "{}: not an ork session file", path);
  }
  const uint32_t conv_rows = c_.n_conv_layers > 0 ? static_cast<uint32_t>(c_.conv_kernel - 1) : 0;
  if (hybrid_file != c_.is_hybrid() || h.conv_rows != conv_rows) {
    return error(StatusCode::kInvalidArgument, "{}: saved for another model ({} short-convolution inputs per layer; this "
                 "model keeps {})", path, hybrid_file ? h.conv_rows : 0, conv_rows);
  }
  if (h.n_layer != static_cast<uint32_t>(c_.n_layer) || h.n_head_kv != static_cast<uint32_t>(c_.n_head_kv) ||
      h.head_dim != static_cast<uint32_t>(c_.head_dim) || h.n_vocab != static_cast<uint32_t>(c_.n_vocab)) {
    return error(StatusCode::kInvalidArgument, "{}: saved for another model ({} layers, {} KV heads of {}, vocab {})",
                 path, h.n_layer, h.n_head_kv, h.head_dim, h.n_vocab);
  }
  if (h.fast != kernels_word(fast_kernels(), kv_types_)) {
    return error(StatusCode::kInvalidArgument, "{}: saved on the {}; this session runs the {}", path,
                 kernels_name(h.fast), kernels_name(kernels_word(fast_kernels(), kv_types_)));
  }
  if (static_cast<int>(h.n_past) > n_ctx_ || h.n_tokens != h.n_past) {
    return error(StatusCode::kInvalidArgument, "{}: {} positions do not fit this session's context of {}", path, h.n_past,
                 n_ctx_);
  }
  std::vector<int32_t> tokens(h.n_tokens);
  in.read(reinterpret_cast<char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * 4));
  for (int32_t t : tokens) {
    if (t < 0 || t >= c_.n_vocab) return error(StatusCode::kCorrupt, "{}: token {} is outside the vocabulary", path, t);
  }
  resize_scratch(1);
  // The cache is overwritten from here: a load that fails leaves it empty.
  truncate(0);
  const size_t hd = static_cast<size_t>(c_.head_dim), kv = static_cast<size_t>(c_.kv_dim());
  for (int l = 0; l < c_.n_kv_layers && in; ++l) {
    for (int which = 0; which < 2; ++which) {
      if (fast_kernels() && (which == 0 ? kv_types_.k : kv_types_.v) == KvType::kQ8_0) {
        std::vector<int8_t>& codes = which == 0 ? k_codes8_ : v_codes8_;
        std::vector<float>& scales = which == 0 ? k_scales8_ : v_scales8_;
        const KvQ8Layout q8(c_.head_dim, n_ctx_);
        const auto [n_codes, n_scales] = q8_extent(c_.head_dim, static_cast<int>(h.n_past), which == 0);
        if (n_codes > q8.codes()) return error(StatusCode::kCorrupt, "{}: more positions than the context holds", path);
        for (int h2 = 0; h2 < c_.n_head_kv; ++h2) {
          const size_t head = static_cast<size_t>(l) * c_.n_head_kv + h2;
          in.read(reinterpret_cast<char*>(&codes[head * q8.codes()]), static_cast<std::streamsize>(n_codes));
          in.read(reinterpret_cast<char*>(&scales[head * q8.scales()]), static_cast<std::streamsize>(n_scales * 4));
          for (size_t i = 0; i < n_scales && in; ++i) {
            if (!std::isfinite(scales[head * q8.scales() + i])) {
              return error(StatusCode::kCorrupt, "{}: a q8_0 cache scale of layer {} is {}", path, l,
                           scales[head * q8.scales() + i]);
            }
          }
        }
      } else if (fast_kernels()) {
        std::vector<uint16_t>& cache = which == 0 ? k_cache16_ : v_cache16_;
        for (int h2 = 0; h2 < c_.n_head_kv; ++h2) {
          const size_t at = ((static_cast<size_t>(l) * c_.n_head_kv + h2) * n_ctx_) * hd;
          in.read(reinterpret_cast<char*>(&cache[at]), static_cast<std::streamsize>(h.n_past * hd * 2));
        }
      } else {
        std::vector<float>& cache = which == 0 ? k_cache_ : v_cache_;
        in.read(reinterpret_cast<char*>(&cache[static_cast<size_t>(l) * n_ctx_ * kv]),
                static_cast<std::streamsize>(h.n_past * kv * 4));
      }
    }
  }
  const auto uE = static_cast<size_t>(c_.n_embd);
  for (int l = 0; l < c_.n_conv_layers && in; ++l) {
    for (int i = 0; i < static_cast<int>(conv_rows) && in; ++i) {
      const int pos = static_cast<int>(h.n_past) - static_cast<int>(conv_rows) + i;
      std::vector<float> row(uE);
      in.read(reinterpret_cast<char*>(row.data()), static_cast<std::streamsize>(uE * 4));
      if (pos >= 0) {
        std::copy(row.begin(), row.end(),
                  &conv_ring_[(static_cast<size_t>(l) * conv_window() + static_cast<size_t>(pos) % conv_window()) * uE]);
      }
    }
  }
  if (c_.has_delta_layers() && in) {
    in.read(reinterpret_cast<char*>(delta_state_.data()), static_cast<std::streamsize>(delta_state_.size() * 4));
    in.read(reinterpret_cast<char*>(delta_conv_.data()), static_cast<std::streamsize>(delta_conv_.size() * 4));
    for (float v : delta_state_) {
      if (!std::isfinite(v)) return error(StatusCode::kCorrupt, "{}: a DeltaNet state holds {}", path, v);
    }
  }
  if (!in) return error(StatusCode::kCorrupt, "{}: truncated", path);
  if (in.peek() != std::char_traits<char>::eof()) {
    return error(StatusCode::kCorrupt, "{}: bytes after the last layer's cache", path);
  }
  n_past_ = static_cast<int>(h.n_past);
  delta_mark_pos_ = -1;  // a mark is of the sequence before
  conv_lowest_ = std::max(0, n_past_ - static_cast<int>(conv_rows));
  return tokens;
}

}  // namespace ork
