#!/usr/bin/env bash
# README command (1): set up, build, and run the main job on a bundled example.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PPC_BUILD_DIR:-$root/build}
"$root/scripts/setup.sh"
"$root/scripts/build.sh" --target ppc-opt
out="$build/demo"
mkdir -p "$out"
model="$root/examples/mlp.onnx"
echo "ppc-opt: importing $model" >&2
"$build/bin/ppc-opt" "$model" --batch-size=64 \
  --ppc-op-summary="output=$out/summary.txt" -o "$out/mlp.mlir"
cat "$out/summary.txt"
echo "outputs: $out/mlp.mlir (imported graph), $out/summary.txt (op summary)"
