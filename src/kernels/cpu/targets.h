// The SIMD targets compiled into this binary that this machine can run, and
// a way to force one (for tests and benchmarks): every Highway kernel of
// kernels/cpu dispatches on the same choice. A target comes twice where the
// CPU has an int8 dot product for it, the dot-product form first (the best):
// on ARM "NEON_DOTPROD" (the quantized matmuls use sdot) and plain "NEON";
// on x86 "AVX3_VNNI" (AVX-512 VNNI's vpdpbusd) and plain "AVX3".
#pragma once

#include <string>

namespace ork::cpu {

int compiled_target_count();
const char* target_name(int index);
// The index of the target named `name` (as target_name gives it), or -1.
int target_index(const char* name);
// The names of every target here, best first, comma-separated.
std::string target_names();
// index in [0, compiled_target_count()); -1 restores the best.
void force_target(int index);
// The target the kernels run on now.
const char* current_target();
// Whether the quantized matmuls use the int8 dot product now (ARM with
// asimddp, x86 with AVX-512 VNNI, unless the plain target is forced).
bool int8_dot();

}  // namespace ork::cpu
