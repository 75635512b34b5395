#!/bin/sh
# Mixed precision against float32 over a training run: the same data-
# parallel plan of MODEL in f32, bf16 and f16 (dynamic loss scale), 200 Adam
# steps (lr 3e-3) over 16 cycling synthetic batches; each 16-bit curve must
# stay with the float32 one: the mean over the steps of |loss - f32 loss| /
# f32 loss at most 2%, and the mean of the last 20 losses within 5% of
# float32's.
# usage: loss-curves.sh PPC_OPT EXAMPLES WORKDIR MODEL NP RUN...
#        (MODEL: cnn, an example, at batch 16; gpt4, bench/models.py's
#        4-layer GPT, at batch 8. RUN... starts ppc-run.)
set -e
ppc_opt=$1 examples=$2 work=$3 model=$4 np=$5
shift 5
here=$(dirname "$0")
rm -rf "$work"
mkdir -p "$work"
case $model in
gpt4)
  python3 "$here/../../bench/models.py" gpt --unfused-attention --layers 4 --hidden 32 --heads 4 \
    --seq 16 --vocab 100 --batch 8 > "$work/$model.mlir"
  import="$ppc_opt $work/$model.mlir" ;;
*)
  import="$ppc_opt $examples/$model.onnx --batch-size=16" ;;
esac
for dtype in f32 bf16 f16; do
  $import --ppc-auto-parallel="machine=cpux$np search=data-parallel optimizer=adam lr=0.003 dtype=$dtype plan=$work/$dtype.pb" -o /dev/null
  "$@" "$work/$dtype.pb" --steps 200 --batches 16 --log "$work/$dtype.jsonl" \
    > "$work/$dtype.log"
  tail -n 8 "$work/$dtype.log"
done
python3 - "$work" "$model" "$np" <<'PY'
import json, sys
work, model, np = sys.argv[1:]
curves = {}
for dtype in ("f32", "bf16", "f16"):
    losses = [json.loads(line)["loss"] for line in open(f"{work}/{dtype}.jsonl")]
    if len(losses) != 200 or any(l is None for l in losses):
        sys.exit(f"{dtype}: expected 200 finite losses, got {losses}")
    curves[dtype] = losses
ref = curves["f32"]
def tail(v):
    return sum(v[-20:]) / 20
print(f"{model} on {np} ranks: loss at steps 1, 50, 100, 200 and last-20 mean")
failed = []
for dtype, losses in curves.items():
    mean_rel = sum(abs(a - b) / a for a, b in zip(ref, losses)) / len(ref)
    tail_rel = abs(tail(losses) - tail(ref)) / tail(ref)
    print(f"  {dtype:5s} " + " ".join(f"{losses[i]:.4f}" for i in (0, 49, 99, 199))
          + f"  {tail(losses):.4f}  mean |rel diff| {mean_rel:.4f}"
          + f"  last-20 rel diff {tail_rel:.4f}")
    if mean_rel > 0.02 or tail_rel > 0.05:
        failed.append(dtype)
if not tail(ref) < 0.9 * ref[0]:
    sys.exit("the float32 loss did not fall by 10%")
if failed:
    sys.exit("off the float32 curve: " + ", ".join(failed))
print("loss curves passed")
PY
