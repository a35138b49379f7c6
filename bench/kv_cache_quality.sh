#!/usr/bin/env bash
# Measures docs/QUALITY.md section 8: what the q8_0 KV cache costs, as the
# KL divergence of each engine's q8_0-cache scores from its own f16-cache
# scores on the same weights and text (only the cache differs), ork and
# llama.cpp side by side (llama.cpp with flash attention on for both runs:
# its q8_0 value cache needs it):
#   - sotu-moe (trained qwen3moe) over its whole trained context, 256;
#   - MODEL (optional, e.g. the llama-1b shape's Q4_K_M) at each context of
#     CTXS (default "2048 8192"), one window each: the scored half of a
#     window is its positions ctx/2 .. ctx-1, so this is the error at depth.
# Usage: bench/kv_cache_quality.sh OUT_DIR [MODEL.gguf]   (prints markdown rows)
set -euo pipefail
OUT=$1
BIG=${2:-}
ORK=${ORK:-build/release/ork}
TD=${ORK_TESTDATA:-../shared/testdata}
PEERS=${ORK_PEERS:-../shared/peers}
CTXS=${CTXS:-"2048 8192"}
mkdir -p "$OUT"
for tool in llama-perplexity; do
  [ -x "$PEERS/bin/$tool" ] || { echo "peer missing: $PEERS/bin/$tool" >&2; exit 1; }
done

# ork: f16-cache base, then the q8_0 cache against it. Prints "kld top1".
ork_kld() {  # tag model text ctx chunks
  local tag=$1 m=$2 t=$3 c=$4 n=$5
  "$ORK" ppl -m "$m" -f "$t" -c "$c" --chunks "$n" --save-kl-base "$OUT/$tag.ork.klbase" >/dev/null 2>&1
  "$ORK" ppl -m "$m" -f "$t" -c "$c" --chunks "$n" --kl-base "$OUT/$tag.ork.klbase" -ctk q8_0 -ctv q8_0 --json \
    2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); print(f\"{d['kld']:.6f} ± {d['kld_err']:.6f} | {100*d['top1']:.3f}\")"
}

# llama.cpp: the same with its perplexity tool.
llama_kld() {  # tag model text ctx chunks
  local tag=$1 m=$2 t=$3 c=$4 n=$5
  [ "$n" = 0 ] && n=-1  # every window
  "$PEERS/bin/llama-perplexity" -m "$m" -f "$t" -c "$c" --chunks "$n" -t 2 -fa on \
    --kl-divergence-base "$OUT/$tag.llama.kld" >"$OUT/$tag.llama-base.txt" 2>&1
  "$PEERS/bin/llama-perplexity" -m "$m" -f "$t" -c "$c" --chunks "$n" -t 2 -fa on -ctk q8_0 -ctv q8_0 \
    --kl-divergence-base "$OUT/$tag.llama.kld" --kl-divergence >"$OUT/$tag.llama-q8.txt" 2>&1
  summarize "$OUT/$tag.llama-q8.txt"
}

# Prints "kld ± err | top1" from a llama-perplexity --kl-divergence log.
summarize() {
  python3 - "$1" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
kld = re.search(r"Mean\s+KLD:\s+([-0-9.e]+)\s+±\s+([0-9.e]+)", text)
top = re.search(r"Same top p:\s+([0-9.]+)", text)
print(f"{float(kld.group(1)):.6f} ± {float(kld.group(2)):.6f} | {top.group(1) if top else '?'}")
EOF
}

# llama.cpp's q8_0 cache (flash attention) against its f16 cache without
# flash attention: at 8192 its flash-attention f16 run is itself far from
# the non-flash one (docs/QUALITY.md section 8), so both readings are shown.
llama_kld_nofa_base() {  # tag model text ctx chunks
  local tag=$1 m=$2 t=$3 c=$4 n=$5
  "$PEERS/bin/llama-perplexity" -m "$m" -f "$t" -c "$c" --chunks "$n" -t 2 -fa off \
    --kl-divergence-base "$OUT/$tag.nofa.kld" >"$OUT/$tag.nofa-base.txt" 2>&1
  "$PEERS/bin/llama-perplexity" -m "$m" -f "$t" -c "$c" --chunks "$n" -t 2 -fa on -ctk q8_0 -ctv q8_0 \
    --kl-divergence-base "$OUT/$tag.nofa.kld" --kl-divergence >"$OUT/$tag.q8-vs-nofa.txt" 2>&1
  summarize "$OUT/$tag.q8-vs-nofa.txt"
}

echo "| model, context (positions scored) | engine | mean KLD, q8_0 cache against f16 | same top-1 % |"
echo "|---|---|---|---|"
SOTU=$TD/models/sotu-moe-f32.gguf
T=$TD/fixtures/quality/sotu-moe/wiki-first150000-filtered.txt
echo "| sotu-moe F32, 256 (128-255), every window | ork | $(ork_kld sotu "$SOTU" "$T" 256 0) |"
echo "| | llama.cpp | $(llama_kld sotu "$SOTU" "$T" 256 0) |"
if [ -n "$BIG" ]; then
  W=$TD/corpus/wikitext2-test.txt
  for c in $CTXS; do
    echo "| $(basename "$BIG"), $c ($((c / 2))-$((c - 1))), one window | ork | $(ork_kld "big$c" "$BIG" "$W" "$c" 1) |"
    echo "| | llama.cpp (both runs flash attention) | $(llama_kld "big$c" "$BIG" "$W" "$c" 1) |"
    echo "| | llama.cpp (q8_0 with flash attention against f16 without) | $(llama_kld_nofa_base "big$c" "$BIG" "$W" "$c" 1) |"
  done
fi
