#!/bin/sh
# bench/compare.sh stays true: on the tiny shape, one round, it makes its
# models (ork synth, ork pack - calibrated by default -, llama-quantize), runs ork and
# both peers interleaved and prints every ratio; and with the peers absent
# it says which are missing and exits 3, after measuring ork alone.
# Usage: bench_compare.sh SOURCE_DIR ORK PEERS with|missing
set -eu
src=$1 ork=$2 peers=$3 mode=$4
dir=$(mktemp -d "${TEST_TMPDIR:-/tmp}/compare.XXXXXX")
trap 'rm -rf "$dir"' EXIT
run() {
  MODELS=$dir ORK=$ork THREADS=1 PP=16 TG=4 "$src/bench/compare.sh" tiny 1 >"$dir/out" 2>&1
}
if [ "$mode" = with ]; then
  for b in llama-bench ik-llama-bench llama-quantize; do
    if [ ! -x "$peers/bin/$b" ]; then echo "SKIPPED: $peers/bin/$b missing (ORK_PEERS)"; exit 77; fi
  done
  ORK_PEERS=$peers ENGINES="ork ork-gguf llama ik" run || { cat "$dir/out"; exit 1; }
  for want in "ork default pack / llama.cpp Q4_K_M: prefill [0-9.]*x ([0-9.]*-[0-9.]*), decode [0-9.]*x" \
              "ork default pack / ik_llama.cpp Q4_K_M -rtr 1: prefill [0-9.]*x" \
              "ork on the Q4_K_M file / llama.cpp Q4_K_M: prefill [0-9.]*x" \
              "tiny-ork.orkpack: .*bits per weight" "tiny-q4_k_m.gguf: .*bits per weight"; do
    grep -q "$want" "$dir/out" || { cat "$dir/out"; echo "missing from the output: $want"; exit 1; }
  done
  grep -E "^\|.*nan|nanx" "$dir/out" && { cat "$dir/out"; echo "a figure in the summary is nan"; exit 1; }
  echo "compare.sh measured ork and both peers, with ratios"
else
  rc=0
  ORK_PEERS=$dir/no-peers ENGINES="ork llama ik" run || rc=$?
  [ "$rc" = 3 ] || { cat "$dir/out"; echo "exit status $rc, not 3, with the peers missing"; exit 1; }
  for want in "peer missing, not measured: llama.cpp" "not measured, peer missing: ik_llama.cpp" \
              "| ork default pack | "; do
    grep -qF "$want" "$dir/out" || { cat "$dir/out"; echo "missing from the output: $want"; exit 1; }
  done
  echo "the missing peers were named, ork measured, exit 3"
fi
