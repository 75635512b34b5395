#!/usr/bin/env bash
# The simulator against ppc-run on this host, after calibrating both from
# ppc-run itself, as FlexFlow calibrates its simulator:
#   1. `mpirun -np R ppc-calibrate` per rank count R writes a machine (GEMM
#      rate, update bandwidth, messages and collectives by size);
#   2. every plan runs once with `ppc-run --profile` (its kernels' times),
#      in order: a `searched` plan's search reads the merged profiles of
#      its rank count's plans before it;
#   3. each plan runs three more times with --profile (and --quiet, its
#      steps' times in a --log); the run with the
#      median mean step (first step excluded) is the measurement, and the
#      simulator predicts the step from the machine and that run's profile,
#      with gradient sync after backward as ppc-run runs it (overlap=false).
# Beside it, the same machine without the senders' part of a message (only
# the receiver held, as before ppc-calibrate measured it), and the
# uncalibrated preset (cpuxR) with its roofline; counts within 15% last.
# The strategies (KINDS): make_strategy.py's kinds (dp, tensor, mixed,
# spatial, replicated, scatter, recompute, zero1-3), `searched` (mcmc on the
# calibrated machine), a baseline by name (`fsdp`, `megatron-sp`, ...) and
# Megatron-LM layouts as `megatron:tp2-pp2-m4` (search=megatron's options:
# tpN ppN vN mN sp distopt selective full). With 5 or more strategies of
# one model and rank count, the script ends with Spearman's rank
# correlation of predicted and measured steps per such group.
# Usage: bench/calibrate_cpu.sh [BUILD_DIR] [STEPS]   (after scripts/build.sh)
# Environment: RANKS ("1 2 4"), MODELS ("mlp:64 cnn:16 transformer:8
# gpt:8", model:batch; gpt is bench/models.py's small GPT; other names are
# bench/export_torchvision.py's exports in MODELS_DIR, /tmp/ppc-models, at
# IMAGE x IMAGE pixels, 64), KINDS ("dp tensor mixed searched"; one rank
# runs dp only).
# The rank check of docs/runtime.md:
#   RANKS=2 MODELS=gpt:8 KINDS="dp tensor mixed spatial replicated scatter
#   recompute zero1 zero2 zero3 searched fsdp megatron megatron-sp
#   megatron-distopt megatron-sp-distopt megatron-sp-distopt-selective
#   megatron:tp1-pp2-m2 megatron:tp1-pp2-m4 megatron:tp1-pp2-m8
#   megatron:tp1-pp2-m4-full
#   megatron:tp2-sp-full" bench/calibrate_cpu.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
steps=${2:-20}
ranks_list=${RANKS:-1 2 4}
models=${MODELS:-mlp:64 cnn:16 transformer:8 gpt:8}
kinds=${KINDS:-dp tensor mixed searched}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Each rank on a core of its own, or sharing one in turn where ranks
# outnumber cores: unbound, 4 ranks on 2 cores settle into one of two
# speeds per run (the MLP's tensor layout 1.2 or 1.9 ms a step; bound, 1.22
# to 1.27 in six runs).
mpirun=(mpirun --oversubscribe --bind-to core:overload-allowed)
[[ $(id -u) == 0 ]] && mpirun+=(--allow-run-as-root)
opt=$build/bin/ppc-opt

# The model's import command (ONNX examples, or bench/models.py's GPT).
import_of() {
  local model=$1 batch=$2
  if [[ $model == gpt ]]; then
    [[ -f $tmp/gpt-$batch.mlir ]] ||
      python3 "$root/bench/models.py" gpt --unfused-attention --layers 2 --hidden 256 --heads 4 \
        --ff 1024 --seq 64 --vocab 2000 --batch "$batch" >"$tmp/gpt-$batch.mlir"
    echo "$opt $tmp/gpt-$batch.mlir"
  elif [[ -f $root/examples/$model.onnx ]]; then
    echo "$opt $root/examples/$model.onnx --batch-size=$batch"
  else
    # bench/export_torchvision.py's exports, at IMAGE x IMAGE pixels.
    local file=${MODELS_DIR:-/tmp/ppc-models}/$model.onnx image=${IMAGE:-64}
    [[ -f $file ]] || { echo "calibrate_cpu.sh: no model $file" >&2; exit 1; }
    echo "$opt $file --input-shape=input:${batch}x3x${image}x${image}"
  fi
}

# A failed step shows its log and stops the bench.
fail() {
  echo "calibrate_cpu.sh: failed in $1:" >&2
  cat "$1/opt.log" >&2
  exit 1
}

cases=()
for ranks in $ranks_list; do
  echo "calibrating $ranks rank(s)..." >&2
  "${mpirun[@]}" -np "$ranks" "$build/bin/ppc-calibrate" --quiet \
    -o "$tmp/machine-$ranks.json"
  for model_batch in $models; do
    for kind in $kinds; do
      [[ $ranks == 1 && $kind != dp ]] && continue
      cases+=("${model_batch%:*} ${model_batch#*:} $ranks $kind")
    done
  done
done

# Plans and one profiling run each. The search runs on the calibrated
# machine with the profiles of the same rank count measured so far.
for c in "${cases[@]}"; do
  set -- $c
  model=$1 batch=$2 ranks=$3 kind=$4
  w=$tmp/$model-$ranks-$kind
  mkdir -p "$w"
  read -r -a import <<<"$(import_of "$model" "$batch")"
  machine=$tmp/machine-$ranks.json
  if [[ $kind == searched ]]; then
    profile=""
    compgen -G "$tmp/*-$ranks-*/profile.json" >/dev/null &&
      python3 "$root/bench/merge_profiles.py" "$tmp/profile-$ranks.json" \
        "$tmp"/*-"$ranks"-*/profile.json &&
      profile="profile=$tmp/profile-$ranks.json"
    "${import[@]}" --ppc-auto-parallel="machine=$machine search=mcmc budget=2000 threads=1 overlap=false optimizer=adam $profile strategy-out=$w/s.json plan=$w/plan.pb" -o /dev/null 2>>"$w/opt.log" || fail "$w"
  elif [[ $kind == megatron:* ]]; then
    options=$(sh "$root/bench/megatron_options.sh" "${kind#megatron:}")
    "${import[@]}" --ppc-auto-parallel="machine=$machine search=megatron$options optimizer=adam strategy-out=$w/s.json plan=$w/plan.pb" -o /dev/null 2>>"$w/opt.log" || fail "$w"
  elif [[ $kind == fsdp || $kind == megatron* || $kind == one-weird-trick ]]; then
    "${import[@]}" --ppc-auto-parallel="machine=$machine search=$kind optimizer=adam strategy-out=$w/s.json plan=$w/plan.pb" -o /dev/null 2>>"$w/opt.log" || fail "$w"
  else
    "${import[@]}" --ppc-auto-parallel="machine=$machine search=data-parallel strategy-out=$w/dp.json" -o /dev/null 2>>"$w/opt.log" || fail "$w"
    python3 "$root/test/e2e/make_strategy.py" --kind "$kind" "$w/dp.json" "$w/s.json"
    "${import[@]}" --ppc-auto-parallel="machine=$machine strategy-in=$w/s.json optimizer=adam plan=$w/plan.pb" -o /dev/null 2>>"$w/opt.log" || fail "$w"
  fi
  "${mpirun[@]}" -np "$ranks" "$build/bin/ppc-run" "$w/plan.pb" --steps 10 \
    --quiet --profile "$w/profile.json"
done

# Side by side: the same machine without the senders' part of a message
# (send_bandwidth_by_size), as the simulator priced messages before it had
# one: only the receiving rank held.
for ranks in $ranks_list; do
  python3 - "$tmp/machine-$ranks.json" "$tmp/receiver-only-$ranks.json" <<'PY'
import json, sys
machine = json.load(open(sys.argv[1]))
def strip(node):
    if isinstance(node, dict):
        node.pop("send_bandwidth_by_size", None)
        for value in node.values():
            strip(value)
    elif isinstance(node, list):
        for value in node:
            strip(value)
strip(machine)
json.dump(machine, open(sys.argv[2], "w"), indent=2)
PY
done

printf "| model | batch | ranks | strategy | measured ms | predicted ms | predicted / measured | receiver only ms | ratio | preset roofline ms | ratio |\n"
printf "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n"
for c in "${cases[@]}"; do
  set -- $c
  model=$1 batch=$2 ranks=$3 kind=$4
  w=$tmp/$model-$ranks-$kind
  read -r -a import <<<"$(import_of "$model" "$batch")"
  simulate() {
    "${import[@]}" --ppc-add-loss --ppc-attach-machine=machine="$1" \
      --ppc-import-strategy=file="$w/s.json" --ppc-simulate="optimizer=adam $2" \
      -o /dev/null 2>&1 | sed -n 's/^ *iteration time: \([0-9.]*\) ms/\1/p'
  }
  # Three runs, each profiling its kernels; the run with the median step is
  # the measurement and its profile the simulator's: this host's speed
  # drifts by tens of percent over minutes, so the kernels are timed in
  # the run whose step they are to predict.
  # Quiet, with the steps' times in a log: a step line per step goes
  # through mpirun, whose forwarding takes a core from the ranks (the MLP's
  # step at 2 ranks: 0.68 ms printed, 0.63 quiet).
  median=$(for run in 1 2 3; do
      rm -f "$w/run-$run.json" "$w/run-$run.jsonl"
      "${mpirun[@]}" -np "$ranks" "$build/bin/ppc-run" "$w/plan.pb" \
        --steps "$steps" --quiet --log "$w/run-$run.jsonl" \
        --profile "$w/run-$run.json"
      step=$(sed -n 's/.*"time_ms": \([0-9.e+-]*\).*/\1/p' "$w/run-$run.jsonl" |
        tail -n +2 | awk '{ s += $1 } END { printf "%.3f", s / NR }')
      echo "$step $run"
    done | sort -g | sed -n 2p)
  measured=${median% *}
  predicted=$(simulate "$tmp/machine-$ranks.json" \
    "overlap=false profile=$w/run-${median#* }.json")
  receiver=$(simulate "$tmp/receiver-only-$ranks.json" \
    "overlap=false profile=$w/run-${median#* }.json")
  preset=$(simulate "$([[ $ranks == 1 ]] && echo cpu || echo "cpux$ranks")" "")
  printf "| %s | %s | %s | %s | %.3f | %.3f | %.2f | %.3f | %.2f | %.3f | %.2f |\n" \
    "$model" "$batch" "$ranks" "$kind" "$measured" "$predicted" \
    "$(echo "$predicted / $measured" | bc -l)" "$receiver" \
    "$(echo "$receiver / $measured" | bc -l)" "$preset" \
    "$(echo "$preset / $measured" | bc -l)"
  echo "$model $ranks $measured $predicted $preset $receiver" >>"$tmp/rows"
done
python3 - "$tmp/rows" <<'PY'
import collections, sys
groups = collections.defaultdict(list)
rows = []
for line in open(sys.argv[1]):
    model, ranks, measured, predicted, preset, receiver = line.split()
    row = (float(measured), float(predicted), float(preset), float(receiver))
    groups[(model, ranks)].append(row)
    rows.append(row)

def summary(column, name):
    ratios = sorted(r[column] / r[0] for r in rows)
    within = sum(abs(x - 1) <= 0.15 for x in ratios)
    print(f"{name}: {within} of {len(ratios)} predictions within 15% of the "
          f"measured step, median ratio {ratios[len(ratios) // 2]:.2f}")

summary(1, "calibrated")
summary(3, "calibrated, receiver only")
summary(2, "preset roofline")

def ranks_of(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    result = [0.0] * len(values)
    i = 0
    while i < len(order):  # ties share their mean rank
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            result[order[k]] = (i + j) / 2
        i = j + 1
    return result

def spearman(xs, ys):
    rx, ry = ranks_of(xs), ranks_of(ys)
    n = len(xs)
    mx, my = sum(rx) / n, sum(ry) / n
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = sum((a - mx) ** 2 for a in rx) ** 0.5
    vy = sum((b - my) ** 2 for b in ry) ** 0.5
    return cov / (vx * vy) if vx and vy else float("nan")

for (model, ranks), rows in sorted(groups.items()):
    if len(rows) < 5:
        continue
    measured = [r[0] for r in rows]
    print(f"{model}, {ranks} ranks, {len(rows)} strategies: Spearman rho "
          f"predicted vs measured {spearman(measured, [r[1] for r in rows]):.3f}"
          f" (preset roofline {spearman(measured, [r[2] for r in rows]):.3f})")
PY
