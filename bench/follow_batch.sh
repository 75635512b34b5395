#!/usr/bin/env bash
# Data parallel that follows the batch vs data parallel on dim 0, simulated.
#
# A sequence-first attention block as PyTorch's nn.MultiheadAttention exports
# it: input [S, N, E] = [512, 32, 1024], 16 heads (the heads folded into the
# batch dim and transposed to the front, as the export does), on one DGX
# H100, Adam. With ppc.batch_dim = 1 on the inputs the batch is followed
# through the reshapes and transposes; with ppc.batch_dim = 0 data parallel
# splits dim 0, the sequence, and reshards at every transpose. Prints both
# iteration times and their ratio.
#
# usage: bench/follow_batch.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

x=tensor\<512x32x1024xf32\>
heads=tensor\<512x512x64xf32\>
scores=tensor\<512x512x512xf32\>
w=tensor\<1024x1024xf32\>
cat >"$tmp/block.mlir" <<EOF
func.func @main(%x: $x {ppc.batch_dim = 1 : i64}, %t: $x {ppc.batch_dim = 1 : i64}) -> tensor<f32> {
  %wq = ppc.weight "wq" : $w
  %wo = ppc.weight "wo" : $w
  %q = ppc.linear %x, %wq : ($x, $w) -> $x
  %qr = ppc.reshape %q : $x -> $heads
  %qt = ppc.transpose %qr {permutation = array<i64: 1, 0, 2>} : $heads -> $heads
  %s = ppc.matmul %qt, %qt {transpose_rhs = true} : ($heads, $heads) -> $scores
  %p = ppc.softmax %s : $scores
  %c = ppc.matmul %p, %qt : ($scores, $heads) -> $heads
  %ct = ppc.transpose %c {permutation = array<i64: 1, 0, 2>} : $heads -> $heads
  %cr = ppc.reshape %ct : $heads -> $x
  %o = ppc.linear %cr, %wo : ($x, $w) -> $x
  %l = ppc.mse_loss %o, %t : ($x, $x) -> tensor<f32>
  return %l : tensor<f32>
}
EOF

declare -A ms
for batchDim in 1 0; do
  sed "s/ppc.batch_dim = 1/ppc.batch_dim = $batchDim/g" "$tmp/block.mlir" \
    >"$tmp/block-$batchDim.mlir"
  report=$("$build/bin/ppc-opt" "$tmp/block-$batchDim.mlir" -o /dev/null \
    --ppc-attach-machine=machine=dgx-h100 \
    --ppc-simulate="unassigned=data-parallel optimizer=adam")
  ms[$batchDim]=$(echo "$report" | sed -n 's/.*iteration time: \([0-9.]*\) ms.*/\1/p')
done
echo "data parallel following the batch (dim 1): ${ms[1]} ms per iteration"
echo "data parallel on dim 0 (the sequence):     ${ms[0]} ms per iteration"
python3 -c "print(f'dim 0 / following the batch: {${ms[0]}/${ms[1]}:.2f}x')"
