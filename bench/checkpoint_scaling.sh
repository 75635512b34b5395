#!/bin/sh
# Checkpoint size and write time per rank against the rank's share: a GPT
# (bench/models.py, 4 layers, hidden 256, vocab 4096, batch 8, Adam) under
# ZeRO-3 (weights and optimizer state sharded over the ranks) and under
# data parallel (replicated) on 1, 2 and 4 ranks: the largest rank file,
# and the step time with a checkpoint after every step against without,
# side by side in one run (the difference is the write, fsyncs included).
# usage: bench/checkpoint_scaling.sh [BUILD_DIR] [STEPS]
set -e
build=${1:-build}
steps=${2:-20}
here=$(dirname "$0")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$here/models.py" gpt --unfused-attention --layers 4 --hidden 256 \
  --heads 4 --seq 32 --vocab 4096 --batch 8 > "$work/gpt.mlir"
mean_ms() { # LOG: mean step ms, first step excluded
  python3 - "$1" <<'PY'
import json, sys
times = [json.loads(l)["time_ms"] for l in open(sys.argv[1])][1:]
print(f"{sum(times) / len(times):.2f}")
PY
}
printf "%-6s %5s %14s %12s %12s %10s\n" layout ranks "largest file" "step ms" \
  "with ckpt" "write ms"
for kind in zero3 dp; do
  for np in 1 2 4; do
    "$build/bin/ppc-opt" "$work/gpt.mlir" --ppc-auto-parallel="machine=cpux$np \
search=data-parallel strategy-out=$work/dp.json" -o /dev/null 2>/dev/null
    python3 "$here/../test/e2e/make_strategy.py" --kind "$kind" \
      "$work/dp.json" "$work/s.json"
    "$build/bin/ppc-opt" "$work/gpt.mlir" --ppc-auto-parallel="machine=cpux$np \
strategy-in=$work/s.json optimizer=adam plan=$work/p.pb" -o /dev/null 2>/dev/null
    run="mpirun --allow-run-as-root --oversubscribe -np $np $build/bin/ppc-run $work/p.pb --steps $steps --quiet"
    rm -rf "$work/ckpt"
    $run --log "$work/plain.jsonl"
    $run --log "$work/ckpt.jsonl" --checkpoint "$work/ckpt" --checkpoint-every 1
    largest=$(ls -l "$work"/ckpt/step-*/rank-*.ckpt | awk '{print $5}' | sort -n | tail -1)
    plain=$(mean_ms "$work/plain.jsonl")
    with=$(mean_ms "$work/ckpt.jsonl")
    printf "%-6s %5d %14s %12s %12s %10s\n" "$kind" "$np" \
      "$(python3 -c "print(f'{$largest/2**20:.2f} MiB')")" "$plain" "$with" \
      "$(python3 -c "print(f'{$with-$plain:.2f}')")"
  done
done
