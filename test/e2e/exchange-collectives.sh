#!/bin/sh
# The exchanges the communication plan names all-gather and all-to-all run
# as plan collectives (their gradients as reduce-scatters and all-to-alls),
# and the step still matches the single-device step: the model of
# test/Conversion/exchange-kinds.mlir (4 ranks), and, on NP ranks, one whose op reads the same
# all-to-all'ed value twice (the second operand copies from the first's
# buffer, its gradient goes back through it). Plain, and with --overlap
# starting the collectives early. The plan moves the bytes the simulator
# priced.
# usage: exchange-collectives.sh PPC_OPT MODEL_DIR WORKDIR NP RUN...
set -e
ppc_opt=$1 models=$2 work=$3 np=$4
shift 4
rm -rf "$work"
mkdir -p "$work"
cat > "$work/shared-operand.mlir" <<'MLIR'
func.func @main(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %w1 = ppc.weight "w1" : tensor<8x8xf32>
  %a = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [NP, 1]>} : tensor<8x8xf32>
  %b = ppc.linear %a, %w1 {ppc.strategy = #ppc.strategy<degrees = [1, NP, 1]>} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %m = ppc.mul %b, %b {ppc.strategy = #ppc.strategy<degrees = [NP, 1]>} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %m : tensor<8x8xf32>
}
MLIR
sed -i "s/NP/$np/g" "$work/shared-operand.mlir"
models_to_run="$work/shared-operand.mlir"
[ "$np" = 4 ] && models_to_run="$models/exchange-kinds.mlir $models_to_run"
for model in $models_to_run; do
  name=$(basename "$model" .mlir)
  "$ppc_opt" "$model" --ppc-add-loss --ppc-attach-machine=machine=cpux$np \
    "--ppc-lower-to-plan=plan=$work/$name.pb optimizer=adam traffic=$work/$name-traffic.json" \
    -o /dev/null
  "$ppc_opt" "$model" --ppc-add-loss --ppc-attach-machine=machine=cpux$np \
    "--ppc-lower-to-plan=plan=$work/$name.txt text=true optimizer=adam" -o /dev/null
  for kind in ALL_GATHER ALL_TO_ALL REDUCE_SCATTER; do
    grep -q "kind: $kind" "$work/$name.txt" ||
      { echo "$name: no $kind collective in the plan"; exit 1; }
  done
  grep -q '"agree": true' "$work/$name-traffic.json" ||
    { echo "$name: the plan's bytes are not the simulator's"; exit 1; }
  for overlap in "" --overlap; do
    "$@" "$work/$name.pb" --steps 1 --verify $overlap > "$work/$name$overlap.log"
    grep -q "verify passed" "$work/$name$overlap.log" ||
      { cat "$work/$name$overlap.log"; echo "$name $overlap: verify failed"; exit 1; }
  done
done
echo "exchange-collectives passed"
