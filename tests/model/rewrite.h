// Test helpers: a real llama model (tinystories656K) rewritten as another
// architecture or with edited tensors, and its logits.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "format/gguf/gguf_writer.h"
#include "model/forward.h"

namespace ork::testing {

inline constexpr const char* kRewriteModel = "models/tinystories656K-f32.gguf";

// Copies a GGUF, renaming the architecture's keys to `arch` and letting
// `edit` change tensors (F32 data as floats). `drop` removes tensors by
// name; `extra` adds tensors (F32, any shape) and `keys` metadata.
using Edit = std::function<void(const std::string& name, std::vector<float>& data, const GgufTensorInfo& t)>;
struct ExtraTensor {
  std::string name;
  std::vector<uint64_t> dims;
  std::vector<float> values;
};

inline std::unique_ptr<Model> rewrite(const GgufFile& src, const std::string& arch, const Edit& edit,
                                      const std::vector<std::pair<std::string, std::vector<float>>>& vectors = {},
                                      const std::vector<ExtraTensor>& extra = {},
                                      const std::function<bool(const std::string&)>& drop = nullptr,
                                      const std::vector<std::pair<std::string, GgufValue>>& keys = {}) {
  GgufWriter w;
  const std::string old_arch = *src.get_string("general.architecture");
  for (const auto& [key, value] : src.metadata()) {
    std::string k = key;
    if (k.rfind(old_arch + ".", 0) == 0) k = arch + k.substr(old_arch.size());
    w.set(k, value);
  }
  w.set("general.architecture", GgufValue::make_string(arch));
  for (const auto& [key, value] : keys) w.set(key, value);
  auto add = [&](const std::string& name, const std::vector<uint64_t>& dims, const std::vector<float>& values) {
    std::vector<uint8_t> bytes(values.size() * 4);
    std::memcpy(bytes.data(), values.data(), bytes.size());
    EXPECT_TRUE(w.add_tensor(name, GgmlType::kF32, dims, bytes).is_ok()) << name;
  };
  for (const GgufTensorInfo& t : src.tensors()) {
    if (drop && drop(t.name)) continue;
    std::vector<float> data(t.elems);
    std::memcpy(data.data(), t.data, t.bytes);
    edit(t.name, data, t);
    add(t.name, t.dims, data);
  }
  for (const auto& [name, values] : vectors) add(name, {values.size()}, values);
  for (const ExtraTensor& t : extra) add(t.name, t.dims, t.values);
  auto gguf = GgufFile::parse(MappedFile::from_bytes(*w.write_memory(), arch + ".gguf"));
  EXPECT_TRUE(gguf.is_ok()) << gguf.status().to_string();
  if (!gguf.is_ok()) return nullptr;
  auto model = Model::load(std::move(gguf).value());
  EXPECT_TRUE(model.is_ok()) << model.status().to_string();
  return model.is_ok() ? std::move(model).value() : nullptr;
}

inline std::vector<float> logits(const Model& m, bool fast = true) {
  Context ctx(m, 32);
  ctx.set_fast_kernels(fast);
  const std::vector<int32_t> ids = {1, 80, 147, 201, 282, 57, 300, 1000};
  return *ctx.eval(ids);
}

inline float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

// attn_{q,k,v}.bias for every layer: zero for q and k, `v_value` for v.
inline std::vector<std::pair<std::string, std::vector<float>>> qkv_biases(const ModelConfig& c, float v_value = 0.0f) {
  std::vector<std::pair<std::string, std::vector<float>>> v;
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    v.push_back({p + "attn_q.bias", std::vector<float>(static_cast<size_t>(c.q_dim()), 0.0f)});
    v.push_back({p + "attn_k.bias", std::vector<float>(static_cast<size_t>(c.kv_dim()), 0.0f)});
    v.push_back({p + "attn_v.bias", std::vector<float>(static_cast<size_t>(c.kv_dim()), v_value)});
  }
  return v;
}

inline bool is_qk(const std::string& name) {
  return name.find("attn_q.weight") != std::string::npos || name.find("attn_k.weight") != std::string::npos;
}

}  // namespace ork::testing
