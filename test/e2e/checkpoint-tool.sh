#!/bin/sh
# ppc-checkpoint on the example MLP's checkpoint of 3 steps on 4 ranks
# (tensor x data): `info` lists its weights; `convert` for a searched plan
# of 2 ranks resumes there as that plan's own checkpoint, with the losses of
# a resharded --resume of the original, bit for bit; `export` writes the
# same ONNX model as ppc-run's --export-onnx after those 3 steps; bad
# arguments are refused.
# usage: checkpoint-tool.sh PPC_OPT EXAMPLES WORKDIR MPIRUN...
#        (MPIRUN... starts a job without its rank count; ppc-run and
#        ppc-checkpoint are next to PPC_OPT)
set -e
ppc_opt=$1 examples=$2 work=$3
shift 3
bin=$(dirname "$ppc_opt")
rm -rf "$work"
mkdir -p "$work"
model=$examples/mlp.onnx
common="optimizer=adam lr=0.01"
"$ppc_opt" "$model" --batch-size=8 --ppc-auto-parallel="machine=cpux4 \
search=megatron tp=2 $common plan=$work/four.pb" -o /dev/null
"$ppc_opt" "$model" --batch-size=8 --ppc-auto-parallel="machine=cpux2 \
search=mcmc budget=100 seed=1 threads=1 $common plan=$work/two.pb" -o /dev/null
"$@" -np 4 "$bin/ppc-run" "$work/four.pb" --steps 3 --checkpoint "$work/ckpt" \
  --export-onnx "$model=$work/run.onnx" --quiet

"$bin/ppc-checkpoint" info "$work/ckpt" | tee "$work/info.txt"
grep -q "step 3, 4 ranks" "$work/info.txt"
grep -q "fc1.weight \[128, 784\], 4 pieces" "$work/info.txt"

"$bin/ppc-checkpoint" convert "$work/ckpt" --plan "$work/two.pb" \
  -o "$work/converted"
"$@" -np 2 "$bin/ppc-run" "$work/two.pb" --steps 2 --resume "$work/converted" \
  --log "$work/converted.jsonl" > "$work/converted.log"
if grep -q "under another plan" "$work/converted.log"; then
  echo "the converted checkpoint did not resume as the plan's own"; exit 1
fi
"$@" -np 2 "$bin/ppc-run" "$work/two.pb" --steps 2 --resume "$work/ckpt" \
  --log "$work/resharded.jsonl" --quiet
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
def losses(name):
    return [r["loss"] for r in map(json.loads, open(f"{work}/{name}.jsonl"))]
a, b = losses("converted"), losses("resharded")
print("converted:", a, "resharded:", b)
if a != b or len(a) != 2:
    sys.exit("the converted checkpoint's losses differ from the resharded resume's")
PY

"$bin/ppc-checkpoint" export "$work/ckpt" "$model=$work/checkpoint.onnx"
cmp "$work/run.onnx" "$work/checkpoint.onnx"

refused() { # MESSAGE COMMAND...: fails, saying MESSAGE
  message=$1
  shift
  if "$@" > "$work/refused.txt" 2>&1; then
    echo "accepted: $*"; exit 1
  fi
  grep -q "$message" "$work/refused.txt" || { cat "$work/refused.txt"; exit 1; }
}
refused "is the model itself" "$bin/ppc-checkpoint" export "$work/ckpt" "$model=$model"
refused "overlap: name another folder" "$bin/ppc-checkpoint" convert \
  "$work/ckpt" --plan "$work/two.pb" -o "$work/ckpt/inside"
refused "unknown command 'bogus'" "$bin/ppc-checkpoint" bogus
refused "needs --plan NEW.pb and -o OUT" "$bin/ppc-checkpoint" convert "$work/ckpt"
echo "checkpoint tool passed"
