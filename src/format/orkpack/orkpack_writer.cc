#include "format/orkpack/orkpack.h"

#include <algorithm>

#include "core/half.h"

namespace ork {

bool f16_scales_exact(std::span<const float> scales) {
  return std::all_of(scales.begin(), scales.end(),
                     [](float s) { return bits_from_f32(f16_to_f32(f32_to_f16(s))) == bits_from_f32(s); });
}

int64_t OrkpackTensorSpec::rows() const {
  int64_t rows = 1;
  for (size_t i = 1; i < dims.size(); ++i) rows *= static_cast<int64_t>(dims[i]);
  return rows;
}

Status OrkpackWriter::write(const void* p, size_t n) {
  ORK_RETURN_IF_ERROR(file_.write(p, n));
  pos_ += n;
  return Status::ok();
}

Status OrkpackWriter::pad_to(uint64_t alignment) {
  static const uint8_t zeros[kOrkpackPage] = {};
  const uint64_t pad = (alignment - pos_ % alignment) % alignment;
  return write(zeros, pad);
}

Result<OrkpackWriter> OrkpackWriter::create(const std::string& path, const std::vector<uint8_t>& metadata) {
  OrkpackWriter w;
  // The header is written last (back at offset 0).
  ORK_ASSIGN_OR_RETURN(w.file_, OutputFile::create(path, /*seekable=*/true));
  const std::vector<uint8_t> header(64, 0);  // rewritten by finish()
  ORK_RETURN_IF_ERROR(w.write(header.data(), header.size()));
  ORK_RETURN_IF_ERROR(w.write(metadata.data(), metadata.size()));
  w.metadata_size_ = metadata.size();
  ORK_RETURN_IF_ERROR(w.pad_to(kOrkpackPage));
  w.data_start_ = w.pos_;
  return w;
}

Status OrkpackWriter::add_tensor(const OrkpackTensorSpec& spec, std::span<const uint8_t> data,
                                 std::span<const float> scales) {
  const uint64_t want = tier_data_bytes(spec.tier, spec.rows(), spec.k_stored);
  const uint64_t want_scales = tier_info(spec.tier).has_scales ? static_cast<uint64_t>(spec.rows()) : 0;
  if (data.size() != want || scales.size() != want_scales) {
    return error(StatusCode::kInternal, "{}: tensor '{}': {} data bytes and {} scales given, {} and {} expected", file_.path(),
                 spec.name, data.size(), scales.size(), want, want_scales);
  }
  OrkpackTensor e;
  e.spec = spec;
  ORK_RETURN_IF_ERROR(pad_to(kOrkpackAlign));
  e.data_offset = pos_ - data_start_;
  e.data_size = data.size();
  ORK_RETURN_IF_ERROR(write(data.data(), data.size()));
  if (!scales.empty()) {
    ORK_RETURN_IF_ERROR(pad_to(kOrkpackAlign));
    e.scales_offset = pos_ - data_start_;
    e.scales_size = orkpack_scale_bytes(scales);
    if (e.scales_size == scales.size() * 4) {
      ORK_RETURN_IF_ERROR(write(scales.data(), e.scales_size));
    } else {
      std::vector<uint16_t> halves(scales.size());
      std::transform(scales.begin(), scales.end(), halves.begin(), f32_to_f16);
      ORK_RETURN_IF_ERROR(write(halves.data(), e.scales_size));
      e.scales_f16 = true;
    }
  }
  entries_.push_back(std::move(e));
  return Status::ok();
}

namespace {

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(p[i]);
}

}  // namespace

std::vector<uint8_t> orkpack_directory(const std::vector<OrkpackTensor>& entries) {
  std::vector<uint8_t> dir;
  put<uint64_t>(dir, entries.size());
  for (const OrkpackTensor& e : entries) {
    const OrkpackTensorSpec& s = e.spec;
    put<uint64_t>(dir, s.name.size());
    for (char c : s.name) dir.push_back(static_cast<uint8_t>(c));
    put<uint32_t>(dir, static_cast<uint32_t>(s.tier));
    put<uint32_t>(dir, static_cast<uint32_t>(s.layout));
    put<uint32_t>(dir, static_cast<uint32_t>(s.dims.size()));
    for (uint64_t d : s.dims) put<uint64_t>(dir, d);
    put<uint64_t>(dir, static_cast<uint64_t>(s.k_stored));
    put<uint32_t>(dir, s.rotation_block > 0 ? 1u : 0u);
    put<uint32_t>(dir, s.rotation_block);
    put<uint64_t>(dir, e.data_offset);
    put<uint64_t>(dir, e.data_size);
    put<uint64_t>(dir, e.scales_offset);
    put<uint64_t>(dir, e.scales_size);
    put<float>(dir, s.error);
  }
  return dir;
}

std::vector<uint8_t> orkpack_header(uint64_t metadata_size, uint64_t dir_offset, uint64_t dir_size, uint64_t data_start,
                                    uint64_t data_size) {
  std::vector<uint8_t> header;
  for (char c : std::string("ORKPACK", 8)) header.push_back(static_cast<uint8_t>(c));
  put<uint32_t>(header, kOrkpackVersion);
  put<uint32_t>(header, 64);
  put<uint64_t>(header, 64);
  put<uint64_t>(header, metadata_size);
  put<uint64_t>(header, dir_offset);
  put<uint64_t>(header, dir_size);
  put<uint64_t>(header, data_start);
  put<uint64_t>(header, data_size);
  return header;
}

Status OrkpackWriter::finish() {
  ORK_RETURN_IF_ERROR(pad_to(kOrkpackAlign));
  const uint64_t data_size = pos_ - data_start_;
  const std::vector<uint8_t> dir = orkpack_directory(entries_);
  const uint64_t dir_offset = pos_;
  ORK_RETURN_IF_ERROR(write(dir.data(), dir.size()));
  const std::vector<uint8_t> header = orkpack_header(metadata_size_, dir_offset, dir.size(), data_start_, data_size);
  ORK_RETURN_IF_ERROR(file_.write_at(0, header.data(), header.size()));
  return file_.commit();
}

}  // namespace ork
