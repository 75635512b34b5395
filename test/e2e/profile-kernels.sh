#!/bin/sh
# FlexFlow's loop with ppc-profile: the search lists the kernels its
# configuration space asks for, ppc-profile measures them (and the plan's
# own) on the cpu backend, and a search with that profile prices every
# kernel from it (no "not in the profile" note), where the roofline priced
# all of them before. Then ppc-profile's errors.
# usage: profile-kernels.sh PPC_OPT PPC_PROFILE EXAMPLES WORKDIR
set -e
opt=$1 prof=$2 examples=$3 work=$4
rm -rf "$work"
mkdir -p "$work"
cd "$work"
search="machine=cpux2 search=mcmc budget=100 seed=3 threads=1 optimizer=adam"
$opt "$examples/mlp.onnx" --batch-size=8 \
  --ppc-auto-parallel="$search plan=mlp.pb profile-requests=requests.json" \
  -o /dev/null 2>before.err
grep -q 'wrote [0-9]* kernels to measure to requests.json' before.err
$prof mlp.pb --requests requests.json -o profile.json --details details.json \
  --runs 2 --min-seconds 0.001 2>profile.err
grep -q 'kernel times of cpu-epyc-2core written to profile.json' profile.err
# Every request (forward and backward) is in the profile, keyed as the
# simulator reads it, and the details name each kernel's op.
python3 - <<'PY'
import json
requests = json.load(open("requests.json"))["kernels"]
profile = json.load(open("profile.json"))
assert profile["version"] == 1 and profile["device"] == "cpu-epyc-2core"
keys = {(e["op"], e["dtype"], e["phase"], json.dumps(e["operand_shapes"]))
        for e in profile["entries"]}
assert all(e["seconds"] > 0 and e["runs"] >= 2 for e in profile["entries"])
for r in requests:
    for phase in ("forward", "backward"):
        key = (r["op"], r["dtype"], phase, json.dumps(r["operand_shapes"]))
        assert key in keys, f"request {key} not measured"
details = json.load(open("details.json"))["kernels"]
assert {d["name"] for d in details} >= {"fc1", "fc2", "logits"}, details
assert all(d["forward_seconds"] > 0 and d["backward_seconds"] > 0
           for d in details)
print(f"{len(requests)} requests, {len(profile['entries'])} profile entries")
PY
$opt "$examples/mlp.onnx" --batch-size=8 \
  --ppc-auto-parallel="$search profile=profile.json" -o /dev/null 2>after.err
if grep -q 'not in the profile' after.err; then
  cat after.err
  echo "the search priced kernels without the profile" >&2
  exit 1
fi
# Adding to the file: runs accumulate.
$prof mlp.pb -o profile.json --runs 2 --min-seconds 0.001 --quiet
python3 -c '
import json
entries = json.load(open("profile.json"))["entries"]
assert any(e["runs"] >= 4 for e in entries), "runs did not accumulate"'
# Errors.
expect_error() { # PATTERN COMMAND...
  pattern=$1
  shift
  if "$@" >out.txt 2>&1; then
    echo "succeeded but should fail: $*" >&2
    exit 1
  fi
  grep -q -e "$pattern" out.txt || { cat out.txt; echo "expected: $pattern" >&2; exit 1; }
}
expect_error 'another\|measures device' $prof mlp.pb -o profile.json --device-name other
expect_error 'needs a PLAN and -o' $prof mlp.pb
expect_error "unknown backend 'tpu'" $prof mlp.pb -o x.json --backend tpu
expect_error 'cannot read the requests file' $prof mlp.pb -o x.json --requests none.json
echo '{"version": 1, "kernels": [{"op_index": 0, "op": "ppc.relu", "operands": [], "results": []}]}' >bad.json
expect_error 'is ppc.linear, not ppc.relu: was the plan made from the same model' \
  $prof mlp.pb -o x.json --requests bad.json
expect_error '--runs: expected a positive count' $prof mlp.pb -o x.json --runs 0
expect_error '--allow-tf32 is for --backend cuda' $prof mlp.pb -o x.json --allow-tf32
echo "ppc-profile passed"
