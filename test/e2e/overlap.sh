#!/bin/sh
# --overlap starts the gradient all-reduces during the backward (the trace
# shows them there) and trains exactly as without: the same losses.
# usage: overlap.sh WORKDIR PLAN RUN...   (RUN... starts ppc-run)
set -e
work=$1 plan=$2
shift 2
rm -rf "$work"
mkdir -p "$work"
"$@" "$plan" --steps 4 --quiet --log "$work/plain.jsonl"
"$@" "$plan" --steps 4 --quiet --overlap --log "$work/overlap.jsonl" \
  --trace "$work/trace.json"
losses() { sed -E 's/.*"loss": ([^,]*),.*/\1/' "$1"; }
losses "$work/plain.jsonl" > "$work/plain.txt"
losses "$work/overlap.jsonl" > "$work/overlap.txt"
cat "$work/overlap.txt"
cmp "$work/plain.txt" "$work/overlap.txt"
grep -q 'all_reduce .* (started early)' "$work/trace.json"
echo "overlap passed"
