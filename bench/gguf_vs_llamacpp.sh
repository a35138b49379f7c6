#!/usr/bin/env bash
# One quantized GGUF, ork and llama.cpp side by side in one run: ROUNDS
# interleaved rounds of `llama-bench` and `ork bench` on the same file, the
# same threads; ork converts the file on its first start (cached, timed
# here as the first start) and reports the bandwidth probed beside each
# repetition. Prints each round and the medians with their ratio.
# docs/BENCHMARKS.md section 9.
#
# Usage: bench/gguf_vs_llamacpp.sh MODEL.gguf [ROUNDS] [PP] [TG] [THREADS]
# PEER=ik-llama-bench PEER_ARGS="-rtr 1" measures ik_llama.cpp instead
# (its best CPU setting; the qwen35 family runs on ik_llama.cpp only).
# ORK_MODEL=PACK.orkpack times ork on its own pack of the same weights
# (issue 19's targets) while the peer runs MODEL.gguf; set STARTS=0 with it.
set -euo pipefail
M=$1
ROUNDS=${2:-3}
PP=${3:-512}
TG=${4:-64}
T=${5:-2}
ORK=${ORK:-build/release/ork}
PEERS=${ORK_PEERS:-../shared/peers}
PEER=${PEER:-llama-bench}
read -r -a PEER_FLAGS <<< "${PEER_ARGS:-}"
OUT=$(mktemp -d)
lscpu | grep -E "Model name|^CPU\(s\)|Flags" | sed 's/Flags:.*\(avx512[a-z_]*\).*/Flags: has \1/' | cut -c1-100
[ -x "$PEERS/bin/$PEER" ] || { echo "$PEER missing in $PEERS: not measured"; exit 1; }
echo "peer: $PEER ${PEER_ARGS:-} on $M; ork on ${ORK_MODEL:-$M}"

# Start-up: ork's first start (conversion included: the model runs from
# the conversion in memory while a detached writer saves the cache entry)
# and the cached one, and llama.cpp's load, each as the wall time of
# loading and evaluating one token; STARTS rounds, interleaved.
export ORK_CACHE_DIR=${ORK_CACHE_DIR:-$OUT/cache}
wait_for_writer() {  # the detached writer's temporary gone (bounded)
  for _ in $(seq 1 600); do
    ls -a "$ORK_CACHE_DIR" 2>/dev/null | grep -q '\.ork-' || return 0
    sleep 0.2
  done
}
for s in $(seq 1 "${STARTS:-3}"); do
  "$ORK" cache rm >/dev/null 2>&1 || true
  t0=$(date +%s.%N); "$ORK" run -m "$M" -p "a" -n 1 -t "$T" >/dev/null 2>"$OUT/first.log"; t1=$(date +%s.%N)
  wait_for_writer
  t1b=$(date +%s.%N); "$ORK" run -m "$M" -p "a" -n 1 -t "$T" >/dev/null 2>&1; t2=$(date +%s.%N)
  PACK=$(ls "$ORK_CACHE_DIR"/*.orkpack | head -1)
  "$ORK" run -m "$PACK" -p "a" -n 1 -t "$T" >/dev/null 2>&1; t3=$(date +%s.%N)
  "$PEERS/bin/$PEER" -m "$M" -p 1 -n 0 -r 1 -t "$T" "${PEER_FLAGS[@]}" >/dev/null 2>&1; t4=$(date +%s.%N)
  echo "start $s: ork first (converts) $(echo "$t1 - $t0" | bc) s (entry saved $(echo "$t1b - $t1" | bc) s later), ork cached $(echo "$t2 - $t1b" | bc) s, ork on the orkpack $(echo "$t3 - $t2" | bc) s, $PEER -p 1 -n 0 $(echo "$t4 - $t3" | bc) s"
done

for r in $(seq 1 "$ROUNDS"); do
  "$PEERS/bin/$PEER" -m "$M" -p "$PP" -n "$TG" -r 1 -t "$T" "${PEER_FLAGS[@]}" -o json 2>/dev/null > "$OUT/l$r.json"
  "$ORK" bench -m "${ORK_MODEL:-$M}" -p "$PP" -n "$TG" -r 1 -t "$T" --json 2>/dev/null > "$OUT/o$r.json"
done
python3 - "$OUT" "$ROUNDS" "$PEER ${PEER_ARGS:-}" <<'PY'
import json, statistics, sys
out, rounds, peer = sys.argv[1], int(sys.argv[2]), sys.argv[3].strip()
lp, lt, op, ot, bw, roof = [], [], [], [], [], []
for r in range(1, rounds + 1):
    l = json.load(open(f"{out}/l{r}.json"))
    pp = [x["avg_ts"] for x in l if x["n_prompt"] > 0][0]
    tg = [x["avg_ts"] for x in l if x["n_gen"] > 0][0]
    o = json.load(open(f"{out}/o{r}.json"))
    lp.append(pp); lt.append(tg); op.append(o["pp"]["tok_s_median"]); ot.append(o["tg"]["tok_s_median"])
    bw.append(o["machine"]["read_gbps"]); roof.append(o["roofline_fraction"])
    if r == 1: print(f"ork's SIMD target: {o['machine']['simd']}, {o['machine']['threads']} threads")
    print(f"round {r}: {peer} pp {pp:.2f} tg {tg:.2f} | ork pp {op[-1]:.2f} tg {ot[-1]:.2f} | probe {bw[-1]:.1f} GB/s, ork decode at {roof[-1]:.2f} of it")
m = statistics.median
print(f"median: {peer} pp {m(lp):.2f} tg {m(lt):.2f} tok/s; ork pp {m(op):.2f} tg {m(ot):.2f} tok/s")
# The median of the per-round ratios (as bench/compare.sh prints), their
# range, and the ratio of the medians: the two statistics differ when the
# bandwidth moves between rounds.
def ratios(a, b):
    r = [x / y for x, y in zip(a, b)]
    return f"{m(r):.2f}x (rounds {min(r):.2f}-{max(r):.2f}; ratio of the medians {m(a)/m(b):.2f})"
print(f"ork / {peer}: prefill {ratios(op, lp)}, decode {ratios(ot, lt)}")
PY
rm -rf "$OUT"
