#!/bin/sh
# Self-attention under masks computed at run time
# (make_padding_mask_model.py): a bool key padding mask graph input and a
# causal mask from compared positions select the scores with Where (-inf
# on the side not taken), Trilu and CumSum act on activations; the
# partitioned step matches the single-device step (--verify: loss,
# gradients, updated weights), data parallel and searched.
# usage: padding-mask.sh PYTHON PPC_OPT WORKDIR NP RUN...
#        (PYTHON has python3-onnx and numpy; RUN... starts ppc-run)
set -e
python=$1 ppc_opt=$2 work=$3 np=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"
"$python" "$here/make_padding_mask_model.py" "$work"
cd "$work"
"$ppc_opt" model.onnx --batch-size=4 -o model.mlir
# The masks are computed in the graph, not folded at import.
for op in ppc.select ppc.greater ppc.and ppc.or ppc.not ppc.cumsum; do
  grep -q "$op " model.mlir || { echo "no $op in model.mlir"; exit 1; }
done
for search in data-parallel mcmc; do
  "$ppc_opt" model.onnx --batch-size=4 \
    --ppc-auto-parallel="machine=cpux$np search=$search budget=500 threads=1 optimizer=adam plan=$search.pb" \
    -o /dev/null
  "$@" $search.pb --steps 2 --batches 1 --verify --quiet
done
echo "padding mask passed"
