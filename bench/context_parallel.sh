#!/usr/bin/env bash
# Context parallelism at long sequences, simulated (issue 43): Llama-2-7B-
# and 70B-shaped models (bench/models.py llama, bf16, Adam, the mean
# cross-entropy) on DGX H100 nodes, side by side for each row:
#   megatron  the fastest Megatron-Core layout that fits: TP x CP x PP x DP
#             over tp in {1,2,4,8}, cp in powers of two, pp in {1,2,4}
#             (micro-batches: the fastest that fits), cp-comm all-gather,
#             all-to-all and ring (p2p), recompute none, selective and full,
#             sequence parallelism where tp > 1 and the distributed
#             optimizer;
#   ulysses   the fastest Ulysses x ZeRO-3 that fits: tp 1, cp in powers of
#             two, all-to-all, fsdp, recompute none and full;
#   dp-full   data parallel with full recomputation (and the distributed
#             optimizer): what fits without splitting the sequence;
#   found     the default search (`--ppc-search=budget=$BUDGET`) and its
#             seconds;
# and found over the better of megatron and ulysses (below 1: faster). Each
# layout is simulated by ppc-opt's algorithm=megatron, the same simulator
# as the search. Every column runs on the model with its sequence stored in
# zigzag order of as many pairs as devices (ppc-zigzag-sequence, Megatron-
# Core's causal load balancing for every cp; ZIGZAG=0: contiguous chunks).
# Table in docs/search.md ("Long sequences").
# Usage: bench/context_parallel.sh [BUILD_DIR]   (after scripts/build.sh)
#   ROWS="7b:32768:2:4 ..."  size:sequence:nodes:batch (default below)
#   BUDGET=240s              the default search's budget
#   JOBS=2                   layouts simulated at once
#   ZIGZAG=1                 the sequence in zigzag order (0: natural)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
opt="$build/bin/ppc-opt"
rows=${ROWS:-"7b:32768:2:4 7b:131072:8:4 7b:1048576:32:1 70b:32768:8:4 70b:131072:32:4 70b:1048576:32:1"}
budget=${BUDGET:-240s}
jobs=${JOBS:-2}
zigzag=${ZIGZAG:-1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# simulate MODEL MACHINE OPTIONS -> "MS OPTIONS" (MS: "oom" or "error").
simulate() {
  local line
  line=$("$opt" "$1" --ppc-attach-machine=machine="$2" \
    "--ppc-search=algorithm=megatron $3 optimizer=adam" -o /dev/null 2>&1 |
    grep -m1 '^ppc-search @main' || true)
  local ms
  ms=$(sed -n 's/.*: \([0-9.]*\) ms per iteration predicted.*/\1/p' <<<"$line")
  if [[ -z "$line" ]]; then
    ms=error
  elif [[ -z "$ms" ]]; then
    ms=oom
  fi
  echo "$ms $3"
}
export -f simulate
export opt

# The fastest that fits among the layouts on stdin: "MS OPTIONS" or "oom".
fastest() {
  awk '$1 != "oom" && $1 != "error" { if (best == "" || $1 + 0 < best + 0) { best = $1; line = $0 } }
       END { print (line == "" ? "oom" : line) }'
}

printf "%-5s %8s %5s %5s | %-10s %-10s %-9s | %-10s %6s | %7s\n" model seq nodes batch \
  megatron ulysses dp-full found "s" "found/best"
for row in $rows; do
  IFS=: read -r size seq nodes batch <<<"$row"
  model="$tmp/llama-$size-$seq.mlir"
  /usr/bin/python3 "$root/bench/models.py" llama --size "$size" --seq "$seq" \
    --batch "$batch" --dtype bf16 --loss ce >"$model"
  machine="dgx-h100x$nodes"
  devices=$((nodes * 8))
  if ((zigzag)); then
    "$opt" "$model" --ppc-zigzag-sequence=pairs="$devices" --mlir-print-debuginfo -o "$model.zz"
    mv "$model.zz" "$model"
  fi
  : >"$tmp/megatron.txt"
  : >"$tmp/ulysses.txt"
  for tp in 1 2 4 8; do
    for cp in 1 2 4 8 16 32 64 128 256; do
      for pp in 1 2 4; do
        ((tp * cp * pp <= devices && devices % (tp * cp * pp) == 0)) || continue
        ((pp <= batch)) || continue
        for comm in all-gather all-to-all ring; do
          ((cp > 1)) || [[ $comm == all-gather ]] || continue
          for recompute in none selective full; do
            options="tp=$tp cp=$cp pp=$pp cp-comm=$comm recompute=$recompute distributed-optimizer=true"
            ((tp > 1)) && options="$options sequence-parallel=true"
            echo "$options"
          done
        done
      done
    done
  done | xargs -P "$jobs" -I{} bash -c 'simulate "$0" "$1" "{}"' "$model" "$machine" \
    >>"$tmp/megatron.txt"
  for cp in 1 2 4 8 16 32 64 128 256; do
    ((cp <= devices && devices % cp == 0)) || continue
    for recompute in none full; do
      echo "tp=1 cp=$cp cp-comm=all-to-all recompute=$recompute fsdp=true"
    done
  done | xargs -P "$jobs" -I{} bash -c 'simulate "$0" "$1" "{}"' "$model" "$machine" \
    >>"$tmp/ulysses.txt"
  megatron=$(fastest <"$tmp/megatron.txt")
  ulysses=$(fastest <"$tmp/ulysses.txt")
  dpfull=$(simulate "$model" "$machine" "tp=1 recompute=full distributed-optimizer=true")
  start=$(date +%s.%N)
  line=$("$opt" "$model" --ppc-attach-machine=machine="$machine" \
    "--ppc-search=budget=$budget optimizer=adam" -o /dev/null 2>&1 |
    grep -m1 '^ppc-search @main' || true)
  seconds=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.0f", e - s }')
  found=$(sed -n 's/.*: \([0-9.]*\) ms per iteration predicted.*/\1/p' <<<"$line")
  found=${found:-oom}
  best=$(printf "%s\n%s\n" "$megatron" "$ulysses" | fastest | cut -d' ' -f1)
  ratio=$(awk -v f="$found" -v b="$best" 'BEGIN { if (f + 0 > 0 && b + 0 > 0) printf "%.3f", f / b; else print "-" }')
  printf "%-5s %8s %5s %5s | %-10s %-10s %-9s | %-10s %6s | %7s\n" "$size" "$seq" "$nodes" \
    "$batch" "${megatron%% *}" "${ulysses%% *}" "${dpfull%% *}" "$found" "$seconds" "$ratio"
  echo "      megatron: ${megatron#* }"
  echo "      ulysses:  ${ulysses#* }"
  echo "      found:    ${line#ppc-search @main: }"
done
