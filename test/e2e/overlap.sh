#!/bin/sh
# --overlap starts the gradient all-reduces during the backward (the trace
# shows them there) and trains exactly as without: the same losses, on the
# example CNN data parallel over NP ranks; and so for ZeRO-2's gradient
# reduce-scatters.
# usage: overlap.sh PPC_OPT EXAMPLES WORKDIR NP RUN...
#        (RUN... starts ppc-run on NP ranks)
set -e
ppc_opt=$1 examples=$2 work=$3 np=$4
shift 4
rm -rf "$work"
mkdir -p "$work"
"$ppc_opt" "$examples/cnn.onnx" --batch-size=8 \
  --ppc-auto-parallel="machine=cpux$np search=data-parallel optimizer=adam plan=$work/plan.pb" \
  -o /dev/null
"$@" "$work/plan.pb" --steps 4 --quiet --log "$work/plain.jsonl"
"$@" "$work/plan.pb" --steps 4 --quiet --overlap --log "$work/overlap.jsonl" \
  --trace "$work/trace.json"
losses() { sed -E 's/.*"loss": ([^,]*),.*/\1/' "$1"; }
losses "$work/plain.jsonl" > "$work/plain.txt"
losses "$work/overlap.jsonl" > "$work/overlap.txt"
cat "$work/overlap.txt"
cmp "$work/plain.txt" "$work/overlap.txt"
grep -q 'all_reduce .* (started early)' "$work/trace.json"

# ZeRO-2: the gradients reduce-scatter into each rank's shard.
here=$(dirname "$0")
"$ppc_opt" "$examples/cnn.onnx" --batch-size=8 \
  --ppc-auto-parallel="machine=cpux$np search=data-parallel strategy-out=$work/dp.json" \
  -o /dev/null
python3 "$here/make_strategy.py" --kind zero2 "$work/dp.json" "$work/zero2.json"
"$ppc_opt" "$examples/cnn.onnx" --batch-size=8 \
  --ppc-auto-parallel="machine=cpux$np strategy-in=$work/zero2.json optimizer=adam plan=$work/zero2.pb" \
  -o /dev/null
"$@" "$work/zero2.pb" --steps 4 --quiet --log "$work/zero2-plain.jsonl"
"$@" "$work/zero2.pb" --steps 4 --quiet --overlap \
  --log "$work/zero2-overlap.jsonl" --trace "$work/zero2-trace.json"
losses "$work/zero2-plain.jsonl" > "$work/zero2-plain.txt"
losses "$work/zero2-overlap.jsonl" > "$work/zero2-overlap.txt"
cat "$work/zero2-overlap.txt"
cmp "$work/zero2-plain.txt" "$work/zero2-overlap.txt"
grep -q 'reduce_scatter .* (started early)' "$work/zero2-trace.json"
echo "overlap passed"
