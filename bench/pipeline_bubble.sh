#!/usr/bin/env bash
# The bubble of a pipeline on this host, measured by ppc-run and predicted by
# ppc-simulate, side by side. A GPT (bench/models.py gpt, f32, 4 layers) in
# 2 stages of one rank each (test/e2e/make_strategy.py ppS-SCHEDULE), GPipe
# and 1F1B, for several micro-batch counts:
#   step ms    the traced (last) step's span over all ranks;
#   measured   1 - (a rank's compute in that step) / (the step's span),
#              averaged over the ranks (ppc-run --trace: tid 0 events);
#   simulated  ppc-simulate's bubble with the kernels' times measured by
#              ppc-run --profile on the same plan;
#   ideal      (S - 1) / (m + S - 1), stages of equal time and free transfers.
# Usage: bench/pipeline_bubble.sh [BUILD_DIR]   (after scripts/build.sh)
#   MICROBATCHES="1 2 4 8", SCHEDULES="gpipe 1f1b", STEPS=6, plus GPT sizes
#   HIDDEN=256 SEQ=64 BATCH=16
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
microbatches=${MICROBATCHES:-"1 2 4 8"}
schedules=${SCHEDULES:-"gpipe 1f1b"}
steps=${STEPS:-6}
stages=2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run=(mpirun --allow-run-as-root --oversubscribe -np "$stages" "$build/bin/ppc-run")

python3 "$root/bench/models.py" gpt --unfused-attention --layers 4 --hidden "${HIDDEN:-256}" \
  --heads 4 --seq "${SEQ:-64}" --vocab 1000 --batch "${BATCH:-16}" > "$tmp/gpt.mlir"
opt() { "$build/bin/ppc-opt" "$tmp/gpt.mlir" "$@"; }
opt --ppc-auto-parallel="machine=cpux$stages search=data-parallel strategy-out=$tmp/dp.json" \
  -o /dev/null 2>/dev/null

printf "%-8s %4s %12s %10s %10s %8s\n" schedule m "step ms" measured simulated ideal
for schedule in $schedules; do
  for m in $microbatches; do
    w="$tmp/$schedule-$m"
    mkdir -p "$w"
    python3 "$root/test/e2e/make_strategy.py" --kind "pp$stages-$schedule" \
      --microbatches "$m" "$tmp/dp.json" "$w/strategy.json"
    opt --ppc-auto-parallel="machine=cpux$stages strategy-in=$w/strategy.json optimizer=adam plan=$w/plan.pb" \
      -o /dev/null 2>/dev/null
    "${run[@]}" "$w/plan.pb" --steps "$steps" --quiet --profile "$w/profile.json" \
      --trace "$w/trace.json" > "$w/run.log"
    read -r step measured < <(python3 - "$w/trace.json" <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))
events = events["traceEvents"] if isinstance(events, dict) else events
spans, busy = {}, {}
for e in events:
    if e.get("ph") != "X":
        continue
    rank = e["pid"]
    lo, hi = spans.get(rank, (e["ts"], e["ts"] + e["dur"]))
    spans[rank] = (min(lo, e["ts"]), max(hi, e["ts"] + e["dur"]))
    if e["tid"] == 0:
        busy[rank] = busy.get(rank, 0) + e["dur"]
step = max(hi for lo, hi in spans.values()) - min(lo for lo, hi in spans.values())
print("%.1f %.1f%%" % (step / 1e3,
                      100 * sum(1 - busy[r] / step for r in busy) / len(busy)))
PY
)
    simulated=$(opt --ppc-add-loss --ppc-attach-machine=machine="cpux$stages" \
      --ppc-import-strategy=file="$w/strategy.json" \
      --ppc-simulate="optimizer=adam profile=$w/profile.json" -o /dev/null 2>&1 |
      sed -n 's/.*bubble \([0-9.]*%\).*/\1/p' | head -1)
    ideal=$(python3 -c "print('%.1f%%' % (100 * ($stages - 1) / ($m + $stages - 1)))")
    printf "%-8s %4s %12s %10s %10s %8s\n" "$schedule" "$m" "$step" "$measured" "$simulated" "$ideal"
  done
done
