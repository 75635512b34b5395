#!/bin/sh
# ppc-elastic: the example MLP trains 200 steps on 4 ranks with a
# checkpoint after every step; the first job's ranks die while writing one
# (the checkpoint fault injection, PPC_CKPT_FAIL_AT, ends them as a kill
# would); the launcher re-plans for 3 ranks, resumes the newest checkpoint
# under the new plan, printing the time from the failure to the next step
# (under 30 s); then the devices "return" (SIGUSR1) and it grows back to 4
# ranks and finishes. The final weights (ppc-checkpoint export) must match
# an uninterrupted 4-rank run's (ppc-run --export-onnx) to float32
# round-off of the different partitionings. Each checkpoint waits 10 ms
# (PPC_CKPT_DELAY_MS) so that the 3-rank job still trains when the signal
# comes (its 200 steps take well under the 0.1 s this script polls at
# otherwise).
# usage: elastic.sh PPC_OPT EXAMPLES WORKDIR MPIRUN...  (ppc-run,
#        ppc-elastic and ppc-checkpoint are next to PPC_OPT)
set -e
ppc_opt=$1 examples=$2 work=$3
shift 3
bin=$(dirname "$ppc_opt")
rm -rf "$work"
mkdir -p "$work"
model=$examples/mlp.onnx
search="search=data-parallel optimizer=adam lr=0.01"
steps=200
PPC_CKPT_DELAY_MS=10 PPC_CKPT_FAIL_AT=60 PPC_CKPT_FAIL_MODE=exit \
  "$bin/ppc-elastic" "$model" \
  --batch-size 8 --ranks 4 --steps $steps --checkpoint "$work/ckpt" \
  --machine cpux4 --auto-parallel "$search" --mpirun "$*" \
  > "$work/elastic.log" 2>&1 &
launcher=$!
# Once it trains on 3 ranks, the devices "return": SIGUSR1.
for i in $(seq 600); do
  grep -q "recovered on 3 ranks" "$work/elastic.log" && break
  kill -0 $launcher 2>/dev/null || break
  sleep 0.1
done
kill -USR1 $launcher
wait $launcher || { cat "$work/elastic.log"; exit 1; }
grep -v '^step ' "$work/elastic.log"
grep -q "the job on 4 ranks failed" "$work/elastic.log"
grep -q "under another plan" "$work/elastic.log"
grep -q "devices returned: the job on 3 ranks stopped" "$work/elastic.log"
grep -q "$steps steps done on 4 ranks" "$work/elastic.log"
# On 3 ranks, the first 3 devices of --machine.
grep -q '"nodes": 1' "$work/ckpt.plans/machine-3.json"
grep -q '"devices_per_node": 3' "$work/ckpt.plans/machine-3.json"
seconds=$(sed -n 's/^ppc-elastic: recovered on 3 ranks: \([0-9.e+-]*\) s.*/\1/p' \
  "$work/elastic.log")
echo "recovered in $seconds s"
python3 -c "import sys; sys.exit(0 if float('$seconds') < 30 else 1)"

"$bin/ppc-checkpoint" export "$work/ckpt" "$model=$work/elastic.onnx"
"$@" -np 4 "$bin/ppc-run" "$work/ckpt.plans/ranks-4.pb" --steps $steps \
  --export-onnx "$model=$work/straight.onnx" --quiet
${PPC_SYSTEM_PYTHON:-/usr/bin/python3} - "$work" <<'PY'
import sys
import numpy as np
import onnx
from onnx import numpy_helper
work = sys.argv[1]
def weights(name):
    model = onnx.load(f"{work}/{name}.onnx")
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
a, b = weights("elastic"), weights("straight")
worst = 0.0
for name in b:
    scale = float(np.abs(b[name]).max()) or 1.0
    worst = max(worst, float(np.abs(a[name] - b[name]).max()) / scale)
print(f"final weights: worst difference {worst:.1e} of the largest value")
if not worst < 1e-4:
    sys.exit("the elastic run's weights differ from the uninterrupted run's")
PY
echo "elastic passed"
