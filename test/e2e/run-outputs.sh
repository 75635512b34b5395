#!/bin/sh
# --trace, --log, --save-outputs and --profile of a 3-step run write what
# they promise (the profile in the simulator's format).
# usage: run-outputs.sh WORKDIR PLAN COMMAND...   (COMMAND... starts ppc-run)
set -e
work=$1
plan=$2
shift 2
rm -rf "$work"
mkdir -p "$work"
"$@" "$plan" --steps 3 --trace "$work/trace.json" --log "$work/log.jsonl" \
  --save-outputs "$work/out" --profile "$work/profile.json"
# Valid JSON, with kernels (tid 0) and communication (tid 1) on both ranks.
python3 - "$work/trace.json" <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
tracks = {(e["pid"], e["tid"]) for e in events if e["ph"] == "X"}
for track in [(0, 0), (0, 1), (1, 0), (1, 1)]:
    if track not in tracks:
        sys.exit("no events of rank %d thread %d in the trace" % track)
PY
test "$(wc -l < "$work/log.jsonl")" -eq 3
grep -q '^{"step": 3, "loss": [-0-9.e]*, "time_ms": ' "$work/log.jsonl"
test -s "$work/out/output_0_loss.npy"
grep -q '"version": 1' "$work/profile.json"
grep -q '"phase":"backward","operand_shapes":\[\[' "$work/profile.json"
echo "trace, log and outputs written"
