#!/usr/bin/env bash
# Installs the build tree to a scratch prefix and imports the ppc package
# from there (not from the build tree): `cmake --install` gives a working
# package under the prefix.
# Usage: install-check.sh BUILD_DIR PYTHON PACKAGE_DIR (relative to prefix)
set -euo pipefail
build=$1 python=$2 package_dir=$3
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
cd "$scratch"
PYTHONPATH="$scratch/prefix/$package_dir" PYTHONNOUSERSITE=1 "$python" -c '
import os, sys, ppc
prefix = sys.argv[1]
assert ppc.__file__.startswith(prefix), ppc.__file__
assert "dgx-h100" in ppc.machines(), ppc.machines()
print("installed ppc", ppc.__version__, "at", os.path.dirname(ppc.__file__))
' "$scratch/prefix/"
