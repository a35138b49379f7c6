#!/usr/bin/env bash
# KLD against the overlay's hit rate (docs/QUALITY.md section 6): a model
# packed uniform i4 with its sensitive set (attn_v, attn_output, ffn_down
# and, for a MoE, the experts' downs) as i8s, scored token by token
# (`ork ppl --decode`, the path the decode overlay takes) against the f32
# model: the int4-only reading (high planes), forced hit rates 0.25 / 0.5 /
# 0.75 / 1 with vnpu's real W8A8 results, each profile's modeled hit rate
# (virtual clock), and the full-int8 reading (both planes on the CPU).
# Usage: bench/quality_overlay.sh MODEL.gguf TEXT OUT_DIR   (prints markdown rows)
set -euo pipefail
M=$1 T=$2 OUT=$3
ORK=${ORK:-build/release/ork}
mkdir -p "$OUT"
P=$OUT/$(basename "$M" .gguf)-i4-i8s.orkpack
[ -f "$P" ] || "$ORK" pack "$M" -o "$P" --uniform i4 --no-calibrate --tier 'attn_v|attn_output|ffn_down=i8s' >/dev/null 2>&1
base=$OUT/$(basename "$M" .gguf).klbase
[ -f "$base" ] || "$ORK" ppl -m "$M" -f "$T" -c 128 --save-kl-base "$base" >/dev/null 2>&1
echo "pack: $("$ORK" inspect "$P" --no-tensors | grep -o '[0-9.]* bits per weight')"
echo "| reading | overlay hit rate | PPL | mean KLD | same top-1 % |"
echo "|---|---|---|---|---|"
row() {  # label, ppl flags...
  local label=$1; shift
  "$ORK" ppl -m "$P" -f "$T" -c 128 --kl-base "$base" --decode --json "$@" 2>"$OUT/last.err" |
    python3 -c "
import json, re, sys
d = json.load(sys.stdin)
m = re.search(r'hit rate ([0-9.]+) %', open('$OUT/last.err').read())
hit = d.get('overlay_hit_rate', float(m.group(1)) / 100 if m else None)
h = '-' if hit is None else f'{hit:.3f}'
print(f\"| $label | {h} | {d['ppl']:.4f} | {d['kld']:.6f} ± {d['kld_err']:.6f} | {100*d['top1']:.3f} |\")"
}
row "int4 only (i8s high planes, CPU)" --i8s-high-only
for r in 0.25 0.5 0.75 1; do
  row "overlay, forced hit rate $r (vnpu W8A8)" --npu vnpu:hexagon-v75 --npu-prefill cpu --overlay-hit-rate "$r"
done
for p in rk3588 hexagon-v75; do
  row "overlay, $p modeled (virtual clock)" --npu vnpu:$p --npu-prefill cpu --overlay-clock virtual
done
row "full int8 (both planes, CPU)"
