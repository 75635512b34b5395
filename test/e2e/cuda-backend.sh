#!/bin/sh
# ppc-run --backend cuda: with a GPU, a data-parallel step on 2 ranks
# checked against the cpu backend's single-device step (--verify-backend
# cpu); without one, every rank says so and the job ends with status 1,
# before any rank waits on another.
# usage: cuda-backend.sh WORKDIR PLAN RUN...   (RUN... starts ppc-run)
work=$1 plan=$2
shift 2
rm -rf "$work"
mkdir -p "$work"
"$@" "$plan" --backend cuda --steps 2 --verify --verify-backend cpu \
  >"$work/out.txt" 2>&1
status=$?
if grep -q 'backend cuda: no GPU visible' "$work/out.txt"; then
  test $status -ne 0 || { echo "no GPU, yet status 0" >&2; exit 1; }
  test "$(grep -c 'backend cuda: no GPU visible' "$work/out.txt")" -eq 2 ||
    { cat "$work/out.txt"; echo "expected one line per rank" >&2; exit 1; }
  echo "cuda backend: no GPU here, refused cleanly"
  exit 0
fi
cat "$work/out.txt"
test $status -eq 0 && grep -q 'verify passed' "$work/out.txt" &&
  echo "cuda backend: verify passed against the cpu backend"
