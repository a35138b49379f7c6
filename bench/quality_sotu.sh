#!/usr/bin/env bash
# Measures docs/QUALITY.md section 4: sotu-moe (qwen3moe, 8 experts, top-2)
# packed by ork's plan (uncalibrated, calibrated on the shared text, and on
# the built-in text - ork pack's default) and uniform i4
# / i8, each on the fast path and the reference kernels, against the f32
# model's own fast-path scores on the shared wikitext slice (context 128).
# Usage: bench/quality_sotu.sh OUT_DIR   (prints markdown rows)
set -euo pipefail
OUT=$1
ORK=${ORK:-build/release/ork}
TD=${ORK_TESTDATA:-../shared/testdata}
M=$TD/models/sotu-moe-f32.gguf
T=$TD/fixtures/quality/sotu-moe/wiki-first150000-filtered.txt
mkdir -p "$OUT"
[ -f "$OUT/sotu.klbase" ] || "$ORK" ppl -m "$M" -f "$T" -c 128 --save-kl-base "$OUT/sotu.klbase" >"$OUT/f32.txt" 2>/dev/null
[ -f "$OUT/sotu.imatrix" ] || "$ORK" imatrix -m "$M" -f "$TD/corpus/sotu-calibration.txt" -o "$OUT/sotu.imatrix" --chunks 128 >/dev/null 2>&1
row() {  # label, pack file, ppl flags...
  local label=$1 pack=$2; shift 2
  local bytes bpw
  bytes=$(stat -c %s "$pack")
  bpw=$("$ORK" inspect "$pack" --no-tensors | grep -o '[0-9.]* bits per weight' | cut -d' ' -f1)
  "$ORK" ppl -m "$pack" -f "$T" -c 128 --kl-base "$OUT/sotu.klbase" --json "$@" 2>/dev/null |
    python3 -c "import json,sys; d=json.load(sys.stdin); print(f\"| $label | $bpw ($bytes) | {d['ppl']:.4f} | {d['kld']:.6f} ± {d['kld_err']:.6f} | {100*d['top1']:.3f} |\")"
}
pack() {  # file, pack flags...
  local f=$1; shift
  [ -f "$f" ] || "$ORK" pack "$M" -o "$f" "$@" >/dev/null 2>&1
}
pack "$OUT/plan.orkpack" --no-calibrate
pack "$OUT/plan-imatrix.orkpack" --imatrix "$OUT/sotu.imatrix"
pack "$OUT/plan-default.orkpack"
pack "$OUT/i4.orkpack" --uniform i4 --no-calibrate
pack "$OUT/i8.orkpack" --uniform i8 --no-calibrate
grep -o 'PPL *[0-9.]*' "$OUT/f32.txt" | sed 's/^/f32 fast path /'
echo "| model | bits/weight (file bytes) | PPL | mean KLD | same top-1 % |"
echo "|---|---|---|---|---|"
row "ork plan, 4.5 bpw, no calibration, fast path" "$OUT/plan.orkpack"
row "the same, reference kernels" "$OUT/plan.orkpack" --ref-kernels
row "ork plan, 4.5 bpw, imatrix + GPTQ from corpus/sotu-calibration.txt" "$OUT/plan-imatrix.orkpack"
row "ork plan, 4.5 bpw, built-in calibration text (ork pack's default), fast path" "$OUT/plan-default.orkpack"
row "ork uniform i4, fast path" "$OUT/i4.orkpack"
row "the same, reference kernels" "$OUT/i4.orkpack" --ref-kernels
row "ork uniform i8, fast path" "$OUT/i8.orkpack"
row "the same, reference kernels" "$OUT/i8.orkpack" --ref-kernels
