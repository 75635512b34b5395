#!/bin/sh
# --overlap starts the gradient all-reduces during the backward (the trace
# shows them there) and trains exactly as without: the same losses, on the
# example CNN data parallel over NP ranks.
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
echo "overlap passed"
