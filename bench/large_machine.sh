#!/usr/bin/env bash
# Search and report cost on hundreds of devices: wall time and peak RSS of
# ppc-opt for (1) one-weird-trick on a 4-layer GPT on 512 A100s (one
# simulation), (2) a 5 s MCMC search of a 64-layer GPT (hidden 25,600, the
# 1T GPT's layers) on 512 A100s, (3) the published 1T layout (Korthikanti
# et al. Table 5, SP + selective) with report-dir, whose scaling curve
# searches at every device count from 1 to 512.
# Usage: bench/large_machine.sh [BUILD_DIR]   (after scripts/build.sh)
#   CASES="owt mcmc report" picks cases.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
cases=${CASES:-owt mcmc report}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Runs ppc-opt with the given arguments; prints wall seconds and peak RSS.
measure() {
  python3 - "$build/bin/ppc-opt" "$@" <<'PY'
import resource, subprocess, sys, time
start = time.monotonic()
run = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL,
                     stderr=subprocess.PIPE, text=True)
seconds = time.monotonic() - start
if run.returncode != 0:
    sys.stderr.write(run.stderr)
    sys.exit(run.returncode)
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
print("%.1f s, %.2f GiB peak RSS" % (seconds, rss))
PY
}

gpt() {
  python3 "$root/bench/models.py" gpt --unfused-attention --seq 2048 --vocab 51200 \
    --dropout 0.1 --dtype f16 "$@"
}

echo "| case | devices | wall time and peak memory of ppc-opt |"
echo "|---|---:|---|"
for case in $cases; do
  case $case in
  owt)
    gpt --layers 4 --hidden 2048 --heads 16 --ff 8192 --batch 512 \
      >"$tmp/m.mlir"
    echo "| one-weird-trick, 4-layer GPT h2048 | 512 | $(measure \
      "$tmp/m.mlir" --ppc-attach-machine=machine=dgx-a100x64 \
      --ppc-search="algorithm=one-weird-trick progress=off" -o /dev/null) |"
    ;;
  mcmc)
    gpt --layers 64 --hidden 25600 --heads 160 --ff 102400 --batch 512 \
      >"$tmp/m.mlir"
    echo "| mcmc budget=5s, 64-layer GPT h25600 | 512 | $(measure \
      "$tmp/m.mlir" --ppc-attach-machine=machine=dgx-a100x64 \
      --ppc-search="algorithm=mcmc budget=5s threads=2 progress=off" \
      -o /dev/null) |"
    ;;
  report)
    gpt --layers 128 --hidden 25600 --heads 160 --ff 102400 --batch 512 \
      >"$tmp/m.mlir"
    options="algorithm=megatron tp=8 pp=64 dp=1 microbatches=512"
    options="$options $(sh "$root/bench/megatron_options.sh" sp-selective)"
    echo "| 1T GPT, Megatron TP 8 x PP 64, report-dir | 512 | $(measure \
      "$tmp/m.mlir" --ppc-attach-machine=machine=dgx-a100x64 \
      --ppc-search="$options overlap=false regather-inputs=true optimizer=adam progress=off report-dir=$tmp/report" \
      -o /dev/null) |"
    ;;
  *)
    echo "large_machine.sh: unknown case '$case'" >&2
    exit 1
    ;;
  esac
done
