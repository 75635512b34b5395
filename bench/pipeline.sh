#!/usr/bin/env bash
# Pipelines for large GPTs (bench/models.py gpt --size), bf16 + Adam, side by
# side in one run per row:
#   megatron  Megatron-LM's published layout for the model (Narayanan et al.
#             2021, Table 1: TP 8 in a node, PP as published for the size or
#             the nearest size (39.1B: 2, 145.6B: 8; 175B takes 145.6B's),
#             DP over the rest), its micro-batch count and schedule chosen
#             by simulation
#             (algorithm=pipeline stages=PP
#             stage-baseline=megatron-sp-distopt-selective);
#   pipeline  the pipeline search (algorithm=pipeline: stage counts x
#             micro-batches x the baseline inside the stages, unpipelined
#             baselines included);
#   default   the default search without pipelines (algorithm=mcmc: the DP,
#             then MCMC), BUDGET long; skipped beyond DEFAULT_MAX_GPUS (256),
#             where simulating unpipelined strategies takes minutes;
# found = the best of pipeline and default; its MFU from ppc-simulate
# (pipeline) or the report (default).
# Usage: bench/pipeline.sh [BUILD_DIR]   (after scripts/build.sh)
#   ROWS="39b:dgx-h100x8:2 145b:dgx-h100x32:8", PER_GPU=2, BUDGET=60s,
#   DEFAULT_MAX_GPUS=256
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
rows=${ROWS:-"39b:dgx-h100x4:2 39b:dgx-h100x8:2 145b:dgx-h100x16:8 145b:dgx-h100x32:8 175b:dgx-h100x128:8"}
per_gpu=${PER_GPU:-2}
budget=${BUDGET:-60s}
default_max=${DEFAULT_MAX_GPUS:-256}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
devices_of() { case "$1" in *x[0-9]*) echo $((8 * ${1##*x})) ;; *) echo 8 ;; esac; }

# Runs ppc-search (the strategy to $tmp/out.mlir); prints "<ms or OOM>
# <seconds> <algorithm text>".
search() {
  local model=$1 machine=$2 options=$3
  "$build/bin/ppc-opt" "$model" --ppc-attach-machine=machine="$machine" \
    --ppc-search="optimizer=adam progress=off $options" -o "$tmp/out.mlir" 2>"$tmp/err" || {
    cat "$tmp/err" >&2
    exit 1
  }
  sed -nE 's/^ppc-search @main: (.*), [0-9]+ iterations in ([0-9.]+) s[^:]*: ([0-9.]+|out of memory)( ms)? per iteration.*/\3 \2 \1/p' \
    "$tmp/err" | sed 's/^out of memory/OOM/'
}

echo "| model | machine (GPUs) | batch | Megatron TP8 x PP x DP ms | pipeline search ms (layout) | default search ms | found vs Megatron | found MFU | search s |"
echo "|---|---|---:|---:|---|---:|---:|---:|---:|"
for row in $rows; do
  IFS=: read -r size machine pp <<<"$row"
  n=$(devices_of "$machine")
  batch=$((per_gpu * n))
  model="$tmp/gpt-$size-b$batch.mlir"
  python3 "$root/bench/models.py" gpt --size "$size" --unfused-attention --batch "$batch" --dtype bf16 > "$model"
  read -r meg_ms meg_s meg_text < <(search "$model" "$machine" \
    "algorithm=pipeline stages=$pp stage-baseline=megatron-sp-distopt-selective")
  read -r pipe_ms pipe_s pipe_text < <(search "$model" "$machine" "algorithm=pipeline budget=600s")
  # The pipeline search's MFU, from ppc-simulate of its strategy.
  pipe_mfu=$("$build/bin/ppc-opt" "$tmp/out.mlir" --ppc-simulate=optimizer=adam -o /dev/null |
    sed -nE 's/^  MFU: ([0-9.]+)%.*/\1/p')
  report="$tmp/report-$size-$machine"
  def_ms=- def_s=0 mfu=0
  if [ "$n" -le "$default_max" ]; then
    read -r def_ms def_s _ < <(search "$model" "$machine" \
      "algorithm=mcmc budget=$budget threads=2 seed=1 report-dir=$report")
    mfu=$(python3 -c "import json; j=json.load(open('$report/baselines.json')); print(next((r.get('mfu', 0) for r in j['strategies'] if r['found']), 0))")
  fi
  python3 - "$size" "$machine" "$n" "$batch" "$meg_ms" "$pipe_ms" "$pipe_text" "$def_ms" "$mfu" "$pipe_s" "$def_s" "${pipe_mfu:-0}" <<'PY'
import sys
size, machine, n, batch, meg, pipe, text, dflt, mfu, ps, ds, pmfu = sys.argv[1:]
def num(x):
    return float("inf") if x in ("OOM", "-") else float(x)
found = min(num(pipe), num(dflt))
layout = text.replace("pipeline search: ", "").replace("pipeline of ", "")
vs = "%.2fx" % (num(meg) / found) if found < float("inf") and num(meg) < float("inf") else "-"
if num(pipe) <= num(dflt) and float(pmfu) > 0:
    scaled = "%.1f%%" % float(pmfu)
elif float(mfu) > 0 and num(dflt) < float("inf"):
    scaled = "%.1f%%" % (100 * float(mfu))
else:
    scaled = "-"
print("| gpt %s | %s (%s) | %s | %s | %s (%s) | %s | %s | %s | %.0f |" % (
    size, machine, n, batch, meg, pipe, layout, dflt, vs, scaled,
    float(ps) + float(ds)))
PY
done
