#!/usr/bin/env bash
# FlexFlow's evaluation re-run in the simulator: AlexNet, Inception-v3,
# ResNet-101, RNNLM and a Transformer on FlexFlow's two clusters, 4x4 P100
# (p100x16) and 16x4 K80 (k80x64). Per model and machine: data parallel, the
# expert baselines (Megatron, one weird trick), the DP search and MCMC, and
# the found strategy's speedup (see docs/search.md).
# Batch: BATCH=per-gpu (default): 64 per GPU (256 per GPU for AlexNet), so the
# global batch of a step is 64 x devices, as in FlexFlow's weak-scaling
# throughput figures; BATCH=global: 64 (256 for AlexNet) per step in all.
# Usage: bench/run_flexflow_eval.sh [BUILD_DIR]   (after scripts/build.sh)
#   SEARCH_SECONDS=30 (MCMC and DP budget each), MODELS="alexnet ...",
#   MACHINES="p100x16 k80x64", THREADS=1, BATCH=per-gpu|global
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
seconds=${SEARCH_SECONDS:-30}
models=${MODELS:-alexnet inception_v3 resnet101 rnnlm transformer}
machines=${MACHINES:-p100x16 k80x64}
threads=${THREADS:-1}
batch_mode=${BATCH:-per-gpu}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
header=true
for model in $models; do
  per_gpu=64
  [[ $model == alexnet ]] && per_gpu=256
  for machine in $machines; do
    case $machine in
      p100x16) devices=16 ;;
      k80x64) devices=64 ;;
      *x*) devices=${machine##*x} ;;
    esac
    batch=$((per_gpu * devices))
    [[ $batch_mode == global ]] && batch=$per_gpu
    python3 "$root/bench/models.py" "$model" --batch "$batch" --unfused-attention > "$tmp/$model.mlir"
    "$build/bin/ppc-search-bench" "$tmp/$model.mlir" --machines="$machine" \
      --label="$model (batch $batch)" --seconds="$seconds" \
      --search-threads="$threads" --header=$header
    header=false
  done
done
