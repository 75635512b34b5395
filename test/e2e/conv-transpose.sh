#!/bin/sh
# Transposed convolutions end to end (make_conv_transpose_model.py): the
# ONNX ConvTranspose nodes import as ppc.conv_transpose2d (a 1-D one between
# reshapes), and the partitioned training step matches the single-device
# step (--verify: loss, gradients, updated weights): data parallel,
# searched, output channels split and input channels split (partial sums).
# usage: conv-transpose.sh PYTHON PPC_OPT WORKDIR NP RUN...
#        (PYTHON has python3-onnx and numpy; RUN... starts ppc-run)
set -e
python=$1 ppc_opt=$2 work=$3 np=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"
"$python" "$here/make_conv_transpose_model.py" "$work"
cd "$work"
"$ppc_opt" model.onnx --batch-size=4 -o model.mlir
test "$(grep -c 'ppc.conv_transpose2d' model.mlir)" = 3
for search in data-parallel mcmc; do
  "$ppc_opt" model.onnx --batch-size=4 \
    --ppc-auto-parallel="machine=cpux$np search=$search budget=500 threads=1 optimizer=adam plan=$search.pb" \
    -o /dev/null
  "$@" $search.pb --steps 2 --batches 1 --verify --quiet
done
# Output channels split (tensor), and input channels split with the partial
# sums reduce-scattered along the batch (scatter).
"$ppc_opt" model.onnx --batch-size=4 \
  --ppc-auto-parallel="machine=cpux$np search=data-parallel strategy-out=dp.json" \
  -o /dev/null
for kind in tensor scatter; do
  "$python" "$here/make_strategy.py" --kind $kind dp.json $kind.json
  "$ppc_opt" model.onnx --batch-size=4 \
    --ppc-auto-parallel="machine=cpux$np strategy-in=$kind.json optimizer=adam plan=$kind.pb" \
    -o /dev/null
  "$@" $kind.pb --steps 2 --batches 1 --verify --quiet
done
echo "conv transpose passed"
