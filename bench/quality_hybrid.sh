#!/usr/bin/env bash
# The hybrid fixtures (testdata/hybrid: lfm2, lfm2moe, qwen35, qwen35moe;
# random weights) quantized by llama.cpp (ik_llama.cpp for the Qwen3.5
# pair, which mainline cannot run), run by ork (converted on load) and by it,
# each scored against its own run of the F32 model: KLD, same top-1 and
# PPL side by side. Random weights make these models far more sensitive to
# quantization than trained ones (Q4_0 KLD above 1): the figures check that
# ork reads each file as llama.cpp does, not what the types are worth.
# docs/QUALITY.md section 7.
#
# PACKS=1 adds ork's own packs of each model beside its Q4_0, all scored by
# ork against its F32 run: uniform i4 packed from the Q4_0 GGUF (the recipe
# of issue 19's speed figures, docs/BENCHMARKS.md 10.7-10.19), uniform i4
# and the default plan packed from the F32 model. Same caveat: on random
# weights, not what the recipes are worth on a trained model.
#
# Usage: [MODELS="lfm2 qwen35"] [PACKS=1] bench/quality_hybrid.sh [ORK] [OUT_DIR]
set -euo pipefail
ORK=${1:-build/release/ork}
OUT=${2:-/tmp/ork-quality-hybrid}
TD=${ORK_TESTDATA:-../shared/testdata}
PEERS=${ORK_PEERS:-../shared/peers}
mkdir -p "$OUT"
TEXT=$OUT/text.txt
head -c 60000 "$TD/fixtures/quality/wiki-200k.ts656k-filtered.txt" > "$TEXT"  # the fixtures' vocabulary is tinystories'
echo "text: first 60000 bytes of fixtures/quality/wiki-200k.ts656k-filtered.txt, -c 128"
# ork's score of PACK against its own run of F32: "KLD same-top-1 PPL F32-PPL" (its log in LOG).
ork_score() {  # PACK F32 LOG
  "$ORK" ppl -m "$1" --no-cache -f "$TEXT" -c 128 --ref "$2" > "$3" 2>&1
  awk '/^Mean KLD/{k=$3} /^Same top-1/{t=$3} /^PPL  /{p=$2} /^PPL \(base\)/{b=$3} END{print k, t, p, b}' "$3"
}
echo "| model | type | peer | peer KLD | ork KLD | peer same top-1 % | ork same top-1 % | ork PPL / F32 PPL |"
echo "|---|---|---|---|---|---|---|---|"
for m in ${MODELS:-lfm2 lfm2moe qwen35 qwen35moe}; do
  F32=$TD/hybrid/$m-f32.gguf
  case $m in qwen35*) peer=ik-llama ;; *) peer=llama ;; esac
  "$PEERS/bin/$peer-perplexity" -m "$F32" -f "$TEXT" -c 128 -t 2 --kl-divergence-base "$OUT/$m.kl" > "$OUT/$m.base.log" 2>&1
  for t in Q8_0 Q6_K Q4_K_M Q4_0; do
    Q=$OUT/$m-$t.gguf
    [ -f "$Q" ] || "$PEERS/bin/$peer-quantize" "$F32" "$Q" "$t" 2 > /dev/null 2>&1
    "$PEERS/bin/$peer-perplexity" -m "$Q" -c 128 -t 2 --kl-divergence-base "$OUT/$m.kl" --kl-divergence \
      > "$OUT/$m-$t.llama.log" 2>&1
    lk=$(grep -a '^Mean    KLD:' "$OUT/$m-$t.llama.log" | awk '{print $3}')
    lt=$(grep -a '^Same top p:' "$OUT/$m-$t.llama.log" | awk '{print $4}')
    read -r ok ot op ob <<< "$(ork_score "$Q" "$F32" "$OUT/$m-$t.ork.log")"
    printf "| %s | %s | %s | %s | %s | %s | %s | %s / %s |\n" "$m" "$t" "$peer.cpp" "$lk" "$ok" "$lt" "$ot" "$op" "$ob"
  done
done

[ "${PACKS:-0}" = 1 ] || exit 0
echo
echo "| model | scored by ork against its F32 run | file bytes | KLD | same top-1 % | PPL / F32 PPL |"
echo "|---|---|---|---|---|---|"
for m in ${MODELS:-lfm2 lfm2moe qwen35 qwen35moe}; do
  F32=$TD/hybrid/$m-f32.gguf
  Q=$OUT/$m-Q4_0.gguf
  "$ORK" pack "$Q" --uniform i4 --no-calibrate -o "$OUT/$m-q40-i4.orkpack" > /dev/null 2>&1
  "$ORK" pack "$F32" --uniform i4 --no-calibrate -o "$OUT/$m-i4.orkpack" > /dev/null 2>&1
  "$ORK" pack "$F32" -o "$OUT/$m-default.orkpack" > /dev/null 2>&1
  for P in "$Q" "$OUT/$m-q40-i4.orkpack" "$OUT/$m-i4.orkpack" "$OUT/$m-default.orkpack"; do
    case $P in
      *-q40-i4.orkpack) what="uniform i4, packed from the Q4_0 GGUF" ;;
      *-i4.orkpack) what="uniform i4, packed from F32" ;;
      *-default.orkpack) what="default plan (4.5 bpw), packed from F32" ;;
      *) what="the Q4_0 GGUF (llama.cpp's quantize), converted on load" ;;
    esac
    read -r ok ot op ob <<< "$(ork_score "$P" "$F32" "$OUT/$m.pack.log")"
    printf "| %s | %s | %s | %s | %s | %s / %s |\n" "$m" "$what" "$(stat -c %s "$P")" "$ok" "$ot" "$op" "$ob"
  done
done
