#!/usr/bin/env bash
# Decode (tg64) of quantized GGUFs: two ork binaries (OLD, say a build of
# the commit before a change in a second worktree, and NEW) beside
# llama.cpp and ik_llama.cpp -rtr 1 on the same files, interleaved round by
# round, the bandwidth probe before each file. A peer that cannot run a
# file (llama.cpp has no qwen35moe, ik_llama.cpp no lfm2) prints "-".
# docs/BENCHMARKS.md 9.2.
#
# Usage: OLD=path/to/old/ork bench/decode_ab.sh ROUNDS THREADS FILE.gguf...
set -uo pipefail
R=${1:?rounds}
T=${2:?threads}
shift 2
NEW=${NEW:-build/release/ork}
OLD=${OLD:?OLD=path to the ork binary to compare against}
PEERS=${ORK_PEERS:-../shared/peers}
lscpu | grep -E "Model name|^CPU\(s\)" | cut -c1-80
echo "ork's SIMD target: $($NEW bench --probe -t "$T" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["machine"].get("simd", "?"))')"
tg() {
  "$1" bench -m "$2" -p 0 -n 64 -r 1 -t "$T" --json 2>/dev/null |
    python3 -c 'import json,sys; print(round(json.load(sys.stdin)["tg"]["tok_s_median"], 2))' 2>/dev/null || echo -
}
peer() {  # $1 binary, $2 file, $3 the csv column from the end holding avg_ts, then extra flags
  local bin=$PEERS/bin/$1 f=$2 col=$3
  shift 3
  [ -x "$bin" ] || { echo missing; return; }
  "$bin" -m "$f" -p 0 -n 64 -r 1 -t "$T" "$@" -o csv 2>/dev/null | tail -1 |
    awk -F, -v c="$col" '{v=$(NF-c); gsub(/"/, "", v); if (v ~ /^[0-9.]+$/) printf "%.2f\n", v; else print "-"}'
}
for f in "$@"; do  # first starts convert the GGUF; not timed
  "$OLD" run -m "$f" -p a -n 1 >/dev/null 2>&1
  "$NEW" run -m "$f" -p a -n 1 >/dev/null 2>&1
done
for i in $(seq "$R"); do
  for f in "$@"; do
    pb=$("$NEW" bench --probe -t "$T" --json | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["machine"]["read_gbps"], 1))')
    o=$(tg "$OLD" "$f")
    n=$(tg "$NEW" "$f")
    l=$(peer llama-bench "$f" 1)
    k=$(peer ik-llama-bench "$f" 2 -rtr 1)
    echo "round $i $(basename "$f") probe $pb GB/s | ork old $o new $n | llama.cpp $l | ik_llama.cpp -rtr 1 $k"
  done
done
