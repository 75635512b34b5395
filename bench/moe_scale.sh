#!/usr/bin/env bash
# Mixtures of experts: the default search against Megatron-Core's
# published-style layouts, chosen by the same simulator. Per row: every
# `algorithm=megatron` layout of EP x TP x PP x DP with ep in EPS (8 unless
# the row says), tp 1 and 2 (sequence parallel at 2; at 2 the experts
# whole or split as the dense layers, etp 2), pp 1, 2, 4, 8, virtual
# stages 1 and 2, no, selective or full recomputation, the distributed
# optimizer and the fastest micro-batch count, the fastest that fits; the
# dense baseline (`megatron`: the experts replicated in each
# tensor-parallel group, data parallel across); DeepSpeed-MoE's layout
# (`deepspeed-moe`: experts over as many devices as there are experts,
# ZeRO-2 data parallel for the rest); and the default search with
# `budget=60s` (Adam, bf16), with its answer over the best layout's (<= 1:
# never slower) and its wall seconds. Table in docs/search.md ("Mixtures of
# experts").
# Usage: bench/moe_scale.sh [BUILD_DIR]   (after scripts/build.sh)
#   ROWS="mixtral-dgx-h100x4 ..." (default: all three)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# name | bench/models.py arguments | machine | expert-parallel degrees
all_rows=(
  "mixtral-dgx-h100x4|moe --batch 64|dgx-h100x4|8"
  "mixtral-dgx-h100x8|moe --batch 128|dgx-h100x8|8"
  "moe64-dgx-h100x16|moe --experts 64 --ff 3584 --batch 256|dgx-h100x16|8 16 32 64"
)
rows=${ROWS:-mixtral-dgx-h100x4 mixtral-dgx-h100x8 moe64-dgx-h100x16}

# search MODEL MACHINE OPTIONS -> "ms seconds answer" (ms: "oom" when the
# answer does not fit, "-" when there is none)
search() {
  local start end line ms
  start=$(date +%s.%N)
  line=$("$build/bin/ppc-opt" "$1" --ppc-attach-machine=machine="$2" \
    "--ppc-search=optimizer=adam $3" -o /dev/null 2>&1 |
    grep -m1 'ms per iteration predicted\|out of memory per iteration\|error' || true)
  end=$(date +%s.%N)
  ms=$(sed -n 's/.*: \([0-9.]*\) ms per iteration predicted.*/\1/p' <<<"$line")
  [[ -z "$ms" && "$line" == *"out of memory per iteration"* ]] && ms=oom
  [[ -z "$ms" ]] && ms=-
  printf "%s %.1f %s\n" "$ms" "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" \
    "$(sed -n 's/^ppc-search @main: \([^,]*\(, [^0-9][^,]*\)*\).*/\1/p' <<<"$line" | cut -c1-120)"
}

for name in $rows; do
  row=""
  for r in "${all_rows[@]}"; do [[ "${r%%|*}" == "$name" ]] && row=$r; done
  [[ -n "$row" ]] || { echo "moe_scale.sh: no row '$name'" >&2; exit 1; }
  IFS='|' read -r _ args machine eps <<<"$row"
  # shellcheck disable=SC2086
  python3 "$root/bench/models.py" $args --dtype bf16 --loss ce-f32 > "$tmp/m.mlir"
  echo "== $name ($args, $machine)"
  best=inf best_layout=none tried=0
  for ep in $eps; do
    for tpe in 1 2 2-etp2; do
      tp=${tpe%%-*} etp=
      [[ $tpe == *-etp2 ]] && etp=" etp=2"
      for pp in 1 2 4 8; do
        for v in 1 2; do
          [[ $pp == 1 && $v == 2 ]] && continue
          for rc in none selective full; do
            opts="algorithm=megatron tp=$tp ep=$ep$etp pp=$pp virtual-stages=$v recompute=$rc distributed-optimizer=true"
            [[ $tp == 2 ]] && opts+=" sequence-parallel=true"
            read -r ms _ _ <<<"$(search "$tmp/m.mlir" "$machine" "$opts")"
            tried=$((tried + 1))
            if [[ "$ms" != oom && "$ms" != - ]] &&
               awk -v a="$ms" -v b="$best" 'BEGIN { exit !(b == "inf" || a < b) }'; then
              best=$ms best_layout="tp=$tp ep=$ep$etp pp=$pp v=$v recompute=$rc"
            fi
          done
        done
      done
    done
  done
  read -r dense _ _ <<<"$(search "$tmp/m.mlir" "$machine" "algorithm=megatron")"
  read -r deepspeed _ _ <<<"$(search "$tmp/m.mlir" "$machine" "algorithm=deepspeed-moe")"
  read -r found secs answer <<<"$(search "$tmp/m.mlir" "$machine" "budget=60")"
  printf "  best Megatron-Core EP layout: %s ms (%s; %d tried)\n" "$best" "$best_layout" "$tried"
  printf "  megatron baseline (experts replicated): %s ms\n" "$dense"
  printf "  deepspeed-moe baseline: %s ms\n" "$deepspeed"
  printf "  default search: %s ms in %s s (%s)\n" "$found" "$secs" "$answer"
  if [[ "$found" != oom && "$found" != - && "$best" != inf ]]; then
    printf "  default / best EP layout: %s\n" "$(awk -v a="$found" -v b="$best" 'BEGIN { printf "%.3f", a / b }')"
  fi
done
