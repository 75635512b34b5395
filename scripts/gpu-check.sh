#!/usr/bin/env bash
# The cuda backend on a machine with a GPU (docs/runtime.md, "The cuda
# backend"). Each check prints PASS, FAIL or SKIP with its figures; the run
# ends with the summary and exits 1 if any check failed:
#   1. build: scripts/build.sh with the cuda backend (nvcc found);
#   2. kernels: CudaBackendTest, every op's forward and backward and the
#      backend's buffers, copies and optimizer against the cpu backend
#      (skipping is a failure here);
#   3. node tests: ONNX's backend node tests through ppc-run --backend cuda;
#      the passing cases must be those the cpu backend passes
#      (docs/onnx-node-tests.md);
#   4. verify: training steps on the cuda backend checked against the cpu
#      backend's single-device step (--verify --verify-backend cpu, the
#      plan type's tolerance): MLP, CNN, transformer and a 4-layer GPT in
#      f32, the GPT in bf16, at 1 rank and at 2 ranks (on one GPU the two
#      ranks share it and exchange through host memory);
#   5. libraries: GEMM and convolution kernels as a training step runs them
#      (ppc-profile of the plans' kernels) against cuBLAS and cuDNN alone at
#      the same shapes (ppc-library-peak); the acceptance is >= 90%;
#   6. throughput: ResNet-50 (batch 32, 224x224) and a GPT (12 layers,
#      hidden 768, sequence 1024) on one GPU, bf16, steps of ppc-run;
#   7. simulator: the GPT's step predicted from a ppc-profile profile of its
#      kernels against the step ppc-run measured (acceptance: within 10%).
# Usage: scripts/gpu-check.sh [BUILD_DIR]   (GPU_CHECK_QUICK=1: small
#        models in 6 and 7, for a first look)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpirun=(mpirun --oversubscribe)
[[ $(id -u) == 0 ]] && mpirun+=(--allow-run-as-root)
opt=$build/bin/ppc-opt run=$build/bin/ppc-run prof=$build/bin/ppc-profile
failed=0
summary=()
result() { # STATUS NAME DETAIL
  summary+=("$(printf '%-5s %-12s %s' "$1" "$2" "$3")")
  echo "== $1 $2: $3"
  [[ $1 == FAIL ]] && failed=1
  return 0
}

if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check.sh: no GPU visible (nvidia-smi -L failed): run it on a" \
    "machine with an NVIDIA GPU" >&2
  exit 2
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "GPU: $gpu ($(nvidia-smi -L | wc -l) visible)"

# 1. build
if bash "$root/scripts/build.sh" >"$work/build.log" 2>&1 &&
  "$run" --help | grep -q 'backends: .*cuda'; then
  result PASS build "cuda backend built ($build)"
else
  tail -20 "$work/build.log"
  result FAIL build "no cuda backend in $build (nvcc, cuBLAS, cuDNN, NCCL?)"
  printf '%s\n' "${summary[@]}"
  exit 1
fi

# 2. kernels against the cpu backend
if "$build/test/unit/CudaBackendTest" --gtest_brief=1 >"$work/kernels.log" 2>&1 &&
  ! grep -q SKIPPED "$work/kernels.log"; then
  result PASS kernels "$(grep -o '[0-9]* tests from' "$work/kernels.log" | head -1 | cut -d' ' -f1) tests"
else
  grep -E 'Failure|FAILED|SKIPPED|differ' "$work/kernels.log" | head -20
  result FAIL kernels "CudaBackendTest (log above)"
fi

# 3. ONNX node tests
if [[ -d /usr/share/libonnx-testdata/data/node ]]; then
  if python3 "$root/test/onnx-node/run_node_tests.py" --ppc-opt "$opt" \
    --ppc-run "$run" --backend cuda --jobs 4 \
    --check-list "$root/docs/onnx-node-tests.md" >"$work/node.log" 2>&1; then
    result PASS node-tests "$(tail -1 "$work/node.log")"
  else
    tail -15 "$work/node.log"
    result FAIL node-tests "$(tail -1 "$work/node.log")"
  fi
else
  result SKIP node-tests "no /usr/share/libonnx-testdata (apt-get install libonnx-testdata)"
fi

# 4. --verify against the cpu backend
verify() { # NAME RANKS DTYPE IMPORT...
  local name=$1 ranks=$2 dtype=$3
  shift 3
  local machine=cpu
  [[ $ranks -gt 1 ]] && machine=cpux$ranks
  if ! "$@" --ppc-auto-parallel="machine=$machine search=mcmc budget=200 dtype=$dtype optimizer=adam plan=$work/$name.pb" \
    -o /dev/null >"$work/$name.opt" 2>&1; then
    result FAIL "verify" "$name: ppc-opt failed: $(tail -1 "$work/$name.opt")"
    return
  fi
  local launch=("$run")
  [[ $ranks -gt 1 ]] && launch=("${mpirun[@]}" -np "$ranks" "$run")
  if "${launch[@]}" "$work/$name.pb" --backend cuda --steps 3 --verify \
    --verify-backend cpu >"$work/$name.log" 2>&1; then
    result PASS verify "$name: $(grep -m1 'verify' "$work/$name.log")"
  else
    tail -8 "$work/$name.log"
    result FAIL verify "$name (log above)"
  fi
}
python3 "$root/bench/models.py" gpt --layers 4 --hidden 64 --heads 4 \
  --seq 32 --vocab 200 --batch 8 >"$work/gpt4.mlir"
for ranks in 1 2; do
  verify "mlp-np$ranks" "$ranks" f32 "$opt" "$root/examples/mlp.onnx" --batch-size=16
  verify "cnn-np$ranks" "$ranks" f32 "$opt" "$root/examples/cnn.onnx" --batch-size=16
  verify "transformer-np$ranks" "$ranks" f32 "$opt" "$root/examples/transformer.onnx" --batch-size=8
  verify "gpt4-np$ranks" "$ranks" f32 "$opt" "$work/gpt4.mlir"
  verify "gpt4-bf16-np$ranks" "$ranks" bf16 "$opt" "$work/gpt4.mlir"
done

# Models for 5-7.
if [[ ${GPU_CHECK_QUICK:-0} == 1 ]]; then
  python3 "$root/bench/models.py" resnet50 --batch 4 --dtype bf16 >"$work/resnet.mlir"
  python3 "$root/bench/models.py" gpt --layers 2 --hidden 256 --heads 4 \
    --seq 128 --vocab 1000 --batch 4 --dtype bf16 --loss ce >"$work/gpt.mlir"
else
  python3 "$root/bench/models.py" resnet50 --batch 32 --dtype bf16 >"$work/resnet.mlir"
  python3 "$root/bench/models.py" gpt --layers 12 --hidden 768 --heads 12 \
    --seq 1024 --vocab 50304 --batch 8 --dtype bf16 --loss ce >"$work/gpt.mlir"
fi
device=H100-SXM5-80GB # the dgx-h100 preset's device, simulated below
for model in resnet gpt; do
  "$opt" "$work/$model.mlir" --ppc-auto-parallel="machine=cpu search=data-parallel optimizer=adam plan=$work/$model.pb" \
    -o /dev/null >"$work/$model.opt" 2>&1 ||
    { result FAIL models "$model: $(tail -1 "$work/$model.opt")"; continue; }
  "$prof" "$work/$model.pb" -o "$work/$model.prof.json" --backend cuda \
    --device-name "$device" --details "$work/$model.details.json" --quiet \
    >"$work/$model.prof.log" 2>&1 ||
    result FAIL profile "$model: $(tail -1 "$work/$model.prof.log")"
done

# 5. GEMM and convolution against the libraries alone
python3 - "$work" "$build/bin/ppc-library-peak" >"$work/libraries.txt" 2>&1 <<'PY'
import json, subprocess, sys
work, peak = sys.argv[1], sys.argv[2]
worst = None
for model in ("gpt", "resnet"):
    try:
        kernels = json.load(open(f"{work}/{model}.details.json"))["kernels"]
    except OSError:
        continue
    # The largest forward kernels of each kind: where the time goes. The
    # models are bf16: GEMMs run as bf16 GEMMs with bf16 results, and
    # convolutions in exact float32 (cuDNN's FMA math, as the backend asks).
    for kind in ("ppc.linear", "ppc.matmul", "ppc.conv2d"):
        rows = [k for k in kernels if k["op"] == kind]
        rows.sort(key=lambda k: -k["forward_seconds"])
        for k in rows[:3]:
            s, a = k["operand_shapes"], k["attributes"]
            if kind == "ppc.linear":
                m = 1
                for d in s[0][:-1]:
                    m *= d
                n = s[1][0] if a.get("transpose_weight", 0) else s[1][1]
                args = ["gemm", str(m), str(n), str(s[0][-1]), "--dtype", "bf16"]
                if a.get("transpose_weight", 0):
                    args.append("--transb")
            elif kind == "ppc.matmul":
                *b, m, kk = s[0]
                if a.get("transpose_lhs", 0):
                    m, kk = kk, m
                n = s[1][-2] if a.get("transpose_rhs", 0) else s[1][-1]
                batch = 1
                for d in b:
                    batch *= d
                args = ["gemm", str(m), str(n), str(kk), "--dtype", "bf16",
                        "--batch", str(batch)]
                if a.get("transpose_lhs", 0):
                    args.append("--transa")
                if a.get("transpose_rhs", 0):
                    args.append("--transb")
            else:
                strides = a.get("strides", [1, 1])
                pads = a.get("pads", [0, 0, 0, 0])
                dilations = a.get("dilations", [1, 1])
                if len(set(strides)) > 1 or len(set(pads)) > 1 or len(set(dilations)) > 1:
                    continue  # ppc-library-peak takes one value per attribute
                (n_, c, h, w), (kk, cg, r, q) = s[0], s[1]
                args = ["conv", str(n_), str(c), str(h), str(w), str(kk),
                        str(r), str(q), "--stride", str(strides[0]),
                        "--pad", str(pads[0]), "--dilation", str(dilations[0]),
                        "--groups", str(a.get("groups", 1)), "--math", "fma"]
            out = subprocess.run([peak] + args, capture_output=True, text=True)
            if out.returncode != 0:
                print(f"{kind} {s}: ppc-library-peak failed: {out.stderr.strip()}")
                continue
            lib = json.loads(out.stdout)["seconds"]
            ratio = lib / k["forward_seconds"]
            # A kernel shorter than a launch and its bookkeeping measures
            # the launch, not the library's throughput: shown, not judged.
            judged = lib >= 50e-6
            if judged:
                worst = ratio if worst is None else min(worst, ratio)
            print(f"{kind} {k['name']} {s}: in a step {k['forward_seconds']*1e3:.3f} ms,"
                  f" library alone {lib*1e3:.3f} ms: {100*ratio:.0f}%"
                  + ("" if judged else " (under 50 us: launch-bound, not judged)"))
print(f"worst: {100*worst:.0f}%" if worst is not None else "worst: none measured")
PY
cat "$work/libraries.txt"
worst=$(sed -n 's/^worst: \([0-9]*\)%.*/\1/p' "$work/libraries.txt")
if [[ -z $worst ]]; then
  result FAIL libraries "nothing measured"
elif ((worst >= 90)); then
  result PASS libraries "every GEMM/conv at >= 90% of the library's own time ($worst% worst)"
else
  result FAIL libraries "worst kernel at $worst% of the library's own speed (< 90%)"
fi

# 6. throughput, and 7. the simulator against the measured step
for model in resnet gpt; do
  [[ -f $work/$model.pb ]] || continue
  if ! "$run" "$work/$model.pb" --backend cuda --steps 10 >"$work/$model.run" 2>&1; then
    result FAIL throughput "$model: $(tail -1 "$work/$model.run")"
    continue
  fi
  measured=$(sed -n 's/^mean step \([0-9.]*\) ms.*/\1/p' "$work/$model.run")
  result PASS throughput "$model on $gpu: $(grep '^mean step' "$work/$model.run")"
  predicted=$("$opt" "$work/$model.mlir" --ppc-attach-machine=machine=dgx-h100 \
    --ppc-simulate="optimizer=adam unassigned=single overlap=false profile=$work/$model.prof.json" \
    -o /dev/null 2>&1 | sed -n 's/^ *iteration time: \([0-9.]*\) ms.*/\1/p')
  if [[ -z $predicted || -z $measured ]]; then
    result FAIL simulator "$model: no prediction or measurement"
    continue
  fi
  verdict=$(python3 -c "import sys; p, m = map(float, sys.argv[1:]); r = p / m; print(('PASS' if abs(r - 1) <= 0.10 else 'FAIL'), f'{r:.3f}')" "$predicted" "$measured")
  result "${verdict% *}" simulator "$model: predicted $predicted ms, measured $measured ms (${verdict#* })"
done

echo
echo "gpu-check on $gpu:"
printf '%s\n' "${summary[@]}"
exit $failed
