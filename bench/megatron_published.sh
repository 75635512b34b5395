#!/usr/bin/env bash
# Published Megatron-LM GPT runs, simulated as published: each row builds
# the row's GPT (bench/models.py, Megatron-LM's dropouts and 4h feed-
# forward) and runs ppc-search algorithm=megatron with the row's layout on
# the row's DGX preset, then prints predicted against published. One
# calibration for every row (the presets' GEMM model and NCCL curves);
# nothing is fitted per row. Suites (SUITES, default all three):
#   sc21  Narayanan et al., SC21, Table 1: A100-80GB, fp16, Adam, full
#         recomputation, sequence 2048, vocabulary 51,200, micro-batch 1
#         (not stated). Published TFLOP/s per GPU count 96 B s l h^2 (1 +
#         s/6h + V/16lh) FLOPs (recomputation included); the published
#         time is that over the TFLOP/s and GPUs.
#   sar   Korthikanti et al., "Reducing Activation Recomputation in Large
#         Transformer Models" (arXiv 2205.05198), Table 5: A100-80GB,
#         sequence 2048, vocabulary 51,200, TP 8, no data parallelism;
#         full recomputation, and "present work" = sequence parallelism +
#         selective recomputation; 175B and 530B interleaved (3 virtual
#         stages). Published iteration times in seconds.
#   h100  NVIDIA/Megatron-LM's README weak-scaling table (images/
#         model_table.png, commit f2e5db402c44, Megatron-Core r0.8.0):
#         H100, sequence 4096, vocabulary 131,072, TFLOP/s per GPU over 72
#         B s l h^2 (1 + s/6h + V/12lh) model FLOPs. Precision and micro-
#         batch size are not stated: bf16 (their MFU is the TFLOP/s over
#         bf16's 989) and micro-batch 1; the README's flags overlap
#         gradient reduction and parameter gathers (distributed optimizer),
#         so distributed-optimizer and sequence-parallel with selective
#         recomputation, the same for every row. Megatron-Core runs
#         attention as Transformer Engine's fused (cuDNN) kernel: the
#         rows' GPT has one causal ppc.attention per layer, which the H100
#         preset rates as cuDNN's kernel measured on an H100
#         (docs/simulator.md, "Measured on an H100").
#   alpa  Alpa's published GPT measurement with a stated layout (alpa-
#         projects/alpa, benchmark/alpa/README.md, "Expected output on AWS
#         p3.16xlarge (10/17/2022)"): 2.6B GPT, sequence 1024, vocabulary
#         51,200, batch 32 in 4 micro-batches, DP 2 x OP 2 x PP 2 on one
#         p3.16xlarge (8 V100-16GB), fp16, Adam with fp32 master weights,
#         rematerialization, gradients reduce-scattered (its
#         prefer_reduce_scatter: a sharded optimizer state), no dropout
#         (deterministic). Mean iteration time 2.464 s. The figure 7 rows
#         of the paper (arXiv 2201.12023) are bars without their layouts.
# Usage: bench/megatron_published.sh [BUILD_DIR]   (after scripts/build.sh)
#   SUITES="sar h100", ROWS="sc21/1.7b sar/22b-full" pick rows (default:
#   every row up to MAX_GPUS, 1536). MBS=N runs every picked row at
#   micro-batch N instead of its own (what an unstated micro-batch size
#   would change; not the published setting).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
max_gpus=${MAX_GPUS:-1536}
suites=${SUITES:-sc21 sar h100 alpa}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# suite/name heads hidden layers seq vocab tp pp vstages gpus batch mbs
#   gpu dtype layout-words published (TFLOP/s per GPU, or "Ns" seconds)
table="sc21/1.7b 24 2304 24 2048 51200 1 1 1 32 512 1 a100 f16 full 137
sc21/3.6b 32 3072 30 2048 51200 2 1 1 64 512 1 a100 f16 full 138
sc21/7.5b 32 4096 36 2048 51200 4 1 1 128 512 1 a100 f16 full 142
sc21/18.4b 48 6144 40 2048 51200 8 1 1 256 1024 1 a100 f16 full 135
sc21/39.1b 64 8192 48 2048 51200 8 2 1 512 1536 1 a100 f16 full 138
sc21/76.1b 80 10240 60 2048 51200 8 4 1 1024 1792 1 a100 f16 full 140
sc21/145.6b 96 12288 80 2048 51200 8 8 1 1536 2304 1 a100 f16 full 148
sc21/310.1b 128 16384 96 2048 51200 8 16 1 1920 2160 1 a100 f16 full 155
sc21/529.6b 128 20480 105 2048 51200 8 35 1 2520 2520 1 a100 f16 full 163
sc21/1008b 160 25600 128 2048 51200 8 64 1 3072 3072 1 a100 f16 full 163
sar/22b-full 64 6144 48 2048 51200 8 1 1 8 4 4 a100 f16 full 1.42s
sar/22b-sp-selective 64 6144 48 2048 51200 8 1 1 8 4 4 a100 f16 sp-selective 1.10s
sar/175b-full 96 12288 96 2048 51200 8 8 3 64 64 1 a100 f16 full 18.13s
sar/175b-sp-selective 96 12288 96 2048 51200 8 8 3 64 64 1 a100 f16 sp-selective 13.75s
sar/530b-full 128 20480 105 2048 51200 8 35 3 280 280 1 a100 f16 full 49.05s
sar/530b-sp-selective 128 20480 105 2048 51200 8 35 3 280 280 1 a100 f16 sp-selective 37.83s
sar/1t-full 160 25600 128 2048 51200 8 64 1 512 512 1 a100 f16 full 94.42s
sar/1t-sp-selective 160 25600 128 2048 51200 8 64 1 512 512 1 a100 f16 sp-selective 71.49s
h100/1.7b 16 2048 24 4096 131072 1 1 1 48 192 1 h100 bf16 distopt-selective 408.8
h100/7.1b 32 4096 30 4096 131072 2 1 1 96 192 1 h100 bf16 sp-distopt-selective 465.9
h100/16b 48 6144 32 4096 131072 4 1 1 192 192 1 h100 bf16 sp-distopt-selective 489.1
h100/32b 56 7168 48 4096 131072 8 1 1 384 192 1 h100 bf16 sp-distopt-selective 459.6
h100/70b 64 8192 84 4096 131072 8 2 1 768 384 1 h100 bf16 sp-distopt-selective 419.7
h100/119b 80 10240 92 4096 131072 8 4 1 1536 768 1 h100 bf16 sp-distopt-selective 420.5
h100/177b 96 12288 96 4096 131072 8 6 1 2304 1152 1 h100 bf16 sp-distopt-selective 432.8
h100/314b 128 16384 96 4096 131072 8 8 1 3072 1536 1 h100 bf16 sp-distopt-selective 474.4
h100/462b 144 18432 112 4096 131072 8 16 1 6144 3072 1 h100 bf16 sp-distopt-selective 459.9
alpa/2.6b 32 2560 32 1024 51200 2 2 1 8 32 4 v100 f16 distopt-full 2.464s"

echo "| row | TP x PP x DP | GPUs | batch | layout | published s | predicted s | published TFLOP/s per GPU | predicted TFLOP/s per GPU | predicted / published time |"
echo "|---|---|---:|---:|---|---:|---:|---:|---:|---:|"
while read -r row heads hidden layers seq vocab tp pp vstages gpus batch mbs \
  gpu dtype words published; do
  suite=${row%%/*}
  if [ -n "${ROWS:-}" ]; then
    case " $ROWS " in *" $row "*) ;; *) continue ;; esac
  else
    case " $suites " in *" $suite "*) ;; *) continue ;; esac
    [ "$gpus" -gt "$max_gpus" ] && continue
  fi
  mbs=${MBS:-$mbs}
  dp=$((gpus / (tp * pp)))
  microbatches=$((batch / (dp * mbs)))
  model="$tmp/gpt.mlir"
  # Every GPT projects q, k and v with one linear layer, as Megatron-LM's
  # query_key_value and Alpa's combined projection do: one gather and one
  # gradient reduction per layer under tensor parallelism, not three.
  # Every run ends in Megatron-LM's vocabulary-parallel cross-entropy of
  # the logits cast to fp32 (its default without --fp16-lm-cross-entropy).
  # The H100 runs' Megatron-Core (r0.8, Transformer Engine) runs attention
  # as one fused kernel; the A100 papers' Megatron-LM materialized the
  # scores (with a fused scale-mask-softmax).
  # Its README also overlaps the parameter gathers of the distributed
  # optimizer with the next forward (--overlap-param-gather) and the
  # tensor-parallel communication with the linear layers
  # (--tp-comm-overlap); Megatron-Core syncs gradients in buckets of
  # max(40M, 1M x DP) elements, in fp32 for bf16 runs (its arguments.py
  # forces --accumulate-allreduce-grads-in-fp32 with --bf16).
  # The A100 papers' Megatron-LM all-reduced gradients after the backward
  # (its local DDP; --overlap-grad-reduce came with Megatron-Core).
  fused=--unfused-attention overlap="overlap=false"
  if [ "$suite" = h100 ]; then
    # With the head transposes around it, as the table in simulator.md was
    # made (layout bshd: "Attention layout" there).
    fused="--fused-attention --attention-layout bhsd"
    overlap="overlap-param-gather=true tp-comm-overlap=true fp32-gradients=true grad-bucket-bytes=$((4 * 1000000 * (gpus / (tp * pp) > 40 ? gpus / (tp * pp) : 40)))"
  fi
  # Megatron-LM's sequence parallelism keeps the linear layers' inputs
  # sharded and gathers them again in backward (Korthikanti et al. 2022).
  case "-$words-" in *-sp-*) overlap="$overlap regather-inputs=true" ;; esac
  dropout=0.1 machine="dgx-${gpu}x$(((gpus + 7) / 8))"
  if [ "$suite" = alpa ]; then
    dropout=0 machine="p3.16xlargex$(((gpus + 7) / 8))"
  fi
  python3 "$root/bench/models.py" gpt $fused --fused-qkv --layers "$layers" --hidden "$hidden" \
    --heads "$heads" --ff $((4 * hidden)) --seq "$seq" --vocab "$vocab" \
    --dropout "$dropout" --batch "$batch" --dtype "$dtype" --loss ce-f32 >"$model"
  options="tp=$tp pp=$pp dp=$dp microbatches=$microbatches"
  [ "$vstages" -gt 1 ] && options="$options virtual-stages=$vstages"
  options="$options $(sh "$root/bench/megatron_options.sh" "$words")"
  "$build/bin/ppc-opt" "$model" \
    --ppc-attach-machine=machine="$machine" \
    --ppc-search="algorithm=megatron $options $overlap optimizer=adam progress=off" \
    -o /dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
  predicted=$(sed -nE 's/^ppc-search @main: .*: ([0-9.]+) ms per iteration predicted.*/\1/p' "$tmp/err")
  [ -n "$predicted" ] || predicted=OOM
  python3 - "$row" "$suite" "$tp" "$pp" "$dp" "$gpus" "$batch" "$words" \
    "$heads" "$hidden" "$layers" "$seq" "$vocab" "$published" \
    "$predicted" <<'PY'
import sys
(row, suite, tp, pp, dp, gpus, batch, words, heads, h, l, s, v, published,
 predicted) = sys.argv[1:]
gpus, batch, h, l, s, v = map(int, (gpus, batch, h, l, s, v))
if suite == "sc21":
    # The paper's count, recomputation's extra forward included.
    flops = 96 * batch * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))
elif suite == "alpa":
    # Alpa's compute_gpt_tflops with rematerialization (benchmark/alpa/
    # util.py): the logits' forward and backward, not recomputed.
    flops = (96 * batch * s * l * h * h * (1 + s / (6 * h)) +
             6 * batch * s * h * v)
else:
    # Model FLOPs (forward and backward, no recomputation).
    flops = 72 * batch * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h))
if published.endswith("s"):
    seconds = float(published[:-1])
    tflops = flops / seconds / gpus / 1e12
else:
    tflops = float(published)
    seconds = flops / (tflops * 1e12 * gpus)
if predicted == "OOM":
    cells = ["OOM", "%.0f" % tflops, "-", "-"]
else:
    t = float(predicted) / 1e3
    cells = ["%.3f" % t, "%.0f" % tflops, "%.0f" % (flops / t / gpus / 1e12),
             "%.3f" % (t / seconds)]
print("| %s | %s x %s x %s | %d | %d | %s | %.3f | %s |" %
      (row, tp, pp, dp, gpus, batch, words, seconds, " | ".join(cells)))
PY
done <<<"$table"
