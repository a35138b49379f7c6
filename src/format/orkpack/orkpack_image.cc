#include "format/orkpack/orkpack_image.h"

#include <cstring>

namespace ork {
namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

Result<OrkpackImage> OrkpackImage::create(std::string name, const std::vector<uint8_t>& metadata,
                                          std::vector<OrkpackTensorSpec> specs) {
  OrkpackImage img;
  img.name_ = std::move(name);
  img.metadata_size_ = metadata.size();
  img.data_start_ = align_up(64 + metadata.size(), kOrkpackPage);
  uint64_t pos = img.data_start_;  // laid out as OrkpackWriter streams it
  for (OrkpackTensorSpec& spec : specs) {
    OrkpackTensor e;
    e.spec = std::move(spec);
    pos = align_up(pos, kOrkpackAlign);
    e.data_offset = pos - img.data_start_;
    e.data_size = tier_data_bytes(e.spec.tier, e.spec.rows(), e.spec.k_stored);
    pos += e.data_size;
    if (tier_info(e.spec.tier).has_scales) {
      pos = align_up(pos, kOrkpackAlign);
      e.scales_offset = pos - img.data_start_;
      e.scales_size = static_cast<uint64_t>(e.spec.rows()) * 4;
      pos += e.scales_size;
    }
    img.entries_.push_back(std::move(e));
  }
  pos = align_up(pos, kOrkpackAlign);
  img.data_size_ = pos - img.data_start_;
  img.dir_offset_ = pos;
  img.size_ = pos + orkpack_directory(img.entries_).size();  // its size does not depend on the errors
  img.image_ = HugePages(img.size_);
  if (img.image_.data() == nullptr) {
    return error(StatusCode::kResourceExhausted, "{}: cannot allocate {} bytes to convert into", img.name_, img.size_);
  }
  std::memcpy(img.image_.data() + 64, metadata.data(), metadata.size());
  return img;
}

float* OrkpackImage::scales(size_t i) const {
  const OrkpackTensor& e = entries_[i];
  if (e.scales_size == 0) return nullptr;
  return reinterpret_cast<float*>(image_.data() + data_start_ + e.scales_offset);
}

MappedFile OrkpackImage::finish() && {
  const std::vector<uint8_t> dir = orkpack_directory(entries_);
  std::memcpy(image_.data() + dir_offset_, dir.data(), dir.size());
  const std::vector<uint8_t> header = orkpack_header(metadata_size_, dir_offset_, dir.size(), data_start_, data_size_);
  std::memcpy(image_.data(), header.data(), header.size());
  return MappedFile::from_pages(std::move(image_), size_, name_);
}

}  // namespace ork
