#!/usr/bin/env bash
# Large GPTs on DGX H100 machines (issue 10's acceptance table): for each
# model and machine, every baseline of search::baselines() and the MCMC
# search started from all of them, simulated in bf16 mixed precision with
# Adam, 2 sequences per GPU. Prints iteration time (or OOM) per strategy,
# the found strategy's speedup over the best baseline that fits, its
# predicted MFU and its peak memory per device.
# Usage: bench/large_models.sh [BUILD_DIR]   (after scripts/build.sh)
#   SIZES="1.5b 8.3b 13b 39b" MACHINES="dgx-h100 dgx-h100x2 dgx-h100x4
#   dgx-h100x8" PER_GPU=2 BUDGET=60s THREADS=2
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
sizes=${SIZES:-"1.5b 8.3b 13b 39b"}
machines=${MACHINES:-"dgx-h100 dgx-h100x2 dgx-h100x4 dgx-h100x8"}
per_gpu=${PER_GPU:-2}
budget=${BUDGET:-60s}
threads=${THREADS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Devices of a DGX preset: 8 per node.
devices_of() { case "$1" in *x[0-9]*) echo $((8 * ${1##*x})) ;; *) echo 8 ;; esac; }
echo "| model | machine (GPUs) | batch | baselines (ms) | found ms | found vs best baseline that fits | found MFU | found peak memory | search s |"
echo "|---|---|---:|---|---:|---|---:|---:|---:|"
for size in $sizes; do
  for machine in $machines; do
    n=$(devices_of "$machine")
    batch=$((per_gpu * n))
    model="$tmp/gpt-$size-b$batch.mlir"
    [ -f "$model" ] || python3 "$root/bench/models.py" gpt --unfused-attention --size "$size" \
      --batch "$batch" --dtype bf16 > "$model"
    report="$tmp/report-$size-$machine"
    start=$(date +%s.%N)
    "$build/bin/ppc-opt" "$model" --ppc-attach-machine=machine="$machine" \
      --ppc-search="algorithm=mcmc budget=$budget threads=$threads seed=1 optimizer=adam report-dir=$report progress=off" \
      -o /dev/null 2> "$report.log" || { echo "gpt $size on $machine: search failed"; cat "$report.log"; continue; }
    end=$(date +%s.%N)
    python3 - "$report/baselines.json" "$size" "$machine" "$n" "$batch" "$start" "$end" <<'PY'
import json, sys
path, size, machine, n, batch, start, end = sys.argv[1:]
j = json.load(open(path))
rows = j["strategies"]
found = next(r for r in rows if r["found"])
base = [r for r in rows if not r["found"]]
def cell(r):
    return "OOM" if r["out_of_memory"] else "%.1f" % r["iteration_ms"]
fits = [r for r in base if not r["out_of_memory"]]
best = min(fits, key=lambda r: r["iteration_ms"]) if fits else None
vs = ("%.2fx vs %s" % (best["iteration_ms"] / found["iteration_ms"], best["name"])
      if best and not found["out_of_memory"] else
      ("nothing fits" if found["out_of_memory"] else "only found fits"))
print("| gpt %s | %s (%s) | %s | %s | %s | %s | %s | %.1f GiB | %.0f s |" % (
    size, machine, n, batch,
    ", ".join("%s %s" % (r["name"], cell(r)) for r in base),
    cell(found), vs,
    "%.1f%%" % (100 * found["mfu"]) if not found["out_of_memory"] else "-",
    found["peak_memory_bytes"] / 2**30, float(end) - float(start)))
PY
  done
done
