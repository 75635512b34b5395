#!/usr/bin/env bash
# Regenerates the dialect and pass references from ODS into docs/dialects/.
# The test suite (ctest -R docs-up-to-date) fails when they are stale.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PPC_BUILD_DIR:-$root/build}
cmake --build "$build" --target mlir-doc >/dev/null
mkdir -p "$root/docs/dialects"
cp "$build/docs/Dialects/GraphDialect.md" "$build/docs/Dialects/TopologyDialect.md" \
   "$build/docs/Dialects/PlanDialect.md" "$build/docs/PPCPasses.md" \
   "$build/docs/PPCConversionPasses.md" "$build/docs/PPCTargetPasses.md" \
   "$build/docs/PPCInteropPasses.md" \
   "$root/docs/dialects/"
