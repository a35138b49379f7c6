// ork pack: GGUF in, orkpack out. Two streaming passes over the tensors —
// measure every candidate tier's error (on a sample of rows, rotated and
// not), plan, then quantize and write — each spreading tensors over the
// threads, so peak memory is a few tensors in f32, not the model. The output
// does not depend on the thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "format/gguf/ggml_type.h"
#include "ork/status.h"
#include "quant/planner.h"
#include "quant/rotation.h"
#include "quant/tier.h"

namespace ork {

class ImportanceMatrix;
class MappedFile;

struct PackOptions {
  std::string input;   // GGUF
  std::string output;  // orkpack
  // If set, the pack is built in memory (format/orkpack/orkpack_image.h)
  // into *in_memory, named `output`, and no file is written.
  MappedFile* in_memory = nullptr;
  std::optional<double> bpw;        // budget as bits per weight over all parameters
  std::optional<uint64_t> budget;   // budget in bytes (all tensors)
  // A second budget, on decode: the bits a token reads per weight it reads
  // (each tensor's bytes and parameters times its PlanTensor::read_share:
  // a MoE's routed experts at experts used / experts). Unset: none.
  std::optional<double> decode_bpw;
  bool budget_is_default = false;   // if the budget cannot be met, pack the smallest plan instead of failing
  // Carry Q3_K .. Q6_K, Q8_0, ... tensors' own codes and scales into q4k / q6k
  // (quant/carry.h) unless a rule or the tier map fixes another tier:
  // no second rounding, and no measuring.
  bool carry = true;
  // With no budget given: the source's own tensor bytes (carried tensors at
  // their carried size), so a quantized GGUF keeps its size.
  bool source_budget = false;
  const ImportanceMatrix* imatrix = nullptr;
  std::string calibration_source;   // recorded in the metadata
  // More string keys for the metadata (a cache entry records its source's
  // identity there: tools/ork/cache_room.h).
  std::vector<std::pair<std::string, std::string>> extra_metadata;
  std::vector<TierRule> rules;
  TierMap tier_map;                 // checked against the model's tensors before any work
  bool rotate = true;               // rotate tensors where it measures better
  bool gptq = true;                 // error-correcting rounding where the imatrix has covariances
  uint64_t rotation_seed = kDefaultRotationSeed;
  std::vector<Tier> candidates = {Tier::kI4, Tier::kNf4, Tier::kI5, Tier::kI6, Tier::kI8};
  int sample_rows = 256;            // rows per tensor measured for the plan
  // Measured sensitivity (`ork pack --sensitivity`, model/sensitivity.h):
  // per matrix_group(), the KL divergence of the model's logits with that
  // group alone at `sensitivity_probe`. Each tensor's errors are then
  // weighed by that divergence over its group's measured error at the
  // probe, so the plan compares what a tier costs the logits rather than
  // the tensor's own output (whose scale says little of it: over
  // tinystories656K's tensors the two differ by a factor up to 700).
  // Empty: every error weighs alike. Every planned tensor's group must be
  // here, and the probe among the candidates.
  std::map<std::string, double> sensitivity;
  Tier sensitivity_probe = Tier::kNf4;
  // Planning for a decode overlay (`ork pack --npu`): an i8s tensor is read
  // in decode by its high plane, except in the share of its matmuls whose
  // int8 result the NPU delivers in time. When set, the share for a tensor
  // (0 to 1), and i8s's planned error is that share of its int8 error plus
  // the rest of its high plane's - not its int8 error alone, which only
  // prefill and a CPU without the overlay see.
  std::function<double(const std::string& tensor)> i8s_decode_share;
  int threads = 0;                  // tensors quantized side by side (0: all cores)
  // Called with each warning found before the work starts (a rule that
  // matches nothing, importance-matrix entries the model does not have).
  std::function<void(const std::string&)> warn;
};

struct PackedTensorReport {
  std::string name;
  Tier tier;
  GgmlType source;  // the tensor's type in the GGUF
  bool rotated;
  uint64_t params;
  uint64_t bytes;
  double rel_error;  // importance-weighted relative squared error
};

struct PackReport {
  uint64_t params = 0;
  uint64_t bytes = 0;  // all tensors (planes + scales), as llama.cpp counts file bpw
  double bpw() const { return params ? 8.0 * static_cast<double>(bytes) / static_cast<double>(params) : 0.0; }
  // What a decoded token reads, on average over the routing: parameters
  // and bytes, each tensor's times its read share.
  double read_params = 0;
  double read_bytes = 0;
  double decode_bpw() const { return read_params > 0 ? 8.0 * read_bytes / read_params : 0.0; }
  std::vector<PackedTensorReport> tensors;
  std::map<std::string, Tier> tier_map;
  std::string warning;  // set when the default budget could not be met
};

// progress(phase, done, total): phase 0 measures, phase 1 writes.
using PackProgress = std::function<void(int phase, size_t done, size_t total, const std::string& tensor)>;

Result<PackReport> pack_model(const PackOptions& options, const PackProgress& progress = nullptr);

// What pack_model checks before any work - the tier map's names, the rules'
// carried tiers, the importance matrix if set - alone: a caller about to
// collect an importance matrix first (minutes on a large model) asks this
// before it, so that a mistake is told at once.
Status check_pack_inputs(const PackOptions& options);

// Whether a tensor is a MoE router (ffn_gate_inp), which keeps its values
// exactly (f32, or bf16 where that holds them) whatever the plan.
bool router_tensor(const std::string& name);

}  // namespace ork
