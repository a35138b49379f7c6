// Fuzz target for the orkpack reader: whatever it accepts must be readable
// in full by the reference dequantizer and bindable as a model.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "format/orkpack/orkpack.h"
#include "model/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ork;
  auto pack = OrkpackFile::parse(MappedFile::from_bytes(std::vector<uint8_t>(data, data + size), "fuzz.orkpack"));
  if (!pack.is_ok()) return 0;
  std::vector<float> row;
  for (const OrkpackTensor& t : pack->tensors()) {
    if (t.spec.rows() > 4096 || t.spec.k_stored > (1 << 16)) continue;
    row.resize(static_cast<size_t>(t.spec.k_stored));
    for (int64_t r = 0; r < t.spec.rows(); ++r) dequantize_tier_row(t.view(), r, row.data());
  }
  (void)Model::load(std::move(pack).value());
  return 0;
}
