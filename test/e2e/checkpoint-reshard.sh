#!/bin/sh
# A checkpoint resumes under any plan and rank count: a 4-layer GPT trains 6
# steps on 4 ranks (FROM: megatron, tensor x data; or zero3, ZeRO-3 state),
# and from its checkpoint of step 3 it continues for 3 steps on 2 ranks
# under a searched layout, on 3 ranks as a 3-stage pipeline and on 1 rank;
# every continued loss must match the uninterrupted run's to the round-off
# of the different partitioning (float32: 1e-5 relative; bf16, whose
# activations round differently per layout: 2e-2).
# usage: checkpoint-reshard.sh PPC_OPT WORKDIR DTYPE FROM MPIRUN...
#        (MPIRUN... starts a job without its rank count, e.g. "mpirun
#        --oversubscribe"; ppc-run is next to PPC_OPT)
set -e
ppc_opt=$1 work=$2 dtype=$3 from=$4
shift 4
here=$(dirname "$0")
bin=$(dirname "$ppc_opt")
rm -rf "$work"
mkdir -p "$work"
python3 "$here/../../bench/models.py" gpt --unfused-attention --layers 4 \
  --hidden 32 --heads 4 --seq 16 --vocab 100 --batch 8 > "$work/gpt4.mlir"
common="optimizer=adam lr=0.01 dtype=$dtype"
plan() { # NAME NP OPTIONS...: a plan for cpuxNP
  name=$1 np=$2
  shift 2
  "$ppc_opt" "$work/gpt4.mlir" \
    --ppc-auto-parallel="machine=cpux$np $common $* plan=$work/$name.pb" \
    -o /dev/null
}
strategy() { # KIND NP: make_strategy.py's KIND from data parallel on cpuxNP
  "$ppc_opt" "$work/gpt4.mlir" --ppc-auto-parallel="machine=cpux$2 \
search=data-parallel dtype=$dtype strategy-out=$work/dp$2.json" -o /dev/null
  python3 "$here/make_strategy.py" --kind "$1" "$work/dp$2.json" \
    "$work/$1-$2.json"
  echo "strategy-in=$work/$1-$2.json"
}
case $from in
megatron) plan from 4 search=megatron tp=2 ;;
zero3) plan from 4 "$(strategy zero3 4)" ;;
*) echo "unknown FROM '$from'" >&2; exit 2 ;;
esac
plan searched 2 search=mcmc budget=100 seed=1 threads=1
plan pipeline 3 "$(strategy pp3-1f1b 3)"
plan one 1 search=data-parallel

"$@" -np 4 "$bin/ppc-run" "$work/from.pb" --steps 6 --log "$work/full.jsonl" \
  --quiet
"$@" -np 4 "$bin/ppc-run" "$work/from.pb" --steps 3 --checkpoint "$work/ckpt" \
  --quiet
for case in searched:2 pipeline:3 one:1; do
  name=${case%:*} np=${case#*:}
  "$@" -np "$np" "$bin/ppc-run" "$work/$name.pb" --steps 3 \
    --resume "$work/ckpt" --log "$work/$name.jsonl" > "$work/$name.log"
  grep "under another plan" "$work/$name.log"
done
python3 - "$work" "$dtype" <<'PY'
import json, sys
work, dtype = sys.argv[1], sys.argv[2]
tolerance = 1e-5 if dtype == "f32" else 2e-2
def losses(name):
    return {r["step"]: r["loss"] for r in map(json.loads, open(f"{work}/{name}.jsonl"))}
full = losses("full")
for name in ("searched", "pipeline", "one"):
    resumed = losses(name)
    if sorted(resumed) != [4, 5, 6]:
        sys.exit(f"{name}: steps {sorted(resumed)}, expected 4, 5, 6")
    for step, loss in sorted(resumed.items()):
        error = abs(loss - full[step]) / abs(full[step])
        print(f"{name}: step {step} loss {loss:.8f}, uninterrupted "
              f"{full[step]:.8f}, relative {error:.1e}")
        if not error <= tolerance:
            sys.exit(f"{name}: step {step} is off by {error:.1e} "
                     f"(tolerance {tolerance:.0e})")
PY
echo "checkpoint reshard passed: $dtype from $from"
