#!/bin/sh
# --overlap starts the gradient all-reduces during the backward (the trace
# shows them there) and trains exactly as without: the same losses, on the
# example CNN data parallel over NP ranks; and so for ZeRO-2's gradient
# reduce-scatters and ZeRO-3's weight all-gathers (prefetched one layer
# ahead).
# usage: overlap.sh PPC_OPT EXAMPLES WORKDIR NP RUN...
#        (RUN... starts ppc-run on NP ranks)
set -e
ppc_opt=$1 examples=$2 work=$3 np=$4
shift 4
here=$(dirname "$0")
rm -rf "$work"
mkdir -p "$work"
losses() { sed -E 's/.*"loss": ([^,]*),.*/\1/' "$1"; }
# same_losses NAME KIND RUN...: NAME.pb trains the same with and without
# --overlap, and the trace shows a KIND started early.
same_losses() {
  name=$1 kind=$2
  shift 2
  "$@" "$work/$name.pb" --steps 4 --quiet --log "$work/$name-plain.jsonl"
  "$@" "$work/$name.pb" --steps 4 --quiet --overlap \
    --log "$work/$name-overlap.jsonl" --trace "$work/$name-trace.json"
  losses "$work/$name-plain.jsonl" > "$work/$name-plain.txt"
  losses "$work/$name-overlap.jsonl" > "$work/$name-overlap.txt"
  cat "$work/$name-overlap.txt"
  cmp "$work/$name-plain.txt" "$work/$name-overlap.txt"
  grep -q "$kind .* (started early)" "$work/$name-trace.json" ||
    { echo "$name: no $kind started early"; exit 1; }
}

"$ppc_opt" "$examples/cnn.onnx" --batch-size=8 \
  --ppc-auto-parallel="machine=cpux$np search=data-parallel optimizer=adam plan=$work/dp.pb strategy-out=$work/dp.json" \
  -o /dev/null
same_losses dp all_reduce "$@"

for stage in 2 3; do
  python3 "$here/make_strategy.py" --kind zero$stage "$work/dp.json" \
    "$work/zero$stage.json"
  "$ppc_opt" "$examples/cnn.onnx" --batch-size=8 \
    --ppc-auto-parallel="machine=cpux$np strategy-in=$work/zero$stage.json optimizer=adam plan=$work/zero$stage.pb" \
    -o /dev/null
done
same_losses zero2 reduce_scatter "$@"
same_losses zero3 all_gather "$@"
echo "overlap passed"
