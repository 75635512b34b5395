#!/usr/bin/env bash
# README command (1): set up, build, and run the main job on a bundled example:
# import examples/cnn.onnx, print its op summary, and simulate one training
# iteration, data parallel on the default machine (one DGX H100).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PPC_BUILD_DIR:-$root/build}
model=${PPC_DEMO_MODEL:-$root/examples/cnn.onnx}
machine=${PPC_DEMO_MACHINE:-dgx-h100}
"$root/scripts/setup.sh"
"$root/scripts/build.sh" --target ppc-opt
out="$build/demo"
mkdir -p "$out"
echo "ppc-opt: importing $model, simulating on $machine" >&2
"$build/bin/ppc-opt" "$model" --batch-size=64 \
  --ppc-op-summary="output=$out/summary.txt" \
  --ppc-attach-machine="machine=$machine" \
  --ppc-simulate="optimizer=adam output=$out/simulation.txt trace=$out/timeline.json" \
  -o "$out/model.mlir"
cat "$out/summary.txt"
echo
head -n 6 "$out/simulation.txt"
echo
echo "outputs in $out:"
echo "  model.mlir       the imported graph with its machine (ppc + topo dialects)"
echo "  summary.txt      the op summary above"
echo "  simulation.txt   the simulated iteration: per device and per op"
echo "  timeline.json    the simulated timeline (open in Perfetto or chrome://tracing)"
