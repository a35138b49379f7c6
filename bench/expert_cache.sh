#!/usr/bin/env bash
# Issue 20's targets (docs/BENCHMARKS.md section 11): the 12-layer
# qwen3moe-30b-a3b shape at 4.5 bits per weight (Q4_0: ork runs the orkpack
# that carries the GGUF's blocks bit for bit, llama.cpp the GGUF - the same
# weights), decoded inside a memory cgroup capped at FRAC of the orkpack's
# size, which caps the page cache too. Round by round, interleaved, each run
# starting from a cold page cache:
#   ork            its expert cache (the default when the model does not fit)
#   ork --mmap     the same file mapped, the kernel evicting and faulting
#   llama.cpp      llama-bench, default mmap (../shared/peers)
#   ik_llama.cpp   ik-llama-bench, default mmap, no -rtr (no repacked copy)
# and beside them the disk's sequential read rate (dd, O_DIRECT, 1 GiB at a
# random offset of the orkpack), the physical limit of a token's misses.
# Needs root (cgroup, drop_caches).
#
#   FRAC=0.5 ROUNDS=3 N=64 REPS=3 POLICIES="lru lfu" bench/expert_cache.sh > run.txt
#   bench/expert_cache_summary.py run.txt
set -euo pipefail
ORK=${ORK:-build/release/ork}
PEERS=${PEERS:-../shared/peers}
MODELS=${MODELS:-/work/bench}
FRAC=${FRAC:-0.5}
ROUNDS=${ROUNDS:-3}
N=${N:-64}
REPS=${REPS:-3}  # ork: the median of the repetitions (the first starts cold); the peers: their mean after a warm-up
THREADS=${THREADS:-2}
POLICIES=${POLICIES:-lru}
PEER=${PEER:-yes}
gguf="$MODELS/moe12-q4_0.gguf"
pack="$MODELS/moe12-q4_0.orkpack"
mkdir -p "$MODELS"
[ -f "$gguf" ] || "$ORK" synth --preset qwen3moe-30b-a3b --layers 12 --type Q4_0 -o "$gguf"
[ -f "$pack" ] || "$ORK" pack "$gguf" -o "$pack"
size=$(stat -c %s "$pack")
cap=$(python3 -c "print(int($size * $FRAC))")

cg=""
for base in /sys/fs/cgroup/memory /sys/fs/cgroup; do
  if [ -e "$base/memory.limit_in_bytes" ]; then
    cg="$base/ork-bench-experts"; mkdir -p "$cg"; echo "$cap" > "$cg/memory.limit_in_bytes"; break
  elif [ -e "$base/cgroup.controllers" ]; then
    cg="$base/ork-bench-experts"; mkdir -p "$cg"; echo "$cap" > "$cg/memory.max"; break
  fi
done
[ -n "$cg" ] || { echo "no writable memory cgroup" >&2; exit 1; }
trap 'rmdir "$cg" 2>/dev/null || true' EXIT

capped() { sh -c 'echo $$ > "$0/cgroup.procs"; shift; exec "$@"' "$cg" -- "$@"; }
cold() { sync; echo 1 > /proc/sys/vm/drop_caches; }

echo "# $(date -u +%FT%TZ) $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; ork $(git rev-parse --short HEAD 2>/dev/null)"
echo "# model $(basename "$pack") $((size >> 20)) MiB; cgroup cap $((cap >> 20)) MiB (FRAC $FRAC); -t $THREADS; decode $N tokens from an empty context"
for r in $(seq 1 "$ROUNDS"); do
  cold
  blocks=$(( (size >> 22) - 256 )); skip=$(( RANDOM % (blocks > 0 ? blocks : 1) ))
  disk=$(dd if="$pack" of=/dev/null bs=4M count=256 skip="$skip" iflag=direct 2>&1 | sed -n 's/.* copied, \([0-9.]*\) s.*/\1/p')
  echo "round $r disk $(python3 -c "print(f'{1073741824 / $disk / 1e9:.3f}')") GB/s (dd, O_DIRECT, 1 GiB)"
  for policy in $POLICIES; do
    cold
    out=$(capped "$ORK" bench -m "$pack" -p 0 -n "$N" -r "$REPS" -t "$THREADS" --expert-policy "$policy" --json 2>/dev/null)
    echo "round $r ork-$policy $out"
  done
  cold
  out=$(capped "$ORK" bench -m "$pack" -p 0 -n "$N" -r "$REPS" -t "$THREADS" --mmap --json 2>/dev/null)
  echo "round $r ork-mmap $out"
  if [ "$PEER" = yes ]; then
    # llama.cpp repacks Q4_0 into its interleaved layout at load, a second
    # copy in anonymous memory: under the cap the OOM killer ends it (137).
    # ik_llama.cpp without -rtr runs the mapped file as it is.
    for peer in llama-bench ik-llama-bench; do
      cold
      rc=0
      out=$(capped "$PEERS/bin/$peer" -m "$gguf" -p 0 -n "$N" -r "$REPS" -t "$THREADS" -o json 2>/dev/null | tr -d '\n') || rc=$?
      echo "round $r $peer rc=$rc $out"
    done
  fi
done
