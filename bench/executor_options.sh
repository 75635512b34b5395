#!/usr/bin/env bash
# ppc-run's options side by side on the 100 MB MLP of bench/vs_pytorch.py
# (1024-4096-4096-1024-10, batch 64) on 2 ranks: data parallel with the
# gradient all-reduces after the backward (the default) and started during
# it (--overlap), with the reference kernels only (--reference-kernels),
# and the sharded states ZeRO-2 and ZeRO-3, whose reduce-scatters and
# all-gathers run in 1 MiB pieces. Prints the mean step (first excluded)
# and the grad_sync and communication times per row.
# Usage: bench/executor_options.sh [BUILD_DIR] [STEPS]
#   (after scripts/build.sh; needs Debian's python3-torch for the export)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
steps=${2:-12}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpirun=(mpirun -np 2 --oversubscribe)
[[ $(id -u) == 0 ]] && mpirun+=(--allow-run-as-root)

/usr/bin/python3 - "$root/bench" "$tmp/mlp.onnx" <<'PY'
import sys, warnings
sys.path.insert(0, sys.argv[1])
warnings.filterwarnings("ignore")
import torch
from vs_pytorch import build
model, example, _ = build("mlp")
model.eval()
torch.onnx.export(model, example, sys.argv[2], opset_version=17,
                  input_names=["input"], output_names=["output"],
                  dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
PY
import="$build/bin/ppc-opt $tmp/mlp.onnx --batch-size=64"
$import --ppc-auto-parallel="machine=cpux2 search=data-parallel optimizer=adam plan=$tmp/dp.pb strategy-out=$tmp/dp.json" -o /dev/null 2>/dev/null
for kind in zero2 zero3; do
  /usr/bin/python3 "$root/test/e2e/make_strategy.py" --kind $kind "$tmp/dp.json" "$tmp/$kind.json"
  $import --ppc-auto-parallel="machine=cpux2 strategy-in=$tmp/$kind.json optimizer=adam plan=$tmp/$kind.pb" -o /dev/null 2>/dev/null
done

echo "| layout | ppc-run options | mean step ms | grad_sync ms | communication ms |"
echo "|---|---|---:|---:|---:|"
row() {
  local layout=$1 plan=$2
  shift 2
  "${mpirun[@]}" "$build/bin/ppc-run" "$plan" --steps "$steps" "$@" > "$tmp/out" 2>&1
  awk -v layout="$layout" -v opts="${*:-(default)}" '
    /^mean step/ { mean = $3 }
    $1 == "grad_sync" { sync = $2 }
    $1 == "communication" { comm = $2 }
    END { printf "| %s | %s | %s | %s | %s |\n", layout, opts, mean, sync, comm }' "$tmp/out"
}
row "data parallel" "$tmp/dp.pb"
row "data parallel" "$tmp/dp.pb" --overlap
row "data parallel" "$tmp/dp.pb" --reference-kernels
row "ZeRO-2" "$tmp/zero2.pb"
row "ZeRO-3" "$tmp/zero3.pb"
