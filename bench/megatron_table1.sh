#!/usr/bin/env bash
# Megatron-LM's published GPT runs, simulated as published: Narayanan et
# al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
# Megatron-LM", SC21, Table 1 (A100-80GB DGX nodes, fp16 with Adam, full
# activation recomputation, sequence 2048, vocabulary 51,200). Each row runs
# ppc-search algorithm=megatron with the row's TP x PP x DP, micro-batch
# size 1 (micro-batches = batch / DP) and recompute=full on dgx-a100xN, and
# prints the predicted iteration time against the published one. The
# published time is the paper's FLOP count, 96 B s l h^2 (1 + s/6h +
# V/16lh) (recomputation included), over its TFLOP/s per GPU times the GPUs;
# the predicted TFLOP/s use the same count.
# Usage: bench/megatron_table1.sh [BUILD_DIR]   (after scripts/build.sh)
#   ROWS="1.7b 3.6b" picks rows (default: every row up to MAX_GPUS, 1536).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
max_gpus=${MAX_GPUS:-1536}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# name heads hidden layers tp pp gpus batch published-TFLOP/s-per-GPU
table="1.7b 24 2304 24 1 1 32 512 137
3.6b 32 3072 30 2 1 64 512 138
7.5b 32 4096 36 4 1 128 512 142
18.4b 48 6144 40 8 1 256 1024 135
39.1b 64 8192 48 8 2 512 1536 138
76.1b 80 10240 60 8 4 1024 1792 140
145.6b 96 12288 80 8 8 1536 2304 148
310.1b 128 16384 96 8 16 1920 2160 155
529.6b 128 20480 105 8 35 2520 2520 163
1008b 160 25600 128 8 64 3072 3072 163"

echo "| model | TP x PP x DP | GPUs | batch | published TFLOP/s per GPU | published s | predicted s | predicted TFLOP/s per GPU | predicted / published time |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
while read -r name heads hidden layers tp pp gpus batch tflops; do
  if [ -n "${ROWS:-}" ]; then
    case " $ROWS " in *" $name "*) ;; *) continue ;; esac
  elif [ "$gpus" -gt "$max_gpus" ]; then
    continue
  fi
  dp=$((gpus / (tp * pp)))
  model="$tmp/gpt-$name.mlir"
  python3 "$root/bench/models.py" gpt --layers "$layers" --hidden "$hidden" \
    --heads "$heads" --ff $((4 * hidden)) --seq 2048 --vocab 51200 --dropout 0.1 \
    --batch "$batch" \
    --dtype f16 > "$model"
  "$build/bin/ppc-opt" "$model" \
    --ppc-attach-machine=machine="dgx-a100x$((gpus / 8))" \
    --ppc-search="algorithm=megatron tp=$tp pp=$pp dp=$dp microbatches=$((batch / dp)) recompute=full optimizer=adam progress=off" \
    -o /dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
  predicted=$(sed -nE 's/^ppc-search @main: .*: ([0-9.]+) ms per iteration predicted.*/\1/p' "$tmp/err")
  [ -n "$predicted" ] || predicted=OOM
  python3 - "$name" "$tp" "$pp" "$dp" "$gpus" "$batch" "$tflops" "$heads" \
    "$hidden" "$layers" "$predicted" <<'PY'
import sys
name, tp, pp, dp, gpus, batch, tflops, heads, h, l, predicted = sys.argv[1:]
gpus, batch, h, l = int(gpus), int(batch), int(h), int(l)
s, v = 2048, 51200
flops = 96 * batch * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))
published = flops / (float(tflops) * 1e12 * gpus)
if predicted == "OOM":
    cells = ["OOM", "-", "-"]
else:
    t = float(predicted) / 1e3
    cells = ["%.3f" % t, "%.0f" % (flops / t / gpus / 1e12),
             "%.2f" % (t / published)]
print("| %s | %s x %s x %s | %d | %d | %s | %.3f | %s |" %
      (name, tp, pp, dp, gpus, batch, tflops, published, " | ".join(cells)))
PY
done <<<"$table"
