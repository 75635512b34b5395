#!/bin/sh
# A Mixtral-style sparse MoE block as Hugging Face writes it, exported by
# torch.onnx (make_moe_model.py: NonZero, Gathers and a ScatterElements per
# expert), imported into one ppc.moe_dispatch / batched SwiGLU experts /
# ppc.moe_combine (lib/Import/MixtureOfExperts.cpp): on one device it trains
# to PyTorch's own losses (same weights, same batch, SGD), and on NP ranks
# data parallel, DeepSpeed-MoE's expert-parallel layout and the searched
# strategy match the single-device step (--verify); --export-onnx writes
# the trained experts back to PyTorch's initializers (PyTorch's trained
# values), and --moe-capacity-factor routes per sample with drops. Then
# the same for Qwen2-MoE's block (unnormalized weights, a shared expert),
# and for two-layer GELU experts.
# usage: moe-import.sh PYTHON PPC_OPT PPC_RUN WORKDIR NP RUN...
#        (PYTHON has torch, onnx and numpy; RUN... starts ppc-run on NP ranks)
set -e
python=$1 ppc_opt=$2 ppc_run=$3 work=$4 np=$5
shift 5
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work"
mkdir -p "$work"
steps=3
"$python" "$here/make_moe_model.py" "$work" 4 $steps >"$work/export.log" 2>&1
cd "$work"

# One fused block: the routing's NonZero and scatters are gone, the eight
# experts' 24 weights are three stacked ones.
"$ppc_opt" moe.onnx -o moe.mlir
test "$(grep -c "ppc.moe_dispatch" moe.mlir)" = 1
test "$(grep -c "ppc.moe_combine .*normalize = true" moe.mlir)" = 1
test "$(grep -c "ppc.weight \"block_sparse_moe.experts.w[123]\"" moe.mlir)" = 3
grep -q "ppc.stacked_weights" moe.mlir

# One device: PyTorch's losses at every step (in the current directory).
same_losses_as_pytorch() {
  "$ppc_opt" moe.onnx --ppc-auto-parallel="machine=cpux1 search=data-parallel optimizer=sgd lr=0.1 plan=one.pb" -o /dev/null
  for s in $(seq 1 $steps); do
    "$ppc_run" one.pb --steps "$s" --quiet --input x=x.npy \
      --input labels=labels.npy --save-outputs "one-$s"
  done
  "$python" - expected.txt $steps <<'PY'
import glob
import sys
import numpy as np
want = [float(v) for v in open(sys.argv[1]).read().split()]
for step in range(1, int(sys.argv[2]) + 1):
    got = float(np.load(glob.glob("one-%d/output_0_*.npy" % step)[0]))
    assert abs(got - want[step - 1]) <= 1e-5 * max(1, abs(want[step - 1])), \
        f"step {step}: ppc-run's loss {got}, PyTorch's {want[step - 1]}"
    print(f"step {step}: loss {got:.7f}, PyTorch {want[step - 1]:.7f}")
assert want[-1] < want[0]
PY
}
# The stacked experts go back to their initializers: after as many steps
# as PyTorch took, ppc-run's exported model holds PyTorch's weights.
same_trained_weights_as_pytorch() {
  "$ppc_run" one.pb --steps $steps --quiet --input x=x.npy \
    --input labels=labels.npy --export-onnx moe.onnx=trained.onnx
  "$python" - trained.onnx torch-trained.onnx <<'PY'
import sys
import numpy as np
import onnx
from onnx import numpy_helper
got, want = ({t.name: numpy_helper.to_array(t)
              for t in onnx.load(path).graph.initializer} for path in sys.argv[1:])
assert got.keys() == want.keys(), sorted(set(got) ^ set(want))
for name, w in want.items():
    assert np.allclose(got[name], w, rtol=1e-4, atol=1e-6), \
        f"{name} differs by {np.max(np.abs(got[name] - w))}"
print(f"{len(want)} trained initializers match PyTorch's")
PY
}
same_losses_as_pytorch
same_trained_weights_as_pytorch

# NP ranks: each layout matches one device and trains.
for search in data-parallel deepspeed-moe mcmc; do
  "$ppc_opt" moe.onnx --ppc-auto-parallel="machine=cpux$np search=$search budget=300 threads=1 optimizer=adam lr=0.01 plan=$search.pb" -o /dev/null
  "$@" $search.pb --steps 2 --verify --quiet --input x=x.npy \
    --input labels=labels.npy
done
# Routed per sample with a capacity factor (ceil(2 * 8 * 1.25 / 8) = 3
# slots per expert and sample, some choices dropped), expert parallel.
"$ppc_opt" moe.onnx --moe-capacity-factor=1.25 -o capacity.mlir
grep -q "ppc.moe_dispatch .* -> tensor<8x4x3x16xf32>" capacity.mlir
"$ppc_opt" capacity.mlir --ppc-auto-parallel="machine=cpux$np search=deepspeed-moe optimizer=adam lr=0.01 plan=capacity.pb" -o /dev/null
"$@" capacity.pb --steps 2 --verify --quiet --input x=x.npy \
  --input labels=labels.npy
# Qwen2-MoE's block: the top-k weights not normalized, and a shared expert
# on every token beside the routed ones, which stays ordinary ops.
mkdir qwen
"$python" "$here/make_moe_model.py" qwen 4 $steps qwen >qwen/export.log 2>&1
cd qwen
"$ppc_opt" moe.onnx -o moe.mlir
test "$(grep -c "ppc.moe_dispatch" moe.mlir)" = 1
test "$(grep -c "ppc.moe_combine .*normalize" moe.mlir)" = 0
test "$(grep -c "ppc.weight \"block_sparse_moe.experts.w[123]\" : tensor<8x" moe.mlir)" = 3
same_losses_as_pytorch
"$ppc_opt" moe.onnx --ppc-auto-parallel="machine=cpux$np search=deepspeed-moe optimizer=adam lr=0.01 plan=ep.pb" -o /dev/null
"$@" ep.pb --steps 2 --verify --quiet --input x=x.npy --input labels=labels.npy
# Two-layer experts with biases and exact GELU between (exported as Gemm
# and erf): two stacked weights and two stacked biases, PyTorch's losses,
# and the trained weights back to PyTorch's.
cd ..
mkdir gelu
"$python" "$here/make_moe_model.py" gelu 4 $steps gelu >gelu/export.log 2>&1
cd gelu
"$ppc_opt" moe.onnx -o moe.mlir
test "$(grep -c "ppc.moe_dispatch" moe.mlir)" = 1
test "$(grep -c "ppc.gelu" moe.mlir)" = 1
test "$(grep -c "ppc.weight \"block_sparse_moe.experts.[wb][12]\" : tensor<8x" moe.mlir)" = 4
same_losses_as_pytorch
same_trained_weights_as_pytorch
"$ppc_opt" moe.onnx --ppc-auto-parallel="machine=cpux$np search=deepspeed-moe optimizer=adam lr=0.01 plan=ep.pb" -o /dev/null
"$@" ep.pb --steps 2 --verify --quiet --input x=x.npy --input labels=labels.npy
echo "moe import passed"
