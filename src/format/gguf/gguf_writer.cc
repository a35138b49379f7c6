#include "format/gguf/gguf_writer.h"


#include "core/output_file.h"

namespace ork {
namespace {

class ByteSink {
 public:
  explicit ByteSink(std::vector<uint8_t>* out) : out_(out) {}
  template <typename T>
  void put(T v) {
    put_bytes(&v, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    put_bytes(s.data(), s.size());
  }

 private:
  // Byte by byte: GCC 12 warns falsely on vector::insert and resize here.
  void put_bytes(const void* p, size_t n) {
    const auto* bytes = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) out_->push_back(bytes[i]);
  }


  std::vector<uint8_t>* out_;
};

void put_scalar(ByteSink& sink, GgufValueType type, int64_t i, double f, const std::string& s) {
  switch (type) {
    case GgufValueType::kUint8: sink.put<uint8_t>(static_cast<uint8_t>(i)); break;
    case GgufValueType::kInt8: sink.put<int8_t>(static_cast<int8_t>(i)); break;
    case GgufValueType::kUint16: sink.put<uint16_t>(static_cast<uint16_t>(i)); break;
    case GgufValueType::kInt16: sink.put<int16_t>(static_cast<int16_t>(i)); break;
    case GgufValueType::kUint32: sink.put<uint32_t>(static_cast<uint32_t>(i)); break;
    case GgufValueType::kInt32: sink.put<int32_t>(static_cast<int32_t>(i)); break;
    case GgufValueType::kUint64: sink.put<uint64_t>(static_cast<uint64_t>(i)); break;
    case GgufValueType::kInt64: sink.put<int64_t>(i); break;
    case GgufValueType::kBool: sink.put<uint8_t>(i ? 1 : 0); break;
    case GgufValueType::kFloat32: sink.put<float>(static_cast<float>(f)); break;
    case GgufValueType::kFloat64: sink.put<double>(f); break;
    case GgufValueType::kString: sink.put_string(s); break;
    case GgufValueType::kArray: break;
  }
}

void put_value(ByteSink& sink, const GgufValue& v) {
  if (!v.is_array()) {
    put_scalar(sink, v.type, v.int_value, v.float_value, v.string_value);
    return;
  }
  sink.put<uint32_t>(static_cast<uint32_t>(v.elem_type));
  sink.put<uint64_t>(v.array_size());
  for (const auto& s : v.strings) sink.put_string(s);
  for (double f : v.floats) put_scalar(sink, v.elem_type, 0, f, {});
  for (int64_t i : v.ints) put_scalar(sink, v.elem_type, i, 0, {});
  for (const auto& a : v.arrays) {
    put_value(sink, a);
  }
}

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

void GgufWriter::erase(const std::string& key) {
  std::erase_if(metadata_, [&](const auto& kv) { return kv.first == key; });
}

uint32_t GgufWriter::alignment() const {
  for (const auto& [k, v] : metadata_) {
    if (k == "general.alignment") return static_cast<uint32_t>(v.int_value);
  }
  return 32;
}

Status GgufWriter::add_tensor(const std::string& name, GgmlType type, std::vector<uint64_t> dims,
                              std::vector<uint8_t> data) {
  const auto info = ggml_type_info(static_cast<uint32_t>(type));
  if (!info) return error(StatusCode::kInvalidArgument, "tensor '{}': unknown type", name);
  if (dims.empty() || dims.size() > 4) {
    return error(StatusCode::kInvalidArgument, "tensor '{}': {} dims", name, dims.size());
  }
  if (dims[0] % info->block_elems != 0) {
    return error(StatusCode::kInvalidArgument, "tensor '{}': ne[0] = {} is not a multiple of {}'s block size {}", name,
                 dims[0], info->name, info->block_elems);
  }
  uint64_t elems = 1;
  for (uint64_t d : dims) elems *= d;
  const uint64_t bytes = elems / info->block_elems * info->block_bytes;
  if (!data.empty() && data.size() != bytes) {
    return error(StatusCode::kInvalidArgument, "tensor '{}': {} data bytes given, {} expected", name, data.size(),
                 bytes);
  }
  tensors_.push_back(Tensor{name, type, std::move(dims), bytes, std::move(data)});
  return Status::ok();
}

Status GgufWriter::write(const std::function<Status(const uint8_t*, size_t)>& sink_fn, const DataFn& data_fn) const {
  const uint64_t align = alignment();
  std::vector<uint8_t> header;
  ByteSink sink(&header);
  sink.put<uint32_t>(0x46554747);
  sink.put<uint32_t>(3);
  sink.put<uint64_t>(tensors_.size());
  sink.put<uint64_t>(metadata_.size());
  for (const auto& [key, value] : metadata_) {
    sink.put_string(key);
    sink.put<uint32_t>(static_cast<uint32_t>(value.type));
    put_value(sink, value);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    sink.put_string(t.name);
    sink.put<uint32_t>(static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) sink.put<uint64_t>(d);
    sink.put<uint32_t>(static_cast<uint32_t>(t.type));
    sink.put<uint64_t>(offset);
    offset = align_up(offset + t.bytes, align);
  }
  header.resize(align_up(header.size(), align), 0);
  ORK_RETURN_IF_ERROR(sink_fn(header.data(), header.size()));

  std::vector<uint8_t> buffer;
  const std::vector<uint8_t> zeros(align, 0);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& t = tensors_[i];
    const std::vector<uint8_t>* data = &t.data;
    if (t.data.empty()) {
      if (!data_fn) return error(StatusCode::kInvalidArgument, "tensor '{}' has no data and no DataFn", t.name);
      buffer.assign(t.bytes, 0);
      data_fn(i, buffer);
      data = &buffer;
    }
    ORK_RETURN_IF_ERROR(sink_fn(data->data(), data->size()));
    const uint64_t pad = align_up(t.bytes, align) - t.bytes;
    if (pad > 0 && i + 1 < tensors_.size()) ORK_RETURN_IF_ERROR(sink_fn(zeros.data(), pad));
  }
  return Status::ok();
}

Status GgufWriter::write_file(const std::string& path, const DataFn& data_fn) const {
  ORK_ASSIGN_OR_RETURN(OutputFile f, OutputFile::create(path));
  ORK_RETURN_IF_ERROR(write([&](const uint8_t* p, size_t n) { return f.write(p, n); }, data_fn));
  return f.commit();
}

Result<std::vector<uint8_t>> GgufWriter::write_memory(const DataFn& data_fn) const {
  std::vector<uint8_t> out;
  ORK_RETURN_IF_ERROR(write(
      [&](const uint8_t* p, size_t n) {
        out.insert(out.end(), p, p + n);
        return Status::ok();
      },
      data_fn));
  return out;
}

}  // namespace ork
