// Synthetic models: valid GGUF files of any supported architecture and
// shape, with deterministic random weights and a working SentencePiece-style
// vocabulary (byte fallback, so any text tokenizes). For tests, benchmarks,
// and `ork run` with no model. Their output is noise by construction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/gguf/ggml_type.h"
#include "format/gguf/gguf_writer.h"

namespace ork {

struct SynthOptions {
  std::string arch = "llama";  // llama, qwen2, qwen3, qwen2moe, qwen3moe, olmoe, lfm2, lfm2moe
  int n_embd = 256;
  int n_layer = 2;
  int n_head = 4;
  int n_head_kv = 2;
  int head_dim = 0;  // 0: n_embd / n_head
  int n_ff = 768;
  int n_vocab = 512;
  int n_ctx = 2048;
  bool tied = true;
  // Mixture of experts (needed by qwen2moe, qwen3moe, olmoe; llama with
  // experts is Mixtral): experts, experts per token, each expert's FFN
  // width (0: n_ff), the shared expert's (qwen2moe; 0: n_ff).
  int n_expert = 0;
  int n_expert_used = 0;
  int n_ff_exp = 0;
  int n_ff_shexp = 0;
  // Hybrid (lfm2, lfm2moe): the layers that attend, the others short
  // convolutions of conv_kernel taps (empty: every third, from layer 2;
  // those at or beyond n_layer are dropped); lfm2moe's dense FFN layers
  // before the experts.
  std::vector<int> attention_layers;
  int conv_kernel = 3;
  int n_dense_leading = 0;
  // Gated DeltaNets (qwen35, qwen35moe): every full_attention_interval-th
  // layer attends; the others have ssm_k_heads q/k heads of ssm_k_dim and
  // ssm_v_heads v heads of ssm_v_dim, after a convolution of
  // ssm_conv_kernel taps. Their attention rotates n_rot dims (0: a
  // quarter of head_dim, Qwen3.5's partial rotary).
  int full_attention_interval = 4;
  int ssm_conv_kernel = 4, ssm_k_heads = 2, ssm_v_heads = 4, ssm_k_dim = 64, ssm_v_dim = 64;
  int n_rot = 0;
  GgmlType type = GgmlType::kF32;  // of the matrices; norms stay F32
  uint64_t seed = 42;
};

// Named shapes: "tiny" (the built-in default), "stories" and "llama-1b"
// (the transformer of Llama-3.2-1B: n_embd 2048, 16 layers, 32 heads, 8 KV
// heads, n_ff 8192; vocab 32000, untied output, as in our llama.cpp
// comparisons), "qwen3moe-30b-a3b" (Qwen3-30B-A3B's transformer: n_embd
// 2048, 48 layers, 32 heads, 4 KV heads, head_dim 128, 128 experts with 8
// used, expert n_ff 768; vocab 32000, untied; sets the architecture),
// "lfm2-8b-a1b" (LFM2-8B-A1B: lfm2moe, n_embd 2048, 24 layers of which 2,
// 6, 10, 14, 18 and 21 attend (32 heads, 8 KV heads) and the rest are short
// convolutions of 3 taps, the first 2 FFNs dense (7168), then 32 experts
// with 4 used, expert n_ff 1792; vocab 65536, tied), "qwen3.6-35b-a3b"
// (the Qwen3.5/3.6 35B-A3B shape: qwen35moe, n_embd 2048, 40 layers, every
// 4th gated attention of 16 heads of 256 with 2 KV heads and 64 rotated
// dims, the others gated DeltaNets of 16 q/k heads and 32 v heads of 128;
// 256 experts with 8 used, expert n_ff 512, a shared expert of 512; vocab
// 248320, untied).
// Returns false for an unknown name.
bool synth_preset(const std::string& name, SynthOptions* out);
std::string synth_preset_names();

// Validates the options (clear messages), then prepares a writer whose
// tensor data is generated on the fly by `data_fn` as it is written.
Status synth_model(const SynthOptions& options, GgufWriter* writer, GgufWriter::DataFn* data_fn);
Status synth_write_file(const SynthOptions& options, const std::string& path);
Result<std::vector<uint8_t>> synth_write_memory(const SynthOptions& options);

// Parameter count of the model these options describe.
uint64_t synth_param_count(const SynthOptions& options);

}  // namespace ork
