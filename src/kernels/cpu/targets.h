// The SIMD targets compiled into this binary that this machine can run, and
// a way to force one (for tests and benchmarks): every Highway kernel of
// kernels/cpu dispatches on the same choice. On ARM, NEON comes twice where
// the CPU has the ARMv8.2 dot product: "NEON_DOTPROD" (the quantized
// matmuls use sdot; the best, listed first) and plain "NEON".
#pragma once

namespace ork::cpu {

int compiled_target_count();
const char* target_name(int index);
// index in [0, compiled_target_count()); -1 restores the best.
void force_target(int index);
// The target the kernels run on now.
const char* current_target();
// Whether the NEON kernels use the dot-product instruction now (ARM with
// asimddp, unless plain NEON is forced).
bool arm_dotprod();

}  // namespace ork::cpu
