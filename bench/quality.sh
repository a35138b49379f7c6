#!/usr/bin/env bash
# Measures the tables of docs/QUALITY.md: for a model, every uniform tier with
# and without rotation, and planned mixes at 4.25 / 4.5 / 5.0 bpw (with an
# importance matrix from corpus/sotu-calibration.txt, or the built-in
# calibration text, ork pack's default), each against the f32
# model: PPL, mean KLD, top-1 agreement, RMS delta-p, on context 128.
# Usage: bench/quality.sh MODEL.gguf TEXT OUT_DIR   (prints markdown rows)
#        ROWS=uniform|planned|all (default all) selects the rows.
#        PPL_FLAGS (default --ref-kernels: the weights' quality alone; set it
#        empty to measure the fast path with its int8 activations).
set -euo pipefail
MODEL=$1; TEXT=$2; OUT=$3
ORK=${ORK:-build/release/ork}
TD=${ORK_TESTDATA:-../shared/testdata}
mkdir -p "$OUT"
name=$(basename "$MODEL" .gguf)
base="$OUT/$name.klbase"
[ -f "$base" ] || "$ORK" ppl -m "$MODEL" -f "$TEXT" -c 128 --save-kl-base "$base" >/dev/null 2>&1
[ -f "$OUT/$name.imatrix" ] || "$ORK" imatrix -m "$MODEL" -f "$TD/corpus/sotu-calibration.txt" -o "$OUT/$name.imatrix" \
  --chunks 128 >/dev/null 2>&1

row() {  # label, pack flags...
  local label=$1; shift
  local pack="$OUT/$name-$(echo "$label" | tr ' ,=/' '____').orkpack"
  "$ORK" pack "$MODEL" -o "$pack" "$@" >/dev/null 2>"$pack.log" || { echo "| $label | pack failed: $(tail -1 "$pack.log") |"; return; }
  local bpw
  bpw=$(grep -o '[0-9.]* bits per weight' "$pack.log" | cut -d' ' -f1)
  "$ORK" ppl -m "$pack" -f "$TEXT" -c 128 --kl-base "$base" --json ${PPL_FLAGS:---ref-kernels} 2>/dev/null |
    python3 -c "import json,sys; d=json.load(sys.stdin); print(f\"| $label | $bpw | {d['ppl']:.2f} ± {d['ppl_err']:.2f} | {d['kld']:.6f} ± {d['kld_err']:.6f} | {100*d['top1']:.2f} ± {100*d['top1_err']:.2f} | {100*d['rms_dp']:.2f} ± {100*d['rms_dp_err']:.2f} |\")"
}

echo "| $name | bpw | PPL | mean KLD | same top-1 % | RMS Δp % |"
echo "|---|---|---|---|---|---|"
ROWS=${ROWS:-all}
if [ "$ROWS" != planned ]; then
  for tier in f16 i8 i8s i6 i5 nf4 i4; do
    row "uniform $tier" --uniform "$tier" --no-rotate --no-calibrate
    row "uniform $tier, rotated" --uniform "$tier" --no-calibrate
  done
fi
if [ "$ROWS" != uniform ]; then
  for bpw in 4.25 4.5 5.0; do
    row "planned $bpw bpw, imatrix + GPTQ" --bpw "$bpw" --imatrix "$OUT/$name.imatrix"
  done
  row "planned 4.5 bpw, imatrix, no GPTQ" --bpw 4.5 --imatrix "$OUT/$name.imatrix" --no-gptq
  row "planned 4.5 bpw, no imatrix" --bpw 4.5 --no-calibrate
  row "planned 4.5 bpw, built-in calibration text (ork pack's default)" --bpw 4.5
fi
