#!/bin/sh
# A run killed at any filesystem step of writing a checkpoint leaves the
# previous complete checkpoint or the new one, on every rank.
#   The start: checkpoints of steps 1 and 2. For k = 1, 2, ... every rank is
#   killed at its k-th filesystem step (write, fsync, rename, directory
#   creation or removal; PPC_CKPT_FAIL_AT=k PPC_CKPT_FAIL_MODE=exit) while
#   resuming for step 3 and checkpointing it (which also deletes step 1's);
#   then LATEST must name step 2's or step 3's checkpoint, bit-identical to
#   an uninterrupted run's, and resuming from it must work. The loop ends
#   when k is past the last filesystem step (the run succeeds).
# usage: checkpoint-faults.sh WORKDIR PLAN COMMAND...   (COMMAND... starts
#        ppc-run, e.g. "mpirun -np 2 ppc-run")
set -e
work=$1
plan=$2
shift 2
rm -rf "$work"
mkdir -p "$work"
"$@" "$plan" --steps 3 --checkpoint "$work/straight" --checkpoint-every 1 \
  --keep-checkpoints 3 --quiet
"$@" "$plan" --steps 2 --checkpoint "$work/start" --checkpoint-every 1 --quiet
k=1
while :; do
  rm -rf "$work/run"
  cp -r "$work/start" "$work/run"
  status=0
  PPC_CKPT_FAIL_AT=$k PPC_CKPT_FAIL_MODE=exit "$@" "$plan" --steps 1 \
    --resume "$work/run" --checkpoint "$work/run" --quiet \
    > "$work/killed.log" 2>&1 || status=$?
  if [ "$status" -eq 0 ]; then
    break
  fi
  if ! grep -q "injected fault: killed at checkpoint filesystem step $k " \
      "$work/killed.log"; then
    cat "$work/killed.log"
    echo "checkpoint-faults.sh: step $k: the run failed without the fault"
    exit 1
  fi
  latest=$(sed -n 's/^latest //p' "$work/run/LATEST")
  case "$latest" in
  step-000000002 | step-000000003) ;;
  *)
    echo "checkpoint-faults.sh: step $k: LATEST names '$latest'"
    exit 1
    ;;
  esac
  for f in "$work/straight/$latest"/*; do
    cmp "$f" "$work/run/$latest/$(basename "$f")"
  done
  "$@" "$plan" --steps 1 --resume "$work/run" --quiet
  echo "killed at filesystem step $k: resumes from $latest"
  k=$((k + 1))
done
if [ "$k" -lt 10 ]; then
  echo "checkpoint-faults.sh: only $((k - 1)) filesystem steps"
  exit 1
fi
echo "every fault left a complete checkpoint ($((k - 1)) filesystem steps)"
