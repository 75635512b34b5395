#!/bin/sh
# Cross-attention as PyTorch exports it (make_attention_buffers_model.py):
# slices of one initializer share one whole-weight view, the -inf mask is
# a constant, and the partitioned step matches the single-device step
# (--verify: loss, gradients, updated weights), data parallel and searched.
# usage: attention-buffers.sh PYTHON PPC_OPT WORKDIR NP RUN...
#        (PYTHON has python3-onnx and numpy; RUN... starts ppc-run)
set -e
python=$1 ppc_opt=$2 work=$3 np=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"
"$python" "$here/make_attention_buffers_model.py" "$work"
cd "$work"
"$ppc_opt" model.onnx --batch-size=4 -o model.mlir
# One view of in_proj_weight (and one of its bias) that the slices read.
test "$(grep -c 'ppc.reshape %.* {ppc.name = "in_proj_weight.view"}' model.mlir)" = 1
test "$(grep -c 'ppc.weight "causal_mask"' model.mlir)" = 0
for search in data-parallel mcmc; do
  "$ppc_opt" model.onnx --batch-size=4 \
    --ppc-auto-parallel="machine=cpux$np search=$search budget=500 threads=1 optimizer=adam plan=$search.pb" \
    -o /dev/null
  "$@" $search.pb --steps 2 --batches 1 --verify --quiet
done
echo "attention buffers passed"
