#include "quant/imatrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/escape.h"
#include "format/gguf/gguf_writer.h"
#include "quant/tier.h"

namespace ork {

// Per input, the rows it saw, as metadata beside its tensors (a file
// without them still reads: the count is then unknown, 0).
constexpr char kCountPrefix[] = "imatrix.count.";

Status ImportanceMatrix::save(const std::string& path, const std::string& source) const {
  GgufWriter w;
  w.set("general.type", GgufValue::make_string("imatrix"));
  w.set("imatrix.tokens", GgufValue::make_uint64(tokens_));
  w.set("imatrix.rotation.seed", GgufValue::make_uint64(rotation_seed_));
  w.set("imatrix.source", GgufValue::make_string(source));
  // Each tensor's floats are copied out as the file is written, one at a
  // time: a copy of the whole matrix in bytes would double the memory the
  // matrix already holds (about 10 GB of covariances for the full qwen3.6).
  std::vector<const std::vector<float>*> data;
  auto add = [&](const std::string& name, const std::vector<float>& v, std::vector<uint64_t> dims) -> Status {
    data.push_back(&v);
    return w.add_tensor(name, GgmlType::kF32, std::move(dims));
  };
  for (const auto& [name, v] : entries_) {
    w.set(kCountPrefix + name, GgufValue::make_uint64(v.count));
    ORK_RETURN_IF_ERROR(add(name + ".in_sq", v.raw, {v.raw.size()}));
    ORK_RETURN_IF_ERROR(add(name + ".in_sq_rot", v.rotated, {v.rotated.size()}));
    if (!v.cov.empty()) ORK_RETURN_IF_ERROR(add(name + ".in_cov", v.cov, {v.raw.size(), v.raw.size()}));
  }
  return w.write_file(path, [&](size_t i, std::vector<uint8_t>& out) {
    std::memcpy(out.data(), data[i]->data(), out.size());
  });
}

Result<ImportanceMatrix> ImportanceMatrix::load(const std::string& path) {
  ORK_ASSIGN_OR_RETURN(GgufFile g, GgufFile::open(path));
  return parse(g);
}

Result<ImportanceMatrix> ImportanceMatrix::parse(const GgufFile& g) {
  const std::string& path = g.path();
  if (g.find_string("general.type") != "imatrix") {
    return error(StatusCode::kInvalidArgument, "{}: not an ork importance matrix (general.type is not 'imatrix')", path);
  }
  ImportanceMatrix m;
  m.tokens_ = static_cast<uint64_t>(g.find_int("imatrix.tokens").value_or(0));
  m.rotation_seed_ = static_cast<uint64_t>(g.find_int("imatrix.rotation.seed").value_or(0));
  for (const GgufTensorInfo& t : g.tensors()) {
    const bool is_cov = t.dims.size() == 2 && t.dims[0] == t.dims[1];
    if (t.type != GgmlType::kF32 || (t.dims.size() != 1 && !is_cov)) {
      return error(StatusCode::kCorrupt, "{}: tensor '{}' is not an F32 vector or square matrix", path,
                   escape_text(t.name));
    }
    std::vector<float> values(t.elems);
    std::memcpy(values.data(), t.data, t.bytes);
    for (float v : values) {
      if (!std::isfinite(v) || (!is_cov && v < 0.0f)) {
        return error(StatusCode::kCorrupt, "{}: tensor '{}' holds {}", path, escape_text(t.name), v);
      }
    }
    const auto ends_with = [&](const std::string& suffix) {
      return t.name.size() > suffix.size() && t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (ends_with(".in_cov")) {
      m.entries_[t.name.substr(0, t.name.size() - 7)].cov = std::move(values);
    } else if (ends_with(".in_sq_rot")) {
      m.entries_[t.name.substr(0, t.name.size() - 10)].rotated = std::move(values);
    } else if (ends_with(".in_sq")) {
      m.entries_[t.name.substr(0, t.name.size() - 6)].raw = std::move(values);
    } else {
      return error(StatusCode::kCorrupt, "{}: unexpected tensor '{}'", path, escape_text(t.name));
    }
  }
  // The three views of one input must describe the same K.
  for (auto& [name, v] : m.entries_) {
    v.count = static_cast<uint64_t>(std::max<int64_t>(0, g.find_int(kCountPrefix + name).value_or(0)));
    const size_t k = v.raw.size();
    if (k == 0) return error(StatusCode::kCorrupt, "{}: entry '{}' has no '.in_sq' vector", path, escape_text(name));
    if (!v.rotated.empty() && v.rotated.size() != static_cast<size_t>(tier_stored_k(static_cast<int64_t>(k)))) {
      return error(StatusCode::kCorrupt, "{}: entry '{}': '.in_sq_rot' has {} values, '.in_sq' {}", path,
                   escape_text(name), v.rotated.size(), k);
    }
    if (!v.cov.empty() && v.cov.size() != k * k) {
      return error(StatusCode::kCorrupt, "{}: entry '{}': '.in_cov' is not {} x {}", path, escape_text(name), k, k);
    }
  }
  return m;
}

const ImportanceVectors* ImportanceMatrix::find(const std::string& weight) const {
  const auto it = entries_.find(weight);
  return it == entries_.end() ? nullptr : &it->second;
}

}  // namespace ork
