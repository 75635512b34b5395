#!/usr/bin/env bash
# Predicted training iteration times on one DGX H100 (8 x H100-SXM5-80GB):
# single device vs data parallel, ResNet-50 (batch 256) and BERT-Large
# (24 layers, seq 512, batch 32), in f32 and bf16, with Adam.
# Usage: bench/predict_dgx_h100.sh [BUILD_DIR]   (after scripts/build.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf "%-22s %-14s %12s %16s %18s\n" model strategy "iteration ms" "samples/s" "device 0 memory"
for dtype in f32 bf16; do
  python3 "$root/bench/models.py" resnet50 --batch 256 --dtype $dtype > "$tmp/resnet50-$dtype.mlir"
  python3 "$root/bench/models.py" bert --unfused-attention --layers 24 --batch 32 --seq 512 --dtype $dtype > "$tmp/bert-large-$dtype.mlir"
done
for model in resnet50-f32 resnet50-bf16 bert-large-f32 bert-large-bf16; do
  declare -A ms
  for policy in single data-parallel; do
    report=$("$build/bin/ppc-opt" "$tmp/$model.mlir" --ppc-attach-machine=machine=dgx-h100 \
      --ppc-simulate="unassigned=$policy optimizer=adam" -o /dev/null)
    t=$(echo "$report" | sed -n 's/.*iteration time: \([0-9.]*\) ms.*/\1/p')
    s=$(echo "$report" | sed -n 's/.*throughput: \([0-9.]*\) samples.*/\1/p')
    # The "total" column of device 0 in the devices table.
    mem=$(echo "$report" | awk '$1 == "0" && NF == 18 { print $15, $16 }')
    ms[$policy]=$t
    printf "%-22s %-14s %12s %16s %18s\n" "$model" "$policy" "$t" "$s" "$mem"
  done
  echo "$model: data parallel speedup over one device: $(python3 -c "print(f'{${ms[single]}/${ms[data-parallel]}:.2f}x')")"
done
