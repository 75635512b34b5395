#!/usr/bin/env bash
# The dynamic programming on large transformers: GPTs of bench/models.py
# (bf16 mixed precision, Adam, 2 sequences per GPU) on one and eight DGX
# H100s. Per row: the space its tables cover, cost classes, table entries
# and how many tables and eliminations repeated layers shared, the time to
# its own answer, and the answer after refinement under the simulator
# within the budget, next to data parallel.
# Usage: bench/dp_scaling.sh [BUILD_DIR]   (after scripts/build.sh)
#   SIZES="1.5b 8.3b", MACHINES="dgx-h100 dgx-h100x8", BUDGET=60s
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
sizes=${SIZES:-1.5b 8.3b}
machines=${MACHINES:-dgx-h100 dgx-h100x8}
budget=${BUDGET:-60s}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "| model | machine (GPUs) | ops | table space | cost classes | entries | shared | DP answer ms | at s | refined ms | total s | data parallel ms |"
echo "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for size in $sizes; do
  for machine in $machines; do
    case $machine in
      dgx-h100) gpus=8 ;;
      dgx-h100x*) gpus=$((8 * ${machine#dgx-h100x})) ;;
      *) gpus=8 ;;
    esac
    python3 "$root/bench/models.py" gpt --unfused-attention --size "$size" --batch $((2 * gpus)) \
      --dtype bf16 >"$tmp/m.mlir"
    "$build/bin/ppc-opt" "$tmp/m.mlir" --ppc-attach-machine=machine="$machine" \
      --ppc-search="algorithm=dp budget=$budget optimizer=adam progress=on" \
      -o /dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
    tables=$(grep "dp: cost tables" "$tmp/err" || true)
    answer=$(grep "dp: its own answer" "$tmp/err" || true)
    summary=$(grep "^ppc-search @" "$tmp/err")
    space=$(sed -nE 's/.*cost tables over (.*): [0-9]+ ops in.*/\1/p' <<<"$tables")
    ops=$(sed -nE 's/.*: ([0-9]+) ops in ([0-9]+) cost classes, ([0-9]+) entries.*/\1/p' <<<"$tables")
    classes=$(sed -nE 's/.* ops in ([0-9]+) cost classes.*/\1/p' <<<"$tables")
    entries=$(sed -nE 's/.*classes, ([0-9]+) entries.*/\1/p' <<<"$tables")
    shared=$(sed -nE 's/.*\(([0-9]+) tables and eliminations shared\).*/\1/p' <<<"$answer")
    own=$(sed -nE 's/.*its own answer ([0-9.]+|inf) ms at ([0-9.]+) s.*/\1/p' <<<"$answer")
    at=$(sed -nE 's/.*its own answer ([0-9.]+|inf) ms at ([0-9.]+) s.*/\2/p' <<<"$answer")
    refined=$(sed -nE 's/.*: ([0-9.]+|out of memory)( ms)? per iteration predicted.*/\1/p' <<<"$summary")
    total=$(sed -nE 's/.* iterations in ([0-9.]+) s.*/\1/p' <<<"$summary")
    dp=$(sed -nE 's/.*data parallel ([0-9.]+ ms|out of memory).*/\1/p' <<<"$summary")
    echo "| gpt $size | $machine ($gpus) | $ops | $space | $classes | $entries | $shared | $own | $at | $refined | $total | $dp |"
  done
done
