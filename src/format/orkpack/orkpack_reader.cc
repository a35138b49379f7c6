#include <algorithm>
#include <cmath>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

#include "core/escape.h"
#include "core/half.h"
#include "format/byte_cursor.h"
#include "format/orkpack/orkpack.h"

namespace ork {
namespace {

constexpr char kMagic[8] = {'O', 'R', 'K', 'P', 'A', 'C', 'K', '\0'};

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

bool in_range(uint64_t offset, uint64_t size, uint64_t limit) { return offset <= limit && size <= limit - offset; }

uint64_t rounded_up(uint64_t n) { return (n + kOrkpackAlign - 1) / kOrkpackAlign * kOrkpackAlign; }

Status read_entry(ByteCursor& cur, uint32_t version, uint64_t data_size, OrkpackTensor* e) {
  OrkpackTensorSpec& s = e->spec;
  ORK_RETURN_IF_ERROR(cur.read_string(&s.name, "tensor name", 4096));
  const std::string t = fmt::format("tensor '{}'", s.name);
  auto bad = [&](const std::string& what) { return Status(StatusCode::kCorrupt, t + ": " + what); };
  uint32_t tier = 0, layout = 0, n_dims = 0, rotation = 0;
  ORK_RETURN_IF_ERROR(cur.read(&tier, "tier"));
  ORK_RETURN_IF_ERROR(cur.read(&layout, "layout"));
  ORK_RETURN_IF_ERROR(cur.read(&n_dims, "dimension count"));
  const auto tier_value = tier_from_id(tier);
  if (!tier_value) return Status(StatusCode::kUnsupported, fmt::format("{}: unknown tier id {}", t, tier));
  s.tier = *tier_value;
  if (layout >= kOrkLayoutCount) return Status(StatusCode::kUnsupported, fmt::format("{}: unknown layout id {}", t, layout));
  s.layout = static_cast<OrkLayout>(layout);
  if (n_dims == 0 || n_dims > 4) return bad(fmt::format("{} dimensions (1 to 4 allowed)", n_dims));
  s.dims.resize(n_dims);
  uint64_t elems = 1;
  for (uint64_t& d : s.dims) {
    ORK_RETURN_IF_ERROR(cur.read(&d, "dimension"));
    if (d == 0 || d > (1ull << 40) || __builtin_mul_overflow(elems, d, &elems) || elems > (1ull << 42)) {
      return bad(fmt::format("absurd dimension {}", d));
    }
  }
  uint64_t k_stored = 0;
  ORK_RETURN_IF_ERROR(cur.read(&k_stored, "k_stored"));
  ORK_RETURN_IF_ERROR(cur.read(&rotation, "rotation"));
  ORK_RETURN_IF_ERROR(cur.read(&s.rotation_block, "rotation block"));
  ORK_RETURN_IF_ERROR(cur.read(&e->data_offset, "data offset"));
  ORK_RETURN_IF_ERROR(cur.read(&e->data_size, "data size"));
  ORK_RETURN_IF_ERROR(cur.read(&e->scales_offset, "scales offset"));
  ORK_RETURN_IF_ERROR(cur.read(&e->scales_size, "scales size"));
  ORK_RETURN_IF_ERROR(cur.read(&s.error, "error"));

  if (k_stored < s.dims[0] || k_stored % static_cast<uint64_t>(kTierGroup) != 0 || k_stored > s.dims[0] + 31) {
    return bad(fmt::format("k_stored {} is not ne[0] = {} rounded up to {}", k_stored, s.dims[0], kTierGroup));
  }
  s.k_stored = static_cast<int64_t>(k_stored);
  if (carried_tier(s.tier) && (k_stored % carried_block(s.tier) != 0 || k_stored != s.dims[0])) {
    return bad(fmt::format("tier {} needs rows of whole {}-weight blocks, not k_stored {} (ne[0] {})",
                           tier_name(s.tier), carried_block(s.tier), k_stored, s.dims[0]));
  }
  if (rotation > 1) return Status(StatusCode::kUnsupported, fmt::format("{}: unknown rotation {}", t, rotation));
  const uint32_t b = s.rotation_block;
  if ((rotation == 0) != (b == 0) || (b != 0 && ((b & (b - 1)) != 0 || k_stored % b != 0))) {
    return bad(fmt::format("rotation {} with block {} does not fit k_stored {}", rotation, b, k_stored));
  }
  const uint64_t rows = elems / s.dims[0];
  const uint64_t want = tier_data_bytes(s.tier, static_cast<int64_t>(rows), s.k_stored);
  if (e->data_size != want) return bad(fmt::format("{} data bytes, {} expected for its tier and shape", e->data_size, want));
  const bool has_scales = tier_info(s.tier).has_scales;
  e->scales_f16 = has_scales && version >= 2 && e->scales_size == rows * 2;
  if (e->scales_size != (has_scales ? rows * 4 : 0) && !e->scales_f16) {
    return bad(has_scales ? fmt::format("{} scale bytes, {} expected (f32){}", e->scales_size, rows * 4,
                                        version >= 2 ? fmt::format(" or {} (f16)", rows * 2) : std::string())
                          : fmt::format("{} scale bytes, 0 expected for tier {}", e->scales_size, tier_name(s.tier)));
  }
  if (e->data_offset % kOrkpackAlign != 0 || e->scales_offset % kOrkpackAlign != 0) {
    return bad(fmt::format("data at {} or scales at {} not on a {}-byte boundary", e->data_offset, e->scales_offset,
                           kOrkpackAlign));
  }
  if (!in_range(e->data_offset, e->data_size, data_size) || !in_range(e->scales_offset, e->scales_size, data_size)) {
    return bad(fmt::format("planes [{}, +{}) or scales [{}, +{}) run past the data section ({} bytes)", e->data_offset,
                           e->data_size, e->scales_offset, e->scales_size, data_size));
  }
  return Status::ok();
}

}  // namespace

void widen_f16_scales(const uint8_t* from, uint64_t n, float* to) {
  for (uint64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, from + 2 * i, 2);
    to[i] = f16_to_f32(h);
  }
}

bool OrkpackFile::sniff(const uint8_t* data, size_t size) {
  return size >= sizeof kMagic && std::memcmp(data, kMagic, sizeof kMagic) == 0;
}

bool OrkpackFile::sniff_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  uint8_t head[8] = {};
  const size_t n = std::fread(head, 1, sizeof head, f);
  std::fclose(f);
  return sniff(head, n);
}

// A NaN or infinite scale (or float weight) turns every output it touches
// into NaN: the file is refused at load, naming the tensor, rather than
// generating nothing or garbage.
Status orkpack_check_values(const OrkpackTensor& e) {
  auto bad = [&](const char* what, uint64_t index, float v) {
    return error(StatusCode::kCorrupt, "tensor '{}': {} {} is {}; ork refuses values that are not finite",
                 escape_text(e.spec.name), what, index, v);
  };
  const uint64_t n_scales = e.scales != nullptr ? static_cast<uint64_t>(e.spec.rows()) : 0;
  for (uint64_t r = 0; r < n_scales; ++r) {
    if (!std::isfinite(e.scales[r])) return bad("the scale of row", r, e.scales[r]);
  }
  switch (e.spec.tier) {
    case Tier::kF32:
      for (uint64_t i = 0; i < e.data_size / 4; ++i) {
        float v;
        std::memcpy(&v, e.data + 4 * i, 4);
        if (!std::isfinite(v)) return bad("weight", i, v);
      }
      break;
    case Tier::kF16:
    case Tier::kBf16: {
      // Both keep NaN and infinity as an all-ones exponent.
      const uint16_t exponent = e.spec.tier == Tier::kF16 ? 0x7C00 : 0x7F80;
      for (uint64_t i = 0; i < e.data_size / 2; ++i) {
        uint16_t h;
        std::memcpy(&h, e.data + 2 * i, 2);
        if ((h & exponent) == exponent) {
          return bad("weight", i, e.spec.tier == Tier::kF16 ? f16_to_f32(h) : bf16_to_f32(h));
        }
      }
      break;
    }
    default: {
      if (!carried_tier(e.spec.tier)) break;
      // The block scales d (and dmin or m), f16 in each header; q4k's and
      // q5k's sub-scales and mins are six-bit, as the source's are.
      const Tier tier = e.spec.tier;
      const CarriedLayout l = carried_layout(tier);
      const int64_t k = e.spec.k_stored, rows = e.spec.rows();
      const bool k_mins = tier == Tier::kQ4k || tier == Tier::kQ5k;
      const int f16s = k_mins || tier == Tier::kQ2k || l.header_bytes == 4 ? 2 : 1;
      const int64_t before = carried_headers_offset(tier, k);
      const int64_t blocks = k / l.block;
      const uint8_t* plane1 = e.data + carried_code_bytes(tier, k) * rows;
      for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* headers = plane1 + r * (before + blocks * l.header_bytes) + before;
        for (int64_t b = 0; b < blocks; ++b) {
          const uint8_t* h = headers + b * l.header_bytes;
          for (int f = 0; f < f16s; ++f) {
            uint16_t v;
            std::memcpy(&v, h + 2 * f, 2);
            if ((v & 0x7C00) == 0x7C00) {
              return bad(f == 0 ? "the scale d of block" : "the second scale of block", static_cast<uint64_t>(r * blocks + b),
                         f16_to_f32(v));
            }
          }
          for (int i = 4; k_mins && i < kQ4kHeaderBytes; ++i) {
            if (h[i] >= 64) {
              return error(StatusCode::kCorrupt, "tensor '{}': block {} has a sub-scale of {}; {}'s are below 64",
                           escape_text(e.spec.name), r * blocks + b, h[i], tier_name(tier));
            }
          }
          for (int i = 2; tier == Tier::kQ3k && i < kQ6kHeaderBytes; ++i) {
            const auto sc = static_cast<int8_t>(h[i]);
            if (sc < -32 || sc > 31) {
              return error(StatusCode::kCorrupt, "tensor '{}': block {} has a sub-scale of {}; q3k's are in -32..31",
                           escape_text(e.spec.name), r * blocks + b, sc);
            }
          }
        }
      }
      break;
    }
  }
  return Status::ok();
}

Result<OrkpackFile> OrkpackFile::open(const std::string& path, MappedFile::Residency residency,
                                      const std::function<bool(const std::string&)>& check_later) {
  ORK_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path, residency));
  return parse(std::move(file), check_later);
}

Result<OrkpackFile> OrkpackFile::parse(MappedFile file, const std::function<bool(const std::string&)>& check_later) {
  OrkpackFile pack;
  pack.file_ = std::move(file);
  pack.file_size_ = pack.file_.size();
  const std::string name = pack.file_.path();
  const uint8_t* base = pack.file_.data();
  const uint64_t size = pack.file_.size();
  auto fail = [&](StatusCode code, const std::string& msg) { return Status(code, name + ": " + msg); };
  if (size < 64 || !sniff(base, size)) return fail(StatusCode::kCorrupt, "not an orkpack file (bad magic or too short)");
  pack.version_ = load<uint32_t>(base + 8);
  if (pack.version_ < kOrkpackOldestVersion || pack.version_ > kOrkpackVersion) {
    return fail(StatusCode::kUnsupported,
                fmt::format("orkpack version {} is not supported (this ork reads versions {} to {}); repack it with this ork",
                            pack.version_, kOrkpackOldestVersion, kOrkpackVersion));
  }
  if (load<uint32_t>(base + 12) != 64) return fail(StatusCode::kCorrupt, "header size is not 64");
  const auto meta_off = load<uint64_t>(base + 16), meta_size = load<uint64_t>(base + 24);
  const auto dir_off = load<uint64_t>(base + 32), dir_size = load<uint64_t>(base + 40);
  const auto data_off = load<uint64_t>(base + 48), data_size = load<uint64_t>(base + 56);
  if (!in_range(meta_off, meta_size, size) || !in_range(dir_off, dir_size, size) || !in_range(data_off, data_size, size)) {
    return fail(StatusCode::kCorrupt, fmt::format("a section runs past the end of the file ({} bytes)", size));
  }
  if (data_off % kOrkpackPage != 0) {
    return fail(StatusCode::kCorrupt, fmt::format("data section at {} is not page aligned", data_off));
  }
  auto overlaps = [](uint64_t a, uint64_t an, uint64_t b, uint64_t bn) { return a < b + bn && b < a + an; };
  if (meta_off < 64 || dir_off < 64 || data_off < 64 || overlaps(meta_off, meta_size, dir_off, dir_size) ||
      overlaps(meta_off, meta_size, data_off, data_size) || overlaps(dir_off, dir_size, data_off, data_size)) {
    return fail(StatusCode::kCorrupt, "sections overlap");
  }
  pack.data_section_offset_ = data_off;

  auto meta = GgufFile::parse(MappedFile::from_bytes(std::vector<uint8_t>(base + meta_off, base + meta_off + meta_size),
                                                     name + " (metadata)"));
  if (!meta.is_ok()) return meta.status();
  if (!meta->tensors().empty()) return fail(StatusCode::kCorrupt, "the metadata section holds tensors");
  pack.metadata_ = std::move(meta).value();

  ByteCursor cur(base + dir_off, dir_size);
  uint64_t count = 0;
  Status s = cur.read(&count, "tensor count");
  if (!s.is_ok()) return s.with_context(name);
  if (count > dir_size / 64) return fail(StatusCode::kCorrupt, fmt::format("tensor count {} cannot fit the directory", count));
  pack.tensors_.resize(count);
  std::vector<bool> later(count);
  uint64_t widened_bytes = 0;
  for (uint64_t i = 0; i < count; ++i) {
    OrkpackTensor& e = pack.tensors_[i];
    if (!(s = read_entry(cur, pack.version_, data_size, &e)).is_ok()) return s.with_context(name);
    e.data = base + data_off + e.data_offset;
    e.scales = e.scales_size > 0 ? reinterpret_cast<const float*>(base + data_off + e.scales_offset) : nullptr;
    if (!pack.index_.emplace(e.spec.name, i).second) {
      return fail(StatusCode::kCorrupt, fmt::format("tensor '{}' appears twice", escape_text(e.spec.name)));
    }
    later[i] = check_later && check_later(e.spec.name);
    if (e.scales_f16 && !later[i]) widened_bytes += rounded_up(e.scales_size * 2);
  }
  // f16 scales widen into memory of the file's own: every reader takes f32.
  if (widened_bytes > 0) {
    pack.widened_ = HugePages(widened_bytes);
    if (pack.widened_.data() == nullptr) {
      return fail(StatusCode::kResourceExhausted, fmt::format("cannot allocate {} bytes for the widened scales", widened_bytes));
    }
  }
  uint8_t* to = pack.widened_.data();
  for (uint64_t i = 0; i < count; ++i) {
    OrkpackTensor& e = pack.tensors_[i];
    if (e.scales_f16) {
      const auto* from = reinterpret_cast<const uint8_t*>(e.scales);
      e.scales = nullptr;
      if (later[i]) continue;  // its reader widens them
      widen_f16_scales(from, static_cast<uint64_t>(e.spec.rows()), reinterpret_cast<float*>(to));
      e.scales = reinterpret_cast<const float*>(to);
      to += rounded_up(e.scales_size * 2);
    }
    if (later[i]) continue;
    if (Status finite = orkpack_check_values(e); !finite.is_ok()) return finite.with_context(name);
  }
  return pack;
}

Status OrkpackFile::keep_on_disk(const std::function<bool(const OrkpackTensor&)>& on_disk) {
  if (file_.resident() || arena_.data() != nullptr) return Status::ok();
  auto rounded = rounded_up;
  // Widened scales are in memory already: only f32 ones are copied.
  auto copied_scales = [](const OrkpackTensor& t) { return t.scales_f16 ? 0 : t.scales_size; };
  uint64_t bytes = 0;
  for (const OrkpackTensor& t : tensors_) {
    if (!on_disk(t)) bytes += rounded(t.data_size) + rounded(copied_scales(t));
  }
  HugePages arena(std::max<uint64_t>(bytes, 1));
  if (arena.data() == nullptr) {
    return error(StatusCode::kResourceExhausted, "{}: cannot allocate {:.1f} MiB for the tensors kept in memory", path(),
                 static_cast<double>(bytes) / (1 << 20));
  }
  uint8_t* at = arena.data();
  for (OrkpackTensor& t : tensors_) {
    if (on_disk(t)) {
      t.data = nullptr;
      t.scales = nullptr;
      continue;
    }
    std::memcpy(at, t.data, t.data_size);
    t.data = at;
    at += rounded(t.data_size);
    if (t.scales != nullptr && !t.scales_f16) {
      std::memcpy(at, t.scales, t.scales_size);
      t.scales = reinterpret_cast<const float*>(at);
      at += rounded(t.scales_size);
    }
  }
  // What was read through the mapping is in the page cache: let it go.
  const std::string name = path();
  if (const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
  file_ = MappedFile::from_bytes({}, name);
  arena_ = std::move(arena);
  arena_bytes_ = bytes;
  return Status::ok();
}

uint64_t OrkpackFile::rotation_seed() const {
  const auto seed = metadata_.find_int("ork.rotation.seed");
  return seed ? static_cast<uint64_t>(*seed) : 0;
}

const OrkpackTensor* OrkpackFile::find_tensor(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace ork
