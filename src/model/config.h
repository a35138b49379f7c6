// Hyper-parameters of a llama-family transformer, read from GGUF metadata
// with llama.cpp's key names (`<arch>.embedding_length`, ...).
#pragma once

#include <string>

#include "format/gguf/gguf.h"
#include "kernels/ref/ops.h"

namespace ork {

// What distinguishes one architecture of the llama family from another.
// Each architecture file (src/model/arch/) defines one.
struct ArchSpec {
  const char* name;          // general.architecture
  ref::RopeType rope_type;
  bool qkv_bias;             // attn_{q,k,v}.bias (qwen2)
  bool qk_norm;              // attn_{q,k}_norm.weight, RMSNorm per head before RoPE (qwen3)
};

const ArchSpec* find_arch(const std::string& name);
std::string supported_arch_names();

struct ModelConfig {
  const ArchSpec* arch = nullptr;
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int n_ff = 0;
  int n_vocab = 0;
  int n_ctx_train = 0;
  int n_rot = 0;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;
  float rms_eps = 1e-5f;

  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_head_kv * head_dim; }
};

// Reads and validates the hyper-parameters; errors name the file and key.
Result<ModelConfig> read_model_config(const GgufFile& gguf);

}  // namespace ork
