// A Mixture-of-Experts model larger than memory (Model::load_experts_on_disk):
// everything but the routed experts read into memory, the experts left in
// the orkpack and read on demand into an expert cache within the budget.
#include <algorithm>

#include <fmt/format.h>

#include "core/memory.h"
#include "model/model.h"

namespace ork {
namespace {

double mib(uint64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

Status not_an_orkpack(const std::string& path) {
  return error(StatusCode::kUnsupported, "{}: not an orkpack (the expert cache reads an orkpack's experts)", path);
}

// What an orkpack holds beside its routed experts and in them, and the
// model's configuration (with its vocabulary, which binding would read
// from the embedding) - what a budget is checked against before a load.
struct Footprint {
  uint64_t resident = 0, experts = 0;
  ModelConfig config;
};

Footprint footprint_of(const OrkpackFile& pack) {
  Footprint f;
  for (const OrkpackTensor& t : pack.tensors()) {
    (Model::routed_expert_tensor(t.spec.name) ? f.experts : f.resident) += t.memory_bytes();
  }
  if (auto c = read_model_config(pack.metadata()); c.is_ok()) f.config = *c;
  if (const OrkpackTensor* t = pack.find_tensor("token_embd.weight"); t != nullptr && t->spec.dims.size() == 2) {
    f.config.n_vocab = static_cast<int>(std::min<uint64_t>(t->spec.dims[1], 1u << 24));
  }
  return f;
}

// Directory and metadata only: no tensor's values are read.
Result<OrkpackFile> open_for_sizes(const std::string& path) {
  if (!OrkpackFile::sniff_file(path)) return not_an_orkpack(path);
  return OrkpackFile::open(path, MappedFile::Residency::kMapped, [](const std::string&) { return true; });
}

}  // namespace

bool Model::routed_expert_tensor(const std::string& name) {
  const size_t at = name.rfind("_exps.weight.e");
  if (at == std::string::npos) return false;
  const size_t digits = at + std::string("_exps.weight.e").size();
  if (digits == name.size()) return false;
  for (size_t i = digits; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
  }
  return true;
}

Result<std::pair<uint64_t, uint64_t>> Model::resident_and_expert_bytes(const std::string& path) {
  ORK_ASSIGN_OR_RETURN(OrkpackFile pack, open_for_sizes(path));
  const Footprint f = footprint_of(pack);
  return std::make_pair(f.resident, f.experts);
}

Result<std::unique_ptr<Model>> Model::load_experts_on_disk(const std::string& path, uint64_t budget,
                                                           const std::function<uint64_t(const ModelConfig&)>& reserve_for,
                                                           const ExpertCacheOptions& options) {
  if (!OrkpackFile::sniff_file(path)) return not_an_orkpack(path);
  // The experts' values are checked as the cache reads them, not here:
  // that would read the whole file.
  ORK_ASSIGN_OR_RETURN(OrkpackFile pack, OrkpackFile::open(path, MappedFile::Residency::kMapped, routed_expert_tensor));
  const Footprint f = footprint_of(pack);
  if (f.experts == 0) return error(StatusCode::kUnsupported, "{}: the model has no routed experts to keep on disk", path);
  const uint64_t resident = f.resident;
  const uint64_t reserve = reserve_for ? reserve_for(f.config) : 0;
  if (resident + reserve >= budget) {
    return error(StatusCode::kResourceExhausted,
                 "{}: a memory budget of {:.1f} MiB is too small: the tensors kept in memory (all but the routed experts) "
                 "take {:.1f} MiB and the KV cache and buffers {:.1f} MiB, before any expert",
                 path, mib(budget), mib(resident), mib(reserve));
  }
  const uint64_t data_at = pack.data_section_offset();
  ORK_RETURN_IF_ERROR(pack.keep_on_disk([](const OrkpackTensor& t) { return routed_expert_tensor(t.spec.name); }));
  ORK_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, load(std::move(pack)));
  const ModelConfig& c = model->config();
  if (!c.is_moe()) return error(StatusCode::kUnsupported, "{}: not a Mixture-of-Experts model", path);

  std::vector<ExpertCache::Expert> experts(static_cast<size_t>(c.n_layer) * static_cast<size_t>(c.n_expert));
  for (int l = 0; l < c.n_layer; ++l) {
    if (!c.moe_layer(l)) continue;
    const LayerWeights& L = model->layer(l);
    for (int e = 0; e < c.n_expert; ++e) {
      ExpertCache::Expert& x = experts[static_cast<size_t>(l) * static_cast<size_t>(c.n_expert) + static_cast<size_t>(e)];
      const WeightView* views[3] = {&L.gate_exps[static_cast<size_t>(e)], &L.up_exps[static_cast<size_t>(e)],
                                    &L.down_exps[static_cast<size_t>(e)]};
      for (int m = 0; m < 3; ++m) {
        const WeightView& v = *views[m];
        const OrkpackTensor* t = v.name != nullptr ? model->orkpack()->find_tensor(v.name) : nullptr;
        if (t == nullptr) return error(StatusCode::kInternal, "{}: layer {} expert {} has no orkpack entry", path, l, e);
        x.m[m].view = v;
        x.m[m].data = {data_at + t->data_offset, t->data_size};
        x.m[m].scales = {t->scales_size > 0 ? data_at + t->scales_offset : 0, t->scales_size};
        x.m[m].entry = t;
      }
    }
  }
  // Dense layers (lfm2moe's first ones) have no experts: their entries stay
  // empty, never asked for.
  ExpertCacheOptions o = options;
  o.bytes = budget - resident - reserve;
  const uint64_t slot = ExpertCache::slot_bytes_for(experts);
  const uint64_t least = slot * static_cast<uint64_t>(ExpertCache::min_slots(c.n_expert_used));
  if (o.bytes < least) {
    return error(StatusCode::kResourceExhausted,
                 "{}: a memory budget of {:.1f} MiB is too small: the tensors kept in memory take {:.1f} MiB, the KV cache "
                 "and buffers {:.1f} MiB, and the expert cache needs at least {:.1f} MiB ({} experts of {:.2f} MiB: a "
                 "layer's {} and the next layer's); give at least {:.1f} MiB",
                 path, mib(budget), mib(resident), mib(reserve), mib(least), ExpertCache::min_slots(c.n_expert_used),
                 mib(slot), c.n_expert_used, mib(resident + reserve + least));
  }
  ORK_ASSIGN_OR_RETURN(model->expert_cache_,
                       ExpertCache::create(path, std::move(experts), c.n_layer, c.n_expert, c.n_expert_used, o));
  return model;
}

Result<std::unique_ptr<Model>> Model::load_within_budget(const std::string& path, MappedFile::Residency residency,
                                                         uint64_t budget,
                                                         const std::function<uint64_t(const ModelConfig&)>& reserve,
                                                         const ExpertCacheOptions& o) {
  if (!OrkpackFile::sniff_file(path) || (budget == 0 && residency == MappedFile::Residency::kMapped)) {
    return load(path, residency);
  }
  Footprint f;
  {
    // Sizes only: the values are checked by the load that follows.
    ORK_ASSIGN_OR_RETURN(OrkpackFile pack, open_for_sizes(path));
    f = footprint_of(pack);
  }
  if (f.experts == 0) return load(path, residency);  // nothing to keep on disk
  if (budget == 0) {
    // No budget given: the model if it fits, else what is available less a
    // margin (MappedFile's own rule for a resident copy).
    if (MappedFile::resident_fits(f.resident + f.experts)) return load(path, residency);
    const std::optional<uint64_t> available = available_memory_bytes();
    if (!available) return load(path, residency);
    budget = *available - memory_margin(*available);
  } else if (f.resident + f.experts + (reserve ? reserve(f.config) : 0) <= budget) {
    return load(path, residency);
  }
  return load_experts_on_disk(path, budget, reserve, o);
}

}  // namespace ork
