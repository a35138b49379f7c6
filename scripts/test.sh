#!/usr/bin/env bash
# Runs ork's whole test suite:
#   1. Release build, every unit / golden / CLI test through ctest;
#   2. the same suite under AddressSanitizer + UndefinedBehaviorSanitizer;
#   3. the aarch64 cross build (g++-aarch64-linux-gnu) and its kernel tests
#      on the NEON target under qemu-aarch64;
#   4. a libFuzzer run each of the GGUF and orkpack readers (clang),
#      seeded with the regression corpora; a crash fails the run and leaves its
#      input in build/fuzz/ (add it to tests/fuzz/*corpus/ to keep it as a test).
# ORK_TEST_QUICK=1 skips steps 2 to 4. ORK_FUZZ_SECONDS sets the fuzz time
# (default 30 s per reader).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=$(nproc)

echo "== release build and tests"
cmake --preset release >/dev/null
cmake --build --preset release -j "$JOBS"
ctest --preset release -j "$JOBS"

if [ "${ORK_TEST_QUICK:-0}" = "1" ]; then exit 0; fi

echo "== sanitizer build (ASan + UBSan) and tests"
cmake --preset sanitize >/dev/null
cmake --build --preset sanitize -j "$JOBS"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --preset sanitize -j "$JOBS" -LE slow

echo "== aarch64 cross build; kernel tests on NEON under qemu-aarch64"
cmake --preset arm64 >/dev/null
cmake --build --preset arm64 -j "$JOBS"
ctest --preset arm64 -j "$JOBS"

echo "== fuzzing the GGUF and orkpack readers for ${ORK_FUZZ_SECONDS:-30}s each"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$JOBS"
work=build/fuzz/corpus
mkdir -p "$work"
cp tests/fuzz/corpus/* "$work"/
mkdir -p "$work-orkpack"
cp tests/fuzz/orkpack_corpus/* "$work-orkpack"/
(cd build/fuzz && ./tests/gguf_fuzz -max_total_time="${ORK_FUZZ_SECONDS:-30}" -rss_limit_mb=4096 \
  -max_len=131072 -print_final_stats=1 corpus 2>&1 | tail -n 6)
(cd build/fuzz && ./tests/orkpack_fuzz -max_total_time="${ORK_FUZZ_SECONDS:-30}" -rss_limit_mb=4096 \
  -max_len=131072 -print_final_stats=1 corpus-orkpack 2>&1 | tail -n 6)
echo "fuzz: no crash (a crash would have failed this script; keep its input in tests/fuzz/corpus/)"
