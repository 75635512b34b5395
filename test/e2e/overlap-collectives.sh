#!/bin/sh
# --overlap starts every kind of collective early (all-gather and
# reduce-scatter with packed pieces, all-to-all, all-reduce, broadcast) when
# work lies before it, and moves the same data: the spaced data-movement
# plan's output after 3 steps (the first runs in place, the others started)
# equals the plain run's byte for byte, and the trace shows each kind started.
# usage: overlap-collectives.sh PLAN WORKDIR RUN...
#        (RUN... starts ppc-run on the plan's ranks)
set -e
plan=$1 work=$2
shift 2
rm -rf "$work"
mkdir -p "$work"
"$@" "$plan" --steps 3 --quiet --save-outputs "$work/plain"
"$@" "$plan" --steps 3 --quiet --overlap --save-outputs "$work/overlap" \
  --trace "$work/trace.json"
for f in "$work"/plain/*.npy; do
  cmp "$f" "$work/overlap/$(basename "$f")"
done
for kind in all_gather reduce_scatter all_to_all all_reduce broadcast; do
  grep -q "\"$kind x (started early)\"" "$work/trace.json" ||
    { echo "no $kind started early in the trace"; exit 1; }
done
echo "overlap-collectives passed"
