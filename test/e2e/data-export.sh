#!/bin/sh
# --data and --export-onnx end to end: the example MLP trained on NP ranks
# with strategy KIND from a Fashion-MNIST-format dataset (examples/
# fashion_mnist.py on generated IDX files) ends with the same weights as on
# one rank (--export-onnx of both runs compared with numpy), passes
# --verify, and a run resumed from a checkpoint reads the same batches as
# an uninterrupted one.
# usage: data-export.sh PYTHON PPC_OPT PPC_RUN EXAMPLES WORKDIR KIND NP RUN...
#        (PYTHON has numpy and onnx; RUN... starts ppc-run on NP ranks)
set -e
python=$1 ppc_opt=$2 ppc_run=$3 examples=$4 work=$5 kind=$6 np=$7
shift 7
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work/idx"
cd "$work"

# 40 images whose class is their brightest quarter, as gzipped IDX files.
"$python" - idx <<'PY'
import gzip, random, struct, sys
random.seed(3)
images, labels = bytearray(), bytearray()
for i in range(40):
    label = i % 4
    for r in range(28):
        for c in range(28):
            quarter = (r >= 14) * 2 + (c >= 14)
            images.append(200 if quarter == label else random.randrange(100))
    labels.append(label)
for name, dims, body in (("train-images-idx3-ubyte.gz", (40, 28, 28), images),
                         ("train-labels-idx1-ubyte.gz", (40,), labels)):
    with gzip.open(sys.argv[1] + "/" + name, "wb") as f:
        f.write(bytes([0, 0, 8, len(dims)]) + struct.pack(">%dI" % len(dims), *dims))
        f.write(bytes(body))
PY
"$python" "$examples/fashion_mnist.py" --source idx --shard 16 data

import="$ppc_opt $examples/mlp.onnx --batch-size=8"
$import --ppc-auto-parallel="machine=cpux$np search=data-parallel strategy-out=dp.json" -o /dev/null
"$python" "$here/make_strategy.py" --kind "$kind" dp.json strategy.json
$import --ppc-auto-parallel="machine=cpux$np strategy-in=strategy.json optimizer=adam plan=plan.pb" -o /dev/null
$import --ppc-auto-parallel="machine=cpux1 search=data-parallel optimizer=adam plan=one.pb" -o /dev/null

# 7 steps of 8: the 40 records' first epoch and two batches of the second.
"$@" plan.pb --data data --steps 7 --verify --log full.jsonl \
  --export-onnx "$examples/mlp.onnx=trained.onnx" > run.log
cat run.log
grep -q "^data: data: 40 records, batch 8, an epoch every 5 steps, shuffled by seed 1" run.log
grep -q "^verify passed" run.log
"$ppc_run" one.pb --data data --steps 7 --quiet \
  --export-onnx "$examples/mlp.onnx=one.onnx"

# Interrupted after step 3 and resumed: the same losses.
"$@" plan.pb --data data --steps 3 --checkpoint ckpt --quiet
"$@" plan.pb --data data --steps 4 --resume ckpt --log resumed.jsonl --quiet
"$python" - "$examples/mlp.onnx" trained.onnx one.onnx full.jsonl resumed.jsonl <<'PY'
import json, sys
import numpy as np
import onnx
from onnx import numpy_helper
def weights(path):
    return {t.name: numpy_helper.to_array(t)
            for t in onnx.load(path).graph.initializer}
initial, trained, one = (weights(p) for p in sys.argv[1:4])
worst = 0.0
for name, value in one.items():
    moved = np.abs(value - initial[name]).max()
    if moved == 0:
        sys.exit("weight %s did not train" % name)
    worst = max(worst, np.abs(trained[name] - value).max() / np.abs(value).max())
print("trained weights: largest relative difference to one rank %.2g" % worst)
if worst > 1e-4:
    sys.exit("the partitioned run trained other weights than one rank")
full = [json.loads(l)["loss"] for l in open(sys.argv[4])]
resumed = [json.loads(l)["loss"] for l in open(sys.argv[5])]
print("losses", full, "resumed", resumed)
if resumed != full[3:]:
    sys.exit("the resumed run read other batches")
PY
echo "data and export passed: $kind on $np ranks"
