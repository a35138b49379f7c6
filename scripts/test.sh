#!/usr/bin/env bash
# Runs ork's whole test suite:
#   1. Release build, every unit / golden / CLI test through ctest;
#   2. the same suite under AddressSanitizer + UndefinedBehaviorSanitizer;
#   3. the threaded tests under ThreadSanitizer (scripts/tsan.sh);
#   4. the aarch64 cross build (g++-aarch64-linux-gnu) and its kernel tests
#      on the NEON target under qemu-aarch64;
#   5. a libFuzzer run of each reader of user input (GGUF, orkpack, tokenizer
#      text, tier maps, importance matrices, chat templates, request bodies,
#      GGUF blocks; built in step 2), seeded with the regression corpora, as
#      many at a time as there are cores; a crash fails the run
#      and leaves its input in build/sanitize/fuzz/ (add it to
#      tests/fuzz/<target>_corpus/ to keep it as a test).
# ORK_TEST_QUICK=1 skips steps 2 to 5. ORK_FUZZ_SECONDS sets the fuzz time
# (default 20 s per reader).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=$(nproc)
# What the tests convert or calibrate goes into the build tree, never into
# the user's ~/.cache/ork (kept between runs: calibrations are reused).
export ORK_CACHE_DIR="${ORK_CACHE_DIR:-$PWD/build/test-cache}"
# Each step says when it starts, how long the run has taken so far: CI keeps
# only a failed run's log, and the suite's time budget is read off it.
step() { echo "== $* (at $((SECONDS / 60)) min $((SECONDS % 60)) s)"; }
trap 'echo "== test.sh ended after $((SECONDS / 60)) min $((SECONDS % 60)) s"' EXIT

step "release build and tests"
cmake --preset release >/dev/null
cmake --build --preset release -j "$JOBS"
ctest --preset release -j "$JOBS"

if [ "${ORK_TEST_QUICK:-0}" = "1" ]; then exit 0; fi

step "sanitizer build (ASan + UBSan, clang; the fuzz targets too) and tests"
cmake --preset sanitize >/dev/null
cmake --build --preset sanitize -j "$JOBS"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --preset sanitize -j "$JOBS" -LE slow

step "ThreadSanitizer: the threaded tests (scripts/tsan.sh)"
scripts/tsan.sh

step "aarch64 cross build; kernel tests on NEON under qemu-aarch64"
cmake --preset arm64 >/dev/null
cmake --build --preset arm64 -j "$JOBS"
ctest --preset arm64 -j "$JOBS"

FUZZ_TARGETS="gguf orkpack tokenizer tier_map imatrix chat_template server_request blocks"
step "fuzzing every reader of user input (${FUZZ_TARGETS}) for ${ORK_FUZZ_SECONDS:-20}s each, $JOBS at a time"
FUZZ_DIR=build/sanitize/fuzz
# One fuzzer runs on one core: they run $JOBS at a time. A crash fails the
# run; libFuzzer leaves the input as $FUZZ_DIR/<target>-crash-* (-leak-*,
# -oom-*, -timeout-*). The report and the input (base64) go to the log, so
# that a crash on a CI machine can be replayed from its log alone.
fuzz_one() {
  local t=$1 work=$FUZZ_DIR/corpus-$1
  mkdir -p "$work"
  cp tests/fuzz/${t}_corpus/* "$work"/
  rm -f $FUZZ_DIR/$t-crash-* $FUZZ_DIR/$t-leak-* $FUZZ_DIR/$t-oom-* $FUZZ_DIR/$t-timeout-*
  (cd $FUZZ_DIR && ../tests/${t}_fuzz -max_total_time="${ORK_FUZZ_SECONDS:-20}" -rss_limit_mb=4096 \
    -max_len=131072 -print_final_stats=1 -artifact_prefix="$t-" "corpus-$t" >"fuzz-$t.log" 2>&1)
}
fuzz_report() {
  local t=$1
  echo "fuzz: ${t}_fuzz failed; the end of its report ($FUZZ_DIR/fuzz-$t.log):"
  tail -n 80 "$FUZZ_DIR/fuzz-$t.log"
  for f in $FUZZ_DIR/$t-crash-* $FUZZ_DIR/$t-leak-* $FUZZ_DIR/$t-oom-* $FUZZ_DIR/$t-timeout-*; do
    [ -e "$f" ] || continue
    echo "the input $f, $(stat -c %s "$f") bytes, base64 (first 64 KiB):"
    head -c 65536 "$f" | base64 -w 0
    echo
  done
}
set -- $FUZZ_TARGETS
while [ $# -gt 0 ]; do
  batch=()
  while [ $# -gt 0 ] && [ ${#batch[@]} -lt "$JOBS" ]; do batch+=("$1"); shift; done
  pids=()
  for t in "${batch[@]}"; do fuzz_one "$t" & pids+=($!); done
  failed=0
  for i in "${!batch[@]}"; do
    if wait "${pids[$i]}"; then
      tail -n 4 "$FUZZ_DIR/fuzz-${batch[$i]}.log"
    else
      fuzz_report "${batch[$i]}"
      failed=1
    fi
  done
  [ "$failed" = 0 ] || exit 1
done
echo "fuzz: no crash (a crash would have failed this script; keep its input in tests/fuzz/<target>_corpus/)"
