#!/usr/bin/env bash
# README command (1): set up, build, and run the main job on a bundled example:
# import examples/cnn.onnx, print its op summary, and simulate one training
# iteration, data parallel on the default machine (one DGX H100); then search
# a strategy for two CPU processes of this host, lower it to a plan, and train
# it for 20 steps on one synthetic batch under mpirun, checked against one
# device on the first.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PPC_BUILD_DIR:-$root/build}
model=${PPC_DEMO_MODEL:-$root/examples/cnn.onnx}
machine=${PPC_DEMO_MACHINE:-dgx-h100}
"$root/scripts/setup.sh"
"$root/scripts/build.sh" --target ppc-opt ppc-run ppc-python
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
echo
echo "ppc-opt: searching a strategy for cpux2 and lowering it to a plan" >&2
"$build/bin/ppc-opt" "$model" --batch-size=16 \
  --ppc-auto-parallel="machine=cpux2 search=mcmc budget=2000 threads=1 optimizer=adam report-dir=$out/report plan=$out/plan.pb" \
  -o "$out/plan.mlir"
mpirun=(mpirun -np 2)
[[ $(id -u) == 0 ]] && mpirun+=(--allow-run-as-root)
"${mpirun[@]}" "$build/bin/ppc-run" "$out/plan.pb" --steps 20 --batches 1 --verify \
  --trace "$out/measured-timeline.json" | grep -v "^  \(grad\|weight\|frozen\)  "
echo
echo "outputs in $out:"
echo "  model.mlir       the imported graph with its machine (ppc + topo dialects)"
echo "  summary.txt      the op summary above"
echo "  simulation.txt   the simulated iteration: per device and per op"
echo "  timeline.json    the simulated timeline (open in Perfetto or chrome://tracing)"
echo "  report/          the cpux2 search: strategy, summary, baselines, graph.html"
echo "  plan.pb          the plan ppc-run trained (plan.mlir: the same as IR)"
echo "  plan.pb.weights  its weights: the ONNX model's initializers"
echo "  measured-timeline.json  the measured timeline of the last step"
