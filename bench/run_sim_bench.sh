#!/usr/bin/env bash
# Simulator speed: full vs delta simulations per second for BERT-style models
# of ~20, ~300 and ~1000 ops on 16 (dgx-a100x2) and 64 (dgx-h100x8) devices.
# Usage: bench/run_sim_bench.sh [BUILD_DIR]   (after scripts/build.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for layers in 1 13 45; do
  python3 "$root/bench/models.py" bert --unfused-attention --layers "$layers" > "$tmp/bert-$layers-layers.mlir"
done
first=1
for layers in 1 13 45; do
  out=$("$build/bin/ppc-sim-bench" "$tmp/bert-$layers-layers.mlir" --seconds=2)
  if [[ $first == 1 ]]; then echo "$out"; first=0; else echo "$out" | tail -n +2; fi
done
