#!/bin/sh
# torch.nn.LSTM, GRU and RNN exported by torch.onnx as ONNX LSTM, GRU and
# RNN nodes (make_recurrent_models.py) and unrolled at import
# (lib/Import/Recurrent.cpp): the forward matches torch's logits, each
# direction's W, R and B stays one trained weight read through one
# whole-weight view, and the partitioned training step matches the
# single-device step (--verify: loss, gradients, updated weights), data
# parallel and searched.
# usage: recurrent.sh PYTHON PPC_OPT PPC_RUN WORKDIR NP RUN...
#        (PYTHON has torch, onnx and numpy; RUN... starts ppc-run on NP ranks)
set -e
python=$1 ppc_opt=$2 ppc_run=$3 work=$4 np=$5
shift 5
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"
"$python" "$here/make_recurrent_models.py" "$work" >"$work/export.log" 2>&1
cd "$work"
for model in lstm gru rnn; do
  "$ppc_opt" $model.onnx --batch-size=4 -o $model.mlir
  # No weight is copied per gate or step: each initializer of the node is
  # one ppc.weight, read whole or through its one view.
  for w in $(sed -n 's/.*ppc.weight "\(onnx::[A-Z]*_[0-9]*\)".*/\1/p' \
      $model.mlir); do
    test "$(grep -c "ppc.weight \"$w\"" $model.mlir)" = 1
    test "$(grep -c "ppc.name = \"$w.view\"" $model.mlir)" -le 1
  done
  # The forward on torch's inputs gives torch's logits.
  "$ppc_opt" $model.onnx --batch-size=4 \
    --ppc-lower-to-plan=plan=$model-forward.pb -o /dev/null
  inputs=""
  for f in $model.*.npy; do
    name=${f#$model.}
    name=${name%.npy}
    [ "$name" = expected ] || inputs="$inputs --input $name=$f"
  done
  # shellcheck disable=SC2086
  "$ppc_run" $model-forward.pb --steps 1 --quiet \
    --save-outputs $model-out $inputs
  "$python" - "$model.expected.npy" $model-out/output_0_*.npy <<'PY'
import sys
import numpy as np
want, got = np.load(sys.argv[1]), np.load(sys.argv[2])
assert got.shape == want.shape, (got.shape, want.shape)
err = np.max(np.abs(got - want))
assert np.allclose(got, want, rtol=1e-4, atol=1e-5), f"differs by {err}"
PY
  for search in data-parallel mcmc; do
    "$ppc_opt" $model.onnx --batch-size=4 \
      --ppc-auto-parallel="machine=cpux$np search=$search budget=500 threads=1 optimizer=adam plan=$model-$search.pb" \
      -o /dev/null
    "$@" $model-$search.pb --steps 2 --batches 1 --verify --quiet
  done
done
echo "recurrent models passed"
