#!/usr/bin/env bash
# FlexFlow-style strong scaling in the simulator: AlexNet and VGG-16 at a
# fixed global batch (128 and 256) on p100x16 and k80x64. Per row, side by
# side in one run: data parallel, one weird trick, the DP search, MCMC alone
# (chains from the baselines, no pipelines, MCMC_BUDGET) and the default
# search (the DP, the pipeline search, MCMC from the DP's answer and the
# baselines; default budget), with each search's wall time on this machine
# and the ratios to the DP.
# Usage: bench/strong_scaling.sh [BUILD_DIR]   (after scripts/build.sh)
#   MODELS="alexnet vgg16", BATCHES="128 256", MACHINES="p100x16 k80x64",
#   THREADS=2, DP_BUDGET=600s, MCMC_BUDGET=1000 (MCMC alone's proposals per
#   chain; the issue's bar is 4000)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
models=${MODELS:-alexnet vgg16}
batches=${BATCHES:-128 256}
machines=${MACHINES:-p100x16 k80x64}
threads=${THREADS:-2}
dp_budget=${DP_BUDGET:-600s}
mcmc_budget=${MCMC_BUDGET:-1000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Runs one search; prints "<ms> <seconds>" from ppc-search's summary line.
search() {
  local model=$1 machine=$2 options=$3
  "$build/bin/ppc-opt" "$model" --ppc-attach-machine=machine="$machine" \
    --ppc-search="$options progress=off" -o /dev/null 2>"$tmp/err" || {
    cat "$tmp/err" >&2
    exit 1
  }
  sed -nE 's/.* iterations in ([0-9.]+) s.*: ([0-9.]+|out of memory)( ms)? per iteration.*/\2 \1/p' \
    "$tmp/err" | sed 's/out of memory/OOM/'
}

echo "| model (global batch) | machine | data parallel ms | one weird trick ms | DP ms | DP s | MCMC alone ms | MCMC alone s | default ms | default s | MCMC alone / DP | default / DP |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for model in $models; do
  for batch in $batches; do
    python3 "$root/bench/models.py" "$model" --batch "$batch" --unfused-attention >"$tmp/m.mlir"
    for machine in $machines; do
      read -r dp_ms _ < <(search "$tmp/m.mlir" "$machine" "algorithm=data-parallel")
      read -r owt_ms _ < <(search "$tmp/m.mlir" "$machine" "algorithm=one-weird-trick")
      read -r dps_ms dps_s < <(search "$tmp/m.mlir" "$machine" "algorithm=dp budget=$dp_budget")
      read -r mc_ms mc_s < <(search "$tmp/m.mlir" "$machine" "threads=$threads dp-start=false pipelines=false budget=$mcmc_budget")
      read -r def_ms def_s < <(search "$tmp/m.mlir" "$machine" "threads=$threads")
      ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.3f", a / b; else printf "-" }'; }
      echo "| $model ($batch) | $machine | $dp_ms | $owt_ms | $dps_ms | $dps_s | $mc_ms | $mc_s | $def_ms | $def_s | $(ratio "$mc_ms" "$dps_ms") | $(ratio "$def_ms" "$dps_ms") |"
    done
  done
done
