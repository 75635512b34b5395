#!/usr/bin/env bash
# The cpu attention kernel on a ring in zigzag order against natural order
# (docs/runtime.md, "attention"): a GPT of sequence 4096 (1 layer, hidden
# 32, 4 heads, batch 2), search=megatron tp=1 cp=2 cp-comm=ring on cpux2,
# lowered with the pipeline's default order (zigzag, kept: the ring splits
# the sequence) and with zigzag=off, each trained STEPS steps on 2 ranks,
# alternating, ROUNDS times; prints ppc-run's mean step of each run.
# Usage: bench/zigzag_cpu.sh [BUILD_DIR]   (after scripts/build.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
steps=${STEPS:-12}
rounds=${ROUNDS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$root/bench/models.py" gpt --layers 1 --hidden 32 --heads 4 \
  --seq 4096 --vocab 64 --batch 2 >"$tmp/gpt.mlir"
layout="machine=cpux2 search=megatron tp=1 cp=2 cp-comm=ring optimizer=adam"
"$build/bin/ppc-opt" "$tmp/gpt.mlir" \
  --ppc-auto-parallel="$layout plan=$tmp/zigzag.pb" -o /dev/null 2>/dev/null
"$build/bin/ppc-opt" "$tmp/gpt.mlir" \
  --ppc-auto-parallel="$layout zigzag=off plan=$tmp/natural.pb" -o /dev/null 2>/dev/null
for ((r = 0; r < rounds; ++r)); do
  for order in zigzag natural; do
    printf "%-8s " "$order"
    mpirun --allow-run-as-root --oversubscribe -np 2 "$build/bin/ppc-run" \
      "$tmp/$order.pb" --steps "$steps" 2>&1 | grep "mean step"
  done
done
