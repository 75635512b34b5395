#!/usr/bin/env bash
# The cpu machine presets against this host, as FlexFlow calibrates its
# simulator: every kernel's time is measured once (ppc-run --profile, in a
# separate profiling run of each plan), then the simulator predicts whole
# steps from those kernels plus its own model of communication, gradient
# synchronization and optimizer updates (the preset's links and memory).
# Printed side by side per model and strategy: predicted and measured mean
# step time (ppc-run under mpirun, first step excluded, median of three
# runs) and their ratio; the
# goal is within 15%. A second column set shows the roofline alone.
# Usage: bench/calibrate_cpu.sh [BUILD_DIR] [STEPS]   (after scripts/build.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
steps=${2:-30}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpirun=(mpirun --oversubscribe)
[[ $(id -u) == 0 ]] && mpirun+=(--allow-run-as-root)

cases=()
for model_batch in "mlp 64" "cnn 16" "transformer 8"; do
  for ranks_kind in "1 dp" "2 dp" "2 tensor" "2 mixed"; do
    cases+=("$model_batch $ranks_kind")
  done
done

# Plans, then one profiling run each; the profiles are merged into one.
for c in "${cases[@]}"; do
  set -- $c
  model=$1 batch=$2 ranks=$3 kind=$4
  machine=$([[ $ranks == 1 ]] && echo cpu || echo "cpux$ranks")
  w=$tmp/$model-$ranks-$kind
  mkdir -p "$w"
  import=("$build/bin/ppc-opt" "$root/examples/$model.onnx" --batch-size="$batch")
  "${import[@]}" --ppc-auto-parallel="machine=$machine search=data-parallel strategy-out=$w/dp.json" -o /dev/null 2>/dev/null
  python3 "$root/test/e2e/make_strategy.py" --kind "$kind" "$w/dp.json" "$w/s.json"
  "${import[@]}" --ppc-auto-parallel="machine=$machine strategy-in=$w/s.json optimizer=adam plan=$w/plan.pb" -o /dev/null 2>/dev/null
  "${mpirun[@]}" -np "$ranks" "$build/bin/ppc-run" "$w/plan.pb" --steps 10 \
    --quiet --profile "$w/profile.json"
done
python3 - "$tmp/profile.json" "$tmp"/*/profile.json <<'PY'
import json, sys
merged = {}
for path in sys.argv[2:]:
    profile = json.load(open(path))
    for e in profile["entries"]:
        key = (e["op"], e["dtype"], e["phase"], json.dumps(e["operand_shapes"]))
        seconds, runs = merged.get(key, (0.0, 0))
        merged[key] = (seconds + e["seconds"] * e["runs"], runs + e["runs"])
entries = [{"op": k[0], "dtype": k[1], "phase": k[2],
            "operand_shapes": json.loads(k[3]), "seconds": s / r, "runs": r}
           for k, (s, r) in sorted(merged.items())]
json.dump({"version": 1, "device": profile["device"], "entries": entries},
          open(sys.argv[1], "w"), indent=1)
PY

printf "%-12s %5s %5s %-8s %11s %11s %7s %11s %7s\n" model batch ranks strategy \
  "measured ms" "profile ms" ratio "roofline ms" ratio
for c in "${cases[@]}"; do
  set -- $c
  model=$1 batch=$2 ranks=$3 kind=$4
  machine=$([[ $ranks == 1 ]] && echo cpu || echo "cpux$ranks")
  w=$tmp/$model-$ranks-$kind
  simulate() {
    "$build/bin/ppc-opt" "$root/examples/$model.onnx" --batch-size="$batch" \
      --ppc-add-loss --ppc-attach-machine=machine="$machine" \
      --ppc-import-strategy=file="$w/s.json" --ppc-simulate="optimizer=adam $1" \
      -o /dev/null 2>&1 | sed -n 's/^ *iteration time: \([0-9.]*\) ms/\1/p'
  }
  profiled=$(simulate "profile=$tmp/profile.json")
  roofline=$(simulate "")
  # The median of three runs: this host's timings vary from run to run.
  measured=$(for run in 1 2 3; do
      "${mpirun[@]}" -np "$ranks" "$build/bin/ppc-run" "$w/plan.pb" --steps "$steps" |
        sed -n 's/^mean step \([0-9.]*\) ms.*/\1/p'
    done | sort -g | sed -n 2p)
  printf "%-12s %5s %5s %-8s %11.3f %11.3f %7.2f %11.3f %7.2f\n" "$model" "$batch" \
    "$ranks" "$kind" "$measured" "$profiled" "$(echo "$profiled / $measured" | bc -l)" \
    "$roofline" "$(echo "$roofline / $measured" | bc -l)"
done
