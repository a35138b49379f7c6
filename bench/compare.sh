#!/usr/bin/env bash
# ork beside its peers, in one run, on the same weights (issue 21,
# docs/BENCHMARKS.md): makes the benchmark models once, then runs every
# engine ROUNDS times, interleaved repetition by repetition (the order
# rotated each round), with the same threads, and the bandwidth probe
# (`ork bench --probe`) just before each engine's run. Prints every run and,
# per thread count, each engine's median with its range and each ratio
# ork / peer as the median of the per-round ratios with their range.
#
# Usage: bench/compare.sh SHAPE [ROUNDS]
#   SHAPE  llama-1b (1.1 B dense), moe12 (qwen3moe-30b-a3b, 12 layers) or
#          tiny (seconds; what the test runs)
# Environment (defaults):
#   MODELS=/tmp/ork-bench   where the models are made, once, and kept
#   THREADS="2 1"           thread counts, each a whole set of rounds
#   PP=512 TG=64 DEPTH=0    prompt, generated tokens, depth (llama-bench's -p -n -d)
#   ENGINES="ork llama ik"  ork: its default pack (`ork pack` with no flags: the
#                           plan at 4.5 bpw, calibrated on the built-in text - the
#                           recipe docs/QUALITY.md measures); ork-gguf: ork on the
#                           peer's Q4_K_M file;
#                           llama: llama.cpp Q4_K_M; ik: ik_llama.cpp Q4_K_M -rtr 1
#   ORK=build/release/ork ORK_PEERS=../shared/peers
# A peer that is missing is reported, in the table and at the end, and the
# script exits 3 after measuring the rest.
set -euo pipefail
SHAPE=${1:?usage: bench/compare.sh llama-1b|moe12|tiny [ROUNDS]}
ROUNDS=${2:-3}
ORK=${ORK:-build/release/ork}
PEERS=${ORK_PEERS:-../shared/peers}
MODELS=${MODELS:-/tmp/ork-bench}
THREADS=${THREADS:-"2 1"}
PP=${PP:-512}
TG=${TG:-64}
DEPTH=${DEPTH:-0}
ENGINES=${ENGINES:-"ork llama ik"}
QT=${QTHREADS:-2}

case "$SHAPE" in
  llama-1b) SYNTH=(--preset llama-1b) ;;
  moe12) SYNTH=(--preset qwen3moe-30b-a3b --layers 12) ;;
  tiny) SYNTH=(--preset tiny --n-embd 256 --n-ff 512) ;;
  *) echo "compare.sh: unknown shape '$SHAPE' (llama-1b, moe12, tiny)" >&2; exit 2 ;;
esac
[ -x "$ORK" ] || { echo "compare.sh: $ORK is not built" >&2; exit 2; }
mkdir -p "$MODELS"
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

lscpu | grep -E "Model name|^CPU\(s\)" || true
echo "ork: $($ORK --version 2>/dev/null | head -1), SIMD target $("$ORK" bench --probe -t 1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["machine"]["simd"])')"

# The peers this run can measure: a missing one is said, never skipped silently.
missing=()
have_peer() { [ -x "$PEERS/bin/$1" ]; }
for e in $ENGINES; do
  case $e in
    llama) have_peer llama-bench || missing+=("llama.cpp ($PEERS/bin/llama-bench)") ;;
    ik) have_peer ik-llama-bench || missing+=("ik_llama.cpp ($PEERS/bin/ik-llama-bench)")
        # its llama-bench has no -d: at a depth it is left out, and said so
        if [ "$DEPTH" -gt 0 ]; then
          missing+=("ik_llama.cpp at depth $DEPTH (its llama-bench has no -d)")
          ENGINES=$(echo "$ENGINES" | tr ' ' '\n' | grep -v -x ik | tr '\n' ' ')
        fi ;;
    ork | ork-gguf) ;;
    *) echo "compare.sh: unknown engine '$e' (ork, ork-gguf, llama, ik)" >&2; exit 2 ;;
  esac
done
for m in "${missing[@]}"; do echo "peer missing, not measured: $m"; done

# The models, made once (QTHREADS=2 threads to quantize). A file already
# in MODELS is used as it is.
F16="$MODELS/$SHAPE-f16.gguf"
PACK="$MODELS/$SHAPE-ork.orkpack"
Q4KM="$MODELS/$SHAPE-q4_k_m.gguf"
make_once() {  # file, what, command...
  local f=$1 what=$2; shift 2
  [ -s "$f" ] && return 0
  echo "making $what: $*" >&2
  local t0; t0=$(date +%s)
  "$@" >"$OUT/make.log" 2>&1 || { cat "$OUT/make.log" >&2; rm -f "$f"; echo "compare.sh: could not make $f" >&2; exit 1; }
  echo "  made in $(( $(date +%s) - t0 )) s" >&2
}
make_once "$F16" "the F16 model" "$ORK" synth "${SYNTH[@]}" --type F16 -o "$F16"
if [[ " $ENGINES " == *" ork "* ]]; then
  # `ork pack` with no flags: the plan at 4.5 bpw, calibrated on the built-in text
  make_once "$PACK" "ork's default pack" "$ORK" pack "$F16" -o "$PACK" -t "$QT"
fi
if [[ " $ENGINES " == *" llama "* || " $ENGINES " == *" ik "* || " $ENGINES " == *" ork-gguf "* ]]; then
  if have_peer llama-quantize; then
    make_once "$Q4KM" "llama.cpp's Q4_K_M" "$PEERS/bin/llama-quantize" "$F16" "$Q4KM" Q4_K_M "$QT"
  elif [ ! -s "$Q4KM" ]; then
    missing+=("llama-quantize ($PEERS/bin/llama-quantize): no Q4_K_M file, so no engine on it")
    echo "peer missing: llama-quantize; the Q4_K_M engines are not measured"
    ENGINES=$(echo "$ENGINES" | tr ' ' '\n' | grep -v -x -e llama -e ik -e ork-gguf | tr '\n' ' ')
  fi
fi
for f in "$PACK" "$Q4KM"; do
  [ -s "$f" ] && echo "$(basename "$f"): $("$ORK" inspect "$f" | grep '^total:' | sed 's/^total: //')"
done

# One run of one engine: prints "pp tg fraction" (tok/s; fraction: ork's
# decode against its own probe, else -). llama-bench runs prefill and decode
# as separate tests from an empty cache (at -d: from that depth); ork does the
# same in two invocations, so decode is never measured after the prompt.
run_engine() {  # engine threads tag
  local e=$1 t=$2 tag=$3 pp tg
  case $e in
    ork | ork-gguf)
      local m=$PACK; [ "$e" = ork-gguf ] && m=$Q4KM
      if [ "$PP" -gt 0 ]; then
        "$ORK" bench -m "$m" -p "$PP" -n 0 -d "$DEPTH" -r 1 -t "$t" --json 2>"$OUT/$tag.err" >"$OUT/$tag.pp.json"
      fi
      if [ "$TG" -gt 0 ]; then
        "$ORK" bench -m "$m" -p 0 -n "$TG" -d "$DEPTH" -r 1 -t "$t" --json 2>"$OUT/$tag.err" >"$OUT/$tag.tg.json"
      fi
      python3 - "$OUT/$tag" <<'PY'
import json, os, sys
b = sys.argv[1]
pp = json.load(open(b + ".pp.json"))["pp"]["tok_s_median"] if os.path.exists(b + ".pp.json") else float("nan")
tg, fr = float("nan"), float("nan")
if os.path.exists(b + ".tg.json"):
    o = json.load(open(b + ".tg.json"))
    tg, fr = o["tg"]["tok_s_median"], o["roofline_fraction"]
print(pp, tg, fr)
PY
      ;;
    llama | ik)
      local bin=llama-bench extra=()
      [ "$e" = ik ] && { bin=ik-llama-bench; extra=(-rtr 1); }
      [ "$DEPTH" -gt 0 ] && extra+=(-d "$DEPTH")
      "$PEERS/bin/$bin" -m "$Q4KM" -p "$PP" -n "$TG" -r 1 -t "$t" "${extra[@]}" -o json \
        2>"$OUT/$tag.err" >"$OUT/$tag.json"
      python3 - "$OUT/$tag.json" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))
pp = [r["avg_ts"] for r in runs if r["n_prompt"] > 0 and r["n_gen"] == 0]
tg = [r["avg_ts"] for r in runs if r["n_gen"] > 0 and r["n_prompt"] == 0]
print(pp[0] if pp else float("nan"), tg[0] if tg else float("nan"), float("nan"))
PY
      ;;
  esac
}

# ork on the Q4_K_M file converts it on its first start and keeps the
# result (`ork cache`): that start, and the detached writer saving the entry,
# happen here, before anything is timed.
export ORK_CACHE_DIR=${ORK_CACHE_DIR:-$MODELS/ork-cache}
if [[ " $ENGINES " == *" ork-gguf "* ]]; then
  "$ORK" run -m "$Q4KM" -p a -n 1 -t 1 >/dev/null 2>&1
  for _ in $(seq 1 600); do
    ls -a "$ORK_CACHE_DIR" 2>/dev/null | grep -q '\.ork-' || break  # the writer's temporary gone
    sleep 0.2
  done
fi

read -r -a engines <<< "$ENGINES"
n=${#engines[@]}
[ "$n" -gt 0 ] || { echo "compare.sh: no engine left to measure" >&2; exit 3; }
for t in $THREADS; do
  for r in $(seq 1 "$ROUNDS"); do
    for i in $(seq 0 $((n - 1))); do
      e=${engines[$(( (i + r - 1) % n ))]}
      bw=$("$ORK" bench --probe -t "$t" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["machine"]["read_gbps"])')
      if ! res=$(run_engine "$e" "$t" "$e.$t.$r"); then
        echo "compare.sh: $e failed (threads $t, round $r):" >&2; cat "$OUT/$e.$t.$r.err" >&2; exit 1
      fi
      echo "$t $r $e $bw $res" | tee -a "$OUT/runs.txt"
    done
  done
done

# Which builds the peers ran: llama.cpp names its CPU back end; bin/peer
# runs ik_llama.cpp's zen4 build only where every AVX-512 extension it
# needs is present (ORK_PEER_VARIANT forces one).
for f in "$OUT"/llama.*.err; do
  [ -f "$f" ] && grep -m1 -o "loaded CPU backend from .*" "$f" | sed 's/^/llama.cpp: /' && break
done || true
if [[ " $ENGINES " == *" ik "* ]]; then
  ik_dir=$(dirname "$(readlink -f "$PEERS/bin/peer")")/../ik_llama.cpp
  v=${ORK_PEER_VARIANT:-}
  if [ -z "$v" ]; then
    v=zen4
    for x in avx512f avx512dq avx512cd avx512bw avx512vl avx512ifma avx512vbmi avx512_vbmi2 avx512_vnni \
             avx512_bitalg avx512_vpopcntdq avx512_bf16 gfni vaes vpclmulqdq; do
      grep -m1 '^flags' /proc/cpuinfo | grep -qw "$x" || v=avx2
    done
  fi
  echo "ik_llama.cpp: the $v build ($ik_dir/$v)"
fi
python3 - "$OUT/runs.txt" "$PP" "$TG" "$DEPTH" <<'PY'
import math, statistics, sys
runs, pp_n, tg_n, depth = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
names = {"ork": "ork default pack", "ork-gguf": "ork on the Q4_K_M file",
         "llama": "llama.cpp Q4_K_M", "ik": "ik_llama.cpp Q4_K_M -rtr 1"}
rows = {}  # (threads, engine) -> round -> (bw, pp, tg, fraction)
for line in open(runs):
    t, r, e, bw, pp, tg, fr = line.split()
    rows.setdefault((int(t), e), {})[int(r)] = tuple(map(float, (bw, pp, tg, fr)))
def spread(v):
    v = [x for x in v if not math.isnan(x)]
    return (statistics.median(v), min(v), max(v)) if v else None
def fmt(s, d=2, unit=""):
    return "-" if s is None else f"{s[0]:.{d}f}{unit} ({s[1]:.{d}f}-{s[2]:.{d}f})"
at = f" at depth {depth}" if depth != "0" else ""
for t in sorted({k[0] for k in rows}, reverse=True):
    print(f"\n{t} thread(s){at}: medians over rounds (range)")
    print(f"| engine | probe GB/s | pp{pp_n} tok/s | tg{tg_n} tok/s | decode / probe |")
    print("|---|---|---|---|---|")
    es = [e for (tt, e) in rows if tt == t]
    for e in es:
        v = rows[(t, e)].values()
        print(f"| {names[e]} | {fmt(spread([x[0] for x in v]), 1)} | {fmt(spread([x[1] for x in v]))} | "
              f"{fmt(spread([x[2] for x in v]))} | {fmt(spread([x[3] for x in v]))} |")
    for o in [e for e in es if e.startswith("ork")]:
        for p in [e for e in es if not e.startswith("ork")]:
            a, b = rows[(t, o)], rows[(t, p)]
            common = sorted(set(a) & set(b))
            rp = spread([a[r][1] / b[r][1] for r in common])
            rt = spread([a[r][2] / b[r][2] for r in common])
            print(f"{names[o]} / {names[p]}: prefill {fmt(rp, unit='x')}, decode {fmt(rt, unit='x')} (per-round ratios)")
PY
if [ ${#missing[@]} -gt 0 ]; then
  for m in "${missing[@]}"; do echo "not measured, peer missing: $m"; done
  exit 3
fi
