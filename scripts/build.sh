#!/usr/bin/env bash
# Configures (once) and builds ppc with CMake + Ninja into ${PPC_BUILD_DIR:-build}.
# When the ppc Python package was built (build/python/ppc), makes it
# importable: a ppc-build.pth in the user site-packages of the interpreter it
# was built for puts build/python on that interpreter's path (as
# `pip install --user -e` would); nothing else outside the build changes.
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

if [[ -f "$build/python/ppc/__init__.py" ]]; then
  package_dir=$(cd "$build/python" && pwd)
  python=$(sed -n 's/^Python3_EXECUTABLE:[A-Z]*=//p' "$build/CMakeCache.txt")
  python=${python:-/usr/bin/python3}
  site=$("$python" -c \
    'import site; print(site.getusersitepackages() if site.ENABLE_USER_SITE else "")' \
    2>/dev/null || true)
  if [[ -z "$site" ]]; then
    echo "build: no user site-packages for $python; use" \
      "PYTHONPATH=$package_dir to import ppc" >&2
  elif [[ "$(cat "$site/ppc-build.pth" 2>/dev/null)" != "$package_dir" ]]; then
    mkdir -p "$site"
    echo "$package_dir" >"$site/ppc-build.pth"
    echo "build: $python imports ppc from $package_dir" \
      "($site/ppc-build.pth)" >&2
  fi
fi
