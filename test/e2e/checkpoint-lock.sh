#!/bin/sh
# Two jobs never share a checkpoint directory: while one trains with
# --checkpoint DIR, a second job writing or resuming DIR is refused with the
# holder's pid, and the lock ends with its holder (killed here). A run
# resuming a checkpoint another run wrote (another seed) is refused unless
# --resume-other-run; the run that wrote it resumes it.
# usage: checkpoint-lock.sh WORKDIR PLAN RUN...   (RUN... starts ppc-run)
set -e
work=$1
plan=$2
shift 2
rm -rf "$work"
mkdir -p "$work"
cd "$work"

"$@" "$plan" --steps 100000000 --quiet --checkpoint shared --seed 1 \
  > first.txt 2>&1 &
first=$!
# Until the first job holds the lock (its LOCK names its pid).
tries=0
until grep -q "^pid " shared/LOCK 2>/dev/null; do
  tries=$((tries + 1))
  if [ $tries -gt 300 ]; then
    cat first.txt
    kill $first
    echo "checkpoint-lock.sh: the first job never took the lock"
    exit 1
  fi
  sleep 0.1
done
for second in "--checkpoint shared" "--resume shared"; do
  if "$@" "$plan" --steps 2 --quiet --seed 2 $second > second.txt 2>&1; then
    kill $first
    echo "checkpoint-lock.sh: a second job ran with $second"
    exit 1
  fi
  grep -q "checkpoint directory 'shared' is in use by another run (pid [0-9]* on .*): give each job its own directory" \
    second.txt || { cat second.txt; kill $first; exit 1; }
done
kill $first
wait $first || true
# Its lock ended with it.
"$@" "$plan" --steps 2 --quiet --checkpoint shared --seed 2 > third.txt 2>&1 ||
  { cat third.txt; exit 1; }

# A checkpoint records the run that wrote it.
"$@" "$plan" --steps 3 --quiet --checkpoint own --seed 1
if "$@" "$plan" --steps 1 --quiet --resume own --seed 2 > other.txt 2>&1; then
  echo "checkpoint-lock.sh: another run's checkpoint was resumed"
  exit 1
fi
grep -q "was written by another run (seed=1 .*), not this one (seed=2 .*): resume it anyway with --resume-other-run" \
  other.txt || { cat other.txt; exit 1; }
"$@" "$plan" --steps 1 --quiet --resume own --seed 2 --resume-other-run
"$@" "$plan" --steps 1 --quiet --resume own --seed 1 --checkpoint own
echo "checkpoint lock passed"
