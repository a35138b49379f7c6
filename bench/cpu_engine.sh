#!/usr/bin/env bash
# The CPU engine's targets (issue 4, docs/BENCHMARKS.md): a synthetic model
# of the llama.cpp comparison shape (1.1B: n_embd 2048, 16 layers, 32 heads,
# 8 KV heads, n_ff 8192, vocab 32000, untied), packed uniform i4 (4.02 bpw),
# decode and prefill with 2 threads and decode with 1, beside the read
# bandwidth each run measures.
#   MODELS=dir (default /tmp/ork-bench) ORK=build/release/ork bench/cpu_engine.sh
set -euo pipefail
ORK=${ORK:-build/release/ork}
MODELS=${MODELS:-/tmp/ork-bench}
mkdir -p "$MODELS"
f32="$MODELS/llama-1b-f32.gguf"
pack="$MODELS/llama-1b-i4.orkpack"
[ -f "$f32" ] || "$ORK" synth --preset llama-1b -o "$f32"
[ -f "$pack" ] || "$ORK" pack --uniform i4 --no-calibrate "$f32" -o "$pack"
"$ORK" inspect "$pack" | grep -E "bits per weight|tensor bytes" || true
"$ORK" bench -m "$pack" -p 512 -n 128 -r 3 -t 2
"$ORK" bench -m "$pack" -p 0 -n 128 -r 3 -t 1
