#!/bin/sh
# The zigzag order changes where a model's positions are stored, not what it
# computes (ppc-zigzag-sequence): a GPT with fused causal attention trained
# 3 more Adam steps on one batch from one checkpoint has the same losses, to
# float32 round-off, with its sequence stored in zigzag order of 4 pairs as
# in natural order: on one rank, and on NP ranks with its sequence split
# over them (context parallelism, search=megatron cp=NP, the ring exchange),
# with 4 pairs asked for and with the pipeline's default (zigzag=auto: NP
# pairs on NP devices, kept because the ring splits the positions; data
# parallel on NP devices gets natural order back).
# usage: zigzag.sh PPC_OPT WORKDIR NP RUN1... -- RUNNP...
#        (RUN1 starts ppc-run on one rank, RUNNP on NP ranks)
set -e
ppc_opt=$1 work=$2 np=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"
cd "$work"
python3 "$here/../../bench/models.py" gpt --layers 1 --hidden 32 --heads 4 \
  --seq 256 --vocab 64 --batch 2 > gpt.mlir
common="optimizer=adam lr=0.01"
"$ppc_opt" gpt.mlir --ppc-auto-parallel="machine=cpux1 search=data-parallel $common plan=natural.pb" -o /dev/null
"$ppc_opt" gpt.mlir --ppc-auto-parallel="machine=cpux1 search=data-parallel zigzag=4 $common plan=zigzag.pb" -o zigzag.mlir
grep -q "zigzag = 4" zigzag.mlir
"$ppc_opt" gpt.mlir --ppc-auto-parallel="machine=cpux$np search=megatron tp=1 cp=$np cp-comm=ring zigzag=4 $common plan=ring.pb" -o /dev/null
"$ppc_opt" gpt.mlir --ppc-auto-parallel="machine=cpux$np search=megatron tp=1 cp=$np cp-comm=ring $common plan=auto.pb" -o auto.mlir
grep -q "zigzag = $np" auto.mlir
"$ppc_opt" gpt.mlir --ppc-auto-parallel="machine=cpux$np search=data-parallel $common" -o dp.mlir
if grep -q "zigzag =\|ppc.sequence_order" dp.mlir; then
  echo "data parallel kept the zigzag order"; exit 1
fi
run1="" runnp=""
while [ "$1" != "--" ]; do run1="$run1 $1"; shift; done
shift
runnp="$*"
# The plans number their tensors apart (the gathers' indices come first),
# so the synthetic weights differ: every run starts from one checkpoint of
# the natural order's first step (weights matched by name).
$run1 natural.pb --steps 1 --batches 1 --checkpoint ckpt --quiet
$run1 natural.pb --steps 3 --batches 1 --resume ckpt --log natural.jsonl --quiet
$run1 zigzag.pb --steps 3 --batches 1 --resume ckpt --log zigzag.jsonl --quiet
$runnp ring.pb --steps 3 --batches 1 --resume ckpt --log ring.jsonl --quiet
$runnp auto.pb --steps 3 --batches 1 --resume ckpt --log auto.jsonl --quiet
python3 - natural.jsonl zigzag.jsonl ring.jsonl auto.jsonl <<'PY'
import json, sys
runs = [[json.loads(l)["loss"] for l in open(p)] for p in sys.argv[1:]]
natural = runs[0]
for name, losses in zip(["zigzag", "zigzag ring", "default order ring"],
                        runs[1:]):
    print(name, "losses:", " ".join(f"{l:.7f}" for l in losses),
          "natural:", " ".join(f"{l:.7f}" for l in natural))
    for a, b in zip(losses, natural):
        if abs(a - b) > 1e-5 * abs(b):
            sys.exit(f"{name}: loss {a} differs from natural order's {b}")
PY
echo "zigzag order passed"
