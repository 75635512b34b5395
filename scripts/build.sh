#!/usr/bin/env bash
# Configures (once) and builds ppc with CMake + Ninja into ${PPC_BUILD_DIR:-build}.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${PPC_BUILD_DIR:-$root/build}
if [[ ! -f "$build/build.ninja" ]]; then
  cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit \
    -DCMAKE_INSTALL_PREFIX="$build/install" >/dev/null
fi
cmake --build "$build" "$@"
