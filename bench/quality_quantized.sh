#!/usr/bin/env bash
# KLD and PPL of llama.cpp's quantized GGUFs as ork runs them (converted on
# load: K-quants and the 32-weight types carried, the rest planned within
# the source's bytes) against the F32 model, beside llama.cpp's own figures
# for the same files (fixtures/quality/*.md). docs/QUALITY.md section 6.
#
# Usage: bench/quality_quantized.sh [ORK] [OUT_DIR]
set -euo pipefail
ORK=${1:-build/release/ork}
OUT=${2:-/tmp/ork-quality-quantized}
TD=${ORK_TESTDATA:-../shared/testdata}
PEERS=${ORK_PEERS:-../shared/peers}
Q=$TD/fixtures/quality
mkdir -p "$OUT"
export ORK_CACHE_DIR=$OUT/cache

wait_for_writer() {  # the detached writer's temporary gone (bounded): its entry is what we size
  for _ in $(seq 1 600); do
    ls -a "$ORK_CACHE_DIR" 2>/dev/null | grep -q '\.ork-' || return 0
    sleep 0.2
  done
}

row() {  # model-file kl-base text
  local r
  r=$("$ORK" ppl -m "$1" -f "$3" -c 128 --kl-base "$2" 2>&1)
  local ppl kld top
  ppl=$(echo "$r" | awk '/^PPL  /{print $2}')
  kld=$(echo "$r" | awk '/Mean KLD/{print $3, $4, $5}')
  top=$(echo "$r" | awk '/Same top-1/{print $3}')
  local entry
  wait_for_writer
  entry=$(ls -t "$ORK_CACHE_DIR"/*.orkpack | head -1)
  printf "| %s | %d | %d | %s | %s | %s |\n" "$(basename "$1" .gguf)" "$(stat -c %s "$1")" "$(stat -c %s "$entry")" "$ppl" "$kld" "$top"
}

echo "## sotu-moe (wiki-first150000-filtered.txt, c 128)"
T=$Q/sotu-moe/wiki-first150000-filtered.txt
"$ORK" ppl -m "$TD/models/sotu-moe-f32.gguf" -f "$T" -c 128 --save-kl-base "$OUT/sotu.klbase" 2>&1 | grep '^PPL'
echo "| file | source bytes | ork's converted bytes | PPL | mean KLD | same top-1 % |"
echo "|---|---|---|---|---|---|"
for t in Q8_0 Q6_K Q5_K_M Q4_K_M Q4_0 IQ4_NL IQ4_XS Q3_K_M; do
  f=$OUT/sotu-moe-$t.gguf
  [ -f "$f" ] || "$PEERS/bin/llama-quantize" "$TD/models/sotu-moe-f32.gguf" "$f" "$t" 1 >/dev/null 2>&1
  row "$f" "$OUT/sotu.klbase" "$T"
done

echo "## tinystories656K (wiki-200k.ts656k-filtered.txt, c 128)"
T=$Q/wiki-200k.ts656k-filtered.txt
"$ORK" ppl -m "$TD/models/tinystories656K-f32.gguf" -f "$T" -c 128 --save-kl-base "$OUT/ts.klbase" 2>&1 | grep '^PPL'
echo "| file | source bytes | ork's converted bytes | PPL | mean KLD | same top-1 % |"
echo "|---|---|---|---|---|---|"
for f in "$Q"/models/tinystories656k-*.gguf; do row "$f" "$OUT/ts.klbase" "$T"; done
