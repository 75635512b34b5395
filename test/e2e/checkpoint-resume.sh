#!/bin/sh
# 4 steps in one run, and 2 steps then 2 more with --resume, must leave
# bit-identical checkpoints.
# usage: checkpoint-resume.sh WORKDIR PLAN COMMAND...   (COMMAND... starts
#        ppc-run, e.g. "mpirun -np 2 ppc-run")
set -e
work=$1
plan=$2
shift 2
rm -rf "$work"
mkdir -p "$work"
"$@" "$plan" --steps 4 --checkpoint "$work/straight" --quiet
"$@" "$plan" --steps 2 --checkpoint "$work/half" --quiet
"$@" "$plan" --steps 2 --resume "$work/half" --checkpoint "$work/resumed" \
  --checkpoint-every 1 > "$work/resumed.log"
cat "$work/resumed.log"
grep -q '^step 3/4 ' "$work/resumed.log"
grep -q '^step 4/4 ' "$work/resumed.log"
cmp "$work/straight/LATEST" "$work/resumed/LATEST"
latest=$(sed -n 's/^latest //p' "$work/straight/LATEST")
for f in "$work/straight/$latest"/rank-*.ckpt "$work/straight/$latest/COMPLETE"; do
  cmp "$f" "$work/resumed/$latest/$(basename "$f")"
done
echo "checkpoints identical"
