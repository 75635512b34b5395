#!/usr/bin/env bash
# The front-end acceptance models, end to end on CPUs: each is exported
# from PyTorch (bench/export_torchvision.py: MobileNetV3-small, FCN and
# DeepLabV3 with ResNet-50 at 96x96, an encoder-decoder nn.Transformer, a
# Llama-style GPT with RMSNorm, rotary embeddings, SwiGLU and grouped-query
# attention), imported, searched for cpux2 (MCMC), lowered to a plan and
# trained under `mpirun -np 2` with --verify (the first partitioned step
# against the single-device step: loss, every gradient, every updated
# weight). One line per model: import, search and step times, the verdict.
# Usage: bench/acceptance_models.sh [BUILD_DIR]   (after scripts/build.sh;
#   needs Debian's python3-torch and python3-torchvision)
#   MODELS="llama_lm seq2seq_transformer", BATCH=4, BUDGET=2000 (MCMC
#   iterations), MODELS_DIR=/tmp/ppc-acceptance (exports are kept there)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
models=${MODELS:-"mobilenet_v3_small fcn_resnet50 deeplabv3_resnet50 seq2seq_transformer llama_lm"}
batch=${BATCH:-4}
budget=${BUDGET:-2000}
dir=${MODELS_DIR:-/tmp/ppc-acceptance}
mkdir -p "$dir"
mpirun=(mpirun -np 2)
[[ $(id -u) == 0 ]] && mpirun+=(--allow-run-as-root)
# shellcheck disable=SC2086
/usr/bin/python3 "$root/bench/export_torchvision.py" "$dir" $models >"$dir/export.log" 2>&1 ||
  echo "acceptance: some exports failed (see $dir/export.log)" >&2
# --verify's tolerance per model (empty: ppc-run's default, 1e-4 of a
# tensor's largest value). The ResNet-50 backbones' float32 round-off grows
# through 50 layers of batch norm at batch 4 to 1.5e-4 (FCN) and 5.7e-4
# (DeepLabV3, whose ASPP pooling branch normalizes over 4 values) of the
# largest value of conv1's and layer1's gradients, smoothly with depth
# (docs/onnx-coverage.md).
tolerance_of() {
  case $1 in
  fcn_resnet50 | deeplabv3_resnet50) echo 1e-3 ;;
  esac
}
seconds() { printf '%d.%01ds' $(($1 / 1000)) $((($1 % 1000) / 100)); }
failed=0
printf '%-22s %-8s %-8s %-10s %s\n' model import search step verdict
for model in $models; do
  work="$dir/$model"
  mkdir -p "$work"
  t0=$(date +%s%3N)
  if ! "$build/bin/ppc-opt" "$dir/$model.onnx" --batch-size="$batch" -o "$work/model.mlir" 2>"$work/import.err"; then
    printf '%-22s %s\n' "$model" "IMPORT FAILED: $(head -2 "$work/import.err" | tail -1)"
    failed=1
    continue
  fi
  t1=$(date +%s%3N)
  if ! "$build/bin/ppc-opt" "$dir/$model.onnx" --batch-size="$batch" \
    --ppc-auto-parallel="machine=cpux2 search=mcmc budget=$budget threads=1 optimizer=adam report-dir=$work/report plan=$work/plan.pb" \
    -o /dev/null 2>"$work/search.err"; then
    printf '%-22s %s\n' "$model" "SEARCH/LOWERING FAILED: $(head -1 "$work/search.err")"
    failed=1
    continue
  fi
  t2=$(date +%s%3N)
  verdict=passed
  tolerance=$(tolerance_of "$model")
  (cd "$work" && "${mpirun[@]}" "$build/bin/ppc-run" plan.pb --steps 2 --batches 1 \
    --verify ${tolerance:+--verify-tolerance "$tolerance"} >"$work/run.log" 2>&1) ||
    { verdict="FAILED (see $work/run.log)"; failed=1; }
  [[ -n $tolerance ]] && verdict="$verdict (tolerance $tolerance)"
  step=$(grep -o '^step 2/2 .* ms' "$work/run.log" | awk '{print $(NF-1)}' || true)
  printf '%-22s %-8s %-8s %-10s %s\n' "$model" \
    "$(seconds $((t1 - t0)))" "$(seconds $((t2 - t1)))" "${step:-?} ms" \
    "verify $verdict"
done
exit $failed
