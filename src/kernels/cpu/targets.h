// The SIMD targets compiled into this binary that this machine can run, and
// a way to force one (for tests and benchmarks): every Highway kernel of
// kernels/cpu dispatches on the same choice.
#pragma once

namespace ork::cpu {

int compiled_target_count();
const char* target_name(int index);
// index in [0, compiled_target_count()); -1 restores the best.
void force_target(int index);
// The target the kernels run on now.
const char* current_target();

}  // namespace ork::cpu
