// ork inspect: a GGUF file's header, metadata and tensor table.
#include <cstdio>
#include <algorithm>
#include <map>

#include "commands.h"
#include "core/escape.h"
#include "format/gguf/gguf.h"
#include "format/orkpack/orkpack.h"
#include "model/config.h"

namespace ork::cli {
namespace {

struct InspectOptions {
  std::string path;
  int max_array = 8;
  bool no_tensors = false;
};

std::string shape(const GgufTensorInfo& t) {
  std::string s = "[";
  for (size_t i = 0; i < t.dims.size(); ++i) s += (i ? ", " : "") + std::to_string(t.dims[i]);
  return s + "]";
}

std::string human_bytes(uint64_t b) {
  if (b >= (1ull << 30)) return fmt::format("{:.2f} GiB", static_cast<double>(b) / (1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{:.2f} MiB", static_cast<double>(b) / (1ull << 20));
  if (b >= (1ull << 10)) return fmt::format("{:.1f} KiB", static_cast<double>(b) / (1ull << 10));
  return fmt::format("{} B", b);
}

void print_metadata(const GgufFile& g, const InspectOptions& opt) {
  fmt::print("\nmetadata ({} keys):\n", g.metadata().size());
  for (const auto& [key, value] : g.metadata()) {
    if (key == "ork.pack.tiers") {
      fmt::print("  {:<44} {:<8} ({} lines; the tier column below)\n", key, "string",
                 std::count(value.string_value.begin(), value.string_value.end(), '\n'));
      continue;
    }
    fmt::print("  {:<44} {:<8} {}\n", escape_text(key), gguf_value_type_name(value.type),
               escape_text(value.to_string(static_cast<size_t>(opt.max_array))));
  }
}

int inspect_orkpack(const InspectOptions& opt) {
  auto pack = OrkpackFile::open(opt.path);
  if (!pack.is_ok()) return fail(pack.status().to_string());
  const OrkpackFile& p = *pack;
  fmt::print("{}: orkpack v{}, {} bytes, rotation seed {:#x}\n", p.path(), p.version(), p.file_size(), p.rotation_seed());
  print_metadata(p.metadata(), opt);
  uint64_t total_bytes = 0, total_elems = 0;
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_tier;
  for (const OrkpackTensor& t : p.tensors()) {
    uint64_t elems = 1;
    for (uint64_t d : t.spec.dims) elems *= d;
    const uint64_t bytes = t.data_size + t.scales_size;
    total_bytes += bytes;
    total_elems += elems;
    auto& acc = by_tier[std::string(tier_name(t.spec.tier))];
    acc.first += bytes;
    acc.second += elems;
  }
  // The source's type of each tensor, where the pack recorded it.
  std::map<std::string, std::string> source_type;
  if (const GgufValue* v = p.metadata().find("ork.pack.source_types"); v != nullptr && v->is_array()) {
    for (const std::string& e : v->strings) {
      const size_t eq = e.rfind('=');
      if (eq != std::string::npos) source_type[e.substr(0, eq)] = e.substr(eq + 1);
    }
  }
  auto source_of = [&](const std::string& name) -> std::string {
    auto it = source_type.find(name);
    if (it == source_type.end()) {
      const size_t dot = name.rfind(".e");  // a MoE unit: its 3-D tensor's type
      if (dot != std::string::npos) it = source_type.find(name.substr(0, dot));
    }
    return it != source_type.end() ? it->second : "?";
  };
  if (!opt.no_tensors) {
    fmt::print("\ntensors ({}):\n  {:<36} {:<7} {:<6} {:<6} {:<18} {:>8} {:>6} {:>12} {:>7} {:>10}\n", p.tensors().size(),
               "name", "source", "tier", "scales", "shape (ne)", "k_stored", "rot", "bytes", "bpw", "rel.error");
    for (const OrkpackTensor& t : p.tensors()) {
      std::string shape = "[";
      uint64_t elems = 1;
      for (size_t i = 0; i < t.spec.dims.size(); ++i) {
        shape += (i ? ", " : "") + std::to_string(t.spec.dims[i]);
        elems *= t.spec.dims[i];
      }
      shape += "]";
      const uint64_t bytes = t.data_size + t.scales_size;
      const char* scales = t.scales_size == 0 ? "-" : t.scales_f16 ? "f16" : "f32";
      fmt::print("  {:<36} {:<7} {:<6} {:<6} {:<18} {:>8} {:>6} {:>12} {:>7.3f} {:>10.3g}\n", escape_text(t.spec.name),
                 escape_text(source_of(t.spec.name)), tier_name(t.spec.tier), scales, shape,
                 t.spec.k_stored, t.spec.rotation_block, bytes, 8.0 * static_cast<double>(bytes) / static_cast<double>(elems),
                 t.spec.error);
    }
  }
  fmt::print("\ntotal: {} tensors, {} parameters, {} ({:.3f} bits per weight, as llama.cpp counts)\n", p.tensors().size(),
             total_elems, human_bytes(total_bytes),
             total_elems ? 8.0 * static_cast<double>(total_bytes) / static_cast<double>(total_elems) : 0.0);
  for (const auto& [tier, acc] : by_tier) {
    fmt::print("  {:<5} {:>14} params {:>12}\n", tier, acc.second, human_bytes(acc.first));
  }
  return 0;
}

int inspect(const InspectOptions& opt) {
  if (OrkpackFile::sniff_file(opt.path)) return inspect_orkpack(opt);
  auto gguf = GgufFile::open(opt.path);
  if (!gguf.is_ok()) return fail(gguf.status().to_string());
  const GgufFile& g = *gguf;
  fmt::print("{}: GGUF v{}, {} bytes, alignment {}, data at {}\n", g.path(), g.version(), g.file_size(), g.alignment(),
             g.data_offset());
  print_metadata(g, opt);

  uint64_t total_bytes = 0, total_elems = 0;
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_type;  // bytes, elems
  for (const GgufTensorInfo& t : g.tensors()) {
    total_bytes += t.bytes;
    total_elems += t.elems;
    auto& acc = by_type[std::string(ggml_type_name(t.type))];
    acc.first += t.bytes;
    acc.second += t.elems;
  }
  if (!opt.no_tensors) {
    fmt::print("\ntensors ({}):\n  {:<36} {:<8} {:<24} {:>12}\n", g.tensors().size(), "name", "type", "shape (ne)", "bytes");
    for (const GgufTensorInfo& t : g.tensors()) {
      fmt::print("  {:<36} {:<8} {:<24} {:>12}\n", escape_text(t.name), ggml_type_name(t.type), shape(t), t.bytes);
    }
  }
  fmt::print("\ntotal: {} tensors, {} parameters, {} ({:.3f} bits per weight)\n", g.tensors().size(), total_elems,
             human_bytes(total_bytes), total_elems ? 8.0 * static_cast<double>(total_bytes) / static_cast<double>(total_elems) : 0.0);
  for (const auto& [type, acc] : by_type) {
    fmt::print("  {:<8} {:>14} params {:>12}\n", type, acc.second, human_bytes(acc.first));
  }

  if (g.find("general.architecture") != nullptr) {
    auto config = read_model_config(g);
    if (config.is_ok()) {
      const ModelConfig& c = *config;
      fmt::print("\nmodel: {}: n_embd {}, {} layers, {} heads ({} KV, head_dim {}), n_ff {}, context {}, rope base {}\n",
                 c.arch->name, c.n_embd, c.n_layer, c.n_head, c.n_head_kv, c.head_dim, c.n_ff, c.n_ctx_train,
                 c.rope_freq_base);
    } else {
      fmt::print("\nmodel: not runnable by ork: {}\n", escape_text(config.status().message()));
    }
  }
  return 0;
}

}  // namespace

Runner add_inspect(CLI::App& app) {
  auto opt = std::make_shared<InspectOptions>();
  app.add_option("model", opt->path, "GGUF or orkpack file")->required();
  app.add_option("--max-array", opt->max_array, "Array elements shown per metadata value")->capture_default_str();
  app.add_flag("--no-tensors", opt->no_tensors, "Omit the tensor table");
  return [opt] { return inspect(*opt); };
}

}  // namespace ork::cli
