#!/usr/bin/env bash
# The MoE target (issue 5, docs/BENCHMARKS.md section 3): the 12-layer
# qwen3moe-30b-a3b shape (7.6 B parameters), written in F16 (15 GB on disk),
# packed uniform i4, decode and prefill with 2 threads and decode with 1,
# beside the read bandwidth each run measures.
#   MODELS=dir (default /tmp/ork-bench) ORK=build/release/ork bench/moe_engine.sh
set -euo pipefail
ORK=${ORK:-build/release/ork}
MODELS=${MODELS:-/tmp/ork-bench}
mkdir -p "$MODELS"
f16="$MODELS/moe12-f16.gguf"
pack="$MODELS/moe12-i4.orkpack"
[ -f "$f16" ] || "$ORK" synth --preset qwen3moe-30b-a3b --layers 12 --type F16 -o "$f16"
[ -f "$pack" ] || "$ORK" pack --uniform i4 --no-calibrate "$f16" -o "$pack"
"$ORK" bench -m "$pack" -p 512 -n 128 -r 3 -t 2
"$ORK" bench -m "$pack" -p 16 -n 128 -r 3 -t 2
"$ORK" bench -m "$pack" -p 16 -n 128 -r 3 -t 1
