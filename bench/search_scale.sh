#!/usr/bin/env bash
# The default search against what a user could ask for instead: per row,
# the default `--ppc-search` (the DP, the pipeline search on more than one
# device, MCMC; Adam), `algorithm=pipeline` with the same budget, and every
# baseline taken as it is, side by side in one run, with the default's
# answer over the best of the others (<= 1: never slower), the search's
# wall seconds, and on rows under an iteration budget the DP given 90 s.
# Table in docs/search.md ("The default search against the rest").
# Usage: bench/search_scale.sh [BUILD_DIR]   (after scripts/build.sh)
#   ROWS="gpt124m-2x4-10g alexnet-p100x16 ..." (default: every row below
#   but the GPTs of 39B and more (up to 1T on 16,384 GPUs), which take
#   minutes each on 2 cores;
#   their rows also against Megatron-LM's published layout for the model,
#   the row's fifth field: docs/search.md, "Megatron layouts")
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# name | bench/models.py arguments | machine | budget | Megatron-LM's
# published tp and pp for the model (Narayanan et al. 2021, Table 1), with
# sequence parallelism, the distributed optimizer, selective recomputation
# and the fastest micro-batch count (optional)
all_rows=(
  "gpt124m-2x4-10g|gpt --layers 12 --hidden 768 --heads 12 --seq 256 --batch 8 --vocab 50304|$root/bench/two-nodes-10g.json|1000"
  "alexnet-p100x16|alexnet --batch 4096|p100x16|1000"
  "alexnet-k80x64|alexnet --batch 16384|k80x64|1000"
  "vgg16-p100x16|vgg16 --batch 1024|p100x16|1000"
  "vgg16-k80x64|vgg16 --batch 4096|k80x64|1000"
  "resnet101-p100x16|resnet101 --batch 1024|p100x16|1000"
  "resnet101-k80x64|resnet101 --batch 4096|k80x64|1000"
  "inception_v3-p100x16|inception_v3 --batch 1024|p100x16|1000"
  "inception_v3-k80x64|inception_v3 --batch 4096|k80x64|1000"
  "rnnlm-p100x16|rnnlm --batch 1024|p100x16|1000"
  "rnnlm-k80x64|rnnlm --batch 4096|k80x64|1000"
  "gpt39b-dgx-h100x4|gpt --size 39b --batch 64 --dtype bf16|dgx-h100x4|60s|tp=8 pp=2"
  "gpt39b-dgx-h100x8|gpt --size 39b --batch 128 --dtype bf16|dgx-h100x8|60s|tp=8 pp=2"
  "gpt145b-dgx-h100x16|gpt --size 145b --batch 256 --dtype bf16|dgx-h100x16|60s|tp=8 pp=8"
  "gpt145b-dgx-h100x32|gpt --size 145b --batch 512 --dtype bf16|dgx-h100x32|60s|tp=8 pp=8"
  "gpt175b-dgx-h100x128|gpt --layers 96 --hidden 12288 --heads 96 --seq 2048 --batch 2048 --dtype bf16|dgx-h100x128|60s|tp=8 pp=8"
  "gpt1t-dgx-h100x2048|gpt --size 1t --batch 2048 --dtype bf16|dgx-h100x2048|60s|tp=8 pp=64"
)
rows=${ROWS:-gpt124m-2x4-10g alexnet-p100x16 alexnet-k80x64 vgg16-p100x16 vgg16-k80x64 resnet101-p100x16 resnet101-k80x64 inception_v3-p100x16 inception_v3-k80x64 rnnlm-p100x16 rnnlm-k80x64}
# The baselines and `megatron` (Megatron-LM's layout, its choices by
# simulation), as the search's own list names them in its error.
python3 "$root/bench/models.py" mlp --layers 1 > "$tmp/one.mlir"
baselines=$("$build/bin/ppc-opt" "$tmp/one.mlir" --ppc-attach-machine=machine=cpux2 \
  --ppc-search=algorithm=- -o /dev/null 2>&1 |
  sed -n 's/.*expected mcmc, dp, exhaustive, pipeline, //p' | sed 's/ or /, /; s/,//g' || true)
[[ -n "$baselines" ]] || { echo "search_scale.sh: no baseline list from ppc-opt" >&2; exit 1; }

# search MODEL MACHINE OPTIONS -> "ms seconds answer" (ms: "oom" when the
# answer does not fit, "-" when there is none)
search() {
  local start end line ms
  start=$(date +%s.%N)
  line=$("$build/bin/ppc-opt" "$1" --ppc-add-loss --ppc-attach-machine=machine="$2" \
    "--ppc-search=optimizer=adam $3" -o /dev/null 2>&1 | grep -m1 'ms per iteration predicted\|out of memory per iteration\|returned no strategy' || true)
  end=$(date +%s.%N)
  ms=$(sed -n 's/.*: \([0-9.]*\) ms per iteration predicted.*/\1/p' <<<"$line")
  [[ -z "$ms" && "$line" == *"out of memory per iteration"* ]] && ms=oom
  [[ -z "$ms" ]] && ms=-
  local answer
  answer=$(sed -n 's/^ppc-search @[^:]*: \(.*\), [0-9]* iterations in.*/\1/p' <<<"$line")
  printf "%s %.1f %s\n" "$ms" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "${answer:-?}"
}

printf "| row | default ms | default s | pipeline search ms | best baseline ms | default / best other | DP with 90 s ms | default / DP 90 s | default's answer |\n"
printf "|---|---:|---:|---:|---|---:|---:|---:|---|\n"
for name in $rows; do
  spec=""
  for r in "${all_rows[@]}"; do [[ ${r%%|*} == "$name" ]] && spec=$r; done
  [[ -n "$spec" ]] || { echo "search_scale.sh: unknown row '$name'" >&2; exit 2; }
  IFS='|' read -r _ args machine budget published <<<"$spec"
  # shellcheck disable=SC2086
  python3 "$root/bench/models.py" $args > "$tmp/model.mlir"
  read -r dms ds danswer <<<"$(search "$tmp/model.mlir" "$machine" "budget=$budget")"
  read -r pms _ _ <<<"$(search "$tmp/model.mlir" "$machine" "algorithm=pipeline budget=$budget")"
  best=- bestName=-
  candidates=()
  for b in $baselines; do candidates+=("algorithm=$b"); done
  [[ -n "${published:-}" ]] && candidates+=("algorithm=megatron $published sequence-parallel=true distributed-optimizer=true recompute=selective")
  for c in "${candidates[@]}"; do
    read -r bms _ _ <<<"$(search "$tmp/model.mlir" "$machine" "$c")"
    if [[ $bms != - && $bms != oom ]] &&
       { [[ $best == - ]] || awk -v x="$bms" -v y="$best" 'BEGIN { exit !(x < y) }'; }; then
      best=$bms bestName=${c#algorithm=}
      [[ $c == *" "* ]] && bestName="megatron ${published}"
    fi
  done
  other=$best
  if [[ $pms != - && $pms != oom ]] &&
     { [[ $other == - ]] || awk -v x="$pms" -v y="$other" 'BEGIN { exit !(x < y) }'; }; then
    other=$pms
  fi
  ratio=-
  [[ $dms != - && $dms != oom && $other != - ]] &&
    ratio=$(awk -v d="$dms" -v o="$other" 'BEGIN { printf "%.3f", d / o }')
  # Under an iteration budget (FlexFlow's rows), also the DP given 90 s:
  # the default should be at least as fast.
  dp90=- dpRatio=-
  if [[ $budget != *s ]]; then
    read -r dp90 _ _ <<<"$(search "$tmp/model.mlir" "$machine" "algorithm=dp budget=90s")"
    [[ $dms != - && $dms != oom && $dp90 != - && $dp90 != oom ]] &&
      dpRatio=$(awk -v d="$dms" -v o="$dp90" 'BEGIN { printf "%.3f", d / o }')
  fi
  printf "| %s | %s | %s | %s | %s (%s) | %s | %s | %s | %s |\n" "$name" "$dms" "$ds" "$pms" \
    "$best" "$bestName" "$ratio" "$dp90" "$dpRatio" "$danswer"
done
