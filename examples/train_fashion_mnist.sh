#!/usr/bin/env bash
# Trains the bundled MLP (examples/mlp.onnx) on Fashion-MNIST with ppc:
# Debian's dataset-fashion-mnist package as a --data directory, a searched
# strategy on NP ranks, the trained weights written back into an ONNX model
# (--export-onnx), and that model's accuracy on the 10,000 test images from
# a forward-only plan. After scripts/build.sh:
#   bash examples/train_fashion_mnist.sh [BUILD_DIR]
#   (STEPS=2000 NP=2 BATCH=64 WORK=/tmp/ppc-fashion-mnist by default)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
steps=${STEPS:-2000} np=${NP:-2} batch=${BATCH:-64}
work=${WORK:-/tmp/ppc-fashion-mnist}
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get install -y dataset-fashion-mnist
fi
mpirun=(mpirun -np "$np")
[ "$(id -u)" -eq 0 ] && mpirun+=(--allow-run-as-root)
mpirun+=(--oversubscribe)
mkdir -p "$work"
[ -d "$work/train" ] || python3 "$root/examples/fashion_mnist.py" "$work/train"
[ -d "$work/test" ] ||
  python3 "$root/examples/fashion_mnist.py" --split test "$work/test"

"$build/bin/ppc-opt" "$root/examples/mlp.onnx" --batch-size="$batch" \
  --ppc-auto-parallel="machine=cpux$np search=mcmc budget=1s optimizer=adam plan=$work/train.pb" \
  -o /dev/null
"${mpirun[@]}" "$build/bin/ppc-run" "$work/train.pb" --data "$work/train" \
  --steps "$steps" --log "$work/train.jsonl" \
  --export-onnx "$root/examples/mlp.onnx=$work/trained.onnx" |
  grep -E "^(data|step [0-9]*00/|mean|trained)"

# The test set in one batch, through the trained model's forward pass.
"$build/bin/ppc-opt" "$work/trained.onnx" --batch-size=10000 \
  --ppc-auto-parallel="machine=cpux$np search=data-parallel loss=none plan=$work/test.pb" \
  -o /dev/null
rm -rf "$work/out"
"${mpirun[@]}" "$build/bin/ppc-run" "$work/test.pb" --data "$work/test" \
  --no-shuffle --steps 1 --quiet --save-outputs "$work/out"
python3 - "$work/out/output_0_logits.npy" "$work/test/labels/000.npy" <<'PY'
import ast, struct, sys
def load(path, code):
    data = open(path, "rb").read()
    length = struct.unpack("<H", data[8:10])[0]
    shape = ast.literal_eval(data[10:10 + length].decode("latin1"))["shape"]
    count = 1
    for d in shape:
        count *= d
    size = struct.calcsize(code)
    return shape, struct.unpack("<%d%s" % (count, code),
                                data[10 + length:10 + length + count * size])
(n, classes), logits = load(sys.argv[1], "f")
_, labels = load(sys.argv[2], "q")
right = sum(max(range(classes), key=lambda c: logits[i * classes + c]) ==
            labels[i] for i in range(n))
print("test accuracy %.2f%% (%d of %d)" % (100.0 * right / n, right, n))
PY
