#!/bin/sh
# Every output of ppc-run and ppc-profile is checked before the first step:
# a directory, a missing folder, an immutable file or a FIFO without a
# reader as a file, and any output that is one of the run's inputs (the
# plan, its weights, the model --export-onnx reads) or inside a checkpoint
# directory, each refused with the option and the path, quickly (not after
# training) and without an exception escaping; nothing is left behind.
# --threads above the cores is lowered with a note.
# usage: output-paths.sh PPC_OPT PPC_PROFILE EXAMPLES WORKDIR RUN...
#        (RUN... starts ppc-run on 2 ranks)
set -e
ppc_opt=$1 ppc_profile=$2 examples=$3 work=$4
shift 4
rm -rf "$work"
mkdir -p "$work"
cd "$work"
"$ppc_opt" "$examples/mlp.onnx" --batch-size=16 \
  "--ppc-auto-parallel=machine=cpux2 search=data-parallel plan=m.pb" \
  -o /dev/null 2>/dev/null
cp "$examples/mlp.onnx" m.onnx
cp m.pb.weights weights.before
mkdir dir.json out.onnx
mkfifo fifo.json

# refused ARGS... REGEX: ppc-run fails before its first step (300 steps
# would take far longer than the 20 s allowed), naming the problem.
refused() {
  regex=$1
  shift
  start=$(date +%s)
  if "$@" > out.txt 2>&1; then
    cat out.txt
    echo "output-paths.sh: '$*' succeeded"
    exit 1
  fi
  if ! grep -Eq -- "$regex" out.txt; then
    cat out.txt
    echo "output-paths.sh: '$*' does not say '$regex'"
    exit 1
  fi
  if grep -q "terminate called\|internal error" out.txt; then
    cat out.txt
    echo "output-paths.sh: '$*' let an exception escape"
    exit 1
  fi
  if [ $(( $(date +%s) - start )) -gt 20 ]; then
    echo "output-paths.sh: '$*' failed only after training"
    exit 1
  fi
}
run() { "$@" m.pb --steps 300 --quiet; }
refused "--profile: 'dir.json' is a directory, not a file" \
  run "$@" --profile dir.json
refused "--trace: cannot write 'fifo.json'" run "$@" --trace fifo.json
refused "--log: cannot write 'no/such/x.log': its folder 'no/such'" \
  run "$@" --log no/such/x.log
refused "--export-onnx: 'out.onnx' is a directory, not a file" \
  run "$@" --export-onnx m.onnx=out.onnx
refused "--export-onnx target 'm.onnx' is the model --export-onnx reads" \
  run "$@" --export-onnx m.onnx=m.onnx
refused "--export-onnx target 'm.pb.weights' is the plan's weights file" \
  run "$@" --export-onnx m.onnx=m.pb.weights
refused "--export-onnx target './m.pb' is the plan" \
  run "$@" --export-onnx m.onnx=./m.pb
refused "--trace 'm.pb' is the plan" run "$@" --trace m.pb
refused "--export-onnx target 'ck/x.onnx' is inside the checkpoint directory 'ck'" \
  run "$@" --checkpoint ck --export-onnx m.onnx=ck/x.onnx
refused "--verify-backend names the backend of --verify's single-device step: add --verify" \
  run "$@" --verify-backend cpu
refused "--threads needs a positive integer, not '0'" run "$@" --threads 0
# An immutable file, where the filesystem has them (chattr as root).
touch immutable.onnx
if chattr +i immutable.onnx 2>/dev/null; then
  refused "--export-onnx: cannot write 'immutable.onnx': Operation not permitted" \
    run "$@" --export-onnx m.onnx=immutable.onnx
  chattr -i immutable.onnx
fi
cmp m.pb.weights weights.before
cmp m.onnx "$examples/mlp.onnx"
if ls *.tmp out.onnx/* dir.json/* 2>/dev/null | grep -q .; then
  echo "output-paths.sh: a refused run left files behind"
  exit 1
fi

refused "ppc-profile: -o: 'dir.json' is a directory, not a file" \
  "$ppc_profile" m.pb -o dir.json
refused "ppc-profile: -o 'm.pb' is the plan" "$ppc_profile" m.pb -o m.pb

# --threads above the cores: lowered, with a note, and the run trains.
"$@" m.pb --steps 1 --threads 100000 > threads.txt 2>&1
grep -Eq "ppc-run: --threads 100000: this host has [0-9]+ cores?; using [0-9]+" \
  threads.txt
"$ppc_profile" m.pb -o p.json --threads 65536 --runs 1 --quiet \
  > threads.txt 2>&1
grep -Eq "ppc-profile: --threads 65536: this host has [0-9]+ cores?; using" \
  threads.txt
grep -q '"version": 1' p.json
echo "output paths passed"
