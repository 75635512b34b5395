#!/bin/sh
# The cuda backend's executor path on a machine without a GPU: a model
# lowered by ppc-opt and trained by ppc-run-emulated (ppc-run whose cuda
# backend is the host emulation of its sources: its own kernels on storage
# types as they are, row reductions, deferred label checks, multi-tensor
# Adam, plain GEMM loops for cuBLAS, collectives over MPI), with
# uninitialized buffers poisoned, checked against the cpu backend's
# single-device step (--verify --verify-backend cpu, the plan type's
# tolerance).
# usage: cuda-emulated.sh PPC_OPT EXAMPLES WORKDIR MODEL STRATEGY DTYPE NP RUN...
#        MODEL: mlp, cnn or transformer (EXAMPLES/MODEL.onnx), gpt4 (a
#        4-layer GPT of bench/models.py, fused causal attention with
#        dropout 0.1, heads of 16, sequence 80), bert2 (2 layers, the same
#        attention not causal), gpt4-unfused (matmul, softmax, matmul) or
#        moe (2 layers of 8 experts, top 2);
#        STRATEGY a
#        search (data-parallel, mcmc, megatron), key-blocks (attention
#        split along its keys) or expert (experts over the ranks:
#        make_strategy.py); RUN... starts
#        ppc-run-emulated on NP ranks.
set -e
ppc_opt=$1 examples=$2 work=$3 model=$4 strategy=$5 dtype=$6 np=$7
shift 7
here=$(dirname "$0")
rm -rf "$work"
mkdir -p "$work"
case $model in
gpt4)
  # Heads of 16: in bf16 the tiled attention kernels (two tiles of 64).
  python3 "$here/../../bench/models.py" gpt --layers 4 --hidden 64 --heads 4 \
    --seq 80 --vocab 100 --batch 4 --dropout 0.1 --loss ce > "$work/$model.mlir"
  import="$ppc_opt $work/$model.mlir" ;;
bert2)
  # Fused attention that is not causal, heads of 16: the tiled kernels.
  python3 "$here/../../bench/models.py" bert --layers 2 --hidden 64 --heads 4 \
    --seq 80 --vocab 100 --batch 2 --dropout 0.1 --loss ce > "$work/$model.mlir"
  import="$ppc_opt $work/$model.mlir" ;;
moe)
  # Mixture of experts: 2 layers of 8 SwiGLU experts, top 2, capacity
  # factor 1.25, the router's load-balancing loss.
  python3 "$here/../../bench/models.py" moe --layers 2 --hidden 32 --heads 4 \
    --ff 48 --seq 16 --vocab 64 --batch 4 --loss ce --aux-loss-coef 0.01 \
    > "$work/$model.mlir"
  import="$ppc_opt $work/$model.mlir" ;;
gpt4-unfused)
  python3 "$here/../../bench/models.py" gpt --unfused-attention --layers 4 \
    --hidden 32 --heads 4 --seq 16 --vocab 100 --batch 8 --loss ce \
    > "$work/$model.mlir"
  import="$ppc_opt $work/$model.mlir" ;;
*)
  import="$ppc_opt $examples/$model.onnx --batch-size=8" ;;
esac
machine=cpu
[ "$np" -gt 1 ] && machine=cpux$np
if [ "$strategy" = key-blocks ] || [ "$strategy" = expert ]; then
  # Attention split along its keys, or experts over the ranks
  # (make_strategy.py key-blocks, expert).
  $import --ppc-auto-parallel="machine=$machine search=data-parallel dtype=$dtype strategy-out=$work/dp.json" -o /dev/null
  python3 "$here/make_strategy.py" --kind "$strategy" "$work/dp.json" "$work/strategy.json"
  $import --ppc-auto-parallel="machine=$machine strategy-in=$work/strategy.json optimizer=adam dtype=$dtype plan=$work/plan.pb" -o /dev/null
else
  $import --ppc-auto-parallel="machine=$machine search=$strategy budget=200 seed=1 threads=1 optimizer=adam dtype=$dtype plan=$work/plan.pb" -o /dev/null
fi
PPC_POISON_UNINITIALIZED=1 "$@" "$work/plan.pb" --backend cuda --steps 2 \
  --verify --verify-backend cpu > "$work/verify.log" 2>&1 ||
  { cat "$work/verify.log"; exit 1; }
cat "$work/verify.log"
grep -q "verify passed" "$work/verify.log"
grep -q "launches per step" "$work/verify.log"
# On one rank, a kernel profile timed by the backend's events (the device's
# clock; the host's in the emulation) covers the step: its kernels' times
# per step add up to most of the measured step, never more.
if [ "$np" -eq 1 ]; then
  "$@" "$work/plan.pb" --backend cuda --steps 4 --profile "$work/prof.json" \
    --profile-device H100-SXM5-80GB > "$work/profile.log" 2>&1 ||
    { cat "$work/profile.log"; exit 1; }
  python3 - "$work/prof.json" "$work/profile.log" <<'PY'
import json, re, sys
entries = json.load(open(sys.argv[1]))["entries"]
step = float(re.search(r"^mean step ([0-9.]+) ms", open(sys.argv[2]).read(),
                       re.M).group(1))
kernels = sum(e["seconds"] * e["runs"] for e in entries) / 3 * 1e3
print(f"profile: kernels {kernels:.2f} ms of a {step:.2f} ms step")
if not 0.6 * step <= kernels <= 1.05 * step:
    sys.exit("profile: the kernels' times do not cover the step")
PY
fi
echo "cuda emulated passed"
