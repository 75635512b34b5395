#!/usr/bin/env bash
# Context parallelism as NVIDIA published it, simulated as published:
# NeMo's "Long Sequence Performance" table (NVIDIA/NeMo, docs/source/
# performance/performance_long_sequence.md, LLAMA2-7B (FP8), container
# NeMo 24.03.01, DGX-H100): Llama-2-7B at sequence 128k to 1M on as many
# GPUs as thousands of tokens, with its TP x PP x DP x CP layout, published
# as model TFLOP/s per GPU. Megatron-Core's context parallelism there is
# the ring (Transformer Engine's p2p exchange) over the sequence in zigzag
# order. Each row builds the model (bench/models.py llama --size 7b, bf16,
# Adam, one sequence per data-parallel replica), stores its sequence in
# zigzag order of cp pairs (ppc-zigzag-sequence) and simulates
# algorithm=megatron with the row's layout, cp-comm=ring, sequence
# parallelism and the distributed optimizer, at each recomputation
# (none, selective, full; the fastest that fits is compared), and the
# same without the zigzag order (contiguous chunks). TFLOP/s per GPU count
# NeMo's Llama-2 model FLOPs, B s l h^2 (12 + 12 g/a + 18 f/h + 12 s/h +
# 6 V/(l h)) per step: its attention term counts every (query, key) pair,
# not the causal half (its LLAMA2-7B 4k row, 16,934 tokens/s and 780
# TFLOP/s per GPU in NeMo's performance summary, is 4.61e10 FLOPs a token,
# that formula's). Published figures ran FP8 GEMMs; the simulator prices
# bf16 ones, which at 512k and 1M tokens are under 3% of the step (the
# attention, bf16 in both, is the rest).
# Usage: bench/context_published.sh [BUILD_DIR]   (after scripts/build.sh)
#   ROWS="1024:128:8:1:4:32:536 ..."  seqK:nodes:tp:pp:dp:cp:published
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
opt="$build/bin/ppc-opt"
rows=${ROWS:-"128:16:4:1:8:4:555 256:32:4:1:8:8:549 512:64:8:1:4:16:549 1024:128:8:1:4:32:536"}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# simulate MODEL MACHINE OPTIONS -> ms, "oom" or "error".
simulate() {
  local line ms
  line=$("$opt" "$1" --ppc-attach-machine=machine="$2" \
    "--ppc-search=algorithm=megatron $3 optimizer=adam" -o /dev/null 2>&1 |
    grep -m1 '^ppc-search @main' || true)
  ms=$(sed -n 's/.*: \([0-9.]*\) ms per iteration predicted.*/\1/p' <<<"$line")
  if [[ -z "$line" ]]; then
    echo error
  elif [[ -z "$ms" ]]; then
    echo oom
  else
    echo "$ms"
  fi
}

# fastest MODEL MACHINE LAYOUT -> "MS RECOMPUTE" of the fastest that fits.
fastest() {
  local best="" bestRecompute="" ms
  for recompute in none selective full; do
    ms=$(simulate "$1" "$2" "$3 recompute=$recompute")
    [[ $ms == oom || $ms == error ]] && continue
    if [[ -z $best ]] || awk -v a="$ms" -v b="$best" 'BEGIN { exit !(a < b) }'; then
      best=$ms bestRecompute=$recompute
    fi
  done
  echo "${best:-oom} ${bestRecompute:--}"
}

# NeMo's Llama-2 model FLOPs of one step at sequence S, batch B.
flops() {
  awk -v s="$1" -v b="$2" 'BEGIN {
    l = 32; h = 4096; f = 11008; v = 32000; g = 32; a = 32
    printf "%.6e", b * s * l * h * h * (12 + 12 * g / a + 18 * f / h + 12 * s / h + 6 * v / (l * h))
  }'
}

printf "%-6s %5s %-18s | %-11s %-9s %7s | %-11s %7s | %9s %7s\n" seqK gpus layout \
  "zigzag ms" recompute TFLOP/s "natural ms" TFLOP/s published ratio
for row in $rows; do
  IFS=: read -r seqk nodes tp pp dp cp published <<<"$row"
  seq=$((seqk * 1024))
  gpus=$((nodes * 8))
  model="$tmp/llama-$seqk.mlir"
  /usr/bin/python3 "$root/bench/models.py" llama --size 7b --seq "$seq" \
    --batch "$dp" --dtype bf16 --loss ce >"$model"
  "$opt" "$model" --ppc-zigzag-sequence=pairs="$cp" -o "$tmp/zigzag-$seqk.mlir"
  machine="dgx-h100x$nodes"
  layout="tp=$tp pp=$pp cp=$cp cp-comm=ring distributed-optimizer=true"
  ((tp > 1)) && layout="$layout sequence-parallel=true"
  read -r zms zrecompute <<<"$(fastest "$tmp/zigzag-$seqk.mlir" "$machine" "$layout")"
  read -r nms _ <<<"$(fastest "$model" "$machine" "$layout")"
  total=$(flops "$seq" "$dp")
  tflops() {
    awk -v f="$total" -v ms="$1" -v n="$gpus" 'BEGIN {
      if (ms + 0 > 0) printf "%.0f", f / (ms / 1000) / n / 1e12; else print "-" }'
  }
  zt=$(tflops "$zms")
  nt=$(tflops "$nms")
  ratio=$(awk -v a="$zt" -v b="$published" 'BEGIN { if (a + 0 > 0) printf "%.3f", a / b; else print "-" }')
  printf "%-6s %5s %-18s | %-11s %-9s %7s | %-11s %7s | %9s %7s\n" "$seqk" "$gpus" \
    "tp$tp pp$pp dp$dp cp$cp" "$zms" "$zrecompute" "$zt" "$nms" "$nt" "$published" "$ratio"
done
