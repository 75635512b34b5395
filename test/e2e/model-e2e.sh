#!/bin/sh
# A model trained under mpirun with one strategy, end to end:
#   1. ppc-opt derives the strategy (test/e2e/make_strategy.py, the MCMC
#      search for "searched", the baseline for "megatron*") and lowers it
#      to a plan for cpuxNP;
#   2. the bytes the plan moves equal the bytes the simulator priced, per
#      link kind (ppc-auto-parallel's traffic file), on the host and lowered
#      again for two nodes of H100s;
#   3. --verify: the first step matches the single-device step (loss, every
#      gradient, every updated weight);
#   4. the loss falls over 8 Adam steps (lr 0.01) on one fixed batch;
#   5. a checkpoint resumes bit-identically (checkpoint-resume.sh).
# usage: model-e2e.sh PPC_OPT EXAMPLES WORKDIR MODEL BATCH KIND NP RUN...
#        (RUN... starts ppc-run, e.g. "mpirun -np 2 ppc-run"). MODEL is
#        EXAMPLES/MODEL.onnx, or gpt4, gptwide, gptlong or convnet from
#        bench/models.py (a 4-layer GPT; a 1-layer GPT with a 4096-word
#        vocabulary; a 1-layer GPT of sequence 4096 with fused causal
#        attention; a CNN without batch norm), moe (a 2-layer decoder of
#        8 experts, top 2), or tosa-mlp
#        (test/Interop/Inputs/tosa-mlp.mlir, imported from TOSA), or
#        activations (make_activations_model.py; needs PyTorch).
#        PPC_E2E_DTYPE=bf16|f16 trains in that type (mixed precision:
#        16-bit activations, weights and gradients, float32 master weights
#        and optimizer state), verified at that type's tolerance;
#        PPC_E2E_VERIFY_ARGS adds ppc-run options to the --verify run (a
#        static --loss-scale for f16, whose dynamic scale's first step
#        overflows and leaves no gradients to compare).
set -e
dtype=${PPC_E2E_DTYPE:-f32}
verify_args=${PPC_E2E_VERIFY_ARGS:-}
ppc_opt=$1 examples=$2 work=$3 model=$4 batch=$5 kind=$6 np=$7
shift 7
here=$(dirname "$0")
rm -rf "$work"
mkdir -p "$work"
case $model in
gpt4)
  python3 "$here/../../bench/models.py" gpt --unfused-attention --layers 4 --hidden 32 --heads 4 \
    --seq 16 --vocab 100 --batch "$batch" > "$work/$model.mlir"
  import="$ppc_opt $work/$model.mlir" ;;
convnet)
  python3 "$here/../../bench/models.py" convnet --batch "$batch" \
    > "$work/$model.mlir"
  import="$ppc_opt $work/$model.mlir" ;;
gptlong)
  # Sequence 4096: context parallelism's case (fused causal attention).
  python3 "$here/../../bench/models.py" gpt --layers 1 --hidden 32 --heads 4 \
    --seq 4096 --vocab 64 --batch "$batch" > "$work/$model.mlir"
  import="$ppc_opt $work/$model.mlir" ;;
moe)
  # Mixture of experts: a 2-layer decoder whose feed-forward layers are 8
  # SwiGLU experts, top 2, capacity factor 1.25 (some choices dropped),
  # the router's load-balancing loss at Megatron-Core's 0.01.
  python3 "$here/../../bench/models.py" moe --layers 2 --hidden 32 --heads 4 \
    --ff 48 --seq 16 --vocab 64 --batch "$batch" --aux-loss-coef 0.01 \
    > "$work/$model.mlir"
  import="$ppc_opt $work/$model.mlir" ;;
gptwide)
  # 2 MB embedding and head: sharded collectives of several 1 MiB pieces.
  python3 "$here/../../bench/models.py" gpt --unfused-attention --layers 1 --hidden 128 \
    --heads 4 --seq 8 --vocab 4096 --batch "$batch" > "$work/$model.mlir"
  import="$ppc_opt $work/$model.mlir" ;;
activations)
  # HardSwish, ELU, SELU, Softplus, PReLU and two Resizes, from PyTorch.
  ${PPC_SYSTEM_PYTHON:-/usr/bin/python3} "$here/make_activations_model.py" \
    "$work/$model.onnx" "$batch" 2>/dev/null
  import="$ppc_opt $work/$model.onnx --batch-size=$batch" ;;
tosa-mlp)
  # A TOSA function as torch-mlir emits it (test/Interop; its batch is 64).
  import="$ppc_opt $here/../Interop/Inputs/tosa-mlp.mlir" ;;
*)
  import="$ppc_opt $examples/$model.onnx --batch-size=$batch" ;;
esac
if [ "$kind" = searched ]; then
  $import --ppc-auto-parallel="machine=cpux$np search=mcmc budget=300 seed=1 threads=1 optimizer=adam lr=0.01 dtype=$dtype plan=$work/plan.pb traffic=$work/traffic.json strategy-out=$work/strategy.json" -o /dev/null
elif [ "${kind#megatron-layout-}" != "$kind" ]; then
  # Megatron-LM's layout with options (search=megatron): the kind's words
  # tpN ppN vN mN sp distopt selective full, e.g. megatron-layout-tp2-pp2-m4;
  # a last word zzN stores the sequence in zigzag order of N pairs first;
  # without it the sequence stays in natural order (zigzag=off: the
  # pipeline's default would reorder it wherever the layout splits it).
  layout=${kind#megatron-layout-}
  zigzag=" zigzag=off"
  if [ "${layout%-zz*}" != "$layout" ]; then
    zigzag=" zigzag=${layout##*-zz}"
    layout=${layout%-zz*}
  fi
  options=$(sh "$here/../../bench/megatron_options.sh" "$layout")
  $import --ppc-auto-parallel="machine=cpux$np search=megatron$options$zigzag optimizer=adam lr=0.01 dtype=$dtype plan=$work/plan.pb traffic=$work/traffic.json strategy-out=$work/strategy.json" -o /dev/null
elif [ "${kind#megatron}" != "$kind" ] || [ "$kind" = fsdp ] ||
     [ "$kind" = ulysses-zero3 ] || [ "$kind" = deepspeed-moe ]; then
  # A baseline of search::baselines() as it is (megatron, fsdp, ...).
  $import --ppc-auto-parallel="machine=cpux$np search=$kind optimizer=adam lr=0.01 dtype=$dtype plan=$work/plan.pb traffic=$work/traffic.json strategy-out=$work/strategy.json" -o /dev/null
else
  $import --ppc-auto-parallel="machine=cpux$np search=data-parallel dtype=$dtype strategy-out=$work/dp.json" -o /dev/null
  python3 "$here/make_strategy.py" --kind "$kind" "$work/dp.json" "$work/strategy.json"
  $import --ppc-auto-parallel="machine=cpux$np strategy-in=$work/strategy.json optimizer=adam lr=0.01 dtype=$dtype plan=$work/plan.pb traffic=$work/traffic.json" -o /dev/null
fi

# What the plan moves is what the simulator priced, per link kind: on the
# host, and lowered again for two nodes of H100s (NVLink inside a node,
# InfiniBand across).
check_traffic() {
  python3 - "$1" <<'PY'
import json, sys
traffic = json.load(open(sys.argv[1]))
for kind, t in traffic["link_kinds"].items():
    print("traffic over %s: plan %.0f B, simulated %.0f B" %
          (kind, t["plan_bytes"], t["simulated_bytes"]))
if not traffic["agree"]:
    sys.exit("the plan's bytes differ from the simulator's")
PY
}
check_traffic "$work/traffic.json"
python3 - "$examples/machines/dgx-h100x2.json" "$np" "$work/two-nodes.json" <<'PY'
import json, sys
machine = json.load(open(sys.argv[1]))
np_ = int(sys.argv[2])
cluster = machine["cluster"]
machine["name"] = "two-nodes"
cluster["devices_per_node"] = cluster["nics_per_node"] = max(1, np_ // 2)
json.dump(machine, open(sys.argv[3], "w"))
PY
$import --ppc-auto-parallel="machine=$work/two-nodes.json strategy-in=$work/strategy.json${zigzag:-} optimizer=adam lr=0.01 dtype=$dtype plan=$work/two-nodes.pb traffic=$work/two-nodes-traffic.json" -o /dev/null
check_traffic "$work/two-nodes-traffic.json"

"$@" "$work/plan.pb" --steps 1 --verify $verify_args | tee "$work/verify.log"
grep -q "verify passed" "$work/verify.log"

"$@" "$work/plan.pb" --steps 8 --batches 1 --log "$work/loss.jsonl" --quiet
python3 - "$work/loss.jsonl" <<'PY'
import json, sys
losses = [json.loads(line)["loss"] for line in open(sys.argv[1])]
print("losses:", " ".join(f"{l:.4f}" for l in losses))
if not losses[-1] < 0.9 * losses[0]:
    sys.exit("the loss did not fall by 10% over 8 steps on one batch")
PY

"$here/checkpoint-resume.sh" "$work/ckpt" "$work/plan.pb" "$@"
echo "model e2e passed: $model $kind on $np ranks"
