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
#      f32, the GPT in bf16, the GPT with fused causal attention and
#      dropout in f32 and bf16, a 2-layer BERT with fused attention that is
#      not causal in bf16, at 1 rank and at 2 ranks (on one GPU the
#      two ranks share it and exchange through host memory);
#   5. libraries: GEMM and convolution kernels as a training step runs them
#      (ppc-profile of the plans' kernels) against cuBLAS and cuDNN alone at
#      the same shapes, types and math (ppc-library-peak); the acceptance is
#      >= 90%;
#   6. throughput: ResNet-50 (batch 32 and 256, 224x224) and a GPT (12 layers,
#      hidden 768, 12 heads, sequence 1024, vocabulary 50304, batch 8; fused
#      causal attention, and unfused) on one GPU, bf16, steps of ppc-run
#      with their launches per step and model FLOPs utilization; then the
#      GPT's step in PyTorch on the same GPU (bench/gpu_microbench.py
#      --sections step, where python3 has PyTorch with CUDA): the
#      acceptance is ppc-run's step <= PyTorch eager with autocast, SDPA
#      and fused Adam; and torchvision's ResNet-50 at both batch sizes
#      (--sections resnet_step): ppc-run's step <= PyTorch eager
#      channels-last with autocast (KIT/results/vs-pytorch.txt has every
#      ratio);
#   7. simulator: each of 6's steps predicted from a ppc-profile profile of
#      its kernels against the step ppc-run measured (acceptance: 10%).
# Usage:
#   scripts/gpu-check.sh [BUILD_DIR]
#       on a machine with a GPU and ppc's build dependencies: 1 to 7;
#   scripts/gpu-check.sh --pack KIT [BUILD_DIR]
#       on the build host: the plans 2 to 6 run (ppc-opt makes them), the
#       binaries they run and the shared libraries those load (glibc's and
#       CUDA's aside; Open MPI relocatable) into the folder KIT;
#   scripts/gpu-check.sh --kit KIT
#       from a checkout on a GPU host without ppc's build dependencies: 2 to
#       6 with the kit's binaries and plans; the measurements go to
#       KIT/results, every command's output to KIT/results/logs;
#   scripts/gpu-check.sh --simulate KIT [BUILD_DIR]
#       back on the build host: 7 from the kit's measurements.
# On the GPU the checks run in the order 2, 6, 5, 4, 3 (figures first), each
# command under a time limit (a hang fails its check, not the run).
# GPU_CHECK_QUICK=1: small models in 6 and 7, for a first look. In 5, a
# kernel the library runs in under 50 us is shown, not judged: it times a
# launch, not a library's throughput.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=full kit=
case ${1:-} in
--pack | --kit | --simulate)
  mode=${1#--}
  kit=${2:?"gpu-check.sh $1: name the kit folder"}
  mkdir -p "$kit" && kit=$(cd "$kit" && pwd)
  shift 2
  ;;
esac
build=${1:-${PPC_BUILD_DIR:-$root/build}}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpirun=(mpirun --oversubscribe)
[[ $(id -u) == 0 ]] && mpirun+=(--allow-run-as-root)
opt=$build/bin/ppc-opt run=$build/bin/ppc-run prof=$build/bin/ppc-profile
peak=$build/bin/ppc-library-peak kernels=$build/test/unit/CudaBackendTest
plans=$work/plans results=$work/results logs=$work/results/logs
device=H100-SXM5-80GB # the dgx-h100 preset's device, simulated in 7
failed=0
summary=()
result() { # STATUS NAME DETAIL
  summary+=("$(printf '%-5s %-12s %s' "$1" "$2" "$3")")
  echo "== $1 $2: $3"
  [[ $1 == FAIL ]] && failed=1
  return 0
}
finish() {
  echo
  echo "gpu-check ($mode)${gpu:+ on $gpu}:"
  printf '%s\n' "${summary[@]}"
  exit $failed
}
verifyCases=(mlp cnn transformer gpt4 gpt4-bf16 gpt4-attn gpt4-attn-bf16 bert2-attn-bf16)
# The node tests need onnx and numpy: Debian's python3 where the one on PATH
# lacks them (docs/onnx-node-tests.md).
nodePython=python3
python3 -c 'import numpy, onnx' 2>/dev/null || nodePython=/usr/bin/python3
# The GPT of 6 as PyTorch runs it (bench/gpu_microbench.py --sections step):
# layers,hidden,heads,seq,vocab,batch.
gptShape=12,768,12,1024,50304,8
# ResNet-50's batch sizes in 6 (ppc-run and PyTorch): small,large.
resnetBatches=32,256
if [[ ${GPU_CHECK_QUICK:-0} == 1 ]]; then
  gptShape=2,256,4,128,1000,4
  resnetBatches=4,8
fi

# The plans of 4 and 6 (ppc-opt): PLANS/NAME-npR.pb and PLANS/{resnet,gpt}.pb.
makePlans() {
  mkdir -p "$plans"
  python3 "$root/bench/models.py" gpt --layers 4 --unfused-attention --hidden 64 --heads 4 \
    --seq 32 --vocab 200 --batch 8 >"$plans/gpt4.mlir"
  # Fused causal attention with dropout on its probabilities.
  python3 "$root/bench/models.py" gpt --layers 4 --hidden 64 --heads 4 \
    --seq 32 --vocab 200 --batch 8 --dropout 0.1 >"$plans/gpt4-attn.mlir"
  # Fused attention that is not causal (an encoder), heads of 16 over two
  # tiles of keys, with dropout.
  python3 "$root/bench/models.py" bert --layers 2 --hidden 64 --heads 4 \
    --seq 80 --vocab 200 --batch 4 --dropout 0.1 --loss ce >"$plans/bert2-attn.mlir"
  local ranks name machine
  for ranks in 1 2; do
    machine=cpu
    [[ $ranks -gt 1 ]] && machine=cpux$ranks
    for name in "${verifyCases[@]}"; do
      local model=$root/examples/$name.onnx dtype=f32 args=()
      case $name in
      mlp | cnn) args=(--batch-size=16) ;;
      transformer) args=(--batch-size=8) ;;
      gpt4) model=$plans/gpt4.mlir ;;
      gpt4-bf16) model=$plans/gpt4.mlir dtype=bf16 ;;
      gpt4-attn) model=$plans/gpt4-attn.mlir ;;
      gpt4-attn-bf16) model=$plans/gpt4-attn.mlir dtype=bf16 ;;
      bert2-attn-bf16) model=$plans/bert2-attn.mlir dtype=bf16 ;;
      esac
      "$opt" "$model" "${args[@]}" --ppc-auto-parallel="machine=$machine search=mcmc budget=200 dtype=$dtype optimizer=adam plan=$plans/$name-np$ranks.pb" \
        -o /dev/null >"$work/$name-np$ranks.opt" 2>&1 ||
        result FAIL plans "$name-np$ranks: $(tail -1 "$work/$name-np$ranks.opt")"
    done
  done
  # ResNet-50 at the two batch sizes PyTorch runs beside it.
  python3 "$root/bench/models.py" resnet50 --batch "${resnetBatches%,*}" \
    --dtype bf16 >"$plans/resnet.mlir"
  python3 "$root/bench/models.py" resnet50 --batch "${resnetBatches#*,}" \
    --dtype bf16 >"$plans/resnet-large.mlir"
  # The GPT with fused causal attention (the default), and with attention as
  # matmul, softmax, matmul (the graph PyTorch's bf16 variant runs).
  local layers hidden heads seq vocab batch
  IFS=, read -r layers hidden heads seq vocab batch <<<"$gptShape"
  local shape=(--layers "$layers" --hidden "$hidden" --heads "$heads"
    --seq "$seq" --vocab "$vocab" --batch "$batch" --dtype bf16 --loss ce)
  python3 "$root/bench/models.py" gpt "${shape[@]}" >"$plans/gpt.mlir"
  python3 "$root/bench/models.py" gpt --unfused-attention "${shape[@]}" \
    >"$plans/gpt-unfused.mlir"
  local model
  for model in resnet resnet-large gpt gpt-unfused; do
    "$opt" "$plans/$model.mlir" --ppc-auto-parallel="machine=cpu search=data-parallel optimizer=adam plan=$plans/$model.pb" \
      -o /dev/null >"$work/$model.opt" 2>&1 ||
      result FAIL plans "$model: $(tail -1 "$work/$model.opt")"
  done
}

# Before anything else where the checks run: a GPU, or exit 2.
requireGpu() {
  if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu-check.sh: no GPU visible (nvidia-smi -L failed): run it on a" \
      "machine with an NVIDIA GPU" >&2
    exit 2
  fi
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  echo "GPU: $gpu ($(nvidia-smi -L | wc -l) visible)"
}

# The GPT's attention as batch,heads,seq,head_dim.
gptAttentionShape() {
  local layers hidden heads seq vocab batch
  IFS=, read -r layers hidden heads seq vocab batch <<<"$gptShape"
  echo "$batch,$heads,$seq,$((hidden / heads))"
}

# PyTorch brings its own cuDNN and refuses an older one found first on the
# kit's library path (--kit): its programs run as "${pythonEnv[@]}" python3,
# with the library path the script started with.
pythonEnv=(env -u LD_LIBRARY_PATH)
[[ -n ${LD_LIBRARY_PATH:-} ]] && pythonEnv=(env "LD_LIBRARY_PATH=$LD_LIBRARY_PATH")

# Every command on the GPU runs under a time limit, so that one that hangs
# costs its own check, not the run: `limited SECONDS COMMAND...` (exit 124
# when it ran out).
limited() {
  local seconds=$1
  shift
  timeout --kill-after=10 "$seconds" "$@"
}

# 2 to 6 on the GPU, from $plans; measurements into $results, every
# command's output into $results/logs. The figures come first (kernels,
# throughput, PyTorch, profiles, libraries), the longer correctness sweeps
# after (verify, node tests), so a run cut short still has its numbers.
gpuChecks() {
  mkdir -p "$results" "$logs"
  echo "$gpu" >"$results/gpu.txt"
  checkKernels
  checkThroughput
  pytorchStep
  breakdown
  profileModels
  checkLibraries
  checkVerify
  checkNodeTests
}

# 2. kernels against the cpu backend
checkKernels() {
  if limited 300 "$kernels" --gtest_brief=1 >"$logs/kernels.log" 2>&1 &&
    ! grep -q SKIPPED "$logs/kernels.log"; then
    result PASS kernels "$(grep -o '[0-9]* tests from' "$logs/kernels.log" | head -1 | cut -d' ' -f1) tests"
  else
    grep -E 'Failure|FAILED|SKIPPED|differ' "$logs/kernels.log" | head -20
    tail -3 "$logs/kernels.log"
    result FAIL kernels "$kernels (log above)"
  fi
}

# 3. ONNX node tests: lowered here, or by --pack where ppc-opt is.
checkNodeTests() {
  local nodeArgs=()
  if [[ -d $plans/node-plans ]]; then
    nodeArgs=(--plans "$plans/node-plans" --data "$plans/node-data")
  elif [[ -d /usr/share/libonnx-testdata/data/node ]]; then
    nodeArgs=(--ppc-opt "$opt")
  fi
  if [[ ${#nodeArgs[@]} -eq 0 ]]; then
    result SKIP node-tests "no /usr/share/libonnx-testdata (apt-get install libonnx-testdata)"
  elif limited 400 "$nodePython" "$root/test/onnx-node/run_node_tests.py" "${nodeArgs[@]}" \
    --ppc-run "$run" --backend cuda --jobs 8 \
    --check-list "$root/docs/onnx-node-tests.md" >"$logs/node.log" 2>&1; then
    result PASS node-tests "$(tail -1 "$logs/node.log")"
  else
    tail -15 "$logs/node.log"
    result FAIL node-tests "$(tail -1 "$logs/node.log")"
  fi
}

# 4. --verify against the cpu backend
checkVerify() {
  local ranks name
  for ranks in 1 2; do
    for name in "${verifyCases[@]}"; do
      name=$name-np$ranks
      [[ -f $plans/$name.pb ]] || continue
      local launch=("$run")
      [[ $ranks -gt 1 ]] && launch=("${mpirun[@]}" -np "$ranks" "$run")
      if limited 120 "${launch[@]}" "$plans/$name.pb" --backend cuda --steps 3 --verify \
        --verify-backend cpu >"$logs/$name.log" 2>&1; then
        result PASS verify "$name: $(grep -m1 'verify' "$logs/$name.log")"
      else
        tail -8 "$logs/$name.log"
        result FAIL verify "$name (log above)"
      fi
    done
  done
}

# Profiles of 6's models (read by 5 and 7).
profileModels() {
  local model
  for model in resnet gpt; do
    [[ -f $plans/$model.pb ]] || continue
    limited 180 "$prof" "$plans/$model.pb" -o "$results/$model.prof.json" --backend cuda \
      --device-name "$device" --details "$results/$model.details.json" --quiet \
      >"$logs/$model.prof.log" 2>&1 ||
      result FAIL profile "$model: $(tail -1 "$logs/$model.prof.log")"
  done
}

# 5. GEMM and convolution against the libraries alone
checkLibraries() {
  limited 120 python3 - "$results" "$peak" >"$results/libraries.txt" 2>&1 <<'PY'
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
# Fused attention against PyTorch's on the same shape (pytorchStep's
# attention section): shown, not judged (the step's ratio is the acceptance).
try:
    torch_rows = json.load(open(f"{work}/pytorch-step.json"))["attention"]
    kernels = json.load(open(f"{work}/gpt.details.json"))["kernels"]
    ppc = next(k for k in kernels if k["op"] == "ppc.attention")
    for r in torch_rows:
        if "forward_s" not in r:
            continue
        fwd = r["forward_s"] / ppc["forward_seconds"]
        bwd = r["backward_s"] / ppc.get("backward_seconds", float("nan"))
        print(f"ppc.attention {ppc['name']} {ppc['operand_shapes'][0]}: forward"
              f" {ppc['forward_seconds']*1e3:.3f} ms, backward"
              f" {ppc.get('backward_seconds', 0)*1e3:.3f} ms; PyTorch"
              f" {r['backend'].lower()} {r['forward_s']*1e3:.3f} and"
              f" {r['backward_s']*1e3:.3f} ms: {100*fwd:.0f}% and {100*bwd:.0f}%"
              " (shown, not judged)")
except (OSError, KeyError, StopIteration, TypeError):
    pass
print(f"worst: {100*worst:.0f}%" if worst is not None else "worst: none measured")
PY
  cat "$results/libraries.txt"
  local worst
  worst=$(sed -n 's/^worst: \([0-9]*\)%.*/\1/p' "$results/libraries.txt")
  if [[ -z $worst ]]; then
    result FAIL libraries "nothing measured"
  elif ((worst >= 90)); then
    result PASS libraries "every GEMM/conv at >= 90% of the library's own time ($worst% worst)"
  else
    result FAIL libraries "worst kernel at $worst% of the library's own speed (< 90%)"
  fi
}

# 6. throughput
checkThroughput() {
  local model
  for model in resnet resnet-large gpt gpt-unfused; do
    [[ -f $plans/$model.pb ]] || continue
    if ! limited 180 "$run" "$plans/$model.pb" --backend cuda --steps 10 >"$results/$model.run" 2>&1; then
      result FAIL throughput "$model: $(tail -1 "$results/$model.run")"
      continue
    fi
    result PASS throughput "$model on $gpu: $(grep '^mean step' "$results/$model.run"); $(grep '^launches per step' "$results/$model.run" | cut -d' ' -f4) launches; $(grep -o '[0-9.]*% of' "$results/$model.run" | cut -d' ' -f1) MFU"
  done
}

# Where 6's steps spend their time: ppc-run --profile (every kernel waited
# for, so each is charged its own work and the executor's around it), summed
# per op kind and phase over a step: KIT/results/MODEL.breakdown.txt.
breakdown() {
  local model steps=4
  for model in gpt resnet; do
    [[ -f $plans/$model.pb ]] || continue
    if ! limited 180 "$run" "$plans/$model.pb" --backend cuda --steps $steps \
      --profile "$results/$model.steps.json" --profile-device "$device" \
      >"$logs/$model.steps.log" 2>&1; then
      result FAIL breakdown "$model: $(tail -1 "$logs/$model.steps.log")"
      continue
    fi
    python3 - "$results/$model.steps.json" $((steps - 1)) \
      >"$results/$model.breakdown.txt" <<'PY'
import collections, json, sys
entries = json.load(open(sys.argv[1]))["entries"]
steps = int(sys.argv[2])
total = collections.Counter()
count = collections.Counter()
for e in entries:
    key = (e["op"], e["phase"])
    total[key] += e["seconds"] * e["runs"] / steps
    count[key] += e["runs"] / steps
whole = sum(total.values())
print(f"kernels, each waited for: {whole * 1e3:.1f} ms a step")
for (op, phase), t in total.most_common(25):
    print(f"{op:28s} {phase:9s} {count[(op, phase)]:6.0f} a step"
          f" {t * 1e3:8.2f} ms {100 * t / whole:5.1f}%")
PY
    result PASS breakdown "$model: $(head -1 "$results/$model.breakdown.txt") ($results/$model.breakdown.txt)"
  done
}

# 6b. The steps of 6 in PyTorch on the same GPU right after ppc-run's
# (bench/gpu_microbench.py --sections step,resnet_step): ppc-run's
# fused-attention GPT against autocast + scaled_dot_product_attention +
# fused Adam (the acceptance: ratio <= 1.0) and torch.compile of it, its
# unfused GPT against the same graph with bf16 weights; ResNet-50 at both
# batch sizes against torchvision's eager channels-last with autocast (the
# acceptance: ratio <= 1.0), with bf16 weights, and torch.compile at the
# smaller. GPU_CHECK_PYTORCH=0 skips it; GPU_CHECK_PYTORCH_SECTIONS=step
# runs the GPT's alone (about 40 s of the 3 to 4 minutes).
pytorchStep() {
  if [[ ${GPU_CHECK_PYTORCH:-1} == 0 ]]; then
    result SKIP pytorch "GPU_CHECK_PYTORCH=0"
    return
  fi
  if ! "${pythonEnv[@]}" python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    result SKIP pytorch "no PyTorch with CUDA for python3 here"
    return
  fi
  limited 420 "${pythonEnv[@]}" python3 "$root/bench/gpu_microbench.py" \
    --sections "${GPU_CHECK_PYTORCH_SECTIONS:-step,resnet_step,attention}" \
    --step-shape "$gptShape" --resnet-batches "$resnetBatches" \
    --attention-shape "$(gptAttentionShape)" \
    --out "$results/pytorch-step.json" >"$logs/pytorch.log" 2>&1 ||
    { tail -5 "$logs/pytorch.log"; result FAIL pytorch "gpu_microbench.py failed"; return; }
  python3 - "$results" <<'PY'
import json, re, sys
results = sys.argv[1]
def ppc_ms(model):
    try:
        text = open(f"{results}/{model}.run").read()
    except OSError:
        return None
    m = re.search(r"^mean step ([0-9.]+) ms", text, re.M)
    return float(m.group(1)) if m else None
measured = json.load(open(f"{results}/pytorch-step.json"))
step = measured.get("step", {})
resnet = measured.get("resnet_step", {})
# (ppc-run's model, PyTorch's variant, its batch or None, samples a step, unit)
rows = []
if "variants" in step:
    tokens = step["batch"] * step["seq"]
    torch_ms = {(v["variant"], None): v.get("step_s") for v in step["variants"]}
    rows += [("gpt", "autocast-sdpa", None, tokens, "tokens"),
             ("gpt", "compile-sdpa", None, tokens, "tokens"),
             ("gpt-unfused", "bf16-matmul-attention", None, tokens, "tokens")]
else:
    torch_ms = {}
for v in resnet.get("variants", []):
    torch_ms[(v["variant"], v["batch"])] = v.get("step_s")
batches = sorted({v["batch"] for v in resnet.get("variants", [])})
for model, batch in zip(("resnet", "resnet-large"), batches):
    for variant in ("autocast-channels-last", "bf16-channels-last",
                    "compile-autocast-channels-last"):
        if (variant, batch) in torch_ms:
            rows.append((model, variant, batch, batch, "images"))
out = open(f"{results}/vs-pytorch.txt", "w")
for model, variant, batch, samples, unit in rows:
    ppc, ref = ppc_ms(model), torch_ms.get((variant, batch))
    name = f"{model} vs {variant}" + (f" (batch {batch})" if batch else "")
    if ppc is None or ref is None:
        print(f"{name}: not measured", file=out)
        continue
    ref *= 1e3
    print(f"{name}: ppc-run {ppc:.1f} ms ({samples / ppc * 1e3:.0f} {unit}/s),"
          f" PyTorch {ref:.1f} ms ({samples / ref * 1e3:.0f} {unit}/s): {ppc / ref:.2f}x",
          file=out)
PY
  cat "$results/vs-pytorch.txt"
  # Acceptance: the fused GPT at most PyTorch eager with SDPA (issue 37),
  # ResNet-50 at most eager channels-last autocast at both batch sizes
  # (issue 38).
  local pattern what line ratio
  for pattern in '^gpt vs autocast-sdpa:' '^resnet vs autocast-channels-last ' \
    '^resnet-large vs autocast-channels-last '; do
    line=$(grep "$pattern" "$results/vs-pytorch.txt")
    what=${pattern#^}
    what=${what%%:*}
    ratio=$(sed -n 's/.*: \([0-9.]*\)x$/\1/p' <<<"$line")
    if [[ -z $ratio ]]; then
      result FAIL pytorch "no ratio for ${what% } ($line)"
    elif python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) <= 1.0 else 1)" "$ratio"; then
      result PASS pytorch "${line%%:*}: ${ratio}x (acceptance <= 1.0)"
    else
      result FAIL pytorch "${line%%:*}: ${ratio}x (acceptance <= 1.0)"
    fi
  done
}

# 7. the simulator, from the profiles, against the measured steps
simulate() {
  local model measured predicted verdict
  for model in resnet gpt; do
    measured=$(sed -n 's/^mean step \([0-9.]*\) ms.*/\1/p' "$results/$model.run" 2>/dev/null)
    predicted=$("$opt" "$plans/$model.mlir" --ppc-attach-machine=machine=dgx-h100 \
      --ppc-simulate="optimizer=adam unassigned=single overlap=false profile=$results/$model.prof.json" \
      -o /dev/null 2>&1 | sed -n 's/^ *iteration time: \([0-9.]*\) ms.*/\1/p')
    if [[ -z $predicted || -z $measured ]]; then
      result FAIL simulator "$model: no prediction or measurement"
      continue
    fi
    verdict=$(python3 -c "import sys; p, m = map(float, sys.argv[1:]); r = p / m; print(('PASS' if abs(r - 1) <= 0.10 else 'FAIL'), f'{r:.3f}')" "$predicted" "$measured")
    result "${verdict% *}" simulator "$model: predicted $predicted ms, measured $measured ms (${verdict#* })"
  done
}

# The kit's binaries and the libraries they load: everything but glibc's
# and CUDA's (the GPU host has its own), Open MPI with its plugins in its
# own layout (OPAL_PREFIX relocates it).
packBinaries() {
  mkdir -p "$kit/bin" "$kit/lib" "$kit/root"
  local f
  for f in "$run" "$prof" "$peak" "$kernels"; do
    [[ -x $f ]] || { result FAIL pack "$f is missing (a build with the cuda backend?)"; return; }
    strip -o "$kit/bin/$(basename "$f")" "$f"
  done
  local p
  for p in libopenmpi3 openmpi-bin openmpi-common libpmix2; do
    dpkg -L "$p" 2>/dev/null | grep -v '/share/doc\|/share/man\|/include/\|\.a$\|java' |
      while read -r f; do
        [[ -f $f || -L $f ]] || continue
        mkdir -p "$kit/root$(dirname "$f")" && cp -a "$f" "$kit/root$f"
      done
  done
  local mpi=(/usr/bin/orterun /usr/bin/orted)
  mapfile -t -O ${#mpi[@]} mpi < <(find /usr/lib/x86_64-linux-gnu/openmpi/lib \
    /usr/lib/x86_64-linux-gnu/pmix2 -name '*.so' 2>/dev/null)
  ldd "$kit"/bin/* "${mpi[@]}" 2>/dev/null | awk '/=> \//{print $3}' | sort -u |
    while read -r f; do
      case $(basename "$f") in
      libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | ld-linux* | \
        libcuda* | libcublas* | libcudnn* | libnccl* | libnvidia*) continue ;;
      esac
      [[ $f == */cuda* ]] || cp -L "$f" "$kit/lib/"
    done
  result PASS pack "$(du -sh "$kit" | cut -f1) in $kit"
}

# On a GPU host: the kit's binaries, loading the kit's libraries.
useKit() {
  [[ -d $kit/bin && -d $kit/plans ]] ||
    { echo "gpu-check.sh --kit: $kit holds no kit (make one with --pack)" >&2; exit 2; }
  plans=$kit/plans results=$kit/results logs=$kit/results/logs
  run=$kit/bin/ppc-run prof=$kit/bin/ppc-profile peak=$kit/bin/ppc-library-peak
  kernels=$kit/bin/CudaBackendTest
  local r=$kit/root/usr cudaDirs l
  cudaDirs=$(for l in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2; do
    find ${CUDA_HOME:-/usr/local/cuda} /usr/local/cuda* /usr/lib /opt -name "$l" 2>/dev/null | head -1 | xargs -r dirname
  done | awk '!seen[$0]++' | paste -sd:)
  export OPAL_PREFIX=$r PMIX_INSTALL_PREFIX=$r/lib/x86_64-linux-gnu/pmix2
  export LD_LIBRARY_PATH=$kit/lib:$r/lib/x86_64-linux-gnu/openmpi/lib:$cudaDirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PATH=$r/bin:$PATH
  export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_mca_base_component_show_load_errors=0 \
    OMPI_MCA_btl_vader_single_copy_mechanism=none
  mpirun=("$r/bin/orterun" --oversubscribe -x LD_LIBRARY_PATH -x PATH)
  [[ $(id -u) == 0 ]] && mpirun+=(--allow-run-as-root)
}

case $mode in
full)
  requireGpu
  # 1. build
  if bash "$root/scripts/build.sh" >"$work/build.log" 2>&1 &&
    "$run" --help | grep -q 'backends: .*cuda'; then
    result PASS build "cuda backend built ($build)"
  else
    tail -20 "$work/build.log"
    result FAIL build "no cuda backend in $build (nvcc, cuBLAS, cuDNN, NCCL?)"
    finish
  fi
  makePlans
  gpuChecks
  simulate
  ;;
pack)
  plans=$kit/plans
  rm -rf "$plans" && makePlans
  if [[ -d /usr/share/libonnx-testdata/data/node ]]; then
    cp -r /usr/share/libonnx-testdata/data/node "$plans/node-data"
    "$nodePython" "$root/test/onnx-node/run_node_tests.py" --ppc-opt "$opt" \
      --ppc-run "$run" --save-plans "$plans/node-plans" --jobs "$(nproc)" \
      >"$work/node.log" 2>&1 ||
      result FAIL node-plans "$(tail -1 "$work/node.log")"
  fi
  packBinaries
  echo "Next, on the GPU host: scripts/gpu-check.sh --kit KIT (a checkout of" \
    "this commit beside the kit); then here: scripts/gpu-check.sh --simulate KIT"
  ;;
kit)
  requireGpu
  useKit
  gpuChecks
  echo "Next, on the build host: scripts/gpu-check.sh --simulate KIT (check 7)"
  ;;
simulate)
  plans=$kit/plans results=$kit/results
  gpu=$(cat "$results/gpu.txt" 2>/dev/null)
  simulate
  ;;
esac
finish
