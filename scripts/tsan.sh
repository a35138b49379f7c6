#!/usr/bin/env bash
# The threaded tests under ThreadSanitizer: the thread pool, decode's fused
# loops with their lock-free follow-up work (MoE and dense, two and three
# threads), batched MoE prefill, the packer's parallel passes and the NPU
# engine's sessions, the output files' signal handling, the expert cache's I/O threads
# and the decode threads that await them. scripts/test.sh runs
# it; run it alone after touching anything that threads share.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=$(nproc)
cmake --preset tsan >/dev/null
cmake --build --preset tsan -j "$JOBS" --target test_core test_synth test_model test_quant test_engines test_experts test_dispatch
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 ctest --preset tsan -j "$JOBS" \
  -R '^(ThreadPool|Moe|Profile|Context|Logits|Golden|Pack|NpuModel|Npu|OutputFile|ExpertCache|DirectReader|DispatchExperts|DispatchOverlay|JobSlots)'
