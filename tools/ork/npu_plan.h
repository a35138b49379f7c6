// Planning a pack for a device with an NPU: `ork pack --npu PROFILE`, and a
// float GGUF run with --npu (its in-memory pack, model_cache.h).
#pragma once

#include <string>

#include "ork/status.h"
#include "quant/packer.h"

namespace ork::cli {

// Plans `o` (its input set) for `profile`: only tiers the NPU reads - i4,
// nf4 (through its 16-entry int8 table) and i8s, the overlay's sensitive
// set - so that every matmul can be routed there in prefill; i5 and i6 are
// CPU-only and left out. i8s is priced by what decode reads of it: its
// int8 error where the overlay is predicted to land in time on this
// profile (model/overlay_reach.h), its high plane's elsewhere. Says on
// stderr what it planned for and where the overlay reaches.
Status plan_for_npu(const std::string& profile, PackOptions& o);

}  // namespace ork::cli
