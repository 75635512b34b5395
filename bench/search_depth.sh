#!/usr/bin/env bash
# MCMC's cost by model depth: MLPs of 250 to 5,000 layers (linear 256 ->
# 256 + ReLU each; bench/models.py mlp) on cpux4, one thread, no DP start,
# seed 1. For each: the whole 200-iteration search, and the time per
# iteration taken from a 100- and a 300-iteration search (their difference
# over 200: the starts' simulations cancel out), side by side with 250
# layers' figure. Table in docs/search.md ("Search time by depth").
# Usage: bench/search_depth.sh [BUILD_DIR]   (after scripts/build.sh)
#   LAYERS="250 500 1000 5000"
#   BUDGETS="1000 3000": the two searches' iterations (default "100 300");
#   longer ones resolve wall-clock time better (ppc-opt prints 10 ms).
#   COUNT=instructions: per iteration, instructions (valgrind's callgrind,
#   the 100- and 300-iteration searches' difference) instead of ms: exact,
#   where this machine's wall clock varies by more than a small change.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
layers=${LAYERS:-250 500 1000 5000}
read -r first second <<< "${BUDGETS:-100 300}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
search() { # MODEL BUDGET -> the search's seconds (or its instructions)
  local args=(--ppc-add-loss --ppc-attach-machine=machine=cpux4
    "--ppc-search=budget=$2 threads=1 seed=1 dp-start=false pipelines=false" -o /dev/null)
  if [[ "${COUNT:-}" == instructions ]]; then
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$build/bin/ppc-opt" "$1" \
      "${args[@]}" 2>&1 | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
  else
    "$build/bin/ppc-opt" "$1" "${args[@]}" 2>&1 |
      sed -n 's/.* iterations in \([0-9.]*\) s.*/\1/p'
  fi
}
unit="ms / iteration" scale=1e3
[[ "${COUNT:-}" == instructions ]] && unit="instr. / iteration" scale=1
printf "%8s %8s %14s %18s %12s\n" layers ops "200 it" "$unit" "vs first"
base=""
for l in $layers; do
  /usr/bin/python3 "$root/bench/models.py" mlp --layers "$l" --hidden 256 \
    --batch 64 > "$tmp/mlp.mlir"
  ops=$((2 * l + 2))
  whole=$(search "$tmp/mlp.mlir" 200)
  short=$(search "$tmp/mlp.mlir" "$first")
  long=$(search "$tmp/mlp.mlir" "$second")
  per=$(awk -v a="$short" -v b="$long" -v n="$((second - first))" -v k="$scale" \
    'BEGIN { printf "%.3f", (b - a) / n * k }')
  [[ -z "$base" ]] && base=$per
  printf "%8d %8d %14s %18s %11.2fx\n" "$l" "$ops" "$whole" "$per" \
    "$(awk -v p="$per" -v b="$base" 'BEGIN { print p / b }')"
done
