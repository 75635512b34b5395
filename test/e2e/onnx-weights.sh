#!/bin/sh
# The model's initializers are the plan's weights by default: ppc-run's
# step-1 loss on a fixed batch equals the loss numpy computes from the ONNX
# initializers (make_weights_model.py), on NP ranks with strategy KIND;
# --init=seed trains from random weights instead; a missing weights file is
# one clear error, and --weights names a moved one.
# usage: onnx-weights.sh PYTHON PPC_OPT WORKDIR KIND NP RUN...
#        (PYTHON has python3-onnx and numpy; RUN... starts ppc-run, e.g.
#        "mpirun -np 2 ppc-run")
set -e
python=$1 ppc_opt=$2 work=$3 kind=$4 np=$5
shift 5
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"
"$python" "$here/make_weights_model.py" "$work/model"
# Import from another directory: external data is found next to the model.
cd "$work"
import="$ppc_opt model/model.onnx --batch-size=8"
$import --ppc-auto-parallel="machine=cpux$np search=data-parallel strategy-out=dp.json" -o /dev/null
"$python" "$here/make_strategy.py" --kind "$kind" dp.json strategy.json
$import --ppc-auto-parallel="machine=cpux$np strategy-in=strategy.json optimizer=sgd plan=plan.pb" -o /dev/null
test -f plan.pb.weights

data="--input x=model/x.npy --input labels=model/labels.npy"
"$@" plan.pb --steps 1 $data --log loss.jsonl --quiet
"$@" plan.pb --steps 1 $data --init=seed --log seed.jsonl --quiet
"$python" - model/expected_loss.txt loss.jsonl seed.jsonl <<'PY'
import json, sys
expected = float(open(sys.argv[1]).read())
loss = json.loads(open(sys.argv[2]).readline())["loss"]
seeded = json.loads(open(sys.argv[3]).readline())["loss"]
print(f"step-1 loss {loss:.7g}, numpy from the ONNX initializers "
      f"{expected:.7g}, --init=seed {seeded:.7g}")
if abs(loss - expected) > 1e-5 * max(1.0, abs(expected)):
    sys.exit("the plan did not start from the model's initializers")
if abs(seeded - expected) < 1e-3:
    sys.exit("--init=seed gave the model's loss")
PY

mv plan.pb.weights moved.weights
if "$@" plan.pb --steps 1 $data > missing.log 2>&1; then
  echo "ppc-run ran without its weights file"
  exit 1
fi
cat missing.log
grep -q "ppc-run: weights file 'plan.pb.weights' cannot be opened" missing.log
"$@" plan.pb --steps 1 $data --weights moved.weights --log moved.jsonl --quiet
cmp -s loss.jsonl moved.jsonl || [ "$(cut -d, -f2 loss.jsonl)" = "$(cut -d, -f2 moved.jsonl)" ]
echo "onnx weights passed: $kind on $np ranks"
