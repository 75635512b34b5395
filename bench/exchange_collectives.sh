#!/usr/bin/env bash
# Messages the lowering's collectives replace (docs/runtime.md, Results,
# "Exchanges as collectives"): the same partitioned IR lowered with the
# communication plan's kinds and with them stripped (the point-to-point
# lowering), sends and collectives per step over all ranks, and the mean
# step of each under mpirun.
# Usage: bench/exchange_collectives.sh [BUILD_DIR] [STEPS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
steps=${2:-50}
opt=$build/bin/ppc-opt run=$build/bin/ppc-run
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$opt" "$root/test/Conversion/exchange-kinds.mlir" --ppc-add-loss \
  --ppc-attach-machine=machine=cpux4 -o "$tmp/exchange-kinds.mlir"
"$opt" "$root/examples/transformer.onnx" --batch-size=8 \
  --ppc-auto-parallel="machine=cpux4 search=megatron-sp optimizer=adam" \
  -o "$tmp/megatron-sp.mlir" 2>/dev/null
printf '%-14s %-10s %6s %6s %6s %6s %6s %10s\n' model lowering sends \
  gather scatter a2a reduce "ms/step"
for model in exchange-kinds megatron-sp; do
  "$opt" "$tmp/$model.mlir" --ppc-materialize-resharding -o "$tmp/$model-kinds.mlir"
  sed 's/ as "[a-z_]*"//' "$tmp/$model-kinds.mlir" > "$tmp/$model-p2p.mlir"
  for lowering in p2p kinds; do
    f=$tmp/$model-$lowering
    "$opt" "$f.mlir" "--ppc-lower-to-plan=plan=$f.txt text=true optimizer=adam" -o /dev/null
    "$opt" "$f.mlir" "--ppc-lower-to-plan=plan=$f.pb optimizer=adam" -o /dev/null
    ms=$(mpirun --oversubscribe -np 4 "$run" "$f.pb" --steps "$steps" 2>&1 |
      sed -n 's/^mean step \([0-9.]*\) ms.*/\1/p')
    printf '%-14s %-10s %6s %6s %6s %6s %6s %10s\n' "$model" "$lowering" \
      "$(grep -c '^ *send {' "$f.txt" || true)" \
      "$(grep -c 'kind: ALL_GATHER' "$f.txt" || true)" \
      "$(grep -c 'kind: REDUCE_SCATTER' "$f.txt" || true)" \
      "$(grep -c 'kind: ALL_TO_ALL' "$f.txt" || true)" \
      "$(grep -c 'kind: ALL_REDUCE' "$f.txt" || true)" "$ms"
  done
done
