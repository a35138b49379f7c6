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
  // time (a copy of the whole matrix in bytes would double the memory it
  // already holds); a covariance's lower triangle is mirrored into the
  // whole matrix there.
  struct Data {
    const std::vector<float>* values;
    int64_t lower_k;  // a lower triangle's K, else 0
  };
  std::vector<Data> data;
  auto add = [&](const std::string& name, const std::vector<float>& v, int64_t lower_k, std::vector<uint64_t> dims) {
    data.push_back({&v, lower_k});
    return w.add_tensor(name, GgmlType::kF32, std::move(dims));
  };
  for (const auto& [name, v] : entries_) {
    w.set(kCountPrefix + name, GgufValue::make_uint64(v.count));
    const auto k = static_cast<int64_t>(v.raw.size());
    ORK_RETURN_IF_ERROR(add(name + ".in_sq", v.raw, 0, {v.raw.size()}));
    ORK_RETURN_IF_ERROR(add(name + ".in_sq_rot", v.rotated, 0, {v.rotated.size()}));
    if (!v.cov_lower.empty()) ORK_RETURN_IF_ERROR(add(name + ".in_cov", v.cov_lower, k, {v.raw.size(), v.raw.size()}));
  }
  std::vector<float> row;
  return w.write_file(path, [&](size_t i, std::vector<uint8_t>& out) {
    const std::vector<float>& v = *data[i].values;
    const int64_t k = data[i].lower_k;
    if (k == 0) {
      std::memcpy(out.data(), v.data(), out.size());
      return;
    }
    row.resize(static_cast<size_t>(k));
    for (int64_t r = 0; r < k; ++r) {
      for (int64_t c = 0; c < k; ++c) row[static_cast<size_t>(c)] = v[ImportanceVectors::lower_at(r, c)];
      std::memcpy(out.data() + r * k * static_cast<int64_t>(sizeof(float)), row.data(), row.size() * sizeof(float));
    }
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
    const auto ends_with = [&](const std::string& suffix) {
      return t.name.size() > suffix.size() && t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    // Each name's shape: the second moments a square matrix, the rest vectors.
    const bool is_cov = ends_with(".in_cov");
    const bool shaped = is_cov ? t.dims.size() == 2 && t.dims[0] == t.dims[1] : t.dims.size() == 1;
    if (!is_cov && !ends_with(".in_sq") && !ends_with(".in_sq_rot")) {
      return error(StatusCode::kCorrupt, "{}: unexpected tensor '{}'", path, escape_text(t.name));
    }
    if (t.type != GgmlType::kF32 || !shaped) {
      return error(StatusCode::kCorrupt, "{}: tensor '{}' is not an F32 {}", path, escape_text(t.name),
                   is_cov ? "square matrix" : "vector");
    }
    std::vector<float> values(t.elems);
    std::memcpy(values.data(), t.data, t.bytes);
    for (float v : values) {
      if (!std::isfinite(v) || (!is_cov && v < 0.0f)) {
        return error(StatusCode::kCorrupt, "{}: tensor '{}' holds {}", path, escape_text(t.name), v);
      }
    }
    if (is_cov) {
      // Second moments are symmetric (ork writes the mirror of the lower
      // triangle it keeps): a matrix that is not is not one, and keeping
      // its lower half would silently drop the rest.
      const auto k = static_cast<int64_t>(t.dims[0]);
      std::vector<float> lower(ImportanceVectors::lower_size(k));
      for (int64_t i = 0; i < k; ++i) {
        for (int64_t j = 0; j <= i; ++j) {
          const float a = values[static_cast<size_t>(i * k + j)], b = values[static_cast<size_t>(j * k + i)];
          if (a != b) {
            return error(StatusCode::kCorrupt, "{}: tensor '{}' is not symmetric: [{}, {}] is {}, [{}, {}] is {}", path,
                         escape_text(t.name), i, j, a, j, i, b);
          }
          lower[ImportanceVectors::lower_at(i, j)] = a;
        }
      }
      m.entries_[t.name.substr(0, t.name.size() - 7)].cov_lower = std::move(lower);
    } else if (ends_with(".in_sq_rot")) {
      m.entries_[t.name.substr(0, t.name.size() - 10)].rotated = std::move(values);
    } else {
      m.entries_[t.name.substr(0, t.name.size() - 6)].raw = std::move(values);
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
    if (!v.cov_lower.empty() && v.cov_lower.size() != ImportanceVectors::lower_size(static_cast<int64_t>(k))) {
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
