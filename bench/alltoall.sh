#!/usr/bin/env bash
# The simulator's all-to-all against NCCL's published figures on DGX H100
# nodes. Per row: a bf16 tensor [n, n, M] split over n GPUs along its
# first dim and read split along its second (every GPU sends 1/n of its
# piece to each other: nccl-tests' alltoall_perf), simulated with
# `--ppc-simulate=trace=`; the exchange's time from the trace, and
# nccl-tests' bus bandwidth of it: per-rank bytes / time x (n - 1) / n.
# Published (the NCCL maintainers on NVIDIA/nccl-tests):
#   - inside a node: about 370 GB/s bus bandwidth in collectives other
#     than all-reduce (NVLink's 450 GB/s less NCCL's ~20% protocol
#     overhead; issue 212, 2024-05-06);
#   - across N nodes: N / (N - 1) x the network bandwidth per GPU (a share
#     (N - 1) / N of the data leaves the node; issue 130, 2023-02-03), at
#     46-48 GB/s per 400 Gb/s NDR NIC (issue 290, 2025-03-03).
# Table in docs/simulator.md ("All-to-all against NCCL's published
# figures").
# Usage: bench/alltoall.sh [BUILD_DIR]   (after scripts/build.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${PPC_BUILD_DIR:-$root/build}}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

printf "%-12s %4s %14s %12s %16s %20s %8s\n" machine GPUs "per-rank MiB" \
  "time us" "busbw GB/s" "published GB/s" ratio
for row in "dgx-h100 8 1 370 370" "dgx-h100x2 16 2 92 96" \
           "dgx-h100x4 32 4 61.3 64"; do
  read -r machine n nodes lo hi <<<"$row"
  for mib in 1 16 128 512; do
    # Per-rank bytes n * M * 2 = mib MiB.
    m=$((mib * 1048576 / (2 * n)))
    cat > "$tmp/a2a.mlir" <<EOF
func.func @main(%x: tensor<${n}x${n}x${m}xbf16>) -> tensor<${n}x${n}x${m}xbf16> {
  %a = ppc.relu %x {ppc.strategy = #ppc.strategy<degrees = [${n}, 1, 1]>} : tensor<${n}x${n}x${m}xbf16>
  %b = ppc.relu %a {ppc.strategy = #ppc.strategy<degrees = [1, ${n}, 1]>} : tensor<${n}x${n}x${m}xbf16>
  return %b : tensor<${n}x${n}x${m}xbf16>
}
EOF
    "$build/bin/ppc-opt" "$tmp/a2a.mlir" --ppc-attach-machine=machine="$machine" \
      "--ppc-simulate=trace=$tmp/trace.json" -o /dev/null > /dev/null
    python3 - "$tmp/trace.json" "$machine" "$n" "$mib" "$lo" "$hi" <<'PY'
import json, sys
path, machine, n, mib, lo, hi = sys.argv[1:]
n, mib, lo, hi = int(n), int(mib), float(lo), float(hi)
trace = json.load(open(path))
events = trace["traceEvents"] if isinstance(trace, dict) else trace
moves = [e for e in events
         if e.get("ph") == "X" and e.get("name") == "ppc.relu#0 -> ppc.relu#1"]
start = min(e["ts"] for e in moves)
end = max(e["ts"] + e["dur"] for e in moves)
us = end - start
busbw = mib * 1048576 / (us * 1e-6) * (n - 1) / n / 1e9
published = "%g" % lo if lo == hi else "%g-%g" % (lo, hi)
ratio = busbw / ((lo + hi) / 2)
print("%-12s %4d %14d %12.1f %16.1f %20s %8.2f" %
      (machine, n, mib, us, busbw, published, ratio))
PY
  done
done
