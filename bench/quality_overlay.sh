#!/usr/bin/env bash
# KLD against the overlay's hit rate (docs/QUALITY.md section 5): a model
# packed uniform i4 with its sensitive set (attn_v, attn_output, ffn_down
# and, for a MoE, the experts' downs) as i8s, scored token by token
# (`ork ppl --decode`, the path the decode overlay takes) against the f32
# model: the int4-only reading (high planes), forced hit rates 0.25 / 0.5 /
# 0.75 / 1 with vnpu's real W8A8 results, each profile's modeled hit rate
# (virtual clock), and the full-int8 reading (both planes on the CPU).
# With SHAPE=PACK (an i8s pack of a benchmark shape: llama-1b for a dense
# model, the 12-layer qwen3moe for a MoE), also each profile's modeled
# share of every tensor role on that shape (virtual clock, 32 decode
# tokens), put on this model's jobs by role (--overlay-hit-rate ROLE=R,...):
# the quality this model would have if its matmuls were as large as the
# shape's - its own modeled rate is 0 when it is too small for any job.
# Usage: [SHAPE=PACK] bench/quality_overlay.sh MODEL.gguf TEXT OUT_DIR   (prints markdown rows)
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
if [ -n "${SHAPE:-}" ]; then
  for p in rk3588 hexagon-v75; do
    rates=$("$ORK" bench -m "$SHAPE" -p 16 -n 32 -r 1 --npu vnpu:$p:timing --overlay-clock virtual --json 2>/dev/null |
      python3 -c "
import json, sys
roles = json.load(sys.stdin)['npu']['overlay']['roles']
print(','.join(f'{r}={v[\"coverage\"]:.4f}' for r, v in sorted(roles.items())))")
    row "overlay, $p modeled on $(basename "$SHAPE" .orkpack) by role ($rates)" --npu vnpu:$p --npu-prefill cpu --overlay-hit-rate "$rates"
  done
fi
row "full int8 (both planes, CPU)"
