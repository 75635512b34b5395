#!/bin/sh
# ppc-calibrate under mpirun writes a machine whose links carry the curves it
# measured (messages whole and the sender's part, collectives), with cores_per_node where ranks outnumber the cores; the
# simulator reads it and predicts a step with a profile of the same plan.
# usage: calibrate.sh WORKDIR PPC_OPT EXAMPLES MPIRUN...   (MPIRUN... starts
#        a program on N ranks, e.g. "mpirun -np 2"; N >= 2)
set -e
work=$1 ppc_opt=$2 examples=$3
shift 3
bin=$(dirname "$ppc_opt")
rm -rf "$work"
mkdir -p "$work"
"$@" "$bin/ppc-calibrate" -o "$work/m.json" --seconds 0.002 \
  --max-size 65536 > "$work/calibrate.log"
cat "$work/calibrate.log"
grep -q "^point to point, within a host (ranks 0 and 1), one way, and the sender's part:" "$work/calibrate.log"
grep -q '^ *65536 B: .* GB/s *sender *[0-9.]* us$' "$work/calibrate.log"
grep -q '^collectives, within each host' "$work/calibrate.log"
grep -q '"bandwidth_by_size"' "$work/m.json"
grep -q '"collective_bandwidth_by_size"' "$work/m.json"
grep -q '"send_bandwidth_by_size"' "$work/m.json"
# One core for all ranks: they take turns.
"$@" "$bin/ppc-calibrate" -o "$work/one-core.json" --seconds 0.002 \
  --max-size 4096 --cores 1 --quiet
grep -q '"cores_per_node": 1' "$work/one-core.json"
# A plan, its profile, and the simulation with both.
"$ppc_opt" "$examples/mlp.onnx" --batch-size=12 \
  --ppc-auto-parallel="machine=$work/m.json search=data-parallel optimizer=adam profile= overlap=false strategy-out=$work/s.json plan=$work/plan.pb" \
  -o /dev/null
"$@" "$bin/ppc-run" "$work/plan.pb" --steps 3 --quiet --profile "$work/prof.json"
# A second run adds to the file: every kernel now counts more runs.
runs() { sed -n 's/.*"runs": *\([0-9]*\).*/\1/p' "$1" | head -1; }
before=$(runs "$work/prof.json")
"$@" "$bin/ppc-run" "$work/plan.pb" --steps 3 --quiet --profile "$work/prof.json"
after=$(runs "$work/prof.json")
[ "$after" -gt "$before" ]
# A profile of another device is not overwritten.
if "$@" "$bin/ppc-run" "$work/plan.pb" --steps 2 --quiet --profile "$work/prof.json" \
    --profile-device other-cpu > "$work/other.log" 2>&1; then
  echo "a profile of another device was overwritten"; exit 1
fi
grep -q "measures device 'cpu-epyc-2core', not 'other-cpu'" "$work/other.log"
"$ppc_opt" "$examples/mlp.onnx" --batch-size=12 --ppc-add-loss \
  --ppc-attach-machine=machine="$work/m.json" \
  --ppc-import-strategy=file="$work/s.json" \
  --ppc-simulate="optimizer=adam overlap=false profile=$work/prof.json" \
  -o /dev/null > "$work/sim.log" 2>&1
cat "$work/sim.log"
grep -q 'kernels measured, 0 from the roofline model' "$work/sim.log"
grep -q 'gradient sync: all-reduce after backward' "$work/sim.log"
echo "calibrate passed"
