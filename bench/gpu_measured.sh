#!/usr/bin/env bash
# The simulator against a real GPU: the GPTs that bench/gpu_microbench.py
# trained (PyTorch eager, bf16, one micro-batch, one GPU) simulated on one
# device of the preset that GPU belongs to, forward and forward+backward
# side by side. (The GEMM model against every measured GEMM is the unit
# test GemmModel.MatchesTheMeasuredH100Table.)
# Usage: bench/gpu_measured.sh [BUILD_DIR] [MEASUREMENTS_JSON]
#   (after scripts/build.sh; default bench/results/gpu-h100.json, measured
#   on an H100 80GB HBM3, simulated on the first device of MACHINE, a
#   preset or JSON file, dgx-h100 by default. The preset's figures before
#   they were measured: git show baebc0e:examples/machines/dgx-h100x2.json
#   > old.json; MACHINE=old.json bench/gpu_measured.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
measured=${2:-$root/bench/results/gpu-h100.json}
machine=${MACHINE:-dgx-h100}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "| model | measured fwd ms | predicted fwd ms | ratio | measured fwd+bwd ms | predicted fwd+bwd ms | ratio |"
echo "|---|---:|---:|---:|---:|---:|---:|"
python3 -c '
import json, sys
for r in json.load(open(sys.argv[1]))["gpt"]:
    print(r["model"], r["layers"], r["hidden"], r["heads"], r["seq"],
          r["vocab"], r["forward_s"], r["forward_backward_s"])' "$measured" |
while read -r name layers hidden heads seq vocab fwd fwdbwd; do
  python3 "$root/bench/models.py" gpt --fused-attention --layers "$layers" \
    --hidden "$hidden" --heads "$heads" --ff $((4 * hidden)) --seq "$seq" \
    --vocab "$vocab" --batch 1 --dtype bf16 >"$tmp/gpt.mlir"
  # Every op whole on the machine's first GPU; the trace's kernels summed
  # by phase (the update is not part of the measured step).
  "$build/bin/ppc-opt" "$tmp/gpt.mlir" --ppc-attach-machine=machine="$machine" \
    --ppc-simulate="optimizer=sgd unassigned=single trace=$tmp/trace.json" \
    -o /dev/null >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
  python3 - "$tmp/trace.json" "$name" "$fwd" "$fwdbwd" <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))
events = events["traceEvents"] if isinstance(events, dict) else events
kernels = [e for e in events if e.get("ph") == "X" and e.get("tid") == 0]
f = sum(e["dur"] for e in kernels if e["name"].endswith(" fwd")) / 1e3
b = sum(e["dur"] for e in kernels if e["name"].endswith(" bwd")) / 1e3
mf, mfb = float(sys.argv[3]) * 1e3, float(sys.argv[4]) * 1e3
print("| %s | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f |" %
      (sys.argv[2], mf, f, f / mf, mfb, f + b, (f + b) / mfb))
PY
done
